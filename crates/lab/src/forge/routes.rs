//! The forge's routes, mounted at `/`, `/api/v3` and `/api/v1`, behind one layer that checks
//! the token, answers injected faults and records every request.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

mod gitlab;

use super::payloads::{self, Links};
use super::{Comment, CommitStatus, Fault, Request as Recorded, Shared, State as ForgeState};

#[derive(Clone)]
struct Ctx {
    shared: Arc<Shared>,
    scheme: &'static str,
    prefix: &'static str,
}

type Answer = Result<Response, ApiError>;

/// The forge's API under every prefix clients use.
pub(super) fn router(shared: Arc<Shared>, scheme: &'static str) -> Router {
    let api = |prefix: &'static str| {
        let ctx = Ctx {
            shared: shared.clone(),
            scheme,
            prefix,
        };
        Router::new()
            .route("/user", get(get_user))
            .route("/repos/{owner}/{repo}", get(get_repository))
            .route("/repos/{owner}/{repo}/pulls", get(list_pulls))
            .route("/repos/{owner}/{repo}/pulls/{number}", get(get_pull))
            .route(
                "/repos/{owner}/{repo}/issues/{number}/comments",
                get(list_comments).post(create_comment),
            )
            .route(
                "/repos/{owner}/{repo}/issues/comments/{id}",
                get(get_comment).patch(edit_comment).delete(delete_comment),
            )
            .route("/repos/{owner}/{repo}/statuses/{sha}", post(create_status))
            .route(
                "/repos/{owner}/{repo}/commits/{reference}/statuses",
                get(list_statuses),
            )
            .fallback(not_found)
            .layer(middleware::from_fn_with_state(ctx.clone(), guard))
            .with_state(ctx)
    };
    Router::new()
        .nest("/api/v3", api("/api/v3"))
        .nest("/api/v1", api("/api/v1"))
        .nest("/api/v4", gitlab::router(shared.clone(), scheme))
        .merge(api(""))
}

/// Checks the token, answers an injected fault, records the request, and adds GitHub's
/// rate-limit headers.
async fn guard(State(ctx): State<Ctx>, request: Request, next: Next) -> Response {
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let authorized = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            value
                .strip_prefix("token ")
                .or_else(|| value.strip_prefix("Bearer "))
        })
        .is_some_and(|token| token == ctx.shared.options.token);
    let fault = take_fault(&mut ctx.shared.state());
    let mut response = match fault {
        Some(fault) => fault_response(fault),
        None if !authorized => error(StatusCode::UNAUTHORIZED, "Bad credentials").into_response(),
        None => next.run(request).await,
    };
    let headers = response.headers_mut();
    let reset = jiff::Timestamp::now().as_second() + 3600;
    headers
        .entry("x-ratelimit-limit")
        .or_insert(HeaderValue::from_static("5000"));
    headers
        .entry("x-ratelimit-remaining")
        .or_insert(HeaderValue::from_static("4999"));
    headers
        .entry("x-ratelimit-reset")
        .or_insert(HeaderValue::from(reset));
    ctx.shared.state().requests.push(Recorded {
        method,
        path,
        status: response.status().as_u16(),
    });
    response
}

fn take_fault(state: &mut ForgeState) -> Option<Fault> {
    let (fault, remaining) = state.fault?;
    match remaining {
        Some(0) => {
            state.fault = None;
            None
        }
        Some(left) => {
            state.fault = (left > 1).then_some((fault, Some(left - 1)));
            Some(fault)
        }
        None => Some(fault),
    }
}

fn fault_response(fault: Fault) -> Response {
    match fault {
        Fault::Outage => {
            error(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable").into_response()
        }
        Fault::TooManyRequests { retry_after } => {
            let mut response = error(
                StatusCode::TOO_MANY_REQUESTS,
                "You have exceeded a secondary rate limit.",
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
            response
        }
        Fault::RateLimited { reset_in } => {
            let mut response =
                error(StatusCode::FORBIDDEN, "API rate limit exceeded.").into_response();
            let reset = jiff::Timestamp::now().as_second() + i64::try_from(reset_in).unwrap_or(0);
            let headers = response.headers_mut();
            headers.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
            headers.insert("x-ratelimit-reset", HeaderValue::from(reset));
            response
        }
    }
}

/// An error answer, with GitHub's error body.
struct ApiError {
    status: StatusCode,
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            axum::Json(json!({
                "message": self.message,
                "documentation_url": "https://docs.github.com/rest",
            })),
        )
            .into_response()
    }
}

fn error(status: StatusCode, message: &str) -> ApiError {
    ApiError {
        status,
        message: message.to_owned(),
    }
}

fn json_answer(status: StatusCode, value: Value) -> Answer {
    Ok((status, axum::Json(value)).into_response())
}

async fn not_found() -> ApiError {
    error(StatusCode::NOT_FOUND, "Not Found")
}

impl Ctx {
    fn links(&self, headers: &HeaderMap) -> Links {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost");
        let web = format!("{}://{host}", self.scheme);
        Links {
            api: format!("{web}{}", self.prefix),
            web,
        }
    }

