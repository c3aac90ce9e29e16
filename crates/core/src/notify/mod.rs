//! What capstan tells people, computed from what it already reports: each [`Event`] comes
//! from the difference between the previous and the next published status of the fleet
//! ([`status_events`]), or from a step that finished ([`step_event`]); the alerts an
//! Alertmanager holds come from the status itself ([`firing`]). The payloads of every
//! receiver are rendered here too ([`payloads`]).
//!
//! Pure: no clock, no I/O. The daemon publishes statuses whose messages passed its redactor,
//! so events carry only redacted text; it delivers the payloads.

pub mod payloads;

#[cfg(test)]
mod tests;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::plan::{ActionKind, Phase};
use crate::spec::{EventKind, EventSeverity};
use crate::status::{ClusterStatus, Condition, FleetStatus, StepRecord, conditions};

/// Certificates that expire within this are reported as near expiry: capstan renews them
/// `certificates.renewBefore` (30 days by default) ahead, so a week left means renewal has
/// kept failing and a person must look before the API server stops answering.
pub const NEAR_EXPIRY: SignedDuration = SignedDuration::from_hours(7 * 24);

/// The planner rule whose refusal is a drain held past `drainTimeout` (rule 5).
const DRAIN_DEADLINE_RULE: u8 = 5;

/// Something that happened, for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// How serious it is.
    pub severity: EventSeverity,
    /// The cluster it is about (`None`: the fleet's own, e.g. the source).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// In plain words (already redacted).
    pub message: String,
    /// Events with the same key are the same news: repeats within a window are folded.
    pub dedup_key: String,
    /// The revision acted on when it happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// When it happened.
    pub at: Timestamp,
}

impl Event {
    fn new(
        kind: EventKind,
        severity: EventSeverity,
        cluster: Option<&str>,
        detail: &str,
        message: String,
    ) -> Self {
        let dedup_key = match (cluster, detail.is_empty()) {
            (Some(cluster), true) => format!("{}/{cluster}", kind.name()),
            (Some(cluster), false) => format!("{}/{cluster}/{detail}", kind.name()),
            (None, true) => kind.name().to_owned(),
            (None, false) => format!("{}/{detail}", kind.name()),
        };
        Event {
            kind,
            severity,
            cluster: cluster.map(str::to_owned),
            message,
            dedup_key,
            revision: None,
            at: Timestamp::UNIX_EPOCH,
        }
    }

    /// A one-line title: `prod: ClusterBlocked`, or the kind alone for the fleet's events.
    pub fn title(&self) -> String {
        match &self.cluster {
            Some(cluster) => format!("{cluster}: {}", self.kind.name()),
            None => format!("capstan: {}", self.kind.name()),
        }
    }
}

fn condition<'a>(conditions: &'a [Condition], kind: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.kind == kind)
}

fn holds(conditions: &[Condition], kind: &str) -> bool {
    condition(conditions, kind).is_some_and(|c| c.status == conditions::TRUE)
}

fn fails(conditions: &[Condition], kind: &str) -> bool {
    condition(conditions, kind).is_some_and(|c| c.status == conditions::FALSE)
}

/// The events between two published statuses of the fleet, in a fixed order (the fleet's,
/// then each cluster's by name). Nothing when `previous` was never published (a daemon that
/// just started, or a replica that just took over, knows no transition, only a state:
/// Alertmanager's alerts, which are state, are re-sent from [`firing`]).
pub fn status_events(previous: &FleetStatus, next: &FleetStatus, now: Timestamp) -> Vec<Event> {
    if previous.updated.is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    fleet_events(&mut out, previous, next);
    for (name, cluster) in &next.clusters {
        cluster_events(&mut out, name, previous.clusters.get(name), cluster, now);
    }
    for event in &mut out {
        event.at = now;
        event.revision.clone_from(&next.revision);
    }
    out
}

