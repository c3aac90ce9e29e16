//! The steps a cluster has in flight, and which steps of a new plan may start beside them.
//!
//! Each step runs in its own task, so a cluster is planned again as soon as any of its steps
//! ends, and newly ready steps on other machines start while the rest still run. The rules
//! that hold across passes:
//! - a machine never has two steps in flight;
//! - a disruptive step, or one acting on the whole cluster (no machine), runs alone: it starts
//!   only when nothing of its cluster is in flight, and nothing starts beside it.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

use crate::model::NodeName;
use crate::plan::Step;

/// One step in flight.
struct Running {
    machine: Option<NodeName>,
    alone: bool,
}

/// The concurrency slot a cluster holds while any of its steps runs: taken by its first step
/// task, shared by the steps started beside it, given back when the last one ends.
pub(super) type Slot = Arc<Mutex<Option<OwnedSemaphorePermit>>>;

/// Waits for `slot`'s permit from `limit` unless the cluster already holds it.
pub(super) async fn hold(slot: &Slot, limit: Arc<Semaphore>) {
    let mut permit = slot.lock().await;
    if permit.is_none() {
        *permit = limit.acquire_owned().await.ok();
    }
}

/// The steps of one cluster in flight, by task id.
#[derive(Default)]
pub(super) struct ClusterWork {
    steps: BTreeMap<tokio::task::Id, Running>,
    slot: Slot,
}

impl ClusterWork {
    /// The slot its step tasks share.
    pub(super) fn slot(&self) -> Slot {
        Arc::clone(&self.slot)
    }

    /// Counts `step`, run by task `id`, as in flight.
    pub(super) fn add(&mut self, id: tokio::task::Id, step: &Step) {
        let running = Running {
            machine: step.target.machine.clone(),
            alone: runs_alone(step),
        };
        self.steps.insert(id, running);
    }

    /// Forgets task `id`; returns whether the cluster has nothing in flight any more.
    pub(super) fn remove(&mut self, id: tokio::task::Id) -> bool {
        self.steps.remove(&id);
        self.steps.is_empty()
    }

    /// The steps of `planned` (a batch the planner made: independent of each other) that may
    /// start now beside what is in flight.
    pub(super) fn startable(&self, planned: &[Step]) -> Vec<Step> {
        if self.steps.is_empty() {
            return planned.to_vec();
        }
        if self.steps.values().any(|running| running.alone) {
            return Vec::new();
        }
        planned
            .iter()
            .filter(|step| !runs_alone(step))
            .filter(|step| {
                step.target.machine.as_ref().is_some_and(|machine| {
                    !self
                        .steps
                        .values()
                        .any(|running| running.machine.as_ref() == Some(machine))
                })
            })
            .cloned()
            .collect()
    }
}

/// Whether `step` must run with nothing else of its cluster in flight.
fn runs_alone(step: &Step) -> bool {
    step.disruptive || step.target.machine.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Action, Target};

    fn step(machine: Option<&str>, disruptive: bool) -> Step {
        let node = NodeName::from("w-1");
        Step {
            action: Action::Cordon { node },
            target: Target {
                cluster: "prod".to_owned(),
                machine: machine.map(NodeName::from),
                ..Target::default()
            },
            reason: String::new(),
            disruptive,
            waits_on: None,
        }
    }

    fn id_of(set: &mut tokio::task::JoinSet<()>) -> tokio::task::Id {
        set.spawn(async {}).id()
    }

    #[tokio::test]
    async fn a_busy_machine_gets_no_second_step_and_others_start() {
        let mut set = tokio::task::JoinSet::new();
        let mut work = ClusterWork::default();
        work.add(id_of(&mut set), &step(Some("w-1"), false));
        let planned = [step(Some("w-1"), false), step(Some("w-2"), false)];
        let started = work.startable(&planned);
        assert_eq!(started, vec![planned[1].clone()]);
    }

    #[tokio::test]
    async fn disruptive_and_cluster_wide_steps_run_alone() {
        let mut set = tokio::task::JoinSet::new();
        let mut work = ClusterWork::default();
        let first = id_of(&mut set);
        work.add(first, &step(Some("w-1"), false));
        // Nothing disruptive or cluster-wide starts beside a step in flight.
        assert!(work.startable(&[step(Some("cp-2"), true)]).is_empty());
        assert!(work.startable(&[step(None, false)]).is_empty());
        assert!(work.remove(first));
        let drain = step(Some("cp-2"), true);
        assert_eq!(
            work.startable(std::slice::from_ref(&drain)),
            vec![drain.clone()]
        );
        // Nothing starts beside a disruptive step in flight.
        work.add(id_of(&mut set), &drain);
        assert!(work.startable(&[step(Some("w-3"), false)]).is_empty());
    }
}
