//! Real Git servers on loopback, started by the tests: `git daemon` (git://), OpenSSH's
//! `sshd` (ssh://, key-only, its own host key) and lighttpd serving `git http-backend`
//! (smart HTTP with basic auth). Each is stopped when dropped.
//!
//! A missing server binary skips the test with a line saying which and how to install it,
//! unless `CAPSTAN_REQUIRE_JUDGES=1`, where it fails (CI installs them all).

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary at `path`, or `None` (after saying so) when it is missing and judges are not
/// required.
pub fn require(path: &str, package: &str) -> Option<PathBuf> {
    let found = Path::new(path).exists();
    if found {
        return Some(PathBuf::from(path));
    }
    let test = capstan_testkit::judge::test_name();
    let message = format!("missing {path} (apt-get install -y {package})");
    if std::env::var("CAPSTAN_REQUIRE_JUDGES").as_deref() == Ok("1") {
        panic!("{test}: {message}; CAPSTAN_REQUIRE_JUDGES=1, so this fails instead of skipping");
    }
    // Past the harness's capture, so a passing run still shows what was skipped.
    let _ = writeln!(std::io::stderr(), "skipped {test}: {message}");
    None
}

/// A free port on 127.0.0.1 (bound then released: a server binds it next).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .expect("local address")
        .port()
}

