//! What never changes once a cluster runs: its endpoint (rule 8), written into every
//! certificate, kubeconfig and join, and its network (rule 17): the pod and service ranges
//! every node, Service and pod address was made from, the CNI installed at bootstrap and
//! kube-proxy. A file that asks otherwise blocks the whole cluster with what to put back;
//! validation cannot see the live cluster, so these are the planner's.

use crate::plan::types::{Blocked, Rule};

use super::Input;
use crate::spec::RecordedNetwork;

pub(super) fn endpoint_changed(input: &Input<'_>) -> Option<Blocked> {
    let observed = &input.observed.control_plane.as_ref()?.endpoint;
    let desired = &input.spec.endpoint;
    if observed == desired {
        return None;
    }
    let mut changes = Vec::new();
    if observed.host != desired.host {
        changes.push(format!("host {} → {}", observed.host, desired.host));
    }
    if observed.address != desired.address {
        changes.push(format!(
            "address {} → {}",
            observed.address, desired.address
        ));
    }
    if observed.port != desired.port {
        changes.push(format!("port {} → {}", observed.port, desired.port));
    }
    Some(Blocked {
        rule: Rule::EndpointFixed,
        message: format!(
            "the endpoint cannot change after init-control-plane ({}): kubeadm wrote {} ({}:{}) into every certificate, kubeconfig and join of this cluster; revert spec.endpoint to it. Nothing else of this cluster proceeds until then (a new endpoint needs a new cluster)",
            changes.join(", "),
            observed.host,
            observed.address,
            observed.port
        ),
    })
}

/// Rule 17: the file's network against the one the cluster was built with. What capstan
/// recorded at bootstrap (or kubeadm's `ClusterConfiguration`) must equal every field the file
/// sets; the cluster's own evidence (its `kubernetes` Service's address, its Nodes' pod
/// ranges) must fit the network the file resolves to, so a cluster built before capstan
/// recorded its network is judged too.
pub(super) fn network_changed(input: &Input<'_>) -> Option<Blocked> {
    let control_plane = input.observed.control_plane.as_ref()?;
    let declared = &input.spec.network;
    let running = control_plane.network.unwrap_or_default();
    let mut changes = recorded_changes(declared, &running);
    let effective = input.spec.cluster_network(control_plane.network.as_ref());
    if let Some(address) = control_plane.api_service_address
        && address != effective.api_service_address()
    {
        changes.push(format!(
            "services {}: its `kubernetes` Service is at {address}, so the cluster runs another service network",
            effective.services
        ));
    }
    let outside = input.observed.nodes.iter().find_map(|(name, node)| {
        Some((name, node.pod_cidr?)).filter(|(_, cidr)| !effective.pods.contains(cidr))
    });
    if let Some((node, cidr)) = outside {
        changes.push(format!(
            "pods {}: node {node} has pod range {cidr}, outside it",
            effective.pods
        ));
    }
    if changes.is_empty() {
        return None;
    }
    Some(Blocked {
        rule: Rule::NetworkFixed,
        message: format!(
            "the cluster network cannot change on a live cluster ({}): every node, Service and pod address was made from it, and the CNI capstan installed at bootstrap is Flux's to replace afterwards; put spec.network back as the cluster runs it (or remove the field: an unset field keeps what the cluster runs). Nothing else of this cluster proceeds until then (another network needs a new cluster)",
            changes.join("; ")
        ),
    })
}

/// Each field the file sets that differs from what the cluster was built with.
fn recorded_changes(declared: &crate::spec::Network, running: &RecordedNetwork) -> Vec<String> {
    fn differs<T: PartialEq + std::fmt::Display>(
        out: &mut Vec<String>,
        field: &str,
        declared: Option<T>,
        running: Option<T>,
    ) {
        if let (Some(declared), Some(running)) = (declared, running)
            && declared != running
        {
            out.push(format!("{field} {running} → {declared}"));
        }
    }
    let mut changes = Vec::new();
    differs(&mut changes, "pods", declared.pods, running.pods);
    differs(
        &mut changes,
        "services",
        declared.services,
        running.services,
    );
    differs(&mut changes, "cni", declared.cni, running.cni);
    differs(
        &mut changes,
        "kubeProxy",
        declared.kube_proxy,
        running.kube_proxy,
    );
    changes
}
