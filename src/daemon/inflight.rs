//! The steps a cluster has in flight, and which steps of a new plan may start beside them.
//!
//! Each step runs in its own task, so a cluster is planned again as soon as any of its steps
//! ends, and newly ready steps on other machines start while the rest still run: a worker
//! prepares while the first control plane runs `kubeadm init`, workers join while a control
//! plane joins. A plan is made from an observation that does not show what the steps in flight
//! are doing, so only steps whose effects cannot collide with them start beside them:
//! - a machine never has two steps in flight;
//! - only machine steps that build (create, prepare, init, join) start beside others; every
//!   other step (disruptive, cluster-wide, removal, upgrade) runs alone: it starts only when
//!   nothing of its cluster is in flight, and nothing starts beside it;
//! - control-plane membership changes one at a time: no `init`/control-plane `join` beside
//!   another (the plan, not seeing the one in flight, would count that member as present);
//! - no `create-machine` beside another: the plan may not see the VM being cloned yet, and
//!   would count the pool short and clone again.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

use crate::model::{NodeName, Role};
use crate::plan::{Action, Step};

/// How a step may share its cluster with other steps in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Nothing else of its cluster runs beside it.
    Alone,
    /// `init-control-plane` or a control plane's `join-node`.
    Membership,
    /// `create-machine`.
    Create,
    /// `prepare-node` or a worker's `join-node`: touches only its own machine.
    Own,
}

fn kind_of(step: &Step) -> Kind {
    if step.disruptive || step.target.machine.is_none() {
        return Kind::Alone;
    }
    match &step.action {
        Action::CreateMachine { .. } => Kind::Create,
        Action::InitControlPlane { .. }
        | Action::JoinNode {
            role: Role::ControlPlane,
            ..
        } => Kind::Membership,
        Action::PrepareNode { .. }
        | Action::JoinNode {
            role: Role::Worker, ..
        } => Kind::Own,
        _ => Kind::Alone,
    }
}

/// One step in flight: what the rules need of it.
pub(super) struct InFlight {
    machine: Option<NodeName>,
    kind: Kind,
}

impl InFlight {
    pub(super) fn of(step: &Step) -> Self {
        InFlight {
            machine: step.target.machine.clone(),
            kind: kind_of(step),
        }
    }
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
    steps: BTreeMap<tokio::task::Id, InFlight>,
    slot: Slot,
}

impl ClusterWork {
    /// The slot its step tasks share.
    pub(super) fn slot(&self) -> Slot {
        Arc::clone(&self.slot)
    }

    /// Counts `step`, run by task `id`, as in flight.
    pub(super) fn add(&mut self, id: tokio::task::Id, step: InFlight) {
        self.steps.insert(id, step);
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
        let running = |kind: Kind| self.steps.values().any(|r| r.kind == kind);
        if running(Kind::Alone) {
            return Vec::new();
        }
        let busy = |machine: &NodeName| {
            self.steps
                .values()
                .any(|r| r.machine.as_ref() == Some(machine))
        };
        planned
            .iter()
            .filter(|step| match kind_of(step) {
                Kind::Alone => false,
                Kind::Membership => !running(Kind::Membership),
                Kind::Create => !running(Kind::Create),
                Kind::Own => true,
            })
            .filter(|step| step.target.machine.as_ref().is_some_and(|m| !busy(m)))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{MachineRef, Target};

    fn machine(name: &str) -> MachineRef {
        MachineRef {
            name: NodeName::from(name),
            vm_id: None,
            proxmox_node: "pve1".into(),
        }
    }

    fn step(name: &str, action: Action, disruptive: bool) -> Step {
        Step {
            action,
            target: Target {
                cluster: "prod".into(),
                machine: Some(NodeName::from(name)),
                ..Target::default()
            },
            reason: String::new(),
            disruptive,
            waits_on: None,
        }
    }

    fn join(name: &str, role: Role) -> Step {
        let endpoint = crate::spec::Endpoint {
            host: "k8s-prod.lab.example".to_owned(),
            address: [10, 0, 0, 10].into(),
            port: 6443,
        };
        let action = Action::JoinNode {
            machine: machine(name),
            role,
            endpoint,
            scheduling: Default::default(),
        };
        step(name, action, false)
    }

    fn prepare(name: &str) -> Step {
        let version = "1.36.2".parse().expect("a version");
        let action = Action::PrepareNode {
            machine: machine(name),
            version,
        };
        step(name, action, false)
    }

    fn drain(name: &str) -> Step {
        let action = Action::Cordon {
            node: NodeName::from(name),
        };
        step(name, action, true)
    }

    fn running(work: &mut ClusterWork, set: &mut tokio::task::JoinSet<()>, step: &Step) {
        work.add(set.spawn(async {}).id(), InFlight::of(step));
    }

    #[tokio::test]
    async fn a_busy_machine_gets_no_second_step_and_others_start() {
        let mut set = tokio::task::JoinSet::new();
        let mut work = ClusterWork::default();
        running(&mut work, &mut set, &prepare("w-1"));
        let planned = [join("w-1", Role::Worker), join("w-2", Role::Worker)];
        assert_eq!(work.startable(&planned), vec![planned[1].clone()]);
    }

    #[tokio::test]
    async fn control_planes_change_membership_one_at_a_time() {
        let mut set = tokio::task::JoinSet::new();
        let mut work = ClusterWork::default();
        running(&mut work, &mut set, &join("cp-2", Role::ControlPlane));
        // The plan does not see cp-2 joining: it would let cp-3 join too.
        let planned = [join("cp-3", Role::ControlPlane), prepare("w-1")];
        assert_eq!(work.startable(&planned), vec![planned[1].clone()]);
    }

    #[tokio::test]
    async fn disruptive_steps_run_alone() {
        let mut set = tokio::task::JoinSet::new();
        let mut work = ClusterWork::default();
        let first = set.spawn(async {}).id();
        work.add(first, InFlight::of(&prepare("w-1")));
        // Nothing disruptive starts beside a step in flight.
        assert!(work.startable(&[drain("cp-2")]).is_empty());
        assert!(work.remove(first));
        let drain = drain("cp-2");
        assert_eq!(
            work.startable(std::slice::from_ref(&drain)),
            vec![drain.clone()]
        );
        // Nothing starts beside a disruptive step in flight.
        running(&mut work, &mut set, &drain);
        assert!(work.startable(&[prepare("w-3")]).is_empty());
    }
}
