//! GitLab's REST API under `/api/v4`, over the same state as the GitHub routes: the forge's
//! pull requests are its merge requests (the number is the `iid`), their comments its notes,
//! and commit statuses carry GitLab's states (`success`, `failed`, ...) and `name`.
//!
//! The project is addressed by its id (1) or its URL-encoded path (`acme%2Ffleet`); requests
//! authenticate with `PRIVATE-TOKEN` (or `Authorization: Bearer`). Lists page with
//! `page`/`per_page` (default 20, at most 100) and answer GitLab's `x-page`, `x-per-page`,
//! `x-next-page` (empty on the last page), `x-total` and `x-total-pages`; notes come newest
//! first unless `sort=asc`. Rate limits answer 429 with `RateLimit-*` headers, as GitLab does.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::{Value, json};

use crate::forge::{Comment, CommitStatus, Fault, Pull, Request as Recorded, Shared, payloads};

/// The project's numeric id.
const PROJECT_ID: u64 = 1;

/// The states GitLab accepts for a commit status.
const STATES: [&str; 6] = [
    "pending", "running", "success", "failed", "canceled", "skipped",
];

#[derive(Clone)]
struct Ctx {
    shared: Arc<Shared>,
    web: &'static str,
}

type Answer = Result<Response, ApiError>;

/// GitLab's routes, to be nested at `/api/v4`.
pub(super) fn router(shared: Arc<Shared>, scheme: &'static str) -> Router {
    let ctx = Ctx {
        shared,
        web: scheme,
    };
    Router::new()
        .route("/projects/{id}", get(get_project))
        .route("/projects/{id}/merge_requests", get(list_merge_requests))
        .route(
            "/projects/{id}/merge_requests/{iid}",
            get(get_merge_request),
        )
        .route(
            "/projects/{id}/merge_requests/{iid}/notes",
            get(list_notes).post(create_note),
        )
        .route(
            "/projects/{id}/merge_requests/{iid}/notes/{note}",
            put(edit_note),
        )
        .route("/projects/{id}/statuses/{sha}", post(create_status))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "404 Not Found") })
        .layer(middleware::from_fn_with_state(ctx.clone(), guard))
        .with_state(ctx)
}

/// An error answer, with GitLab's error body: `{"message": "..."}`.
struct ApiError {
    status: StatusCode,
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(json!({ "message": self.message }))).into_response()
    }
}

fn error(status: StatusCode, message: &str) -> ApiError {
    ApiError {
        status,
        message: message.to_owned(),
    }
}

/// Checks the token, answers an injected fault, records the request, and adds GitLab's
/// rate-limit headers.
async fn guard(State(ctx): State<Ctx>, request: Request, next: Next) -> Response {
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let headers = request.headers();
    let token = headers
        .get("private-token")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
        });
    let authorized = token.is_some_and(|t| t == ctx.shared.options.token);
    let fault = super::take_fault(&mut ctx.shared.state());
    let mut response = match fault {
        Some(fault) => fault_response(fault),
        None if !authorized => error(StatusCode::UNAUTHORIZED, "401 Unauthorized").into_response(),
        None => next.run(request).await,
    };
    let reset = jiff::Timestamp::now().as_second() + 60;
    let headers = response.headers_mut();
    for (name, value) in [
        ("ratelimit-limit", HeaderValue::from_static("2000")),
        ("ratelimit-remaining", HeaderValue::from_static("1999")),
        ("ratelimit-reset", HeaderValue::from(reset)),
    ] {
        headers.entry(name).or_insert(value);
    }
    ctx.shared.state().requests.push(Recorded {
        method,
        path,
        status: response.status().as_u16(),
    });
    response
}

/// A fault as GitLab answers it: rate limits are 429, with `Retry-After` or, when only the
/// quota is known, `RateLimit-Remaining: 0` and `RateLimit-Reset`.
fn fault_response(fault: Fault) -> Response {
    let mut response = match fault {
        Fault::Outage => {
            return error(StatusCode::SERVICE_UNAVAILABLE, "503 Service Unavailable")
                .into_response();
        }
        Fault::TooManyRequests { .. } | Fault::RateLimited { .. } => error(
            StatusCode::TOO_MANY_REQUESTS,
            "This endpoint has been requested too many times. Try again later.",
        )
        .into_response(),
    };
    let headers = response.headers_mut();
    match fault {
        Fault::TooManyRequests { retry_after } => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
        }
        Fault::RateLimited { reset_in } => {
            let reset = jiff::Timestamp::now().as_second() + i64::try_from(reset_in).unwrap_or(0);
            headers.insert("ratelimit-remaining", HeaderValue::from_static("0"));
            headers.insert("ratelimit-reset", HeaderValue::from(reset));
        }
        Fault::Outage => {}
    }
    response
}

impl Ctx {
    /// `http://HOST:PORT`, for `web_url`s.
    fn web_url(&self, headers: &HeaderMap) -> String {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost");
        format!("{}://{host}", self.web)
    }

