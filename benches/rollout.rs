//! Rollouts at the speed limit: the daemon on the lab, with step timings scaled down from real
//! hosts, against the lower bound the rules allow (`capstan::plan::bound`). Per scenario
//! (bootstrap of `platform` 3 + 5, bootstrap of `prod` 1 + 3, template change of a 3-worker
//! pool, patch upgrade of a 3 + 3 cluster) it prints the measured wall time, the lower bound
//! and their ratio, for two timing sets. No timing is asserted; the figures are printed.
//!
//! Run: `cargo bench --bench rollout` (a couple of minutes); `cargo bench --bench rollout --
//! prod` runs only the scenarios whose name holds `prod`. With `RUST_LOG=capstan=info` each
//! step's end and duration is logged to stderr, to see where a rollout waits.

use std::time::{Duration, Instant};

use capstan::model::{NodeName, Role};
use capstan::plan::bound::{self, StepDurations};
use capstan_lab::values::LabDuration;
use capstan_lab::world::{LabConfig, Timings};
use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};

/// Real timings are divided by this, so the bench takes minutes, not a quarter of an hour.
const SCALE: f64 = 8.0;

/// One set of step timings, in real seconds.
struct TimingSet {
    name: &'static str,
    clone: f64,
    start: f64,
    boot: f64,
    prepare: f64,
    init: f64,
    join: f64,
    node_ready: f64,
    upgrade: f64,
}

const SETS: [TimingSet; 2] = [
    // Measured on real hosts (issue 13).
    TimingSet {
        name: "real hosts",
        clone: 4.0,
        start: 0.5,
        boot: 3.0,
        prepare: 12.0,
        init: 6.0,
        join: 3.0,
        node_ready: 2.0,
        upgrade: 6.0,
    },
    // A slow storage and a package mirror nearby: clones dominate, prepare is short.
    TimingSet {
        name: "slow clones",
        clone: 12.0,
        start: 0.5,
        boot: 4.0,
        prepare: 4.0,
        init: 6.0,
        join: 3.0,
        node_ready: 2.0,
        upgrade: 6.0,
    },
];

fn scaled(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds / SCALE)
}

fn lab_config(set: &TimingSet) -> LabConfig {
    let mut config = LabConfig::default();
    let lab = |seconds| LabDuration(scaled(seconds));
    config.proxmox.timings = Timings {
        clone: lab(set.clone),
        start: lab(set.start),
        boot: lab(set.boot),
        prepare: lab(set.prepare),
        kubeadm_init: lab(set.init),
        kubeadm_join: lab(set.join),
        node_ready: lab(set.node_ready),
        kubeadm_upgrade: lab(set.upgrade),
        ..config.proxmox.timings.clone()
    };
    for node in &mut config.proxmox.nodes {
        node.memory_gib = node.memory_gib.max(64);
    }
    config
}

fn durations(config: &LabConfig, set: &TimingSet) -> StepDurations {
    let timings = &config.proxmox.timings;
    StepDurations {
        // The lab charges the new VM's configuration and disk resize on top of the clone.
        clone: scaled(set.clone) + timings.config.0 + timings.resize.0,
        start: scaled(set.start),
        boot: scaled(set.boot),
        prepare: scaled(set.prepare),
        init: scaled(set.init),
        join: scaled(set.join),
        node_ready: scaled(set.node_ready),
        // The upgrade installs kubeadm (the prepare script) then runs `kubeadm upgrade`.
        upgrade: scaled(set.prepare) + scaled(set.upgrade),
        removal: timings.shutdown.0 + timings.destroy.0,
    }
}

/// A cluster of `control_planes` and `workers`, every machine placed on any Proxmox node.
fn cluster(
    name: &str,
    octet: u8,
    version: &str,
    control_planes: u32,
    workers: u32,
    template: &str,
) -> String {
    cluster_yaml(name, octet, version, workers, template)
        .replace(
            "  controlPlane:\n    replicas: 1\n    machine: {template: debian13-k8s, cores: 2, memoryMiB: 4096, placement: [pve1]}",
            &format!("  controlPlane:\n    replicas: {control_planes}\n    machine: {{template: debian13-k8s, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}}"),
        )
}

