//! What every HTTP client of capstan shares, whatever it talks to (Proxmox, a forge, another
//! capstan): no redirect is followed, and no answer is read past a size.
//!
//! # Guarantees
//! - A redirect is returned as the 3xx answer it is, never followed: a client carries a token
//!   (`Authorization`, GitLab's `PRIVATE-TOKEN`) that must reach the host it was configured
//!   for and no other, over the scheme it was configured with.
//! - [`read_body`] stops at its limit, whatever `Content-Length` says or does not say, so a
//!   server streaming without end costs at most the limit in memory.

use reqwest::Url;
use reqwest::redirect::Policy;

/// A URL a token must not be sent to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InsecureUrl {
    /// Plain `http://` to a host other than this machine.
    #[error(
        "{shown} is plain http://, which would carry the token unencrypted: use https:// (plain http is accepted only to a loopback address such as 127.0.0.1)"
    )]
    PlainHttp {
        /// Scheme, host and port (never credentials).
        shown: String,
    },
    /// Not an `http(s)://` URL at all.
    #[error("`{shown}` is not an https:// URL")]
    NotHttp {
        /// What was given, credentials removed.
        shown: String,
    },
}

/// Whether a token may be sent to `url`: over `https://`, or over plain `http://` to a
/// loopback address only (traffic that never leaves the machine: the lab, a port-forward;
/// browsers treat `http://localhost` as a secure context for the same reason).
///
/// # Errors
/// [`InsecureUrl`] for plain `http://` to another host, or a URL that is not `http(s)://`.
pub fn may_carry_token(url: &str) -> Result<(), InsecureUrl> {
    let Ok(parsed) = Url::parse(url) else {
        return Err(InsecureUrl::NotHttp {
            shown: capstan_core::errors::redact_url_passwords(url),
        });
    };
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(&parsed) => Ok(()),
        "http" => Err(InsecureUrl::PlainHttp {
            shown: origin(&parsed),
        }),
        _ => Err(InsecureUrl::NotHttp {
            shown: origin(&parsed),
        }),
    }
}

/// `scheme://host[:port]`, without credentials or path.
fn origin(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

fn is_loopback(url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    match literal.parse::<std::net::IpAddr>() {
        Ok(address) => address.is_loopback(),
        // RFC 6761 reserves the name for the loopback interface.
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

/// Reading an answer's body failed.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The body is larger than the caller accepts.
    #[error("the answer is larger than {} MiB", .limit >> 20)]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The connection failed while the body was read.
    #[error("the answer could not be read to its end")]
    Read(#[source] reqwest::Error),
}

/// A client builder that follows no redirect; every API client starts from it.
pub fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().redirect(Policy::none())
}

/// Reads `response`'s body, refusing it once it passes `limit` bytes (announced or sent).
///
/// # Errors
/// [`BodyError::TooLarge`] past `limit`; [`BodyError::Read`] when the connection fails.
pub async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    let most = u64::try_from(limit).unwrap_or(u64::MAX);
    if response
        .content_length()
        .is_some_and(|announced| announced > most)
    {
        return Err(BodyError::TooLarge { limit });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Read)? {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Fetching a JSON document failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No answer, or an error status.
    #[error("no usable answer")]
    Request(#[source] reqwest::Error),
    /// A token would travel over plain http to another machine: nothing was sent.
    #[error("refusing to send the token")]
    Insecure(#[source] InsecureUrl),
    /// A redirect: never followed.
    #[error(
        "answered {status}, a redirect, which capstan does not follow: give the address that answers itself"
    )]
    Redirect {
        /// The 3xx status.
        status: u16,
    },
    /// The body could not be read whole.
    #[error("cannot read the answer")]
    Body(#[source] BodyError),
    /// The body is not the JSON expected.
    #[error("the answer is not the JSON expected")]
    Decode(#[source] serde_json::Error),
}

/// Sends `request` (of a client from [`builder`]) and reads its JSON answer, at most `limit`
/// bytes of it. A request carrying `Authorization` goes only where [`may_carry_token`] allows.
///
/// # Errors
/// [`FetchError`]: a token for plain http, no answer or an error status (its
/// [`reqwest::Error::status`] says which), a redirect, a body past `limit`, or not the JSON
/// expected.
pub async fn get_json<T: serde::de::DeserializeOwned>(
    request: reqwest::RequestBuilder,
    limit: usize,
) -> Result<T, FetchError> {
    let (client, request) = request.build_split();
    let request = request.map_err(|err| FetchError::Request(err.without_url()))?;
    if request
        .headers()
        .contains_key(reqwest::header::AUTHORIZATION)
    {
        may_carry_token(request.url().as_str()).map_err(FetchError::Insecure)?;
    }
    let response = client
        .execute(request)
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|err| FetchError::Request(err.without_url()))?;
    if response.status().is_redirection() {
        return Err(FetchError::Redirect {
            status: response.status().as_u16(),
        });
    }
    let body = read_body(response, limit).await.map_err(FetchError::Body)?;
    serde_json::from_slice(&body).map_err(FetchError::Decode)
}

/// A server that answers every request with a body that never ends (64 KiB chunks of
/// spaces, without `Content-Length`): what a hostile or broken server may send.
#[cfg(test)]
pub(crate) fn endless_answers() -> axum::Router {
    use futures_util::StreamExt as _;
    axum::Router::new().fallback(|| async {
        let chunk = axum::body::Bytes::from(vec![b' '; 64 << 10]);
        let stream = futures_util::stream::repeat(chunk).map(Ok::<_, std::convert::Infallible>);
        axum::body::Body::from_stream(stream)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_token_for_another_machine_over_plain_http_is_never_sent() {
        // As main does, once per process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = builder().build().expect("client");
        // Nothing listens there: the refusal comes before any connection.
        let request = client
            .get("http://capstan.internal.example:9464/status")
            .bearer_auth("s3cret");
        let err = get_json::<serde_json::Value>(request, 1 << 20)
            .await
            .expect_err("refused");
        assert!(matches!(err, FetchError::Insecure(_)), "{err:?}");
        let chain = crate::errors::error_chain(&err);
        assert!(
            chain.contains("use https://") && !chain.contains("s3cret"),
            "{chain}"
        );
    }

    #[test]
    fn tokens_travel_over_https_or_to_this_machine_only() {
        for allowed in [
            "https://gitlab.example.com/api/v4",
            "http://127.0.0.1:8080/api/v3",
            "http://[::1]:3000/git/fleet.git",
            "http://localhost:9464",
        ] {
            assert_eq!(may_carry_token(allowed), Ok(()), "{allowed}");
        }
        assert_eq!(
            may_carry_token("http://user:pa55@git.example.com:8080/fleet.git"),
            Err(InsecureUrl::PlainHttp {
                shown: "http://git.example.com:8080".to_owned()
            })
        );
        assert!(matches!(
            may_carry_token("http://10.0.0.5/api/v1"),
            Err(InsecureUrl::PlainHttp { .. })
        ));
        assert!(matches!(
            may_carry_token("ftp://forge.example"),
            Err(InsecureUrl::NotHttp { .. })
        ));
        let message = may_carry_token("http://forge.example/api/v4")
            .expect_err("refused")
            .to_string();
        assert!(message.contains("use https://"), "{message}");
    }
}
