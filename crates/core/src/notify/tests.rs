use jiff::{SignedDuration, Timestamp};

use super::payloads::{self, Notice};
use super::*;
use crate::status::{Refusal, reasons};

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).expect("timestamp")
}

fn cond(kind: &str, status: &str, reason: &str, message: &str, since: Timestamp) -> Condition {
    Condition {
        kind: kind.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        last_transition_time: since,
    }
}

fn cluster(phase: Phase) -> ClusterStatus {
    let (ready, reason) = if phase == Phase::Ready {
        (conditions::TRUE, reasons::CONVERGED)
    } else {
        (conditions::FALSE, reasons::RECONCILING)
    };
    let (blocked, why) = if phase == Phase::Blocked {
        (conditions::TRUE, reasons::STEP_FAILING)
    } else {
        (conditions::FALSE, reasons::CLEAR)
    };
    ClusterStatus {
        phase,
        conditions: vec![
            cond(conditions::READY, ready, reason, "", at(0)),
            cond(
                conditions::BLOCKED,
                blocked,
                why,
                "create-machine keeps failing: storage no-such-storage does not exist",
                at(0),
            ),
        ],
        version: None,
        certificate_expiry: None,
        kubeconfig_fingerprint: None,
        flux_kubeconfig_fingerprint: None,
        nodes: Vec::new(),
        declared_nodes: None,
        refusals: Vec::new(),
        waiting_on: Vec::new(),
        next_steps: vec!["create-machine prod-general-abc-0".to_owned()],
        last_step: None,
        suspended: Vec::new(),
        converged: None,
    }
}

fn fleet(clusters: &[(&str, ClusterStatus)], updated: Option<Timestamp>) -> FleetStatus {
    FleetStatus {
        revision: Some("main@sha1:0123456789ab".to_owned()),
        updated,
        clusters: clusters
            .iter()
            .map(|(name, c)| ((*name).to_owned(), c.clone()))
            .collect(),
        ..FleetStatus::default()
    }
}

fn kinds(events: &[Event]) -> Vec<EventKind> {
    events.iter().map(|e| e.kind).collect()
}

#[test]
fn a_cluster_becoming_blocked_and_clearing_gives_one_event_each() {
    let before = fleet(&[("prod", cluster(Phase::Updating))], Some(at(0)));
    let blocked = fleet(&[("prod", cluster(Phase::Blocked))], Some(at(10)));
    let events = status_events(&before, &blocked, at(10));
    assert_eq!(kinds(&events), [EventKind::ClusterBlocked]);
    let event = &events[0];
    assert_eq!(event.severity, EventSeverity::Error);
    assert_eq!(event.cluster.as_deref(), Some("prod"));
    assert_eq!(event.dedup_key, "ClusterBlocked/prod");
    assert_eq!(event.at, at(10));
    assert_eq!(event.revision.as_deref(), Some("main@sha1:0123456789ab"));
    assert!(
        event.message.contains("no-such-storage"),
        "{}",
        event.message
    );
    assert!(
        status_events(&blocked, &blocked, at(11)).is_empty(),
        "a state that lasts is no news"
    );
    let cleared = fleet(&[("prod", cluster(Phase::Updating))], Some(at(20)));
    assert_eq!(
        kinds(&status_events(&blocked, &cleared, at(20))),
        [EventKind::ClusterUnblocked]
    );
}

#[test]
fn no_event_comes_before_a_first_status_was_published() {
    let never = FleetStatus::default();
    let blocked = fleet(&[("prod", cluster(Phase::Blocked))], Some(at(10)));
    assert!(status_events(&never, &blocked, at(10)).is_empty());
}

