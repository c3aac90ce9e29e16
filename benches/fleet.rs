//! What an idle daemon costs for a converged fleet: a lab in this process, `capstan run` in a
//! child process (so its CPU and memory are its own) on a repository of N one-machine
//! clusters (a control plane, no workers, delivered to Flux). Once every cluster is Ready
//! and delivered, it waits for idle passes (one per `pollInterval`, 10 s) and prints the
//! daemon's CPU per idle pass (total and per cluster, from `/proc/PID/stat`), the guest-agent
//! requests per pass (from its `/metrics`) and its RSS (`/proc/PID/status` VmRSS): at the end,
//! split into anonymous memory (heap, stacks) and file pages (the binary's code and
//! libraries); the highest read every 20 ms through the idle passes; the peak while building.
//! Then the dashboard's cost: idle passes again with a page open (an `/events` stream held),
//! and the CPU of one page drawn and sent (`/` and `/clusters/c000`), which is what an open
//! page costs per pass that changed the status (it gets one event and fetches its page).
//!
//! Run: `cargo bench --bench fleet` (50 clusters); `cargo bench --bench fleet -- 50 200` for
//! several sizes. Goals (release build): no guest-agent call, at most 1 ms of CPU per cluster
//! per idle pass, RSS under 64 MB at 200 clusters; nothing more per idle pass with a page open,
//! under 1 ms per open page per changed pass at 200 clusters.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use capstan_lab::lab::{Lab, LabOptions};
use capstan_lab::world::LabConfig;

/// How long idle passes are measured: three `pollInterval`s and a bit.
const IDLE_WINDOW: Duration = Duration::from_secs(31);
/// How often RSS is read during the idle window: a pass at 200 clusters lasts about 100 ms.
const RSS_SAMPLING: Duration = Duration::from_millis(20);
/// How long the fleet may take to converge.
const BUILD_PATIENCE: Duration = Duration::from_secs(900);

/// A lab big enough for `clusters` VMs: memory, disk, and a /16 whose DHCP range has room.
fn lab_yaml(clusters: usize) -> String {
    let memory_gib = 64 + clusters as u64 * 2;
    // Every VM may land on one node: 20 GiB of disk each.
    let storage_gib = 2048 + clusters as u64 * 20;
    format!(
        "proxmox:
  nodes: [{{name: pve1, memoryGiB: {memory_gib}}}, {{name: pve2, memoryGiB: {memory_gib}}}, {{name: pve3, memoryGiB: {memory_gib}}}]
  storages: [{{name: local-lvm, type: lvmthin, sizeGiB: {storage_gib}}}]
  network: {{subnet: 10.0.0.0/16, dhcpRange: 10.0.1.1-10.0.9.254}}
"
    )
}

/// The fleet on the lab; the management kubeconfig is read from the daemon's `--secrets-dir`.
fn fleet_yaml(lab: &capstan_lab::lab::LabFile) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Fleet
clustersDir: clusters
proxmox:
  lab:
    url: {}
    tokenId: \"{}\"
    tokenFrom: {{env: CAPSTAN_PROXMOX_LAB_TOKEN}}
    tlsFingerprint: \"{}\"
managementClusters:
  management:
    kubeconfigFrom: {{file: managementClusters/management/kubeconfig}}
approvedMinors: [\"1.36\"]
pollInterval: 10s
",
        lab.proxmox.url, lab.proxmox.token_id, lab.proxmox.fingerprint,
    )
}

/// One control plane, no workers: the least a converged cluster can be.
fn cluster_yaml(index: usize) -> String {
    let name = format!("c{index:03}");
    let (third, fourth) = (10 + index / 250, index % 250 + 1);
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  proxmox: lab
  kubernetes: {{version: 1.36.2}}
  endpoint: {{host: k8s-{name}.lab.example, address: 10.0.{third}.{fourth}}}
  network: {{nodes: 10.0.0.0/16, reserved: [\"10.0.200.1-10.0.200.250\"]}}
  controlPlane:
    replicas: 1
    machine: {{template: debian13-k8s, cores: 2, memoryMiB: 2048, placement: [pve1, pve2, pve3]}}
  workers: []
  rollout: {{minWorkers: 0}}
  delivery:
    flux: {{cluster: management}}
"
    )
}

/// `GET /metrics` of the daemon, as text.
fn metrics(addr: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer.split_once("\r\n\r\n")?.1.to_owned())
}

/// The sum of a metric's samples (every label set).
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// CPU time (user + system) of a process, from `/proc/PID/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    // Clock ticks: USER_HZ is 100 on every architecture Linux supports (sysconf is not in std).
    Duration::from_millis(ticks * 10)
}

