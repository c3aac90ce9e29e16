//! A registry mirror on loopback, as a test runs one: it answers the OCI distribution API's
//! manifest request (`GET /v2/<name>/manifests/<reference>`) to a client presenting its user
//! and password as HTTP Basic (401 with a `WWW-Authenticate` challenge otherwise), and records
//! every request it was sent, with the user it presented and whether its password was right.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;

/// One request the mirror was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorRequest {
    /// The path (`/v2/library/busybox/manifests/1.36`).
    pub path: String,
    /// The query, if any (containerd names the registry it mirrors: `ns=docker.io`).
    pub query: Option<String>,
    /// The user of its `Authorization: Basic`, if it had one.
    pub user: Option<String>,
    /// Whether the user and password were the mirror's.
    pub authorized: bool,
    /// What the mirror answered.
    pub status: u16,
}

#[derive(Debug)]
struct Shared {
    user: String,
    password: String,
    requests: Mutex<Vec<MirrorRequest>>,
}

/// How a mirror serves.
#[derive(Debug)]
enum Serving {
    /// Plain HTTP.
    Plain(tokio::task::JoinHandle<()>),
    /// HTTPS, with a certificate of its own CA (PEM).
    Tls(capstan_lab::serve::HttpsServer, String),
}

/// A running mirror; dropping it stops it.
#[derive(Debug)]
pub struct Mirror {
    address: SocketAddr,
    shared: Arc<Shared>,
    serving: Serving,
}

impl Drop for Mirror {
    fn drop(&mut self) {
        match &self.serving {
            Serving::Plain(task) => task.abort(),
            Serving::Tls(server, _) => server.stop(),
        }
    }
}

/// The manifest every image of the mirror has (an OCI image index with no manifests).
const MANIFEST: &str =
    r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;

impl Mirror {
    fn shared(user: &str, password: &str) -> Arc<Shared> {
        Arc::new(Shared {
            user: user.to_owned(),
            password: password.to_owned(),
            requests: Mutex::new(Vec::new()),
        })
    }

    /// Serves a mirror over plain HTTP on a loopback port that lets `user` with `password`
    /// pull.
    pub async fn start(user: &str, password: &str) -> Mirror {
        let shared = Mirror::shared(user, password);
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let address = listener.local_addr().expect("its address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Mirror {
            address,
            shared,
            serving: Serving::Plain(task),
        }
    }

    /// [`Mirror::start`] over HTTPS, with a certificate for `127.0.0.1` signed by a CA of its
    /// own ([`Mirror::ca_pem`]).
    pub async fn start_tls(user: &str, password: &str) -> Mirror {
        use capstan_lab::tls::CertificateAuthority;
        let shared = Mirror::shared(user, password);
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&shared));
        let not_after = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24);
        let ca = CertificateAuthority::new("mirror CA", not_after).expect("a CA");
        let loopback: std::net::IpAddr = [127, 0, 0, 1].into();
        let identity = ca
            .issue_server("mirror", &[], &[loopback], not_after)
            .expect("a serving certificate");
        let server = capstan_lab::serve::HttpsServer::start(
            SocketAddr::new(loopback, 0),
            &identity,
            None,
            app,
        )
        .await
        .expect("serves HTTPS");
        Mirror {
            address: server.local_addr(),
            shared,
            serving: Serving::Tls(server, ca.identity().cert_pem.clone()),
        }
    }

    /// The PEM certificate of the CA that signed an HTTPS mirror's certificate.
    pub fn ca_pem(&self) -> Option<&str> {
        match &self.serving {
            Serving::Plain(_) => None,
            Serving::Tls(_, pem) => Some(pem),
        }
    }

    /// `127.0.0.1:PORT`: the host runtimes key its credentials by.
    pub fn host(&self) -> String {
        self.address.to_string()
    }

    /// `http://127.0.0.1:PORT`, or `https://` for a mirror over TLS.
    pub fn url(&self) -> String {
        let scheme = match self.serving {
            Serving::Plain(_) => "http",
            Serving::Tls(..) => "https",
        };
        format!("{scheme}://{}", self.address)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<MirrorRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// `(user, password)` of an `Authorization: Basic` header.
fn basic(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let pair = String::from_utf8(decoded).ok()?;
    let (user, password) = pair.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

async fn answer(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let query = request.uri().query().map(str::to_owned);
    let credentials = basic(request.headers());
    let authorized = credentials
        .as_ref()
        .is_some_and(|(user, password)| *user == shared.user && *password == shared.password);
    let is_manifest = request.method() == axum::http::Method::GET
        && path.starts_with("/v2/")
        && path.contains("/manifests/");
    let status = match (is_manifest, authorized) {
        (false, _) => StatusCode::NOT_FOUND,
        (true, false) => StatusCode::UNAUTHORIZED,
        (true, true) => StatusCode::OK,
    };
    shared
        .requests
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(MirrorRequest {
            path,
            query,
            user: credentials.map(|(user, _)| user),
            authorized,
            status: status.as_u16(),
        });
    match status {
        StatusCode::OK => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/vnd.oci.image.index.v1+json"),
            )],
            MANIFEST,
        )
            .into_response(),
        StatusCode::UNAUTHORIZED => (
            status,
            [(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"mirror\""),
            )],
        )
            .into_response(),
        other => other.into_response(),
    }
}