/// Waits until something accepts connections on `port`.
fn wait_listening(port: u16, child: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before listening: {status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{what} does not listen on {port}");
}

/// A server process, killed on drop.
pub struct Server {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its scratch folder (config, keys, logs).
    pub dir: tempfile::TempDir,
}

impl Server {
    /// Stops the server now (the remote goes down).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where git keeps its helper programs (`git --exec-path`).
fn git_exec_path() -> PathBuf {
    let output = Command::new("git")
        .arg("--exec-path")
        .output()
        .expect("git runs");
    PathBuf::from(String::from_utf8(output.stdout).expect("utf-8").trim())
}

/// `git daemon` exporting every repository under `root`.
pub fn git_daemon(root: &Path) -> Option<Server> {
    // The `git-daemon` binary itself: `git daemon` would run it as a child that outlives a
    // kill of the wrapper, and the remote would never go down.
    let daemon = git_exec_path().join("git-daemon");
    let daemon = require(daemon.to_str()?, "git")?;
    let port = free_port();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(daemon)
        .args([
            "--reuseaddr",
            "--export-all",
            "--listen=127.0.0.1",
            &format!("--port={port}"),
            &format!("--base-path={}", root.display()),
            &root.display().to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("git daemon starts");
    wait_listening(port, &mut child, "git daemon");
    Some(Server {
        child: Some(child),
        port,
        dir,
    })
}

/// An SSH server and the client's credentials for it.
pub struct Ssh {
    /// The server.
    pub server: Server,
    /// The client's private key.
    pub client_key: PathBuf,
    /// known_hosts naming the server's host key.
    pub known_hosts: PathBuf,
    /// The user to log in as.
    pub user: String,
}

fn ssh_keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdout(Stdio::null())
        .status()
        .expect("ssh-keygen runs");
    assert!(status.success(), "ssh-keygen failed");
}

/// OpenSSH's sshd on a random loopback port: its own host key, key-only auth for a generated
/// client key, config in a temporary folder, in the foreground (`-D`).
pub fn sshd() -> Option<Ssh> {
    let sshd = require("/usr/sbin/sshd", "openssh-server")?;
    require("/usr/bin/ssh-keygen", "openssh-client")?;
    let dir = tempfile::tempdir().expect("temp dir");
    let host_key = dir.path().join("host_ed25519");
    let client_key = dir.path().join("client_ed25519");
    ssh_keygen(&host_key);
    ssh_keygen(&client_key);
    let authorized = dir.path().join("authorized_keys");
    std::fs::copy(client_key.with_extension("pub"), &authorized).expect("authorized_keys");
    let user = String::from_utf8(
        Command::new("id")
            .arg("-un")
            .output()
            .expect("id runs")
            .stdout,
    )
    .expect("user name")
    .trim()
    .to_owned();
    // sshd checks that its privilege-separation folder exists when started as root.
    let _ = std::fs::create_dir_all("/run/sshd");
    let port = free_port();
    let config = dir.path().join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nPidFile {pid}\nAuthorizedKeysFile {authorized}\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
             PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\nAllowUsers {user}\n\
             SetEnv PATH=/usr/local/bin:/usr/bin:/bin\n",
            host = host_key.display(),
            pid = dir.path().join("sshd.pid").display(),
            authorized = authorized.display(),
        ),
    )
    .expect("sshd_config");
    let log = std::fs::File::create(dir.path().join("sshd.log")).expect("log file");
    let mut child = Command::new(sshd)
        .args(["-D", "-e", "-f"])
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("sshd starts");
    wait_listening(port, &mut child, "sshd");
    let host_public = std::fs::read_to_string(host_key.with_extension("pub")).expect("host key");
    let mut fields = host_public.split_whitespace();
    let (kind, key) = (
        fields.next().expect("key type"),
        fields.next().expect("key"),
    );
    let known_hosts = dir.path().join("known_hosts");
    std::fs::write(&known_hosts, format!("[127.0.0.1]:{port} {kind} {key}\n"))
        .expect("known_hosts");
    Some(Ssh {
        server: Server {
            child: Some(child),
            port,
            dir,
        },
        client_key,
        known_hosts,
        user,
    })
}

/// A known_hosts file for `port` holding a freshly generated key: not the server's.
pub fn wrong_known_hosts(dir: &Path, port: u16) -> PathBuf {
    let other = dir.join("other_host_key");
    ssh_keygen(&other);
    let public = std::fs::read_to_string(other.with_extension("pub")).expect("key");
    let mut fields = public.split_whitespace();
    let (kind, key) = (fields.next().expect("type"), fields.next().expect("key"));
    let path = dir.join("wrong_known_hosts");
    std::fs::write(&path, format!("[127.0.0.1]:{port} {kind} {key}\n")).expect("write");
    path
}

/// lighttpd serving `git http-backend` for the repositories under `root` at `/git/`, behind
/// HTTP basic authentication for `user`:`password`.
pub fn lighttpd(root: &Path, user: &str, password: &str) -> Option<Server> {
    let dir = tempfile::tempdir().expect("temp dir");
    let users = dir.path().join("users");
    std::fs::write(&users, format!("{user}:{password}\n")).expect("user file");
    let auth = format!(
        r#"auth.backend = "plain"
auth.backend.plain.userfile = "{users}"
auth.require = ("/git" => ("method" => "basic", "realm" => "git", "require" => "valid-user"))
"#,
        users = users.display()
    );
    lighttpd_with(root, dir, "", &auth)
}

/// lighttpd serving `git http-backend` at `/git/` only to requests carrying
/// `Authorization: Bearer <token>` (403 otherwise).
pub fn lighttpd_bearer(root: &Path, token: &str) -> Option<Server> {
    let dir = tempfile::tempdir().expect("temp dir");
    let check = format!(
        "  $REQUEST_HEADER[\"Authorization\"] != \"Bearer {token}\" {{\n    url.access-deny = (\"\")\n  }}\n"
    );
    lighttpd_with(root, dir, &check, "")
}

fn lighttpd_with(
    root: &Path,
    dir: tempfile::TempDir,
    inside_git: &str,
    auth: &str,
) -> Option<Server> {
    let lighttpd = require("/usr/sbin/lighttpd", "lighttpd")?;
    let backend = git_exec_path().join("git-http-backend");
    assert!(backend.exists(), "{} exists", backend.display());
    let port = free_port();
    let config = dir.path().join("lighttpd.conf");
    std::fs::write(
        &config,
        format!(
            r#"server.modules = ("mod_access", "mod_alias", "mod_auth", "mod_authn_file", "mod_cgi", "mod_setenv")
server.document-root = "{docroot}"
server.bind = "127.0.0.1"
server.port = {port}
server.errorlog = "{log}"
server.pid-file = "{pid}"
alias.url = ("/git" => "{backend}")
$HTTP["url"] =~ "^/git" {{
  cgi.assign = ("" => "")
  setenv.add-environment = ("GIT_PROJECT_ROOT" => "{root}", "GIT_HTTP_EXPORT_ALL" => "")
{inside_git}}}
{auth}"#,
            docroot = dir.path().display(),
            log = dir.path().join("error.log").display(),
            pid = dir.path().join("lighttpd.pid").display(),
            backend = backend.display(),
            root = root.display(),
        ),
    )
    .expect("lighttpd.conf");
    let mut child = Command::new(lighttpd)
        .args(["-D", "-f"])
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("lighttpd starts");
    wait_listening(port, &mut child, "lighttpd");
    Some(Server {
        child: Some(child),
        port,
        dir,
    })
}
