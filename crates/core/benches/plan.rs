//! Planning a fleet of 200 clusters × 20 machines (3 control planes, 17 workers in two pools):
//! prints the time per full plan (every cluster, with its predicted sequence to convergence).
//!
//! Two fleets: nothing exists yet (the whole bootstrap is predicted), and a built fleet whose
//! worker template changed (every worker's replacement is predicted, one at a time).
//!
//! Then one cluster of 20, 2,000 and 20,000 machines (the same shape, its pools scaled), in the
//! same three states: the median wall and CPU time per plan, the CPU time per machine, and its
//! ratio to the 20-machine cluster's, which stays near 1 when the planner is linear in machines.
//! (CPU time: on a loaded machine a long run's wall time mostly measures the other processes.)
//! 20,000 is past what validation lets a cluster declare (5,000): that cluster is built
//! without validation, to show the cost stays linear beyond the bound.
//!
//! Run: `cargo bench --bench plan`. No timing is asserted; the figures are printed. Arguments
//! that do not start with `-` pick the cases whose label contains one of them (`cargo bench
//! --bench plan -- template`); under `valgrind --tool=callgrind --toggle-collect='plan::measure'`
//! that counts one case's instructions.

// A benchmark reads the clock; the planner it measures still may not.
#![allow(clippy::disallowed_methods)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use capstan_core::observed::Observed;
use capstan_core::plan::{Policy, expected_effect, plan};
use capstan_core::spec::{self, Desired, RepoFiles, SourceText};

const CLUSTERS: usize = 200;
const RUNS: u32 = 5;

const FLEET: &str = "apiVersion: capstan.dev/v1alpha1
kind: Fleet
proxmox:
  homelab: {url: https://pve1.lab.example:8006, tokenId: capstan@pve!reconciler, tokenFrom: {env: TOKEN}}
managementClusters:
  management: {kubeconfigFrom: {file: /etc/capstan/management.kubeconfig}}
approvedMinors: [\"1.36\"]
";

fn cluster(index: usize, template: &str) -> String {
    let (third, fourth) = (index / 250, index % 250 + 1);
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: c{index}}}
spec:
  proxmox: homelab
  kubernetes: {{version: 1.36.2}}
  endpoint: {{host: k8s-c{index}.lab.example, address: 10.{third}.{fourth}.10}}
  network: {{nodes: 10.{third}.{fourth}.0/24}}
  controlPlane:
    replicas: 3
    machine: {{template: debian13-k8s, cores: 2, memoryMiB: 6144, placement: [pve1, pve2, pve3]}}
  workers:
    - pool: general
      replicas: 10
      machine: {{template: {template}, cores: 4, memoryMiB: 8192, placement: [pve1, pve2, pve3]}}
    - pool: big
      replicas: 7
      machine: {{template: {template}, cores: 8, memoryMiB: 16384, placement: [pve2, pve3]}}
  delivery:
    flux: {{cluster: management}}
"
    )
}

fn fleet(template: &str) -> Desired {
    let files = RepoFiles {
        fleet: SourceText {
            path: "capstan.yaml".into(),
            text: FLEET.into(),
        },
        clusters: (0..CLUSTERS)
            .map(|i| SourceText {
                path: format!("clusters/c{i}.yaml"),
                text: cluster(i, template),
            })
            .collect(),
    };
    let loaded = spec::load(&files);
    assert!(loaded.is_valid(), "{}", loaded.diagnostics);
    loaded.desired.expect("valid fleet")
}

/// Times `RUNS` full plans and prints the mean time to make one, the mean time to free it
/// (27,000 predicted steps are many small allocations; the daemon frees its plan after the
/// pass), and the last plan's predicted step count.
#[inline(never)]
fn measure(label: &str, desired: &Desired, observed: &Observed, now: jiff::Timestamp) {
    if !selected(label) {
        return;
    }
    let policy = Policy::of(desired);
    let (mut planning, mut freeing) = (Duration::ZERO, Duration::ZERO);
    let mut predicted = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        let plan = black_box(plan(desired, observed, &policy, now));
        planning += start.elapsed();
        predicted = plan
            .clusters
            .iter()
            .map(|c| c.predicted.len())
            .sum::<usize>();
        let start = Instant::now();
        drop(plan);
        freeing += start.elapsed();
    }
    println!(
        "{label}: {:?} per full plan of {CLUSTERS} clusters x 20 machines ({predicted} predicted steps), {:?} to free it",
        planning / RUNS,
        freeing / RUNS
    );
}

/// Whether the command line selects the case `label` (no filter selects every case).
fn selected(label: &str) -> bool {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    filters.is_empty() || filters.iter().any(|filter| label.contains(filter.as_str()))
}

