//! Webhooks: a forge says "someone pushed", capstan polls now instead of at the next
//! `pollInterval`. `POST /hooks/github` (`X-Hub-Signature-256: sha256=<hex>`), `/hooks/gitea`
//! (`X-Gitea-Signature: <hex>`), `/hooks/gitlab` (`X-Gitlab-Token: <secret>`) and
//! `/hooks/generic` (`X-Signature: sha256=<hex>`), HMAC-SHA256 of the raw body.
//!
//! # Guarantees
//! - Signatures and tokens are compared in constant time; a bad or missing one is 401 and
//!   triggers nothing.
//! - Bodies over [`MAX_BODY_BYTES`] are refused (413) before any parsing; a body must arrive
//!   whole within the read timeout ([`Webhooks::with_read_timeout`]) or the request is
//!   answered 408 and its connection closed; at most [`BODIES_AT_ONCE`] bodies are read at a
//!   time (the others wait, within the same deadline), so unfinished bodies cost at most
//!   that many MiB.
//! - Only a push to the tracked branch triggers; the payload is trusted for nothing more than
//!   "poll now" (the poll decides what changed).
//! - A delivery id seen before triggers nothing; triggers made before the poll runs coalesce
//!   into one poll ([`PollTrigger`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use hmac::{KeyInit as _, Mac as _};
use subtle::ConstantTimeEq as _;

use super::SourceMetrics;
use super::credentials::Secret;
use super::tracker::PollTrigger;

/// Largest webhook body accepted: GitHub's push payloads are a few KiB to a few hundred.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How long a body may take to arrive, unless [`Webhooks::with_read_timeout`] says otherwise:
/// a forge sends a push's few KiB in milliseconds. The daemon's HTTP read timeout defaults to
/// this too.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Bodies read at once: a forge delivers one push at a time; unfinished bodies beyond these
/// wait unread (in the kernel's buffers, not the daemon's memory).
pub const BODIES_AT_ONCE: usize = 8;

/// Delivery ids remembered to drop duplicates (forges redeliver on timeouts, a person may
/// click "redeliver"); a few hundred cover any burst.
const REMEMBERED_DELIVERIES: usize = 512;

/// What the webhook endpoints need.
pub struct Webhooks {
    secret: Secret,
    branch: String,
    trigger: Arc<PollTrigger>,
    metrics: Arc<SourceMetrics>,
    seen: Mutex<VecDeque<String>>,
    /// How long a body may take to arrive.
    read_timeout: Duration,
    /// Slots for bodies being read.
    bodies: tokio::sync::Semaphore,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks")
            .field("branch", &self.branch)
            .finish_non_exhaustive()
    }
}

/// Which forge signs how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    GitHub,
    Gitea,
    GitLab,
    Generic,
}

impl Provider {
    fn parse(name: &str) -> Option<Self> {
        match name {
            "github" => Some(Provider::GitHub),
            "gitea" => Some(Provider::Gitea),
            "gitlab" => Some(Provider::GitLab),
            "generic" => Some(Provider::Generic),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Provider::GitHub => "github",
            Provider::Gitea => "gitea",
            Provider::GitLab => "gitlab",
            Provider::Generic => "generic",
        }
    }

    /// The event name header and the value a push has.
    fn is_push(self, headers: &HeaderMap) -> bool {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        match self {
            Provider::GitHub => header("x-github-event") == Some("push"),
            Provider::Gitea => header("x-gitea-event") == Some("push"),
            Provider::GitLab => header("x-gitlab-event") == Some("Push Hook"),
            Provider::Generic => true,
        }
    }

    fn delivery(self, headers: &HeaderMap) -> Option<&str> {
        let name = match self {
            Provider::GitHub => "x-github-delivery",
            Provider::Gitea => "x-gitea-delivery",
            Provider::GitLab => "x-gitlab-event-uuid",
            Provider::Generic => "x-delivery",
        };
        headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Webhooks {
    /// Webhooks for pushes to `branch`, checked with `secret`, pulling `trigger`.
    pub fn new(
        secret: Secret,
        branch: String,
        trigger: Arc<PollTrigger>,
        metrics: Arc<SourceMetrics>,
    ) -> Self {
        Webhooks {
            secret,
            branch,
            trigger,
            metrics,
            seen: Mutex::new(VecDeque::new()),
            read_timeout: DEFAULT_READ_TIMEOUT,
            bodies: tokio::sync::Semaphore::new(BODIES_AT_ONCE),
        }
    }

    /// Gives each body `timeout` to arrive (default [`DEFAULT_READ_TIMEOUT`]).
    #[must_use]
    pub fn with_read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// The routes, `POST /hooks/{provider}`.
    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .route("/hooks/{provider}", post(receive))
            .with_state(self)
    }

    /// The body, read whole within the read timeout, or why not: (status, result counted,
    /// message).
    async fn read_body(
        &self,
        headers: &HeaderMap,
        body: Body,
    ) -> Result<Bytes, (StatusCode, &'static str, &'static str)> {
        const TOO_LARGE: (StatusCode, &str, &str) = (
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "bodies over 1 MiB are refused\n",
        );
        const TOO_SLOW: (StatusCode, &str, &str) = (
            StatusCode::REQUEST_TIMEOUT,
            "timeout",
            "the body did not arrive in time\n",
        );
        let declared = headers
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
            return Err(TOO_LARGE);
        }
        let deadline = tokio::time::Instant::now() + self.read_timeout;
        let Ok(Ok(_slot)) = tokio::time::timeout_at(deadline, self.bodies.acquire()).await else {
            return Err(TOO_SLOW);
        };
        match tokio::time::timeout_at(deadline, axum::body::to_bytes(body, MAX_BODY_BYTES)).await {
            Ok(Ok(bytes)) => Ok(bytes),
            // Over the limit, or the connection broke.
            Ok(Err(_)) => Err(TOO_LARGE),
            Err(_) => Err(TOO_SLOW),
        }
    }

