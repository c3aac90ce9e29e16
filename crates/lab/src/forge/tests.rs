use axum::body::Body;
use axum::http::{Request as HttpRequest, StatusCode, header};
use tower::ServiceExt as _;

use super::*;

const TOKEN: &str = "secret-token";

/// A bare repository with `main` and `change`, and the forge's shared state on it.
fn forge() -> (tempfile::TempDir, Arc<Shared>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let bare = dir.path().join("fleet.git");
    let work = dir.path().join("work");
    let run = |cwd: &Path, args: &[&str]| {
        let status = Command::new("git")
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(cwd)
            .output()
            .expect("git runs");
        assert!(status.status.success(), "git {args:?}: {status:?}");
    };
    std::fs::create_dir_all(&work).expect("mkdir");
    run(dir.path(), &["init", "--quiet", "--bare", "fleet.git"]);
    run(&work, &["init", "--quiet", "-b", "main"]);
    std::fs::write(work.join("capstan.yaml"), "a: 1\n").expect("write");
    run(&work, &["add", "."]);
    run(&work, &["commit", "--quiet", "-m", "one"]);
    run(&work, &["checkout", "--quiet", "-b", "change"]);
    std::fs::write(work.join("capstan.yaml"), "a: 2\n").expect("write");
    run(&work, &["commit", "--quiet", "-am", "two"]);
    let bare_path = bare.display().to_string();
    run(&work, &["push", "--quiet", &bare_path, "main", "change"]);
    let shared = Arc::new(Shared {
        options: ForgeOptions {
            owner: "acme".into(),
            name: "fleet".into(),
            token: TOKEN.into(),
            login: "bot".into(),
            git_dir: bare,
        },
        state: Mutex::new(State::default()),
    });
    (dir, shared)
}

fn open(shared: &Shared, head: &str) -> u64 {
    let git_dir = &shared.options.git_dir;
    let mut state = shared.state();
    let number = state.id();
    let head_sha = branch_tip(git_dir, head).expect("head");
    update_pull_ref(git_dir, number, &head_sha).expect("ref");
    state.pulls.push(Pull {
        number,
        title: "t".into(),
        head_ref: head.into(),
        head_sha,
        base_ref: "main".into(),
        base_sha: branch_tip(git_dir, "main").expect("base"),
        state: "open".into(),
        created_at: payloads::now(),
    });
    number
}

async fn call(
    shared: &Arc<Shared>,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: &str,
) -> (StatusCode, axum::http::HeaderMap, serde_json::Value) {
    let mut request = HttpRequest::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, "forge.test")
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let response = routes::router(shared.clone(), "http")
        .oneshot(request.body(Body::from(body.to_owned())).expect("request"))
        .await
        .expect("answered");
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20).await.expect("body");
    (
        parts.status,
        parts.headers,
        serde_json::from_slice(&bytes).unwrap_or_default(),
    )
}

