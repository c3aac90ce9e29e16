//! capstan's operations on a Kubernetes cluster, in domain verbs ([`ClusterClient`]), and their
//! implementation through the kube crate ([`KubeClusterClient`]).
//!
//! Only this module imports `kube` and `k8s_openapi`; the trait speaks in capstan's types
//! ([`NodeName`], [`NodeState`], [`Taint`], [`SecretRecord`]), so the executor and the Flux
//! provider never see wire types.
//!
//! # Guarantees
//! Every operation is idempotent and tolerates being repeated after a crash or a cancellation:
//! cordoning a cordoned node, deleting a deleted node, removing an absent taint or evicting a
//! pod that is already gone all succeed.
//!
//! Secrets (kubeconfigs, Secret data) never appear in logs or errors; [`SecretRecord`]'s
//! `Debug` shows fingerprints only.

mod admin;
mod apply;
mod client;
mod drain;
mod lease;
mod relabel;
mod workloads;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

pub use admin::{AdminKubeconfig, ApiEndpoint, KubeconfigRefused, MAX_KUBECONFIG_BYTES};
pub use client::{KubeClusterClient, client_certificate_expiry};
pub use drain::{DrainBlocker, DrainOptions, DrainReport, PodRef, SkipReason, SkippedPod};
pub use lease::{LeaseClient, LeaseError, LeaseRecord, Written};
pub use workloads::Workloads;

use crate::model::NodeName;
use crate::scheduling::Relabel;

/// The taint that marks a node as shut down so its volumes and pods can move
/// (non-graceful node shutdown); capstan sets it when it fences a node.
pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// How a taint keeps pods away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaintEffect {
    /// New pods are not scheduled.
    NoSchedule,
    /// The scheduler avoids the node.
    PreferNoSchedule,
    /// Running pods without a toleration are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Taint {
    /// Key, e.g. [`OUT_OF_SERVICE_TAINT`].
    pub key: String,
    /// Optional value (e.g. `nodeshutdown`).
    pub value: Option<String>,
    /// Effect.
    pub effect: TaintEffect,
}

impl Taint {
    /// The fencing taint: `node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`.
    pub fn out_of_service() -> Self {
        Taint {
            key: OUT_OF_SERVICE_TAINT.to_owned(),
            value: Some("nodeshutdown".to_owned()),
            effect: TaintEffect::NoExecute,
        }
    }
}

/// A node address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeAddress {
    /// `InternalIP`, `ExternalIP`, `Hostname`, ...
    pub kind: String,
    /// The address.
    pub address: String,
}

/// What capstan observes of a Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// Name.
    pub name: NodeName,
    /// Whether the Ready condition is True.
    pub ready: bool,
    /// When the Ready condition last changed (whatever its status).
    pub ready_since: Option<Timestamp>,
    /// The kubelet's version, e.g. `v1.36.2`.
    pub kubelet_version: String,
    /// Cordoned.
    pub unschedulable: bool,
    /// Taints.
    pub taints: Vec<Taint>,
    /// Roles from `node-role.kubernetes.io/<role>` labels, sorted.
    pub roles: Vec<String>,
    /// Addresses.
    pub addresses: Vec<NodeAddress>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// `spec.podCIDR`, once node IPAM gave it one.
    pub pod_cidr: Option<String>,
    /// When the Node was registered (`metadata.creationTimestamp`).
    pub created: Option<Timestamp>,
    /// Its kubelet posts NotReady because the runtime has no network plugin (the Ready
    /// condition's `NetworkPluginNotReady`).
    pub network_plugin_not_ready: bool,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

/// A Secret's content and bookkeeping. `Debug` shows key names and fingerprints, never data.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretRecord {
    /// Data by key (decoded bytes).
    pub data: BTreeMap<String, Vec<u8>>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// The resourceVersion read (a precondition for replacing); `None` on create.
    pub resource_version: Option<String>,
}

