//! The NodeRestriction admission plugin, as the API server applies it to a kubelet that
//! registers its own Node: it may set only the labels kubelets are allowed to set on
//! themselves. Kubernetes' `plugin/pkg/admission/noderestriction/admission.go`
//! (`getForbiddenLabels`): a key in the `node-restriction.kubernetes.io` namespace, or in the
//! `kubernetes.io` or `k8s.io` domains and not a kubelet label
//! (`staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go`, `IsKubeletLabel`: its
//! `kubeletLabels` and the `kubelet.kubernetes.io` and `node.kubernetes.io` namespaces). The
//! lab's own reading of those sources, apart from capstan's, so that it judges capstan.

use std::collections::BTreeMap;

/// The labels a kubelet may set on itself in the `kubernetes.io` domains (`kubeletLabels`).
const KUBELET_LABELS: [&str; 12] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "node.kubernetes.io/windows-build",
];

fn namespace(key: &str) -> &str {
    key.split_once('/').map_or("", |(namespace, _)| namespace)
}

fn within(namespace: &str, domain: &str) -> bool {
    namespace == domain
        || namespace
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

fn is_forbidden(key: &str) -> bool {
    let namespace = namespace(key);
    if within(namespace, "node-restriction.kubernetes.io") {
        return true;
    }
    let kubernetes = within(namespace, "kubernetes.io") || within(namespace, "k8s.io");
    let kubelet = KUBELET_LABELS.contains(&key)
        || within(namespace, "kubelet.kubernetes.io")
        || within(namespace, "node.kubernetes.io");
    kubernetes && !kubelet
}

/// Refuses a kubelet's registration of Node `node` with `labels` as the API server does:
/// `nodes "NAME" is forbidden: node "NAME" is not allowed to set the following labels: ...`.
///
/// # Errors
/// The API server's message, naming every forbidden label in order.
pub fn admit_registration(node: &str, labels: &BTreeMap<String, String>) -> Result<(), String> {
    let forbidden: Vec<&str> = labels
        .keys()
        .map(String::as_str)
        .filter(|key| is_forbidden(key))
        .collect();
    if forbidden.is_empty() {
        return Ok(());
    }
    Err(format!(
        "nodes \"{node}\" is forbidden: node \"{node}\" is not allowed to set the following labels: {}",
        forbidden.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(keys: &[&str]) -> BTreeMap<String, String> {
        keys.iter()
            .map(|k| ((*k).to_owned(), String::new()))
            .collect()
    }

    #[test]
    fn a_kubelet_registers_its_own_labels_and_is_refused_the_others_in_the_api_servers_words() {
        let allowed = labels(&[
            "workload-class",
            "example.com/gpu",
            "topology.kubernetes.io/zone",
            "node.kubernetes.io/instance-type",
            "sub.node.kubernetes.io/x",
        ]);
        assert_eq!(admit_registration("w1", &allowed), Ok(()));
        let refused = labels(&[
            "node-role.kubernetes.io/worker",
            "workload-class",
            "x.k8s.io/y",
            "node-restriction.kubernetes.io/pool",
        ]);
        assert_eq!(
            admit_registration("w1", &refused),
            Err("nodes \"w1\" is forbidden: node \"w1\" is not allowed to set the following labels: node-restriction.kubernetes.io/pool, node-role.kubernetes.io/worker, x.k8s.io/y".to_owned())
        );
    }
}
