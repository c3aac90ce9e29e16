//! How long steps take: each successful step's wall time by action, the most recent
//! [`KEPT_PER_ACTION`] per action only, summed up as medians for the observed state (what
//! previews estimate a change's duration from).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::observed::StepDuration;
use crate::plan::ActionKind;

/// Measurements kept per action: enough for a stable median, few enough that memory stays
/// bounded whatever the daemon's uptime, and recent enough to follow a slower Proxmox.
pub const KEPT_PER_ACTION: usize = 21;

/// Recent step durations by action.
#[derive(Debug, Default, Clone)]
pub struct StepTimings {
    recent: BTreeMap<ActionKind, VecDeque<Duration>>,
}

impl StepTimings {
    /// Records that a step of `action` succeeded after `took`.
    pub fn record(&mut self, action: ActionKind, took: Duration) {
        let kept = self.recent.entry(action).or_default();
        if kept.len() == KEPT_PER_ACTION {
            kept.pop_front();
        }
        kept.push_back(took);
    }

    /// The median of each measured action, by action name.
    pub fn medians(&self) -> BTreeMap<String, StepDuration> {
        self.recent
            .iter()
            .filter_map(|(action, kept)| {
                let median = median(kept.iter().copied())?;
                Some((
                    action.name().to_owned(),
                    StepDuration {
                        median_ms: u64::try_from(median.as_millis()).unwrap_or(u64::MAX),
                        samples: u32::try_from(kept.len()).unwrap_or(u32::MAX),
                    },
                ))
            })
            .collect()
    }
}

/// The middle value; for an even count, the mean of the two middle ones.
fn median(values: impl Iterator<Item = Duration>) -> Option<Duration> {
    let mut sorted: Vec<Duration> = values.collect();
    sorted.sort_unstable();
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => sorted.get(middle).copied(),
        _ => Some((sorted[middle - 1] + sorted[middle]) / 2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_are_per_action_and_even_counts_take_the_mean_of_the_middle_two() {
        let mut timings = StepTimings::default();
        for seconds in [30, 10, 20] {
            timings.record(ActionKind::CreateMachine, Duration::from_secs(seconds));
        }
        for seconds in [4, 8] {
            timings.record(ActionKind::Drain, Duration::from_secs(seconds));
        }
        let medians = timings.medians();
        assert_eq!(
            medians["create-machine"],
            StepDuration {
                median_ms: 20_000,
                samples: 3
            }
        );
        assert_eq!(medians["drain"].median_ms, 6_000);
        assert!(!medians.contains_key("join-node"));
    }

    #[test]
    fn only_the_most_recent_measurements_are_kept() {
        let mut timings = StepTimings::default();
        for _ in 0..100 {
            timings.record(ActionKind::JoinNode, Duration::from_secs(600));
        }
        for _ in 0..KEPT_PER_ACTION {
            timings.record(ActionKind::JoinNode, Duration::from_secs(5));
        }
        let join = timings.medians()["join-node"];
        assert_eq!(join.median_ms, 5_000, "the old, slow ones are forgotten");
        assert_eq!(join.samples as usize, KEPT_PER_ACTION);
    }
}
