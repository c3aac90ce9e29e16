//! Drain simulation: for every drain a plan holds, the pods it would evict (from the observed
//! pods of its node) and the PodDisruptionBudgets that would refuse those evictions now.
//!
//! Pure. Each drain is judged against the observed state as it is now, not as earlier steps
//! would leave it: a budget that allows no disruption now blocks the drain until something
//! else changes (a pod turns Ready, the budget is relaxed).

use std::cell::OnceCell;

use serde::Serialize;

use crate::model::NodeName;
use crate::observed::ObservedCluster;
use crate::plan::Action;
use crate::workloads::Allowance;

use super::{PreviewStep, Refusal};

/// The rule of a refusal of a drain that would block, with `rollout.blockedDrain: fail`.
pub const BLOCKED_DRAIN: &str = "rollout.blockedDrain: fail";

/// What one drain would do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainForecast {
    /// The node drained.
    pub node: NodeName,
    /// Pods it would evict, `namespace/name` (DaemonSet and static pods stay).
    pub evicts: Vec<String>,
    /// Budgets that would refuse an eviction now.
    pub blocked_by: Vec<DrainBlock>,
    /// The base's plan holds this drain too.
    pub pending_on_base: bool,
}

/// A budget that blocks a drain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainBlock {
    /// `namespace/name` of the PodDisruptionBudget.
    pub budget: String,
    /// `minAvailable 3`.
    pub rule: String,
    /// Pods it selects that are Ready.
    pub healthy: u32,
    /// Evictions it allows now.
    pub allowed: u32,
    /// The pods of the drained node it guards, `namespace/name`.
    pub pods: Vec<String>,
    /// "this drain will block on `web` (minAvailable 3, 3 healthy)".
    pub message: String,
}

/// The drains of `predicted`, in order, simulated against `observed`. Empty when the snapshot
/// holds no pods (an older snapshot, or `--observed none`).
pub fn forecast(predicted: &[PreviewStep], observed: &ObservedCluster) -> Vec<DrainForecast> {
    if observed.pods.is_empty() {
        return Vec::new();
    }
    let all_pods = || observed.pods.values().flatten();
    // A budget's allowance depends on the observed pods alone: counted once, not per drain
    // (a rollout of thousands drains thousands of nodes).
    let allowances: Vec<OnceCell<Allowance>> = observed
        .disruption_budgets
        .iter()
        .map(|_| OnceCell::new())
        .collect();
    predicted
        .iter()
        .filter_map(|step| match &step.step.action {
            Action::Drain { node, .. } => Some((node, step.pending_on_base)),
            _ => None,
        })
        .map(|(node, pending_on_base)| {
            let evicted: Vec<_> = observed
                .pods
                .get(node)
                .into_iter()
                .flatten()
                .filter(|pod| pod.is_evicted_by_drain())
                .collect();
            let blocked_by = observed
                .disruption_budgets
                .iter()
                .zip(&allowances)
                .filter_map(|(budget, allowance)| {
                    let guarded: Vec<String> = evicted
                        .iter()
                        .filter(|pod| budget.selects(pod))
                        .map(|pod| format!("{}/{}", pod.namespace, pod.name))
                        .collect();
                    if guarded.is_empty() {
                        return None;
                    }
                    let allowance = allowance.get_or_init(|| budget.allowance(all_pods()));
                    (allowance.allowed == 0).then(|| DrainBlock {
                        budget: format!("{}/{}", budget.namespace, budget.name),
                        rule: budget.rule(),
                        healthy: allowance.healthy,
                        allowed: allowance.allowed,
                        message: format!(
                            "this drain will block on `{}` ({}, {} healthy)",
                            budget.name,
                            budget.rule(),
                            allowance.healthy
                        ),
                        pods: guarded,
                    })
                })
                .collect();
            DrainForecast {
                node: node.clone(),
                evicts: evicted
                    .iter()
                    .map(|pod| format!("{}/{}", pod.namespace, pod.name))
                    .collect(),
                blocked_by,
                pending_on_base,
            }
        })
        .collect()
}

/// With `rollout.blockedDrain: fail`: one refusal per budget that would block a drain this
/// change adds (a drain pending on the base happens whether or not it is merged), naming the
/// budget, the drains it blocks and what to do.
pub(super) fn refusals(cluster: &str, forecasts: &[DrainForecast]) -> Vec<Refusal> {
    // By budget, in the order they are first met: (its first block, the nodes it blocks).
    let mut budgets: Vec<(&DrainBlock, Vec<&NodeName>)> = Vec::new();
    for forecast in forecasts.iter().filter(|f| !f.pending_on_base) {
        for block in &forecast.blocked_by {
            match budgets.iter_mut().find(|(b, _)| b.budget == block.budget) {
                Some((_, nodes)) => nodes.push(&forecast.node),
                None => budgets.push((block, vec![&forecast.node])),
            }
        }
    }
    budgets
        .into_iter()
        .map(|(block, nodes)| {
            let nodes: Vec<String> = nodes.iter().map(ToString::to_string).collect();
            Refusal {
                cluster: Some(cluster.to_owned()),
                rule: BLOCKED_DRAIN.to_owned(),
                location: None,
                field: Some("rollout.blockedDrain".to_owned()),
                message: format!(
                    "PodDisruptionBudget {} ({}, {} healthy) allows no disruption now: the drain of {} would block on it",
                    block.budget,
                    block.rule,
                    block.healthy,
                    nodes.join(", ")
                ),
                fix: Some(format!(
                    "let {} allow a disruption (more Ready replicas, or a looser minAvailable/maxUnavailable), then run the preview again; or set rollout.blockedDrain: wait to let the drain wait for it after the merge",
                    block.budget
                )),
                on_base: false,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(node: &str, budgets: &[&str], pending_on_base: bool) -> DrainForecast {
        DrainForecast {
            node: NodeName::from(node),
            evicts: vec!["shop/web-1".to_owned()],
            blocked_by: budgets
                .iter()
                .map(|budget| DrainBlock {
                    budget: (*budget).to_owned(),
                    rule: "minAvailable 3".to_owned(),
                    healthy: 3,
                    allowed: 0,
                    pods: vec!["shop/web-1".to_owned()],
                    message: String::new(),
                })
                .collect(),
            pending_on_base,
        }
    }

    #[test]
    fn one_refusal_per_blocking_budget_of_the_drains_a_change_adds() {
        let forecasts = [
            drain("capstan-prod-general-a", &["shop/web"], false),
            drain("capstan-prod-general-b", &["shop/web", "db/pg"], false),
            drain("capstan-prod-general-c", &[], false),
            drain("capstan-prod-general-d", &["old/pending"], true),
        ];
        let refused = refusals("prod", &forecasts);
        let messages: Vec<&str> = refused.iter().map(|r| r.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "PodDisruptionBudget shop/web (minAvailable 3, 3 healthy) allows no disruption now: the drain of capstan-prod-general-a, capstan-prod-general-b would block on it",
                "PodDisruptionBudget db/pg (minAvailable 3, 3 healthy) allows no disruption now: the drain of capstan-prod-general-b would block on it",
            ]
        );
        assert!(refused.iter().all(|r| {
            r.rule == BLOCKED_DRAIN
                && r.cluster.as_deref() == Some("prod")
                && r.fix
                    .as_deref()
                    .is_some_and(|fix| fix.contains("blockedDrain: wait"))
        }));
    }
}