#[test]
fn a_rollout_starts_on_leaving_ready_and_finishes_with_how_long_it_took() {
    let ready = fleet(&[("prod", cluster(Phase::Ready))], Some(at(0)));
    let mut updating_cluster = cluster(Phase::Updating);
    updating_cluster.conditions[0].last_transition_time = at(100);
    let updating = fleet(&[("prod", updating_cluster)], Some(at(100)));
    let started = status_events(&ready, &updating, at(100));
    assert_eq!(kinds(&started), [EventKind::RolloutStarted]);
    assert!(
        started[0].message.contains("create-machine"),
        "{}",
        started[0].message
    );
    let done = fleet(&[("prod", cluster(Phase::Ready))], Some(at(190)));
    let finished = status_events(&updating, &done, at(190));
    assert_eq!(kinds(&finished), [EventKind::RolloutFinished]);
    assert_eq!(finished[0].message, "prod is Ready after 1m 30s");
    assert_eq!(
        finished[0].revision.as_deref(),
        Some("main@sha1:0123456789ab")
    );
}

#[test]
fn a_new_refusal_is_told_once_and_a_drain_past_its_deadline_is_its_own_kind() {
    let before = fleet(&[("prod", cluster(Phase::Updating))], Some(at(0)));
    let mut refused = cluster(Phase::Blocked);
    refused.refusals = vec![
        Refusal {
            rule: 5,
            title: "drain deadline".to_owned(),
            message: "prod-general-0 still has pods a PodDisruptionBudget protects; uncordon or delete them".to_owned(),
        },
        Refusal {
            rule: 9,
            title: "control-plane quorum".to_owned(),
            message: "2 control planes cannot keep quorum; use 1, 3 or 5".to_owned(),
        },
    ];
    let after = fleet(&[("prod", refused)], Some(at(10)));
    let events = status_events(&before, &after, at(10));
    assert_eq!(
        kinds(&events),
        [
            EventKind::ClusterBlocked,
            EventKind::DrainHeld,
            EventKind::ChangeRefused
        ]
    );
    assert!(events[2].message.contains("rule 9 (control-plane quorum)"));
    assert!(
        events[2].message.contains("use 1, 3 or 5"),
        "the fix is told"
    );
    assert!(status_events(&after, &after, at(11)).is_empty());
}

#[test]
fn remediation_held_is_told_when_it_appears_only() {
    let before = fleet(&[("prod", cluster(Phase::Ready))], Some(at(0)));
    let mut held = cluster(Phase::Ready);
    held.conditions.push(cond(
        conditions::REMEDIATION_HELD,
        conditions::TRUE,
        reasons::TOO_MANY_UNHEALTHY,
        "3 of 5 nodes NotReady (prod-w-0, prod-w-1, prod-w-2): more than maxUnhealthy 40%",
        at(10),
    ));
    let after = fleet(&[("prod", held.clone())], Some(at(10)));
    let events = status_events(&before, &after, at(10));
    assert_eq!(kinds(&events), [EventKind::RemediationHeld]);
    assert!(events[0].message.contains("prod-w-2"));
    let later = fleet(&[("prod", held)], Some(at(20)));
    assert!(status_events(&after, &later, at(20)).is_empty());
}

#[test]
fn the_source_going_and_coming_back_and_a_refused_signature_are_fleet_events() {
    let mut up = fleet(&[], Some(at(0)));
    up.conditions = vec![cond(
        conditions::SOURCE_AVAILABLE,
        conditions::TRUE,
        reasons::FOLLOWING,
        "",
        at(0),
    )];
    let mut down = up.clone();
    down.conditions = vec![
        cond(
            conditions::SOURCE_AVAILABLE,
            conditions::FALSE,
            reasons::SOURCE_UNREACHABLE,
            "connection refused",
            at(5),
        ),
        cond(
            conditions::SOURCE_VERIFIED,
            conditions::FALSE,
            reasons::UNSIGNED,
            "commit 0123 is not signed",
            at(5),
        ),
    ];
    let events = status_events(&up, &down, at(5));
    assert_eq!(
        kinds(&events),
        [EventKind::SourceUnavailable, EventKind::CommitNotVerified]
    );
    assert!(events.iter().all(|e| e.cluster.is_none()));
    assert_eq!(
        kinds(&status_events(&down, &up, at(9))),
        [EventKind::SourceRestored]
    );
}

