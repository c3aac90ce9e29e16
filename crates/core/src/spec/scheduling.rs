//! How pools steer workloads: node labels and taints per pool and for the control plane, and
//! control planes that take workloads (compact clusters). The fields' types, the keys capstan
//! sets itself, which labels a kubelet may set on itself, and their validation, which refuses
//! what the Kubernetes API server would (qualified names, label values, taint effects) and the
//! keys others own, at `file:line:column`.
//!
//! Labels and taints never make a machine: they are not part of the machine spec hash, and a
//! change is applied in place (see `crate::scheduling`).

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::diagnostic::{Diagnostic, SourceFile};
use super::types::ClusterSpec;
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
const CAPSTAN_PREFIX: &str = "capstan.dev/";
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

impl ClusterSpec {
    /// Whether the control planes take workloads: `controlPlane.schedulable`, or what the
    /// distribution does by default (K3s servers run workloads; kubeadm's and Talos's control
    /// planes are tainted).
    pub fn control_planes_schedulable(&self) -> bool {
        self.control_plane.schedulable.unwrap_or(
            self.kubernetes
                .distribution
                .capabilities()
                .scheduling
                .control_planes_schedulable,
        )
    }

    /// The `rollout.minWorkers` that applies: none for a compact cluster (no worker, its
    /// control planes schedulable), whose control planes take the workloads.
    pub fn min_workers(&self) -> u32 {
        if self.worker_replicas() == 0 && self.control_planes_schedulable() {
            0
        } else {
            self.rollout.min_workers
        }
    }
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

/// Labels the kubelet itself keeps on its Node (its default labels, reset at every start):
/// a file may not declare them.
const KUBELET_DEFAULT_LABELS: [&str; 9] = [
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
];

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

const QUALIFIED_NAME_HINT: &str = "a key is an optional DNS subdomain prefix and `/`, then at most 63 letters, digits, `-`, `_` or `.` starting and ending with a letter or digit (`workload-class`, `example.com/gpu`)";
const LABEL_VALUE_HINT: &str = "a value is empty or at most 63 letters, digits, `-`, `_` or `.`, starting and ending with a letter or digit";

/// Checks the labels, taints and `schedulable` of the control plane and every pool.
pub(super) fn check(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let control_plane = &spec.control_plane;
    let pools = std::iter::once((
        "spec.controlPlane".to_owned(),
        &control_plane.labels,
        &control_plane.taints,
    ))
    .chain(
        spec.workers
            .iter()
            .enumerate()
            .map(|(index, pool)| (format!("spec.workers[{index}]"), &pool.labels, &pool.taints)),
    );
    for (path, labels, taints) in pools {
        check_labels(out, labels, &path, file);
        check_taints(out, taints, &path, file);
    }
}

fn check_labels(
    out: &mut Vec<Diagnostic>,
    labels: &BTreeMap<String, String>,
    path: &str,
    file: &SourceFile,
) {
    if labels.len() > MAX_LABELS {
        out.push(file.error(
            &format!("{path}.labels"),
            format!("{} labels: at most {MAX_LABELS}", labels.len()),
        ));
    }
    for (key, value) in labels {
        let at = format!("{path}.labels.{key}");
        if let Some(diagnostic) = label_key_finding(key, &at, file) {
            out.push(diagnostic);
        }
        if !is_label_value(value) {
            out.push(
                file.error(&at, format!("`{value}` is not a label value"))
                    .with_hint(LABEL_VALUE_HINT),
            );
        }
    }
}

fn check_taints(out: &mut Vec<Diagnostic>, taints: &[NodeTaint], path: &str, file: &SourceFile) {
    if taints.len() > MAX_TAINTS {
        out.push(file.error(
            &format!("{path}.taints"),
            format!("{} taints: at most {MAX_TAINTS}", taints.len()),
        ));
    }
    let mut seen = BTreeSet::new();
    for (index, taint) in taints.iter().enumerate() {
        let at = format!("{path}.taints[{index}]");
        check_taint(out, taint, &at, file);
        if !seen.insert((taint.key.as_str(), taint.effect)) {
            out.push(
                file.error(
                    &format!("{at}.key"),
                    format!("taint `{}:{}` is declared twice", taint.key, taint.effect),
                )
                .with_hint("a node carries one taint per key and effect: keep one"),
            );
        }
    }
}

/// Why a user label key is refused, when it is.
fn label_key_finding(key: &str, at: &str, file: &SourceFile) -> Option<Diagnostic> {
    if !is_qualified_name(key) {
        return Some(
            file.error(at, format!("`{key}` is not a label key"))
                .with_hint(QUALIFIED_NAME_HINT),
        );
    }
    if key == REGION_LABEL || key == ZONE_LABEL || key.starts_with(CAPSTAN_PREFIX) {
        return Some(
            file.error(at, format!("capstan sets `{key}` itself"))
                .with_hint(format!("`{POOL_LABEL}` names the pool, `{REGION_LABEL}` the Proxmox connection and `{ZONE_LABEL}` the Proxmox node of the VM; choose another key")),
        );
    }
    if KUBELET_DEFAULT_LABELS.contains(&key) {
        return Some(
            file.error(
                at,
                format!("the kubelet sets `{key}` itself, at every start"),
            )
            .with_hint("choose another key"),
        );
    }
    None
}

fn check_taint(out: &mut Vec<Diagnostic>, taint: &NodeTaint, at: &str, file: &SourceFile) {
    let key = &taint.key;
    if !is_qualified_name(key) {
        out.push(
            file.error(&format!("{at}.key"), format!("`{key}` is not a taint key"))
                .with_hint(QUALIFIED_NAME_HINT),
        );
    } else if key == CONTROL_PLANE_TAINT {
        out.push(
            file.error(
                &format!("{at}.key"),
                format!("`{key}` is the control planes' own taint"),
            )
            .with_hint("set `controlPlane.schedulable` instead: false keeps it, true drops it"),
        );
    } else if key.starts_with("node.kubernetes.io/") || key.starts_with(CAPSTAN_PREFIX) {
        out.push(
            file.error(
                &format!("{at}.key"),
                format!("`{key}` is set by Kubernetes' node controllers or by capstan"),
            )
            .with_hint("choose a key of your own (`dedicated`, `example.com/gpu`)"),
        );
    }
    if let Some(value) = &taint.value
        && !is_label_value(value)
    {
        out.push(
            file.error(
                &format!("{at}.value"),
                format!("`{value}` is not a taint value"),
            )
            .with_hint(LABEL_VALUE_HINT),
        );
    }
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
