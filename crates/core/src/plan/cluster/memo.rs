//! What stays the same across the batches of one cluster's prediction: the desired machine
//! specs with their hashes, and the machine names derived from them.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use smol_str::{SmolStr, format_smolstr};

use jiff::Timestamp;

use super::super::window::{self, Need, WindowState};
use super::placement;
use crate::model::{NodeName, Role};
use crate::observed::{FluxTarget, MachineSpec};
use crate::scheduling::NodeScheduling;
use crate::spec::{ClusterSpec, KubeVersion};

/// Each pool's desired machine spec and its spec hash, the control plane first.
pub(super) type PoolSpecs = Rc<[(MachineSpec, SmolStr)]>;

/// The desired machine spec of each pool (the control plane, then the worker pools in spec
/// order) and its spec hash, per target version. They are the same at every batch of a
/// prediction, so they are computed once per cluster plan. One memo serves one spec only.
#[derive(Debug, Default)]
pub(crate) struct SpecMemo {
    by_version: RefCell<Vec<(KubeVersion, PoolSpecs)>>,
    /// Machine names by pool and spec hash (a name is a sha1).
    names: RefCell<Names>,
    /// Why a VM built from one spec is outdated against a desired one, in words.
    outdated: RefCell<Vec<(MachineSpec, MachineSpec, Option<SmolStr>)>>,
    /// Where Flux gets the admin kubeconfig (`None`: no delivery).
    flux_target: OnceCell<Option<FluxTarget>>,
    /// The maintenance windows at the plan's time (the same at every batch), by what a step
    /// needs of them (a few measured durations: one per disruptive action).
    windows: RefCell<Vec<(Option<Need>, Rc<WindowState>)>>,
    /// What a node carries, by pool and Proxmox node: the same for every node of a pool on one
    /// Proxmox node, asked of every node at every batch.
    scheduling: RefCell<HashMap<(SmolStr, Role, SmolStr), Arc<NodeScheduling>>>,
}

impl SpecMemo {
    pub(super) fn specs(&self, spec: &ClusterSpec, version: KubeVersion) -> PoolSpecs {
        if let Some((_, specs)) = self.by_version.borrow().iter().find(|(v, _)| *v == version) {
            return Rc::clone(specs);
        }
        let machines = std::iter::once((None, &spec.control_plane.machine, Role::ControlPlane))
            .chain(
                spec.workers
                    .iter()
                    .map(|pool| (Some(pool.pool.as_str()), &pool.machine, Role::Worker)),
            );
        let specs: PoolSpecs = machines
            .map(|(pool, machine, role)| {
                let machine_spec = MachineSpec::for_cluster(spec, pool, machine, version, role);
                let hash = machine_spec.spec_hash();
                (machine_spec, hash)
            })
            .collect();
        self.by_version
            .borrow_mut()
            .push((version, Rc::clone(&specs)));
        specs
    }

    /// The state of the maintenance windows at `now` for a step that `needs` this long (one
    /// memo serves one plan's time).
    pub(super) fn window(
        &self,
        spec: &ClusterSpec,
        now: Timestamp,
        needs: Option<Need>,
        stop: Option<&AtomicBool>,
    ) -> Rc<WindowState> {
        if let Some((_, state)) = self.windows.borrow().iter().find(|(n, _)| *n == needs) {
            return Rc::clone(state);
        }
        let state = Rc::new(window::state_for(
            spec,
            now,
            needs,
            &window::Search::new(stop),
        ));
        self.windows.borrow_mut().push((needs, Rc::clone(&state)));
        state
    }

    /// What a node of `pool` (as `role`) on Proxmox node `proxmox_node` carries.
    pub(super) fn scheduling(
        &self,
        spec: &ClusterSpec,
        pool: &SmolStr,
        role: Role,
        proxmox_node: &SmolStr,
    ) -> Arc<NodeScheduling> {
        let key = (pool.clone(), role, proxmox_node.clone());
        if let Some(known) = self.scheduling.borrow().get(&key) {
            return Arc::clone(known);
        }
        let scheduling = Arc::new(NodeScheduling::of(spec, pool, role, proxmox_node));
        self.scheduling
            .borrow_mut()
            .insert(key, Arc::clone(&scheduling));
        scheduling
    }

    /// The Secret Flux reads the admin kubeconfig from, when the spec delivers to Flux.
    pub(super) fn flux_target(&self, cluster: &str, spec: &ClusterSpec) -> Option<&FluxTarget> {
        self.flux_target
            .get_or_init(|| {
                let flux = spec.delivery.flux.as_ref()?;
                Some(FluxTarget {
                    cluster: flux.cluster.clone(),
                    namespace: flux.namespace.clone(),
                    secret_name: flux.secret_name_for(cluster),
                })
            })
            .as_ref()
    }

