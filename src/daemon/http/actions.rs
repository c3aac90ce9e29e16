//! `POST /actions/suspend`, `/actions/resume` and `/actions/reconcile`: the state changes an
//! operator makes without a commit (`capstan suspend`, `resume`, `reconcile`).
//!
//! # Guarantees
//! - Only an authenticated caller changes anything: with neither `--http-token-from` nor
//!   `--http-client-ca` every action is refused with 403 saying how to enable them; with one,
//!   a caller without the token or a certificate gets 401 (as `/status`).
//! - Clusters are named by the daemon's last status: an unknown one is refused (404, naming
//!   the known ones) and nothing changes; with several, all are checked before any changes.
//! - The reason is at most [`MAX_REASON`] characters and redacted before it is kept; the user
//!   a bearer-token caller declares is at most [`MAX_USER`] printable characters and is kept
//!   marked as declared (a token proves no name).
//! - No other site's page can take an action through a visitor's browser, which sends a
//!   client certificate by itself ([`ActionBody`]): the body must be declared
//!   `Content-Type: application/json` (a type no cross-site form can send, and no script may
//!   send elsewhere without a preflight this endpoint never grants), else 415; a request that
//!   says where it comes from (`Origin`, `Sec-Fetch-Site`) must come from this endpoint's own
//!   origin, else 403. The CLI sends neither header.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::{Api, Caller};
use crate::daemon::actions::{Actions, MAX_REASON, MAX_USER};
use crate::plan::{Suspension, SuspensionSource};

/// An action's body, once the request is shown to come from no other site (see the module).
pub(super) struct ActionBody(ActionRequest);

impl<S: Send + Sync> axum::extract::FromRequest<S> for ActionBody {
    type Rejection = Refused;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, Refused> {
        let headers = request.headers();
        if !is_json(headers) {
            return Err(refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "an action's body is JSON and must say so: Content-Type: application/json"
                    .to_owned(),
            ));
        }
        if let Some(site) = foreign_site(headers) {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                format!(
                    "actions are taken only from this endpoint's own origin, not from {site}: use `capstan suspend|resume|reconcile`"
                ),
            ));
        }
        match Json::<ActionRequest>::from_request(request, state).await {
            Ok(Json(body)) => Ok(ActionBody(body)),
            Err(rejection) => Err(refuse(rejection.status(), rejection.body_text())),
        }
    }
}

/// Whether the request declares a JSON body.
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// The site a browser says the request comes from, when it is not this endpoint's origin:
/// an `Origin` whose host is not the request's `Host`, or `Sec-Fetch-Site` other than
/// `same-origin` and `none` (typed by the user).
fn foreign_site(headers: &axum::http::HeaderMap) -> Option<String> {
    let text = |name| {
        headers
            .get(name)
            .map(|value| value.to_str().unwrap_or("(not text)").to_owned())
    };
    if let Some(site) = text(axum::http::HeaderName::from_static("sec-fetch-site"))
        && !matches!(site.as_str(), "same-origin" | "none")
    {
        return Some(format!("a {} request", crate::redact::cap(&site, 32)));
    }
    let origin = text(axum::http::header::ORIGIN)?;
    let host = text(axum::http::header::HOST).unwrap_or_default();
    let origin_host = origin
        .split_once("://")
        .map_or("", |(_, authority)| authority)
        .trim_end_matches('/');
    let same = !host.is_empty() && origin_host.eq_ignore_ascii_case(&host);
    (!same).then(|| crate::redact::cap(&origin, 128))
}

/// How long `reconcile` waits for the pass it asked for before answering that it was asked.
const WAIT_FOR_PASS: Duration = Duration::from_secs(45);

/// What `suspend`, `resume` and `reconcile` are asked.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActionRequest {
    /// The clusters, by name (`reconcile`: none means the fleet).
    #[serde(default)]
    pub clusters: Vec<String>,
    /// Every cluster of the daemon's status.
    #[serde(default)]
    pub all: bool,
    /// `suspend`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `suspend` with a bearer token: who the client says it is (kept as declared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// What an action did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionAnswer {
    /// The clusters it changed.
    #[serde(default)]
    pub changed: Vec<String>,
    /// What happened, one line per cluster or for the fleet.
    #[serde(default)]
    pub messages: Vec<String>,
    /// `reconcile`: the revision the daemon acts on after the pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// An action refused: the status code and how to fix it.
#[derive(Debug)]
pub(super) struct Refused(StatusCode, String);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        (self.0, format!("{}\n", self.1)).into_response()
    }
}

fn refuse(status: StatusCode, message: String) -> Refused {
    Refused(status, message)
}

/// The actions, once the caller may take them.
fn allowed(caller: &Caller, api: &Api) -> Result<Arc<Actions>, Refused> {
    if !caller.authenticated {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "this daemon's endpoint is not authenticated, so it takes no action: start it with --http-token-from env:VAR|file:PATH (or --http-tls-cert, --http-tls-key and --http-client-ca) and pass the token with --server-token-from".to_owned(),
        ));
    }
    api.board.actions().ok_or_else(|| {
        refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "no reconcile loop behind this endpoint takes actions".to_owned(),
        )
    })
}