fn report(scenario: &str, set: &TimingSet, measured: Duration, bound: Duration) {
    let ratio = measured.as_secs_f64() / bound.as_secs_f64().max(f64::EPSILON);
    println!(
        "{:<12} {scenario:<40} measured {:>6.2} s  lower bound {:>6.2} s  ratio {ratio:.2}",
        set.name,
        measured.as_secs_f64(),
        bound.as_secs_f64()
    );
}

async fn bootstrap(set: &TimingSet, name: &str, control_planes: u32, workers: u32) {
    let config = lab_config(set);
    let steps = durations(&config, set);
    let spec = cluster(name, 41, "1.36.2", control_planes, workers, "debian13-k8s");
    let mut world = World::with_lab(
        config,
        &fleet_yaml(&["1.36"], false),
        &[(name, spec)],
        false,
    )
    .await;
    let started = Instant::now();
    world.start_daemon().await;
    world
        .wait_for_within("the cluster Ready", Duration::from_secs(300), |s| {
            ready(s, &[name])
        })
        .await;
    let measured = started.elapsed();
    world.kill_daemon().await;
    let bound = bound::bootstrap(&steps, control_planes, workers, control_planes + workers);
    report(
        &format!("bootstrap {name} ({control_planes} + {workers})"),
        set,
        measured,
        bound,
    );
}

/// Builds a cluster, then moves it to `after` (version, worker template) and times until every
/// machine that change replaces is new (the workers for a template change, all for an upgrade).
async fn change(
    set: &TimingSet,
    scenario: &str,
    control_planes: u32,
    workers: u32,
    after: (&str, &str),
    bound: impl Fn(&StepDurations) -> Duration,
) {
    let name = "bench";
    let config = lab_config(set);
    let steps = durations(&config, set);
    let before = cluster(name, 42, "1.36.2", control_planes, workers, "debian13-k8s");
    let mut world = World::with_lab(
        config,
        &fleet_yaml(&["1.36"], false),
        &[(name, before)],
        false,
    )
    .await;
    world.start_daemon().await;
    let built = world
        .wait_for_within("the cluster Ready", Duration::from_secs(300), |s| {
            ready(s, &[name])
        })
        .await;
    let old: Vec<NodeName> = built.clusters[name]
        .nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();
    let started = Instant::now();
    world.write_cluster(
        name,
        &cluster(name, 42, after.0, control_planes, workers, after.1),
    );
    world
        .wait_for_within("every machine replaced", Duration::from_secs(600), |s| {
            ready(s, &[name])
                && s.clusters[name]
                    .nodes
                    .iter()
                    .filter(|n| after.0 != "1.36.2" || n.role == Role::Worker)
                    .all(|n| !old.contains(&n.name))
        })
        .await;
    let measured = started.elapsed();
    world.kill_daemon().await;
    report(scenario, set, measured, bound(&steps));
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_writer(std::io::stderr)
            .init();
    }
    // `cargo bench` passes `--bench`; any other argument filters the scenarios by name.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    let wanted = |scenario: &str| filter.is_empty() || filter.iter().any(|f| scenario.contains(f));
    println!("step timings divided by {SCALE}; ratio = measured / lower bound (goal <= 1.10)");
    for set in &SETS {
        if wanted("bootstrap platform") {
            bootstrap(set, "platform", 3, 5).await;
        }
        if wanted("bootstrap prod") {
            bootstrap(set, "prod", 1, 3).await;
        }
        if wanted("template change") {
            change(
                set,
                "template change of a 3-worker pool",
                1,
                3,
                ("1.36.2", "debian13-k8s-v2"),
                |d| bound::replacement(d, 3, 1, false),
            )
            .await;
        }
        if wanted("patch upgrade") {
            change(
                set,
                "patch upgrade of a 3 + 3 cluster",
                3,
                3,
                ("1.36.4", "debian13-k8s"),
                |d| bound::replacement(d, 6, 1, true),
            )
            .await;
        }
    }
}