/// A field of `/proc/PID/status` measured in kB (VmRSS, RssAnon, RssFile, VmHWM), in MB.
fn status_mb(pid: u32, field: &str) -> f64 {
    status_field(pid, field)
        .and_then(|value| value.trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0) as f64
        / 1024.0
}

/// A field of `/proc/PID/status`, as written there.
fn status_field(pid: u32, field: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|line| {
            Some(
                line.strip_prefix(field)?
                    .strip_prefix(':')?
                    .trim()
                    .to_owned(),
            )
        })
}

/// Kills the daemon when the bench ends, however it ends.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|probe| probe.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

async fn measure(clusters: usize) {
    let state = tempfile::tempdir().expect("state dir");
    let config_path = state.path().join("lab.yaml");
    std::fs::write(&config_path, lab_yaml(clusters)).expect("lab config");
    let config = LabConfig::load(&config_path).expect("lab config loads");
    let options = LabOptions {
        state_dir: Some(state.path().join("lab")),
        ..LabOptions::ephemeral()
    };
    let lab = Lab::start(config, options).await.expect("lab starts");
    let repo = tempfile::tempdir().expect("repo");
    std::fs::create_dir_all(repo.path().join("clusters")).expect("clusters dir");
    let management = lab
        .kubeconfig_path("management")
        .expect("management kubeconfig");
    let secrets = state.path().join("secrets");
    let folder = secrets.join("managementClusters/management");
    std::fs::create_dir_all(&folder).expect("secrets folder");
    std::fs::copy(&management, folder.join("kubeconfig")).expect("management kubeconfig");
    std::fs::write(
        repo.path().join("capstan.yaml"),
        fleet_yaml(&lab.lab_file()),
    )
    .expect("capstan.yaml");
    for index in 0..clusters {
        std::fs::write(
            repo.path().join(format!("clusters/c{index:03}.yaml")),
            cluster_yaml(index),
        )
        .expect("cluster file");
    }

    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let child = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["run", "--repo"])
        .arg(repo.path())
        // The lab serves each cluster's endpoint on a loopback port of its own.
        .arg("--lab-addresses")
        .arg(state.path().join("lab"))
        .args(["--http", &addr.to_string(), "--busy-interval", "200ms"])
        .args(["--concurrency", "16"])
        .arg("--secrets-dir")
        .arg(&secrets)
        .arg(format!(
            "--pin=proxmox.lab.url={}",
            lab.lab_file().proxmox.url
        ))
        .arg(format!(
            "--pin=proxmox.lab.tlsFingerprint={}",
            lab.lab_file().proxmox.fingerprint
        ))
        .env("CAPSTAN_PROXMOX_LAB_TOKEN", lab.token())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("capstan run starts");
    let daemon = Daemon(child);
    let pid = daemon.0.id();

    // Converged: every cluster Ready with its kubeconfig delivered, nothing left to do.
    let started = Instant::now();
    let deliveries = loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let text = tokio::task::spawn_blocking(move || metrics(addr))
            .await
            .expect("joined")
            .unwrap_or_default();
        let ready = text
            .lines()
            .filter(|l| l.starts_with("capstan_cluster_phase{") && l.contains("phase=\"Ready\""))
            .count();
        let delivered = metric(
            &text,
            "capstan_steps_total{action=\"deliver-kubeconfig\",result=\"ok\"}",
        );
        if ready == clusters && delivered >= clusters as u64 {
            break delivered;
        }
        assert!(
            started.elapsed() < BUILD_PATIENCE,
            "{clusters} clusters not converged after {BUILD_PATIENCE:?}: {ready} Ready"
        );
    };
    let built_in = started.elapsed();

    // One idle pass to settle; then a window of idle passes, with /metrics read only at its
    // ends (each read renders the whole status, which is daemon CPU too).
    let passes_of = |text: &str| metric(text, "capstan_reconcile_passes_total");
    let settled = passes_of(&metrics(addr).unwrap_or_default());
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if passes_of(&metrics(addr).unwrap_or_default()) > settled {
            break;
        }
    }
    let before = metrics(addr).unwrap_or_default();
    let cpu_before = cpu_time(pid);
    // RSS sampled through the window, passes included, for the highest it reaches.
    let window_ends = Instant::now() + IDLE_WINDOW;
    let mut highest_rss: f64 = 0.0;
    while Instant::now() < window_ends {
        highest_rss = highest_rss.max(status_mb(pid, "VmRSS"));
        tokio::time::sleep(RSS_SAMPLING).await;
    }
    let cpu = cpu_time(pid).saturating_sub(cpu_before);
    let text = metrics(addr).unwrap_or_default();
    let passes = passes_of(&text).saturating_sub(passes_of(&before)).max(1);
    let agent_calls = metric(&text, "capstan_guest_agent_calls_total")
        - metric(&before, "capstan_guest_agent_calls_total");
    let last_pass_agent = metric(&text, "capstan_pass_guest_agent_calls");
    let steps_after = metric(&text, "capstan_steps_total");
    let per_pass = cpu / u32::try_from(passes).unwrap_or(1);
    let per_cluster = per_pass / u32::try_from(clusters).unwrap_or(1);
    println!(
        "{clusters:>4} clusters: built in {:>5.1} s ({deliveries} deliveries, {steps_after} steps); {passes} idle passes: daemon CPU {:>7.1} ms/pass, {:>6.3} ms/cluster/pass; guest-agent requests {} in all, {last_pass_agent} in the last pass; RSS {:.1} MB ({:.1} anonymous, {:.1} file: the binary's code and libraries; {} threads), at most {:.1} MB during the idle passes, {:.1} MB at its peak while building",
        built_in.as_secs_f64(),
        per_pass.as_secs_f64() * 1000.0,
        per_cluster.as_secs_f64() * 1000.0,
        agent_calls,
        status_mb(pid, "VmRSS"),
        status_mb(pid, "RssAnon"),
        status_mb(pid, "RssFile"),
        status_field(pid, "Threads").unwrap_or_default(),
        highest_rss,
        status_mb(pid, "VmHWM"),
    );
    dashboard(addr, pid, clusters, per_pass);
    drop(daemon);
    lab.stop();
}

