//! The notifier against local receivers on loopback: what each one is sent, how `429` and
//! folding are handled, and that no secret is in any body.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use capstan_core::spec::Notifications;
use tokio::time::Instant;

use super::*;
use crate::plan::Phase;
use crate::secrets::SecretPolicy;
use crate::status::{ClusterStatus, Condition, FleetStatus};

/// A request a receiver got.
#[derive(Debug, Clone)]
struct Received {
    at: Instant,
    path: String,
    headers: HeaderMap,
    body: String,
    answered: u16,
}

/// A receiver on 127.0.0.1 that answers each request with the next of `answers` (then 200),
/// and keeps every request.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    async fn start(answers: Vec<(u16, Option<&'static str>)>) -> Receiver {
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let answers = Arc::new(Mutex::new(std::collections::VecDeque::from(answers)));
        let kept = Arc::clone(&got);
        let app = axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: HeaderMap, body: String| {
                let kept = Arc::clone(&kept);
                let answers = Arc::clone(&answers);
                async move {
                    let (status, retry_after) = answers
                        .lock()
                        .expect("answers")
                        .pop_front()
                        .unwrap_or((200, None));
                    kept.lock().expect("got").push(Received {
                        at: Instant::now(),
                        path: uri.path().to_owned(),
                        headers,
                        body,
                        answered: status,
                    });
                    let mut response = axum::response::Response::new(axum::body::Body::from("ok"));
                    *response.status_mut() = StatusCode::from_u16(status).expect("status");
                    if let Some(after) = retry_after {
                        response
                            .headers_mut()
                            .insert("retry-after", after.parse().expect("header"));
                    }
                    response
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!(
            "http://{}/services/T000/B000/secret-webhook-token",
            listener.local_addr().expect("address")
        );
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { url, got }
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().expect("got").clone()
    }

    async fn wait_for(&self, requests: usize) -> Vec<Received> {
        let started = Instant::now();
        loop {
            let got = self.got();
            if got.len() >= requests {
                return got;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "timed out waiting for {requests} requests: {got:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

const SIGNING_KEY: &str = "generic-signing-key-0123456789";

fn notifier(addresses: BTreeMap<String, String>, options: NotifyOptions) -> Notifier {
    let reader = SecretReader::new(Arc::new(SecretPolicy::default()), move |name| {
        addresses.get(name).cloned()
    });
    Notifier::new(reader, options, Arc::new(crate::clock::SystemClock))
}

fn fast() -> NotifyOptions {
    NotifyOptions {
        min_gap: Duration::from_millis(10),
        backoff: Backoff {
            base: Duration::from_millis(50),
            cap: Duration::from_millis(200),
        },
        resend: Duration::from_millis(300),
        ..NotifyOptions::default()
    }
}

fn configure(notifier: &mut Notifier, yaml: &str) -> Arc<crate::metrics::Metrics> {
    let notifications: Notifications = serde_saphyr::from_str(yaml).expect("notifications");
    let metrics = Arc::new(crate::metrics::Metrics::new(Arc::default(), Arc::default()));
    let outcomes: Arc<dyn Outcomes> = metrics.clone();
    notifier.configure(
        &notifications,
        &outcomes,
        &Arc::new(Leadership::always(String::new())),
    );
    metrics
}

fn cluster(phase: Phase) -> ClusterStatus {
    let blocked = phase == Phase::Blocked;
    ClusterStatus {
        phase,
        conditions: vec![Condition {
            kind: "Blocked".to_owned(),
            status: if blocked { "True" } else { "False" }.to_owned(),
            reason: if blocked { "StepFailing" } else { "Clear" }.to_owned(),
            message: "create-machine keeps failing: <!channel> a VM echoed /services/T000/B000/secret-webhook-token".to_owned(),
            last_transition_time: jiff::Timestamp::UNIX_EPOCH,
        }],
        version: None,
        certificate_expiry: None,
        kubeconfig_fingerprint: None,
        flux_kubeconfig_fingerprint: None,
        nodes: Vec::new(),
        declared_nodes: None,
        refusals: Vec::new(),
        waiting_on: Vec::new(),
        next_steps: Vec::new(),
        last_step: None,
        suspended: Vec::new(),
        converged: None,
    }
}

fn fleet(phase: Phase) -> FleetStatus {
    FleetStatus {
        revision: Some("main@sha1:0123456789ab".to_owned()),
        updated: Some(jiff::Timestamp::now()),
        clusters: BTreeMap::from([("prod".to_owned(), cluster(phase))]),
        ..FleetStatus::default()
    }
}

fn assert_no_secret(body: &str, receiver: &Receiver) {
    let path = reqwest::Url::parse(&receiver.url)
        .expect("url")
        .path()
        .to_owned();
    for secret in [receiver.url.as_str(), path.as_str(), SIGNING_KEY] {
        assert!(!body.contains(secret), "`{secret}` sent in {body}");
    }
}

#[tokio::test]
async fn a_429_is_retried_once_its_retry_after_has_passed_and_the_event_arrives_once() {
    let slack = Receiver::start(vec![(429, Some("2"))]).await;
    let mut notifier = notifier(
        BTreeMap::from([(
            "CAPSTAN_NOTIFICATION_CHAT_ADDRESS".to_owned(),
            slack.url.clone(),
        )]),
        fast(),
    );
    let board = configure(
        &mut notifier,
        "providers:\n  chat: {type: slack, addressFrom: {env: CAPSTAN_NOTIFICATION_CHAT_ADDRESS}}\nalerts:\n  - providers: [chat]\n",
    );
    let handed_over = Instant::now();
    notifier.status_published(&fleet(Phase::Updating), &fleet(Phase::Blocked));
    assert!(
        handed_over.elapsed() < Duration::from_secs(1),
        "handing over never waits for the receiver"
    );
    let got = slack.wait_for(2).await;
    assert_eq!(
        got.iter().map(|r| r.answered).collect::<Vec<_>>(),
        [429, 200]
    );
    assert!(
        got[1].at.duration_since(got[0].at) >= Duration::from_secs(2),
        "retried before Retry-After: {:?}",
        got[1].at.duration_since(got[0].at)
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(slack.got().len(), 2, "accepted once, sent no more");
    assert_eq!(got[0].body, got[1].body, "the same message, retried");
    let body: serde_json::Value = serde_json::from_str(&got[1].body).expect("JSON");
    let text = body["text"].as_str().expect("Slack's text is a string");
    assert!(text.starts_with("prod: ClusterBlocked"), "{text}");
    assert!(
        text.contains("&lt;!channel&gt;"),
        "mentions are escaped: {text}"
    );
    assert_no_secret(&got[1].body, &slack);
    let metrics = board;
    assert_eq!(metrics.notifications("chat", "sent"), 1);
    assert_eq!(metrics.notifications("chat", "rate_limited"), 1);
}

#[tokio::test]
async fn repeats_of_an_event_within_the_fold_window_arrive_as_one_message_with_a_count() {
    let hook = Receiver::start(Vec::new()).await;
    let mut notifier = notifier(
        BTreeMap::from([
            (
                "CAPSTAN_NOTIFICATION_HOOK_ADDRESS".to_owned(),
                hook.url.clone(),
            ),
            (
                "CAPSTAN_NOTIFICATION_HOOK_SIGNING_KEY".to_owned(),
                SIGNING_KEY.to_owned(),
            ),
        ]),
        NotifyOptions {
            fold_window: Duration::from_millis(500),
            ..fast()
        },
    );
    let board = configure(
        &mut notifier,
        "providers:
  hook:
    type: generic
    addressFrom: {env: CAPSTAN_NOTIFICATION_HOOK_ADDRESS}
    signingKeyFrom: {env: CAPSTAN_NOTIFICATION_HOOK_SIGNING_KEY}
alerts:
  - providers: [hook]
    kinds: [StepFailed]
",
    );
    let failed = |failures| StepRecord {
        action: crate::plan::ActionKind::CreateMachine,
        machine: Some("prod-general-abc-0".into()),
        message: format!("no such storage (attempt {failures})"),
        succeeded: false,
        failures,
        at: jiff::Timestamp::now(),
        revision: None,
        refusal: None,
    };
    notifier.step_finished("prod", &failed(1));
    hook.wait_for(1).await;
    for failures in 2..=4 {
        notifier.step_finished("prod", &failed(failures));
    }
    // Not selected: a Blocked cluster is another kind.
    notifier.status_published(&fleet(Phase::Updating), &fleet(Phase::Blocked));
    let got = hook.wait_for(2).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let got_all = hook.got();
    assert_eq!(got_all.len(), 2, "{got_all:?}");
    let bodies: Vec<serde_json::Value> = got
        .iter()
        .map(|r| serde_json::from_str(&r.body).expect("JSON"))
        .collect();
    assert_eq!(bodies[0]["count"], 1);
    assert_eq!(bodies[1]["count"], 3);
    assert!(
        bodies[1]["message"]
            .as_str()
            .is_some_and(|m| m.contains("attempt 4")),
        "the latest: {}",
        bodies[1]
    );
    assert_eq!(board.notifications("hook", "folded"), 2);
    for request in &got {
        let signature = request
            .headers
            .get("x-signature")
            .and_then(|v| v.to_str().ok())
            .expect("signed");
        assert_eq!(
            signature,
            capstan_core::notify::payloads::signature(
                SIGNING_KEY.as_bytes(),
                request.body.as_bytes()
            )
        );
        assert_no_secret(&request.body, &hook);
    }
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_a_refusal_is_not_retried() {
    let hook = Receiver::start(vec![(302, None), (400, None)]).await;
    let mut notifier = notifier(
        BTreeMap::from([(
            "CAPSTAN_NOTIFICATION_CHAT_ADDRESS".to_owned(),
            hook.url.clone(),
        )]),
        fast(),
    );
    let board = configure(
        &mut notifier,
        "providers:\n  chat: {type: discord, addressFrom: {env: CAPSTAN_NOTIFICATION_CHAT_ADDRESS}}\nalerts:\n  - providers: [chat]\n",
    );
    notifier.status_published(&fleet(Phase::Updating), &fleet(Phase::Blocked));
    notifier.status_published(&fleet(Phase::Blocked), &fleet(Phase::Updating));
    hook.wait_for(2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hook.got().len(), 2);
    assert_eq!(board.notifications("chat", "rejected"), 2);
}

#[tokio::test]
async fn a_webhook_url_over_plain_http_to_another_host_is_refused() {
    let mut notifier = notifier(
        BTreeMap::from([(
            "CAPSTAN_NOTIFICATION_CHAT_ADDRESS".to_owned(),
            "http://hooks.example.com/services/T/B/token".to_owned(),
        )]),
        fast(),
    );
    let board = configure(
        &mut notifier,
        "providers:\n  chat: {type: slack, addressFrom: {env: CAPSTAN_NOTIFICATION_CHAT_ADDRESS}}\nalerts:\n  - providers: [chat]\n",
    );
    assert!(!notifier.is_active());
    assert_eq!(board.notifications("chat", "unconfigured"), 1);
}

#[tokio::test]
async fn alertmanager_is_told_while_an_alert_fires_and_once_more_when_it_resolves() {
    let alertmanager = Receiver::start(Vec::new()).await;
    let base = alertmanager
        .url
        .replace("/services/T000/B000/secret-webhook-token", "");
    let mut notifier = notifier(
        BTreeMap::from([("CAPSTAN_NOTIFICATION_AM_ADDRESS".to_owned(), base)]),
        fast(),
    );
    configure(
        &mut notifier,
        "providers:\n  am: {type: alertmanager, addressFrom: {env: CAPSTAN_NOTIFICATION_AM_ADDRESS}}\nalerts:\n  - providers: [am]\n",
    );
    notifier.status_published(&fleet(Phase::Updating), &fleet(Phase::Blocked));
    // Posted at once, then again each resend interval (300 ms).
    let got = alertmanager.wait_for(2).await;
    assert!(got.iter().all(|r| r.path == "/api/v2/alerts"));
    let firing: serde_json::Value = serde_json::from_str(&got[1].body).expect("JSON");
    assert_eq!(firing[0]["labels"]["alertname"], "CapstanClusterBlocked");
    assert_eq!(firing[0]["labels"]["cluster"], "prod");
    let ends: jiff::Timestamp = firing[0]["endsAt"]
        .as_str()
        .expect("endsAt")
        .parse()
        .expect("time");
    assert!(ends > jiff::Timestamp::now(), "still firing");
    notifier.status_published(&fleet(Phase::Blocked), &fleet(Phase::Updating));
    let before = alertmanager.got().len();
    let got = alertmanager.wait_for(before + 1).await;
    let resolved: serde_json::Value = serde_json::from_str(&got[before].body).expect("JSON");
    let ends: jiff::Timestamp = resolved[0]["endsAt"]
        .as_str()
        .expect("endsAt")
        .parse()
        .expect("time");
    assert!(ends <= jiff::Timestamp::now(), "resolved: {resolved}");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        alertmanager.got().len(),
        before + 1,
        "nothing fires: nothing more is posted"
    );
}

/// Checks `body` against what the receiver of `kind` documents: required fields, their types
/// and their size limits.
fn check_format(kind: &str, body: &serde_json::Value) {
    let chars = |value: &serde_json::Value| value.as_str().map(|s| s.chars().count());
    match kind {
        "slack" => {
            assert!(chars(&body["text"]).is_some_and(|n| (1..=40_000).contains(&n)));
            let blocks = body["blocks"].as_array().expect("blocks is an array");
            assert!(!blocks.is_empty() && blocks.len() <= 50);
            for block in blocks {
                match block["type"].as_str() {
                    Some("section") => {
                        assert_eq!(block["text"]["type"], "mrkdwn");
                        assert!(chars(&block["text"]["text"]).is_some_and(|n| n <= 3_000));
                    }
                    Some("context") => {
                        let elements = block["elements"].as_array().expect("elements");
                        assert!(!elements.is_empty() && elements.len() <= 10);
                    }
                    other => panic!("unexpected block {other:?}"),
                }
            }
        }
        "msteams" => {
            assert_eq!(body["type"], "message");
            let attachments = body["attachments"].as_array().expect("attachments");
            assert_eq!(attachments.len(), 1);
            assert_eq!(
                attachments[0]["contentType"],
                "application/vnd.microsoft.card.adaptive"
            );
            let card = &attachments[0]["content"];
            assert_eq!(card["type"], "AdaptiveCard");
            assert!(card["version"].is_string());
            let blocks = card["body"].as_array().expect("card body");
            assert!(blocks.iter().all(|b| match b["type"].as_str() {
                Some("TextBlock") => b["text"].is_string(),
                Some("RichTextBlock") => b["inlines"].as_array().is_some_and(|runs| {
                    runs.iter()
                        .all(|r| r["type"] == "TextRun" && r["text"].is_string())
                }),
                _ => false,
            }));
            assert!(
                body.to_string().len() < 28 * 1024,
                "Teams takes at most 28 KB"
            );
        }
        "discord" => {
            assert!(chars(&body["content"]).is_some_and(|n| n <= 2_000));
            let embeds = body["embeds"].as_array().expect("embeds");
            assert!(embeds.len() <= 10);
            let mut total = 0;
            for embed in embeds {
                let title = chars(&embed["title"]).expect("title");
                let description = chars(&embed["description"]).expect("description");
                assert!(title <= 256 && description <= 4_096);
                assert!(embed["color"].is_u64());
                total += title + description + chars(&embed["footer"]["text"]).unwrap_or(0);
            }
            assert!(
                total <= 6_000,
                "an embed's text is at most 6,000 characters"
            );
            assert_eq!(body["allowed_mentions"]["parse"], serde_json::json!([]));
        }
        other => panic!("no format for {other}"),
    }
}

#[tokio::test]
async fn slack_teams_and_discord_receive_bodies_in_their_documented_formats() {
    for kind in ["slack", "msteams", "discord"] {
        let receiver = Receiver::start(Vec::new()).await;
        let mut notifier = notifier(
            BTreeMap::from([(
                "CAPSTAN_NOTIFICATION_CHAT_ADDRESS".to_owned(),
                receiver.url.clone(),
            )]),
            fast(),
        );
        configure(
            &mut notifier,
            &format!(
                "providers:\n  chat: {{type: {kind}, addressFrom: {{env: CAPSTAN_NOTIFICATION_CHAT_ADDRESS}}}}\nalerts:\n  - providers: [chat]\n"
            ),
        );
        let mut blocked = fleet(Phase::Blocked);
        // A message far past every limit: a VM's error text can be anything.
        if let Some(cluster) = blocked.clusters.get_mut("prod") {
            cluster.conditions[0].message = "x".repeat(60_000);
        }
        notifier.status_published(&fleet(Phase::Updating), &blocked);
        let got = receiver.wait_for(1).await;
        let body: serde_json::Value = serde_json::from_str(&got[0].body).expect("JSON");
        check_format(kind, &body);
        assert_no_secret(&got[0].body, &receiver);
    }
}
