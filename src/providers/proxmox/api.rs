//! The HTTP layer of the Proxmox client: one request in, the `data` of the `{"data": ...}`
//! envelope out, Proxmox's error answers turned into [`ProxmoxError`], transient failures
//! retried with capped exponential backoff and jitter.
//!
//! Parameters travel as Proxmox takes them: in the query string for GET and DELETE, form
//! encoded in the body for POST and PUT (a repeated key is an array, as `agent/exec`'s
//! `command` needs).
//!
//! # Invariants
//! - The `Authorization` header is marked sensitive and appears in no error or log.
//! - No redirect is followed (the token would go with it), and no answer is read past
//!   [`BODY_LIMIT`].
//! - A request is retried only while its error `is_transient()` and the policy allows.

use std::collections::BTreeMap;
use std::sync::PoisonError;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::connection::{ConnectionConfig, MismatchSlot, Trust, tls_config};
use super::error::{ProxmoxError, RetryPolicy, backoff_delay, hint_for};
use crate::backoff::random_unit;

/// The largest answer read from Proxmox. The largest legitimate ones are `/cluster/resources`
/// of a big cluster (under 1 KiB per VM) and a guest command's output, which QEMU's guest
/// agent caps at 16 MiB; past this a server is broken or hostile, and is refused.
pub(crate) const BODY_LIMIT: usize = 32 << 20;

/// HTTP method of an API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Post,
    Put,
    Delete,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }
}

/// Which failures one call retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Every transient failure.
    Transient,
    /// Transient failures except "the guest agent is not answering" (the caller polls).
    TransientExceptAgent,
}

/// Form or query parameters, in order (keys may repeat).
pub(crate) type Params = Vec<(String, String)>;

/// The low-level API client.
#[derive(Debug, Clone)]
pub(crate) struct Api {
    http: reqwest::Client,
    api_url: String,
    authorization: HeaderValue,
    retry: RetryPolicy,
    pinned: Option<(String, MismatchSlot)>,
}

