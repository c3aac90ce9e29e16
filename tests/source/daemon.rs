//! The daemon following a remote, on a lab: a push that scales a cluster is applied and the
//! status names the pushed commit; an idle daemon asks for refs and fetches nothing; an
//! unreachable remote leaves the last revision in force with `SourceAvailable=False`; no
//! planted credential ever shows.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan::daemon::{Daemon, DaemonOptions, StatusBoard, http};
use capstan::plan::Phase;
use capstan::source::webhook::Webhooks;
use capstan::source::{GitCredentials, GitOptions, Secret, Tracker};
use capstan::status::FleetStatus;
use capstan_lab::lab::Lab;
use capstan_lab::world::LabConfig;

use super::fixture::{LabAtTip, Remote, Spawned, TEST_BACKOFF, git, lab_at_tip, open};
use super::servers;
use super::webhooks::sign;

/// How long a wait may take (the lab builds a cluster in seconds).
const PATIENCE: Duration = Duration::from_secs(90);

/// A cluster file the lab can build: one control plane, `workers` workers.
pub fn lab_cluster(name: &str, workers: u32) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  proxmox: homelab
  kubernetes: {{version: 1.36.2}}
  endpoint: {{host: k8s-{name}.lab.example, address: 192.168.1.60}}
  network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  controlPlane:
    replicas: 1
    machine: {{template: debian13-k8s, cores: 2, memoryMiB: 4096, placement: [pve1]}}
  workers:
    - pool: general
      replicas: {workers}
      machine: {{template: debian13-k8s, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}}
  rollout: {{minWorkers: 2, drainTimeout: 4s, joinTimeout: 2m}}
  delivery:
    flux: {{cluster: management}}
"
    )
}

/// A lab and a daemon following a remote, in this process.
pub struct Following {
    /// The daemon's status board.
    pub board: Arc<StatusBoard>,
    /// The HTTP endpoint (with webhooks when asked for).
    pub http: SocketAddr,
    _lab: Lab,
    _state: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Following {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Following {
    /// Starts a lab and a daemon polling `options` every `poll_interval`, with webhooks
    /// checked with `webhook_secret` when given.
    pub async fn start(
        options: GitOptions,
        poll_interval: Duration,
        webhook_secret: Option<Secret>,
    ) -> Following {
        let branch = options.branch.clone();
        let (mut source, metrics) = open(options);
        let LabAtTip {
            state,
            lab,
            connections,
            ..
        } = lab_at_tip(LabConfig::default(), &mut source).await;
        let backoff = TEST_BACKOFF;
        let tracker = Tracker::git(source, Some(poll_interval), backoff);
        let mut options = DaemonOptions::new(std::path::PathBuf::new());
        options.busy_interval = Duration::from_millis(100);
        options.resync = Some(Duration::from_millis(300));
        options.poll_interval = Some(poll_interval);
        options.backoff = backoff;
        let clock: Arc<dyn capstan::clock::Clock> = Arc::new(lab.clock().clone());
        let daemon = Daemon::new(options, Arc::new(connections), clock).with_tracker(tracker);
        let board = daemon.board();
        let hooks = match webhook_secret {
            Some(secret) => Arc::new(Webhooks::new(
                secret,
                branch,
                daemon.poll_trigger(),
                metrics,
            ))
            .router(),
            None => axum::Router::new(),
        };
        let http = http::serve_with(
            "127.0.0.1:0".parse().expect("addr"),
            daemon.board(),
            hooks,
            &http::HttpOptions::default(),
        )
        .await
        .expect("http serves");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            daemon
                .run(async {
                    let _ = stopped.await;
                })
                .await
                .expect("daemon runs");
        });
        Following {
            board,
            http,
            _lab: lab,
            _state: state,
            stop: Some(stop),
        }
    }

