//! One Talos node's Talos API (apid): gRPC over mutual TLS on a loopback port, as Talos
//! serves it on TCP 50000. The TLS layer accepts only client certificates chained to the
//! cluster's OS CA (others fail the handshake, as on Talos); a call is then allowed only to a
//! certificate whose Organization carries the `os:admin` role (others get `PermissionDenied`
//! "not authorized", Talos's RBAC answer). The etcd calls go to the cluster's simulated etcd.
//! Calls the lab does not implement answer `Unimplemented`.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use capstan_talos_api::common::Metadata;
use capstan_talos_api::cosi::resource::state_server::StateServer;
use capstan_talos_api::machine::machine_service_server::{MachineService, MachineServiceServer};
use capstan_talos_api::machine::{
    Bootstrap, BootstrapRequest, BootstrapResponse, EtcdForfeitLeadership,
    EtcdForfeitLeadershipRequest, EtcdForfeitLeadershipResponse, EtcdLeaveCluster,
    EtcdLeaveClusterRequest, EtcdLeaveClusterResponse, EtcdMember as ProtoMember,
    EtcdMemberListRequest, EtcdMemberListResponse, EtcdMembers, EtcdRemoveMemberById,
    EtcdRemoveMemberByIdRequest, EtcdRemoveMemberByIdResponse, FeaturesInfo, ImagePull,
    ImagePullRequest, ImagePullResponse, PlatformInfo, Version, VersionInfo, VersionResponse,
};
use rcgen::{CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::Connected;
use tonic::{Request, Response, Status};

use super::etcd::{EtcdCluster, EtcdError};
use super::roles::{PeerRoles, authorize};

/// The largest request the server decodes (Talos's calls here carry a few fields).
const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// How long to wait after a failed accept (no file descriptors) before the next.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// How long a client may take over the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The cluster's OS CA, PEM, as the secrets bundle holds it (an `ED25519 PRIVATE KEY` label
/// is read as the PKCS#8 it wraps).
#[derive(Clone)]
pub struct OsCa {
    /// The CA certificate.
    pub certificate_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl std::fmt::Debug for OsCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OsCa").finish_non_exhaustive()
    }
}

/// What the Talos API of a node tells about it.
#[derive(Debug, Clone)]
pub struct TalosNode {
    /// The node's hostname (its etcd member name).
    pub hostname: String,
    /// The node's address (in its serving certificate and etcd URLs).
    pub address: IpAddr,
    /// The Talos version it runs (`v1.13.9`).
    pub talos_tag: String,
    /// Whether it is a control plane (only those serve the etcd calls).
    pub control_plane: bool,
    /// What its containerd pulls through (its machine config's registry documents).
    pub registries: crate::runtime::RegistryHosts,
    /// The system extensions its image carries (`iscsi-tools`), served as
    /// `ExtensionStatuses` resources.
    pub extensions: Vec<String>,
}