    /// Whether the request is signed with the secret.
    fn is_authentic(&self, provider: Provider, headers: &HeaderMap, body: &[u8]) -> bool {
        let Ok(secret) = self.secret.read() else {
            tracing::warn!("the webhook secret cannot be read: every webhook is refused");
            return false;
        };
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let signature = match provider {
            Provider::GitLab => {
                let Some(token) = header("x-gitlab-token") else {
                    return false;
                };
                return bool::from(token.as_bytes().ct_eq(secret.as_bytes()));
            }
            Provider::GitHub => {
                header("x-hub-signature-256").and_then(|s| s.strip_prefix("sha256="))
            }
            Provider::Gitea => header("x-gitea-signature"),
            Provider::Generic => header("x-signature").and_then(|s| s.strip_prefix("sha256=")),
        };
        let Some(Ok(given)) = signature.map(decode_hex) else {
            return false;
        };
        let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()) else {
            return false;
        };
        mac.update(body);
        // verify_slice compares in constant time.
        mac.verify_slice(&given).is_ok()
    }

    /// Whether `delivery` was seen before (and remembers it).
    fn is_duplicate(&self, delivery: Option<&str>) -> bool {
        let Some(delivery) = delivery else {
            return false;
        };
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.iter().any(|d| d == delivery) {
            return true;
        }
        if seen.len() == REMEMBERED_DELIVERIES {
            seen.pop_front();
        }
        seen.push_back(delivery.to_owned());
        false
    }

    fn is_tracked_branch(&self, body: &[u8]) -> Option<bool> {
        #[derive(serde::Deserialize)]
        struct Push {
            #[serde(rename = "ref")]
            reference: Option<String>,
        }
        let push: Push = serde_json::from_slice(body).ok()?;
        Some(match push.reference {
            Some(reference) => reference == format!("refs/heads/{}", self.branch),
            // A generic sender may not say: a poll is cheap, and it decides.
            None => true,
        })
    }
}

async fn receive(
    State(hooks): State<Arc<Webhooks>>,
    Path(provider): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> (StatusCode, &'static str) {
    let Some(provider) = Provider::parse(&provider) else {
        return (StatusCode::NOT_FOUND, "unknown provider\n");
    };
    let (status, result, message) = match hooks.read_body(&headers, body).await {
        Ok(body) => decide(&hooks, provider, &headers, &body),
        Err(refused) => refused,
    };
    hooks.metrics.count_webhook(provider.name(), result);
    tracing::info!(provider = provider.name(), result, "webhook");
    (status, message)
}

fn decide(
    hooks: &Webhooks,
    provider: Provider,
    headers: &HeaderMap,
    body: &[u8],
) -> (StatusCode, &'static str, &'static str) {
    if !hooks.is_authentic(provider, headers, body) {
        return (
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "bad or missing signature\n",
        );
    }
    if !provider.is_push(headers) {
        return (StatusCode::OK, "ignored", "not a push: nothing to do\n");
    }
    match hooks.is_tracked_branch(body) {
        None => {
            return (
                StatusCode::BAD_REQUEST,
                "malformed",
                "not a JSON push payload\n",
            );
        }
        Some(false) => {
            return (
                StatusCode::OK,
                "ignored",
                "a push to another branch: nothing to do\n",
            );
        }
        Some(true) => {}
    }
    if hooks.is_duplicate(provider.delivery(headers)) {
        return (StatusCode::OK, "duplicate", "delivery seen before\n");
    }
    hooks.trigger.request();
    (StatusCode::ACCEPTED, "triggered", "polling now\n")
}

fn decode_hex(text: &str) -> Result<Vec<u8>, ()> {
    if !text.len().is_multiple_of(2) {
        return Err(());
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2).ok_or(())?, 16).map_err(|_| ()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_decodes_and_rejects_garbage() {
        assert_eq!(decode_hex("00ff10"), Ok(vec![0, 255, 16]));
        assert!(decode_hex("0g").is_err());
        assert!(decode_hex("abc").is_err());
    }
}
