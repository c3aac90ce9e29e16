//! A real MariaDB for the K3s datastore tests: Debian's `mariadb-install-db` into a temporary
//! folder and `mariadbd` on a loopback port with its own socket, started and stopped by the
//! test. Its `root` user reached over TCP has a password, as a homelab's MariaDB does; the
//! socket (as the OS user root) is how the harness itself sets that up and looks inside.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `mariadbd` as Debian installs it (not on a non-root PATH).
const MARIADBD: &str = "/usr/sbin/mariadbd";
/// The variable the admin password of the datastore server `mariadb` comes from: the one the
/// daemon's default secret policy allows for it.
pub const PASSWORD_VARIABLE: &str = "CAPSTAN_DATASTORE_MARIADB_PASSWORD";
/// How long a fresh server may take to accept connections on a loaded 2-core machine.
const START_LIMIT: Duration = Duration::from_secs(60);

/// A running (or stopped) MariaDB server owned by one test.
pub struct MariaDb {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
    /// The password of `root` over TCP.
    pub root_password: String,
}

impl MariaDb {
    /// Initialises a data folder, starts the server and gives `root` over TCP a password.
    pub fn start() -> MariaDb {
        let dir = tempfile::tempdir().expect("temp dir for MariaDB");
        // Each server its own tmpdir: bootstraps running at once in the shared /tmp collide
        // on their temporary tables' names ("Error on delete of '/tmp/#sql-temptable-...'").
        std::fs::create_dir(dir.path().join("tmp")).expect("MariaDB's tmpdir");
        let install = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.path().join("data").display()))
            .arg(format!("--tmpdir={}", dir.path().join("tmp").display()))
            .args(["--user=root", "--skip-test-db"])
            .args(["--auth-root-authentication-method=socket"])
            .output()
            .expect("run mariadb-install-db");
        assert!(
            install.status.success(),
            "mariadb-install-db failed:\n{}{}",
            String::from_utf8_lossy(&install.stdout),
            String::from_utf8_lossy(&install.stderr)
        );
        let mut server = MariaDb {
            port: free_port(),
            dir,
            child: None,
            root_password: format!("root-{:x}", std::process::id()),
        };
        server.resume();
        server.sql(&format!(
            "CREATE OR REPLACE USER 'root'@'127.0.0.1' IDENTIFIED BY '{password}'; \
             GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;",
            password = server.root_password
        ));
        server
    }

    /// Where the server listens.
    pub fn address(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The `datastores:` section of `capstan.yaml` naming this server `mariadb`, its admin
    /// password read from the environment variable [`PASSWORD_VARIABLE`] (the only one the
    /// daemon's default policy lets that server's password come from).
    pub fn datastores_yaml(&self) -> String {
        format!(
            "datastores:\n  mariadb:\n    url: {}\n    adminUser: root\n    adminPasswordFrom: {{env: {PASSWORD_VARIABLE}}}\n",
            self.url()
        )
    }

    /// The server as `capstan.yaml` names it: `mysql://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("mysql://127.0.0.1:{}", self.port)
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("mariadb.sock")
    }

    /// Starts the server again on the same data and port (after [`MariaDb::stop`]).
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "MariaDB is already running");
        let path = self.dir.path();
        let child = Command::new(MARIADBD)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", path.join("data").display()))
            .arg(format!("--socket={}", self.socket().display()))
            .arg(format!("--pid-file={}", path.join("mariadb.pid").display()))
            .arg(format!("--log-error={}", path.join("error.log").display()))
            .arg(format!("--port={}", self.port))
            .arg(format!("--tmpdir={}", path.join("tmp").display()))
            .args([
                "--bind-address=127.0.0.1",
                "--user=root",
                "--skip-name-resolve",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mariadbd");
        self.child = Some(child);
        self.wait_until_it_answers();
    }

    fn wait_until_it_answers(&mut self) {
        let started = Instant::now();
        loop {
            if TcpStream::connect(self.address()).is_ok() && self.socket().exists() {
                return;
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!("mariadbd exited ({status}):\n{}", self.error_log());
            }
            assert!(
                started.elapsed() < START_LIMIT,
                "mariadbd did not listen within {START_LIMIT:?}:\n{}",
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server (a clean shutdown), keeping its data for [`MariaDb::resume`].
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let shutdown = Command::new("mariadb-admin")
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .args(["--user=root", "shutdown"])
            .output();
        if !shutdown.is_ok_and(|out| out.status.success()) {
            let _ = child.kill();
        }
        let _ = child.wait();
    }

    /// Runs `statements` as root over the socket and returns the tab-separated rows.
    pub fn sql(&self, statements: &str) -> String {
        let out = Command::new("mariadb")
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .args(["--user=root", "--batch", "--skip-column-names", "-e"])
            .arg(statements)
            .output()
            .expect("run the mariadb client");
        assert!(
            out.status.success(),
            "`{statements}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The server's error log, for failure messages.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

/// Seed 004's K3s cluster `edge`: 3 servers and 2 agents on template `debian13-k3s` (the lab's
/// release), its database `k3s_edge` on the fleet's datastore server `mariadb`.
pub fn seed_k3s_cluster() -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: edge}}
spec:
  proxmox: homelab
  kubernetes: {{distribution: k3s, version: {release}, datastore: {{server: mariadb, database: k3s_edge}}}}
  endpoint: {{host: k8s-edge.lab.example, address: 192.168.1.25}}
  network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  controlPlane:
    replicas: 3
    machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, cpu: host, placement: [pve1, pve2, pve3]}}
  workers:
    - pool: agents
      replicas: 2
      machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, cpu: host, placement: [pve1, pve2, pve3]}}
  rollout: {{minWorkers: 1, drainTimeout: 4s, joinTimeout: 2m}}
  delivery:
    flux: {{cluster: management}}
",
        release = capstan_lab::world::DEFAULT_K3S_RELEASE
    )
}
