//! What the file declares for one node, borrowed from the spec: the one source of what a node
//! carries ([`super::NodeScheduling::of`] copies it), and the check, made for every node at
//! every plan, that a node carries it and capstan's record says so, without copying anything.

use crate::model::Role;
use crate::observed::ObservedNode;
use crate::spec::scheduling::{CONTROL_PLANE_TAINT, POOL_LABEL, REGION_LABEL, ZONE_LABEL};
use crate::spec::validate::CONTROL_PLANE_POOL;
use crate::spec::{ClusterSpec, NodeTaint, TaintEffect};
use std::collections::BTreeMap;

/// No labels or taints: what a pool the spec does not hold declares.
static NOTHING: (BTreeMap<String, String>, Vec<NodeTaint>) = (BTreeMap::new(), Vec::new());

/// What the file declares for a node of one pool on one Proxmox node.
#[derive(Debug, Clone, Copy)]
pub struct Declared<'a> {
    /// The pool's own labels.
    pub labels: &'a BTreeMap<String, String>,
    /// The pool's own taints.
    pub taints: &'a [NodeTaint],
    /// capstan's labels: (key, value) for the pool, the region and the zone.
    pub capstan_labels: [(&'static str, &'a str); 3],
    /// Whether the control-plane taint is declared (a control plane that takes no workloads).
    pub control_plane_taint: bool,
}

impl<'a> Declared<'a> {
    /// What a node of `pool` (`cp` for the control plane) of `spec` on `proxmox_node` carries.
    pub fn of(spec: &'a ClusterSpec, pool: &'a str, role: Role, proxmox_node: &'a str) -> Self {
        let (labels, taints, pool) = match role {
            Role::ControlPlane => (
                &spec.control_plane.labels,
                spec.control_plane.taints.as_slice(),
                CONTROL_PLANE_POOL,
            ),
            Role::Worker => match spec.workers.iter().find(|p| p.pool == pool) {
                Some(declared) => (&declared.labels, declared.taints.as_slice(), pool),
                None => (&NOTHING.0, NOTHING.1.as_slice(), pool),
            },
        };
        Declared {
            labels,
            taints,
            capstan_labels: [
                (POOL_LABEL, pool),
                (REGION_LABEL, spec.proxmox.as_str()),
                (ZONE_LABEL, proxmox_node),
            ],
            control_plane_taint: role == Role::ControlPlane && !spec.control_planes_schedulable(),
        }
    }

    /// Every declared label, the pool's then capstan's.
    pub fn all_labels(&self) -> impl Iterator<Item = (&'a str, &'a str)> + '_ {
        self.labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(self.capstan_labels)
    }

    /// Every declared taint as (key, value, effect), the pool's then the control plane's.
    pub fn all_taints(&self) -> impl Iterator<Item = (&'a str, Option<&'a str>, TaintEffect)> + '_ {
        let control_plane = self.control_plane_taint.then_some((
            CONTROL_PLANE_TAINT,
            None,
            TaintEffect::NoSchedule,
        ));
        self.taints
            .iter()
            .map(|t| (t.key.as_str(), t.value.as_deref(), t.effect))
            .chain(control_plane)
    }

    /// Whether `node` carries what is declared and capstan's record names exactly that: then
    /// there is nothing to do on it (when no other controller owns a key there).
    pub fn carried_by(&self, node: &ObservedNode) -> bool {
        let labels = self
            .all_labels()
            .all(|(key, value)| node.labels.get(key).map(String::as_str) == Some(value));
        let taints = self.all_taints().all(|(key, value, effect)| {
            node.taints
                .iter()
                .any(|t| t.key == key && t.value.as_deref() == value && t.effect == effect.as_str())
        });
        labels && taints && self.recorded_by(node)
    }

    /// Whether the record on `node` names exactly the declared keys.
    fn recorded_by(&self, node: &ObservedNode) -> bool {
        let declared_label = |key: &str| self.all_labels().any(|(k, _)| k == key);
        let declared_taint = |id: &str| {
            id.rsplit_once(':').is_some_and(|(key, effect)| {
                self.all_taints()
                    .any(|(k, _, e)| k == key && e.as_str() == effect)
            })
        };
        let record = &node.managed;
        record.labels.len() == self.all_labels().count()
            && record.labels.iter().all(|key| declared_label(key))
            && record.taints.len() == self.all_taints().count()
            && record.taints.iter().all(|id| declared_taint(id))
    }
}
