//! The planner: `plan(desired, observed, policy, now) -> Plan`, a pure function. Given the
//! clusters Git declares, what exists, the fleet policy and the time, it says what to do next
//! and why, and predicts every step to convergence.
//!
//! Pure: no clock, environment, randomness or I/O (the crate has no I/O dependency, and its
//! lints deny clock and file calls). Everything it needs comes in as data, so every lifecycle
//! rule is a tested invariant of its output. The one thing it asks the machine is how many
//! cores to predict on, which changes how fast a plan comes, never what it says.
//!
//! Its cost is linear in machines: a plan sees each machine a bounded number of times, and a
//! prediction's batch costs what the batch touches (`cargo bench --bench plan` measures
//! clusters of 20, 2,000 and 20,000 machines). A caller planning untrusted input (a pull
//! request's head) gives it a [`Budget`] with [`plan_within`].
//!
//! # Guarantees
//! - Deterministic: equal inputs give equal plans (BTreeMaps, name-derived VM names).
//! - Level-triggered: every step is derived from observed facts alone and is safe to repeat;
//!   the executor runs a cluster's `steps`, re-observes and plans again.
//! - Per cluster, `steps` holds either non-disruptive steps only or one disruptive step.
//! - Clusters are independent, except that new VMs of earlier clusters (by name) take Proxmox
//!   memory first, and that a cluster with `rollout.after` starts no disruptive step before
//!   the clusters it follows converged and soaked (as [`Policy::stages`] reports them).
//! - Within a [`Budget`], the plan is the same as without one, or [`Exceeded`] says which
//!   limit stopped it: never a partial plan.

pub mod bound;
mod cluster;
mod effects;
mod hardware_fit;
mod placement;
mod removed;
pub mod render;
mod simulate;
mod stages;
mod step_report;
mod suspension;
mod types;
mod window;

#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{Scope, ScopedJoinHandle};

use jiff::Timestamp;

use crate::observed::{Observed, ObservedCluster, StepDuration};
use crate::spec::{ClusterSpec, Desired, MinorVersion};

pub use effects::Changes;
pub use stages::{Converged, StageFacts, Stages, converged};
pub use step_report::StepReport;
pub use suspension::{Suspension, SuspensionSource};
pub use types::*;

use cluster::{Gate, Input, SpecMemo};
use placement::Capacity;
pub(crate) use types::{day_and_time, seconds};
pub(crate) use window::{
    Need, Search as WindowSearch, WindowState, open_allow, state_for as window_state,
};

/// The fleet policy the planner applies.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// Minors clusters may run or move to (`approvedMinors`).
    pub approved_minors: Vec<MinorVersion>,
    /// Delete removed clusters and orphan VMs (`prune`).
    pub prune: bool,
    /// Some cluster file is invalid: nothing is deleted for being absent.
    pub incomplete: bool,
    /// Clusters suspended at runtime (`capstan suspend`), by name: their steps are held as
    /// those of a cluster whose file says `spec.suspend: true`.
    pub suspended: BTreeMap<String, Suspension>,
    /// The clusters others follow (`rollout.after`), as last reported: a follower's disruptive
    /// steps are held until those it follows have converged at this revision and soaked.
    pub stages: Stages,
    /// The Proxmox connections whose missing resource pools capstan may create
    /// (`createPools`).
    pub pool_creating_connections: BTreeSet<String>,
}

impl Policy {
    /// The policy a repository declares.
    pub fn of(desired: &Desired) -> Self {
        Policy {
            approved_minors: desired.fleet.approved_minors.clone(),
            prune: desired.fleet.prune,
            incomplete: desired.incomplete,
            suspended: BTreeMap::new(),
            stages: Stages::default(),
            pool_creating_connections: desired
                .fleet
                .proxmox
                .iter()
                .filter(|(_, connection)| connection.create_pools)
                .map(|(name, _)| name.clone())
                .collect(),
        }
    }
}

/// How much work one plan may do: the steps its predictions hold in all (each takes a few
/// hundred bytes), and a flag another thread raises to stop it (the caller keeps the time).
#[derive(Debug)]
pub struct Budget<'a> {
    max_predicted_steps: usize,
    stop: Option<&'a AtomicBool>,
    spent: AtomicUsize,
    /// Raised by the prediction that went over, so the others stop too.
    exceeded: AtomicBool,
}

impl<'a> Budget<'a> {
    /// No limit: the reconcile loop plans validated revisions only, which are bounded.
    pub fn unlimited() -> Self {
        Budget {
            max_predicted_steps: usize::MAX,
            stop: None,
            spent: AtomicUsize::new(0),
            exceeded: AtomicBool::new(false),
        }
    }

    /// At most `max_predicted_steps` predicted steps over every cluster; stopped as soon as
    /// `stop` is raised.
    pub fn new(max_predicted_steps: usize, stop: &'a AtomicBool) -> Self {
        Budget {
            max_predicted_steps,
            stop: Some(stop),
            ..Budget::unlimited()
        }
    }

