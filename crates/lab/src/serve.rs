//! Serves an axum router over HTTPS on loopback, as every simulated server of the lab does (the
//! simulated forge also over plain HTTP: [`HttpServer`]).
//!
//! A server can ask for client certificates signed by a given CA (Kubernetes API servers
//! authenticate users that way): the verified certificate's subject reaches every handler as a
//! [`ClientCertificate`] request extension. Clients without a certificate are still served, so
//! the handler can answer 401 as a real API server does.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt as _;

use super::tls::Identity;

/// Starting a server failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The certificate or the client CA was refused by rustls.
    #[error("invalid TLS configuration")]
    Tls(#[source] rustls::Error),
    /// The client CA could not be turned into a verifier.
    #[error("invalid client CA")]
    ClientCa(#[source] rustls::server::VerifierBuilderError),
    /// A server was started outside a Tokio runtime (it has nowhere to run).
    #[error("cannot start a server outside a Tokio runtime")]
    NoRuntime(#[source] tokio::runtime::TryCurrentError),
}

/// The client certificate a connection presented, verified against the server's client CA.
/// `None` when the client sent none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCertificate(pub Option<CertificateSubject>);

/// Who a client certificate names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateSubject {
    /// Common name (Kubernetes: the user name).
    pub common_name: String,
    /// Organizations (Kubernetes: the groups).
    pub organizations: Vec<String>,
    /// End of validity, Unix seconds: the TLS layer checks it against the machine's clock,
    /// the simulated API server against the lab's (an expired certificate gets 401).
    pub not_after: i64,
}

/// A running HTTPS server. Dropping it stops accepting connections and aborts open ones.
#[derive(Debug)]
pub struct HttpsServer {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
}

impl HttpsServer {
    /// Binds `addr` (port 0 picks a free port) and serves `router` with `identity`. With
    /// `client_ca`, clients may authenticate with certificates that CA signed.
    ///
    /// # Errors
    /// When the address cannot be bound or the TLS material is refused.
    pub async fn start(
        addr: SocketAddr,
        identity: &Identity,
        client_ca: Option<&Identity>,
        router: Router,
    ) -> Result<Self, ServeError> {
        HttpsServer::start_now(addr, identity, client_ca, router)
    }

    /// [`HttpsServer::start`] for synchronous code that runs inside a Tokio runtime (the lab's
    /// node software creates API servers while it holds a lock): binding a loopback address
    /// does not wait, and the accept loop is spawned on the current runtime.
    ///
    /// # Errors
    /// When called outside a Tokio runtime, the address cannot be bound or the TLS material is
    /// refused.
    pub fn start_now(
        addr: SocketAddr,
        identity: &Identity,
        client_ca: Option<&Identity>,
        router: Router,
    ) -> Result<Self, ServeError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(ServeError::NoRuntime)?;
        let config = server_config(identity, client_ca)?;
        let bind = |source| ServeError::Bind { addr, source };
        let listener = std::net::TcpListener::bind(addr).map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let addr = listener.local_addr().map_err(bind)?;
        let listener = {
            // `from_std` registers the socket with the runtime's reactor.
            let _entered = runtime.enter();
            TcpListener::from_std(listener).map_err(|source| ServeError::Bind { addr, source })?
        };
        let (stop, stopped) = watch::channel(false);
        runtime.spawn(accept_loop(
            listener,
            tokio_rustls::TlsAcceptor::from(config),
            router,
            stopped,
        ));
        Ok(HttpsServer { addr, stop })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Stops accepting connections and closes the open ones.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A running plain-HTTP server on loopback (the simulated forge speaks HTTP as well as HTTPS,
/// as a Gitea behind no proxy does). Dropping it stops accepting connections.
#[derive(Debug)]
pub struct HttpServer {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
}

impl HttpServer {
    /// Binds `addr` (port 0 picks a free port) and serves `router` over plain HTTP.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn start(addr: SocketAddr, router: Router) -> Result<Self, ServeError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
        let (stop, mut stopped) = watch::channel(false);
        tokio::spawn(async move {
            let serving = axum::serve(listener, router).with_graceful_shutdown(async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            });
            if let Err(err) = serving.await {
                tracing::debug!(error = %err, "the HTTP server stopped");
            }
        });
        Ok(HttpServer { addr, stop })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

fn server_config(
    identity: &Identity,
    client_ca: Option<&Identity>,
) -> Result<Arc<rustls::ServerConfig>, ServeError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(ServeError::Tls)?;
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from(ca.cert_der.clone()))
                .map_err(ServeError::Tls)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(ServeError::ClientCa)?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let chain = vec![CertificateDer::from(identity.cert_der.clone())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity.key_der.clone()));
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(ServeError::Tls)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    router: Router,
    mut stopped: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    connections.spawn(serve_connection(tcp, acceptor.clone(), router.clone()));
                }
                Err(err) => tracing::debug!(error = %err, "accept failed"),
            },
        }
    }
    connections.abort_all();
}