fn fleet_events(out: &mut Vec<Event>, previous: &FleetStatus, next: &FleetStatus) {
    let source = conditions::SOURCE_AVAILABLE;
    if fails(&next.conditions, source) && !fails(&previous.conditions, source) {
        let message = condition(&next.conditions, source).map_or(String::new(), |c| {
            format!(
                "the source does not answer; the last revision read is still reconciled: {}",
                c.message
            )
        });
        out.push(Event::new(
            EventKind::SourceUnavailable,
            EventSeverity::Warning,
            None,
            "",
            message,
        ));
    }
    if holds(&next.conditions, source) && fails(&previous.conditions, source) {
        out.push(Event::new(
            EventKind::SourceRestored,
            EventSeverity::Info,
            None,
            "",
            "the source answers again".to_owned(),
        ));
    }
    let verified = conditions::SOURCE_VERIFIED;
    if let Some(refused) = condition(&next.conditions, verified)
        .filter(|c| c.status == conditions::FALSE)
        .filter(|c| {
            condition(&previous.conditions, verified)
                .is_none_or(|p| p.status != conditions::FALSE || p.reason != c.reason)
        })
    {
        out.push(Event::new(
            EventKind::CommitNotVerified,
            EventSeverity::Error,
            None,
            &refused.reason,
            format!(
                "{} ({}); the last verified revision is still reconciled",
                refused.message, refused.reason
            ),
        ));
    }
    let leader = |status: &FleetStatus| status.leadership.as_ref().and_then(|l| l.leader.clone());
    if let Some(now_leads) = leader(next)
        && leader(previous).is_some_and(|before| before != now_leads)
    {
        let before = leader(previous).unwrap_or_default();
        out.push(Event::new(
            EventKind::LeadershipChanged,
            EventSeverity::Info,
            None,
            &now_leads,
            format!("{now_leads} leads now (was {before})"),
        ));
    }
}

fn is_near_expiry(cluster: &ClusterStatus, at: Timestamp) -> bool {
    cluster
        .certificate_expiry
        .is_some_and(|expiry| expiry.duration_since(at) < NEAR_EXPIRY)
}

fn cluster_events(
    out: &mut Vec<Event>,
    name: &str,
    previous: Option<&ClusterStatus>,
    next: &ClusterStatus,
    now: Timestamp,
) {
    let was = |phase: Phase| previous.is_some_and(|p| p.phase == phase);
    let blocked_message = || {
        condition(&next.conditions, conditions::BLOCKED)
            .map_or_else(String::new, |c| c.message.clone())
    };
    if next.phase == Phase::Blocked && !was(Phase::Blocked) {
        out.push(Event::new(
            EventKind::ClusterBlocked,
            EventSeverity::Error,
            Some(name),
            "",
            format!("{name} is Blocked: {}", blocked_message()),
        ));
    }
    if was(Phase::Blocked) && next.phase != Phase::Blocked {
        out.push(Event::new(
            EventKind::ClusterUnblocked,
            EventSeverity::Info,
            Some(name),
            "",
            format!("{name} is no longer Blocked (now {})", next.phase),
        ));
    }
    for refusal in &next.refusals {
        let known = previous.is_some_and(|p| {
            p.refusals
                .iter()
                .any(|r| r.rule == refusal.rule && r.message == refusal.message)
        });
        if known {
            continue;
        }
        let (kind, what) = if refusal.rule == DRAIN_DEADLINE_RULE {
            (EventKind::DrainHeld, "a drain is held past its deadline")
        } else {
            (EventKind::ChangeRefused, "a change is refused")
        };
        out.push(Event::new(
            kind,
            EventSeverity::Warning,
            Some(name),
            &refusal.rule.to_string(),
            format!(
                "{name}: {what} by rule {} ({}): {}",
                refusal.rule, refusal.title, refusal.message
            ),
        ));
    }
    if was(Phase::Ready) && next.phase == Phase::Updating {
        let next_steps = next.next_steps.join(", ");
        out.push(Event::new(
            EventKind::RolloutStarted,
            EventSeverity::Info,
            Some(name),
            "",
            format!("{name}: rollout started; next: {next_steps}"),
        ));
    }
    if (was(Phase::Updating) || was(Phase::Provisioning)) && next.phase == Phase::Ready {
        let since = previous
            .and_then(|p| condition(&p.conditions, conditions::READY))
            .map(|ready| ready.last_transition_time);
        let took = since.map_or_else(String::new, |since| {
            let seconds = now.duration_since(since).as_secs().max(0);
            format!(
                " after {}",
                humantime::format_duration(std::time::Duration::from_secs(seconds.unsigned_abs()))
            )
        });
        out.push(Event::new(
            EventKind::RolloutFinished,
            EventSeverity::Info,
            Some(name),
            "",
            format!("{name} is Ready{took}"),
        ));
    }
    let held = conditions::REMEDIATION_HELD;
    if holds(&next.conditions, held) && !previous.is_some_and(|p| holds(&p.conditions, held)) {
        let message =
            condition(&next.conditions, held).map_or(String::new(), |c| c.message.clone());
        out.push(Event::new(
            EventKind::RemediationHeld,
            EventSeverity::Warning,
            Some(name),
            "",
            format!("{name}: remediation held: {message}"),
        ));
    }
    if let (Some(before), Some(after)) = (
        previous.and_then(|p| p.certificate_expiry),
        next.certificate_expiry,
    ) && after > before
    {
        out.push(Event::new(
            EventKind::CertificateRenewed,
            EventSeverity::Info,
            Some(name),
            "",
            format!("{name}: certificates renewed; they expire at {after}"),
        ));
    }
    let was_near = previous.is_some_and(|p| is_near_expiry(p, now));
    if is_near_expiry(next, now) && !was_near {
        let expiry = next
            .certificate_expiry
            .map(|e| e.to_string())
            .unwrap_or_default();
        out.push(Event::new(
            EventKind::CertificateNearExpiry,
            EventSeverity::Warning,
            Some(name),
            "",
            format!("{name}: certificates expire at {expiry} and are not renewed yet"),
        ));
    }
}