    /// Whether the plan may go on.
    fn check(&self) -> Result<(), Exceeded> {
        if self.stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
            return Err(Exceeded::Stopped);
        }
        if self.exceeded.load(Ordering::Relaxed) {
            return Err(Exceeded::Steps {
                limit: self.max_predicted_steps,
            });
        }
        Ok(())
    }

    /// Counts `steps` more predicted steps.
    fn spend(&self, steps: usize) -> Result<(), Exceeded> {
        self.check()?;
        let spent = self.spent.fetch_add(steps, Ordering::Relaxed) + steps;
        if spent > self.max_predicted_steps {
            self.exceeded.store(true, Ordering::Relaxed);
            return Err(Exceeded::Steps {
                limit: self.max_predicted_steps,
            });
        }
        Ok(())
    }

    /// How many more steps may be predicted.
    fn room(&self) -> usize {
        self.max_predicted_steps
            .saturating_sub(self.spent.load(Ordering::Relaxed))
    }
}

/// Why a plan within a [`Budget`] was not finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    /// Its predictions would hold more steps than this.
    Steps {
        /// The budget's limit.
        limit: usize,
    },
    /// The caller stopped it (its time was up).
    Stopped,
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exceeded::Steps { limit } => write!(f, "more than {limit} predicted steps"),
            Exceeded::Stopped => f.write_str("stopped before its end"),
        }
    }
}

impl std::error::Error for Exceeded {}

/// Plans the whole fleet at `now`.
pub fn plan(desired: &Desired, observed: &Observed, policy: &Policy, now: Timestamp) -> Plan {
    plan_within(desired, observed, policy, now, &Budget::unlimited())
        .expect("an unlimited budget is never exceeded")
}

/// [`plan`] within `budget`.
///
/// # Errors
/// When the predictions would hold more steps than the budget allows, or it is stopped.
pub fn plan_within(
    desired: &Desired,
    observed: &Observed,
    policy: &Policy,
    now: Timestamp,
    budget: &Budget<'_>,
) -> Result<Plan, Exceeded> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    plan_on(desired, observed, policy, now, cores, budget)
}

/// [`plan_within`], predicting on up to `threads` threads (the plan is the same on any
/// number).
fn plan_on(
    desired: &Desired,
    observed: &Observed,
    policy: &Policy,
    now: Timestamp,
    threads: usize,
    budget: &Budget<'_>,
) -> Result<Plan, Exceeded> {
    let mut capacity = Capacity::of(observed);
    let empty = ObservedCluster::default();
    let names: BTreeSet<&String> = desired
        .clusters
        .keys()
        .chain(observed.clusters.keys())
        .collect();
    let mut clusters = Vec::new();
    let mut findings = Vec::new();
    let predicted = std::thread::scope(|scope| {
        let mut predictor = Predictor::new(scope, threads, policy, now, budget);
        for name in names {
            if budget.check().is_err() {
                // The predictions stop too; `finish` says why.
                break;
            }
            let seen = observed.clusters.get(name);
            match desired.clusters.get(name) {
                Some(cluster) => {
                    let (plan, prediction, orphans) = plan_cluster(
                        name,
                        &cluster.spec,
                        (seen.unwrap_or(&empty), &observed.step_durations),
                        policy,
                        now,
                        &mut capacity,
                        budget.stop,
                    );
                    predictor.submit(clusters.len(), prediction);
                    clusters.push(plan);
                    findings.extend(orphans);
                }
                None => {
                    let Some(seen) = seen.filter(|c| !c.is_empty()) else {
                        continue;
                    };
                    if let Some(path) = desired.invalid_file_of(name) {
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
        predictor.finish()
    })?;
    for (index, predicted) in predicted {
        let plan = &mut clusters[index];
        plan.predicted = predicted;
        if plan.phase == Phase::Ready && !plan.predicted.is_empty() {
            plan.phase = Phase::Updating;
        }
    }
    Ok(Plan {
        now,
        clusters,
        findings,
    })
}

/// What a cluster's prediction starts from: the cluster as its plan saw it, with the capacity
/// its plan saw (earlier clusters' new VMs taken out) and the steps its plan listed.
struct Prediction<'a> {
    name: &'a str,
    spec: &'a ClusterSpec,
    observed: &'a ObservedCluster,
    durations: &'a BTreeMap<String, StepDuration>,
    capacity: Capacity,
    listed: Vec<cluster::Candidate>,
}

impl Prediction<'_> {
    fn run(&self, policy: &Policy, now: Timestamp, budget: &Budget<'_>) -> PredictedOne {
        let memo = SpecMemo::default();
        let input = Input {
            name: self.name,
            spec: self.spec,
            observed: self.observed,
            durations: self.durations,
            policy,
            now,
            memo: &memo,
            predicting: false,
            quiet: None,
            stop: budget.stop,
            labels_settled: false,
        };
        simulate::predict(&input, &self.capacity, &self.listed, budget)
    }
}

/// One cluster's predicted sequence, or why it was not finished.
type PredictedOne = Result<Vec<Step>, Exceeded>;

/// Predicted sequences, by the index of their cluster's plan.
type Predicted = Vec<(usize, PredictedOne)>;

/// A prediction to run, with the index of its cluster's plan.
type ToRun<'a> = (usize, Prediction<'a>);

/// Runs the predictions `waiting` hands out until the first pass is over and none is left.
/// Its lock is held while waiting, so one thread waits on the channel and the others on the
/// lock; it is released before the prediction runs.
fn run_waiting(
    waiting: &Mutex<Receiver<ToRun<'_>>>,
    policy: &Policy,
    now: Timestamp,
    budget: &Budget<'_>,
) -> Predicted {
    let mut done = Vec::new();
    loop {
        let next = waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .recv();
        let Ok((index, prediction)) = next else {
            return done;
        };
        done.push((index, prediction.run(policy, now, budget)));
    }
}

/// Runs the clusters' predictions while the first pass plans the next clusters: a template
/// change across a fleet predicts hundreds of batches per cluster, the bulk of a plan's time.
/// Each prediction depends only on its own start (its capacity is a copy), so the plan is the
/// same on any number of threads.
struct Predictor<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    to_run: Sender<ToRun<'env>>,
    waiting: Arc<Mutex<Receiver<ToRun<'env>>>>,
    /// Threads to start besides this one, once a prediction has work.
    spare: usize,
    helpers: Vec<ScopedJoinHandle<'scope, Predicted>>,
    policy: &'env Policy,
    now: Timestamp,
    budget: &'env Budget<'env>,
}

