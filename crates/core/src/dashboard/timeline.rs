//! A cluster's rollout as a timeline: the steps run over the last hours (with duration and
//! result), those in flight, and the predicted steps ahead drawn with the durations the
//! daemon measured (their medians), one after another from now, or from when the maintenance
//! window opens when one holds them. Drawn as bars and, for screen readers and small screens,
//! as a table with the same rows.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use maud::{Markup, html};

use super::history::Outcome;
use super::{View, duration, header, time};
use crate::plan::{Action, Resource};

/// How far back the timeline looks.
pub const LOOKBACK: Duration = Duration::from_secs(3 * 3600);

/// The shortest span drawn: a minute's steps still fill the width readably.
const MIN_SPAN: Duration = Duration::from_secs(60);

/// The most predicted steps drawn: a replacement of a large cluster predicts hundreds, the
/// page says how many more there are.
const MAX_PREDICTED: usize = 60;

/// What a bar stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum BarKind {
    /// Ran, and how it ended.
    Done(Outcome),
    /// Runs now.
    Running,
    /// Predicted, with its median duration when measured.
    Predicted(Option<Duration>),
}

/// One bar of the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Bar {
    pub action: &'static str,
    pub machine: Option<String>,
    pub start: Timestamp,
    pub end: Timestamp,
    pub kind: BarKind,
    /// The step removes a machine (it is being replaced or scaled away).
    pub removes: bool,
}

/// The bars of cluster `name`, the span they are drawn on, the time a maintenance window holds
/// the predicted steps until (if one does) and how many predicted steps were left out.
pub(super) struct Timeline {
    pub bars: Vec<Bar>,
    pub from: Timestamp,
    pub to: Timestamp,
    pub held_until: Option<Timestamp>,
    pub left_out: usize,
}

/// The timeline of cluster `name`.
pub(super) fn timeline(view: &View<'_>, name: &str) -> Timeline {
    let now = view.now;
    let earliest = now - signed(LOOKBACK);
    let mut bars: Vec<Bar> = view
        .history
        .of(name)
        .filter(|run| run.ended.is_none_or(|ended| ended >= earliest))
        .map(|run| Bar {
            action: run.action.name(),
            machine: run.machine.as_ref().map(ToString::to_string),
            start: run.started,
            end: run.ended.unwrap_or(now),
            kind: match run.ended {
                None => BarKind::Running,
                Some(_) => BarKind::Done(run.outcome.clone()),
            },
            removes: removes(run.action.name()),
        })
        .collect();
    let plan = view.plan.and_then(|plan| plan.cluster(name));
    let held_until = plan.and_then(|plan| {
        plan.waiting_on
            .iter()
            .find_map(|wait| match &wait.resource {
                Resource::MaintenanceWindow { opens, .. } => *opens,
                _ => None,
            })
    });
    let durations = view.observed.map(|o| &o.step_durations);
    let mut at = held_until.filter(|opens| *opens > now).unwrap_or(now);
    let mut left_out = 0;
    let running: Vec<(&str, Option<String>)> = bars
        .iter()
        .filter(|bar| bar.kind == BarKind::Running)
        .map(|bar| (bar.action, bar.machine.clone()))
        .collect();
    for step in plan
        .map(|plan| plan.predicted.as_slice())
        .unwrap_or_default()
    {
        let machine = step.target.machine.as_ref().map(ToString::to_string);
        if running.contains(&(step.name(), machine.clone())) {
            continue;
        }
        if bars
            .iter()
            .filter(|b| matches!(b.kind, BarKind::Predicted(_)))
            .count()
            >= MAX_PREDICTED
        {
            left_out += 1;
            continue;
        }
        let estimate = durations
            .and_then(|d| d.get(step.name()))
            .map(|d| Duration::from_millis(d.median_ms));
        let end = at + signed(estimate.unwrap_or_default());
        bars.push(Bar {
            action: step.name(),
            machine,
            start: at,
            end,
            kind: BarKind::Predicted(estimate),
            removes: matches!(
                step.action,
                Action::DestroyMachine { .. } | Action::DeleteNode { .. }
            ),
        });
        at = end;
    }
    let from = bars
        .iter()
        .map(|b| b.start)
        .min()
        .unwrap_or(now)
        .max(earliest)
        .min(now);
    let to = bars.iter().map(|b| b.end).max().unwrap_or(now).max(now);
    let to = to.max(from + signed(MIN_SPAN));
    Timeline {
        bars,
        from,
        to,
        held_until,
        left_out,
    }
}

fn removes(action: &str) -> bool {
    action == "destroy-machine" || action == "delete-node"
}

fn signed(duration: Duration) -> SignedDuration {
    SignedDuration::try_from(duration).unwrap_or(SignedDuration::MAX)
}

/// Where `at` falls on the span, in percent.
fn percent(timeline: &Timeline, at: Timestamp) -> f64 {
    let span = timeline.to.duration_since(timeline.from).as_secs_f64();
    let offset = at.duration_since(timeline.from).as_secs_f64();
    if span <= 0.0 {
        return 0.0;
    }
    (offset / span * 100.0).clamp(0.0, 100.0)
}

/// The steps a bar is placed by, in percent of the timeline: fine enough that a step never
/// lands a visible distance from where it belongs (half a percent is 6 px at 1280 px).
const PLACEMENT_STEP: f64 = 0.5;

