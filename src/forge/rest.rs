//! [`ForgeApi`] over GitHub's REST API (`/repos/{owner}/{repo}/...`), which Gitea serves under
//! `/api/v1` with the same paths and payloads, and over GitLab's (`/projects/{id}/...`, in
//! [`gitlab`]): one client, retries and rate limits shared.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{
    ACCEPT, AUTHORIZATION, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER, USER_AGENT,
};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::{CommitStatus, ForgeApi, ForgeError, ForgeKind, IssueComment, PullHead};

mod gitlab;

/// Comments asked for per page (GitHub's and GitLab's maximum).
const PER_PAGE: usize = 100;

/// The most pages a listing reads: 10,000 comments on one pull request, or open pull
/// requests, is more than any real repository has; a forge still paging past that is broken
/// or hostile, and would otherwise keep capstan listing forever.
pub const MAX_PAGES: usize = 100;

/// The largest answer read from a forge: a page of 100 comments of GitHub's 65,536
/// characters is under 7 MB, even JSON-escaped; past this a forge is broken or hostile.
pub const BODY_LIMIT: usize = 32 << 20;

/// How much of an error answer is read for its message.
const ERROR_BODY_LIMIT: usize = 64 << 10;

/// How a [`RestForge`] retries rate-limited and failed calls.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts per call, the first included.
    pub attempts: u32,
    /// The longest wait accepted between attempts; a forge asking for more fails the call.
    pub max_wait: Duration,
    /// The wait after a 5xx or a connection failure, doubled each attempt.
    pub first_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            max_wait: Duration::from_secs(60),
            first_wait: Duration::from_secs(1),
        }
    }
}

/// Where and as whom to talk to the forge.
#[derive(Clone)]
pub struct ForgeTarget {
    /// GitHub, Gitea or GitLab.
    pub kind: ForgeKind,
    /// The API base: `https://api.github.com`, `https://HOST/api/v3`, `https://HOST/api/v1`,
    /// `https://HOST/api/v4`.
    pub api_url: String,
    /// `OWNER/NAME` (GitLab: `GROUP/NAME`, subgroups allowed).
    pub repository: String,
    /// The token (never printed).
    pub token: String,
}

impl std::fmt::Debug for ForgeTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForgeTarget")
            .field("kind", &self.kind)
            .field("api_url", &self.api_url)
            .field("repository", &self.repository)
            .finish_non_exhaustive()
    }
}

/// A forge's REST API, for one repository.
#[derive(Debug, Clone)]
pub struct RestForge {
    http: reqwest::Client,
    repo_url: String,
    kind: ForgeKind,
    retry: RetryPolicy,
}

#[derive(serde::Deserialize)]
struct PullPayload {
    number: u64,
    head: BranchPayload,
    base: BranchPayload,
}

#[derive(serde::Deserialize)]
struct BranchPayload {
    #[serde(rename = "ref")]
    reference: String,
    sha: String,
}

impl From<PullPayload> for PullHead {
    fn from(pull: PullPayload) -> Self {
        PullHead {
            number: pull.number,
            head_sha: pull.head.sha,
            head_ref: pull.head.reference,
            base_ref: pull.base.reference,
        }
    }
}

