//! The replacement guard's field (`replace: allow|forbid` on `spec.rollout`, the control plane
//! and each worker pool): which one applies to a pool, and its check against the other
//! rollout settings. Also the cluster's totals and resolved network, read by every rule.

use super::diagnostic::{Diagnostic, SourceFile};
use super::policies::ReplacePolicy;
use super::types::{ClusterNetwork, ClusterSpec, DriftPolicy, RecordedNetwork};

impl ClusterSpec {
    /// Whether the control plane (`None`) or the worker pool `pool` may have its live
    /// machines replaced: its own `replace`, else the cluster's `rollout.replace`.
    pub fn replace_policy(&self, pool: Option<&str>) -> ReplacePolicy {
        let own = match pool {
            None => self.control_plane.replace,
            Some(name) => self
                .workers
                .iter()
                .find(|p| p.pool == name)
                .and_then(|p| p.replace),
        };
        own.unwrap_or(self.rollout.replace)
    }
}

/// `rollout.onDrift: replace` where `replace: forbid` keeps the live machines: drifted
/// machines of those pools are refused, not replaced. Legal (another pool may allow it), so a
/// warning at each field that forbids.
pub(super) fn check(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    if spec.rollout.on_drift != DriftPolicy::Replace {
        return;
    }
    let forbid = |own: Option<ReplacePolicy>| own == Some(ReplacePolicy::Forbid);
    let mut fields = Vec::new();
    if spec.rollout.replace == ReplacePolicy::Forbid {
        fields.push("spec.rollout.replace".to_owned());
    }
    if forbid(spec.control_plane.replace) {
        fields.push("spec.controlPlane.replace".to_owned());
    }
    for (index, pool) in spec.workers.iter().enumerate() {
        if forbid(pool.replace) {
            fields.push(format!("spec.workers[{index}].replace"));
        }
    }
    for field in fields {
        out.push(
            file.warning(
                &field,
                "forbid keeps live machines: rollout.onDrift: replace will be refused for a drifted machine here, not carried out",
            )
            .with_hint("set rollout.onDrift: report, or replace: allow where drifted machines may be replaced"),
        );
    }
}

impl ClusterSpec {
    /// Total workers over every pool (saturating: validation bounds them far below).
    pub fn worker_replicas(&self) -> u32 {
        self.workers
            .iter()
            .fold(0, |sum: u32, pool| sum.saturating_add(pool.replicas))
    }

    /// The network the cluster runs on: the file's fields, else what the live cluster was
    /// built with (`running`, when observed), else its distribution's defaults.
    pub fn cluster_network(&self, running: Option<&RecordedNetwork>) -> ClusterNetwork {
        self.network.resolve(
            &self.kubernetes.distribution.capabilities().network,
            running,
        )
    }
}