/// The CSS properties a bar, the "now" line and a held window are placed with, and the
/// class prefix of each.
const PLACED: [(&str, &str); 3] = [("left", "l"), ("margin-left", "ml"), ("width", "w")];

/// The class that sets `property` (one of [`PLACED`]) to `percent`, rounded to
/// [`PLACEMENT_STEP`]: the page carries classes, never a `style` attribute, so the daemon's
/// Content-Security-Policy holds without `'unsafe-inline'`.
fn place(property: &str, percent: f64) -> String {
    let prefix = PLACED
        .iter()
        .find(|(name, _)| *name == property)
        .map_or("w", |(_, prefix)| prefix);
    let steps = (percent.clamp(0.0, 100.0) / PLACEMENT_STEP).round();
    format!("{prefix}-{steps:.0}")
}

/// The rules behind [`place`]'s classes: one per property and step, from 0 to 100 %.
pub(super) fn placement_rules() -> String {
    use std::fmt::Write as _;
    let steps = (100.0 / PLACEMENT_STEP).round() as u32;
    let mut rules = String::from(
        "/* The timeline's placements (generated: dashboard::timeline::placement_rules). */\n",
    );
    for (property, prefix) in PLACED {
        for step in 0..=steps {
            let percent = f64::from(step) * PLACEMENT_STEP;
            let _ = writeln!(rules, ".{prefix}-{step}{{{property}:{percent}%}}");
        }
    }
    rules
}

/// A bar's result in words and its symbol.
fn result(kind: &BarKind) -> (&'static str, String) {
    match kind {
        BarKind::Done(Outcome::Succeeded) => ("ok", "✓ succeeded".to_owned()),
        BarKind::Done(Outcome::Failed(message)) => ("failed", format!("✕ failed: {message}")),
        BarKind::Done(Outcome::Stopped) => ("stopped", "■ stopped (leadership lost)".to_owned()),
        BarKind::Done(Outcome::Running) | BarKind::Running => ("running", "▶ running".to_owned()),
        BarKind::Predicted(_) => ("predicted", "… predicted".to_owned()),
    }
}

/// A bar's duration in words.
fn took(bar: &Bar, now: Timestamp) -> String {
    let took = bar.end.duration_since(bar.start).unsigned_abs();
    match &bar.kind {
        BarKind::Predicted(Some(estimate)) => format!("≈ {} (median)", duration(*estimate)),
        BarKind::Predicted(None) => "not measured yet".to_owned(),
        BarKind::Running => format!(
            "{} so far",
            duration(now.duration_since(bar.start).unsigned_abs())
        ),
        BarKind::Done(_) => duration(took),
    }
}

/// The timeline of cluster `name`: bars, then the same as a table.
pub(super) fn section(view: &View<'_>, name: &str) -> Markup {
    let timeline = timeline(view, name);
    let now_at = percent(&timeline, view.now);
    html! {
        section aria-labelledby="timeline-title" {
            h2 #timeline-title { "Rollout" }
            p {
                "From " (time(timeline.from)) " to " (time(timeline.to))
                "; steps of the last " (LOOKBACK.as_secs() / 3600) " hours, those in flight, and the predicted steps ahead at their measured medians, one after another."
            }
            @if let Some(opens) = timeline.held_until {
                p.note { "⏳ A maintenance window holds the predicted steps until " (time(opens)) " (shaded)." }
            }
            @if timeline.bars.is_empty() {
                p { "No step ran lately and none is predicted." }
            } @else {
                div.timeline aria-hidden="true" {
                    div class=(format!("now {}", place("left", now_at))) {}
                    @if let Some(opens) = timeline.held_until.filter(|o| *o > view.now) {
                        div class=(format!("hold {} {}", place("left", now_at), place("width", percent(&timeline, opens) - now_at))) {}
                    }
                    ol.lanes {
                        @for bar in &timeline.bars {
                            @let (class, words) = result(&bar.kind);
                            @let left = percent(&timeline, bar.start);
                            @let width = (percent(&timeline, bar.end) - left).max(0.5);
                            li class=(format!("bar {class}{}", if bar.removes { " removes" } else { "" })) data-action=(bar.action) {
                                span.bar-label {
                                    (bar.action)
                                    @if let Some(machine) = &bar.machine { " " (machine) }
                                    " · " (took(bar, view.now)) " · " (words)
                                    @if bar.removes { " · removes a machine" }
                                }
                                span.bar-track {
                                    span class=(format!("bar-fill {} {}", place("margin-left", left), place("width", width))) {}
                                }
                            }
                        }
                    }
                }
                div.scroll {
                    table.steps {
                        caption { "The rollout's steps, oldest first" }
                        (header(&["Step", "Machine", "Starts or started", "Duration", "Result"]))
                        tbody {
                            @for bar in &timeline.bars {
                                tr data-action=(bar.action) {
                                    th scope="row" { (bar.action) }
                                    td {
                                        @match &bar.machine { Some(m) => (m), None => "the cluster" }
                                        @if bar.removes { " (removed)" }
                                    }
                                    td {
                                        @if matches!(bar.kind, BarKind::Predicted(_)) { "≈ " }
                                        (time(bar.start))
                                    }
                                    td.duration { (took(bar, view.now)) }
                                    td { (result(&bar.kind).1) }
                                }
                            }
                        }
                    }
                }
                @if timeline.left_out > 0 {
                    p { "… and " (timeline.left_out) " more predicted steps." }
                }
            }
        }
    }
}
