//! The stages of a staged rollout (`rollout.after`), in order, for a preview: each stage holds
//! the clusters whose every followed cluster is in an earlier one.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::spec::Desired;

/// One stage: its clusters, each with what it waits for, and when it is estimated to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    /// Its clusters, by name, each as `prod-a (after staging, soak 30m)`.
    pub clusters: Vec<String>,
    /// When its first cluster is estimated to start: once every cluster it follows is
    /// estimated to have finished (from the measured step durations, in the windows they
    /// need), plus its soak. Absent when that is not known (a cluster followed has no
    /// estimate, or never starts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starts: Option<Timestamp>,
}

/// The stages of `desired` in order; empty when no cluster follows another. Validation
/// refuses cycles; a cycle among what is left still ends (its clusters go last). `finish`
/// says when a cluster started at a time is estimated to finish (`None`: not known); the
/// first stage starts at `now`.
pub fn order(
    desired: Option<&Desired>,
    now: Timestamp,
    finish: impl Fn(&str, Timestamp) -> Option<Timestamp>,
) -> Vec<Stage> {
    let Some(desired) = desired else {
        return Vec::new();
    };
    if desired
        .clusters
        .values()
        .all(|c| c.spec.rollout.after.is_empty())
    {
        return Vec::new();
    }
    let mut depth: BTreeMap<&str, usize> = BTreeMap::new();
    // At most one round per cluster: depths only grow along `after`, so this settles.
    for _ in 0..=desired.clusters.len() {
        let mut changed = false;
        for (name, cluster) in &desired.clusters {
            let own = cluster
                .spec
                .rollout
                .after
                .iter()
                .map(|followed| depth.get(followed.as_str()).map_or(1, |d| d + 1))
                .max()
                .unwrap_or(0)
                .min(desired.clusters.len());
            if depth.get(name.as_str()) != Some(&own) {
                depth.insert(name, own);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let starts = starts(desired, &depth, now, finish);
    let mut stages: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (name, cluster) in &desired.clusters {
        let rollout = &cluster.spec.rollout;
        let label = if rollout.after.is_empty() {
            name.clone()
        } else if rollout.soak.is_zero() {
            format!("{name} (after {})", rollout.after.join(", "))
        } else {
            format!(
                "{name} (after {}, soak {})",
                rollout.after.join(", "),
                rollout.soak
            )
        };
        stages
            .entry(depth.get(name.as_str()).copied().unwrap_or_default())
            .or_default()
            .push(label);
    }
    stages
        .into_iter()
        .map(|(depth, clusters)| Stage {
            clusters,
            starts: starts.get(&depth).copied().flatten(),
        })
        .collect()
}

/// When each stage (by depth) is estimated to start: the earliest of its clusters, each once
/// those it follows are estimated to finish, plus its soak.
fn starts(
    desired: &Desired,
    depth: &BTreeMap<&str, usize>,
    now: Timestamp,
    finish: impl Fn(&str, Timestamp) -> Option<Timestamp>,
) -> BTreeMap<usize, Option<Timestamp>> {
    let mut by_depth: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for (name, level) in depth {
        by_depth.entry(*level).or_default().push(name);
    }
    let mut finishes: BTreeMap<&str, Option<Timestamp>> = BTreeMap::new();
    let mut starts = BTreeMap::new();
    for (level, names) in by_depth {
        let mut earliest: Option<Option<Timestamp>> = None;
        for name in names {
            let rollout = &desired.clusters[name].spec.rollout;
            let followed = rollout.after.iter().try_fold(now, |at, followed| {
                Some(at.max(finishes.get(followed.as_str()).copied().flatten()?))
            });
            let soak = SignedDuration::try_from(rollout.soak.0).unwrap_or(SignedDuration::MAX);
            let start = followed.map(|at| {
                if rollout.after.is_empty() {
                    at
                } else {
                    at.saturating_add(soak).unwrap_or(Timestamp::MAX)
                }
            });
            finishes.insert(name, start.and_then(|at| finish(name, at)));
            earliest = Some(match (earliest.flatten(), start) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            });
        }
        starts.insert(level, earliest.flatten());
    }
    starts
}