#[test]
fn leadership_changing_hands_is_told_by_the_new_leader() {
    let lead = |who: &str| crate::status::LeadershipStatus {
        role: "leader".to_owned(),
        identity: who.to_owned(),
        leader: Some(who.to_owned()),
        lease: "capstan-system/capstan".to_owned(),
    };
    let mut a = fleet(&[], Some(at(0)));
    a.leadership = Some(lead("capstan-a"));
    let mut b = fleet(&[], Some(at(5)));
    b.leadership = Some(lead("capstan-b"));
    let events = status_events(&a, &b, at(5));
    assert_eq!(kinds(&events), [EventKind::LeadershipChanged]);
    assert_eq!(events[0].message, "capstan-b leads now (was capstan-a)");
}

#[test]
fn certificates_renewed_or_near_expiry_are_told() {
    let mut old = cluster(Phase::Ready);
    old.certificate_expiry = Some(at(0) + SignedDuration::from_hours(24 * 20));
    let mut renewed = old.clone();
    renewed.certificate_expiry = Some(at(0) + SignedDuration::from_hours(24 * 365));
    let before = fleet(&[("prod", old.clone())], Some(at(0)));
    let after = fleet(&[("prod", renewed)], Some(at(10)));
    assert_eq!(
        kinds(&status_events(&before, &after, at(10))),
        [EventKind::CertificateRenewed]
    );
    let mut near = old;
    near.certificate_expiry = Some(at(0) + SignedDuration::from_hours(24 * 6));
    let later = fleet(&[("prod", near)], Some(at(20)));
    let events = status_events(&before, &later, at(20));
    assert_eq!(kinds(&events), [EventKind::CertificateNearExpiry]);
}

fn record(action: ActionKind, succeeded: bool) -> StepRecord {
    StepRecord {
        action,
        machine: Some("prod-general-abc-0".into()),
        message: "storage ***: no such storage".to_owned(),
        succeeded,
        failures: u32::from(!succeeded) * 3,
        at: at(30),
        revision: Some("main@sha1:0123456789ab".to_owned()),
        refusal: None,
    }
}

#[test]
fn a_failed_step_or_a_fenced_node_is_an_event_and_other_successes_are_not() {
    let failed = step_event("prod", &record(ActionKind::CreateMachine, false)).expect("failure");
    assert_eq!(failed.kind, EventKind::StepFailed);
    assert_eq!(
        failed.dedup_key,
        "StepFailed/prod/create-machine prod-general-abc-0"
    );
    assert!(failed.message.contains("3 in a row"), "{}", failed.message);
    assert!(
        failed.message.contains("storage ***"),
        "the redacted error is carried"
    );
    let fenced = step_event("prod", &record(ActionKind::FenceMachine, true)).expect("fence");
    assert_eq!(fenced.kind, EventKind::NodeFenced);
    assert_eq!(
        step_event("prod", &record(ActionKind::JoinNode, true)),
        None
    );
}

#[test]
fn blocked_clusters_and_held_remediation_fire_alerts_while_they_last() {
    let mut held = cluster(Phase::Blocked);
    held.conditions.push(cond(
        conditions::REMEDIATION_HELD,
        conditions::TRUE,
        reasons::TOO_MANY_UNHEALTHY,
        "3 of 5",
        at(3),
    ));
    let status = fleet(
        &[("edge", held), ("prod", cluster(Phase::Ready))],
        Some(at(9)),
    );
    let alerts = firing(&status);
    let keys: Vec<_> = alerts.iter().map(Firing::key).collect();
    assert_eq!(
        keys,
        [
            (BLOCKED_ALERT, Some("edge")),
            (REMEDIATION_HELD_ALERT, Some("edge"))
        ]
    );
    let body = payloads::alertmanager(
        &alerts[..1],
        &alerts[1..],
        at(9),
        SignedDuration::from_mins(4),
    );
    assert_eq!(body[0]["labels"]["alertname"], "CapstanClusterBlocked");
    assert_eq!(body[0]["labels"]["cluster"], "edge");
    assert_eq!(body[0]["labels"]["severity"], "error");
    assert_eq!(body[0]["startsAt"], at(0).to_string());
    assert_eq!(
        body[0]["endsAt"],
        at(9 + 240).to_string(),
        "ends unless re-sent"
    );
    assert_eq!(body[1]["endsAt"], at(9).to_string(), "resolved now");
}

