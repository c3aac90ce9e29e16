//! The Talos API of a node (apid, `https://<node>:50000`), through the client generated from
//! Talos's own protos (crates/talos-api), over mutual TLS: the server is trusted only if the
//! cluster's OS CA signed it, and capstan presents an `os:admin` certificate the OS CA signed
//! ([`super::admin_credentials`]). Nothing here is wired into the executor yet.
//!
//! # Guarantees
//! - Bounded: connecting and every call time out; a response larger than
//!   [`MAX_RESPONSE_BYTES`] or listing more than [`MAX_ETCD_MEMBERS`] members is refused; a
//!   node's texts (errors, names, URLs) are cut to [`MAX_NODE_MESSAGE`] characters.
//! - Errors name the call and the node and never carry key material (credentials that do not
//!   parse are reported by which part, not by content).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use capstan_talos_api::common::Metadata;
use capstan_talos_api::cosi::resource::ListRequest;
use capstan_talos_api::cosi::resource::state_client::StateClient;
use capstan_talos_api::machine::machine_service_client::MachineServiceClient;
use capstan_talos_api::machine::{
    BootstrapRequest, EtcdForfeitLeadershipRequest, EtcdLeaveClusterRequest, EtcdMemberListRequest,
    EtcdRemoveMemberByIdRequest,
};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

use super::AdminCredentials;

/// The port apid listens on.
pub const TALOS_API_PORT: u16 = 50000;
/// How long a TCP connect and TLS handshake may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one call may take (Bootstrap and leaving etcd return once started).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response decoded: a member list or version is a few hundred bytes.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// The most system extensions a node may list (Image Factory offers about a hundred).
pub const MAX_EXTENSIONS: usize = 256;
/// The largest `ExtensionStatus` spec read (a real one is a few hundred bytes).
const MAX_EXTENSION_SPEC_BYTES: usize = 16 * 1024;
/// The most etcd members accepted in a list (etcd itself advises at most 7).
pub const MAX_ETCD_MEMBERS: usize = 32;
/// The most characters of a node's error message kept.
pub const MAX_NODE_MESSAGE: usize = 300;
/// The most peer or client URLs kept of one etcd member (etcd gives one or two each).
pub const MAX_MEMBER_URLS: usize = 8;

/// A Talos node's Talos API, in capstan's terms: one value per node.
///
/// # Errors
/// Every call returns [`TalosApiError`] naming the call and the node: a gRPC error the node
/// answered (its code and message), or an answer of the wrong shape.
///
/// # Guarantees
/// `bootstrap` may be repeated: a node that already bootstrapped answers
/// [`BootstrapOutcome::AlreadyBootstrapped`], not an error, so a step that bootstraps is
/// idempotent. The etcd calls answer only on control planes (Talos's `Unimplemented` on a
/// worker).
pub trait TalosApi: Send + Sync {
    /// The Talos version the node runs and what it says of its platform.
    fn version(&self) -> impl Future<Output = Result<NodeVersion, TalosApiError>> + Send;
    /// Starts etcd on this (first) control plane, or says it already was.
    fn bootstrap(&self) -> impl Future<Output = Result<BootstrapOutcome, TalosApiError>> + Send;
    /// The cluster's etcd members, as this control plane sees them.
    fn etcd_member_list(
        &self,
    ) -> impl Future<Output = Result<Vec<EtcdMember>, TalosApiError>> + Send;
    /// Moves etcd leadership off this node; the new leader's name if it led.
    fn etcd_forfeit_leadership(
        &self,
    ) -> impl Future<Output = Result<Option<String>, TalosApiError>> + Send;
    /// Removes this node from etcd (refused by Talos for the last member).
    fn etcd_leave_cluster(&self) -> impl Future<Output = Result<(), TalosApiError>> + Send;
    /// Removes the member numbered `id` (a dead one) through this healthy member.
    fn etcd_remove_member_by_id(
        &self,
        id: u64,
    ) -> impl Future<Output = Result<(), TalosApiError>> + Send;
    /// The system extensions the node runs (its `ExtensionStatuses` resources), by the
    /// names their metadata give (`iscsi-tools`).
    fn extensions(&self) -> impl Future<Output = Result<Vec<Extension>, TalosApiError>> + Send;
}

