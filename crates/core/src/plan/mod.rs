//! The planner: `plan(desired, observed, policy, now) -> Plan`, a pure function. Given the
//! clusters Git declares, what exists, the fleet policy and the time, it says what to do next
//! and why, and predicts every step to convergence.
//!
//! Pure: no clock, environment, randomness or I/O (the crate has no I/O dependency, and its
//! lints deny clock and file calls). Everything it needs comes in as data, so every lifecycle
//! rule is a tested invariant of its output. The one thing it asks the machine is how many
//! cores to predict on, which changes how fast a plan comes, never what it says.
//!
//! # Guarantees
//! - Deterministic: equal inputs give equal plans (BTreeMaps, name-derived VM names).
//! - Level-triggered: every step is derived from observed facts alone and is safe to repeat;
//!   the executor runs a cluster's `steps`, re-observes and plans again.
//! - Per cluster, `steps` holds either non-disruptive steps only or one disruptive step.
//! - Clusters are independent, except that new VMs of earlier clusters (by name) take Proxmox
//!   memory first.

pub mod bound;
mod cluster;
pub mod placement;
mod removed;
mod simulate;
mod types;
mod window;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use jiff::Timestamp;

use crate::observed::{Observed, ObservedCluster};
use crate::spec::{ClusterSpec, Desired, MinorVersion};

pub use types::*;

use cluster::{Gate, Input, SpecMemo};
use placement::Capacity;

/// The fleet policy the planner applies.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// Minors clusters may run or move to (`approvedMinors`).
    pub approved_minors: Vec<MinorVersion>,
    /// Delete removed clusters and orphan VMs (`prune`).
    pub prune: bool,
    /// Some cluster file is invalid: nothing is deleted for being absent.
    pub incomplete: bool,
}

impl Policy {
    /// The policy a repository declares.
    pub fn of(desired: &Desired) -> Self {
        Policy {
            approved_minors: desired.fleet.approved_minors.clone(),
            prune: desired.fleet.prune,
            incomplete: desired.incomplete,
        }
    }
}

/// Plans the whole fleet at `now`.
pub fn plan(desired: &Desired, observed: &Observed, policy: &Policy, now: Timestamp) -> Plan {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    plan_on(desired, observed, policy, now, cores)
}

/// [`plan`], predicting on up to `threads` threads (the plan is the same on any number).
fn plan_on(
    desired: &Desired,
    observed: &Observed,
    policy: &Policy,
    now: Timestamp,
    threads: usize,
) -> Plan {
    let mut capacity = Capacity::of(observed);
    let empty = ObservedCluster::default();
    let names: BTreeSet<&String> = desired
        .clusters
        .keys()
        .chain(observed.clusters.keys())
        .collect();
    let mut clusters = Vec::new();
    let mut findings = Vec::new();
    let mut predictions = Vec::new();
    for name in names {
        let seen = observed.clusters.get(name);
        match desired.clusters.get(name) {
            Some(cluster) => {
                let (plan, prediction, orphans) = plan_cluster(
                    name,
                    &cluster.spec,
                    seen.unwrap_or(&empty),
                    policy,
                    now,
                    &mut capacity,
                );
                predictions.push((clusters.len(), prediction));
                clusters.push(plan);
                findings.extend(orphans);
            }
            None => {
                let Some(seen) = seen.filter(|c| !c.is_empty()) else {
                    continue;
                };
                if let Some(path) = desired.invalid.get(name) {
                    // Its file is there, only broken: not a removed cluster.
                    findings.push(Finding {
                        kind: FindingKind::InvalidFile,
                        cluster: name.clone(),
                        machine: None,
                        vm_id: None,
                        message: format!(
                            "cluster {name}: {path} has errors; its {} VM(s) are left as they are until the file is fixed",
                            seen.machines.len()
                        ),
                    });
                    continue;
                }
                match removed::plan(name, seen, policy, &mut capacity) {
                    removed::Removed::Delete(plan) => clusters.push(*plan),
                    removed::Removed::Report(finding) => findings.push(finding),
                }
            }
        }
    }
    let (indices, predictions): (Vec<usize>, Vec<Prediction<'_>>) = predictions.into_iter().unzip();
    let predicted = predict_all(&predictions, policy, now, threads);
    for (index, predicted) in indices.into_iter().zip(predicted) {
        let plan = &mut clusters[index];
        plan.predicted = predicted;
        if plan.phase == Phase::Ready && !plan.predicted.is_empty() {
            plan.phase = Phase::Updating;
        }
    }
    Plan {
        now,
        clusters,
        findings,
    }
}

/// What a cluster's prediction starts from: the cluster as its plan saw it, with the capacity
/// its plan saw (earlier clusters' new VMs taken out) and the steps its plan listed.
struct Prediction<'a> {
    name: &'a str,
    spec: &'a ClusterSpec,
    observed: &'a ObservedCluster,
    capacity: Capacity,
    listed: Vec<cluster::Candidate>,
}

