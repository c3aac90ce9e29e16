//! A `coordination.k8s.io/v1` Lease through the kube crate: read it, create it, and replace it
//! only if nobody changed it since it was read (`resourceVersion`), which is what makes two
//! replicas agree on one holder.

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

use super::KubeClusterClient;

/// A Lease operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Reading the Lease failed.
    #[error("cannot read lease {namespace}/{name}")]
    Read {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
    /// Writing the Lease failed (for another reason than a concurrent change).
    #[error("cannot write lease {namespace}/{name}")]
    Write {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What the API server (or the connection to it) said.
        #[source]
        source: kube::Error,
    },
}

/// What a Lease says, in our terms.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaseRecord {
    /// `holderIdentity`; `None` when released.
    pub holder: Option<String>,
    /// `leaseDurationSeconds`.
    pub duration_seconds: i32,
    /// `acquireTime`.
    pub acquired: Option<Timestamp>,
    /// `renewTime`.
    pub renewed: Option<Timestamp>,
    /// `leaseTransitions`.
    pub transitions: i32,
    /// `metadata.resourceVersion` as read (empty for a Lease not yet created).
    pub version: String,
}

/// The outcome of a write that may lose a race.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// Written; the Lease as stored.
    Stored(LeaseRecord),
    /// Someone else created or changed it first (409).
    Lost,
}

/// One Lease in one cluster.
#[derive(Clone)]
pub struct LeaseClient {
    api: Api<Lease>,
    namespace: String,
    name: String,
}

impl std::fmt::Debug for LeaseClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseClient")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl LeaseClient {
    /// The Lease `namespace/name` of the cluster `cluster` talks to.
    pub fn new(cluster: &KubeClusterClient, namespace: &str, name: &str) -> Self {
        LeaseClient {
            api: Api::namespaced(cluster.client.clone(), namespace),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// `namespace/name`.
    pub fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The Lease, or `None` when it does not exist.
    ///
    /// # Errors
    /// When the API server cannot be reached or refuses.
    pub async fn get(&self) -> Result<Option<LeaseRecord>, LeaseError> {
        let lease = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|source| LeaseError::Read {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                source,
            })?;
        Ok(lease.map(|l| record_of(&l)))
    }

    /// Creates the Lease (when `record.version` is empty) or replaces it if it is still at
    /// `record.version`.
    ///
    /// # Errors
    /// When the API server cannot be reached or refuses for another reason than a race.
    pub async fn write(&self, record: &LeaseRecord) -> Result<Written, LeaseError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version: (!record.version.is_empty()).then(|| record.version.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: record.holder.clone(),
                lease_duration_seconds: Some(record.duration_seconds),
                acquire_time: record.acquired.map(MicroTime),
                renew_time: record.renewed.map(MicroTime),
                lease_transitions: Some(record.transitions),
                ..LeaseSpec::default()
            }),
        };
        let params = PostParams::default();
        let result = if record.version.is_empty() {
            self.api.create(&params, &lease).await
        } else {
            self.api.replace(&self.name, &params, &lease).await
        };
        match result {
            Ok(stored) => Ok(Written::Stored(record_of(&stored))),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Written::Lost),
            Err(source) => Err(LeaseError::Write {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                source,
            }),
        }
    }
}

fn record_of(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseRecord {
        holder: spec.holder_identity.filter(|h| !h.is_empty()),
        duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
        acquired: spec.acquire_time.map(|t| t.0),
        renewed: spec.renew_time.map(|t| t.0),
        transitions: spec.lease_transitions.unwrap_or_default(),
        version: lease.metadata.resource_version.clone().unwrap_or_default(),
    }
}
