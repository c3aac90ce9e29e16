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

use super::PreviewStep;

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