#[tokio::test]
async fn without_the_token_every_call_is_401_and_recorded() {
    let (_dir, shared) = forge();
    let (status, _, body) = call(&shared, "GET", "/repos/acme/fleet/pulls", None, "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["message"], "Bad credentials");
    let (status, _, _) = call(&shared, "GET", "/user", Some("wrong"), "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, user) = call(&shared, "GET", "/api/v1/user", Some(TOKEN), "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(user["login"], "bot");
    let recorded: Vec<u16> = shared.state().requests.iter().map(|r| r.status).collect();
    assert_eq!(recorded, [401, 401, 200]);
}

#[tokio::test]
async fn comments_are_paginated_with_githubs_link_header() {
    let (_dir, shared) = forge();
    let pr = open(&shared, "change");
    for n in 0..3 {
        let body = format!(r#"{{"body": "comment {n}"}}"#);
        let uri = format!("/api/v3/repos/acme/fleet/issues/{pr}/comments");
        let (status, _, _) = call(&shared, "POST", &uri, Some(TOKEN), &body).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let uri = format!("/api/v3/repos/acme/fleet/issues/{pr}/comments?per_page=2");
    let (_, headers, page) = call(&shared, "GET", &uri, Some(TOKEN), "").await;
    assert_eq!(page.as_array().map(Vec::len), Some(2));
    let link = headers[header::LINK].to_str().expect("text");
    assert!(
        link.contains(&format!(
            "<http://forge.test/api/v3/repos/acme/fleet/issues/{pr}/comments?per_page=2&page=2>; rel=\"next\""
        )),
        "{link}"
    );
    let uri = format!("{uri}&page=2");
    let (_, _, last) = call(&shared, "GET", &uri, Some(TOKEN), "").await;
    assert_eq!(last[0]["body"], "comment 2");
}

#[tokio::test]
async fn a_push_to_the_branch_moves_the_pull_head_and_its_ref() {
    let (_dir, shared) = forge();
    let pr = open(&shared, "change");
    let git_dir = shared.options.git_dir.clone();
    let before = git(&git_dir, &["rev-parse", &format!("refs/pull/{pr}/head")]).expect("ref");
    // Another push to `change`: `main`'s tip is as good a new head as any.
    let main = branch_tip(&git_dir, "main").expect("main");
    git(&git_dir, &["update-ref", "refs/heads/change", &main]).expect("push");
    let (_, _, pull) = call(
        &shared,
        "GET",
        &format!("/repos/acme/fleet/pulls/{pr}"),
        Some(TOKEN),
        "",
    )
    .await;
    assert_eq!(pull["head"]["sha"], main.as_str());
    assert_ne!(before, main);
    let after = git(&git_dir, &["rev-parse", &format!("refs/pull/{pr}/head")]).expect("ref");
    assert_eq!(after, main);
}

#[tokio::test]
async fn a_fault_answers_as_many_requests_as_asked_then_heals() {
    let (_dir, shared) = forge();
    shared.state().fault = Some((Fault::TooManyRequests { retry_after: 7 }, Some(2)));
    for _ in 0..2 {
        let (status, headers, _) = call(&shared, "GET", "/user", Some(TOKEN), "").await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(headers[header::RETRY_AFTER], "7");
    }
    let (status, _, _) = call(&shared, "GET", "/user", Some(TOKEN), "").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn gitlab_notes_come_newest_first_unless_asked_and_page_with_x_next_page() {
    let (_dir, shared) = forge();
    let pr = open(&shared, "change");
    let notes = format!("/api/v4/projects/acme%2Ffleet/merge_requests/{pr}/notes");
    for n in 0..3 {
        let body = format!(r#"{{"body": "note {n}"}}"#);
        let (status, _, note) = call(&shared, "POST", &notes, Some(TOKEN), &body).await;
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(note["noteable_iid"], pr);
    }
    let (_, headers, page) = call(
        &shared,
        "GET",
        &format!("{notes}?per_page=2"),
        Some(TOKEN),
        "",
    )
    .await;
    assert_eq!(page[0]["body"], "note 2", "newest first by default");
    assert_eq!(headers["x-next-page"], "2");
    assert_eq!(headers["x-total"], "3");
    let asc = format!("{notes}?sort=asc&order_by=created_at&per_page=2&page=2");
    let (_, headers, last) = call(&shared, "GET", &asc, Some(TOKEN), "").await;
    assert_eq!(last[0]["body"], "note 2");
    assert_eq!(headers["x-next-page"], "");
    let id = last[0]["id"].as_u64().expect("an id");
    let (status, _, edited) = call(
        &shared,
        "PUT",
        &format!("{notes}/{id}"),
        Some(TOKEN),
        r#"{"body": "edited"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(edited["body"], "edited");
}

#[tokio::test]
async fn gitlab_merge_requests_and_statuses_share_the_pulls_and_the_repository() {
    let (_dir, shared) = forge();
    let pr = open(&shared, "change");
    let project = "/api/v4/projects/acme%2Ffleet";
    let (status, _, _) = call(
        &shared,
        "GET",
        &format!("{project}/merge_requests"),
        None,
        "",
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (_, _, listed) = call(
        &shared,
        "GET",
        &format!("{project}/merge_requests?state=opened"),
        Some(TOKEN),
        "",
    )
    .await;
    let head = branch_tip(&shared.options.git_dir, "change").expect("head");
    assert_eq!(listed[0]["iid"], pr);
    assert_eq!(listed[0]["sha"], head.as_str());
    assert_eq!(listed[0]["source_branch"], "change");
    assert_eq!(listed[0]["target_branch"], "main");
    let merge_ref = git(
        &shared.options.git_dir,
        &["rev-parse", &format!("refs/merge-requests/{pr}/head")],
    )
    .expect("the merge request's ref");
    assert_eq!(merge_ref, head);
    let statuses = format!("{project}/statuses/{head}");
    let (status, _, _) = call(
        &shared,
        "POST",
        &statuses,
        Some(TOKEN),
        r#"{"state": "failure", "name": "capstan/preview"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "GitHub's word is refused");
    let (status, _, set) = call(
        &shared,
        "POST",
        &statuses,
        Some(TOKEN),
        r#"{"state": "failed", "name": "capstan/preview", "description": "refused"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(set["status"], "failed");
    assert_eq!(set["name"], "capstan/preview");
    let (status, _, _) = call(
        &shared,
        "GET",
        "/api/v4/projects/other%2Ffleet",
        Some(TOKEN),
        "",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
