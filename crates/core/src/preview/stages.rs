//! The stages of a staged rollout (`rollout.after`), in order, for a preview: each stage holds
//! the clusters whose every followed cluster is in an earlier one.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::spec::Desired;

/// One stage: its clusters, each with what it waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    /// Its clusters, by name, each as `prod-a (after staging, soak 30m)`.
    pub clusters: Vec<String>,
}

/// The stages of `desired` in order; empty when no cluster follows another. Validation
/// refuses cycles; a cycle among what is left still ends (its clusters go last).
pub fn order(desired: Option<&Desired>) -> Vec<Stage> {
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
        .into_values()
        .map(|clusters| Stage { clusters })
        .collect()
}