impl Api {
    pub(crate) fn new(
        config: &ConnectionConfig,
        retry: RetryPolicy,
        request_timeout: Duration,
    ) -> Result<Self, ProxmoxError> {
        let (tls, slot) = tls_config(&config.trust)?;
        let http = crate::http_client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(request_timeout)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|source| ProxmoxError::BuildClient { source })?;
        let mut authorization = HeaderValue::from_str(&config.authorization()).map_err(|_| {
            ProxmoxError::Configure {
                reason: "the token id or secret holds characters an HTTP header cannot carry"
                    .into(),
            }
        })?;
        authorization.set_sensitive(true);
        let pinned = match (&config.trust, slot) {
            (Trust::Fingerprint(expected), Some(slot)) => Some((expected.clone(), slot)),
            _ => None,
        };
        Ok(Api {
            http,
            api_url: config.api_url.clone(),
            authorization,
            retry,
            pinned,
        })
    }

    /// Calls the API and decodes `data` as `T`, retrying transient failures.
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        params: &Params,
        retry: Retry,
    ) -> Result<T, ProxmoxError> {
        let data = self.call_value(method, path, params, retry).await?;
        serde_json::from_value(data).map_err(|err| ProxmoxError::Decode {
            method: method.as_str(),
            path: path.into(),
            reason: err.to_string(),
        })
    }

    /// Calls the API and returns `data` as JSON, retrying transient failures.
    pub(crate) async fn call_value(
        &self,
        method: Method,
        path: &str,
        params: &Params,
        retry: Retry,
    ) -> Result<Value, ProxmoxError> {
        self.retrying(method, path, retry, || {
            let url = format!("{}{}", self.api_url, path);
            let request = match method {
                Method::Get => self.http.get(&url).query(params),
                Method::Delete => self.http.delete(&url).query(params),
                Method::Post => self.http.post(&url).form(params),
                Method::Put => self.http.put(&url).form(params),
            };
            self.send(method, path, request)
        })
        .await
    }

    /// POSTs a file as `multipart/form-data` the way Proxmox takes uploads (the fields, then
    /// the file as the part named `filename`), with its length known up front (Proxmox refuses
    /// chunked bodies); returns `data`, retrying transient failures.
    pub(crate) async fn upload_value(
        &self,
        path: &str,
        fields: &Params,
        file_name: &str,
        bytes: &[u8],
    ) -> Result<Value, ProxmoxError> {
        self.retrying(Method::Post, path, Retry::Transient, || {
            let mut form = reqwest::multipart::Form::new();
            for (key, value) in fields {
                form = form.text(key.clone(), value.clone());
            }
            let file =
                reqwest::multipart::Part::bytes(bytes.to_vec()).file_name(file_name.to_owned());
            let file = file
                .mime_str("application/octet-stream")
                .expect("a constant, valid MIME type");
            let request = self
                .http
                .post(format!("{}{}", self.api_url, path))
                .multipart(form.part("filename", file));
            self.send(Method::Post, path, request)
        })
        .await
    }

    /// Runs `attempt` until it succeeds, fails for good, or the retry policy is spent.
    async fn retrying<F, Fut>(
        &self,
        method: Method,
        path: &str,
        retry: Retry,
        attempt_once: F,
    ) -> Result<Value, ProxmoxError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<Value, ProxmoxError>>,
    {
        let mut attempt = 0;
        loop {
            match attempt_once().await {
                Ok(data) => return Ok(data),
                Err(err) => {
                    let retryable = err.is_transient()
                        && !(retry == Retry::TransientExceptAgent && err.is_agent_unavailable());
                    attempt += 1;
                    if !retryable || attempt >= self.retry.attempts.max(1) {
                        return Err(err);
                    }
                    let delay = backoff_delay(&self.retry, attempt - 1, random_unit());
                    tracing::debug!(
                        method = method.as_str(),
                        path,
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        error = %err,
                        "proxmox call failed, retrying"
                    );
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// Sends one request and reads its `data`.
    async fn send(
        &self,
        method: Method,
        path: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, ProxmoxError> {
        let response = request
            .header(AUTHORIZATION, self.authorization.clone())
            .send()
            .await
            .map_err(|source| self.transport_error(method, path, source))?;
        let status = response.status();
        let reason = response
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|phrase| String::from_utf8_lossy(phrase.as_bytes()).into_owned())
            .or_else(|| status.canonical_reason().map(str::to_owned))
            .unwrap_or_default();
        let body = crate::http_client::read_body(response, BODY_LIMIT)
            .await
            .map_err(|err| match err {
                crate::http_client::BodyError::Read(source) => {
                    self.transport_error(method, path, source)
                }
                too_large @ crate::http_client::BodyError::TooLarge { .. } => {
                    ProxmoxError::TooLarge {
                        method: method.as_str(),
                        path: path.into(),
                        source: too_large,
                    }
                }
            })?;
        if status.is_success() {
            let envelope: Value =
                serde_json::from_slice(&body).map_err(|err| ProxmoxError::Decode {
                    method: method.as_str(),
                    path: path.into(),
                    reason: format!("not JSON: {err}"),
                })?;
            return match envelope {
                Value::Object(mut map) => Ok(map.remove("data").unwrap_or(Value::Null)),
                _ => Err(ProxmoxError::Decode {
                    method: method.as_str(),
                    path: path.into(),
                    reason: "no {\"data\": ...} envelope".into(),
                }),
            };
        }
        Err(api_error(method, path, status.as_u16(), &reason, &body))
    }

    fn transport_error(&self, method: Method, path: &str, source: reqwest::Error) -> ProxmoxError {
        if let Some((expected, slot)) = &self.pinned {
            let found = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
            if let Some(found) = found {
                return ProxmoxError::FingerprintMismatch {
                    url: self.api_url.clone(),
                    expected: expected.clone(),
                    found,
                };
            }
        }
        if mentions_certificate(&source) {
            return ProxmoxError::UntrustedCertificate {
                url: self.api_url.clone(),
                source,
            };
        }
        ProxmoxError::Transport {
            method: method.as_str(),
            path: path.into(),
            source,
        }
    }
}

/// Whether a transport error is a refused server certificate (rustls' "invalid peer
/// certificate"), which retrying cannot fix.
fn mentions_certificate(error: &reqwest::Error) -> bool {
    let mut cause: Option<&dyn std::error::Error> = Some(error);
    while let Some(current) = cause {
        if current.to_string().contains("invalid peer certificate") {
            return true;
        }
        cause = current.source();
    }
    false
}

/// Builds the error for a non-2xx answer: the body's `message` (PVE ≥ 8.4 sends one) or the
/// reason phrase, with a 400's per-parameter `errors` folded into the text.
fn api_error(method: Method, path: &str, status: u16, reason: &str, body: &[u8]) -> ProxmoxError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|value| value.get("message"))
        .and_then(Value::as_str)
        .map(|text| text.trim_end().to_owned())
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| reason.trim().to_owned());
    let errors: BTreeMap<String, String> = parsed
        .as_ref()
        .and_then(|value| value.get("errors"))
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .map(|(key, value)| {
                    let text = value
                        .as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| value.to_string());
                    (key.clone(), text.trim_end().to_owned())
                })
                .collect()
        })
        .unwrap_or_default();
    let mut full = if status == 401 && message.is_empty() {
        "authentication failure".to_owned()
    } else {
        message
    };
    if !errors.is_empty() {
        let detail: Vec<String> = errors.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        full = format!("{full} ({})", detail.join("; "));
    }
    ProxmoxError::Api {
        method: method.as_str(),
        path: path.into(),
        status,
        hint: hint_for(status, &full),
        message: full,
        errors,
    }
}

