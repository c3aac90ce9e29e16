//! The daemon's HTTP endpoint: the dashboard (`GET /`, `GET /clusters/NAME`,
//! `GET /previews/NUMBER`, `GET /events`:
//! [`dashboard`]), `GET /status` (every cluster's status as JSON), `GET /observed`
//! (the last observed state, as the snapshot `capstan plan --observed FILE` reads: no secrets;
//! asking for it makes the passes of the next 15 minutes observe pods and PodDisruptionBudgets,
//! for previews' drain simulation: the first request in a while wakes a pass and waits up to
//! 30 s for it), `GET /healthz` (200 while passes complete, 503 when the loop is stuck) and
//! `GET /metrics` (Prometheus text format). Webhooks are served beside them, or on a listener
//! of their own ([`serve_hooks`]) so that only they are exposed through an ingress.
//!
//! # Guarantees
//! - With a token ([`HttpOptions::token`]) or a client CA ([`tls`]), the dashboard's pages and
//!   `/events`, `/status`, `/observed` and `/metrics` answer 401 (`WWW-Authenticate: Bearer`) unless the request carries
//!   `Authorization: Bearer <token>` (compared in constant time) or came over a connection
//!   whose client certificate chains to that CA; `/healthz` stays open for the kubelet.
//! - A request's head must arrive within [`HttpOptions::read_timeout`] (also the most a
//!   keep-alive connection stays idle), or the connection is closed; a webhook's body too
//!   ([`crate::source::webhook`]). A connection is served for at most [`CONNECTION_LIFETIME`],
//!   then closed after the request in progress (a client that never reads its answer
//!   included).
//! - Each listener serves at most [`HttpOptions::max_connections`] connections at once; one
//!   more is answered 503 and closed at once, so memory stays bounded whatever the clients do,
//!   except a health probe: `--http` answers `/healthz` beside the cap ([`limits`]), and holds
//!   at most [`StreamCaps`] `/events` streams, so neither pages nor unfinished requests can
//!   get the pod restarted by its liveness probe.
//! - A request without the token or a client certificate that needs one is answered 401 and
//!   its connection closed: an unauthenticated client holds no connection beyond its answer.
//! - `--http` answers only requests naming loopback, an IP address or a host of
//!   [`AllowedHosts`], and every answer carries a Content-Security-Policy and
//!   `X-Content-Type-Options: nosniff` ([`guard`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use subtle::ConstantTimeEq as _;

use hyper_util::rt::TokioIo;

use super::StatusBoard;
use super::board::Health;
use crate::source::Secret;

/// How long the first `GET /observed` in a while waits for a pass that lists pods and
/// PodDisruptionBudgets before it answers with the last state observed.
const WAIT_FOR_WORKLOADS: Duration = Duration::from_secs(30);

/// The longest a connection is served: past it, the request in progress is finished and the
/// connection closed (Prometheus and `capstan status` simply connect again). It outlasts the
/// slowest request, a `GET /observed` waiting for a pass.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// The largest request head read (request line and headers): a forge's webhook headers are
/// a few KiB.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// What a connection over the cap is told before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: 41\r\n\r\ntoo many connections: try again shortly\r\n";

/// How long a connection over the cap is read (and what it sends dropped) after its 503, so
/// that closing it does not reset the connection before the client has read the answer (a
/// close with unread bytes sends a TCP reset, which discards the 503 on its way).
const BUSY_LINGER: Duration = Duration::from_secs(1);

/// Refused connections lingering at once; past it, one is closed at once (a flood gets its
/// resets, the daemon's file descriptors stay bounded).
const MAX_LINGERING: usize = 64;

/// How the endpoint protects itself.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The bearer token `/status`, `/observed` and `/metrics` require (`None`: open to
    /// anyone who can connect).
    pub token: Option<Secret>,
    /// How long a request's head (and a webhook's body) may take to arrive, and a
    /// keep-alive connection may stay idle.
    pub read_timeout: Duration,
    /// Connections served at once by one listener.
    pub max_connections: usize,
    /// HTTPS instead of HTTP (for `/status`, `/observed`, `/healthz` and `/metrics`; the
    /// webhooks' own listener stays HTTP behind its ingress).
    pub tls: Option<Arc<tls::ServerTls>>,
    /// Whether `tls` asks for client certificates, each one that chains to the client CA
    /// authenticating its connection.
    pub client_certificates: bool,
    /// Host names answered besides loopback and IP addresses.
    pub allowed_hosts: AllowedHosts,
    /// How many `/events` streams are held at once.
    pub event_streams: StreamCaps,
}

