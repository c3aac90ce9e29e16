//! Pods and PodDisruptionBudgets as an observed snapshot holds them, and the one rule a drain
//! simulation needs: how many more pods a budget lets the Eviction API take now.
//!
//! Pure data and arithmetic, as the disruption controller computes `disruptionsAllowed`:
//! percentages are taken of the pods the budget selects, rounded up.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A pod on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedPod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.labels`, which budgets select on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Its `Ready` condition is `True` (a budget counts it as healthy).
    #[serde(default = "ready_by_default")]
    pub ready: bool,
    /// Kind of its controlling owner (`ReplicaSet`, `StatefulSet`, `DaemonSet`; `Node` for a
    /// static pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_kind: Option<String>,
}

fn ready_by_default() -> bool {
    true
}

impl ObservedPod {
    /// Whether a drain evicts it: DaemonSet pods and static (mirror) pods stay, as `kubectl
    /// drain --ignore-daemonsets` leaves them.
    pub fn is_evicted_by_drain(&self) -> bool {
        !matches!(self.owner_kind.as_deref(), Some("DaemonSet" | "Node"))
    }
}

/// A count or a percentage, as `minAvailable` and `maxUnavailable` take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum IntOrPercent {
    /// A number of pods.
    Count(u32),
    /// `"50%"`.
    Percent(String),
}

impl IntOrPercent {
    /// The number of pods it means out of `total`, rounded up; `None` for a malformed
    /// percentage.
    fn of(&self, total: u32) -> Option<u32> {
        match self {
            IntOrPercent::Count(count) => Some(*count),
            IntOrPercent::Percent(text) => {
                let percent: u64 = text.strip_suffix('%')?.trim().parse().ok()?;
                let scaled = (u64::from(total) * percent).div_ceil(100);
                u32::try_from(scaled).ok()
            }
        }
    }
}

impl std::fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IntOrPercent::Count(count) => write!(f, "{count}"),
            IntOrPercent::Percent(text) => f.write_str(text),
        }
    }
}

/// A PodDisruptionBudget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DisruptionBudget {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.selector.matchLabels`: the pods it guards (in its namespace).
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// `spec.minAvailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrPercent>,
    /// `spec.maxUnavailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrPercent>,
    /// `status.currentHealthy`, as the cluster's disruption controller counted it (a live
    /// observation; absent in hand-written snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_healthy: Option<u32>,
    /// `status.disruptionsAllowed`, as the cluster's disruption controller computed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruptions_allowed: Option<u32>,
}

/// What a budget allows now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Allowance {
    /// Pods the budget selects.
    pub expected: u32,
    /// Of those, Ready.
    pub healthy: u32,
    /// Evictions it allows now (`status.disruptionsAllowed`).
    pub allowed: u32,
}

impl DisruptionBudget {
    /// Whether the budget guards `pod`. An empty selector selects nothing (as in policy/v1).
    pub fn selects(&self, pod: &ObservedPod) -> bool {
        pod.namespace == self.namespace
            && !self.match_labels.is_empty()
            && self
                .match_labels
                .iter()
                .all(|(key, value)| pod.labels.get(key) == Some(value))
    }

    /// What the budget allows, counting the pods it selects among `pods`. A budget with a
    /// malformed percentage, or with neither field, allows nothing. When the cluster's own
    /// status was observed (`currentHealthy`, `disruptionsAllowed`), it is what the Eviction
    /// API will apply, so it wins over the count.
    pub fn allowance<'a>(&self, pods: impl IntoIterator<Item = &'a ObservedPod>) -> Allowance {
        let (mut expected, mut healthy) = (0u32, 0u32);
        for pod in pods.into_iter().filter(|pod| self.selects(pod)) {
            expected += 1;
            healthy += u32::from(pod.ready);
        }
        if let (Some(current_healthy), Some(allowed)) =
            (self.current_healthy, self.disruptions_allowed)
        {
            return Allowance {
                expected,
                healthy: current_healthy,
                allowed,
            };
        }
        let allowed = match (&self.min_available, &self.max_unavailable) {
            (Some(min), _) => min.of(expected).map(|min| healthy.saturating_sub(min)),
            (None, Some(max)) => max
                .of(expected)
                .map(|max| max.saturating_sub(expected - healthy)),
            (None, None) => None,
        };
        Allowance {
            expected,
            healthy,
            allowed: allowed.unwrap_or(0),
        }
    }

    /// `minAvailable 3` or `maxUnavailable 10%`.
    pub fn rule(&self) -> String {
        match (&self.min_available, &self.max_unavailable) {
            (Some(min), _) => format!("minAvailable {min}"),
            (None, Some(max)) => format!("maxUnavailable {max}"),
            (None, None) => "no minAvailable or maxUnavailable".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool) -> ObservedPod {
        ObservedPod {
            namespace: "default".into(),
            name: name.into(),
            labels: BTreeMap::from([("app".into(), "web".into())]),
            ready,
            owner_kind: Some("ReplicaSet".into()),
        }
    }

    fn budget(min: Option<IntOrPercent>, max: Option<IntOrPercent>) -> DisruptionBudget {
        DisruptionBudget {
            namespace: "default".into(),
            name: "web".into(),
            match_labels: BTreeMap::from([("app".into(), "web".into())]),
            min_available: min,
            max_unavailable: max,
            current_healthy: None,
            disruptions_allowed: None,
        }
    }

    #[test]
    fn min_available_equal_to_the_healthy_pods_allows_no_eviction() {
        let pods = [pod("a", true), pod("b", true), pod("c", true)];
        let allowance = budget(Some(IntOrPercent::Count(3)), None).allowance(&pods);
        assert_eq!(
            allowance,
            Allowance {
                expected: 3,
                healthy: 3,
                allowed: 0
            }
        );
        let allowance = budget(Some(IntOrPercent::Count(2)), None).allowance(&pods);
        assert_eq!(allowance.allowed, 1);
    }

    #[test]
    fn percentages_round_up_and_unready_pods_use_up_max_unavailable() {
        let pods = [pod("a", true), pod("b", true), pod("c", false)];
        // 50% of 3 rounds up to 2 pods that must stay available: 2 healthy, none may go.
        let min = budget(Some(IntOrPercent::Percent("50%".into())), None);
        assert_eq!(min.allowance(&pods).allowed, 0);
        // One may be unavailable and one already is.
        let max = budget(None, Some(IntOrPercent::Count(1)));
        assert_eq!(max.allowance(&pods).allowed, 0);
    }

    #[test]
    fn the_status_the_cluster_reports_wins_over_counting_the_pods() {
        let pods = [pod("a", true), pod("b", true), pod("c", true)];
        let mut live = budget(Some(IntOrPercent::Count(2)), None);
        live.current_healthy = Some(2);
        live.disruptions_allowed = Some(0);
        assert_eq!(
            live.allowance(&pods),
            Allowance {
                expected: 3,
                healthy: 2,
                allowed: 0
            }
        );
    }

    #[test]
    fn a_budget_guards_only_matching_pods_of_its_namespace_and_drains_spare_daemon_sets() {
        let mut other = pod("x", true);
        other.namespace = "kube-system".into();
        let guard = budget(Some(IntOrPercent::Count(1)), None);
        assert!(guard.selects(&pod("a", true)));
        assert!(!guard.selects(&other));
        let mut daemon = pod("calico-node-1", true);
        daemon.owner_kind = Some("DaemonSet".into());
        assert!(!daemon.is_evicted_by_drain());
        assert!(pod("a", true).is_evicted_by_drain());
    }
}