impl<T: TalosApi> TalosApi for Arc<T> {
    fn extensions(&self) -> impl Future<Output = Result<Vec<Extension>, TalosApiError>> + Send {
        (**self).extensions()
    }

    fn version(&self) -> impl Future<Output = Result<NodeVersion, TalosApiError>> + Send {
        (**self).version()
    }

    fn bootstrap(&self) -> impl Future<Output = Result<BootstrapOutcome, TalosApiError>> + Send {
        (**self).bootstrap()
    }

    fn etcd_member_list(
        &self,
    ) -> impl Future<Output = Result<Vec<EtcdMember>, TalosApiError>> + Send {
        (**self).etcd_member_list()
    }

    fn etcd_forfeit_leadership(
        &self,
    ) -> impl Future<Output = Result<Option<String>, TalosApiError>> + Send {
        (**self).etcd_forfeit_leadership()
    }

    fn etcd_leave_cluster(&self) -> impl Future<Output = Result<(), TalosApiError>> + Send {
        (**self).etcd_leave_cluster()
    }

    fn etcd_remove_member_by_id(
        &self,
        id: u64,
    ) -> impl Future<Output = Result<(), TalosApiError>> + Send {
        (**self).etcd_remove_member_by_id(id)
    }
}

/// What `Version` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVersion {
    /// The Talos tag (`v1.13.9`).
    pub talos_tag: String,
    /// The platform (`nocloud`, `metal`).
    pub platform: String,
    /// The CPU architecture (`amd64`).
    pub arch: String,
    /// Whether the node enforces roles (RBAC).
    pub rbac: bool,
}

/// A system extension a node runs, as its `ExtensionStatus` resource's metadata says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    /// Its name (`iscsi-tools`).
    pub name: String,
    /// Its version (`v0.2.0`).
    pub version: String,
}

/// What `Bootstrap` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootstrapOutcome {
    /// etcd was started on the node.
    Bootstrapped,
    /// etcd already had data: bootstrap happened before (Talos's `AlreadyExists`).
    AlreadyBootstrapped,
}

/// An etcd member as Talos lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdMember {
    /// etcd's member id.
    pub id: u64,
    /// Its name (the node's hostname).
    pub name: String,
    /// The URLs its peers reach it on.
    pub peer_urls: Vec<String>,
    /// The URLs clients reach it on.
    pub client_urls: Vec<String>,
    /// Whether it is a learner (not yet voting).
    pub learner: bool,
}

/// A Talos API call failed. `node` is the address dialled.
#[derive(Debug, thiserror::Error)]
pub enum TalosApiError {
    /// The OS CA or the client certificate or key does not parse (which one, never its text).
    #[error("the Talos API credentials for {node} are unusable: the {part} does not parse")]
    Credentials {
        /// The node.
        node: String,
        /// `OS CA certificate`, `client certificate`, `client key` (or, a defect, the TLS
        /// protocol configuration).
        part: &'static str,
    },
    /// Connecting (TCP, TLS with the OS CA, HTTP/2) failed or timed out.
    #[error("cannot connect to the Talos API of {node}")]
    Connect {
        /// The node.
        node: String,
        /// tonic's error.
        #[source]
        source: tonic::transport::Error,
    },
    /// The node answered the call with a gRPC error (or it timed out).
    #[error("Talos API call {call} to {node} failed: {code:?}: {message}")]
    Call {
        /// The call.
        call: &'static str,
        /// The node.
        node: String,
        /// The gRPC status code.
        code: Code,
        /// The node's message, cut to [`MAX_NODE_MESSAGE`] characters.
        message: String,
    },
    /// The answer was well-formed gRPC but not what the call returns.
    #[error("Talos API call {call} to {node} answered {problem}")]
    Answer {
        /// The call.
        call: &'static str,
        /// The node.
        node: String,
        /// What was wrong.
        problem: String,
    },
}

