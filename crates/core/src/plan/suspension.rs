//! Suspended clusters: one whose file says `spec.suspend: true` (in Git), or one an operator
//! suspended through the daemon (`capstan suspend`, at runtime, recorded in the management
//! cluster and handed to the planner in [`super::Policy::suspended`]). A suspended cluster is
//! observed, planned and reported as any other, but every step it lists is held, as a
//! maintenance window holds a disruptive step: the plan says what would run and why it does
//! not. Steps already running are the executor's: they finish.

use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::Policy;
use crate::spec::ClusterSpec;

/// Where a suspension was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SuspensionSource {
    /// `spec.suspend: true` in the cluster's file.
    Git,
    /// `capstan suspend` against the daemon.
    Runtime,
    /// A runtime suspension record that cannot be read (it does not parse, or is not a
    /// suspension record of this cluster): it holds the cluster as a suspension would, since
    /// lifting an operator's suspension because its record broke would fail open. `reason`
    /// names the record and what is wrong with it.
    Unreadable,
}

impl fmt::Display for SuspensionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SuspensionSource::Git => "Git",
            SuspensionSource::Runtime => "runtime",
            SuspensionSource::Unreadable => "an unreadable runtime record",
        })
    }
}

/// One suspension of a cluster: where it was set and, for a runtime one, who set it, when
/// and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Suspension {
    /// Git or runtime.
    pub source: SuspensionSource,
    /// Who: a client certificate's subject, or `bearer token` and the user name the client
    /// declared (then `declared` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Whether `by` names a user the client declared rather than one it proved.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub declared: bool,
    /// When.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
    /// Why, as given (bounded and redacted by the daemon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Suspension {
    /// The suspension `spec.suspend: true` declares.
    pub fn git() -> Self {
        Suspension {
            source: SuspensionSource::Git,
            by: None,
            declared: false,
            at: None,
            reason: None,
        }
    }

    /// A runtime suspension record of the cluster that cannot be read: `why` names the record
    /// and what is wrong with it.
    pub fn unreadable(why: String) -> Self {
        Suspension {
            source: SuspensionSource::Unreadable,
            by: None,
            declared: false,
            at: None,
            reason: Some(why),
        }
    }

    /// In words, with how to resume: "suspended in Git (spec.suspend: true) ...",
    /// "suspended at runtime by CN=alice at 2026-12-02T15:00:00Z: incident 42 ...".
    pub fn message(&self, cluster: &str) -> String {
        match self.source {
            SuspensionSource::Unreadable => format!(
                "held as suspended: {}; no step starts; `capstan suspend {cluster}` rewrites the record, `capstan resume {cluster}` deletes it",
                self.reason.as_deref().unwrap_or("its runtime suspension record cannot be read")
            ),
            SuspensionSource::Git => "suspended in Git (spec.suspend: true): no step starts; remove it or set it to false to resume".to_owned(),
            SuspensionSource::Runtime => {
                let by = match (&self.by, self.declared) {
                    (Some(by), true) => format!(" by {by} (declared, not proven)"),
                    (Some(by), false) => format!(" by {by}"),
                    (None, _) => String::new(),
                };
                let at = self.at.map(|at| format!(" at {at}")).unwrap_or_default();
                let reason = self
                    .reason
                    .as_deref()
                    .map(|reason| format!(": {reason}"))
                    .unwrap_or_default();
                format!(
                    "suspended at runtime{by}{at}{reason}; no step starts; `capstan resume {cluster}` resumes"
                )
            }
        }
    }
}

impl fmt::Display for Suspension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            SuspensionSource::Git => f.write_str("suspended in Git (spec.suspend: true)"),
            SuspensionSource::Unreadable => write!(
                f,
                "held as suspended: {}",
                self.reason
                    .as_deref()
                    .unwrap_or("its runtime suspension record cannot be read")
            ),
            SuspensionSource::Runtime => {
                f.write_str("suspended at runtime")?;
                if let Some(by) = &self.by {
                    write!(f, " by {by}")?;
                    if self.declared {
                        f.write_str(" (declared)")?;
                    }
                }
                if let Some(at) = self.at {
                    write!(f, " at {at}")?;
                }
                match &self.reason {
                    Some(reason) => write!(f, ": {reason}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// The suspensions of cluster `name`: Git's (`spec.suspend`) first, then the runtime one.
pub(crate) fn of(name: &str, spec: &ClusterSpec, policy: &Policy) -> Vec<Suspension> {
    spec.suspend
        .then(Suspension::git)
        .into_iter()
        .chain(policy.suspended.get(name).cloned())
        .collect()
}