/// Percent-encodes a path segment (UPIDs hold `:` and `!`, which are fine, and `@`).
pub(crate) fn segment(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_errors_are_folded_into_the_message() {
        let body = br#"{"data":null,"message":"Parameter verification failed.\n","errors":{"vmid":"invalid format - value does not look like a valid VM ID\n"}}"#;
        let err = api_error(
            Method::Post,
            "/x",
            400,
            "Parameter verification failed.",
            body,
        );
        let text = err.to_string();
        assert!(text.contains("vmid: invalid format"), "{text}");
        assert!(!err.is_transient());
    }

    #[test]
    fn the_reason_phrase_is_used_when_the_body_is_empty() {
        let err = api_error(Method::Get, "/x", 500, "VM is locked (clone)", b"");
        assert!(err.to_string().contains("VM is locked (clone)"));
        assert!(err.is_transient());
        let err = api_error(Method::Get, "/x", 401, "", b"");
        assert!(err.to_string().contains("authentication failure"), "{err}");
    }

    /// A Proxmox that misbehaves: HTTPS on loopback with a self-signed certificate the client
    /// pins, serving `router`.
    async fn hostile(router: axum::Router) -> (capstan_lab::serve::HttpsServer, Api) {
        let identity = capstan_lab::tls::self_signed_server(
            "pve1",
            &["localhost".to_owned()],
            &[std::net::IpAddr::from([127, 0, 0, 1])],
            jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24),
        )
        .expect("certificate");
        let server = capstan_lab::serve::HttpsServer::start(
            "127.0.0.1:0".parse().expect("address"),
            &identity,
            None,
            router,
        )
        .await
        .expect("server");
        let config = ConnectionConfig::new(
            &server.url(),
            "capstan@pve!test",
            super::super::TokenSecret::new("5ecre7-70ken"),
            Trust::Fingerprint(identity.fingerprint()),
        )
        .expect("config");
        let retry = RetryPolicy {
            attempts: 1,
            ..RetryPolicy::default()
        };
        let api = Api::new(&config, retry, Duration::from_secs(60)).expect("client");
        (server, api)
    }

    /// `/cluster/resources`, which the test's server must make fail.
    async fn refused_resources(api: &Api) -> ProxmoxError {
        api.call_value(
            Method::Get,
            "/cluster/resources",
            &Vec::new(),
            Retry::Transient,
        )
        .await
        .expect_err("refused")
    }

    #[tokio::test]
    async fn a_redirect_is_not_followed_and_the_token_goes_nowhere_else() {
        use axum::http::{HeaderMap, StatusCode, header};
        use std::sync::{Arc, Mutex};

        let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
        let record = Arc::clone(&seen);
        let elsewhere = axum::Router::new().fallback(move |headers: HeaderMap| {
            let token = headers
                .get(header::AUTHORIZATION)
                .map(|v| v.to_str().unwrap_or_default().to_owned());
            record.lock().expect("seen").push(token);
            async { "{\"data\": []}" }
        });
        let (other, _) = hostile(elsewhere).await;
        // The same address under another name: another host, as far as HTTP is concerned.
        let location = format!(
            "https://localhost:{}/api2/json/cluster/resources",
            other.local_addr().port()
        );
        let redirecting = axum::Router::new().fallback(move || {
            let location = location.clone();
            async move { (StatusCode::FOUND, [(header::LOCATION, location)], "") }
        });
        let (_server, api) = hostile(redirecting).await;
        let err = refused_resources(&api).await;
        assert!(
            seen.lock().expect("seen").is_empty(),
            "the redirect was followed: {:?}",
            seen.lock().expect("seen")
        );
        let text = crate::errors::error_chain(&err);
        assert!(
            text.contains("302") && text.contains("follows no redirect"),
            "{text}"
        );
        assert!(!text.contains("5ecre7"), "{text}");
    }

    #[tokio::test]
    async fn an_endless_answer_is_refused_at_the_body_limit() {
        let (_server, api) = hostile(crate::http_client::endless_answers()).await;
        let err = refused_resources(&api).await;
        assert!(
            matches!(&err, ProxmoxError::TooLarge { path, .. } if path == "/cluster/resources"),
            "{err:?}"
        );
        assert_eq!(
            crate::errors::error_chain(&err),
            "GET /cluster/resources: refused Proxmox's answer: the answer is larger than 32 MiB"
        );
    }

    #[test]
    fn path_segments_are_escaped() {
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }
}
