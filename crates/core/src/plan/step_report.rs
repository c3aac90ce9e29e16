//! What a step did: its action and a summary for the progress line and the status; what the
//! action changes of the observed state is core's description ([`ActionKind::changes`]).

use std::fmt;

use super::{ActionKind, Changes};

/// A step that succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepReport {
    /// The step's action.
    pub action: ActionKind,
    /// What it did, in a few words ("VM 101 cloned from debian13-k8s on pve1 and started").
    pub summary: String,
}

impl StepReport {
    /// `action` did what `summary` says.
    pub fn new(action: ActionKind, summary: String) -> Self {
        StepReport { action, summary }
    }

    /// What the step changed of the observed state.
    pub fn changes(&self) -> Changes {
        self.action.changes()
    }
}

impl fmt::Display for StepReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary)
    }
}
