//! Two rollout policies of a cluster file: the replacement guard (`replace: allow|forbid`, on
//! `spec.rollout`, the control plane and each worker pool) and what a preview does with a
//! drain that would block (`rollout.blockedDrain`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whether a change may replace live machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReplacePolicy {
    /// Machines built from another spec are replaced, new before old.
    #[default]
    Allow,
    /// A change that would replace a live machine is refused, naming the fields that cause
    /// it; dead and fenced machines are still replaced (a repair, not a change).
    Forbid,
}

impl ReplacePolicy {
    pub(super) fn is_allow(&self) -> bool {
        *self == ReplacePolicy::Allow
    }
}

/// What a preview does with a drain that would block now on a PodDisruptionBudget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BlockedDrain {
    /// The preview names the budget; once merged, the drain waits for it (up to
    /// `rollout.drainTimeout`).
    #[default]
    Wait,
    /// The preview and its commit status fail, naming the budget: the merge waits for the
    /// workload's owner.
    Fail,
}

impl BlockedDrain {
    pub(super) fn is_wait(&self) -> bool {
        *self == BlockedDrain::Wait
    }
}