    /// 404 unless `owner/repo` is the forge's repository.
    fn repository(&self, owner: &str, repo: &str) -> Result<(), ApiError> {
        let options = &self.shared.options;
        if owner == options.owner && repo == options.name {
            Ok(())
        } else {
            Err(error(StatusCode::NOT_FOUND, "Not Found"))
        }
    }
}

async fn get_user(State(ctx): State<Ctx>, headers: HeaderMap) -> Answer {
    let links = ctx.links(&headers);
    json_answer(
        StatusCode::OK,
        payloads::authenticated_user(&links, &ctx.shared.options.login),
    )
}

async fn get_repository(
    State(ctx): State<Ctx>,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
) -> Answer {
    ctx.repository(&owner, &repo)?;
    json_answer(
        StatusCode::OK,
        payloads::repository(&ctx.links(&headers), &owner, &repo),
    )
}

async fn list_pulls(
    State(ctx): State<Ctx>,
    Path((owner, repo)): Path<(String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    uri: axum::extract::OriginalUri,
    headers: HeaderMap,
) -> Answer {
    ctx.repository(&owner, &repo)?;
    let wanted = query.get("state").map_or("open", String::as_str);
    let pulls = {
        let mut state = ctx.shared.state();
        super::refresh_pulls(&ctx.shared.options.git_dir, &mut state.pulls)
            .map_err(|err| error(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()))?;
        state
            .pulls
            .iter()
            .filter(|p| wanted == "all" || p.state == wanted)
            .cloned()
            .collect::<Vec<_>>()
    };
    let links = ctx.links(&headers);
    let login = &ctx.shared.options.login;
    let items = pulls
        .iter()
        .rev()
        .map(|p| payloads::pull(&links, &owner, &repo, login, p))
        .collect();
    Ok(paginated(&query, &links, uri.path(), items))
}

async fn get_pull(
    State(ctx): State<Ctx>,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Answer {
    ctx.repository(&owner, &repo)?;
    let pull = {
        let mut state = ctx.shared.state();
        super::refresh_pulls(&ctx.shared.options.git_dir, &mut state.pulls)
            .map_err(|err| error(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()))?;
        state.pulls.iter().find(|p| p.number == number).cloned()
    };
    let pull = pull.ok_or_else(|| error(StatusCode::NOT_FOUND, "Not Found"))?;
    let git_dir = &ctx.shared.options.git_dir;
    let (commits, changed_files, additions, deletions) =
        super::diff_stats(git_dir, &pull.base_sha, &pull.head_sha)
            .map_err(|err| error(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()))?;
    let comments = ctx
        .shared
        .state()
        .comments
        .iter()
        .filter(|c| c.issue == number)
        .count();
    let detail = payloads::PullDetail {
        comments,
        commits,
        changed_files,
        additions,
        deletions,
    };
    let links = ctx.links(&headers);
    json_answer(
        StatusCode::OK,
        payloads::pull_detail(
            &links,
            (&owner, &repo, &ctx.shared.options.login),
            &pull,
            &detail,
        ),
    )
}

/// One page of `items` (`per_page`, default 30, at most 100; `page` from 1), with GitHub's
/// `Link` header naming the next and last pages.
fn paginated(
    query: &BTreeMap<String, String>,
    links: &Links,
    path: &str,
    items: Vec<Value>,
) -> Response {
    let number = |key: &str, default: usize| {
        query
            .get(key)
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(default)
    };
    let per_page = number("per_page", 30).min(100);
    let page = number("page", 1);
    let last = items.len().div_ceil(per_page).max(1);
    let shown: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    let mut response = (StatusCode::OK, axum::Json(Value::Array(shown))).into_response();
    if last > 1 {
        let url = |n: usize| format!("<{}{path}?per_page={per_page}&page={n}>", links.web);
        let mut parts = Vec::new();
        if page < last {
            parts.push(format!("{}; rel=\"next\"", url(page + 1)));
        }
        parts.push(format!("{}; rel=\"last\"", url(last)));
        if let Ok(value) = HeaderValue::from_str(&parts.join(", ")) {
            response.headers_mut().insert(header::LINK, value);
        }
    }
    response
}

async fn list_comments(
    State(ctx): State<Ctx>,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    Query(query): Query<BTreeMap<String, String>>,
    uri: axum::extract::OriginalUri,
    headers: HeaderMap,
) -> Answer {
    ctx.repository(&owner, &repo)?;
    let comments: Vec<Comment> = ctx
        .shared
        .state()
        .comments
        .iter()
        .filter(|c| c.issue == number)
        .cloned()
        .collect();
    let links = ctx.links(&headers);
    let items = comments
        .iter()
        .map(|c| payloads::comment(&links, &owner, &repo, c))
        .collect();
    Ok(paginated(&query, &links, uri.path(), items))
}

/// A JSON request body's string field, or GitHub's 422.
fn body_field(body: &Value, field: &str) -> Result<Option<String>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(error(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("Invalid request.\n\nFor '{field}', it is not a string."),
        )),
    }
}

fn parse_body(bytes: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice::<Value>(bytes)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| error(StatusCode::BAD_REQUEST, "Problems parsing JSON"))
}