    /// Why a VM built from `built` is outdated against `desired`, in words ("outdated:
    /// template a → b"); `None` when the specs do not differ. Remembered: the outdated
    /// members of a pool were mostly built from one spec, and a prediction words why at
    /// every step that replaces one.
    pub(super) fn outdated(&self, built: &MachineSpec, desired: &MachineSpec) -> Option<SmolStr> {
        let mut known = self.outdated.borrow_mut();
        if let Some((.., words)) = known.iter().find(|(b, d, _)| b == built && d == desired) {
            return words.clone();
        }
        let differences = built.differences(desired);
        let words = (!differences.is_empty())
            .then(|| format_smolstr!("outdated: {}", differences.join(", ")));
        known.push((built.clone(), desired.clone(), words.clone()));
        words
    }

    /// The first `count` of a pool's names ([`placement::machine_name`] by ordinal) that do
    /// not `exist`, in ordinal order.
    ///
    /// # Assumptions
    /// Between two calls for a pool, a name that stops existing is told with [`Self::freed`]
    /// (the prediction does; the plan of the real world asks once per pool): then a call costs
    /// what it returns, not every name of the pool before them.
    pub(super) fn new_names(
        &self,
        cluster: &str,
        pool: &str,
        hash: &str,
        count: usize,
        exists: impl Fn(&NodeName) -> bool,
    ) -> Vec<NodeName> {
        let mut names = self.names.borrow_mut();
        let Names { pools, by_name } = &mut *names;
        let index = match pools.iter().position(|p| p.pool == pool && p.hash == hash) {
            Some(index) => index,
            None => {
                pools.push(PoolNames {
                    pool: pool.to_owned(),
                    hash: hash.to_owned(),
                    ..PoolNames::default()
                });
                pools.len() - 1
            }
        };
        let names = &mut pools[index];
        let mut out = Vec::with_capacity(count);
        // Two ordinals may share a name (five base-36 characters): never hand one out twice.
        let mut given = HashSet::with_capacity(count);
        let mut take = |name: &NodeName, out: &mut Vec<NodeName>| {
            if given.insert(name.clone()) {
                out.push(name.clone());
            }
        };
        // Below the floor: the names freed since they were passed.
        let mut taken_again = Vec::new();
        for &ordinal in &names.freed {
            if out.len() == count {
                break;
            }
            let name = &names.known[ordinal];
            if exists(name) {
                taken_again.push(ordinal);
            } else {
                take(name, &mut out);
            }
        }
        for ordinal in taken_again {
            names.freed.remove(&ordinal);
        }
        let mut ordinal = names.floor;
        while out.len() < count {
            if names.known.len() <= ordinal {
                let next = u32::try_from(ordinal).unwrap_or(u32::MAX);
                let name = placement::machine_name(cluster, pool, hash, next);
                by_name.entry(name.clone()).or_insert((index, ordinal));
                names.known.push(name);
            }
            let name = &names.known[ordinal];
            if exists(name) {
                if ordinal == names.floor {
                    names.floor += 1;
                }
            } else {
                take(name, &mut out);
            }
            ordinal += 1;
        }
        out
    }

    /// Tells that the machine `name` no longer exists (a prediction destroyed it), so that
    /// [`Self::new_names`] hands its name out again.
    pub(crate) fn freed(&self, name: &NodeName) {
        let mut names = self.names.borrow_mut();
        let Names { pools, by_name } = &mut *names;
        if let Some(&(index, ordinal)) = by_name.get(name)
            && ordinal < pools[index].floor
        {
            pools[index].freed.insert(ordinal);
        }
    }
}

/// The machine names handed out, per pool and spec hash.
#[derive(Debug, Default)]
struct Names {
    pools: Vec<PoolNames>,
    /// Each known name's pool (index in `pools`) and its first ordinal.
    by_name: HashMap<NodeName, (usize, usize)>,
}

/// The names of one pool and spec hash.
#[derive(Debug, Default)]
struct PoolNames {
    pool: String,
    hash: String,
    /// By ordinal.
    known: Vec<NodeName>,
    /// Every ordinal below it existed when last asked, or is in `freed`.
    floor: usize,
    /// Ordinals below `floor` whose machine was destroyed since.
    freed: BTreeSet<usize>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn new_names_are_the_first_free_ordinals_and_freed_ones_come_back() {
        let memo = SpecMemo::default();
        let name = |ordinal| placement::machine_name("prod", "cp", "h", ordinal);
        let mut existing = BTreeSet::from([name(1)]);
        let names = memo.new_names("prod", "cp", "h", 2, |n| existing.contains(n));
        assert_eq!(names, [name(0), name(2)]);
        existing.extend(names);
        existing.insert(name(4));
        let names = memo.new_names("prod", "cp", "h", 2, |n| existing.contains(n));
        assert_eq!(names, [name(3), name(5)]);
        existing.extend(names);
        // Ordinals 0 to 5 are below the floor now: a destroyed one is told.
        existing.remove(&name(1));
        memo.freed(&name(1));
        let names = memo.new_names("prod", "cp", "h", 2, |n| existing.contains(n));
        assert_eq!(names, [name(1), name(6)]);
    }
}
