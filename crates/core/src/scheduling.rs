//! The labels and taints each node should carry, and how capstan keeps them without taking
//! over anyone else's.
//!
//! A node gets, from its pool (or the control plane): the pool's labels and taints, capstan's
//! own labels (`capstan.dev/pool`; `topology.kubernetes.io/region`, the Proxmox connection;
//! `topology.kubernetes.io/zone`, the Proxmox node its VM runs on) and, on a control plane
//! that takes no workloads, the control-plane taint. Taints and the labels a kubelet may set on itself go through the
//! node's registration (its distribution's configuration), so no pod lands before its taint;
//! the rest goes through the API once the node has joined ([`NodeScheduling::registration`]).
//!
//! # Guarantees
//! - capstan is authoritative only for the keys it set: it records them on each Node
//!   ([`MANAGED_LABELS_ANNOTATION`], [`MANAGED_TAINTS_ANNOTATION`]), removes a key it set that
//!   the file dropped, and never touches a key it did not set and the file does not declare
//!   (a label added with `kubectl label` stays). A key the file declares is capstan's: it is
//!   set to the declared value and recorded. A restarted daemon or a new leader reads the
//!   record from the Node, not from memory.
//! - A change is applied in place ([`relabel`] gives the `label-nodes` step's work per node);
//!   labels and taints are no part of a machine's spec hash, so they never replace a machine.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

mod declared;

pub use declared::Declared;

use crate::model::{NodeName, Role};
pub use crate::node_keys::{
    MANAGED_LABELS_ANNOTATION, MANAGED_TAINTS_ANNOTATION, ManagedKeys, OWNED_ELSEWHERE_ANNOTATIONS,
    OwnedElsewhere,
};
use crate::observed::{ObservedNode, Taint};
use crate::spec::scheduling::{SchedulingWays, is_kubelet_label};
use crate::spec::{ClusterSpec, NodeTaint};

/// The labels and taints capstan gives one node.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeScheduling {
    /// Every label capstan sets, by key.
    pub labels: BTreeMap<String, String>,
    /// Every taint capstan sets.
    pub taints: Vec<NodeTaint>,
}

/// What a node registers with (its distribution's configuration): the rest of its
/// [`NodeScheduling`] is set through the API once it has joined.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Registration {
    /// Labels the kubelet sets on itself as it registers (only keys NodeRestriction allows).
    pub labels: BTreeMap<String, String>,
    /// Taints it registers with.
    pub taints: Vec<NodeTaint>,
}

impl NodeScheduling {
    /// The worker pool the node is of (its `capstan.dev/pool` label), `None` for a control
    /// plane: whose patches it takes.
    pub fn worker_pool(&self) -> Option<&str> {
        self.labels
            .get(crate::spec::scheduling::POOL_LABEL)
            .map(String::as_str)
            .filter(|pool| *pool != crate::spec::validate::CONTROL_PLANE_POOL)
    }

    /// What a node of `pool` (`cp` for the control plane) of `spec` carries, its VM on
    /// Proxmox node `proxmox_node`.
    pub fn of(spec: &ClusterSpec, pool: &str, role: Role, proxmox_node: &str) -> Self {
        Declared::of(spec, pool, role, proxmox_node).into()
    }

    /// What goes through the node's registration under `ways`: every taint, and the labels a
    /// kubelet may set on itself where the distribution registers labels.
    pub fn registration(&self, ways: &SchedulingWays) -> Registration {
        let labels = if ways.registers_labels {
            self.labels
                .iter()
                .filter(|(key, _)| is_kubelet_label(key))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        } else {
            BTreeMap::new()
        };
        Registration {
            labels,
            taints: self.taints.clone(),
        }
    }

    /// The keys capstan records on the node for what it sets.
    pub fn managed(&self) -> ManagedKeys {
        ManagedKeys {
            labels: self.labels.keys().cloned().collect(),
            taints: self.taints.iter().map(taint_id).collect(),
        }
    }
}

/// A taint as the record names it: `key:Effect` (a node carries one taint per key and effect).
pub fn taint_id(taint: &NodeTaint) -> String {
    format!("{}:{}", taint.key, taint.effect)
}

/// [`taint_id`] of a taint as observed on a Node.
fn observed_id(taint: &Taint) -> String {
    format!("{}:{}", taint.key, taint.effect)
}

/// Whether an observed taint is `wanted`, value and all.
fn is_same(observed: &Taint, wanted: &NodeTaint) -> bool {
    observed.key == wanted.key
        && observed.value == wanted.value
        && observed.effect == wanted.effect.as_str()
}

/// The keys of `desired` another controller owns on `node`, whose value there differs from
/// the declared one: capstan leaves them (see [`relabel`]), and the plan says so.
pub fn held_elsewhere(desired: &NodeScheduling, node: &ObservedNode) -> Vec<String> {
    let owned = &node.owned_elsewhere;
    let labels = desired
        .labels
        .iter()
        .filter(|(key, value)| owned.labels.contains(*key) && node.labels.get(*key) != Some(value))
        .map(|(key, _)| key.clone());
    let declared: BTreeSet<&str> = desired.taints.iter().map(|t| t.key.as_str()).collect();
    let taints = node
        .taints
        .iter()
        .filter(|t| owned.taints.contains(&t.key))
        .filter(|t| !desired.taints.iter().any(|wanted| is_same(t, wanted)))
        .map(|t| t.key.clone())
        .chain(
            declared
                .into_iter()
                .filter(|key| owned.taints.contains(*key))
                .filter(|key| !node.taints.iter().any(|t| t.key == *key))
                .map(str::to_owned),
        );
    let mut keys: Vec<String> = labels.chain(taints).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// What the `label-nodes` step changes on one Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Relabel {
    /// The Node.
    pub node: NodeName,
    /// Labels to add or change, with their values.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub set_labels: BTreeMap<String, String>,
    /// Labels capstan set that the file no longer declares.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove_labels: Vec<String>,
    /// Taints to add, or to change the value of.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set_taints: Vec<NodeTaint>,
    /// Taints (`key:Effect`) capstan set that the file no longer declares.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove_taints: Vec<String>,
    /// What capstan records as its own on the Node from now on.
    pub managed: ManagedKeys,
}