/// Starting a node's Talos API failed.
#[derive(Debug, thiserror::Error)]
pub enum TalosApiError {
    /// The OS CA's certificate or key does not parse.
    #[error("the OS CA's {0} does not parse")]
    OsCa(&'static str),
    /// rcgen refused to issue the serving certificate.
    #[error("cannot issue the Talos API serving certificate for {node}")]
    Issue {
        /// The node.
        node: String,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// rustls refused the certificates.
    #[error("cannot configure TLS for the Talos API of {node}")]
    Tls {
        /// The node.
        node: String,
        /// rustls's error.
        #[source]
        source: rustls::Error,
    },
    /// The listener could not bind.
    #[error("cannot listen for the Talos API of {node}")]
    Bind {
        /// The node.
        node: String,
        /// The system's error.
        #[source]
        source: io::Error,
    },
}

/// Called after a node's Talos API changed its cluster's etcd (a Bootstrap, a member leaving
/// or removed), outside every lock of the API: the lab's Talos machines react to it (the
/// cluster's API server starts, members join, quorum is read again).
pub type EtcdChanged = Arc<dyn Fn() + Send + Sync>;

/// A running Talos API; dropping it stops it.
#[derive(Debug)]
pub struct TalosNodeApi {
    address: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    accept: tokio::task::JoinHandle<()>,
}

impl TalosNodeApi {
    /// Serves `node`'s Talos API on a loopback port with a serving certificate signed by
    /// `os_ca`, its etcd calls answered by `etcd`.
    ///
    /// # Errors
    /// [`TalosApiError`] when the CA does not parse or the port cannot be bound.
    pub async fn start(
        os_ca: &OsCa,
        node: TalosNode,
        etcd: EtcdCluster,
    ) -> Result<Self, TalosApiError> {
        Self::start_now(os_ca, node, etcd, None)
    }

    /// [`TalosNodeApi::start`] for synchronous code inside a Tokio runtime (a Talos VM starts
    /// while the lab's node software holds its lock): binding a loopback port does not wait,
    /// and the server is spawned on the current runtime. `on_change` is called after each
    /// call that changed the etcd.
    ///
    /// # Errors
    /// [`TalosApiError`] when the CA does not parse, the port cannot be bound, or there is no
    /// Tokio runtime.
    pub fn start_now(
        os_ca: &OsCa,
        node: TalosNode,
        etcd: EtcdCluster,
        on_change: Option<EtcdChanged>,
    ) -> Result<Self, TalosApiError> {
        let bind = |source| TalosApiError::Bind {
            node: node.hostname.clone(),
            source,
        };
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| bind(io::Error::other("no Tokio runtime to serve on")))?;
        let config = tls_config(os_ca, &node)?;
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let address = listener.local_addr().map_err(bind)?;
        let listener = {
            // `from_std` registers the socket with the runtime's reactor.
            let _entered = runtime.enter();
            TcpListener::from_std(listener).map_err(bind)?
        };
        let (connections, incoming) = mpsc::channel::<AuthenticatedStream>(16);
        let accept = runtime.spawn(accept_loop(
            listener,
            TlsAcceptor::from(config),
            connections,
        ));
        let incoming = futures_util::stream::unfold(incoming, |mut incoming| async move {
            incoming
                .recv()
                .await
                .map(|stream| (Ok::<_, io::Error>(stream), incoming))
        });
        let resources = StateServer::new(super::resources::ResourceService {
            talos_tag: node.talos_tag.clone(),
            extensions: node.extensions.clone(),
        })
        .max_decoding_message_size(MAX_REQUEST_BYTES);
        let service = MachineServiceServer::new(NodeService {
            node,
            etcd,
            on_change,
        })
        .max_decoding_message_size(MAX_REQUEST_BYTES);
        let (shutdown, stop) = oneshot::channel::<()>();
        runtime.spawn(async move {
            let stop = async {
                let _ = stop.await;
            };
            if let Err(error) = tonic::transport::Server::builder()
                .add_service(service)
                .add_service(resources)
                .serve_with_incoming_shutdown(incoming, stop)
                .await
            {
                tracing::warn!(%error, "lab Talos API stopped");
            }
        });
        Ok(Self {
            address,
            shutdown: Some(shutdown),
            accept,
        })
    }

    /// Where it listens (`127.0.0.1:<port>`), the lab's stand-in for `<node>:50000`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for TalosNodeApi {
    fn drop(&mut self) {
        self.accept.abort();
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// Accepts connections and completes each handshake on a task of its own, so one slow client
/// delays no other; a failed handshake (no certificate, another CA) just closes.
async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    connections: mpsc::Sender<AuthenticatedStream>,
) {
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            // Out of file descriptors and the like: retrying at once would spin.
            Err(_) => {
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let connections = connections.clone();
        tokio::spawn(async move {
            let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
            else {
                return;
            };
            let roles = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(|leaf| organizations(leaf.as_ref()))
                .unwrap_or_default();
            let _ = connections
                .send(AuthenticatedStream {
                    tls,
                    roles: PeerRoles(roles.into()),
                })
                .await;
        });
    }
}

fn organizations(der: &[u8]) -> Vec<String> {
    let Ok((_, certificate)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    certificate
        .subject()
        .iter_organization()
        .filter_map(|attribute| attribute.as_str().ok().map(str::to_owned))
        .collect()
}

/// A TLS connection and the roles its client certificate carries, handed to tonic, which puts
/// the roles in every request's extensions.
struct AuthenticatedStream {
    tls: tokio_rustls::server::TlsStream<TcpStream>,
    roles: PeerRoles,
}

impl Connected for AuthenticatedStream {
    type ConnectInfo = PeerRoles;

    fn connect_info(&self) -> PeerRoles {
        self.roles.clone()
    }
}

impl AsyncRead for AuthenticatedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_read(cx, buf)
    }
}

impl AsyncWrite for AuthenticatedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tls).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tls).poll_shutdown(cx)
    }
}