/// The cluster's OS CA and an `os:admin` client certificate and key, PEM.
#[derive(Clone)]
pub struct TalosCredentials {
    /// The OS CA certificate (trust anchor for the node's serving certificate).
    pub os_ca_pem: String,
    /// The `os:admin` client certificate and key.
    pub admin: AdminCredentials,
}

impl std::fmt::Debug for TalosCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TalosCredentials").finish_non_exhaustive()
    }
}

/// The Talos API of one node over gRPC and mutual TLS.
#[derive(Debug, Clone)]
pub struct GrpcTalosApi {
    node: String,
    client: MachineServiceClient<Channel>,
    /// The same connection, for the resource API Talos serves beside `MachineService`.
    channel: Channel,
}

impl GrpcTalosApi {
    /// Connects to the Talos API of the node at `address` (port [`TALOS_API_PORT`] on a
    /// real node; the lab serves each node on a port of its own).
    ///
    /// # Errors
    /// [`TalosApiError::Credentials`] when a PEM does not parse, [`TalosApiError::Connect`]
    /// when the node cannot be reached or the TLS handshake fails.
    pub async fn connect(
        address: SocketAddr,
        credentials: &TalosCredentials,
    ) -> Result<Self, TalosApiError> {
        Self::connect_via(address.ip(), address, credentials).await
    }

    /// Connects to the Talos API of the node whose address is `node` (what its serving
    /// certificate names) by dialling `address` (the lab serves `node:50000` on a loopback
    /// port of its own).
    ///
    /// # Errors
    /// As [`GrpcTalosApi::connect`].
    pub async fn connect_via(
        node_address: IpAddr,
        address: SocketAddr,
        credentials: &TalosCredentials,
    ) -> Result<Self, TalosApiError> {
        let node = node_address.to_string();
        let tls = tls_config(&node, credentials)?;
        let server_name = ServerName::IpAddress(node_address.into());
        let uri = match address.ip() {
            IpAddr::V4(ip) => format!("https://{ip}:{}", address.port()),
            IpAddr::V6(ip) => format!("https://[{ip}]:{}", address.port()),
        };
        let endpoint = Endpoint::from_shared(uri)
            .map_err(|source| TalosApiError::Connect {
                node: node.clone(),
                source,
            })?
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT);
        let connector = tower::service_fn(move |_: tonic::codegen::http::Uri| {
            let connector = tokio_rustls::TlsConnector::from(tls.clone());
            let server_name = server_name.clone();
            async move {
                let tcp = tokio::net::TcpStream::connect(address).await?;
                let tls = connector.connect(server_name, tcp).await?;
                Ok::<_, std::io::Error>(TokioIo::new(tls))
            }
        });
        let channel = endpoint
            .connect_with_connector(connector)
            .await
            .map_err(|source| TalosApiError::Connect {
                node: node.clone(),
                source,
            })?;
        let client = MachineServiceClient::new(channel.clone())
            .max_decoding_message_size(MAX_RESPONSE_BYTES);
        Ok(Self {
            node,
            client,
            channel,
        })
    }

    fn call_error(&self, call: &'static str, status: &tonic::Status) -> TalosApiError {
        TalosApiError::Call {
            call,
            node: self.node.clone(),
            code: status.code(),
            message: bounded(status.message()),
        }
    }

    fn answer_error(&self, call: &'static str, problem: impl Into<String>) -> TalosApiError {
        TalosApiError::Answer {
            call,
            node: self.node.clone(),
            problem: problem.into(),
        }
    }

    /// The single message of a response to one node, refusing an empty answer and one whose
    /// metadata carries the node's error (apid reports an upstream failure there).
    fn single<'a, T>(
        &self,
        call: &'static str,
        messages: &'a [T],
        metadata: impl Fn(&T) -> Option<&Metadata>,
    ) -> Result<&'a T, TalosApiError> {
        let [message] = messages else {
            return Err(
                self.answer_error(call, format!("{} messages instead of one", messages.len()))
            );
        };
        if let Some(error) = metadata(message)
            .map(|m| &m.error)
            .filter(|e| !e.is_empty())
        {
            return Err(TalosApiError::Call {
                call,
                node: self.node.clone(),
                code: Code::Unknown,
                message: bounded(error),
            });
        }
        Ok(message)
    }
}