impl RestForge {
    /// A client for `target`, trusting the system's roots (and `SSL_CERT_FILE`).
    ///
    /// # Errors
    /// When the token cannot be sent in a header, or TLS cannot be set up.
    pub fn new(target: &ForgeTarget, retry: RetryPolicy) -> Result<Self, ForgeError> {
        let (auth_header, auth_value, accept) = match target.kind {
            ForgeKind::Github | ForgeKind::Gitea => (
                AUTHORIZATION,
                format!("token {}", target.token),
                "application/vnd.github+json",
            ),
            ForgeKind::Gitlab => (
                HeaderName::from_static("private-token"),
                target.token.clone(),
                "application/json",
            ),
        };
        let mut authorization =
            HeaderValue::from_str(&auth_value).map_err(|_| ForgeError::Configure {
                reason: "the forge token holds characters an HTTP header cannot carry".into(),
            })?;
        authorization.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert(auth_header, authorization);
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("capstan/", env!("CARGO_PKG_VERSION"))),
        );
        let http = crate::http_client::builder()
            .tls_backend_preconfigured(tls_config()?)
            .default_headers(headers)
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|err| ForgeError::Configure {
                reason: format!("HTTP client: {err}"),
            })?;
        let api_url = target.api_url.trim_end_matches('/');
        let repo_url = match target.kind {
            ForgeKind::Github | ForgeKind::Gitea => {
                format!("{api_url}/repos/{}", target.repository)
            }
            ForgeKind::Gitlab => format!(
                "{api_url}/projects/{}",
                gitlab::project_id(&target.repository)
            ),
        };
        Ok(RestForge {
            http,
            repo_url,
            kind: target.kind,
            retry,
        })
    }

    /// Sends the request `build` makes, retrying rate limits, 5xx and connection failures.
    async fn send(
        &self,
        operation: &str,
        build: impl Fn() -> RequestBuilder,
    ) -> Result<Response, ForgeError> {
        let mut backoff = self.retry.first_wait;
        let mut attempt = 1;
        loop {
            let outcome = build().send().await;
            let last = attempt >= self.retry.attempts;
            let wait = match outcome {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => match rate_limit_wait(&response) {
                    Some(wait) if wait > self.retry.max_wait || last => {
                        return Err(ForgeError::RateLimited {
                            operation: operation.to_owned(),
                            wait_seconds: wait.as_secs(),
                        });
                    }
                    Some(wait) => wait,
                    None if response.status().is_server_error() && !last => backoff,
                    None => return Err(status_error(operation, response).await),
                },
                Err(source)
                    if last
                        || refused_certificate(&source)
                        || !(source.is_connect() || source.is_timeout()) =>
                {
                    return Err(ForgeError::Request {
                        operation: operation.to_owned(),
                        source: source.without_url(),
                    });
                }
                Err(_) => backoff,
            };
            tracing::info!(
                operation,
                attempt,
                wait_ms = wait.as_millis(),
                "forge busy; retrying"
            );
            tokio::time::sleep(wait).await;
            backoff = (backoff * 2).min(self.retry.max_wait);
            attempt += 1;
        }
    }

    async fn json<T: DeserializeOwned>(
        &self,
        operation: &str,
        build: impl Fn() -> RequestBuilder,
    ) -> Result<T, ForgeError> {
        decode(operation, self.send(operation, build).await?).await
    }

    /// A request to `path` under the repository (`/repos/o/r`, GitLab's `/projects/g%2Fr`).
    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.repo_url))
    }

    /// The page size parameters: GitHub's `per_page`, Gitea's `limit`.
    fn page(&self, page: usize) -> Vec<(&'static str, String)> {
        let size = match self.kind {
            ForgeKind::Github | ForgeKind::Gitlab => "per_page",
            ForgeKind::Gitea => "limit",
        };
        vec![(size, PER_PAGE.to_string()), ("page", page.to_string())]
    }
}

/// Reads `response` as `T`, at most [`BODY_LIMIT`] of it.
async fn decode<T: DeserializeOwned>(operation: &str, response: Response) -> Result<T, ForgeError> {
    use crate::http_client::{BodyError, read_body};
    let body = read_body(response, BODY_LIMIT)
        .await
        .map_err(|err| match err {
            BodyError::Read(source) => ForgeError::Request {
                operation: operation.to_owned(),
                source: source.without_url(),
            },
            too_large @ BodyError::TooLarge { .. } => ForgeError::TooLarge {
                operation: operation.to_owned(),
                source: too_large,
            },
        })?;
    serde_json::from_slice(&body).map_err(|source| ForgeError::Decode {
        operation: operation.to_owned(),
        source,
    })
}

/// [`ForgeError::TooManyPages`] once `page` is past [`MAX_PAGES`].
fn page_limit(operation: &str, page: usize) -> Result<(), ForgeError> {
    if page > MAX_PAGES {
        return Err(ForgeError::TooManyPages {
            operation: operation.to_owned(),
            pages: MAX_PAGES,
            per_page: PER_PAGE,
        });
    }
    Ok(())
}

/// How long a 403/429 answer asks to wait: `Retry-After`, else until `X-RateLimit-Reset`
/// (GitLab: `RateLimit-Reset`) when no requests remain. `None` for any other answer (a 403
/// that is not a rate limit is a permission error).
fn rate_limit_wait(response: &Response) -> Option<Duration> {
    let status = response.status();
    if status != StatusCode::TOO_MANY_REQUESTS && status != StatusCode::FORBIDDEN {
        return None;
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<i64>().ok())
    };
    if let Some(seconds) = header(RETRY_AFTER.as_str()) {
        return Some(Duration::from_secs(seconds.max(0).unsigned_abs()));
    }
    let remaining = header("x-ratelimit-remaining").or_else(|| header("ratelimit-remaining"));
    if remaining == Some(0) {
        let reset = header("x-ratelimit-reset").or_else(|| header("ratelimit-reset"))?;
        let wait = reset - jiff::Timestamp::now().as_second();
        return Some(Duration::from_secs(wait.max(1).unsigned_abs()));
    }
    (status == StatusCode::TOO_MANY_REQUESTS).then_some(Duration::from_secs(60))
}

/// Whether the connection failed because the forge's certificate was refused: retrying
/// cannot help.
fn refused_certificate(err: &reqwest::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = cause {
        let io_inner = current
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
        // hyper-util may box the TLS error where no downcast reaches it; rustls's own message
        // names it then.
        if io_inner
            || current.downcast_ref::<rustls::Error>().is_some()
            || current.to_string().contains("invalid peer certificate")
        {
            return true;
        }
        cause = current.source();
    }
    false
}