/// The default for [`HttpOptions::read_timeout`]: a forge or Prometheus sends a request in
/// milliseconds.
pub const DEFAULT_READ_TIMEOUT: Duration = crate::source::webhook::DEFAULT_READ_TIMEOUT;

/// The default for [`HttpOptions::max_connections`]: Prometheus, probes and a few people
/// need a handful; each may hold a 64 KiB head buffer.
pub const DEFAULT_MAX_CONNECTIONS: usize = 128;

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            token: None,
            read_timeout: DEFAULT_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            tls: None,
            client_certificates: false,
            allowed_hosts: AllowedHosts::default(),
            event_streams: StreamCaps::default(),
        }
    }
}

/// Where the daemon serves HTTP, and how each listener protects itself.
#[derive(Debug, Clone)]
pub struct Listeners {
    /// `/status`, `/observed`, `/healthz` and `/metrics` (and the webhooks, without `hooks`).
    pub http: Option<SocketAddr>,
    /// The webhooks alone (then not on `http`).
    pub hooks: Option<SocketAddr>,
    /// Timeouts, cap, token.
    pub options: HttpOptions,
}

impl Listeners {
    /// Serves `board` and `webhooks` (when the daemon has any), and says where in the log
    /// (`serving /status, ...` and `serving /hooks`, with `address=`): returns the addresses
    /// bound for `http` and for `hooks` (the latter only when webhooks are served there).
    ///
    /// # Errors
    /// When an address cannot be bound.
    pub async fn serve(
        &self,
        board: Arc<StatusBoard>,
        webhooks: Option<Router>,
    ) -> Result<(Option<SocketAddr>, Option<SocketAddr>), HttpError> {
        let (alone, beside) = match self.hooks {
            Some(addr) => (webhooks.map(|hooks| (addr, hooks)), None),
            None => (None, webhooks),
        };
        let hooks = match alone {
            Some((addr, hooks)) => Some(serve_hooks(addr, hooks, &self.options).await?),
            None => None,
        };
        if let Some(address) = hooks {
            tracing::info!(address = %address, "serving /hooks");
        }
        let Some(addr) = self.http else {
            return Ok((None, hooks));
        };
        let also = if beside.is_some() { " and /hooks" } else { "" };
        let http = serve_with(addr, board, beside.unwrap_or_default(), &self.options).await?;
        let (token, tls) = (self.options.token.is_some(), self.options.tls.is_some());
        tracing::info!(address = %http, token, tls, "serving /status, /observed, /healthz, /metrics{also} and the dashboard (/)");
        Ok((Some(http), hooks))
    }
}

/// Serving the endpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// `--http-token-from` cannot be resolved.
    #[error("cannot resolve the HTTP token (--http-token-from)")]
    Token(#[source] crate::source::CredentialError),
    /// `--http-tls-cert`, `--http-tls-key` or `--http-client-ca` cannot be used.
    #[error("cannot serve HTTPS")]
    Tls(#[source] tls::TlsError),
    /// The address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
}

/// Binds `addr` and serves the board, open to anyone, until the runtime stops; returns the
/// bound address.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(addr: SocketAddr, board: Arc<StatusBoard>) -> Result<SocketAddr, HttpError> {
    serve_with(addr, board, Router::new(), &HttpOptions::default()).await
}

/// [`serve`], plus the routes of `extra` (the webhooks), protected as `options` say.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve_with(
    addr: SocketAddr,
    board: Arc<StatusBoard>,
    extra: Router,
    options: &HttpOptions,
) -> Result<SocketAddr, HttpError> {
    let api = Arc::new(Api {
        board,
        token: options.token.clone(),
        client_certificates: options.client_certificates,
        streams: limits::EventStreams::new(options.event_streams),
    });
    let health = guarded(
        Router::new()
            .route("/healthz", get(healthz))
            .fallback(busy)
            .with_state(Arc::clone(&api))
            .layer(axum::middleware::map_response(closing)),
        options,
    );
    let router = Router::new()
        .route("/", get(dashboard::fleet))
        .route("/clusters/{name}", get(dashboard::cluster))
        .route("/previews/{number}", get(dashboard::preview))
        .route("/events", get(dashboard::events))
        .route(crate::dashboard::assets::CSS_PATH, get(dashboard::css))
        .route(crate::dashboard::assets::JS_PATH, get(dashboard::js))
        .route("/status", get(status))
        .route("/observed", get(observed))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/actions/suspend", post(actions::suspend))
        .route("/actions/resume", post(actions::resume))
        .route("/actions/reconcile", post(actions::reconcile))
        .with_state(api)
        .merge(extra);
    listen(addr, guarded(router, options), Some(health), options).await
}

