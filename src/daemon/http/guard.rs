//! What every request to `--http` passes before its route: the `Host` it names, and the
//! headers every answer carries.
//!
//! A daemon without a token on loopback trusts whoever can connect, and a web page the
//! operator opens can connect: through a DNS name that its owner rebinds to 127.0.0.1, the
//! page's script reads the answers as its own origin's. The browser says which name it used
//! in `Host`, so only names the operator gave are answered.
//!
//! # Guarantees
//! - A request whose `Host` is neither loopback (`localhost`, `127.0.0.0/8`, `::1`), an IP
//!   address, nor a name of [`AllowedHosts`] is answered 421 and its connection closed. An IP
//!   address is always answered: a rebinding attack needs a name, and the kubelet's probes
//!   and Prometheus's pod scrapes say `Host: <pod IP>:<port>`. A request without `Host`
//!   (HTTP/1.0) is no browser's and passes.
//! - The webhooks (`/hooks/...`) are exempt: a forge names the ingress host, and each
//!   delivery is authenticated by its signature, which reads nothing back.
//! - Every answer carries `X-Content-Type-Options: nosniff` and
//!   `Content-Security-Policy: default-src 'self'; frame-ancestors 'none'`: a page loads
//!   scripts, styles and images only from this endpoint, runs no inline script or style, and
//!   is never framed (no clickjacking of a page an action may one day live on).

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The policy of every answer: nothing from elsewhere, nothing inline, never in a frame.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; frame-ancestors 'none'";

/// Host names the endpoint answers to besides loopback and IP addresses
/// (`--http-allowed-hosts`), lower case, without a port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts(Arc<[String]>);

impl AllowedHosts {
    /// The names given, trimmed and lower-cased (a port given with one is ignored).
    pub fn new(names: &[String]) -> Self {
        let names: Vec<String> = names
            .iter()
            .map(|name| host_name(name.trim()).to_ascii_lowercase())
            .filter(|name| !name.is_empty())
            .collect();
        AllowedHosts(names.into())
    }

    /// Whether a request whose `Host` header is `host` is answered.
    pub fn allows(&self, host: &str) -> bool {
        let name = host_name(host.trim());
        if name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok() {
            return true;
        }
        let name = name.trim_end_matches('.');
        self.0
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(name))
    }
}

/// The host of a `Host` header value: without its port, an IPv6 address without brackets.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(address, _)| address);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Refuses a request naming a host the endpoint does not answer to (see the module).
pub(super) async fn check_host(
    State(allowed): State<AllowedHosts>,
    request: Request,
    next: Next,
) -> Response {
    if request.uri().path().starts_with("/hooks/") {
        return next.run(request).await;
    }
    let host = request
        .headers()
        .get(header::HOST)
        .map(|value| value.to_str().unwrap_or("(not text)"));
    match host {
        Some(host) if !allowed.allows(host) => misdirected(host),
        _ => next.run(request).await,
    }
}

fn misdirected(host: &str) -> Response {
    let host = crate::redact::cap(host, 128);
    (
        StatusCode::MISDIRECTED_REQUEST,
        [(header::CONNECTION, "close")],
        format!(
            "this endpoint does not answer to the host `{host}`: use its IP address or localhost, or start the daemon with --http-allowed-hosts {host} if that name is yours\n"
        ),
    )
        .into_response()
}

/// Adds the headers every answer carries (see the module).
pub(super) async fn secure_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_ip_addresses_and_the_names_given_are_answered_and_no_other_name() {
        let allowed = AllowedHosts::new(&[
            "Capstan.Example.com".to_owned(),
            "capstan.capstan-system.svc:9464".to_owned(),
        ]);
        for host in [
            "localhost",
            "LOCALHOST:9464",
            "127.0.0.1:9464",
            "127.8.9.10",
            "[::1]:9464",
            "10.42.0.17:9464",
            "[fd00::17]:9464",
            "capstan.example.com",
            "capstan.example.com.:443",
            "capstan.capstan-system.svc:9464",
        ] {
            assert!(allowed.allows(host), "{host}");
        }
        for host in [
            "rebound.attacker.example:9464",
            "localhost.attacker.example",
            "127.0.0.1.nip.io:9464",
            "capstan.example.com.attacker.example",
            "",
        ] {
            assert!(!allowed.allows(host), "{host}");
        }
    }
}
