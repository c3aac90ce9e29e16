//! What stays the same across the batches of one cluster's prediction: the desired machine
//! specs with their hashes, and the machine names derived from them.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;

use smol_str::{SmolStr, format_smolstr};

use super::placement;
use crate::model::{NodeName, Role};
use crate::observed::{FluxTarget, MachineSpec};
use crate::spec::{ClusterSpec, KubeVersion};

/// Each pool's desired machine spec and its spec hash, the control plane first.
pub(super) type PoolSpecs = Rc<[(MachineSpec, SmolStr)]>;

/// The desired machine spec of each pool (the control plane, then the worker pools in spec
/// order) and its spec hash, per target version. They are the same at every batch of a
/// prediction, so they are computed once per cluster plan. One memo serves one spec only.
#[derive(Debug, Default)]
pub(crate) struct SpecMemo {
    by_version: RefCell<Vec<(KubeVersion, PoolSpecs)>>,
    /// Machine names by pool and spec hash, by ordinal (a name is a sha1).
    names: RefCell<Vec<(String, String, Vec<NodeName>)>>,
    /// Why a VM built from one spec is outdated against a desired one, in words.
    outdated: RefCell<Vec<(MachineSpec, MachineSpec, Option<SmolStr>)>>,
    /// Where Flux gets the admin kubeconfig (`None`: no delivery).
    flux_target: OnceCell<Option<FluxTarget>>,
}

impl SpecMemo {
    pub(super) fn specs(&self, spec: &ClusterSpec, version: KubeVersion) -> PoolSpecs {
        if let Some((_, specs)) = self.by_version.borrow().iter().find(|(v, _)| *v == version) {
            return Rc::clone(specs);
        }
        let distribution = spec.kubernetes.distribution;
        let machines = std::iter::once((&spec.control_plane.machine, Role::ControlPlane)).chain(
            spec.workers
                .iter()
                .map(|pool| (&pool.machine, Role::Worker)),
        );
        let specs: PoolSpecs = machines
            .map(|(machine, role)| {
                let machine_spec = MachineSpec::new(machine, version, distribution, role);
                let hash = machine_spec.spec_hash();
                (machine_spec, hash)
            })
            .collect();
        self.by_version
            .borrow_mut()
            .push((version, Rc::clone(&specs)));
        specs
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

    /// The first of a pool's names ([`placement::machine_name`] by ordinal) that is not
    /// `taken`; the names are remembered.
    pub(super) fn next_name(
        &self,
        cluster: &str,
        pool: &str,
        hash: &str,
        taken: impl Fn(&NodeName) -> bool,
    ) -> NodeName {
        let mut names = self.names.borrow_mut();
        let index = match names.iter().position(|(p, h, _)| p == pool && h == hash) {
            Some(index) => index,
            None => {
                names.push((pool.to_owned(), hash.to_owned(), Vec::new()));
                names.len() - 1
            }
        };
        let known = &mut names[index].2;
        let mut ordinal = 0;
        loop {
            if known.len() <= ordinal {
                let next = u32::try_from(ordinal).unwrap_or(u32::MAX);
                known.push(placement::machine_name(cluster, pool, hash, next));
            }
            if !taken(&known[ordinal]) {
                return known[ordinal].clone();
            }
            ordinal += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn the_next_name_skips_taken_ones() {
        let memo = SpecMemo::default();
        let name = |ordinal| placement::machine_name("prod", "cp", "h", ordinal);
        let taken = BTreeSet::from([name(0)]);
        let next = memo.next_name("prod", "cp", "h", |n| taken.contains(n));
        assert_eq!(next, name(1));
        let taken = BTreeSet::from([name(0), name(1)]);
        let next = memo.next_name("prod", "cp", "h", |n| taken.contains(n));
        assert_eq!(next, name(2));
        assert_eq!(memo.next_name("prod", "cp", "h", |_| false), name(0));
    }
}