/// TLS 1.2/1.3 with ALPN `h2` (gRPC), the client verified against the OS CA.
fn tls_config(os_ca: &OsCa, node: &TalosNode) -> Result<Arc<rustls::ServerConfig>, TalosApiError> {
    let tls_error = |source| TalosApiError::Tls {
        node: node.hostname.clone(),
        source,
    };
    let (ca_der, ca_subject) = parse_ca(&os_ca.certificate_pem)?;
    let (chain, key) = serving_certificate(os_ca, ca_subject, node)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_der).map_err(tls_error)?;
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|_| TalosApiError::OsCa("certificate"))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(tls_error)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

fn parse_ca(pem: &str) -> Result<(CertificateDer<'static>, DistinguishedName), TalosApiError> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|_| TalosApiError::OsCa("certificate"))?;
    let certificate = pem
        .parse_x509()
        .map_err(|_| TalosApiError::OsCa("certificate"))?;
    let mut name = DistinguishedName::new();
    for attribute in certificate.subject().iter_attributes() {
        let value = attribute
            .as_str()
            .map_err(|_| TalosApiError::OsCa("certificate"))?
            .to_owned();
        let oid = attribute.attr_type();
        if *oid == x509_parser::oid_registry::OID_X509_ORGANIZATION_NAME {
            name.push(DnType::OrganizationName, value);
        } else if *oid == x509_parser::oid_registry::OID_X509_COMMON_NAME {
            name.push(DnType::CommonName, value);
        }
    }
    Ok((CertificateDer::from(pem.contents.clone()), name))
}

