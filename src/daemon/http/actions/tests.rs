use std::sync::Arc;

use super::super::{HttpOptions, Router, StatusBoard, serve_with};
use super::*;
use crate::daemon::actions::Actions;
use crate::source::{Redactor, Secret, SecretFrom};
use crate::status::FleetStatus;

const TOKEN: &str = "http-token-9c1d2e77";

/// A board with prod and staging in its status, taking actions in memory, served with
/// `options`.
async fn served(options: HttpOptions) -> (String, Arc<StatusBoard>, Arc<Actions>) {
    let board = Arc::new(StatusBoard::default());
    let mut status = FleetStatus {
        revision: Some("main@sha1:1111".to_owned()),
        ..FleetStatus::default()
    };
    let plan = crate::plan::ClusterPlan {
        name: "prod".to_owned(),
        phase: crate::plan::Phase::Ready,
        steps: Vec::new(),
        predicted: Vec::new(),
        blocked: Vec::new(),
        waiting_on: Vec::new(),
        findings: Vec::new(),
        remediation_held: None,
        suspended: Vec::new(),
    };
    for name in ["prod", "staging"] {
        let entry = crate::status::cluster_status(&crate::status::StatusInput {
            plan: &plan,
            observed: None,
            delivers_to_flux: false,
            declared_nodes: None,
            last_step: None,
            failures_to_block: 3,
            previous: None,
            api_down_because: None,
            now: jiff::Timestamp::UNIX_EPOCH,
        });
        status.clusters.insert(name.to_owned(), entry);
    }
    board.set(status);
    let actions = Arc::new(Actions::default());
    board.share_actions(Arc::clone(&actions));
    let addr = serve_with(
        "127.0.0.1:0".parse().expect("addr"),
        Arc::clone(&board),
        Router::new(),
        &options,
    )
    .await
    .expect("serves");
    (format!("http://{addr}"), board, actions)
}

fn with_token(dir: &tempfile::TempDir) -> HttpOptions {
    let path = dir.path().join("token");
    std::fs::write(&path, TOKEN).expect("token file");
    HttpOptions {
        token: Some(
            Secret::resolve(SecretFrom::File(path), &|_| None, &Redactor::default())
                .expect("secret"),
        ),
        ..HttpOptions::default()
    }
}

async fn post(
    server: &str,
    action: &str,
    body: &ActionRequest,
    token: Option<&str>,
) -> (u16, String) {
    // As main does, once per process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let mut request = client.post(format!("{server}/actions/{action}")).json(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("answers");
    let code = response.status().as_u16();
    (code, response.text().await.expect("body"))
}

fn suspend_prod() -> ActionRequest {
    ActionRequest {
        clusters: vec!["prod".to_owned()],
        reason: Some("INC-42: storage outage".to_owned()),
        user: Some("alice".to_owned()),
        ..ActionRequest::default()
    }
}

#[tokio::test]
async fn an_unauthenticated_endpoint_refuses_every_action_and_says_how_to_enable_them() {
    let (server, _board, actions) = served(HttpOptions::default()).await;
    for action in ["suspend", "resume", "reconcile"] {
        let (code, body) = post(&server, action, &suspend_prod(), None).await;
        assert_eq!(code, 403, "{action}: {body}");
        assert!(body.contains("--http-token-from"), "{body}");
    }
    assert!(actions.suspended().await.is_empty(), "nothing changed");
}

#[tokio::test]
async fn suspend_with_the_token_records_who_when_and_why_and_resume_removes_it() {
    let dir = tempfile::tempdir().expect("dir");
    let (server, _board, actions) = served(with_token(&dir)).await;
    let (code, body) = post(&server, "suspend", &suspend_prod(), None).await;
    assert_eq!(code, 401, "no token: {body}");
    let (code, _) = post(&server, "suspend", &suspend_prod(), Some("guessed")).await;
    assert_eq!(code, 401, "another token");
    assert!(actions.suspended().await.is_empty());

    let (code, body) = post(&server, "suspend", &suspend_prod(), Some(TOKEN)).await;
    assert_eq!(code, 200, "{body}");
    let answer: ActionAnswer = serde_json::from_str(&body).expect("answer");
    assert_eq!(answer.changed, vec!["prod".to_owned()]);
    let suspended = actions.suspended().await;
    let prod = suspended.get("prod").expect("prod suspended");
    assert_eq!(prod.source, SuspensionSource::Runtime);
    assert_eq!(prod.by.as_deref(), Some("bearer token, user alice"));
    assert!(prod.declared, "a token proves no name");
    assert!(prod.at.is_some());
    assert_eq!(prod.reason.as_deref(), Some("INC-42: storage outage"));
    assert!(!suspended.contains_key("staging"));

    let resume = ActionRequest {
        clusters: vec!["prod".to_owned()],
        ..ActionRequest::default()
    };
    let (code, body) = post(&server, "resume", &resume, Some(TOKEN)).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("prod: resumed"), "{body}");
    assert!(actions.suspended().await.is_empty());
}