fn notice(message: &str, count: u32) -> Notice {
    let mut event = step_event("prod", &record(ActionKind::CreateMachine, false)).expect("event");
    event.message = message.to_owned();
    Notice { event, count }
}

#[test]
fn slack_text_is_escaped_and_within_its_limits() {
    let body = payloads::slack(&notice("<!channel> & <https://evil|click>", 1));
    let text = body["text"].as_str().expect("text");
    assert!(!text.contains('<') && !text.contains('>'), "{text}");
    assert!(text.contains("&lt;!channel&gt; &amp;"), "{text}");
    let long = payloads::slack(&notice(&"x".repeat(100_000), 2));
    let text = long["text"].as_str().expect("text");
    assert!(text.chars().count() <= payloads::SLACK_TEXT_MAX);
    assert!(text.ends_with("characters cut)"), "says it was cut");
    let blocks = long["blocks"].as_array().expect("blocks");
    assert!(blocks.len() <= payloads::SLACK_BLOCKS_MAX);
    let section = blocks[0]["text"]["text"].as_str().expect("section");
    assert!(section.chars().count() <= payloads::SLACK_SECTION_MAX);
}

#[test]
fn discord_stays_within_its_limits_and_pings_nobody() {
    let body = payloads::discord(&notice(&"@everyone ".repeat(1_000), 1));
    assert!(body["content"].as_str().expect("content").chars().count() <= 2_000);
    let embeds = body["embeds"].as_array().expect("embeds");
    assert!(embeds.len() <= payloads::DISCORD_EMBEDS_MAX);
    assert!(
        embeds[0]["description"]
            .as_str()
            .expect("description")
            .chars()
            .count()
            <= payloads::DISCORD_DESCRIPTION_MAX
    );
    assert_eq!(body["allowed_mentions"]["parse"], serde_json::json!([]));
}

#[test]
fn a_folded_notice_says_how_many_times_it_happened() {
    let body = payloads::generic(&notice("create-machine failed", 4));
    assert_eq!(body["count"], 4);
    assert_eq!(body["kind"], "StepFailed");
    let teams = payloads::msteams(&notice("create-machine failed", 4));
    let text = teams["attachments"][0]["content"]["body"][1]["inlines"][0]["text"]
        .as_str()
        .expect("card text");
    assert!(text.contains("×4"), "{text}");
}

#[test]
fn the_generic_signature_is_hmac_sha256_of_the_body_in_hex() {
    // RFC 4231, test case 2.
    assert_eq!(
        payloads::signature(b"Jefe", b"what do ya want for nothing?"),
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[test]
fn a_vm_s_text_reaches_teams_and_discord_as_text_never_as_a_link() {
    let hostile =
        "join failed: [log in again](https://evil.example/) ``` **now** https://evil.example/x";
    let teams = payloads::msteams(&notice(hostile, 1));
    let message = &teams["attachments"][0]["content"]["body"][1];
    // A TextRun is never read as Markdown (Adaptive Cards render it as it is).
    assert_eq!(message["type"], "RichTextBlock");
    assert_eq!(message["inlines"][0]["type"], "TextRun");
    assert_eq!(message["inlines"][0]["text"], hostile);
    let discord = payloads::discord(&notice(hostile, 1));
    let description = discord["embeds"][0]["description"]
        .as_str()
        .expect("description");
    assert_eq!(
        description,
        "```\njoin failed: [log in again](https://evil.example/) ˋˋˋ **now** https://evil.example/x\n```"
    );
    let long = payloads::discord(&notice(&"`".repeat(10_000), 1));
    let description = long["embeds"][0]["description"]
        .as_str()
        .expect("description");
    assert!(description.chars().count() <= payloads::DISCORD_DESCRIPTION_MAX);
    assert!(description.starts_with("```\n") && description.ends_with("\n```"));
    assert_eq!(description.matches("```").count(), 2, "only its own fences");
}
