//! How long steps take: each successful step's wall time by action, the most recent
//! [`KEPT_PER_ACTION`] per action only, summed up as medians and 90th percentiles for the
//! observed state (previews estimate a change's duration from the medians; maintenance
//! windows hold a step its 90th percentile would not fit in).

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

    /// The median and 90th percentile of each measured action, by action name.
    pub fn medians(&self) -> BTreeMap<String, StepDuration> {
        self.recent
            .iter()
            .filter_map(|(action, kept)| {
                let mut sorted: Vec<Duration> = kept.iter().copied().collect();
                sorted.sort_unstable();
                let median = median(&sorted)?;
                Some((
                    action.name().to_owned(),
                    StepDuration {
                        median_ms: millis(median),
                        samples: u32::try_from(kept.len()).unwrap_or(u32::MAX),
                        p90_ms: p90(&sorted).map(millis),
                    },
                ))
            })
            .collect()
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The middle value of `sorted`; for an even count, the mean of the two middle ones.
fn median(sorted: &[Duration]) -> Option<Duration> {
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => sorted.get(middle).copied(),
        _ => Some((sorted[middle - 1] + sorted[middle]) / 2),
    }
}

/// The 90th percentile of `sorted` by nearest rank: a duration that was measured, at or above
/// nine in ten of them. The 90th and not the 95th: of the [`KEPT_PER_ACTION`] kept, the 95th
/// would be the second slowest, so one stalled task would hold every later step out of
/// windows it fits in; the 90th lets two of 21 be outliers and is still a step's slow case.
/// With few measurements it is the slowest one (of 5: the 5th).
fn p90(sorted: &[Duration]) -> Option<Duration> {
    let rank = (sorted.len() * 9).div_ceil(10);
    sorted.get(rank.checked_sub(1)?).copied()
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
                samples: 3,
                p90_ms: Some(30_000),
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

    #[test]
    fn the_90th_percentile_is_a_measured_duration_at_or_above_nine_in_ten() {
        let mut timings = StepTimings::default();
        for seconds in 1..=KEPT_PER_ACTION as u64 {
            timings.record(ActionKind::Drain, Duration::from_secs(seconds));
        }
        // Of 21, nearest rank 19: two slower ones are outliers it does not follow.
        assert_eq!(timings.medians()["drain"].p90_ms, Some(19_000));
        let mut few = StepTimings::default();
        for seconds in [60, 180, 90, 100, 120] {
            few.record(ActionKind::Drain, Duration::from_secs(seconds));
        }
        let drain = few.medians()["drain"];
        assert_eq!(drain.p90_ms, Some(180_000), "of five, the slowest");
        assert_eq!(drain.median_ms, 100_000);
    }
}