#[tokio::test]
async fn an_unknown_cluster_or_a_missing_or_long_reason_is_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().expect("dir");
    let (server, _board, actions) = served(with_token(&dir)).await;
    let unknown = ActionRequest {
        clusters: vec!["prod".to_owned(), "prdo".to_owned()],
        ..suspend_prod()
    };
    let (code, body) = post(&server, "suspend", &unknown, Some(TOKEN)).await;
    assert_eq!(code, 404, "{body}");
    assert!(
        body.contains("no cluster prdo") && body.contains("known: prod, staging"),
        "{body}"
    );
    let no_reason = ActionRequest {
        reason: Some("  ".to_owned()),
        ..suspend_prod()
    };
    let (code, body) = post(&server, "suspend", &no_reason, Some(TOKEN)).await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("--reason"), "{body}");
    let long = ActionRequest {
        reason: Some("x".repeat(MAX_REASON + 1)),
        ..suspend_prod()
    };
    let (code, _) = post(&server, "suspend", &long, Some(TOKEN)).await;
    assert_eq!(code, 400);
    assert!(actions.suspended().await.is_empty(), "nothing changed");
}

#[tokio::test]
async fn suspend_all_holds_every_cluster_and_a_secret_in_the_reason_is_redacted() {
    let dir = tempfile::tempdir().expect("dir");
    let (server, _board, actions) = served(with_token(&dir)).await;
    crate::redact::remember("s3cr3t-proxmox-token-value");
    let all = ActionRequest {
        clusters: Vec::new(),
        all: true,
        reason: Some("rotating s3cr3t-proxmox-token-value".to_owned()),
        user: None,
    };
    let (code, body) = post(&server, "suspend", &all, Some(TOKEN)).await;
    assert_eq!(code, 200, "{body}");
    let suspended = actions.suspended().await;
    assert_eq!(
        suspended.keys().collect::<Vec<_>>(),
        vec!["prod", "staging"]
    );
    let prod = &suspended["prod"];
    assert_eq!(prod.by.as_deref(), Some("bearer token"));
    assert!(!prod.declared);
    assert!(
        !prod
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("s3cr3t-proxmox-token-value"),
        "{prod:?}"
    );
    assert!(!body.contains("s3cr3t-proxmox-token-value"));
}

#[test]
fn a_client_certificate_is_known_by_its_subject() {
    use capstan_lab::tls::CertificateAuthority;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let until = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24);
    let ca = CertificateAuthority::new("capstan-clients", until).expect("CA");
    let alice = ca.issue_client("alice", &[], until).expect("client");
    let der = CertificateDer::from_pem_slice(alice.cert_pem.as_bytes()).expect("der");
    let subject = super::super::certificate_subject(der.as_ref());
    assert!(subject.contains("CN=alice"), "{subject}");
}

/// A POST of `body` to `/actions/suspend` with the token and `headers` (a browser's), as raw
/// reqwest sends it: the status code and body.
async fn post_raw(server: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut request = reqwest::Client::new()
        .post(format!("{server}/actions/suspend"))
        .bearer_auth(TOKEN)
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("answers");
    let code = response.status().as_u16();
    (code, response.text().await.expect("body"))
}

#[tokio::test]
async fn an_action_from_another_site_or_without_a_json_content_type_is_refused_and_nothing_changes()
{
    let dir = tempfile::tempdir().expect("dir");
    let (server, _board, actions) = served(with_token(&dir)).await;
    let body = serde_json::to_string(&suspend_prod()).expect("json");
    let json = ("Content-Type", "application/json");
    let own_origin = server.clone();
    let refused = [
        // What a cross-site form can send: no preflight.
        (vec![("Content-Type", "text/plain")], 415),
        (vec![], 415),
        // A page elsewhere (its browser sends the client certificate by itself).
        (vec![json, ("Origin", "https://attacker.example")], 403),
        (vec![json, ("Origin", "null")], 403),
        (vec![json, ("Sec-Fetch-Site", "cross-site")], 403),
        (
            vec![
                json,
                ("Origin", own_origin.as_str()),
                ("Sec-Fetch-Site", "same-site"),
            ],
            403,
        ),
    ];
    for (headers, expected) in refused {
        let (code, answer) = post_raw(&server, &headers, &body).await;
        assert_eq!(code, expected, "{headers:?}: {answer}");
        assert!(
            answer.contains("Content-Type: application/json") || answer.contains("own origin"),
            "{answer}"
        );
    }
    assert!(actions.suspended().await.is_empty(), "nothing changed");
    // The endpoint's own page, and the CLI (which sends no Origin), are taken.
    let (code, answer) = post_raw(
        &server,
        &[
            json,
            ("Origin", own_origin.as_str()),
            ("Sec-Fetch-Site", "same-origin"),
        ],
        &body,
    )
    .await;
    assert_eq!(code, 200, "{answer}");
    let (code, answer) = post_raw(&server, &[json], &body).await;
    assert_eq!(code, 200, "{answer}");
}
