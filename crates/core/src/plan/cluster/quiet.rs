//! Quiet machines: what a prediction keeps aside so that each batch costs what the batch
//! touches, not what the cluster holds.
//!
//! A prediction plans again after every batch, and a rollout of N machines takes some 6N
//! batches: planning every machine at every batch made a rollout of 8,000 machines take 35 s.
//! Most machines sit still through most batches: a worker that has joined, is Ready and
//! schedulable, runs, and is not being removed ([`is_quiet`]). Every rule treats such a
//! machine by its pool's counts alone, except the removal rules, which take the first of them
//! by name; so a prediction moves them out of the planned state into a [`Quiet`] that keeps
//! those counts and an ordered set per pool, and moves a machine back the moment a step acts
//! on it. `Ctx` reads them through [`Quiet`]; the plan of the real world has none.
//!
//! # Guarantees
//! - A batch planned with quiet machines aside is the batch planned with them in the state
//!   (tests compare whole predictions with planning every batch from scratch).

use std::collections::{BTreeMap, BTreeSet};

use super::View;
use super::classify::{Facts, Stale};
use crate::model::{NodeName, Role};
use crate::observed::{ObservedCluster, ObservedMachine, ObservedNode};

/// One machine kept aside, with what classifying it found.
#[derive(Debug, Clone)]
pub(crate) struct Sleeper {
    pub machine: ObservedMachine,
    pub node: ObservedNode,
    pub facts: Facts,
}

/// The quiet machines of one desired pool.
#[derive(Debug, Clone, Default)]
pub(crate) struct QuietPool {
    /// Built from the pool's spec, by name.
    pub fresh: BTreeSet<NodeName>,
    /// To be replaced (outdated or drifted), by name.
    pub stale: BTreeSet<NodeName>,
    /// How many of them live on each Proxmox node (placement spreads a pool).
    pub spread: BTreeMap<String, u32>,
}

/// The quiet machines of a cluster being predicted.
#[derive(Debug, Clone, Default)]
pub(crate) struct Quiet {
    /// Boxed: a machine and its Node are some hundreds of bytes, which a B-tree would move
    /// about at every insertion and removal.
    machines: BTreeMap<NodeName, Box<Sleeper>>,
    /// By desired pool index (the control plane's is always empty).
    pools: Vec<QuietPool>,
}

impl Quiet {
    /// How many machines are kept aside.
    pub fn len(&self) -> usize {
        self.machines.len()
    }

    /// Whether `name` is kept aside.
    pub fn contains(&self, name: &NodeName) -> bool {
        self.machines.contains_key(name)
    }

    /// The quiet machines of desired pool `index`.
    pub fn pool(&self, index: usize) -> Option<&QuietPool> {
        self.pools.get(index)
    }

    /// The view of a quiet machine, as classifying it in the state would give.
    pub fn view(&self, name: &NodeName) -> Option<View<'_>> {
        let (name, sleeper) = self.machines.get_key_value(name)?;
        let mut view = View::of(
            name,
            &sleeper.machine,
            Some(&sleeper.node),
            sleeper.facts.clone(),
        );
        view.in_pool = view.fresh;
        Some(view)
    }

    /// Moves `name` out of `state`, with the facts its last classification found.
    pub fn sleep(&mut self, state: &mut ObservedCluster, name: &NodeName, facts: Facts) {
        let (Some((name, machine)), Some(node)) =
            (state.machines.remove_entry(name), state.nodes.remove(name))
        else {
            debug_assert!(false, "{name}: only a machine with its Node is quiet");
            return;
        };
        if self.pools.len() <= facts.pool {
            self.pools.resize_with(facts.pool + 1, QuietPool::default);
        }
        let pool = &mut self.pools[facts.pool];
        *pool
            .spread
            .entry(machine.proxmox_node.to_string())
            .or_default() += 1;
        match facts.stale {
            None => pool.fresh.insert(name.clone()),
            Some(_) => pool.stale.insert(name.clone()),
        };
        self.machines.insert(
            name,
            Box::new(Sleeper {
                machine,
                node,
                facts,
            }),
        );
    }

    /// Moves `name` back into `state`, when it is kept aside.
    pub fn wake(&mut self, state: &mut ObservedCluster, name: &NodeName) {
        let Some((name, sleeper)) = self.machines.remove_entry(name) else {
            return;
        };
        let pool = &mut self.pools[sleeper.facts.pool];
        pool.fresh.remove(&name);
        pool.stale.remove(&name);
        if let Some(count) = pool.spread.get_mut(sleeper.machine.proxmox_node.as_str()) {
            *count -= 1;
            if *count == 0 {
                pool.spread.remove(sleeper.machine.proxmox_node.as_str());
            }
        }
        let Sleeper { machine, node, .. } = *sleeper;
        state.nodes.insert(name.clone(), node);
        state.machines.insert(name, machine);
    }

    /// Moves every machine back into `state` (the facts no longer hold: a new version).
    pub fn wake_all(&mut self, state: &mut ObservedCluster) {
        for (name, sleeper) in std::mem::take(&mut self.machines) {
            let Sleeper { machine, node, .. } = *sleeper;
            state.nodes.insert(name.clone(), node);
            state.machines.insert(name, machine);
        }
        self.pools.clear();
    }
}

/// Whether a view may be kept aside: a worker of a desired pool that has joined, is Ready,
/// schedulable and not being removed, runs with its guest agent answering and no Proxmox task,
/// was prepared, and is either built from the spec or to be replaced for being outdated or
/// drifted (not kept by the replacement guard: a surplus must never take one). Such a machine produces no step, wait or finding of its own until it is chosen to
/// leave; the rules see it through its pool's counts.
pub(super) fn is_quiet(view: &View<'_>, desired_pool: bool) -> bool {
    let machine = view.machine;
    let settled_node = view.node.is_some_and(|node| !node.is_out_of_service());
    desired_pool
        && view.role() == Role::Worker
        && view.is_counted()
        && settled_node
        && machine.is_running()
        && machine.guest_agent
        && machine.task.is_none()
        && view.prepared
        && !view.guarded
        && matches!(
            view.stale,
            None | Some(Stale::Outdated) | Some(Stale::Drifted(_))
        )
}
