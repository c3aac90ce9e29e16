//! How long a cluster's predicted steps will take, from the step durations the daemon measured
//! (its medians per action, in the observed state), and when they can start.
//!
//! Pure. The model is simple and said in the preview: steps run in the plan's order, in
//! rounds as the daemon runs them: consecutive non-disruptive steps on different machines run
//! together (the slowest counts), a disruptive step runs alone. The estimate is the sum of the
//! rounds. Actions never measured count as nothing and are named. Waiting for the maintenance
//! window is not part of it: the window's opening is when the steps it holds can start.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde::Serialize;

use crate::observed::StepDuration;
use crate::plan::Resource;

use super::PreviewStep;
use super::windows::WindowsNeeded;

/// The estimated duration of one cluster's predicted steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Estimate {
    /// The rounds' durations summed, in seconds (rounded up).
    pub seconds: u64,
    /// Rounds the steps run in.
    pub rounds: usize,
    /// Steps whose action has a measured median.
    pub measured_steps: usize,
    /// Actions of the steps with no measurement (counted as nothing), sorted.
    pub unmeasured: Vec<String>,
    /// When the maintenance window holding the steps opens, when it holds any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starts: Option<Timestamp>,
    /// A window holds the steps and never opens again.
    pub never_starts: bool,
    /// The maintenance windows the steps need, when the cluster has allow windows and a
    /// step is disruptive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<WindowsNeeded>,
    /// The estimate in words, with how it was made.
    pub explanation: String,
}

impl Estimate {
    /// Adds the windows the steps need, said in the explanation too.
    pub(super) fn with_windows(mut self, windows: Option<WindowsNeeded>) -> Self {
        if let Some(windows) = &windows {
            self.explanation
                .push_str("; maintenance windows (from the 90th percentiles): ");
            self.explanation.push_str(&windows.text);
        }
        self.windows = windows;
        self
    }
}

/// The estimate of `predicted` from `durations`; `None` when there is no step, or when the
/// daemon has measured nothing yet (an older snapshot, `--observed none`).
pub fn estimate(
    predicted: &[PreviewStep],
    durations: &BTreeMap<String, StepDuration>,
) -> Option<Estimate> {
    if predicted.is_empty() || durations.is_empty() {
        return None;
    }
    let rounds = rounds(predicted);
    let mut unmeasured = BTreeSet::new();
    let mut measured_steps = 0;
    let mut total_ms: u64 = 0;
    for round in &rounds {
        let mut slowest = 0u64;
        for step in round {
            match durations.get(step.step.name()) {
                Some(duration) => {
                    measured_steps += 1;
                    slowest = slowest.max(duration.median_ms);
                }
                None => {
                    unmeasured.insert(step.step.name().to_owned());
                }
            }
        }
        total_ms = total_ms.saturating_add(slowest);
    }
    let window = predicted.iter().find_map(|step| match &step.step.waits_on {
        Some(wait) => match &wait.resource {
            held @ Resource::MaintenanceWindow { opens, .. } => Some((*opens, held)),
            _ => None,
        },
        None => None,
    });
    let seconds = total_ms.div_ceil(1000);
    let mut estimate = Estimate {
        seconds,
        rounds: rounds.len(),
        measured_steps,
        unmeasured: unmeasured.into_iter().collect(),
        starts: window.and_then(|(opens, _)| opens),
        never_starts: matches!(window, Some((None, _))),
        windows: None,
        explanation: String::new(),
    };
    estimate.explanation = explain(&estimate, predicted.len(), window.map(|(_, held)| held));
    Some(estimate)
}

/// The steps grouped as the daemon runs them: a round takes consecutive non-disruptive steps
/// on different machines; a disruptive step, or a second step on a machine, starts a new one.
pub(super) fn rounds(predicted: &[PreviewStep]) -> Vec<Vec<&PreviewStep>> {
    let mut rounds: Vec<Vec<&PreviewStep>> = Vec::new();
    // The last round's machines, and whether it holds a disruptive step: a bootstrap's round
    // holds every machine, so it is not searched step by step.
    let mut machines = BTreeSet::new();
    let mut disruptive = false;
    for step in predicted {
        let machine = step.step.target.machine.as_ref();
        let joins_last = !rounds.is_empty()
            && !step.step.disruptive
            && !disruptive
            && machine.is_none_or(|m| !machines.contains(m));
        if !joins_last {
            rounds.push(Vec::new());
            machines.clear();
            disruptive = false;
        }
        disruptive |= step.step.disruptive;
        machines.extend(machine);
        if let Some(round) = rounds.last_mut() {
            round.push(step);
        }
    }
    rounds
}

/// The estimate in words; `held` is the maintenance or deny window holding the steps.
fn explain(estimate: &Estimate, steps: usize, held: Option<&Resource>) -> String {
    let mut text = if estimate.measured_steps == 0 {
        format!("unknown: the daemon has measured none of these {steps} step(s)' actions yet")
    } else {
        format!(
            "{} for {steps} step(s) in {} round(s), from the medians the daemon measured (steps in plan order; non-disruptive steps on different machines together, disruptive ones alone)",
            roughly(estimate.seconds),
            estimate.rounds
        )
    };
    if !estimate.unmeasured.is_empty() {
        text.push_str(&format!(
            "; never measured, counted as nothing: {}",
            estimate.unmeasured.join(", ")
        ));
    }
    match held {
        Some(
            held @ Resource::MaintenanceWindow {
                deny: None,
                fit: None,
                ..
            },
        ) if estimate.starts.is_some() => {
            let when = held.window_opens_local().unwrap_or_default();
            text.push_str(&format!("; held for the maintenance window: starts {when}"));
        }
        Some(held) => {
            if let Some(phrase) = held.hold_phrase() {
                text.push_str("; ");
                text.push_str(&phrase);
            }
        }
        None => {}
    }
    text
}

/// `under a minute`, `about 7 min`, `about 2 h 05 min`.
fn roughly(seconds: u64) -> String {
    let minutes = seconds.div_ceil(60);
    match seconds {
        0..60 => "under a minute".to_owned(),
        _ if minutes < 60 => format!("about {minutes} min"),
        _ => format!("about {} h {:02} min", minutes / 60, minutes % 60),
    }
}

#[cfg(test)]
mod tests;
