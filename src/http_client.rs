//! What every HTTP client of capstan shares, whatever it talks to (Proxmox, a forge, another
//! capstan): no redirect is followed, and no answer is read past a size.
//!
//! # Guarantees
//! - A redirect is returned as the 3xx answer it is, never followed: a client carries a token
//!   (`Authorization`, GitLab's `PRIVATE-TOKEN`) that must reach the host it was configured
//!   for and no other, over the scheme it was configured with.
//! - [`read_body`] stops at its limit, whatever `Content-Length` says or does not say, so a
//!   server streaming without end costs at most the limit in memory.

use reqwest::redirect::Policy;

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
/// bytes of it.
///
/// # Errors
/// [`FetchError`]: no answer or an error status (its [`reqwest::Error::status`] says which), a
/// redirect, a body past `limit`, or not the JSON expected.
pub async fn get_json<T: serde::de::DeserializeOwned>(
    request: reqwest::RequestBuilder,
    limit: usize,
) -> Result<T, FetchError> {
    let response = request
        .send()
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