/// `router` behind the [`guard`]: the `Host` check and the headers of every answer.
fn guarded(router: Router, options: &HttpOptions) -> Router {
    router
        .layer(axum::middleware::from_fn_with_state(
            options.allowed_hosts.clone(),
            guard::check_host,
        ))
        .layer(axum::middleware::from_fn(guard::secure_headers))
}

/// What the health lane answers besides `/healthz`.
async fn busy() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "too many connections: try again shortly\n",
    )
        .into_response()
}

/// Closes the connection after the answer (the health lane's, an unauthenticated one's).
async fn closing(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

/// Serves only `hooks` (the webhooks' routes) on `addr`, the one listener to expose through
/// an ingress.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve_hooks(
    addr: SocketAddr,
    hooks: Router,
    options: &HttpOptions,
) -> Result<SocketAddr, HttpError> {
    let plain = HttpOptions {
        tls: None,
        ..options.clone()
    };
    listen(addr, hooks, None, &plain).await
}

/// Binds `addr` and serves `router` on it in a task of its own; `health` (for `--http`)
/// answers probes over the connection cap.
async fn listen(
    addr: SocketAddr,
    router: Router,
    health: Option<Router>,
    options: &HttpOptions,
) -> Result<SocketAddr, HttpError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| HttpError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| HttpError::Bind { addr, source })?;
    tokio::spawn(accept(listener, router, health, options.clone()));
    Ok(bound)
}

/// Where connections over the cap go: the health lane when the listener has one, else a 503.
struct Overflow {
    health: Option<Router>,
    lane: Arc<limits::HealthLane>,
    lingering: Arc<tokio::sync::Semaphore>,
}

/// Accepts connections for ever, each served in a task of its own while a slot is free.
async fn accept(
    listener: tokio::net::TcpListener,
    router: Router,
    health: Option<Router>,
    options: HttpOptions,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(options.max_connections.max(1)));
    let overflow = Overflow {
        health,
        lane: limits::HealthLane::new(),
        lingering: Arc::new(tokio::sync::Semaphore::new(MAX_LINGERING)),
    };
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of file descriptors, most likely: others will close.
                tracing::warn!(error = %err, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            overflow.take(stream, peer.ip(), &options);
            continue;
        };
        let connection = Connection {
            router: router.clone(),
            peer: peer.ip(),
            read_timeout: options.read_timeout,
        };
        let tls = options.tls.as_ref().map(|tls| tls.config());
        tokio::spawn(async move {
            let _slot = slot;
            connection.serve(stream, tls).await;
        });
    }
}

impl Overflow {
    /// A connection over the cap: into the health lane when the listener has one, else
    /// refused.
    fn take(&self, stream: tokio::net::TcpStream, peer: IpAddr, options: &HttpOptions) {
        let Some(health) = &self.health else {
            tracing::debug!("too many connections: one refused");
            return refuse_busy(stream, &self.lingering);
        };
        let connection = Connection {
            router: health.clone(),
            peer,
            read_timeout: limits::HEALTH_LANE_WAIT,
        };
        let Some(tls) = options.tls.as_ref().map(|tls| tls.config()) else {
            if let Some((stream, connection)) = self.look(stream, connection) {
                self.wait_in_lane(stream, connection);
            }
            return;
        };
        // Over TLS the request is known only after the handshake: the lane holds it.
        self.lane.enter(move |place| async move {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls);
            let handshake =
                tokio::time::timeout(limits::HEALTH_LANE_WAIT, acceptor.accept(stream)).await;
            let (Ok(Ok(stream)), Some(_answering)) = (handshake, place.told_apart()) else {
                return;
            };
            connection.serve_io(TokioIo::new(stream), None).await;
        });
    }

    /// Tells a plain-HTTP connection apart by what it has sent already: a probe is answered,
    /// anything else refused, at once; one that has sent nothing yet is handed back.
    fn look(
        &self,
        stream: tokio::net::TcpStream,
        connection: Connection,
    ) -> Option<(tokio::net::TcpStream, Connection)> {
        let (socket, looked) = match limits::look_now(stream) {
            Ok(looked) => looked,
            Err(err) => {
                tracing::debug!(error = %err, "a connection over the cap cannot be looked at");
                return None;
            }
        };
        let answering = match looked {
            limits::Looked::Other => None,
            limits::Looked::Health => self.lane.answering(),
            limits::Looked::NotYet => {
                return tokio::net::TcpStream::from_std(socket)
                    .ok()
                    .map(|stream| (stream, connection));
            }
        };
        let Some(answering) = answering else {
            tracing::debug!("too many connections: one refused");
            refuse_busy_std(socket, &self.lingering);
            return None;
        };
        if let Ok(stream) = tokio::net::TcpStream::from_std(socket) {
            tokio::spawn(async move {
                let _answering = answering;
                connection.serve(stream, None).await;
            });
        }
        None
    }

    /// A plain-HTTP connection over the cap that has sent nothing yet: it waits in the lane.
    fn wait_in_lane(&self, stream: tokio::net::TcpStream, connection: Connection) {
        let lingering = Arc::clone(&self.lingering);
        self.lane.enter(move |place| async move {
            let answering = match limits::asks_for_health(&stream).await {
                true => place.told_apart(),
                false => None,
            };
            let Some(_answering) = answering else {
                tracing::debug!("too many connections: one refused");
                return refuse_busy(stream, &lingering);
            };
            connection.serve(stream, None).await;
        });
    }
}