impl<'scope, 'env> Predictor<'scope, 'env> {
    fn new(
        scope: &'scope Scope<'scope, 'env>,
        threads: usize,
        policy: &'env Policy,
        now: Timestamp,
        budget: &'env Budget<'env>,
    ) -> Self {
        let (to_run, waiting) = mpsc::channel();
        Predictor {
            scope,
            to_run,
            waiting: Arc::new(Mutex::new(waiting)),
            spare: threads.saturating_sub(1),
            helpers: Vec::new(),
            policy,
            now,
            budget,
        }
    }

    fn submit(&mut self, index: usize, prediction: Prediction<'env>) {
        // A converged cluster lists nothing and its prediction ends at once: a thread would
        // cost more than it saves (and keeps memory of its own in the allocator).
        if self.helpers.len() < self.spare && !prediction.listed.is_empty() {
            let (waiting, policy, now, budget) = (
                Arc::clone(&self.waiting),
                self.policy,
                self.now,
                self.budget,
            );
            self.helpers.push(
                self.scope
                    .spawn(move || run_waiting(&waiting, policy, now, budget)),
            );
        }
        // The receiver lives until the plan is made: sending cannot fail.
        let _ = self.to_run.send((index, prediction));
    }

    /// Runs what is left on this thread too, and returns every prediction by index.
    ///
    /// # Errors
    /// When the budget was exceeded or stopped, by a prediction or before the first pass
    /// ended.
    fn finish(self) -> Result<Vec<(usize, Vec<Step>)>, Exceeded> {
        drop(self.to_run);
        let mut done = run_waiting(&self.waiting, self.policy, self.now, self.budget);
        for helper in self.helpers {
            let theirs = helper
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            done.extend(theirs);
        }
        self.budget.check()?;
        done.into_iter()
            .map(|(index, predicted)| Ok((index, predicted?)))
            .collect()
    }
}

/// Plans one desired cluster, seen as `observed` with the step durations the daemon measured;
/// returns its plan (without its prediction, which `plan` runs for all clusters at once), what
/// its prediction starts from, and the orphans found.
fn plan_cluster<'a>(
    name: &'a str,
    spec: &'a ClusterSpec,
    (observed, durations): (&'a ObservedCluster, &'a BTreeMap<String, StepDuration>),
    policy: &Policy,
    now: Timestamp,
    capacity: &mut Capacity,
    stop: Option<&AtomicBool>,
) -> (ClusterPlan, Prediction<'a>, Vec<Finding>) {
    let memo = SpecMemo::default();
    let input = Input {
        name,
        spec,
        observed,
        durations,
        policy,
        now,
        memo: &memo,
        predicting: false,
        quiet: None,
        stop,
        labels_settled: false,
    };
    let outcome = cluster::candidates(&input, capacity);
    let mut waiting_on = Vec::new();
    for candidate in &outcome.candidates {
        let step_name = candidate.step.kind();
        match &candidate.gate {
            Gate::Open => {}
            Gate::Held(resource) => waiting_on.push(Waiting {
                step: Some(step_name),
                machine: candidate.step.target.machine.clone(),
                resource: resource.clone(),
                since: None,
            }),
            Gate::Wait(waiting) => waiting_on.push(waiting.clone()),
        }
    }
    let prediction = Prediction {
        name,
        spec,
        observed,
        durations,
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
        remediation_held: outcome.remediation_held,
        suspended: suspension::of(name, spec, policy),
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