async fn serve_connection(
    tcp: tokio::net::TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    router: Router,
) {
    let tls = match acceptor.accept(tcp).await {
        Ok(tls) => tls,
        Err(err) => {
            tracing::debug!(error = %err, "tls handshake failed");
            return;
        }
    };
    let client = ClientCertificate(
        tls.get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|cert| subject_of(cert)),
    );
    let service = router.map_request(
        move |mut request: axum::extract::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(client.clone());
            request
        },
    );
    let result = auto::Builder::new(TokioExecutor::new())
        .serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(service))
        .await;
    if let Err(err) = result {
        tracing::debug!(error = %err, "connection ended with an error");
    }
}

fn subject_of(cert: &CertificateDer<'_>) -> Option<CertificateSubject> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let subject = parsed.subject();
    let text =
        |attr: &x509_parser::x509::AttributeTypeAndValue<'_>| attr.as_str().ok().map(str::to_owned);
    Some(CertificateSubject {
        common_name: subject.iter_common_name().next().and_then(text)?,
        organizations: subject.iter_organization().filter_map(text).collect(),
        not_after: parsed.validity().not_after.timestamp(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::{CertificateAuthority, Identity};
    use axum::routing::get;
    use rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn in_a_year() -> jiff::Timestamp {
        jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * 365)
    }

    async fn get_whoami(server: &HttpsServer, ca: &Identity, client: Option<&Identity>) -> String {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(ca.cert_der.clone()))
            .expect("root");
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots);
        let config = match client {
            Some(id) => builder
                .with_client_auth_cert(
                    vec![CertificateDer::from(id.cert_der.clone())],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(id.key_der.clone())),
                )
                .expect("client cert"),
            None => builder.with_no_client_auth(),
        };
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(server.local_addr())
            .await
            .expect("connect");
        let name = ServerName::try_from("localhost").expect("name");
        let mut tls = connector.connect(name, tcp).await.expect("handshake");
        tls.write_all(b"GET /whoami HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut response = String::new();
        tls.read_to_string(&mut response).await.expect("read");
        response
            .rsplit("\r\n\r\n")
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    #[tokio::test]
    async fn handlers_see_who_the_client_certificate_names() {
        let ca = CertificateAuthority::new("kubernetes", in_a_year()).expect("ca");
        let serving = ca
            .issue_server("apiserver", &["localhost".into()], &[], in_a_year())
            .expect("serving");
        let admin = ca
            .issue_client("kubernetes-admin", &["system:masters"], in_a_year())
            .expect("client");
        let router = Router::new().route(
            "/whoami",
            get(
                |axum::Extension(ClientCertificate(subject)): axum::Extension<
                    ClientCertificate,
                >| async move {
                    subject
                        .map(|s| format!("{} {:?}", s.common_name, s.organizations))
                        .unwrap_or_else(|| "anonymous".into())
                },
            ),
        );
        let server = HttpsServer::start(
            "127.0.0.1:0".parse().expect("addr"),
            &serving,
            Some(ca.identity()),
            router,
        )
        .await
        .expect("start");
        assert_eq!(
            get_whoami(&server, ca.identity(), Some(&admin)).await,
            "kubernetes-admin [\"system:masters\"]"
        );
        assert_eq!(get_whoami(&server, ca.identity(), None).await, "anonymous");
    }
}