impl Relabel {
    /// Everything of `scheduling` on a Node that just registered with part of it (the rest
    /// goes through the API now), and capstan's record of it: what `init-control-plane` and
    /// `join-node` do once the Node exists. Idempotent, and it removes nothing.
    pub fn whole(node: &NodeName, scheduling: &NodeScheduling) -> Self {
        Relabel {
            node: node.clone(),
            set_labels: scheduling.labels.clone(),
            remove_labels: Vec::new(),
            set_taints: scheduling.taints.clone(),
            remove_taints: Vec::new(),
            managed: scheduling.managed(),
        }
    }

    /// Whether any label changes (not only the record).
    pub fn changes_labels(&self) -> bool {
        !self.set_labels.is_empty() || !self.remove_labels.is_empty()
    }

    /// Whether any taint changes.
    pub fn changes_taints(&self) -> bool {
        !self.set_taints.is_empty() || !self.remove_taints.is_empty()
    }

    /// Applies the change to an observed Node, as the step does to the real one.
    pub fn apply_to(&self, node: &mut ObservedNode) {
        for key in &self.remove_labels {
            node.labels.remove(key);
        }
        node.labels.extend(self.set_labels.clone());
        node.taints.retain(|taint| {
            let id = observed_id(taint);
            !self.remove_taints.contains(&id) && !self.set_taints.iter().any(|t| taint_id(t) == id)
        });
        node.taints.extend(self.set_taints.iter().map(|t| Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect.as_str().to_owned(),
        }));
        node.managed = self.managed.clone();
    }
}

/// What must change on `node` (named `name`) for it to carry `desired`, or `None` when it
/// does and capstan's record says so.
pub fn relabel(name: &NodeName, desired: &NodeScheduling, node: &ObservedNode) -> Option<Relabel> {
    let desired: &NodeScheduling = &without_owned_elsewhere(desired, &node.owned_elsewhere);
    let set_labels: BTreeMap<String, String> = desired
        .labels
        .iter()
        .filter(|(key, value)| node.labels.get(*key) != Some(*value))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let remove_labels: Vec<String> = node
        .managed
        .labels
        .iter()
        .filter(|key| !desired.labels.contains_key(*key) && node.labels.contains_key(*key))
        .filter(|key| !node.owned_elsewhere.labels.contains(*key))
        .cloned()
        .collect();
    let set_taints: Vec<NodeTaint> = desired
        .taints
        .iter()
        .filter(|wanted| !node.taints.iter().any(|t| is_same(t, wanted)))
        .cloned()
        .collect();
    let wanted: BTreeSet<String> = desired.taints.iter().map(taint_id).collect();
    let remove_taints: Vec<String> = node
        .taints
        .iter()
        .map(observed_id)
        .filter(|id| node.managed.taints.contains(id) && !wanted.contains(id))
        .filter(|id| {
            let key = id.rsplit_once(':').map_or(id.as_str(), |(key, _)| key);
            !node.owned_elsewhere.taints.contains(key)
        })
        .collect();
    let managed = desired.managed();
    let unchanged = set_labels.is_empty()
        && remove_labels.is_empty()
        && set_taints.is_empty()
        && remove_taints.is_empty()
        && managed == node.managed;
    (!unchanged).then(|| Relabel {
        node: name.clone(),
        set_labels,
        remove_labels,
        set_taints,
        remove_taints,
        managed,
    })
}

/// `desired` without the keys another controller owns.
fn without_owned_elsewhere<'a>(
    desired: &'a NodeScheduling,
    owned: &OwnedElsewhere,
) -> Cow<'a, NodeScheduling> {
    if owned.is_empty() {
        // The usual case, at every plan of every node: no copy.
        return Cow::Borrowed(desired);
    }
    Cow::Owned(NodeScheduling {
        labels: desired
            .labels
            .iter()
            .filter(|(key, _)| !owned.labels.contains(*key))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        taints: desired
            .taints
            .iter()
            .filter(|t| !owned.taints.contains(&t.key))
            .cloned()
            .collect(),
    })
}

/// What a `label-nodes` step does, in words: `in place, no machine replaced: labels change
/// on 3 nodes, taints change on 1 node`.
pub fn in_place_summary(nodes: &[Relabel]) -> String {
    let labels = nodes.iter().filter(|n| n.changes_labels()).count();
    let taints = nodes.iter().filter(|n| n.changes_taints()).count();
    let plural = |count: usize| if count == 1 { "node" } else { "nodes" };
    let mut parts = Vec::new();
    if labels > 0 {
        parts.push(format!("labels change on {labels} {}", plural(labels)));
    }
    if taints > 0 {
        parts.push(format!("taints change on {taints} {}", plural(taints)));
    }
    if parts.is_empty() {
        parts.push(format!(
            "capstan records the keys it set on {} {}",
            nodes.len(),
            plural(nodes.len())
        ));
    }
    format!("in place, no machine replaced: {}", parts.join(", "))
}

impl From<Declared<'_>> for NodeScheduling {
    fn from(declared: Declared<'_>) -> Self {
        NodeScheduling {
            labels: declared
                .all_labels()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            taints: declared
                .all_taints()
                .map(|(key, value, effect)| NodeTaint {
                    key: key.to_owned(),
                    value: value.map(str::to_owned),
                    effect,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests;
