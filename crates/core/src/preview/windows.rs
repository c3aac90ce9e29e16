//! How many maintenance windows a cluster's predicted steps need: the estimate's rounds
//! (the rounds of the duration estimate) played forward from `now`, each disruptive round starting where the
//! planner would let it (in an allow window, with its measured 90th percentile fitting in what
//! is left of it, running into no deny window), the others at once. Pure.
//!
//! A round lasts its slowest step's 90th percentile (its median in an older snapshot that has
//! none; nothing when never measured). At most [`MAX_WINDOWS`] windows are counted.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::observed::StepDuration;
use crate::plan::{self, Need, WindowSearch, WindowState};
use crate::spec::ClusterSpec;

use super::PreviewStep;

/// Windows counted at most: a change needing more is said to need "more than 10".
pub const MAX_WINDOWS: usize = 10;

/// The maintenance windows a cluster's predicted steps need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowsNeeded {
    /// When each window its disruptive steps start in opens, in order (at most
    /// [`MAX_WINDOWS`]).
    pub opens: Vec<Timestamp>,
    /// It needs more windows than `opens` lists.
    pub more: bool,
    /// A disruptive step never fits in any window (it waits for good).
    pub never: bool,
    /// When its last step is estimated to end (the last counted, with `more` or `never`).
    pub ends: Timestamp,
    /// In words: `fits 3h 10m of the 4h window at Sat 2026-05-02 01:00 UTC`, `needs 3
    /// windows: ...`.
    pub text: String,
}

/// One window used: when it opens and closes, when its first disruptive round starts and its
/// last one ends.
struct Used {
    opens: Timestamp,
    closes: Timestamp,
    first: Timestamp,
    last: Timestamp,
}

/// The windows the predicted steps need, in their `rounds` (as the estimate groups them),
/// under `spec`'s allow windows from `now`, within one window `search` for every round;
/// `None` when `spec` has no allow window or no step is disruptive. A search that ends early
/// leaves the rounds after it counted as never fitting.
pub(super) fn needed(
    rounds: Vec<Vec<&PreviewStep>>,
    spec: &ClusterSpec,
    durations: &BTreeMap<String, StepDuration>,
    now: Timestamp,
    search: &WindowSearch<'_>,
) -> Option<WindowsNeeded> {
    let has_allow = spec.rollout.maintenance_window.is_some() || !spec.maintenance.allow.is_empty();
    if !has_allow || !rounds.iter().flatten().any(|s| s.step.disruptive) {
        return None;
    }
    let mut used: Vec<Used> = Vec::new();
    let (mut more, mut never) = (false, false);
    let mut at = now;
    for round in rounds {
        let took = round
            .iter()
            .filter_map(|step| durations.get(step.step.name()))
            .map(|measured| {
                measured
                    .high()
                    .unwrap_or(Duration::from_millis(measured.median_ms))
            })
            .max()
            .unwrap_or(Duration::ZERO);
        let Some(disruptive) = round.iter().find(|s| s.step.disruptive) else {
            at = later(at, took);
            continue;
        };
        let need = durations.get(disruptive.step.name()).and_then(|d| {
            Some(Need {
                duration: d.high()?,
                samples: d.samples,
            })
        });
        let starts = match plan::window_state(spec, at, need, search) {
            WindowState::Open => at,
            WindowState::Closed(hold) => match hold.opens {
                Some(opens) => opens,
                None => {
                    never = true;
                    break;
                }
            },
        };
        let Some((opens, closes)) = plan::open_allow(spec, starts, search) else {
            // Only a deny window held it: it starts outside any allow window.
            at = later(starts, took);
            continue;
        };
        let ends = later(starts, took);
        if used.last().is_some_and(|last| last.opens == opens) {
            if let Some(last) = used.last_mut() {
                last.last = ends;
            }
        } else if used.len() == MAX_WINDOWS {
            more = true;
            break;
        } else {
            used.push(Used {
                opens,
                closes,
                first: starts,
                last: ends,
            });
        }
        at = ends;
    }
    let zone = spec.maintenance.time_zone.as_str();
    Some(WindowsNeeded {
        text: words(&used, more, never, zone),
        opens: used.iter().map(|u| u.opens).collect(),
        more,
        never,
        ends: at,
    })
}

fn later(at: Timestamp, by: Duration) -> Timestamp {
    let by = SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX);
    at.saturating_add(by).unwrap_or(Timestamp::MAX)
}

/// The windows used, in words.
fn words(used: &[Used], more: bool, never: bool, zone: &str) -> String {
    let when = |at: Timestamp| plan::day_and_time(at, zone);
    let mut text = match used {
        [] => String::new(),
        [one] if !more => format!(
            "fits {} of the {} window at {} {zone}",
            span(one.first, one.last),
            span(one.opens, one.closes),
            when(one.opens)
        ),
        _ => format!(
            "needs {}{} windows: {} {zone}",
            if more { "more than " } else { "" },
            used.len(),
            used.iter()
                .map(|u| when(u.opens))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    if never {
        if !text.is_empty() {
            text.push_str("; then ");
        }
        text.push_str("a disruptive step fits in no window: it waits for good");
    }
    text
}

/// `3h 10m`, rounded to the second.
fn span(from: Timestamp, to: Timestamp) -> String {
    let seconds = from.duration_until(to).as_secs().max(0).unsigned_abs();
    crate::plan::seconds(seconds)
}

#[cfg(test)]
mod tests;
