//! The steps a daemon ran and runs, per cluster: what the dashboard draws as a cluster's
//! timeline. Kept in the daemon's memory only (a restart starts an empty history: the status
//! says where the cluster is, this only says how it got there lately).
//!
//! # Guarantees
//! - Bounded: at most [`KEPT_PER_CLUSTER`] runs per cluster (the oldest ended ones go first),
//!   and only the clusters the fleet still declares ([`StepHistory::retain_clusters`]); each
//!   failure message is capped at [`MAX_MESSAGE`] characters.
//! - Holds what the status would show and nothing more: the caller hands in messages already
//!   redacted.

use std::collections::{BTreeMap, VecDeque};

use jiff::Timestamp;

use crate::model::NodeName;
use crate::plan::ActionKind;

/// Runs kept per cluster: a bootstrap of a 20-machine cluster is some 60 steps, a rolling
/// replacement of it some 160; older runs are off the timeline's hours anyway.
pub const KEPT_PER_CLUSTER: usize = 200;

/// The longest failure message kept, in characters (the status caps its own the same way).
pub const MAX_MESSAGE: usize = 500;

/// How a step run ended, or that it has not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Still running.
    Running,
    /// It succeeded.
    Succeeded,
    /// It failed, with the (redacted) error.
    Failed(String),
    /// Its replica stopped it on losing the Lease: neither success nor failure.
    Stopped,
}

/// One step run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRun {
    /// The daemon's id of the run, unique within the history.
    pub id: u64,
    /// The action.
    pub action: ActionKind,
    /// The machine it works on.
    pub machine: Option<NodeName>,
    /// The revision it was decided at.
    pub revision: String,
    /// When it started.
    pub started: Timestamp,
    /// When it ended (`None` while running).
    pub ended: Option<Timestamp>,
    /// How it ended.
    pub outcome: Outcome,
}

/// Every cluster's recent step runs.
#[derive(Debug, Default, Clone)]
pub struct StepHistory {
    clusters: BTreeMap<String, VecDeque<StepRun>>,
    next_id: u64,
}

impl StepHistory {
    /// Records that `action` started on `machine` of `cluster` at `at`; returns the run's id
    /// for [`StepHistory::ended`].
    pub fn started(
        &mut self,
        cluster: &str,
        action: ActionKind,
        machine: Option<NodeName>,
        revision: &str,
        at: Timestamp,
    ) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let runs = self.clusters.entry(cluster.to_owned()).or_default();
        if runs.len() >= KEPT_PER_CLUSTER {
            // The oldest that ended; a cluster with that many running keeps its oldest.
            match runs.iter().position(|run| run.ended.is_some()) {
                Some(oldest) => {
                    runs.remove(oldest);
                }
                None => {
                    runs.pop_front();
                }
            }
        }
        runs.push_back(StepRun {
            id,
            action,
            machine,
            revision: revision.to_owned(),
            started: at,
            ended: None,
            outcome: Outcome::Running,
        });
        id
    }

    /// Records that run `id` of `cluster` ended at `at` with `outcome` (a failure's message
    /// capped). A run no longer kept is ignored.
    pub fn ended(&mut self, cluster: &str, id: u64, outcome: Outcome, at: Timestamp) {
        let Some(run) = self
            .clusters
            .get_mut(cluster)
            .and_then(|runs| runs.iter_mut().find(|run| run.id == id))
        else {
            return;
        };
        run.ended = Some(at.max(run.started));
        run.outcome = match outcome {
            Outcome::Failed(message) => Outcome::Failed(cap(&message)),
            other => other,
        };
    }

    /// Forgets the clusters `keep` says no.
    pub fn retain_clusters(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.clusters.retain(|name, _| keep(name));
    }

    /// `cluster`'s runs, oldest first.
    pub fn of(&self, cluster: &str) -> impl Iterator<Item = &StepRun> {
        self.clusters.get(cluster).into_iter().flatten()
    }
}

fn cap(message: &str) -> String {
    match message.char_indices().nth(MAX_MESSAGE) {
        Some((end, _)) => format!("{}…", &message[..end]),
        None => message.to_owned(),
    }
}