impl Prediction<'_> {
    fn run(&self, policy: &Policy, now: Timestamp) -> Vec<Step> {
        let memo = SpecMemo::default();
        let input = Input {
            name: self.name,
            spec: self.spec,
            observed: self.observed,
            policy,
            now,
            memo: &memo,
            predicting: false,
            seen: None,
        };
        simulate::predict(&input, &self.capacity, &self.listed)
    }
}

/// Runs every cluster's prediction on up to `threads` threads, each taking the next cluster
/// not yet taken. Each prediction depends only on its own start (its capacity is a copy), so
/// the plans are the same on any number of threads; a template change across a fleet
/// predicts hundreds of batches per cluster, the bulk of a plan's time.
fn predict_all(
    predictions: &[Prediction<'_>],
    policy: &Policy,
    now: Timestamp,
    threads: usize,
) -> Vec<Vec<Step>> {
    // A converged cluster lists nothing and its prediction ends at once: threads would cost
    // more than they save (and each keeps memory of its own in the allocator).
    let with_work = predictions.iter().filter(|p| !p.listed.is_empty()).count();
    let threads = threads.min(with_work);
    if threads <= 1 {
        return predictions.iter().map(|p| p.run(policy, now)).collect();
    }
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(prediction) = predictions.get(index) else {
                return done;
            };
            done.push((index, prediction.run(policy, now)));
        }
    };
    let mut results: Vec<Vec<Step>> = vec![Vec::new(); predictions.len()];
    std::thread::scope(|scope| {
        // This thread predicts too: its allocator arena is warm, a new thread's is not.
        let workers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        let mut done = work();
        for worker in workers {
            let theirs = worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            done.extend(theirs);
        }
        for (index, predicted) in done {
            results[index] = predicted;
        }
    });
    results
}

/// Plans one desired cluster; returns its plan (without its prediction, which `plan` runs
/// for all clusters at once), what its prediction starts from, and the orphans found.
fn plan_cluster<'a>(
    name: &'a str,
    spec: &'a ClusterSpec,
    observed: &'a ObservedCluster,
    policy: &Policy,
    now: Timestamp,
    capacity: &mut Capacity,
) -> (ClusterPlan, Prediction<'a>, Vec<Finding>) {
    let memo = SpecMemo::default();
    let input = Input {
        name,
        spec,
        observed,
        policy,
        now,
        memo: &memo,
        predicting: false,
        seen: None,
    };
    let outcome = cluster::candidates(&input, capacity);
    let mut waiting_on = Vec::new();
    for candidate in &outcome.candidates {
        let step_name = candidate.step.kind();
        match &candidate.gate {
            Gate::Open => {}
            Gate::Window(opens) => waiting_on.push(Waiting {
                step: Some(step_name),
                machine: candidate.step.target.machine.clone(),
                resource: Resource::MaintenanceWindow { opens: *opens },
                since: None,
            }),
            Gate::Wait(waiting) => waiting_on.push(waiting.clone()),
        }
    }
    let prediction = Prediction {
        name,
        spec,
        observed,
        capacity: capacity.clone(),
        listed: outcome.candidates.clone(),
    };
    let steps = simulate::select(outcome.candidates, false);
    // This cluster's new VMs take their memory before the next cluster is planned.
    for step in &steps {
        if let Action::CreateMachine {
            machine,
            proxmox_node,
            ..
        } = &step.action
        {
            capacity.reserve(proxmox_node, machine.memory_mib);
        }
    }
    waiting_on.extend(outcome.waiting);
    let phase = if !outcome.blocked.is_empty() {
        Phase::Blocked
    } else if !outcome.initialised {
        if observed.machines.is_empty() {
            Phase::Pending
        } else {
            Phase::Provisioning
        }
    } else if spec.delivery.flux.is_some() && observed.flux.is_none() {
        Phase::Provisioning
    } else if steps.is_empty() && waiting_on.is_empty() {
        // Updating instead when the prediction finds steps to come (see `plan`).
        Phase::Ready
    } else {
        Phase::Updating
    };
    let plan = ClusterPlan {
        name: name.to_owned(),
        phase,
        steps,
        predicted: Vec::new(),
        blocked: outcome.blocked,
        waiting_on,
        findings: outcome.findings,
    };
    (plan, prediction, outcome.orphans)
}

/// Applies the expected effect of `step` to `observed` (its happy path: a created VM boots, a
/// joined node becomes Ready, a drain evicts everything). The lab and tests use it to play a
/// plan forward without an executor.
pub fn expected_effect(observed: &mut Observed, step: &Step, now: Timestamp) {
    let mut capacity = Capacity::of(observed);
    let cluster = observed
        .clusters
        .entry(step.target.cluster.to_string())
        .or_default();
    simulate::apply(cluster, &mut capacity, step, now, 0);
    if cluster.is_empty() {
        observed.clusters.remove(step.target.cluster.as_str());
    }
    capacity.write_back(observed);
}