/// The event of a step that finished: a failure (its message is the step's redacted error),
/// or a node fenced. Other successes are told by the status (a rollout finished).
pub fn step_event(cluster: &str, step: &StepRecord) -> Option<Event> {
    let target = step
        .machine
        .as_ref()
        .map(|m| format!(" {m}"))
        .unwrap_or_default();
    let detail = format!("{}{target}", step.action.name());
    let mut event = if !step.succeeded {
        Event::new(
            EventKind::StepFailed,
            EventSeverity::Error,
            Some(cluster),
            &detail,
            format!(
                "{cluster}: {detail} failed ({} in a row): {}",
                step.failures, step.message
            ),
        )
    } else if step.action == ActionKind::FenceMachine {
        Event::new(
            EventKind::NodeFenced,
            EventSeverity::Warning,
            Some(cluster),
            &detail,
            format!("{cluster}: fenced{target}: {}", step.message),
        )
    } else {
        return None;
    };
    event.at = step.at;
    event.revision.clone_from(&step.revision);
    Some(event)
}

/// The name of the Alertmanager alert of a Blocked cluster.
pub const BLOCKED_ALERT: &str = "CapstanClusterBlocked";
/// The name of the Alertmanager alert of a cluster whose remediation is held.
pub const REMEDIATION_HELD_ALERT: &str = "CapstanRemediationHeld";
/// The name of the Alertmanager alert of a source that does not answer.
pub const SOURCE_UNAVAILABLE_ALERT: &str = "CapstanSourceUnavailable";

/// An alert that fires while a condition lasts (Alertmanager's model: state, not events).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Firing {
    /// The alert's name (`CapstanClusterBlocked`).
    pub alertname: &'static str,
    /// The event kind it stands for (what alerts select on).
    pub kind: EventKind,
    /// The cluster (`None`: the fleet's own).
    pub cluster: Option<String>,
    /// Its severity.
    pub severity: EventSeverity,
    /// What holds, in plain words (already redacted).
    pub summary: String,
    /// Since when.
    pub since: Timestamp,
}

impl Firing {
    /// What identifies the alert in Alertmanager (its labels): the same key is the same alert.
    pub fn key(&self) -> (&'static str, Option<&str>) {
        (self.alertname, self.cluster.as_deref())
    }
}

/// The alerts that fire in `status`: each Blocked cluster, each cluster whose remediation is
/// held, and the source when it does not answer.
pub fn firing(status: &FleetStatus) -> Vec<Firing> {
    let mut out = Vec::new();
    if let Some(source) = condition(&status.conditions, conditions::SOURCE_AVAILABLE)
        .filter(|c| c.status == conditions::FALSE)
    {
        out.push(Firing {
            alertname: SOURCE_UNAVAILABLE_ALERT,
            kind: EventKind::SourceUnavailable,
            cluster: None,
            severity: EventSeverity::Warning,
            summary: source.message.clone(),
            since: source.last_transition_time,
        });
    }
    for (name, cluster) in &status.clusters {
        if cluster.phase == Phase::Blocked {
            let blocked = condition(&cluster.conditions, conditions::BLOCKED);
            out.push(Firing {
                alertname: BLOCKED_ALERT,
                kind: EventKind::ClusterBlocked,
                cluster: Some(name.clone()),
                severity: EventSeverity::Error,
                summary: blocked.map_or_else(String::new, |c| c.message.clone()),
                since: blocked
                    .map(|c| c.last_transition_time)
                    .or(status.updated)
                    .unwrap_or(Timestamp::UNIX_EPOCH),
            });
        }
        if let Some(held) = condition(&cluster.conditions, conditions::REMEDIATION_HELD)
            .filter(|c| c.status == conditions::TRUE)
        {
            out.push(Firing {
                alertname: REMEDIATION_HELD_ALERT,
                kind: EventKind::RemediationHeld,
                cluster: Some(name.clone()),
                severity: EventSeverity::Warning,
                summary: held.message.clone(),
                since: held.last_transition_time,
            });
        }
    }
    out
}