impl TalosApi for GrpcTalosApi {
    async fn version(&self) -> Result<NodeVersion, TalosApiError> {
        const CALL: &str = "Version";
        let response = self
            .client
            .clone()
            .version(())
            .await
            .map_err(|status| self.call_error(CALL, &status))?
            .into_inner();
        let message = self.single(CALL, &response.messages, |m| m.metadata.as_ref())?;
        let version = message
            .version
            .as_ref()
            .ok_or_else(|| self.answer_error(CALL, "no version"))?;
        Ok(NodeVersion {
            talos_tag: bounded(&version.tag),
            platform: message
                .platform
                .as_ref()
                .map(|p| bounded(&p.name))
                .unwrap_or_default(),
            arch: bounded(&version.arch),
            rbac: message.features.as_ref().is_some_and(|f| f.rbac),
        })
    }

    async fn bootstrap(&self) -> Result<BootstrapOutcome, TalosApiError> {
        const CALL: &str = "Bootstrap";
        match self
            .client
            .clone()
            .bootstrap(BootstrapRequest::default())
            .await
        {
            Ok(response) => {
                let response = response.into_inner();
                self.single(CALL, &response.messages, |m| m.metadata.as_ref())?;
                Ok(BootstrapOutcome::Bootstrapped)
            }
            // Talos: "etcd data directory is not empty".
            Err(status) if status.code() == Code::AlreadyExists => {
                Ok(BootstrapOutcome::AlreadyBootstrapped)
            }
            Err(status) => Err(self.call_error(CALL, &status)),
        }
    }

    async fn etcd_member_list(&self) -> Result<Vec<EtcdMember>, TalosApiError> {
        const CALL: &str = "EtcdMemberList";
        let response = self
            .client
            .clone()
            .etcd_member_list(EtcdMemberListRequest { query_local: false })
            .await
            .map_err(|status| self.call_error(CALL, &status))?
            .into_inner();
        let message = self.single(CALL, &response.messages, |m| m.metadata.as_ref())?;
        if message.members.len() > MAX_ETCD_MEMBERS {
            return Err(self.answer_error(
                CALL,
                format!(
                    "{} members, more than the {MAX_ETCD_MEMBERS} accepted",
                    message.members.len()
                ),
            ));
        }
        Ok(message
            .members
            .iter()
            .map(|m| EtcdMember {
                id: m.id,
                name: bounded(&m.hostname),
                peer_urls: bounded_list(&m.peer_urls),
                client_urls: bounded_list(&m.client_urls),
                learner: m.is_learner,
            })
            .collect())
    }

    async fn etcd_forfeit_leadership(&self) -> Result<Option<String>, TalosApiError> {
        const CALL: &str = "EtcdForfeitLeadership";
        let response = self
            .client
            .clone()
            .etcd_forfeit_leadership(EtcdForfeitLeadershipRequest {})
            .await
            .map_err(|status| self.call_error(CALL, &status))?
            .into_inner();
        let message = self.single(CALL, &response.messages, |m| m.metadata.as_ref())?;
        Ok(Some(bounded(&message.member)).filter(|member| !member.is_empty()))
    }

    async fn etcd_leave_cluster(&self) -> Result<(), TalosApiError> {
        const CALL: &str = "EtcdLeaveCluster";
        let response = self
            .client
            .clone()
            .etcd_leave_cluster(EtcdLeaveClusterRequest {})
            .await
            .map_err(|status| self.call_error(CALL, &status))?
            .into_inner();
        self.single(CALL, &response.messages, |m| m.metadata.as_ref())?;
        Ok(())
    }

    async fn extensions(&self) -> Result<Vec<Extension>, TalosApiError> {
        self.list_extensions().await
    }

    async fn etcd_remove_member_by_id(&self, id: u64) -> Result<(), TalosApiError> {
        const CALL: &str = "EtcdRemoveMemberByID";
        let response = self
            .client
            .clone()
            .etcd_remove_member_by_id(EtcdRemoveMemberByIdRequest { member_id: id })
            .await
            .map_err(|status| self.call_error(CALL, &status))?
            .into_inner();
        self.single(CALL, &response.messages, |m| m.metadata.as_ref())?;
        Ok(())
    }
}

