//! The rules of what pools declare to steer workloads: labels and taints refused as the
//! Kubernetes API server would refuse them (qualified names, label values, one taint per key
//! and effect) and keys others own (capstan's, the kubelet's, the node controllers'), at
//! `file:line:column` with a fix; and what `controlPlane.schedulable` means for a cluster
//! (compact clusters need no worker).

use std::collections::{BTreeMap, BTreeSet};

use super::diagnostic::{Diagnostic, SourceFile};
use super::scheduling::{
    CAPSTAN_PREFIX, CONTROL_PLANE_TAINT, MAX_LABELS, MAX_TAINTS, NodeTaint, POOL_LABEL,
    REGION_LABEL, ZONE_LABEL, is_label_value, is_qualified_name,
};
use super::types::ClusterSpec;

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