/// The clusters a request names, each known to the daemon's status.
fn clusters_of(api: &Api, request: &ActionRequest) -> Result<Vec<String>, Refused> {
    let status = api.board.status();
    if status.revision.is_none() {
        return Err(refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "no reconcile pass has completed yet, so no cluster is known: try again shortly"
                .to_owned(),
        ));
    }
    let known: Vec<&String> = status.clusters.keys().collect();
    if request.all {
        if !request.clusters.is_empty() {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "give cluster names or --all, not both".to_owned(),
            ));
        }
        return Ok(known.into_iter().cloned().collect());
    }
    let unknown: Vec<&String> = request
        .clusters
        .iter()
        .filter(|c| !status.clusters.contains_key(*c))
        .collect();
    if !unknown.is_empty() {
        let names = |names: &[&String]| {
            names
                .iter()
                .map(|n| crate::redact::cap(n, 64))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(refuse(
            StatusCode::NOT_FOUND,
            format!(
                "no cluster {} in the daemon's status (known: {}); nothing changed",
                names(&unknown),
                names(&known)
            ),
        ));
    }
    Ok(request.clusters.clone())
}

/// Who the caller is, as a suspension records it.
fn who(caller: &Caller, request: &ActionRequest) -> Result<(String, bool), Refused> {
    if let Some(subject) = &caller.subject {
        return Ok((subject.to_string(), false));
    }
    match request.user.as_deref().map(str::trim) {
        None | Some("") => Ok(("bearer token".to_owned(), false)),
        Some(user)
            if user.chars().count() <= MAX_USER
                && user.chars().all(|c| !c.is_control() && c != '\n') =>
        {
            Ok((format!("bearer token, user {user}"), true))
        }
        Some(_) => Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("the declared user must be at most {MAX_USER} printable characters"),
        )),
    }
}

fn record_failed(err: &crate::daemon::actions::RecordError) -> Refused {
    refuse(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "{}; nothing else changed: check that the daemon may write Secrets in the management cluster's capstan-system namespace, then try again",
            crate::redact::redact(&crate::errors::error_chain(err))
        ),
    )
}

pub(super) async fn suspend(
    caller: Caller,
    State(api): State<Arc<Api>>,
    ActionBody(request): ActionBody,
) -> Result<Json<ActionAnswer>, Refused> {
    let actions = allowed(&caller, &api)?;
    let reason = request.reason.as_deref().map(str::trim).unwrap_or_default();
    if reason.is_empty() {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "a suspension needs a reason (--reason TEXT): the next person reads it in the status"
                .to_owned(),
        ));
    }
    if reason.chars().count() > MAX_REASON {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            format!("the reason must be at most {MAX_REASON} characters; link to the details"),
        ));
    }
    let clusters = clusters_of(&api, &request)?;
    let (by, declared) = who(&caller, &request)?;
    let suspension = Suspension {
        source: SuspensionSource::Runtime,
        by: Some(by),
        declared,
        at: Some(jiff::Timestamp::now()),
        reason: Some(crate::redact::redact(reason)),
    };
    let mut answer = ActionAnswer::default();
    for cluster in clusters {
        if let Err(err) = actions.suspend(&cluster, &suspension).await {
            return Err(record_failed(&err));
        }
        answer
            .messages
            .push(format!("{cluster}: {}", suspension.message(&cluster)));
        answer.changed.push(cluster);
    }
    if !actions.is_durable() {
        answer.messages.push(
            "kept in this daemon's memory only (the fleet has no management cluster): a restart forgets it".to_owned(),
        );
    }
    Ok(Json(answer))
}

pub(super) async fn resume(
    caller: Caller,
    State(api): State<Arc<Api>>,
    ActionBody(request): ActionBody,
) -> Result<Json<ActionAnswer>, Refused> {
    let actions = allowed(&caller, &api)?;
    let clusters = clusters_of(&api, &request)?;
    let status = api.board.status();
    let mut answer = ActionAnswer::default();
    for cluster in clusters {
        let was = match actions.resume(&cluster).await {
            Ok(was) => was,
            Err(err) => return Err(record_failed(&err)),
        };
        let in_git = status.clusters.get(&cluster).is_some_and(|c| {
            c.suspended
                .iter()
                .any(|s| s.source == SuspensionSource::Git)
        });
        let message = match (was, in_git) {
            (true, false) => format!("{cluster}: resumed"),
            (true, true) => format!(
                "{cluster}: resumed at runtime, but its file still says spec.suspend: true: remove it in Git to resume"
            ),
            (false, true) => format!(
                "{cluster}: not suspended at runtime; its file says spec.suspend: true: remove it in Git to resume"
            ),
            (false, false) => format!("{cluster}: was not suspended"),
        };
        answer.messages.push(message);
        if was {
            answer.changed.push(cluster);
        }
    }
    Ok(Json(answer))
}

pub(super) async fn reconcile(
    caller: Caller,
    State(api): State<Arc<Api>>,
    ActionBody(request): ActionBody,
) -> Result<Json<ActionAnswer>, Refused> {
    let actions = allowed(&caller, &api)?;
    if !request.clusters.is_empty() {
        clusters_of(&api, &request)?;
    }
    let passed = tokio::time::timeout(WAIT_FOR_PASS, actions.reconcile())
        .await
        .is_ok();
    let status = api.board.status();
    let mut answer = ActionAnswer {
        revision: status.revision.clone(),
        ..ActionAnswer::default()
    };
    answer.messages.push(if passed {
        format!(
            "polled the source and ran a pass at revision {}",
            status.revision.as_deref().unwrap_or("(none yet)")
        )
    } else {
        format!(
            "asked for a poll and a pass; none completed within {}s (a pass may be observing a slow cluster): `capstan status` shows when it does",
            WAIT_FOR_PASS.as_secs()
        )
    });
    // A pass reconciles the whole fleet; the clusters named are reported on.
    for cluster in &request.clusters {
        if let Some(entry) = status.clusters.get(cluster) {
            answer.messages.push(format!("{cluster}: {}", entry.phase));
        }
    }
    Ok(Json(answer))
}

#[cfg(test)]
mod tests;
