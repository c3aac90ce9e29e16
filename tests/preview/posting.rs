//! `capstan preview --pr N` posting to the lab forge: one sticky comment per pull request,
//! edited only when its text changes, and a `capstan/preview` status on the head commit.

use capstan_lab::forge::Fault;

use crate::fixture::git;
use crate::forge::{FORGES, Flavour, OnForge};

const PROD: &str = "clusters/prod.yaml";
const MARKER: &str = "<!-- capstan-preview -->";

fn edits(on: &OnForge) -> usize {
    Flavour::Github.edits(&on.forge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posting_twice_makes_one_comment_and_a_new_head_edits_it() {
    for flavour in FORGES {
        posting_twice_then_a_new_head(flavour).await;
    }
}

async fn posting_twice_then_a_new_head(flavour: Flavour) {
    let (on, pr, head) = OnForge::scale_pull().await;

    on.post_as(flavour, "scale", pr).await.assert_code(0);
    on.post_as(flavour, "scale", pr).await.assert_code(0);
    let comments = on.forge.comments(pr);
    assert_eq!(comments.len(), 1, "{flavour:?}: {comments:#?}");
    assert!(comments[0].body.starts_with(MARKER));
    assert!(comments[0].body.contains("prod: +1 worker"));
    assert_eq!(
        flavour.edits(&on.forge),
        0,
        "{flavour:?}: the same text is not sent again"
    );
    let statuses = on.forge.statuses(&head);
    assert_eq!(statuses.len(), 2, "{flavour:?}");
    assert!(
        statuses
            .iter()
            .all(|s| s.state == "success" && s.context == "capstan/preview"),
        "{flavour:?}: {statuses:#?}"
    );

    let new_head = on.push_edit("scale", PROD, "replicas: 4", "replicas: 5");
    on.post_as(flavour, "scale", pr).await.assert_code(0);
    let comments = on.forge.comments(pr);
    assert_eq!(comments.len(), 1, "{flavour:?}: still one comment");
    assert_eq!(flavour.edits(&on.forge), 1, "{flavour:?}: edited in place");
    assert!(
        comments[0].body.contains("prod: +2 workers"),
        "{flavour:?}: {}",
        comments[0].body
    );
    assert_eq!(on.forge.statuses(&new_head)[0].state, "success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_change_fails_the_status_and_the_command() {
    for flavour in FORGES {
        a_refused_change_fails(flavour).await;
    }
}

async fn a_refused_change_fails(flavour: Flavour) {
    let (on, pr, head) = OnForge::minor_pull().await;

    on.post_as(flavour, "minor", pr).await.assert_code(1);
    let statuses = on.forge.statuses(&head);
    assert_eq!(statuses.len(), 1, "{flavour:?}");
    assert_eq!(statuses[0].state, flavour.failure());
    assert_eq!(statuses[0].context, "capstan/preview");
    let description = statuses[0].description.clone().unwrap_or_default();
    assert!(
        description.starts_with("refused: prod: ") && description.contains("1.38"),
        "{flavour:?}: {description}"
    );
    let body = &on.forge.comments(pr)[0].body;
    assert!(body.contains("Refused"), "{flavour:?}: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_are_waited_out_and_the_token_never_shows() {
    for flavour in FORGES {
        rate_limits_are_waited_out(flavour).await;
    }
}

async fn rate_limits_are_waited_out(flavour: Flavour) {
    let (on, pr, _) = OnForge::scale_pull().await;
    on.forge
        .inject(Fault::TooManyRequests { retry_after: 1 }, Some(1));
    let run = on.post_as(flavour, "scale", pr).await;
    run.assert_code(0);
    on.forge.inject(Fault::RateLimited { reset_in: 1 }, Some(1));
    on.post_as(flavour, "scale", pr).await.assert_code(0);
    let answered: Vec<u16> = on.forge.requests().iter().map(|r| r.status).collect();
    // GitHub's primary rate limit is a 403; GitLab answers every rate limit with 429 (the
    // second one with `RateLimit-Reset` only).
    let (too_many, forbidden) = match flavour {
        Flavour::Github => (1, 1),
        Flavour::Gitlab => (2, 0),
    };
    let count = |code: u16| answered.iter().filter(|s| **s == code).count();
    assert_eq!(count(429), too_many, "{flavour:?}: {answered:?}");
    assert_eq!(count(403), forbidden, "{flavour:?}: {answered:?}");
    assert_eq!(on.forge.comments(pr).len(), 1, "{flavour:?}");
    assert!(run.stderr.contains("retrying"), "{}", run.stderr);
    assert!(!run.stderr.contains(crate::forge::TOKEN));
    assert!(!run.stdout.contains(crate::forge::TOKEN));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forge_that_stays_down_fails_the_command_naming_the_call() {
    let (on, pr, _) = OnForge::scale_pull().await;
    on.forge.inject(Fault::RateLimited { reset_in: 3600 }, None);
    let run = on.post("scale", pr).await;
    run.assert_code(1);
    assert!(
        run.stderr.contains("rate limited by the forge"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains(crate::forge::TOKEN));
    git(
        on.bare(),
        &["rev-parse", "--verify", &format!("refs/pull/{pr}/head")],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gitea_over_https_gets_the_same_comment_and_status() {
    let (on, pr, head) = OnForge::scale_pull().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = dir.path().join("forge-ca.pem");
    std::fs::write(&ca, on.forge.ca_pem()).expect("write the CA");
    let api = format!("https://127.0.0.1:{}/api/v1", on.forge.https_addr().port());
    let trust = [("SSL_CERT_FILE", ca.display().to_string())];
    on.post_to("scale", pr, ("gitea", &api), &trust)
        .await
        .assert_code(0);
    on.post_to("scale", pr, ("gitea", &api), &trust)
        .await
        .assert_code(0);
    assert_eq!(on.forge.comments(pr).len(), 1);
    assert_eq!(edits(&on), 0);
    assert!(
        on.forge
            .requests()
            .iter()
            .any(|r| r.path.ends_with(&format!("/issues/{pr}/comments")))
    );
    assert_eq!(on.forge.statuses(&head)[0].state, "success");
    // Without the CA the forge's certificate is refused.
    let untrusted = on.post_to("scale", pr, ("gitea", &api), &[]).await;
    untrusted.assert_code(1);
    assert!(
        untrusted.stderr.contains("did not answer"),
        "{}",
        untrusted.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gitlab_note_past_the_first_page_is_found_again() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (on, pr, _) = OnForge::scale_pull().await;
    // A busy merge request: more notes than one page of 100 before capstan's.
    let notes = format!(
        "{}/projects/{}%2F{}/merge_requests/{pr}/notes",
        Flavour::Gitlab.api(&on.forge),
        crate::forge::OWNER,
        crate::forge::NAME
    );
    let client = reqwest::Client::new();
    for n in 0..120 {
        let answer = client
            .post(&notes)
            .header("PRIVATE-TOKEN", crate::forge::TOKEN)
            .json(&serde_json::json!({ "body": format!("review note {n}") }))
            .send()
            .await
            .expect("the forge answers");
        assert_eq!(answer.status(), reqwest::StatusCode::CREATED);
    }
    on.post_as(Flavour::Gitlab, "scale", pr)
        .await
        .assert_code(0);
    on.post_as(Flavour::Gitlab, "scale", pr)
        .await
        .assert_code(0);
    let comments = on.forge.comments(pr);
    let marked = comments
        .iter()
        .filter(|c| c.body.starts_with(MARKER))
        .count();
    assert_eq!(
        marked, 1,
        "capstan's note, on the second page, is found again"
    );
    assert_eq!(Flavour::Gitlab.edits(&on.forge), 0);
    let pages: Vec<String> = on
        .forge
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/notes"))
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(pages.len(), 4, "two pages per post: {pages:?}");
}
