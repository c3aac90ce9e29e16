//! A cluster's Nodes as the planner sees them, and the version its servers' kubelets report.
//!
//! A Node NotReady only for want of a CNI (`awaiting_network`) is told apart from one that
//! went NotReady: a kubelet reports NotReady with `NetworkPluginNotReady` from its first
//! status until a network plugin runs, so a Node whose Ready condition has not changed since
//! it registered was never Ready. One that changed later was (or lost its kubelet, which
//! Kubernetes reports as Unknown): from then on NotReady is NotReady for remediation. This
//! is read from the Node itself, so a restarted daemon or a new leader reads it the same.

use jiff::{SignedDuration, Timestamp};

use crate::model::Role;
use crate::observed::{DrainObserved, ObservedCluster, ObservedNode, Taint};
use crate::providers::kube::NodeState;
use crate::scheduling::{
    MANAGED_LABELS_ANNOTATION, MANAGED_TAINTS_ANNOTATION, ManagedKeys, OWNED_ELSEWHERE_ANNOTATIONS,
    OwnedElsewhere,
};
use crate::spec::KubeVersion;

/// How long after registering a kubelet posts its first status: a Ready condition set within
/// it has not changed since the Node registered. A kubelet's first status comes within
/// seconds (its `nodeStatusUpdateFrequency` is 10 s); a node that is Ready for less than this
/// and then loses its network is taken for one that never had it.
const FIRST_STATUS_WITHIN: SignedDuration = SignedDuration::from_mins(2);

pub(super) fn observed_node(
    node: &NodeState,
    drain: Option<DrainObserved>,
    now: Timestamp,
) -> ObservedNode {
    ObservedNode {
        ready: node.ready,
        ready_since: node.ready_since.unwrap_or(now),
        kubelet_version: node.kubelet_version.parse().ok(),
        unschedulable: node.unschedulable,
        taints: node
            .taints
            .iter()
            .map(|t| Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: t.effect.as_str().to_owned(),
            })
            .collect(),
        drain,
        pod_cidr: node.pod_cidr.as_deref().and_then(|c| c.parse().ok()),
        awaiting_network: is_awaiting_network(node),
        labels: node.labels.clone(),
        managed: ManagedKeys::from_annotations(
            annotation(node, MANAGED_LABELS_ANNOTATION),
            annotation(node, MANAGED_TAINTS_ANNOTATION),
        ),
        owned_elsewhere: OwnedElsewhere::from_annotations(
            annotation(node, OWNED_ELSEWHERE_ANNOTATIONS.0),
            annotation(node, OWNED_ELSEWHERE_ANNOTATIONS.1),
        ),
    }
}

fn annotation<'a>(node: &'a NodeState, name: &str) -> Option<&'a str> {
    node.annotations.get(name).map(String::as_str)
}

/// NotReady with `NetworkPluginNotReady`, its Ready condition unchanged since it registered.
fn is_awaiting_network(node: &NodeState) -> bool {
    if node.ready || !node.network_plugin_not_ready {
        return false;
    }
    match (node.created, node.ready_since) {
        (Some(created), Some(since)) => since.duration_since(created) <= FIRST_STATUS_WITHIN,
        _ => false,
    }
}

/// The oldest release the control planes' kubelets report (the cluster's version while an
/// upgrade by replacement is under way).
pub(super) fn servers_version(
    nodes: &[NodeState],
    observed: &ObservedCluster,
) -> Option<KubeVersion> {
    nodes
        .iter()
        .filter(|node| {
            observed
                .machines
                .get(&node.name)
                .is_some_and(|m| m.ownership.role == Role::ControlPlane)
        })
        .filter_map(|node| node.kubelet_version.parse::<KubeVersion>().ok())
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NodeName;

    fn node(ready: bool, plugin: bool, registered: &str, changed: &str) -> NodeState {
        NodeState {
            name: NodeName::from("n1"),
            ready,
            ready_since: Some(changed.parse().expect("time")),
            kubelet_version: "v1.36.2".to_owned(),
            unschedulable: false,
            taints: Vec::new(),
            roles: Vec::new(),
            addresses: Vec::new(),
            annotations: Default::default(),
            labels: Default::default(),
            pod_cidr: Some("10.60.3.0/24".to_owned()),
            created: Some(registered.parse().expect("time")),
            network_plugin_not_ready: plugin,
        }
    }

    #[test]
    fn a_node_waits_for_its_network_only_until_it_was_first_ready() {
        let now = "2026-04-29T12:00:00Z".parse().expect("time");
        let waiting = node(false, true, "2026-04-29T10:00:00Z", "2026-04-29T10:00:05Z");
        let observed = observed_node(&waiting, None, now);
        assert!(
            observed.awaiting_network,
            "NotReady since it registered, hours ago"
        );
        assert_eq!(
            observed.pod_cidr,
            Some("10.60.3.0/24".parse().expect("net"))
        );
        let was_ready = node(false, true, "2026-04-29T10:00:00Z", "2026-04-29T11:30:00Z");
        assert!(
            !observed_node(&was_ready, None, now).awaiting_network,
            "it changed since"
        );
        let dead = node(false, false, "2026-04-29T10:00:00Z", "2026-04-29T10:00:05Z");
        assert!(
            !observed_node(&dead, None, now).awaiting_network,
            "no kubelet, no plugin"
        );
        let ready = node(true, false, "2026-04-29T10:00:00Z", "2026-04-29T10:00:05Z");
        assert!(!observed_node(&ready, None, now).awaiting_network);
    }
}