/// The node's serving certificate, signed by the OS CA, naming the node's address and the
/// loopback address the lab serves it on.
fn serving_certificate(
    os_ca: &OsCa,
    ca_subject: DistinguishedName,
    node: &TalosNode,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TalosApiError> {
    let issue = |source| TalosApiError::Issue {
        node: node.hostname.clone(),
        source,
    };
    let ca_key = KeyPair::from_pem(&os_ca.key_pem.replace("ED25519 PRIVATE KEY", "PRIVATE KEY"))
        .map_err(|_| TalosApiError::OsCa("key"))?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = ca_subject;
    ca_params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let issuer = Issuer::new(ca_params, &ca_key);
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, node.hostname.clone());
    params.distinguished_name = name;
    params.subject_alt_names = vec![
        SanType::IpAddress(node.address),
        SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        SanType::DnsName(node.hostname.clone().try_into().map_err(issue)?),
    ];
    // Valid from an hour ago: peers check against the machine's real clock.
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(365);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(issue)?;
    let certificate = params.signed_by(&key, &issuer).map_err(issue)?;
    Ok((
        vec![certificate.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    ))
}

/// The `MachineService` of one node.
struct NodeService {
    node: TalosNode,
    etcd: EtcdCluster,
    on_change: Option<EtcdChanged>,
}

impl NodeService {
    /// Tells the lab the etcd changed.
    fn changed(&self) {
        if let Some(on_change) = &self.on_change {
            on_change();
        }
    }

    fn metadata(&self) -> Option<Metadata> {
        Some(Metadata {
            hostname: self.node.hostname.clone(),
            ..Metadata::default()
        })
    }

    /// Talos's answer to an etcd call on a worker.
    fn control_plane_only(&self, what: &str) -> Result<(), Status> {
        if self.node.control_plane {
            Ok(())
        } else {
            Err(Status::unimplemented(format!(
                "{what} is only available on control plane nodes"
            )))
        }
    }
}

/// An etcd refusal as Talos reports it: plain Go errors surface as `Unknown`, with the
/// wrapping Talos adds.
fn etcd_status(context: &str, error: &EtcdError) -> Status {
    match error {
        EtcdError::AlreadyBootstrapped => Status::already_exists(error.to_string()),
        EtcdError::NoQuorum | EtcdError::NotBootstrapped => {
            Status::unavailable(format!("{context}: {error}"))
        }
        _ => Status::unknown(format!("{context}: {error}")),
    }
}

#[tonic::async_trait]
impl MachineService for NodeService {
    /// Pulls an image into the CRI, through the mirrors and with the credentials of the
    /// machine config's registry documents.
    async fn image_pull(
        &self,
        request: Request<ImagePullRequest>,
    ) -> Result<Response<ImagePullResponse>, Status> {
        use crate::runtime::{self, Image, Runtime};
        authorize(&request)?;
        let reference = request.into_inner().reference;
        let image = Image::parse(&reference).ok_or_else(|| {
            Status::invalid_argument(format!("error parsing image reference: {reference}"))
        })?;
        runtime::pull(&self.node.registries, &image, Runtime::Containerd)
            .await
            .map_err(|why| {
                Status::unknown(format!(
                    "error pulling image {}/{}:{}: {why}",
                    image.registry, image.repository, image.reference
                ))
            })?;
        Ok(Response::new(ImagePullResponse {
            messages: vec![ImagePull {
                metadata: self.metadata(),
            }],
        }))
    }

    async fn version(&self, request: Request<()>) -> Result<Response<VersionResponse>, Status> {
        authorize(&request)?;
        Ok(Response::new(VersionResponse {
            messages: vec![Version {
                metadata: self.metadata(),
                version: Some(VersionInfo {
                    tag: self.node.talos_tag.clone(),
                    sha: String::new(),
                    built: String::new(),
                    go_version: "go1.25".to_owned(),
                    os: "linux".to_owned(),
                    arch: "amd64".to_owned(),
                }),
                platform: Some(PlatformInfo {
                    name: "nocloud".to_owned(),
                    mode: "cloud".to_owned(),
                }),
                features: Some(FeaturesInfo { rbac: true }),
            }],
        }))
    }

    async fn bootstrap(
        &self,
        request: Request<BootstrapRequest>,
    ) -> Result<Response<BootstrapResponse>, Status> {
        authorize(&request)?;
        self.control_plane_only("bootstrap")?;
        self.etcd
            .bootstrap(&self.node.hostname, &self.node.address.to_string())
            .map_err(|error| etcd_status("bootstrap", &error))?;
        self.changed();
        Ok(Response::new(BootstrapResponse {
            messages: vec![Bootstrap {
                metadata: self.metadata(),
            }],
        }))
    }

    async fn etcd_member_list(
        &self,
        request: Request<EtcdMemberListRequest>,
    ) -> Result<Response<EtcdMemberListResponse>, Status> {
        authorize(&request)?;
        self.control_plane_only("member list")?;
        let members = self
            .etcd
            .members()
            .map_err(|error| etcd_status("failed to list etcd members", &error))?;
        Ok(Response::new(EtcdMemberListResponse {
            messages: vec![EtcdMembers {
                metadata: self.metadata(),
                legacy_members: members.iter().map(|m| m.name.clone()).collect(),
                members: members
                    .into_iter()
                    .map(|m| ProtoMember {
                        id: m.id,
                        hostname: m.name,
                        peer_urls: m.peer_urls,
                        client_urls: m.client_urls,
                        is_learner: false,
                    })
                    .collect(),
            }],
        }))
    }

    async fn etcd_forfeit_leadership(
        &self,
        request: Request<EtcdForfeitLeadershipRequest>,
    ) -> Result<Response<EtcdForfeitLeadershipResponse>, Status> {
        authorize(&request)?;
        self.control_plane_only("etcd forfeit leadership")?;
        let leader = self
            .etcd
            .forfeit_leadership(&self.node.hostname)
            .map_err(|error| etcd_status("failed to forfeit leadership", &error))?;
        Ok(Response::new(EtcdForfeitLeadershipResponse {
            messages: vec![EtcdForfeitLeadership {
                metadata: self.metadata(),
                member: leader.unwrap_or_default(),
            }],
        }))
    }

    async fn etcd_leave_cluster(
        &self,
        request: Request<EtcdLeaveClusterRequest>,
    ) -> Result<Response<EtcdLeaveClusterResponse>, Status> {
        authorize(&request)?;
        self.control_plane_only("etcd leave")?;
        self.etcd
            .leave(&self.node.hostname)
            .map_err(|error| etcd_status("failed to validate etcd cluster state", &error))?;
        self.changed();
        Ok(Response::new(EtcdLeaveClusterResponse {
            messages: vec![EtcdLeaveCluster {
                metadata: self.metadata(),
            }],
        }))
    }

    async fn etcd_remove_member_by_id(
        &self,
        request: Request<EtcdRemoveMemberByIdRequest>,
    ) -> Result<Response<EtcdRemoveMemberByIdResponse>, Status> {
        authorize(&request)?;
        self.control_plane_only("etcd remove member")?;
        let id = request.get_ref().member_id;
        self.etcd
            .remove_by_id(id)
            .map_err(|error| etcd_status(&format!("failed to remove member {id}"), &error))?;
        self.changed();
        Ok(Response::new(EtcdRemoveMemberByIdResponse {
            messages: vec![EtcdRemoveMemberById {
                metadata: self.metadata(),
            }],
        }))
    }
}