/// Draws of each page measured: the CPU clock ticks every 10 ms, so 200 draws read it to
/// 0.05 ms a draw.
const PAGE_DRAWS: u32 = 200;

/// What the dashboard costs the daemon: idle passes with a page open (its `/events` stream held)
/// against `idle_per_pass` without, then the CPU of one page drawn and sent, as an open page
/// fetches it after each event (the fleet page and one cluster's).
fn dashboard(addr: SocketAddr, pid: u32, clusters: usize, idle_per_pass: Duration) {
    let passes_of = |text: &str| metric(text, "capstan_reconcile_passes_total");
    let before = metrics(addr).unwrap_or_default();
    let cpu_before = cpu_time(pid);
    let events = std::thread::spawn(move || count_events(addr, IDLE_WINDOW));
    let events = events.join().expect("the events reader");
    let cpu = cpu_time(pid).saturating_sub(cpu_before);
    let passes = passes_of(&metrics(addr).unwrap_or_default())
        .saturating_sub(passes_of(&before))
        .max(1);
    let per_pass = cpu / u32::try_from(passes).unwrap_or(1);
    let mut draws = Vec::new();
    for path in ["/".to_owned(), "/clusters/c000".to_owned()] {
        let cpu_before = cpu_time(pid);
        let mut bytes = 0;
        for _ in 0..PAGE_DRAWS {
            bytes = get(addr, &path).len();
        }
        let cpu = cpu_time(pid).saturating_sub(cpu_before) / PAGE_DRAWS;
        draws.push(format!(
            "{path} {:.3} ms ({} KiB)",
            cpu.as_secs_f64() * 1000.0,
            bytes / 1024
        ));
    }
    println!(
        "{clusters:>4} clusters, dashboard: {passes} idle passes with a page open: {:>7.1} ms/pass ({:+.1} ms against none), {} event(s) after the first; per open page per changed pass (one event, one page drawn and sent): {}",
        per_pass.as_secs_f64() * 1000.0,
        (per_pass.as_secs_f64() - idle_per_pass.as_secs_f64()) * 1000.0,
        events.saturating_sub(1),
        draws.join(", "),
    );
}

/// Holds `GET /events` open for `window`; returns the events it said.
fn count_events(addr: SocketAddr, window: Duration) -> usize {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .write_all(b"GET /events HTTP/1.1\r\nHost: capstan\r\nAccept: text/event-stream\r\n\r\n")
        .expect("request");
    let ends = Instant::now() + window;
    let mut read = Vec::new();
    let mut buffer = [0_u8; 4096];
    while let Some(left) = ends.checked_duration_since(Instant::now()) {
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .expect("timeout");
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => read.extend_from_slice(&buffer[..n]),
            Err(_) => {}
        }
    }
    String::from_utf8_lossy(&read)
        .matches("event: status")
        .count()
}

/// A page's body.
fn get(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: capstan\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() { vec![50] } else { sizes };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for clusters in sizes {
        runtime.block_on(measure(clusters));
    }
}
