//! Staged rollouts across clusters: a cluster with `rollout.after` starts its disruptive steps
//! (those a maintenance window holds) only once every cluster it follows has converged at the
//! revision being rolled out and stayed Ready for `rollout.soak`. Steps that disrupt nothing
//! (new machines, deliveries) go on meanwhile.
//!
//! Pure: what the planner knows of the clusters followed comes in as [`Stages`], which the
//! daemon builds from the status it published last ([`Converged`] records, kept per cluster by
//! [`converged`]). A cluster followed that went Blocked or left Ready during its soak loses
//! its record, so it holds the clusters after it until it is Ready again at the revision and
//! soaks anew.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::types::{Phase, Resource};
use crate::spec::ClusterSpec;

/// Since when a cluster has been Ready, with nothing to do, without a break, and the last
/// revision it was so at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Converged {
    /// The revision of the last pass that found it converged.
    pub revision: String,
    /// When it became Ready with nothing to do (kept while it stays so across revisions).
    pub since: Timestamp,
}

/// What a cluster's followers need to know of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageFacts {
    /// Its phase as last reported.
    pub phase: Phase,
    /// Whether and since when it is converged.
    pub converged: Option<Converged>,
}

/// The clusters followed, as last reported, and the revision being planned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stages {
    /// The revision this plan is made at.
    pub revision: String,
    /// Each cluster's facts, by name; a cluster absent has no status yet.
    pub clusters: BTreeMap<String, StageFacts>,
}

/// The record a cluster's new status keeps: converged at `revision` when its phase is Ready,
/// since the record before when it was already converged (at this revision or an earlier one:
/// a revision that changes nothing of it does not restart its soak).
pub fn converged(
    phase: Phase,
    previous: Option<&Converged>,
    revision: &str,
    now: Timestamp,
) -> Option<Converged> {
    (phase == Phase::Ready).then(|| Converged {
        revision: revision.to_owned(),
        since: previous.map_or(now, |before| before.since.min(now)),
    })
}

/// What holds the disruptive steps of a cluster with `spec` at `now`: the first cluster of
/// its `rollout.after` that has not converged at this revision and soaked. `None` when all
/// have (or it follows none).
pub(crate) fn holding(spec: &ClusterSpec, stages: &Stages, now: Timestamp) -> Option<Resource> {
    let soak = spec.rollout.soak.0;
    spec.rollout
        .after
        .iter()
        .find_map(|name| holds(name, soak, stages, now))
}

/// Whether cluster `name`, followed with a soak of `soak`, holds its followers at `now`.
fn holds(
    name: &str,
    soak: std::time::Duration,
    stages: &Stages,
    now: Timestamp,
) -> Option<Resource> {
    let stage = |until: Option<Timestamp>, why: String| {
        Some(Resource::Stage {
            cluster: name.to_owned(),
            until,
            why,
        })
    };
    let Some(facts) = stages.clusters.get(name) else {
        return stage(
            None,
            "no status yet: not converged at this revision".to_owned(),
        );
    };
    match &facts.converged {
        Some(converged) if converged.revision == stages.revision => {
            let soak = SignedDuration::try_from(soak).unwrap_or(SignedDuration::MAX);
            let until = converged
                .since
                .saturating_add(soak)
                .unwrap_or(Timestamp::MAX);
            if now >= until {
                return None;
            }
            stage(
                Some(until),
                format!(
                    "Ready at this revision since {}, soaking until {until}",
                    converged.since
                ),
            )
        }
        _ if facts.phase == Phase::Blocked => stage(
            None,
            "Blocked: the clusters after it wait until it is Ready again and has soaked".to_owned(),
        ),
        Some(converged) => stage(
            None,
            format!(
                "last converged at revision {}, not yet at this one",
                converged.revision
            ),
        ),
        None => stage(
            None,
            format!(
                "{}: not converged at this revision (a soak starts once it is Ready)",
                facts.phase
            ),
        ),
    }
}
