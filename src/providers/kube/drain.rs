//! What a drain decides and reports: which pods it evicts, which it leaves (DaemonSet pods,
//! static pods' mirrors), and, when it cannot finish, which pods block it and why.
//!
//! The decisions are pure functions of the pods, tested without a server; the loop that
//! evicts lives in `client`.

use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::fence::Fence;

/// How long to wait between rounds of refused evictions: `kubectl drain` similarly waits 5
/// seconds before retrying an eviction a disruption budget refused.
pub const EVICTION_RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// The annotation the kubelet puts on the API mirror of a static pod; evicting a mirror pod
/// does nothing (the kubelet recreates it), so drains skip them, as kubectl does.
pub(crate) const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// A pod, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// How long a drain may take, how often it retries refused evictions, and while what holds.
#[derive(Debug, Clone)]
pub struct DrainOptions {
    /// Give up after this long (the cluster's `drainTimeout`).
    pub timeout: Duration,
    /// Pause between rounds of evictions.
    pub retry_interval: Duration,
    /// Checked before the cordon and before each round of evictions: a replica that lost the
    /// Lease stops draining.
    pub fence: Fence,
}

impl DrainOptions {
    /// A drain with `timeout` and kubectl's retry interval, never fenced.
    pub fn new(timeout: Duration) -> Self {
        DrainOptions {
            timeout,
            retry_interval: EVICTION_RETRY_INTERVAL,
            fence: Fence::open(),
        }
    }

    /// The same drain, stopped once `fence` closes.
    pub fn fenced(self, fence: Fence) -> Self {
        DrainOptions { fence, ..self }
    }
}

/// Why a drain left a pod on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SkipReason {
    /// Managed by a DaemonSet, which would put it back (and tolerates cordoned nodes).
    DaemonSet,
    /// The mirror of a static pod, owned by the kubelet.
    Mirror,
}

/// A pod the drain left in place.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SkippedPod {
    /// The pod.
    pub pod: PodRef,
    /// Why the drain left it (a DaemonSet's pod, a mirror pod).
    pub reason: SkipReason,
}

/// What a finished drain did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// Pods evicted (sorted).
    pub evicted: Vec<PodRef>,
    /// Pods left on the node on purpose (sorted).
    pub skipped: Vec<SkippedPod>,
}

/// A pod that keeps a node from draining, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DrainBlocker {
    /// The pod.
    pub pod: PodRef,
    /// The API's refusal (e.g. the disruption budget's message) or "still terminating".
    pub reason: String,
}

impl fmt::Display for DrainBlocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.pod, self.reason)
    }
}

/// `a/b (why), c/d (why)`.
pub(crate) fn describe(blockers: &[DrainBlocker]) -> String {
    if blockers.is_empty() {
        return "no pod reported a reason".to_owned();
    }
    blockers
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a drain does with one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// Evict it.
    Evict,
    /// Leave it.
    Skip(SkipReason),
    /// Already being deleted: wait for it to go.
    Terminating,
}

/// The pod's namespace and name.
pub(crate) fn pod_ref(pod: &Pod) -> PodRef {
    PodRef {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
    }
}

/// Decides a pod's fate. Pods with emptyDir volumes are evicted (their scratch data goes, as
/// with `kubectl drain --delete-emptydir-data`); pods without a controller are evicted too
/// (the node is going away, and with it any pod left on it).
pub(crate) fn disposition(pod: &Pod) -> Disposition {
    if pod.metadata.deletion_timestamp.is_some() {
        return Disposition::Terminating;
    }
    let is_mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION));
    if is_mirror {
        return Disposition::Skip(SkipReason::Mirror);
    }
    let is_daemon = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.controller == Some(true) && owner.kind == "DaemonSet");
    if is_daemon {
        return Disposition::Skip(SkipReason::DaemonSet);
    }
    Disposition::Evict
}

/// The readable reason of a refused eviction: the Status message and its causes (which name
/// the disruption budget).
pub(crate) fn refusal(status: &kube::core::Status) -> String {
    let causes: Vec<&str> = status
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .map(|c| c.message.as_str())
        .filter(|m| !m.is_empty())
        .collect();
    if causes.is_empty() {
        status.message.clone()
    } else {
        format!("{} {}", status.message, causes.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

    fn pod(owner: Option<&str>, annotations: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                owner_references: owner.map(|kind| {
                    vec![OwnerReference {
                        kind: kind.into(),
                        controller: Some(true),
                        ..OwnerReference::default()
                    }]
                }),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn drains_skip_daemon_and_mirror_pods_and_evict_the_rest() {
        assert_eq!(
            disposition(&pod(Some("DaemonSet"), &[])),
            Disposition::Skip(SkipReason::DaemonSet)
        );
        assert_eq!(
            disposition(&pod(None, &[(MIRROR_ANNOTATION, "x")])),
            Disposition::Skip(SkipReason::Mirror)
        );
        assert_eq!(
            disposition(&pod(Some("ReplicaSet"), &[])),
            Disposition::Evict
        );
        assert_eq!(disposition(&pod(None, &[])), Disposition::Evict);
        let mut leaving = pod(Some("ReplicaSet"), &[]);
        leaving.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(disposition(&leaving), Disposition::Terminating);
    }

    #[test]
    fn blockers_read_as_one_line_per_pod() {
        let blockers = [
            DrainBlocker {
                pod: PodRef {
                    namespace: "default".into(),
                    name: "db-1".into(),
                },
                reason: "budget".into(),
            },
            DrainBlocker {
                pod: PodRef {
                    namespace: "default".into(),
                    name: "web-1".into(),
                },
                reason: "still terminating".into(),
            },
        ];
        assert_eq!(
            describe(&blockers),
            "default/db-1 (budget), default/web-1 (still terminating)"
        );
    }
}