fn required_body(body: &Value) -> Result<String, ApiError> {
    body_field(body, "body")?.ok_or_else(|| {
        error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid request.\n\n\"body\" wasn't supplied.",
        )
    })
}

async fn create_comment(
    State(ctx): State<Ctx>,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Answer {
    ctx.repository(&owner, &repo)?;
    let text = required_body(&parse_body(&bytes)?)?;
    let comment = {
        let mut state = ctx.shared.state();
        if !state.pulls.iter().any(|p| p.number == number) {
            return Err(error(StatusCode::NOT_FOUND, "Not Found"));
        }
        let now = payloads::now();
        let comment = Comment {
            id: state.id(),
            issue: number,
            body: text,
            author: ctx.shared.options.login.clone(),
            created_at: now.clone(),
            updated_at: now,
        };
        state.comments.push(comment.clone());
        comment
    };
    json_answer(
        StatusCode::CREATED,
        payloads::comment(&ctx.links(&headers), &owner, &repo, &comment),
    )
}

fn find_comment(ctx: &Ctx, id: u64) -> Result<Comment, ApiError> {
    ctx.shared
        .state()
        .comments
        .iter()
        .find(|c| c.id == id)
        .cloned()
        .ok_or_else(|| error(StatusCode::NOT_FOUND, "Not Found"))
}

async fn get_comment(
    State(ctx): State<Ctx>,
    Path((owner, repo, id)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Answer {
    ctx.repository(&owner, &repo)?;
    let comment = find_comment(&ctx, id)?;
    json_answer(
        StatusCode::OK,
        payloads::comment(&ctx.links(&headers), &owner, &repo, &comment),
    )
}

async fn edit_comment(
    State(ctx): State<Ctx>,
    Path((owner, repo, id)): Path<(String, String, u64)>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Answer {
    ctx.repository(&owner, &repo)?;
    let text = required_body(&parse_body(&bytes)?)?;
    let comment = {
        let mut state = ctx.shared.state();
        let comment = state
            .comments
            .iter_mut()
            .find(|c| c.id == id)
            .ok_or_else(|| error(StatusCode::NOT_FOUND, "Not Found"))?;
        comment.body = text;
        comment.updated_at = payloads::now();
        comment.clone()
    };
    json_answer(
        StatusCode::OK,
        payloads::comment(&ctx.links(&headers), &owner, &repo, &comment),
    )
}

async fn delete_comment(
    State(ctx): State<Ctx>,
    Path((owner, repo, id)): Path<(String, String, u64)>,
) -> Answer {
    ctx.repository(&owner, &repo)?;
    let mut state = ctx.shared.state();
    let before = state.comments.len();
    state.comments.retain(|c| c.id != id);
    if state.comments.len() == before {
        return Err(error(StatusCode::NOT_FOUND, "Not Found"));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn create_status(
    State(ctx): State<Ctx>,
    Path((owner, repo, sha)): Path<(String, String, String)>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Answer {
    ctx.repository(&owner, &repo)?;
    let body = parse_body(&bytes)?;
    let state = body_field(&body, "state")?.unwrap_or_default();
    if !["error", "failure", "pending", "success"].contains(&state.as_str()) {
        return Err(error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Validation Failed: state must be one of error, failure, pending, success",
        ));
    }
    if !super::has_commit(&ctx.shared.options.git_dir, &sha) {
        return Err(error(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("No commit found for SHA: {sha}"),
        ));
    }
    let status = {
        let mut forge = ctx.shared.state();
        let status = CommitStatus {
            id: forge.id(),
            sha,
            state,
            context: body_field(&body, "context")?.unwrap_or_else(|| "default".to_owned()),
            description: body_field(&body, "description")?,
            target_url: body_field(&body, "target_url")?,
            creator: ctx.shared.options.login.clone(),
            created_at: payloads::now(),
        };
        forge.statuses.push(status.clone());
        status
    };
    json_answer(
        StatusCode::CREATED,
        payloads::status(&ctx.links(&headers), &owner, &repo, &status),
    )
}

async fn list_statuses(
    State(ctx): State<Ctx>,
    Path((owner, repo, reference)): Path<(String, String, String)>,
    Query(query): Query<BTreeMap<String, String>>,
    uri: axum::extract::OriginalUri,
    headers: HeaderMap,
) -> Answer {
    ctx.repository(&owner, &repo)?;
    let git_dir = &ctx.shared.options.git_dir;
    let sha = if super::has_commit(git_dir, &reference) {
        reference
    } else {
        super::branch_tip(git_dir, &reference)
            .map_err(|_| error(StatusCode::NOT_FOUND, "No commit found for the ref"))?
    };
    let statuses: Vec<CommitStatus> = ctx
        .shared
        .state()
        .statuses
        .iter()
        .rev()
        .filter(|s| s.sha == sha)
        .cloned()
        .collect();
    let links = ctx.links(&headers);
    let items = statuses
        .iter()
        .map(|s| payloads::status(&links, &owner, &repo, s))
        .collect();
    Ok(paginated(&query, &links, uri.path(), items))
}
