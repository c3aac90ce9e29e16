//! Webhooks on the daemon's HTTP server, with GitHub's real example payloads (a copy of
//! `shared/reference/github/` in `tests/data/github-webhook-examples.json`): a correct
//! signature makes the daemon poll within a second; a wrong or missing one is 401 and polls
//! nothing; a push to another ref, a ping or a duplicate delivery polls nothing; a burst
//! coalesces.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use capstan::source::{GitCredentials, Redactor, Secret, SecretFrom};
use hmac::{KeyInit as _, Mac as _};

use capstan_lab::world::LabConfig;
use capstan_testkit::process::http_request;
use capstan_testkit::{Remote, Setup, World};

const SECRET: &str = "webhook-secret-9b1e";

/// Request headers.
type Headers = Vec<(&'static str, String)>;

/// `hex(HMAC-SHA256(secret, body))`, as forges sign.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// GitHub's example payloads of `event`, as sent (JSON bodies).
fn examples(event: &str) -> Option<Vec<serde_json::Value>> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/github-webhook-examples.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        let message = format!(
            "{} is missing: it is a copy of shared/reference/github/github-webhook-examples.json",
            path.display()
        );
        if std::env::var("CAPSTAN_REQUIRE_JUDGES").as_deref() == Ok("1") {
            panic!("{message}; CAPSTAN_REQUIRE_JUDGES=1, so this fails instead of skipping");
        }
        // Past the harness's capture, so a passing run still shows what was skipped.
        let test = capstan_testkit::judge::test_name();
        let _ = writeln!(std::io::stderr(), "skipped {test}: {message}");
        return None;
    };
    let all: Vec<serde_json::Value> = serde_json::from_str(&text).expect("examples parse");
    let found = all
        .into_iter()
        .find(|e| e["name"] == event)
        .and_then(|e| e["examples"].as_array().cloned())
        .expect("examples of the event");
    Some(found)
}

/// The first example push to `reference`.
fn push_to(reference: &str) -> Option<Vec<u8>> {
    let example = examples("push")?
        .into_iter()
        .find(|e| e["ref"] == reference)
        .expect("an example push to the ref");
    Some(serde_json::to_vec(&example).expect("serialize"))
}

/// A daemon following `master` of `remote` (GitHub's examples push to master), polling only
/// when a webhook says so.
async fn follow_master(remote: &Remote) -> World {
    remote.push_to("master");
    let url = format!("file://{}", remote.bare().display());
    let mut options = remote.options(&url, GitCredentials::default());
    options.branch = "master".to_owned();
    let secret_file = remote.work().join("..").join("webhook-secret");
    std::fs::write(&secret_file, SECRET).expect("secret file");
    let secret = Secret::resolve(
        SecretFrom::File(secret_file),
        &|_| None,
        &Redactor::default(),
    )
    .expect("secret");
    let following = World::following(
        LabConfig::default(),
        Setup::git(options, Duration::from_secs(3600)).webhooks(secret),
    )
    .await;
    following
        .wait_for("the first revision", |s| s.revision.is_some())
        .await;
    following
}

fn github_headers(event: &str, delivery: &str, signature: Option<String>) -> Headers {
    let mut headers = vec![
        ("X-GitHub-Event", event.to_owned()),
        ("X-GitHub-Delivery", delivery.to_owned()),
        ("Content-Type", "application/json".to_owned()),
    ];
    if let Some(signature) = signature {
        headers.push(("X-Hub-Signature-256", signature));
    }
    headers
}

