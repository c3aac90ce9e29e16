//! Belongs here: load tests of one `capstan run` process that need a test binary of their
//! own, because they open more sockets than other tests may share a process with (the
//! open-files limit is raised for this process and the daemon it starts).
//!
//! - `/healthz` answers 200 while 500 `/events` streams (from 50 client addresses) and 500
//!   half-sent requests are opened against `--http-max-connections 128`: the kubelet never
//!   restarts a daemon a client floods.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use capstan_testkit::Remote;
use capstan_testkit::process::{Spawned, http_request};

/// The daemon's connection cap, as deployed.
const MAX_CONNECTIONS: usize = 128;
/// Connections of each kind opened against it.
const EACH: usize = 500;
/// The client addresses the streams come from (127.0.0.1 to 127.0.0.50): more than the
/// per-client allowance lets one address open.
const CLIENT_ADDRESSES: usize = 50;
/// Sockets this process and the daemon may hold: both kinds, with room for the rest.
const OPEN_FILES: u64 = 8192;
/// How long a probe may take: the kubelet's default `timeoutSeconds`.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// A fleet with no connection: the daemon needs nothing but the remote.
const FLEET: &str = "apiVersion: capstan.dev/v1alpha1\nkind: Fleet\nclustersDir: clusters\n";

/// Raises this process's soft open-files limit to `wanted` (at most the hard limit); the
/// daemon started afterwards inherits it.
#[allow(unsafe_code)] // Two libc calls on a struct of this frame; nothing else is touched.
fn raise_open_files(wanted: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given, which lives on this frame.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } != 0 {
        return 0;
    }
    let raised = libc::rlimit {
        rlim_cur: wanted.min(limit.rlim_max).max(limit.rlim_cur),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads the struct it is given, which lives on this frame.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const raised) } != 0 {
        return limit.rlim_cur;
    }
    raised.rlim_cur
}

/// Where `capstan run` serves `--http`, from its log.
fn announced(log: &std::path::Path, child: &mut std::process::Child) -> SocketAddr {
    capstan_testkit::process::announced_address(child, log)
}

/// A GET of `/healthz` on a connection of its own, within [`PROBE_TIMEOUT`]: the status code,
/// or 0 when none came in time.
async fn probe(addr: SocketAddr) -> u16 {
    let answer = tokio::time::timeout(PROBE_TIMEOUT, async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(
                format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .ok()?;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer)
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    })
    .await;
    answer.ok().flatten().unwrap_or(0)
}

/// Opens a connection from `local` and sends `request`; the connection, kept open.
async fn open(
    addr: SocketAddr,
    local: std::net::IpAddr,
    request: String,
) -> Option<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::new(local, 0)).ok()?;
    let mut stream = socket.connect(addr).await.ok()?;
    stream.write_all(request.as_bytes()).await.ok()?;
    Some(stream)
}

/// Whether the daemon still holds `stream` open (it has not closed it).
async fn is_held(stream: &mut tokio::net::TcpStream) -> bool {
    let mut buffer = [0_u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_millis(20), stream.read(&mut buffer)).await {
            // Quiet: open.
            Err(_) => return true,
            Ok(Ok(0) | Err(_)) => return false,
            // An answer or an event: read on until it is quiet or closed.
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_500_event_streams_and_500_half_sent_requests_are_open() {
    let files = raise_open_files(OPEN_FILES);
    assert!(
        files >= (4 * EACH) as u64,
        "the open-files limit is {files}: raise the hard limit (ulimit -Hn) to at least {}",
        4 * EACH
    );
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
        .args(["--http", "127.0.0.1:0"])
        // Longer than the test: no half-sent request is closed for its slowness meanwhile.
        .args(["--http-read-timeout", "60s"])
        .args(["--http-max-connections", &MAX_CONNECTIONS.to_string()])
        .args(["--log", capstan_testkit::announced::ANNOUNCING])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("capstan run starts");
    let mut child = Spawned(child);
    let addr = announced(&log, &mut child.0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while probe(addr).await != 200 {
        assert!(Instant::now() < deadline, "no pass completed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The streams first, then the unfinished requests: those fill every slot the streams
    // leave, and the rest knock beside the cap.
    let mut connections = Vec::new();
    for kind in ["events", "half-sent"] {
        let mut opening = tokio::task::JoinSet::new();
        for index in 0..EACH {
            let (local, request) = match kind {
                "events" => (
                    std::net::IpAddr::from([127, 0, 0, 1 + (index % CLIENT_ADDRESSES) as u8]),
                    format!(
                        "GET /events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
                    ),
                ),
                _ => (
                    std::net::IpAddr::from([127, 0, 0, 1]),
                    format!("GET /status HTTP/1.1\r\nHost: {addr}\r\nX-Slow-{index}: "),
                ),
            };
            opening.spawn(open(addr, local, request));
        }
        while let Some(opened) = opening.join_next().await {
            connections.extend(opened.expect("joined"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(connections.len(), 2 * EACH, "every connection was opened");

    let mut probes = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        probes.push((probe(addr).await, started.elapsed()));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let busy = http_request(addr, "GET", "/status", &[], b"").0;
    let mut held = 0;
    for stream in &mut connections {
        held += usize::from(is_held(stream).await);
    }
    println!(
        "{} connections opened, {held} held by the daemon; /healthz: {probes:?}; /status: {busy}",
        connections.len()
    );
    assert!(
        probes.iter().all(|(code, _)| *code == 200),
        "/healthz answered {probes:?}"
    );
    assert_eq!(busy, 503, "the connection cap is full");
    assert!(
        held >= MAX_CONNECTIONS,
        "the cap is held by the flood ({held} connections open)"
    );
    drop(connections);
}
