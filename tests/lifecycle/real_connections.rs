//! `capstan run` without `--lab`, as in production: the connections come from capstan.yaml
//! (URL, token id, pinned certificate fingerprint, the token's secret from the environment,
//! the management kubeconfig from a file under `--secrets-dir`), as far as the daemon's
//! `--pin`s and secret policy allow. Pointed at a lab, it builds the cluster, serves its
//! status, and stops cleanly on SIGTERM; a commit pointing the Proxmox URL elsewhere is
//! refused, before and after a restart, and nothing is ever sent there.

use std::process::{Command, Stdio};
use std::time::Duration;

use capstan_testkit::{World, cluster_yaml};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_uses_the_connections_of_capstan_yaml_and_stops_on_sigterm() {
    let world = World::new("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n", &[]).await;
    let lab = world.lab.lab_file();
    let fleet = world.real_fleet();
    world.write_fleet(&fleet);
    world.write_cluster(
        "prod",
        &cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s"),
    );

    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        probe.local_addr().expect("addr").port()
    };
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["run", "--repo"])
        .arg(world.repo.path())
        // The lab serves each cluster's endpoint on a loopback port of its own; capstan.yaml
        // cannot say so (a repository never chooses where capstan connects), the operator can.
        .arg("--lab-addresses")
        .arg(world.state.path())
        .args([
            "--http",
            &format!("127.0.0.1:{port}"),
            "--busy-interval",
            "100ms",
        ])
        .args(world.real_fleet_args())
        .env("CAPSTAN_PROXMOX_HOMELAB_TOKEN", &lab.proxmox.token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("capstan run starts");

    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = format!("http://127.0.0.1:{port}/status");
    let started = tokio::time::Instant::now();
    let ready = loop {
        let answer = async {
            reqwest::get(&url)
                .await
                .ok()?
                .json::<serde_json::Value>()
                .await
                .ok()
        }
        .await;
        if let Some(status) = answer
            && status["clusters"]["prod"]["phase"] == "Ready"
        {
            break status;
        }
        if started.elapsed() > capstan_testkit::PATIENCE {
            let _ = daemon.kill();
            let output = daemon.wait_with_output().expect("output");
            panic!(
                "prod never became Ready:\n{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        ready["clusters"]["prod"]["nodes"]
            .as_array()
            .expect("nodes")
            .len(),
        3
    );
    assert_eq!(world.vms_of("prod").len(), 3);

    let pid = daemon.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    let output = tokio::task::spawn_blocking(move || daemon.wait_with_output().expect("exits"))
        .await
        .expect("joined");
    assert!(output.status.success(), "exits 0 on SIGTERM: {output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("prod         Ready"),
        "progress lines on stdout:\n{stdout}"
    );
    let logs = String::from_utf8_lossy(&output.stderr);
    assert!(
        !logs.contains(&lab.proxmox.token),
        "the token never reaches the logs"
    );
}

/// A listener standing for a server a commit would send secrets to: it records whether
/// anything ever connected.
pub struct Hostile(std::net::TcpListener);

impl Hostile {
    pub fn bind() -> Hostile {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("non-blocking");
        Hostile(listener)
    }

    pub fn port(&self) -> u16 {
        self.0.local_addr().expect("addr").port()
    }

    /// Whether a connection arrived (and is waiting to be accepted).
    pub fn was_contacted(&self) -> bool {
        match self.0.accept() {
            Ok(_) => true,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(err) => panic!("accept: {err}"),
        }
    }
}

/// `capstan run` on the world's folder, not `--lab`, with `args` and the Proxmox token.
fn spawn_run(world: &World, port: u16, args: &[String], token: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["run", "--repo"])
        .arg(world.repo.path())
        .args([
            "--http",
            &format!("127.0.0.1:{port}"),
            "--busy-interval",
            "100ms",
        ])
        .args(args)
        .env("CAPSTAN_PROXMOX_HOMELAB_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("capstan run starts")
}

/// Polls the daemon's `/status` until `done` holds, failing (with its logs) after
/// [`capstan_testkit::PATIENCE`].
pub async fn status_until(
    daemon: &mut std::process::Child,
    port: u16,
    what: &str,
    mut done: impl FnMut(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = format!("http://127.0.0.1:{port}/status");
    let started = tokio::time::Instant::now();
    loop {
        let answer = async { reqwest::get(&url).await.ok()?.json().await.ok() }.await;
        if let Some(status) = answer
            && done(&status)
        {
            return status;
        }
        if started.elapsed() > capstan_testkit::PATIENCE {
            let _ = daemon.kill();
            let mut logs = String::new();
            if let Some(stderr) = daemon.stderr.as_mut() {
                use std::io::Read as _;
                let _ = stderr.read_to_string(&mut logs);
            }
            panic!("{what} never happened:\n{logs}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn free_port() -> u16 {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
    probe.local_addr().expect("addr").port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_pointing_the_proxmox_url_elsewhere_is_refused_and_no_restart_sends_the_token_there()
 {
    let world = World::new("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n", &[]).await;
    let lab = world.lab.lab_file();
    world.write_fleet(&world.real_fleet());
    let args = world.real_fleet_args();
    let hostile = Hostile::bind();
    let elsewhere = format!("https://127.0.0.1:{}", hostile.port());
    let _ = rustls::crypto::ring::default_provider().install_default();

    let port = free_port();
    let mut daemon = spawn_run(&world, port, &args, &lab.proxmox.token);
    status_until(&mut daemon, port, "a first pass", |s| {
        s["revision"].is_string() && s["repositoryErrors"] == serde_json::json!([])
    })
    .await;

    // The commit: same token, same pinned fingerprint, another server.
    world.write_fleet(&world.real_fleet().replace(&lab.proxmox.url, &elsewhere));
    let status = status_until(&mut daemon, port, "the change refused", |s| {
        s["repositoryErrors"]
            .as_array()
            .is_some_and(|errors| !errors.is_empty())
    })
    .await;
    let errors = status["repositoryErrors"].to_string();
    assert!(
        errors.contains("capstan.yaml:5:5: error: proxmox.homelab.url:")
            && errors.contains(&format!("--pin proxmox.homelab.url={elsewhere}")),
        "the status names the file, line, connection, field and the flag that allows it: {errors}"
    );
    let _ = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status();
    let _ = tokio::task::spawn_blocking(move || daemon.wait_with_output())
        .await
        .expect("joined");

    // A restart reads the same commit: still refused, and nothing is sent anywhere.
    let mut restarted = spawn_run(&world, free_port(), &args, &lab.proxmox.token);
    let started = tokio::time::Instant::now();
    let exit = loop {
        if let Some(exit) = restarted.try_wait().expect("wait") {
            break exit;
        }
        if started.elapsed() > capstan_testkit::PATIENCE {
            let _ = restarted.kill();
            panic!("the restarted daemon ran on the commit that moved the Proxmox URL");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let output = restarted.wait_with_output().expect("output");
    let logs = String::from_utf8_lossy(&output.stderr);
    assert_eq!(exit.code(), Some(1), "{logs}");
    assert!(
        logs.contains("the daemon's limits refuse the repository")
            && logs.contains("capstan.yaml:5:5: error: proxmox.homelab.url:"),
        "{logs}"
    );
    assert!(!logs.contains(&lab.proxmox.token));
    assert!(
        !hostile.was_contacted(),
        "nothing ever connected to the server the commit named"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_sources_outside_the_operators_policy_are_refused_before_anything_is_sent() {
    let world = World::recording("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n", &[]).await;
    let lab = world.lab.lab_file();
    let args = world.real_fleet_args();
    let secrets = world.state.path().join("secrets");
    let outside = world.state.path().join("outside-token");
    std::fs::write(&outside, &lab.proxmox.token).expect("a token outside --secrets-dir");
    let climbing = format!(
        "{}/proxmox/homelab/../../../outside-token",
        secrets.display()
    );
    let cases = [
        (
            "{env: TEST_PROXMOX_TOKEN}".to_owned(),
            "name it CAPSTAN_PROXMOX_HOMELAB_TOKEN",
        ),
        (
            format!("{{file: {}}}", outside.display()),
            "is outside the daemon's --secrets-dir",
        ),
        (format!("{{file: {climbing}}}"), "holds `..`"),
    ];
    for (token_from, why) in cases {
        world.write_fleet(
            &world
                .real_fleet()
                .replace("{env: CAPSTAN_PROXMOX_HOMELAB_TOKEN}", &token_from),
        );
        let output = Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args(["observe", "--repo"])
            .arg(world.repo.path())
            .args(&args)
            .env("TEST_PROXMOX_TOKEN", &lab.proxmox.token)
            .output()
            .expect("capstan observe runs");
        let logs = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{token_from}: {logs}");
        assert!(
            logs.contains("capstan.yaml:7:5: error: proxmox.homelab.tokenFrom:")
                && logs.contains(why),
            "{token_from}: {logs}"
        );
    }
    assert_eq!(
        world.lab.proxmox().exchanges().len(),
        0,
        "no request reached Proxmox"
    );
}