async fn post(following: &World, provider: &str, headers: Headers, body: Vec<u8>) -> u16 {
    let addr = following.http();
    let path = format!("/hooks/{provider}");
    tokio::task::spawn_blocking(move || http_request(addr, "POST", &path, &headers, &body).0)
        .await
        .expect("request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_github_push_to_the_tracked_branch_polls_at_once() {
    // The daemon polls once an hour: seeing the pushed revision at all proves the hook polled.
    let Some(body) = push_to("refs/heads/master") else {
        return;
    };
    let remote = Remote::new();
    let following = follow_master(&remote).await;
    remote.write("clusters/README.md", "changed\n");
    remote.commit_and_push("a change");
    let pushed = remote.push_to("master");
    let signature = format!("sha256={}", sign(SECRET, &body));
    let code = post(
        &following,
        "github",
        github_headers("push", "d-1", Some(signature)),
        body,
    )
    .await;
    assert_eq!(code, 202);
    let revision = format!("master@sha1:{pushed}");
    following
        .wait_for("the pushed revision", |s| {
            s.revision.as_deref() == Some(revision.as_str())
        })
        .await;
    let metrics = capstan::daemon::http::render_metrics(&following.board());
    assert!(
        metrics
            .contains("capstan_webhook_requests_total{provider=\"github\",result=\"triggered\"} 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_or_missing_signature_is_401_and_polls_nothing() {
    let Some(body) = push_to("refs/heads/master") else {
        return;
    };
    let remote = Remote::new();
    let following = follow_master(&remote).await;
    let polls = following.board().source_metrics().ls_remote_total();
    let wrong = format!("sha256={}", sign("not-the-secret", &body));
    let code = post(
        &following,
        "github",
        github_headers("push", "d-1", Some(wrong)),
        body.clone(),
    )
    .await;
    assert_eq!(code, 401);
    let code = post(
        &following,
        "github",
        github_headers("push", "d-2", None),
        body.clone(),
    )
    .await;
    assert_eq!(code, 401);
    // A signature of another body does not sign this one.
    let other = format!("sha256={}", sign(SECRET, b"{}"));
    let code = post(
        &following,
        "github",
        github_headers("push", "d-3", Some(other)),
        body,
    )
    .await;
    assert_eq!(code, 401);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(following.board().source_metrics().ls_remote_total(), polls);
    assert_eq!(
        following
            .board()
            .source_metrics()
            .webhook_total("github", "unauthorized"),
        3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_to_other_refs_pings_and_duplicates_poll_nothing_and_bursts_coalesce() {
    let (Some(tag), Some(master), Some(pings)) = (
        push_to("refs/tags/simple-tag"),
        push_to("refs/heads/master"),
        examples("ping"),
    ) else {
        return;
    };
    let remote = Remote::new();
    let following = follow_master(&remote).await;
    let metrics = || following.board().source_metrics().ls_remote_total();
    let polls = metrics();
    let signed = |body: &[u8]| Some(format!("sha256={}", sign(SECRET, body)));
    let code = post(
        &following,
        "github",
        github_headers("push", "t-1", signed(&tag)),
        tag.clone(),
    )
    .await;
    assert_eq!(code, 200, "a tag push is not the tracked branch");
    let ping = serde_json::to_vec(&pings[0]).expect("ping");
    let code = post(
        &following,
        "github",
        github_headers("ping", "p-1", signed(&ping)),
        ping,
    )
    .await;
    assert_eq!(code, 200, "a ping is answered");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(metrics(), polls, "neither polls");

    let code = post(
        &following,
        "github",
        github_headers("push", "m-1", signed(&master)),
        master.clone(),
    )
    .await;
    assert_eq!(code, 202);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(metrics(), polls + 1, "one poll");
    let code = post(
        &following,
        "github",
        github_headers("push", "m-1", signed(&master)),
        master.clone(),
    )
    .await;
    assert_eq!(code, 200, "a redelivery is answered");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(metrics(), polls + 1, "a redelivery polls nothing");

    for delivery in 0..10 {
        let headers = github_headers("push", &format!("burst-{delivery}"), signed(&master));
        let code = post(&following, "github", headers, master.clone()).await;
        assert_eq!(code, 202);
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let burst = metrics() - (polls + 1);
    assert!(
        (1..=2).contains(&burst),
        "ten deliveries made {burst} polls"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitea_gitlab_and_generic_hooks_check_their_own_signatures() {
    let Some(body) = push_to("refs/heads/master") else {
        return;
    };
    let remote = Remote::new();
    let following = follow_master(&remote).await;
    let hex = sign(SECRET, &body);
    let cases: Vec<(&str, Headers, Headers)> = vec![
        (
            "gitea",
            vec![
                ("X-Gitea-Event", "push".into()),
                ("X-Gitea-Signature", hex.clone()),
            ],
            vec![
                ("X-Gitea-Event", "push".into()),
                ("X-Gitea-Signature", sign("x", &body)),
            ],
        ),
        (
            "gitlab",
            vec![
                ("X-Gitlab-Event", "Push Hook".into()),
                ("X-Gitlab-Token", SECRET.into()),
            ],
            vec![
                ("X-Gitlab-Event", "Push Hook".into()),
                ("X-Gitlab-Token", "guess".into()),
            ],
        ),
        (
            "generic",
            vec![("X-Signature", format!("sha256={hex}"))],
            vec![("X-Signature", hex.clone())],
        ),
    ];
    for (provider, good, bad) in cases {
        let code = post(&following, provider, bad, body.clone()).await;
        assert_eq!(code, 401, "{provider}: a bad signature");
        let code = post(&following, provider, good, body.clone()).await;
        assert_eq!(code, 202, "{provider}: a good signature");
    }
    // A body declared over 1 MiB is refused before any of it is read (so the sender learns
    // it at once, without sending it).
    let addr = following.http();
    let code = tokio::task::spawn_blocking(move || {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        write!(
            stream,
            "POST /hooks/generic HTTP/1.1\r\nHost: capstan\r\nX-Signature: sha256=00\r\nContent-Length: {}\r\n\r\n",
            2 * 1024 * 1024
        )
        .expect("write");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer.split_whitespace().nth(1).map(str::to_owned)
    })
    .await
    .expect("joined");
    assert_eq!(code.as_deref(), Some("413"), "bodies are capped at 1 MiB");
}
