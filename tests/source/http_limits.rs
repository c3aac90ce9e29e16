//! The daemon's HTTP endpoint under slow and unfinished requests, as a real `capstan run`
//! process following a Git remote: 250 requests whose head never ends on `--http` and 250
//! webhook bodies of 1 MiB that never end on `--hooks-listen`, all at once. Each is closed
//! within the read timeout (with slack for a loaded machine), the process's RSS (read from
//! `/proc`) stays under 100 MB throughout, and the daemon answers normally afterwards: the
//! token on `/status`, the webhooks on their own listener only.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::webhooks::sign;
use capstan_testkit::Remote;
use capstan_testkit::process::{Spawned, http_request};

/// The daemon's `--http-read-timeout`.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How late past the read timeout a connection may be closed on a loaded 2-core machine
/// (before the fix, none was closed at all).
const SLACK: Duration = Duration::from_secs(13);
/// Requests of each kind.
const EACH: usize = 250;
/// The bound on the daemon's resident memory (its Deployment's limit is 256 Mi).
const RSS_LIMIT: u64 = 100 * 1024 * 1024;
/// A webhook body's declared size: the largest accepted.
const BODY_BYTES: usize = 1024 * 1024;

const TOKEN: &str = "status-token-9c1d44e0";
const HOOK_SECRET: &str = "hook-secret-71b3aa20";

/// A fleet with no connection: the daemon needs nothing but the remote.
const FLEET: &str = "apiVersion: capstan.dev/v1alpha1\nkind: Fleet\nclustersDir: clusters\n";

/// The address on the daemon's log line that contains `what`.
fn announced(log: &Path, what: &str, child: &mut std::process::Child) -> SocketAddr {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let found = text
            .lines()
            .filter(|line| line.contains(what))
            .find_map(|line| {
                line.split_once("address=")?
                    .1
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            });
        if let Some(address) = found {
            return address;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("capstan run exited: {status}\n{text}");
        }
        assert!(Instant::now() < deadline, "no `{what}` line:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The process's resident memory, from `/proc/PID/status`.
fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Opens a connection, sends `head` and `body` (not all the request), then waits until the
/// daemon closes it; returns how long after the connection was opened that happened (`None`
/// when it stayed open past the read timeout and the slack).
async fn abandoned(addr: SocketAddr, head: String, body: usize) -> Option<Duration> {
    let opened = Instant::now();
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let patience = READ_TIMEOUT + SLACK + Duration::from_secs(5);
    let _ = tokio::time::timeout(patience, async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(&vec![b'{'; body]).await
    })
    .await;
    let mut buffer = vec![0_u8; 16 * 1024];
    let closed = tokio::time::timeout(patience, async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    closed.is_ok().then(|| opened.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_unfinished_requests_are_closed_in_time_and_memory_stays_bounded() {
    let remote = Remote::new();
    remote.write("capstan.yaml", FLEET);
    remote.commit_and_push("a fleet with no connection");
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("stderr");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["run", "--repo"])
        .arg(format!("file://{}", remote.bare().display()))
        .arg("--git-mirror-dir")
        .arg(dir.path().join("mirrors"))
        .args(["--http", "127.0.0.1:0", "--hooks-listen", "127.0.0.1:0"])
        .args(["--http-token-from", "env:TEST_HTTP_TOKEN"])
        .args(["--webhook-secret-from", "env:TEST_HOOK_SECRET"])
        .args(["--http-read-timeout", "2s", "--http-max-connections", "600"])
        .args(["--log", capstan_testkit::announced::ANNOUNCING])
        .env("TEST_HTTP_TOKEN", TOKEN)
        .env("TEST_HOOK_SECRET", HOOK_SECRET)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("capstan run starts");
    let mut child = Spawned(child);
    let http = announced(&log, "serving /status", &mut child.0);
    let hooks = announced(&log, "serving /hooks", &mut child.0);
    let pid = child.0.id();
    let before = rss_bytes(pid).expect("rss");

    // The RSS, sampled until the storm is over.
    let (done, mut stop) = tokio::sync::oneshot::channel::<()>();
    let sampler = tokio::spawn(async move {
        let mut highest = 0;
        loop {
            highest = highest.max(rss_bytes(pid).unwrap_or(0));
            tokio::select! {
                _ = &mut stop => return highest,
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
    });
    let mut storm = tokio::task::JoinSet::new();
    for index in 0..EACH {
        let head = format!("GET /status HTTP/1.1\r\nHost: capstan\r\nX-Slow-{index}: ");
        storm.spawn(abandoned(http, head, 0));
        let head = format!(
            "POST /hooks/generic HTTP/1.1\r\nHost: capstan\r\nX-Signature: sha256=00\r\nContent-Type: application/json\r\nContent-Length: {BODY_BYTES}\r\n\r\n"
        );
        storm.spawn(abandoned(hooks, head, BODY_BYTES - 1));
    }
    let mut closed = Vec::new();
    let mut open = 0;
    while let Some(outcome) = storm.join_next().await {
        match outcome.expect("joined") {
            Some(after) => closed.push(after),
            None => open += 1,
        }
    }
    let _ = done.send(());
    let highest = sampler.await.expect("sampler");
    closed.sort();
    let slowest = closed.last().copied().unwrap_or_default();
    println!(
        "{} connections: closed after {:?} (median) to {slowest:?} (slowest), {open} left open; RSS {} MiB before, at most {} MiB during",
        2 * EACH,
        closed.get(closed.len() / 2).copied().unwrap_or_default(),
        before / (1024 * 1024),
        highest / (1024 * 1024),
    );
    assert_eq!(open, 0, "connections still open after the read timeout");
    assert!(
        slowest <= READ_TIMEOUT + SLACK,
        "the slowest connection was closed after {slowest:?}"
    );
    assert!(
        highest < RSS_LIMIT,
        "RSS reached {} MiB",
        highest / (1024 * 1024)
    );

    // Afterwards, the daemon serves as usual.
    let answers = tokio::task::spawn_blocking(move || {
        let bearer = ("Authorization", format!("Bearer {TOKEN}"));
        let push = br#"{"ref":"refs/heads/main"}"#;
        let signed = ("X-Signature", format!("sha256={}", sign(HOOK_SECRET, push)));
        [
            http_request(http, "GET", "/status", &[], b"").0,
            http_request(http, "GET", "/status", std::slice::from_ref(&bearer), b"").0,
            http_request(http, "GET", "/metrics", &[bearer], b"").0,
            http_request(
                http,
                "POST",
                "/hooks/generic",
                std::slice::from_ref(&signed),
                push,
            )
            .0,
            http_request(hooks, "POST", "/hooks/generic", &[signed], push).0,
            http_request(hooks, "GET", "/status", &[], b"").0,
        ]
    })
    .await
    .expect("joined");
    assert_eq!(
        answers,
        [401, 200, 200, 404, 202, 404],
        "/status needs the token; the webhooks are only on their listener"
    );

    // `capstan status --server` sends the token it is given, and says what to do without it.
    let status = |token: Option<&str>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_capstan"));
        command.args(["status", "--server", &format!("http://{http}")]);
        if let Some(token) = token {
            command
                .args(["--server-token-from", "env:TEST_HTTP_TOKEN"])
                .env("TEST_HTTP_TOKEN", token);
        }
        command.output().expect("capstan status runs")
    };
    let with = status(Some(TOKEN));
    assert!(
        with.status.success(),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    let without = status(None);
    let stderr = String::from_utf8_lossy(&without.stderr);
    assert_eq!(without.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .contains("refused a request without a token: pass its token with --server-token-from"),
        "{stderr}"
    );
}