/// One accepted connection and what serves it.
struct Connection {
    router: Router,
    peer: IpAddr,
    read_timeout: Duration,
}

impl Connection {
    /// Serves the connection, over TLS when `tls` is given.
    async fn serve(self, stream: tokio::net::TcpStream, tls: Option<Arc<rustls::ServerConfig>>) {
        let Some(tls) = tls else {
            return self.serve_io(TokioIo::new(stream), None).await;
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        // The handshake is part of the head: it gets the same time to arrive.
        match tokio::time::timeout(self.read_timeout, acceptor.accept(stream)).await {
            Ok(Ok(stream)) => {
                // rustls hands over only a certificate its verifier accepted.
                let subject = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(<[_]>::first)
                    .map(|certificate| certificate_subject(certificate.as_ref()));
                self.serve_io(TokioIo::new(stream), subject).await;
            }
            Ok(Err(err)) => tracing::debug!(error = %err, "TLS handshake failed"),
            Err(_) => tracing::debug!("TLS handshake timed out"),
        }
    }

    async fn serve_io<I>(self, io: I, certified: Option<Arc<str>>)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        serve_connection(io, self.router, certified, self.peer, self.read_timeout).await;
    }
}

/// Answers a connection over the cap with 503 and closes it, after reading what it sends for
/// [`BUSY_LINGER`] when a lingering slot is free.
fn refuse_busy(stream: tokio::net::TcpStream, lingering: &Arc<tokio::sync::Semaphore>) {
    // A fresh socket's send buffer is empty: this never blocks.
    let _ = stream.try_write(BUSY);
    linger(stream, lingering);
}

/// [`refuse_busy`] for a connection looked at outside tokio (its readiness not known yet).
fn refuse_busy_std(socket: std::net::TcpStream, lingering: &Arc<tokio::sync::Semaphore>) {
    use std::io::Write as _;
    // Non-blocking, and the send buffer is empty: written at once.
    let _ = (&socket).write(BUSY);
    if let Ok(stream) = tokio::net::TcpStream::from_std(socket) {
        linger(stream, lingering);
    }
}

/// Closes a connection answered 503, after reading what it sends for [`BUSY_LINGER`] when a
/// lingering slot is free.
fn linger(stream: tokio::net::TcpStream, lingering: &Arc<tokio::sync::Semaphore>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Ok(permit) = Arc::clone(lingering).try_acquire_owned() else {
        return;
    };
    tokio::spawn(async move {
        let _permit = permit;
        let mut stream = stream;
        // The answer is complete: say so, then drain until the client closes or time is up.
        let _ = stream.shutdown().await;
        let mut sink = [0_u8; 4096];
        let _ = tokio::time::timeout(BUSY_LINGER, async {
            while matches!(stream.read(&mut sink).await, Ok(read) if read > 0) {}
        })
        .await;
    });
}

/// The longest certificate subject kept as who took an action.
const MAX_SUBJECT: usize = 256;

/// A client certificate's subject (`CN=alice, O=ops`), as who took an action.
fn certificate_subject(der: &[u8]) -> Arc<str> {
    let subject = x509_parser::parse_x509_certificate(der)
        .map(|(_, certificate)| certificate.subject().to_string())
        .ok()
        .filter(|subject| !subject.is_empty())
        .unwrap_or_else(|| "a client certificate of --http-client-ca".to_owned());
    crate::redact::cap(&subject, MAX_SUBJECT).into()
}