impl fmt::Debug for SecretRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let data: BTreeMap<&String, String> = self
            .data
            .iter()
            .map(|(k, v)| (k, format!("<{} bytes>", v.len())))
            .collect();
        f.debug_struct("SecretRecord")
            .field("data", &data)
            .field("labels", &self.labels)
            .field("annotations", &self.annotations)
            .field("resource_version", &self.resource_version)
            .finish()
    }
}

/// A Secret found by a listing, with where it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedSecret {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Content and bookkeeping.
    pub record: SecretRecord,
}

/// A cluster operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig text is not a kubeconfig. Says where, never quotes it: a kubeconfig
    /// holds credentials.
    #[error("cannot parse the kubeconfig")]
    ParseKubeconfig(#[source] crate::redact::DocumentError),
    /// The kubeconfig does not describe a usable connection (context, CA, credentials).
    #[error("cannot configure a client from the kubeconfig")]
    Configure(#[source] kube::config::KubeconfigError),
    /// The pod's service account could not be read.
    #[error("cannot configure a client from the pod's service account")]
    InCluster(#[source] kube::config::InClusterError),
    /// The HTTP client could not be built.
    #[error("cannot create a Kubernetes client")]
    Connect(#[source] kube::Error),
    /// A client cannot be configured from a reduced admin kubeconfig.
    #[error("cannot configure a client from the admin kubeconfig: {reason}")]
    AdminKubeconfig {
        /// What is wrong.
        reason: &'static str,
    },
    /// The kubeconfig's client certificate is not readable.
    #[error("cannot read the kubeconfig's client certificate: {reason}")]
    ClientCertificate {
        /// What is wrong with it.
        reason: String,
    },
    /// Listing nodes failed.
    #[error("cannot list nodes")]
    ListNodes(#[source] kube::Error),
    /// Cordoning failed.
    #[error("cannot cordon node {node}")]
    Cordon {
        /// Node.
        node: NodeName,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Deleting the Node object failed.
    #[error("cannot delete node {node}")]
    DeleteNode {
        /// Node.
        node: NodeName,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Changing taints failed.
    #[error("cannot change the taints of node {node}")]
    Taint {
        /// Node.
        node: NodeName,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Changing a node's labels, taints and capstan's record of them failed.
    #[error("cannot change the labels and taints of node {node}")]
    Relabel {
        /// Node.
        node: NodeName,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Annotating failed.
    #[error("cannot annotate node {node}")]
    Annotate {
        /// Node.
        node: NodeName,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Listing the pods of a node failed.
    #[error("cannot list the pods on node {node}")]
    ListPods {
        /// Node.
        node: NodeName,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Listing every pod or every PodDisruptionBudget failed.
    #[error("cannot list the cluster's {what}")]
    ListWorkloads {
        /// `pods` or `PodDisruptionBudgets`.
        what: &'static str,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// An eviction failed for a reason other than a disruption budget.
    #[error("cannot evict pod {pod}")]
    Evict {
        /// The pod.
        pod: PodRef,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// The drain did not finish in time; the node stays cordoned.
    #[error(
        "drain of node {node} timed out after {}; the node stays cordoned; could not evict: {}",
        humantime::format_duration(*timeout),
        drain::describe(blockers)
    )]
    DrainTimedOut {
        /// Node.
        node: NodeName,
        /// The drain timeout.
        timeout: Duration,
        /// Each pod still on the node and why.
        blockers: Vec<DrainBlocker>,
    },
    /// The replica lost the Lease: the drain stopped before its next change.
    #[error("stopped")]
    NotLeading(#[source] crate::fence::NotLeading),
    /// The credentials were refused (or the review failed).
    #[error("the API server did not accept the credentials")]
    Authenticate(#[source] kube::Error),
    /// Reading a ConfigMap failed.
    #[error("cannot read ConfigMap {namespace}/{name}")]
    GetConfigMap {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Writing a ConfigMap failed.
    #[error("cannot write ConfigMap {namespace}/{name}")]
    WriteConfigMap {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Reading a Secret failed.
    #[error("cannot read Secret {namespace}/{name}")]
    GetSecret {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Listing Secrets failed.
    #[error("cannot list the Secrets labelled {selector}")]
    ListSecrets {
        /// The label selector.
        selector: String,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Creating or replacing a Secret failed.
    #[error("cannot write Secret {namespace}/{name}")]
    WriteSecret {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// A manifest is not a stream of Kubernetes objects.
    #[error("cannot read manifest {manifest}: {reason}")]
    ParseManifest {
        /// Which manifest.
        manifest: String,
        /// What is wrong (no content quoted).
        reason: String,
    },
    /// The API serves no such kind (yet: a custom resource before its definition).
    #[error("the API serves no {kind} in {api_version} (yet)")]
    NotServed {
        /// `group/version`.
        api_version: String,
        /// The kind.
        kind: String,
    },
    /// Server-side apply of an object failed.
    #[error("cannot apply {kind} {name}")]
    Apply {
        /// The kind.
        kind: String,
        /// `namespace/name` or `name`.
        name: String,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Reading a Service failed.
    #[error("cannot read Service {namespace}/{name}")]
    GetService {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Deleting a Secret failed.
    #[error("cannot delete Secret {namespace}/{name}")]
    DeleteSecret {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
}

fn is_transient_kube(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => matches!(status.code, 409 | 429 | 500..=599),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

impl ClusterError {
    /// The kube error behind this one, when an API call failed.
    fn kube_source(&self) -> Option<&kube::Error> {
        match self {
            ClusterError::ParseKubeconfig(_)
            | ClusterError::InCluster(_)
            | ClusterError::Configure(_)
            | ClusterError::AdminKubeconfig { .. }
            | ClusterError::ClientCertificate { .. }
            | ClusterError::DrainTimedOut { .. }
            | ClusterError::ParseManifest { .. }
            | ClusterError::NotServed { .. }
            | ClusterError::NotLeading(_) => None,
            ClusterError::Connect(source)
            | ClusterError::ListNodes(source)
            | ClusterError::Authenticate(source)
            | ClusterError::Cordon { source, .. }
            | ClusterError::DeleteNode { source, .. }
            | ClusterError::Taint { source, .. }
            | ClusterError::Relabel { source, .. }
            | ClusterError::Annotate { source, .. }
            | ClusterError::ListPods { source, .. }
            | ClusterError::ListWorkloads { source, .. }
            | ClusterError::Evict { source, .. }
            | ClusterError::GetConfigMap { source, .. }
            | ClusterError::WriteConfigMap { source, .. }
            | ClusterError::GetSecret { source, .. }
            | ClusterError::ListSecrets { source, .. }
            | ClusterError::WriteSecret { source, .. }
            | ClusterError::Apply { source, .. }
            | ClusterError::GetService { source, .. }
            | ClusterError::DeleteSecret { source, .. } => Some(source),
        }
    }

    /// Whether retrying later may succeed (a busy or unreachable server, a conflict, a drain
    /// blocked by a budget, a node not Ready yet), as opposed to a problem someone must fix
    /// (a bad kubeconfig, refused credentials, a missing object).
    pub fn is_transient(&self) -> bool {
        match self.kube_source() {
            Some(source) => is_transient_kube(source),
            // A custom resource is served once its operator defined it.
            None => matches!(
                self,
                ClusterError::DrainTimedOut { .. } | ClusterError::NotServed { .. }
            ),
        }
    }

    /// Whether the server refused the credentials: 401 Unauthorized, or a TLS handshake that
    /// failed on a certificate (an expired or re-issued client certificate, a new CA).
    pub fn is_credentials_refused(&self) -> bool {
        match self.kube_source() {
            Some(kube::Error::Api(status)) => status.code == 401,
            Some(source) => {
                let chain = crate::errors::error_chain(source).to_ascii_lowercase();
                chain.contains("certificate") || chain.contains("unknownca")
            }
            None => false,
        }
    }

    /// Whether the API answered 409 Conflict (a write raced another one; re-read and retry).
    pub fn is_conflict(&self) -> bool {
        matches!(self.kube_source(), Some(kube::Error::Api(status)) if status.code == 409)
    }
}

/// capstan's operations on one cluster.
///
/// # Guarantees
/// Each method is idempotent: repeating it after success, or after a cancelled attempt, is
/// safe and ends in the same state ("already cordoned", "already gone" are successes).
///
/// # Errors
/// Each method returns a [`ClusterError`] naming the operation and the object; use
/// [`ClusterError::is_transient`] to decide whether to retry.
pub trait ClusterClient: Send + Sync {
    /// Every node with its readiness, versions, scheduling state, taints, roles, addresses.
    fn nodes(&self) -> impl Future<Output = Result<Vec<NodeState>, ClusterError>> + Send;

    /// Waits until the node is Ready, at most `limit` (a watch on that one Node, so the
    /// change is seen as it happens); returns whether it is. A node that does not exist yet
    /// is waited for too.
    fn await_ready(
        &self,
        node: &NodeName,
        limit: Duration,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send;

    /// Marks the node unschedulable. A missing node is an error.
    fn cordon(&self, node: &NodeName) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Deletes the Node object; a missing node is success.
    fn delete_node(&self, node: &NodeName)
    -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Adds `taint` (replacing a taint with the same key and effect).
    fn add_taint(
        &self,
        node: &NodeName,
        taint: &Taint,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Applies `change` to its node's labels, taints and capstan's record of them: sets and
    /// removes what it names and writes the record; every other label and taint stays. A
    /// missing node is an error.
    fn relabel(&self, change: &Relabel) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Sets (`Some`) or removes (`None`) an annotation on the node.
    fn annotate(
        &self,
        node: &NodeName,
        key: &str,
        value: Option<&str>,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Cordons the node, then evicts its pods through the Eviction API (honouring
    /// PodDisruptionBudgets; DaemonSet and mirror pods skipped; emptyDir data deleted),
    /// retrying refused evictions until `options.timeout`. On timeout the node stays cordoned
    /// and [`ClusterError::DrainTimedOut`] names each pod left and why.
    fn drain(
        &self,
        node: &NodeName,
        options: &DrainOptions,
    ) -> impl Future<Output = Result<DrainReport, ClusterError>> + Send;

    /// Which pods would block a drain of the node now, and why (dry-run evictions; changes
    /// nothing).
    fn drain_blockers(
        &self,
        node: &NodeName,
    ) -> impl Future<Output = Result<Vec<DrainBlocker>, ClusterError>> + Send;

    /// Every pod a drain of the node still has to move (DaemonSet and mirror pods excluded,
    /// terminating pods included), sorted; empty means the node is drained.
    fn pods_to_move(
        &self,
        node: &NodeName,
    ) -> impl Future<Output = Result<Vec<PodRef>, ClusterError>> + Send;

    /// Every pod by its node and every PodDisruptionBudget, for drain simulation: two list
    /// calls, whatever the cluster's size.
    fn workloads(&self) -> impl Future<Output = Result<Workloads, ClusterError>> + Send;

    /// Proves the credentials authenticate: the user name the server sees
    /// (a SelfSubjectReview).
    fn authenticated_user(&self) -> impl Future<Output = Result<String, ClusterError>> + Send;

    /// A ConfigMap's data, or `None` when it does not exist.
    fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<BTreeMap<String, String>>, ClusterError>> + Send;

    /// Creates or replaces a ConfigMap's data.
    fn write_config_map(
        &self,
        namespace: &str,
        name: &str,
        data: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// A Secret, or `None` when it does not exist.
    fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<SecretRecord>, ClusterError>> + Send;

    /// The Secrets of every namespace whose labels match `label_selector`
    /// (`key=value,...`), sorted by namespace and name.
    fn secrets_labelled(
        &self,
        label_selector: &str,
    ) -> impl Future<Output = Result<Vec<ListedSecret>, ClusterError>> + Send;

    /// Creates a Secret (fails if it exists) or, when `secret.resource_version` is set,
    /// replaces it if it is still at that version (a 409 otherwise, see
    /// [`ClusterError::is_conflict`]). Returns the new resourceVersion.
    fn write_secret(
        &self,
        namespace: &str,
        name: &str,
        secret: &SecretRecord,
    ) -> impl Future<Output = Result<String, ClusterError>> + Send;

    /// Deletes a Secret; returns whether it existed.
    fn delete_secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send;

    /// Server-side applies every object of `manifest` (a YAML stream; `name` says which in
    /// errors) as field manager `manager`, in order, taking over the fields it sets; each
    /// kind is found through the API's discovery. Returns how many objects it applied.
    /// [`ClusterError::NotServed`] for a kind the API does not serve yet.
    fn apply_manifest(
        &self,
        name: &str,
        manifest: &str,
        manager: &str,
    ) -> impl Future<Output = Result<usize, ClusterError>> + Send;

    /// A Service's ClusterIP, or `None` when it does not exist or has none.
    fn service_address(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<std::net::IpAddr>, ClusterError>> + Send;
}

impl<T: ClusterClient> ClusterClient for Arc<T> {
    fn nodes(&self) -> impl Future<Output = Result<Vec<NodeState>, ClusterError>> + Send {
        (**self).nodes()
    }
    fn await_ready(
        &self,
        node: &NodeName,
        limit: Duration,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send {
        (**self).await_ready(node, limit)
    }
    fn cordon(&self, node: &NodeName) -> impl Future<Output = Result<(), ClusterError>> + Send {
        (**self).cordon(node)
    }
    fn delete_node(
        &self,
        node: &NodeName,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        (**self).delete_node(node)
    }
    fn add_taint(
        &self,
        node: &NodeName,
        taint: &Taint,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        (**self).add_taint(node, taint)
    }
    fn relabel(&self, change: &Relabel) -> impl Future<Output = Result<(), ClusterError>> + Send {
        (**self).relabel(change)
    }

    fn annotate(
        &self,
        node: &NodeName,
        key: &str,
        value: Option<&str>,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        (**self).annotate(node, key, value)
    }
    fn drain(
        &self,
        node: &NodeName,
        options: &DrainOptions,
    ) -> impl Future<Output = Result<DrainReport, ClusterError>> + Send {
        (**self).drain(node, options)
    }
    fn drain_blockers(
        &self,
        node: &NodeName,
    ) -> impl Future<Output = Result<Vec<DrainBlocker>, ClusterError>> + Send {
        (**self).drain_blockers(node)
    }
    fn pods_to_move(
        &self,
        node: &NodeName,
    ) -> impl Future<Output = Result<Vec<PodRef>, ClusterError>> + Send {
        (**self).pods_to_move(node)
    }
    fn workloads(&self) -> impl Future<Output = Result<Workloads, ClusterError>> + Send {
        (**self).workloads()
    }
    fn authenticated_user(&self) -> impl Future<Output = Result<String, ClusterError>> + Send {
        (**self).authenticated_user()
    }
    fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<BTreeMap<String, String>>, ClusterError>> + Send {
        (**self).config_map(namespace, name)
    }
    fn write_config_map(
        &self,
        namespace: &str,
        name: &str,
        data: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        (**self).write_config_map(namespace, name, data)
    }
    fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<SecretRecord>, ClusterError>> + Send {
        (**self).secret(namespace, name)
    }
    fn secrets_labelled(
        &self,
        label_selector: &str,
    ) -> impl Future<Output = Result<Vec<ListedSecret>, ClusterError>> + Send {
        (**self).secrets_labelled(label_selector)
    }
    fn write_secret(
        &self,
        namespace: &str,
        name: &str,
        secret: &SecretRecord,
    ) -> impl Future<Output = Result<String, ClusterError>> + Send {
        (**self).write_secret(namespace, name, secret)
    }
    fn delete_secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<bool, ClusterError>> + Send {
        (**self).delete_secret(namespace, name)
    }
    fn apply_manifest(
        &self,
        name: &str,
        manifest: &str,
        manager: &str,
    ) -> impl Future<Output = Result<usize, ClusterError>> + Send {
        (**self).apply_manifest(name, manifest, manager)
    }
    fn service_address(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<std::net::IpAddr>, ClusterError>> + Send {
        (**self).service_address(namespace, name)
    }
}

#[cfg(test)]
mod tests;