impl GrpcTalosApi {
    /// [`TalosApi::extensions`]: `cosi.resource.State/List` of `ExtensionStatuses` in the
    /// `runtime` namespace, as `talosctl get extensions` asks; each resource's YAML spec
    /// read for its metadata's name and version. At most [`MAX_EXTENSIONS`] are read.
    async fn list_extensions(&self) -> Result<Vec<Extension>, TalosApiError> {
        const CALL: &str = "cosi.resource.State/List ExtensionStatuses";
        let request = ListRequest {
            namespace: "runtime".to_owned(),
            r#type: "ExtensionStatuses.runtime.talos.dev".to_owned(),
            options: None,
        };
        let mut stream = StateClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_RESPONSE_BYTES)
            .list(request)
            .await
            .map_err(|status| self.call_error(CALL, &status))?
            .into_inner();
        let mut extensions = Vec::new();
        while let Some(response) = stream
            .message()
            .await
            .map_err(|status| self.call_error(CALL, &status))?
        {
            if extensions.len() == MAX_EXTENSIONS {
                return Err(self.answer_error(
                    CALL,
                    format!("more than the {MAX_EXTENSIONS} extensions accepted"),
                ));
            }
            let yaml = response
                .resource
                .and_then(|r| r.spec)
                .map(|spec| spec.yaml_spec)
                .unwrap_or_default();
            extensions
                .push(extension_of(&yaml).map_err(|problem| self.answer_error(CALL, problem))?);
        }
        Ok(extensions)
    }
}

/// The extension an `ExtensionStatus` spec (YAML, as Talos marshals it) describes.
fn extension_of(yaml: &str) -> Result<Extension, String> {
    #[derive(serde::Deserialize)]
    struct Status {
        metadata: Metadata,
    }
    #[derive(serde::Deserialize)]
    struct Metadata {
        name: String,
        #[serde(default)]
        version: String,
    }
    if yaml.len() > MAX_EXTENSION_SPEC_BYTES {
        return Err(format!(
            "an extension spec of {} bytes, more than the {MAX_EXTENSION_SPEC_BYTES} accepted",
            yaml.len()
        ));
    }
    let status: Status = serde_saphyr::from_str(yaml)
        .map_err(|_| "an extension spec without metadata.name".to_owned())?;
    Ok(Extension {
        name: bounded(&status.metadata.name),
        version: bounded(&status.metadata.version),
    })
}

/// A text a node sent, cut to [`MAX_NODE_MESSAGE`] characters.
fn bounded(text: &str) -> String {
    text.chars().take(MAX_NODE_MESSAGE).collect()
}

/// A member's URLs as a node sent them: at most [`MAX_MEMBER_URLS`], each [`bounded`].
fn bounded_list(urls: &[String]) -> Vec<String> {
    urls.iter()
        .take(MAX_MEMBER_URLS)
        .map(|url| bounded(url))
        .collect()
}

/// TLS trusting only the OS CA, presenting the `os:admin` certificate, offering HTTP/2 (gRPC
/// servers such as apid refuse a client without ALPN `h2`).
fn tls_config(
    node: &str,
    credentials: &TalosCredentials,
) -> Result<Arc<rustls::ClientConfig>, TalosApiError> {
    let unusable = |part| TalosApiError::Credentials {
        node: node.to_owned(),
        part,
    };
    let ca = CertificateDer::from_pem_slice(credentials.os_ca_pem.as_bytes())
        .map_err(|_| unusable("OS CA certificate"))?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).map_err(|_| unusable("OS CA certificate"))?;
    let certificate = CertificateDer::from_pem_slice(credentials.admin.certificate_pem.as_bytes())
        .map_err(|_| unusable("client certificate"))?;
    let key = PrivateKeyDer::from_pem_slice(credentials.admin.key_pem.as_bytes())
        .map_err(|_| unusable("client key"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| unusable("TLS protocol configuration"))?
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![certificate], key)
        .map_err(|_| unusable("client key"))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}