    /// `owner/name`, when `id` names the project (by id or by its decoded path); else 404.
    fn project(&self, id: &str) -> Result<String, ApiError> {
        let options = &self.shared.options;
        let path = format!("{}/{}", options.owner, options.name);
        if id == path || id == PROJECT_ID.to_string() {
            Ok(path)
        } else {
            Err(error(StatusCode::NOT_FOUND, "404 Project Not Found"))
        }
    }

    /// The pulls, their heads re-read from the repository.
    fn pulls(&self) -> Result<Vec<Pull>, ApiError> {
        let mut state = self.shared.state();
        crate::forge::refresh_pulls(&self.shared.options.git_dir, &mut state.pulls)
            .map_err(|err| error(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()))?;
        Ok(state.pulls.clone())
    }

    fn merge_request(&self, iid: u64) -> Result<Pull, ApiError> {
        self.pulls()?
            .into_iter()
            .find(|p| p.number == iid)
            .ok_or_else(|| error(StatusCode::NOT_FOUND, "404 Not found"))
    }
}

/// A "UserBasic".
fn user(web: &str, username: &str) -> Value {
    json!({
        "id": 1,
        "username": username,
        "name": username,
        "state": "active",
        "locked": false,
        "avatar_url": null,
        "web_url": format!("{web}/{username}"),
    })
}

fn merge_request_json(web: &str, project: &str, author: &str, pull: &Pull) -> Value {
    let state = if pull.state == "open" {
        "opened"
    } else {
        "closed"
    };
    json!({
        "id": 1000 + pull.number,
        "iid": pull.number,
        "project_id": PROJECT_ID,
        "title": pull.title,
        "description": "",
        "state": state,
        "created_at": pull.created_at,
        "updated_at": pull.created_at,
        "merged_at": null,
        "closed_at": null,
        "target_branch": pull.base_ref,
        "source_branch": pull.head_ref,
        "author": user(web, author),
        "source_project_id": PROJECT_ID,
        "target_project_id": PROJECT_ID,
        "draft": false,
        "sha": pull.head_sha,
        "merge_commit_sha": null,
        "squash_commit_sha": null,
        "references": { "short": format!("!{}", pull.number), "full": format!("{project}!{}", pull.number) },
        "web_url": format!("{web}/{project}/-/merge_requests/{}", pull.number),
    })
}

fn note_json(web: &str, note: &Comment) -> Value {
    json!({
        "id": note.id,
        "type": null,
        "body": note.body,
        "attachment": null,
        "author": user(web, &note.author),
        "created_at": note.created_at,
        "updated_at": note.updated_at,
        "system": false,
        "noteable_id": 1000 + note.issue,
        "noteable_type": "MergeRequest",
        "noteable_iid": note.issue,
        "project_id": PROJECT_ID,
        "resolvable": false,
        "confidential": false,
        "internal": false,
    })
}

fn status_json(web: &str, status: &CommitStatus) -> Value {
    json!({
        "id": status.id,
        "sha": status.sha,
        "ref": null,
        "status": status.state,
        "name": status.context,
        "target_url": status.target_url,
        "description": status.description,
        "created_at": status.created_at,
        "started_at": null,
        "finished_at": status.created_at,
        "allow_failure": false,
        "coverage": null,
        "pipeline_id": null,
        "author": user(web, &status.creator),
    })
}

/// One page of `items` with GitLab's pagination headers.
fn paginated(query: &BTreeMap<String, String>, items: Vec<Value>) -> Response {
    let number = |key: &str, default: usize| {
        query
            .get(key)
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(default)
    };
    let per_page = number("per_page", 20).min(100);
    let page = number("page", 1);
    let total = items.len();
    let pages = total.div_ceil(per_page).max(1);
    let shown: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    let mut response = (StatusCode::OK, axum::Json(Value::Array(shown))).into_response();
    let headers = response.headers_mut();
    let text = |n: usize| HeaderValue::from(n);
    let next = if page < pages {
        text(page + 1)
    } else {
        HeaderValue::from_static("")
    };
    let previous = if page > 1 {
        text(page - 1)
    } else {
        HeaderValue::from_static("")
    };
    headers.insert("x-page", text(page));
    headers.insert("x-per-page", text(per_page));
    headers.insert("x-next-page", next);
    headers.insert("x-prev-page", previous);
    headers.insert("x-total", text(total));
    headers.insert("x-total-pages", text(pages));
    response
}

async fn get_project(State(ctx): State<Ctx>, Path(id): Path<String>, headers: HeaderMap) -> Answer {
    let path = ctx.project(&id)?;
    let web = ctx.web_url(&headers);
    let options = &ctx.shared.options;
    Ok(axum::Json(json!({
        "id": PROJECT_ID,
        "name": options.name,
        "path": options.name,
        "path_with_namespace": path,
        "default_branch": "main",
        "web_url": format!("{web}/{path}"),
        "http_url_to_repo": format!("{web}/{path}.git"),
    }))
    .into_response())
}