fn main() {
    let now: jiff::Timestamp = "2026-04-29T12:00:00Z".parse().expect("time");
    let desired = fleet("debian13-k8s");
    let nothing = Observed::nothing();
    measure("from nothing", &desired, &nothing, now);

    // Build the fleet by playing its plans forward.
    let policy = Policy::of(&desired);
    let mut built = Observed::nothing();
    loop {
        let plan = plan(&desired, &built, &policy, now);
        let steps: Vec<_> = plan.clusters.iter().flat_map(|c| c.steps.clone()).collect();
        if steps.is_empty() {
            break;
        }
        for step in &steps {
            expected_effect(&mut built, step, now);
        }
    }
    let changed = fleet("debian13-k8s-v2");
    measure("template change", &changed, &built, now);
    measure("converged", &desired, &built, now);

    let mut per_machine_at_20 = Vec::new();
    for machines in [20, 2_000, 20_000] {
        one_cluster(machines, now, &mut per_machine_at_20);
    }
}

/// One cluster `c0` of `machines` machines: 3 control planes, the workers split 10:7 between
/// its two pools, built from `template`. Validation checks the 20-machine file; the replicas
/// are then set directly, past validation's bounds for 20,000.
fn one(machines: u32, template: &str) -> Desired {
    let files = RepoFiles {
        fleet: SourceText {
            path: "capstan.yaml".into(),
            text: FLEET.into(),
        },
        clusters: vec![SourceText {
            path: "clusters/c0.yaml".into(),
            text: cluster(0, template),
        }],
    };
    let loaded = spec::load(&files);
    assert!(loaded.is_valid(), "{}", loaded.diagnostics);
    let mut desired = loaded.desired.expect("valid fleet");
    let workers = machines - 3;
    let spec = &mut desired.clusters.get_mut("c0").expect("c0").spec;
    spec.workers[0].replicas = workers * 10 / 17;
    spec.workers[1].replicas = workers - workers * 10 / 17;
    desired
}

/// Plans played forward until nothing is left to do.
fn build(desired: &Desired, now: jiff::Timestamp) -> Observed {
    let policy = Policy::of(desired);
    let mut built = Observed::nothing();
    loop {
        let plan = plan(desired, &built, &policy, now);
        let steps: Vec<_> = plan.clusters.iter().flat_map(|c| c.steps.clone()).collect();
        if steps.is_empty() {
            return built;
        }
        for step in &steps {
            expected_effect(&mut built, step, now);
        }
    }
}

/// The CPU time this process has used, all threads together (those ended too), from
/// `/proc/self/stat`: in ticks of 10 ms, so it is read over many plans.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The command name may hold spaces: the fields counted from its closing parenthesis.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("a command name")
        .1
        .split_whitespace()
        .collect();
    let ticks = |index: usize| fields[index].parse::<u64>().expect("a tick count");
    // utime and stime, fields 14 and 15 of proc(5); Linux reports them in USER_HZ, 100 a second.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// Times plans of one cluster of `machines` machines in the three states, and prints each
/// median wall time (the machine is shared: a mean would carry every pause of the other
/// processes), the mean CPU time per plan and per machine, and its ratio to the 20-machine
/// cluster's (`at_20`, filled by the first call).
fn one_cluster(machines: u32, now: jiff::Timestamp, at_20: &mut Vec<Duration>) {
    // Some seconds of CPU per case, so that the 10 ms ticks of `cpu_time` do not matter.
    let runs = (40_000 / machines).clamp(3, 2_000);
    let desired = one(machines, "debian13-k8s");
    let changed = one(machines, "debian13-k8s-v2");
    let nothing = Observed::nothing();
    let built = build(&desired, now);
    let cases = [
        ("from nothing", &desired, &nothing),
        ("template change", &changed, &built),
        ("converged", &desired, &built),
    ];
    for (index, (label, desired, observed)) in cases.into_iter().enumerate() {
        let label = format!("one cluster of {machines} machines, {label}");
        if !selected(&label) {
            continue;
        }
        let policy = Policy::of(desired);
        let mut wall = Vec::new();
        let mut predicted = 0;
        let cpu_before = cpu_time();
        for _ in 0..runs {
            let start = Instant::now();
            let plan = black_box(plan(desired, observed, &policy, now));
            wall.push(start.elapsed());
            predicted = plan.clusters.iter().map(|c| c.predicted.len()).sum();
        }
        let cpu_per_plan = cpu_time().saturating_sub(cpu_before) / runs;
        wall.sort();
        let per_plan = wall[wall.len() / 2];
        let per_machine = cpu_per_plan / machines;
        if at_20.len() == index {
            at_20.push(per_machine);
        }
        let ratio = at_20
            .get(index)
            .map(|first| per_machine.as_secs_f64() / first.as_secs_f64());
        println!(
            "{label}: {per_plan:?} per plan ({cpu_per_plan:?} CPU; {predicted} predicted steps), {per_machine:?} CPU per machine, {} the 20-machine cluster's",
            ratio.map_or("?".to_owned(), |r| format!("{r:.2}x")),
        );
    }
}
