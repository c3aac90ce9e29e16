//! How pools steer workloads: node labels and taints per pool and for the control plane, and
//! control planes that take workloads (compact clusters). The fields' types, the keys capstan
//! sets itself, which labels a kubelet may set on itself, and what Kubernetes accepts as a
//! key or value.
//!
//! Labels and taints never make a machine: they are not part of the machine spec hash, and a
//! change is applied in place (the crate's `scheduling` module). The rules are `labels.rs`'.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::values::is_dns1123_subdomain;

/// The label naming the pool a node belongs to (`cp` for control planes).
pub const POOL_LABEL: &str = "capstan.dev/pool";
/// The label naming the Proxmox connection a node lives on (Kubernetes' well-known region
/// key, which Proxmox's CSI plugin and cloud controller schedule by).
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// The label naming the Proxmox node the node's VM runs on (the well-known zone key).
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The taint that keeps workloads off control planes (kubeadm's, Talos's; K3s servers do not
/// carry it unless asked).
pub const CONTROL_PLANE_TAINT: &str = "node-role.kubernetes.io/control-plane";
/// capstan's own label prefix: no user label may use it.
pub const CAPSTAN_PREFIX: &str = "capstan.dev/";
/// Labels (and taints, [`MAX_TAINTS`]) of one pool: far more than scheduling needs; the Node object carries
/// them all, so the bound keeps it small.
pub const MAX_LABELS: usize = 64;
/// See [`MAX_LABELS`].
pub const MAX_TAINTS: usize = 32;

/// What a taint does to pods that do not tolerate it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum TaintEffect {
    /// New pods are not scheduled on the node.
    NoSchedule,
    /// The scheduler avoids the node when it can.
    PreferNoSchedule,
    /// New pods are not scheduled and running ones are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The effect as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

impl std::fmt::Display for TaintEffect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A taint every node of a pool carries from its registration on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeTaint {
    /// A qualified name (`dedicated`, `example.com/gpu`).
    pub key: String,
    /// A label value; none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: TaintEffect,
}

/// Where a distribution's nodes take their labels and taints from (its `Capabilities`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulingWays {
    /// Whether its control planes run workloads unless the file says otherwise (K3s servers
    /// carry no taint; kubeadm's and Talos's control planes carry [`CONTROL_PLANE_TAINT`]).
    pub control_planes_schedulable: bool,
    /// Whether the labels a kubelet may set on itself ([`is_kubelet_label`]) go through the
    /// node's registration (kubeadm's `node-labels`, K3s's `node-label`). Talos: no. Its
    /// `machine.nodeLabels` are reconciled by Talos itself (which would revert an in-place
    /// change made through the API), so capstan sets every label of a Talos node through the
    /// API once it has joined. Taints always go through registration.
    pub registers_labels: bool,
}

/// Whether a kubelet may set `key` on its own Node under the NodeRestriction admission
/// plugin (and with `--node-labels`): any key outside the `kubernetes.io` and `k8s.io`
/// domains, else only the kubelet's own set. That set is Kubernetes'
/// `staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go` (`IsKubeletLabel`: the
/// `kubeletLabels` keys, and the `kubelet.kubernetes.io` and `node.kubernetes.io` namespaces
/// with their subdomains); `plugin/pkg/admission/noderestriction` also forbids the
/// `node-restriction.kubernetes.io` namespace. Everything else (`node-role.kubernetes.io/*`
/// above all) capstan sets through the API once the node has joined.
pub fn is_kubelet_label(key: &str) -> bool {
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
    let Some((namespace, _)) = key.split_once('/') else {
        return true;
    };
    let within = |domain: &str| namespace == domain || namespace.ends_with(&format!(".{domain}"));
    if within("node-restriction.kubernetes.io") {
        return false;
    }
    if !within("kubernetes.io") && !within("k8s.io") {
        return true;
    }
    KUBELET_LABELS.contains(&key) || within("kubelet.kubernetes.io") || within("node.kubernetes.io")
}

/// Whether `key` is a qualified name, as Kubernetes validates label and taint keys: an
/// optional DNS-1123 subdomain prefix and `/`, then 1 to 63 characters of letters, digits,
/// `-`, `_` and `.`, starting and ending with a letter or digit.
pub fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    prefix.is_none_or(|p| !p.is_empty() && is_dns1123_subdomain(p))
        && !name.is_empty()
        && is_label_value(name)
}

/// Whether `value` is a label value: empty, or at most 63 letters, digits, `-`, `_` and `.`,
/// starting and ending with a letter or digit.
pub fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    let edge = |b: &u8| b.is_ascii_alphanumeric();
    bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_none_or(edge)
        && bytes.last().is_none_or(edge)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_are_judged_as_kubernetes_judges_them() {
        for good in ["workload-class", "example.com/gpu", "a", "a.b_c-d", "x/Y9"] {
            assert!(is_qualified_name(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "/a",
            "Example.com/a",
            "a/b/c",
            "a b",
            &"x".repeat(64),
        ] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
        for good in ["", "memory", "v1.2_3-x"] {
            assert!(is_label_value(good), "{good}");
        }
        for bad in ["-x", "x.", "a/b", "a b", &"v".repeat(64)] {
            assert!(!is_label_value(bad), "{bad}");
        }
    }

    #[test]
    fn a_kubelet_may_set_only_its_own_kubernetes_io_labels_under_node_restriction() {
        for allowed in [
            "workload-class",
            "example.com/gpu",
            "capstan.dev/pool",
            "topology.kubernetes.io/zone",
            "topology.kubernetes.io/region",
            "node.kubernetes.io/instance-type",
            "node.kubernetes.io/anything",
            "team.node.kubernetes.io/x",
            "kubelet.kubernetes.io/x",
        ] {
            assert!(is_kubelet_label(allowed), "{allowed}");
        }
        for forbidden in [
            "node-role.kubernetes.io/worker",
            "node-role.kubernetes.io/control-plane",
            "kubernetes.io/role",
            "example.k8s.io/x",
            "node-restriction.kubernetes.io/pool",
        ] {
            assert!(!is_kubelet_label(forbidden), "{forbidden}");
        }
    }
}