async fn status_error(operation: &str, response: Response) -> ForgeError {
    /// GitHub's and Gitea's `message` is a string; GitLab's may be an object of field errors
    /// (`{"body": ["is too long"]}`), or the body says `error` instead.
    #[derive(serde::Deserialize)]
    struct Message {
        message: Option<serde_json::Value>,
        error: Option<String>,
    }
    let status = response.status().as_u16();
    if response.status().is_redirection() {
        return ForgeError::Status {
            operation: operation.to_owned(),
            status,
            message: "a redirect, which capstan does not follow (the token would go with it): \
                      set --forge-url to the address the API answers at itself"
                .to_owned(),
        };
    }
    let body = crate::http_client::read_body(response, ERROR_BODY_LIMIT).await;
    let message = match body.map(|body| serde_json::from_slice::<Message>(&body)) {
        Ok(Ok(Message {
            message: Some(serde_json::Value::String(text)),
            ..
        })) => text,
        Ok(Ok(Message {
            message: Some(other),
            ..
        })) => other.to_string(),
        Ok(Ok(Message {
            error: Some(text), ..
        })) => text,
        _ => "no message".to_owned(),
    };
    ForgeError::Status {
        operation: operation.to_owned(),
        status,
        message,
    }
}

/// A TLS client configuration trusting the system roots (`SSL_CERT_FILE` included).
///
/// # Errors
/// When rustls refuses the protocol versions.
pub fn tls_config() -> Result<rustls::ClientConfig, ForgeError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    let (_added, _ignored) = roots.add_parsable_certificates(native.certs);
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| ForgeError::Configure {
            reason: format!("TLS setup: {err}"),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl ForgeApi for RestForge {
    fn kind(&self) -> ForgeKind {
        self.kind
    }

    async fn comments(&self, pr: u64) -> Result<Vec<IssueComment>, ForgeError> {
        if self.kind == ForgeKind::Gitlab {
            return gitlab::notes(self, pr).await;
        }
        let operation = format!("list the comments on #{pr}");
        let mut all = Vec::new();
        for page in 1.. {
            page_limit(&operation, page)?;
            let batch: Vec<IssueComment> = self
                .json(&operation, || {
                    self.request(Method::GET, &format!("/issues/{pr}/comments"))
                        .query(&self.page(page))
                })
                .await?;
            let full = batch.len() >= PER_PAGE;
            all.extend(batch);
            if !full {
                break;
            }
        }
        Ok(all)
    }

    async fn create_comment(&self, pr: u64, body: &str) -> Result<IssueComment, ForgeError> {
        if self.kind == ForgeKind::Gitlab {
            return gitlab::create_note(self, pr, body).await;
        }
        self.json(&format!("comment on #{pr}"), || {
            self.request(Method::POST, &format!("/issues/{pr}/comments"))
                .json(&json!({ "body": body }))
        })
        .await
    }

    async fn edit_comment(&self, pr: u64, id: u64, body: &str) -> Result<(), ForgeError> {
        if self.kind == ForgeKind::Gitlab {
            return gitlab::edit_note(self, pr, id, body).await;
        }
        self.send(&format!("edit comment {id}"), || {
            self.request(Method::PATCH, &format!("/issues/comments/{id}"))
                .json(&json!({ "body": body }))
        })
        .await
        .map(drop)
    }

    async fn set_status(&self, sha: &str, status: &CommitStatus) -> Result<(), ForgeError> {
        if self.kind == ForgeKind::Gitlab {
            return gitlab::set_status(self, sha, status).await;
        }
        self.send(&format!("set the status of {sha}"), || {
            self.request(Method::POST, &format!("/statuses/{sha}"))
                .json(&json!({
                    "state": status.state.as_str(),
                    "description": status.description,
                    "context": status.context,
                }))
        })
        .await
        .map(drop)
    }

    async fn open_pulls(&self) -> Result<Vec<PullHead>, ForgeError> {
        if self.kind == ForgeKind::Gitlab {
            return gitlab::open_merge_requests(self).await;
        }
        let operation = "list the open pull requests";
        let mut all = Vec::new();
        for page in 1.. {
            page_limit(operation, page)?;
            let batch: Vec<PullPayload> = self
                .json(operation, || {
                    self.request(Method::GET, "/pulls")
                        .query(&[("state", "open")])
                        .query(&self.page(page))
                })
                .await?;
            let full = batch.len() >= PER_PAGE;
            all.extend(batch.into_iter().map(PullHead::from));
            if !full {
                break;
            }
        }
        Ok(all)
    }

    async fn pull(&self, pr: u64) -> Result<PullHead, ForgeError> {
        if self.kind == ForgeKind::Gitlab {
            return gitlab::merge_request(self, pr).await;
        }
        self.json::<PullPayload>(&format!("read pull request #{pr}"), || {
            self.request(Method::GET, &format!("/pulls/{pr}"))
        })
        .await
        .map(PullHead::from)
    }
}

#[cfg(test)]
mod tests;