/// Serves one connection from `peer`: `certified` (its subject) when its client certificate
/// chains to the client CA.
async fn serve_connection<I>(
    io: I,
    router: Router,
    certified: Option<Arc<str>>,
    peer: IpAddr,
    read_timeout: Duration,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    use tower::ServiceExt as _;
    // Extensions, not headers: nothing a client sends can set them.
    let router = router.map_request(move |mut request: axum::http::Request<_>| {
        if let Some(subject) = &certified {
            request
                .extensions_mut()
                .insert(Certified(Arc::clone(subject)));
        }
        request.extensions_mut().insert(Peer(peer));
        request
    });
    let service = hyper_util::service::TowerToHyperService::new(router);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(read_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(err) = result {
                tracing::debug!(error = %err, "connection ended");
            }
        }
        () = tokio::time::sleep(CONNECTION_LIFETIME) => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(read_timeout, connection).await;
        }
    }
}

/// Marks a request that came over a connection with a verified client certificate, with
/// that certificate's subject.
#[derive(Debug, Clone)]
struct Certified(Arc<str>);

/// The address a request's connection came from.
#[derive(Debug, Clone, Copy)]
struct Peer(IpAddr);

/// What the routes share.
struct Api {
    board: Arc<StatusBoard>,
    token: Option<Secret>,
    /// Whether client certificates authenticate (then a request needs one or the token).
    client_certificates: bool,
    /// The `/events` streams open.
    streams: Arc<limits::EventStreams>,
}

/// Who asks: `authenticated` when it presented the token or a client certificate.
struct Caller {
    authenticated: bool,
    /// How: the client certificate's subject, or `None` for the token (or nothing).
    subject: Option<Arc<str>>,
}

impl FromRequestParts<Arc<Api>> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, api: &Arc<Api>) -> Result<Self, Response> {
        if let Some(Certified(subject)) = parts.extensions.get::<Certified>() {
            return Ok(Caller {
                authenticated: true,
                subject: Some(Arc::clone(subject)),
            });
        }
        let Some(token) = &api.token else {
            if api.client_certificates {
                return Err(unauthorized());
            }
            return Ok(Caller {
                authenticated: false,
                subject: None,
            });
        };
        let expected = match token.read() {
            Ok(expected) => expected,
            Err(err) => {
                tracing::warn!(
                    "the HTTP token cannot be read, every request is refused: {}",
                    crate::errors::error_chain(&err)
                );
                return Err(unauthorized());
            }
        };
        let given = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim);
        match given {
            Some(given) if bool::from(given.as_bytes().ct_eq(expected.as_bytes())) => Ok(Caller {
                authenticated: true,
                subject: None,
            }),
            _ => Err(unauthorized()),
        }
    }
}

/// 401, and the connection closed: a client without credentials holds none.
fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::WWW_AUTHENTICATE, "Bearer realm=\"capstan\""),
            (header::CONNECTION, "close"),
        ],
        "authentication is required: Authorization: Bearer <the token of --http-token-from>, or a client certificate of --http-client-ca\n",
    )
        .into_response()
}

async fn status(_caller: Caller, State(api): State<Arc<Api>>) -> impl IntoResponse {
    axum::Json(api.board.status())
}

async fn observed(caller: Caller, State(api): State<Arc<Api>>) -> Response {
    let board = &api.board;
    if let Some(mut observed) = board.ask_for_observed(caller.authenticated) {
        // The first request in a while: wait for the pass it woke, which lists pods and
        // budgets (a preview needs them), but not for ever: after that, the last state.
        let _ = tokio::time::timeout(WAIT_FOR_WORKLOADS, observed.changed()).await;
    }
    match board.observed() {
        Some(observed) => axum::Json(observed.as_ref()).into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "nothing observed yet: no reconcile pass has completed\n",
        )
            .into_response(),
    }
}

async fn healthz(State(api): State<Arc<Api>>) -> Response {
    match api.board.health() {
        Health::Starting => (
            StatusCode::SERVICE_UNAVAILABLE,
            "no reconcile pass has completed yet\n",
        )
            .into_response(),
        Health::Live => (StatusCode::OK, "ok\n").into_response(),
        Health::Stalled { since, ago, limit } => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "stalled: no reconcile pass has completed since {since} ({}s ago; the limit is {}s)\n",
                ago.as_secs(),
                limit.as_secs()
            ),
        )
            .into_response(),
    }
}

async fn metrics(_caller: Caller, State(api): State<Arc<Api>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        render_metrics(&api.board),
    )
}

/// The Prometheus text exposition of the board's metrics.
pub fn render_metrics(board: &StatusBoard) -> String {
    board.metrics().encode()
}

mod actions;
mod dashboard;
pub mod guard;
pub mod limits;
pub mod tls;

pub use actions::{ActionAnswer, ActionRequest};
pub use guard::AllowedHosts;
pub use limits::{DEFAULT_EVENT_STREAMS_PER_CLIENT, StreamCaps};

#[cfg(test)]
mod tests;
