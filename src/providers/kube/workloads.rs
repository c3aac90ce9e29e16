//! Pods and PodDisruptionBudgets as a drain simulation needs them ([`Workloads`]), read from
//! the wire types: each pod's node, labels, readiness and controlling owner (a mirror pod is
//! owned by its `Node`), each budget's selector, rule and the status its disruption
//! controller computed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::drain::MIRROR_ANNOTATION;
use crate::model::NodeName;
use crate::workloads::{DisruptionBudget, IntOrPercent, ObservedPod};

/// What runs on a cluster, for drain simulation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workloads {
    /// The pods bound to each node, sorted by namespace and name.
    pub pods: BTreeMap<NodeName, Vec<ObservedPod>>,
    /// Every PodDisruptionBudget, sorted by namespace and name.
    pub budgets: Vec<DisruptionBudget>,
}

impl Workloads {
    /// Groups `pods` by node (pods not scheduled yet, or finished, take no part in a drain)
    /// and reads `budgets`.
    pub(crate) fn from_wire(pods: &[Pod], budgets: &[PodDisruptionBudget]) -> Self {
        let mut by_node: BTreeMap<NodeName, Vec<ObservedPod>> = BTreeMap::new();
        for (node, pod) in pods.iter().filter_map(observed_pod) {
            by_node.entry(node).or_default().push(pod);
        }
        for pods in by_node.values_mut() {
            pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        }
        let mut budgets: Vec<DisruptionBudget> = budgets.iter().map(budget).collect();
        budgets.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Workloads {
            pods: by_node,
            budgets,
        }
    }
}

fn observed_pod(pod: &Pod) -> Option<(NodeName, ObservedPod)> {
    let spec = pod.spec.as_ref()?;
    let node = spec.node_name.clone().filter(|n| !n.is_empty())?;
    let status = pod.status.as_ref();
    let finished = status
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|phase| matches!(phase, "Succeeded" | "Failed"));
    if finished {
        return None;
    }
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let metadata = &pod.metadata;
    let is_mirror = metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION));
    let controller = metadata
        .owner_references
        .iter()
        .flatten()
        .find(|owner| owner.controller == Some(true))
        .map(|owner| owner.kind.clone());
    let owner_kind = if is_mirror {
        Some("Node".to_owned())
    } else {
        controller
    };
    Some((
        NodeName(node.into()),
        ObservedPod {
            namespace: metadata.namespace.clone().unwrap_or_default(),
            name: metadata.name.clone().unwrap_or_default(),
            labels: metadata.labels.clone().unwrap_or_default(),
            ready,
            owner_kind,
        },
    ))
}

fn int_or_percent(value: &IntOrString) -> IntOrPercent {
    match value {
        IntOrString::Int(count) => IntOrPercent::Count(u32::try_from(*count).unwrap_or(0)),
        IntOrString::String(text) => IntOrPercent::Percent(text.clone()),
    }
}

fn budget(pdb: &PodDisruptionBudget) -> DisruptionBudget {
    let spec = pdb.spec.as_ref();
    let status = pdb.status.as_ref();
    let count = |value: i32| u32::try_from(value).unwrap_or(0);
    DisruptionBudget {
        namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
        name: pdb.metadata.name.clone().unwrap_or_default(),
        match_labels: spec
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| s.match_labels.clone())
            .unwrap_or_default(),
        min_available: spec
            .and_then(|s| s.min_available.as_ref())
            .map(int_or_percent),
        max_unavailable: spec
            .and_then(|s| s.max_unavailable.as_ref())
            .map(int_or_percent),
        current_healthy: status.and_then(|s| s.current_healthy).map(count),
        disruptions_allowed: status.and_then(|s| s.disruptions_allowed).map(count),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).expect("a pod")
    }

    #[test]
    fn pods_are_grouped_by_node_with_their_controller_and_readiness() {
        let pods = [
            pod(serde_json::json!({
                "metadata": {"namespace": "shop", "name": "web-1", "labels": {"app": "web"},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                  "name": "web-7f", "uid": "1", "controller": true}]},
                "spec": {"nodeName": "w1", "containers": []},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
            })),
            pod(serde_json::json!({
                "metadata": {"namespace": "kube-system", "name": "etcd-w1",
                             "annotations": {"kubernetes.io/config.mirror": "x"}},
                "spec": {"nodeName": "w1", "containers": []},
                "status": {"phase": "Running"},
            })),
            pod(serde_json::json!({
                "metadata": {"namespace": "shop", "name": "pending"},
                "spec": {"containers": []},
            })),
            pod(serde_json::json!({
                "metadata": {"namespace": "shop", "name": "job-done"},
                "spec": {"nodeName": "w1", "containers": []},
                "status": {"phase": "Succeeded"},
            })),
        ];
        let budget: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "shop", "name": "web"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}},
            "status": {"currentHealthy": 3, "desiredHealthy": 2, "disruptionsAllowed": 1,
                       "expectedPods": 3},
        }))
        .expect("a budget");
        let workloads = Workloads::from_wire(&pods, &[budget]);
        let on_w1 = &workloads.pods[&NodeName("w1".into())];
        assert_eq!(workloads.pods.len(), 1, "the pending pod is on no node");
        assert_eq!(on_w1.len(), 2, "the finished pod takes no part: {on_w1:?}");
        assert_eq!(on_w1[0].name, "etcd-w1");
        assert_eq!(on_w1[0].owner_kind.as_deref(), Some("Node"));
        assert!(!on_w1[0].ready);
        assert_eq!(on_w1[1].owner_kind.as_deref(), Some("ReplicaSet"));
        assert!(on_w1[1].ready);
        let web = &workloads.budgets[0];
        assert_eq!(web.rule(), "minAvailable 50%");
        assert_eq!(
            (web.current_healthy, web.disruptions_allowed),
            (Some(3), Some(1))
        );
    }
}