async fn list_merge_requests(
    State(ctx): State<Ctx>,
    Path(id): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Answer {
    let project = ctx.project(&id)?;
    let wanted = match query.get("state").map_or("all", String::as_str) {
        "opened" => Some("open"),
        "closed" => Some("closed"),
        "all" => None,
        // GitLab has merged and locked merge requests; the lab's are never either.
        _ => Some("none"),
    };
    let web = ctx.web_url(&headers);
    let login = &ctx.shared.options.login;
    let items = ctx
        .pulls()?
        .iter()
        .rev()
        .filter(|p| wanted.is_none_or(|state| p.state == state))
        .map(|p| merge_request_json(&web, &project, login, p))
        .collect();
    Ok(paginated(&query, items))
}

async fn get_merge_request(
    State(ctx): State<Ctx>,
    Path((id, iid)): Path<(String, u64)>,
    headers: HeaderMap,
) -> Answer {
    let project = ctx.project(&id)?;
    let pull = ctx.merge_request(iid)?;
    let web = ctx.web_url(&headers);
    let value = merge_request_json(&web, &project, &ctx.shared.options.login, &pull);
    Ok(axum::Json(value).into_response())
}

async fn list_notes(
    State(ctx): State<Ctx>,
    Path((id, iid)): Path<(String, u64)>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Answer {
    ctx.project(&id)?;
    ctx.merge_request(iid)?;
    let mut notes: Vec<Comment> = ctx
        .shared
        .state()
        .comments
        .iter()
        .filter(|c| c.issue == iid)
        .cloned()
        .collect();
    // GitLab's default order is newest first.
    if query.get("sort").map(String::as_str) != Some("asc") {
        notes.reverse();
    }
    let web = ctx.web_url(&headers);
    let items = notes.iter().map(|n| note_json(&web, n)).collect();
    Ok(paginated(&query, items))
}

/// The request's string field `name`, or GitLab's 400 naming it.
fn field(bytes: &Bytes, name: &str) -> Result<Option<String>, ApiError> {
    let body: Value = serde_json::from_slice(bytes)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| error(StatusCode::BAD_REQUEST, "400 Bad request - invalid JSON"))?;
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(error(
            StatusCode::BAD_REQUEST,
            &format!("{name} is invalid"),
        )),
    }
}

fn required_body(bytes: &Bytes) -> Result<String, ApiError> {
    field(bytes, "body")?
        .filter(|body| !body.is_empty())
        .ok_or_else(|| error(StatusCode::BAD_REQUEST, "400 Bad request - body is missing"))
}

async fn create_note(
    State(ctx): State<Ctx>,
    Path((id, iid)): Path<(String, u64)>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Answer {
    ctx.project(&id)?;
    ctx.merge_request(iid)?;
    let body = required_body(&bytes)?;
    let note = {
        let mut state = ctx.shared.state();
        let now = payloads::now();
        let note = Comment {
            id: state.id(),
            issue: iid,
            body,
            author: ctx.shared.options.login.clone(),
            created_at: now.clone(),
            updated_at: now,
        };
        state.comments.push(note.clone());
        note
    };
    let value = note_json(&ctx.web_url(&headers), &note);
    Ok((StatusCode::CREATED, axum::Json(value)).into_response())
}

async fn edit_note(
    State(ctx): State<Ctx>,
    Path((id, iid, note_id)): Path<(String, u64, u64)>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Answer {
    ctx.project(&id)?;
    let body = required_body(&bytes)?;
    let note = {
        let mut state = ctx.shared.state();
        let note = state
            .comments
            .iter_mut()
            .find(|c| c.id == note_id && c.issue == iid)
            .ok_or_else(|| error(StatusCode::NOT_FOUND, "404 Note Not Found"))?;
        note.body = body;
        note.updated_at = payloads::now();
        note.clone()
    };
    Ok(axum::Json(note_json(&ctx.web_url(&headers), &note)).into_response())
}

async fn create_status(
    State(ctx): State<Ctx>,
    Path((id, sha)): Path<(String, String)>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Answer {
    ctx.project(&id)?;
    let state = field(&bytes, "state")?.unwrap_or_default();
    if !STATES.contains(&state.as_str()) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "400 Bad request - state does not have a valid value",
        ));
    }
    if !crate::forge::has_commit(&ctx.shared.options.git_dir, &sha) {
        return Err(error(StatusCode::NOT_FOUND, "404 Commit Not Found"));
    }
    // GitLab takes the label as `name`, or its alias `context`.
    let name = match field(&bytes, "name")? {
        Some(name) => Some(name),
        None => field(&bytes, "context")?,
    };
    let status = {
        let mut forge = ctx.shared.state();
        let status = CommitStatus {
            id: forge.id(),
            sha,
            state,
            context: name.unwrap_or_else(|| "default".to_owned()),
            description: field(&bytes, "description")?,
            target_url: field(&bytes, "target_url")?,
            creator: ctx.shared.options.login.clone(),
            created_at: payloads::now(),
        };
        forge.statuses.push(status.clone());
        status
    };
    let value = status_json(&ctx.web_url(&headers), &status);
    Ok((StatusCode::CREATED, axum::Json(value)).into_response())
}