    /// Waits until `done` holds of the status, failing after [`PATIENCE`] with the status.
    pub async fn wait_for(&self, what: &str, done: impl Fn(&FleetStatus) -> bool) -> FleetStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let status = self.board.status();
            if done(&status) {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {}",
                serde_json::to_string_pretty(&status).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn source_available(status: &FleetStatus) -> Option<&str> {
    status
        .conditions
        .iter()
        .find(|c| c.kind == "SourceAvailable")
        .map(|c| c.status.as_str())
}

fn ready_with(status: &FleetStatus, cluster: &str, nodes: usize) -> bool {
    status.clusters.get(cluster).is_some_and(|c| {
        c.phase == Phase::Ready
            && c.nodes.len() == nodes
            && c.nodes.iter().all(|n| n.ready == Some(true))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_that_scales_a_cluster_is_applied_and_an_unreachable_remote_changes_nothing() {
    let remote = Remote::new();
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 2));
    let first = remote.commit_and_push("prod: 2 workers");
    let Some(mut server) = servers::git_daemon(&remote.root()) else {
        return;
    };
    let url = format!("git://127.0.0.1:{}/fleet.git", server.port);
    let following = Following::start(
        remote.options(&url, GitCredentials::default()),
        Duration::from_millis(200),
        None,
    )
    .await;
    let status = following
        .wait_for("prod Ready with 3 nodes", |s| ready_with(s, "prod", 3))
        .await;
    assert_eq!(status.revision, Some(format!("main@sha1:{first}")));
    assert_eq!(source_available(&status), Some("True"));

    remote.write("clusters/prod.yaml", &lab_cluster("prod", 3));
    let pushed = remote.commit_and_push("prod: 3 workers");
    let revision = format!("main@sha1:{pushed}");
    let status = following
        .wait_for("the push applied", |s| {
            s.revision.as_deref() == Some(revision.as_str()) && ready_with(s, "prod", 4)
        })
        .await;
    let last_step = status.clusters["prod"]
        .last_step
        .as_ref()
        .expect("a step ran");
    assert_eq!(last_step.revision.as_deref(), Some(revision.as_str()));

    server.stop();
    let status = following
        .wait_for("SourceAvailable=False", |s| {
            source_available(s) == Some("False")
        })
        .await;
    let condition = status
        .conditions
        .iter()
        .find(|c| c.kind == "SourceAvailable")
        .expect("condition");
    assert!(
        condition.message.contains("cannot list the refs"),
        "{}",
        condition.message
    );
    // Passes go on with the last revision: nothing is removed because the remote is down.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let status = following.board.status();
    assert_eq!(status.revision.as_deref(), Some(revision.as_str()));
    assert!(ready_with(&status, "prod", 4), "{status:?}");
    assert!(
        status.repository_errors.is_empty(),
        "{:?}",
        status.repository_errors
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_daemon_asks_for_refs_and_never_fetches() {
    let remote = Remote::new();
    let Some(server) = servers::git_daemon(&remote.root()) else {
        return;
    };
    let url = format!("git://127.0.0.1:{}/fleet.git", server.port);
    let following = Following::start(
        remote.options(&url, GitCredentials::default()),
        Duration::from_millis(20),
        None,
    )
    .await;
    let head = git(&remote.work(), &["rev-parse", "HEAD"]);
    following
        .wait_for("the first revision", |s| s.revision.is_some())
        .await;
    let metrics = following.board.source_metrics();
    let fetches = metrics.fetch_total();
    let parses = metrics.parse_total();
    let start = metrics.ls_remote_total();
    let deadline = Instant::now() + PATIENCE;
    while metrics.ls_remote_total() < start + 60 {
        assert!(Instant::now() < deadline, "60 polls in time");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        metrics.fetch_total(),
        fetches,
        "no fetch while the tip stays"
    );
    assert_eq!(fetches, 1, "one fetch in all: the first");
    assert_eq!(
        metrics.parse_total(),
        parses,
        "the files are not read or validated again while the revision stays"
    );
    assert_eq!(parses, 1, "one parse in all: the first revision's");
    let status = following.board.status();
    assert_eq!(status.revision, Some(format!("main@sha1:{head}")));
    let exposition = http::render_metrics(&following.board);
    assert!(
        exposition.contains(&format!(
            "capstan_source_info{{revision=\"main@sha1:{head}\"}} 1"
        )),
        "{exposition}"
    );
    assert!(
        exposition.contains("capstan_git_fetch_total 1"),
        "{exposition}"
    );
}

/// GET or POST over a plain TCP connection: (status code, body).
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("write");
    stream.write_all(body).expect("write body");
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

#[test]
fn a_planted_token_never_shows_in_logs_status_or_metrics() {
    let remote = Remote::new();
    let token = "planted-token-c0ffee42";
    let Some(mut server) = servers::lighttpd(&remote.root(), "capstan", token) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!(
        "http://capstan:{token}@127.0.0.1:{}/git/fleet.git",
        server.port
    );
    let stdout = std::fs::File::create(dir.path().join("stdout")).expect("stdout");
    let stderr = std::fs::File::create(dir.path().join("stderr")).expect("stderr");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["run", "--repo", &url, "--lab", "--log", "debug"])
        .args([
            "--git-token-from",
            "env:TEST_GIT_TOKEN",
            "--git-username",
            "capstan",
        ])
        .args(["--webhook-secret-from", "env:TEST_GIT_TOKEN"])
        .arg("--state-dir")
        .arg(dir.path().join("lab"))
        .arg("--git-mirror-dir")
        .arg(dir.path().join("mirrors"))
        .args(["--http", "127.0.0.1:0"])
        .env("TEST_GIT_TOKEN", token)
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .expect("capstan run starts");
    let mut child = Spawned(child);
    let addr = servers::announced_address(&mut child.0, &dir.path().join("stderr"));
    wait_status(&mut child.0, addr, "a revision", &|body| {
        body.contains("main@sha1:")
    });
    server.stop();
    // A signed webhook makes the daemon poll now (the fleet's pollInterval is a minute).
    let push = br#"{"ref":"refs/heads/main"}"#;
    let (code, _) = http_request(
        addr,
        "POST",
        "/hooks/github",
        &[
            ("X-GitHub-Event", "push".to_owned()),
            ("X-GitHub-Delivery", "delivery-1".to_owned()),
            (
                "X-Hub-Signature-256",
                format!("sha256={}", sign(token, push)),
            ),
        ],
        push,
    );
    assert_eq!(code, 202);
    let status = wait_status(&mut child.0, addr, "SourceAvailable=False", &|body| {
        body.contains("SourceUnreachable")
    });
    let (_, metrics) = http_request(addr, "GET", "/metrics", &[], b"");
    // A webhook with a bad signature is logged too.
    let (code, _) = http_request(
        addr,
        "POST",
        "/hooks/github",
        &[
            ("X-GitHub-Event", "push".to_owned()),
            ("X-Hub-Signature-256", format!("sha256={token}")),
        ],
        br#"{"ref":"refs/heads/main"}"#,
    );
    assert_eq!(code, 401);
    drop(child);
    let logs = std::fs::read_to_string(dir.path().join("stdout")).expect("stdout")
        + &std::fs::read_to_string(dir.path().join("stderr")).expect("stderr");
    assert!(logs.contains("git remote unavailable"), "{logs}");
    for (what, text) in [("logs", &logs), ("status", &status), ("metrics", &metrics)] {
        assert!(
            !text.contains(token),
            "the token shows in the {what}:\n{text}"
        );
    }
    let mirror_config = walk_text(&dir.path().join("mirrors"));
    assert!(
        !mirror_config.contains(token),
        "the token is stored in the mirror"
    );
}

/// Polls the daemon's `/status` until `done` holds of its body; fails if the daemon exits.
pub(crate) fn wait_status(
    child: &mut std::process::Child,
    addr: SocketAddr,
    what: &str,
    done: &dyn Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("capstan run exited while waiting for {what}: {status}");
        }
        let body = std::net::TcpStream::connect(addr)
            .ok()
            .map(|_| http_request(addr, "GET", "/status", &[], b"").1)
            .unwrap_or_default();
        if done(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every small text file under `dir`, concatenated.
fn walk_text(dir: &Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.push_str(&walk_text(&path));
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push_str(&text);
        }
    }
    out
}

/// Starts `capstan run --lab` on `url` with its mirrors in `dir`, serving HTTP on `port`.
/// `capstan run` on `url` with its lab and mirrors in `dir`, and where it serves HTTP.
fn spawn_run(dir: &Path, url: &str) -> (Spawned, SocketAddr) {
    let log = dir.join("stderr");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["run", "--repo", url, "--lab", "--log"])
        .arg(format!("warn,{}", crate::announced::ANNOUNCING))
        .arg("--state-dir")
        .arg(dir.join("lab"))
        .arg("--git-mirror-dir")
        .arg(dir.join("mirrors"))
        .args(["--http", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("capstan run starts");
    let mut spawned = Spawned(child);
    let address = servers::announced_address(&mut spawned.0, &log);
    (spawned, address)
}

#[test]
fn a_daemon_started_while_the_remote_is_down_reconciles_the_mirrors_last_revision() {
    let remote = Remote::new();
    let head = git(&remote.work(), &["rev-parse", "HEAD"]);
    let revision = format!("main@sha1:{head}");
    let Some(mut server) = servers::git_daemon(&remote.root()) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("git://127.0.0.1:{}/fleet.git", server.port);
    let (mut first, addr) = spawn_run(dir.path(), &url);
    wait_status(&mut first.0, addr, "the first run's revision", &|body| {
        body.contains(&revision)
    });
    drop(first);

    server.stop();
    let (mut second, addr) = spawn_run(dir.path(), &url);
    let status = wait_status(&mut second.0, addr, "SourceAvailable=False", &|body| {
        body.contains("SourceUnreachable")
    });
    drop(second);
    let status: FleetStatus = serde_json::from_str(&status).expect("status");
    assert_eq!(status.revision.as_deref(), Some(revision.as_str()));
}

#[test]
fn a_daemon_started_before_its_remote_ever_answered_waits_for_it_and_then_converges() {
    let remote = Remote::new();
    let head = git(&remote.work(), &["rev-parse", "HEAD"]);
    let revision = format!("main@sha1:{head}");
    // Nothing listens there yet, and no mirror holds a revision.
    let port = servers::free_port();
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("git://127.0.0.1:{port}/fleet.git");
    let (mut run, addr) = spawn_run(dir.path(), &url);
    let body = wait_status(&mut run.0, addr, "SourceAvailable=False", &|body| {
        body.contains("SourceUnreachable")
    });
    let status: FleetStatus = serde_json::from_str(&body).expect("status");
    assert_eq!(status.revision, None);
    let source = status
        .conditions
        .iter()
        .find(|c| c.kind == "SourceAvailable")
        .expect("SourceAvailable");
    assert_eq!(source.status, "False");
    assert!(
        source
            .message
            .contains("cannot list the refs of git://127.0.0.1")
            && source.message.contains("no revision read yet"),
        "{}",
        source.message
    );
    let (code, health) = http_request(addr, "GET", "/healthz", &[], b"");
    assert_eq!(code, 200, "waiting for the remote is alive: {health}");

    let Some(_server) = servers::git_daemon_on(&remote.root(), port) else {
        return;
    };
    let body = wait_status(&mut run.0, addr, "the remote's tip", &|body| {
        body.contains(&revision)
    });
    let status: FleetStatus = serde_json::from_str(&body).expect("status");
    let source = status
        .conditions
        .iter()
        .find(|c| c.kind == "SourceAvailable")
        .expect("SourceAvailable");
    assert_eq!(source.status, "True", "{}", source.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_push_is_taken_and_the_status_names_both_revisions() {
    let remote = Remote::new();
    let before = remote.commit_and_push("before the rewrite");
    let url = format!("file://{}", remote.bare().display());
    let following = Following::start(
        remote.options(&url, GitCredentials::default()),
        Duration::from_millis(100),
        None,
    )
    .await;
    let old = format!("main@sha1:{before}");
    following
        .wait_for("the first revision", |s| {
            s.revision.as_deref() == Some(old.as_str())
        })
        .await;
    remote.write("clusters/README.md", "rewritten\n");
    let after = remote.amend_and_force_push("the rewrite");
    let new = format!("main@sha1:{after}");
    let status = following
        .wait_for("the rewritten revision", |s| {
            s.revision.as_deref() == Some(new.as_str())
        })
        .await;
    assert!(
        status
            .events
            .iter()
            .any(|e| e.contains("force-push") && e.contains(&old) && e.contains(&new)),
        "{:?}",
        status.events
    );
}
