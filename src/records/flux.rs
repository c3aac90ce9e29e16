//! Delivery of a cluster's kubeconfig to FluxCD: a Secret on the management cluster (key
//! `value`, what Flux's `spec.kubeConfig.secretRef` and Cluster API read), holding the
//! admitted admin kubeconfig as capstan renders it from its parts ([`AdminKubeconfig::render`]:
//! server, CA, client certificate and key, nothing a VM added), labelled
//! `reconcile.fluxcd.io/watch: Enabled` so Flux reconciles as soon as it changes, and
//! annotated with the cluster, the Git revision, the client certificate's expiry and the
//! content's fingerprint.
//!
//! # Guarantees
//! - Writes only when the content changed (fingerprints compared; the content is never logged
//!   nor put in an error).
//! - Never writes a kubeconfig that does not authenticate against its own cluster: a broken
//!   kubeconfig would cut Flux off the cluster, so it is refused before the Secret changes.
//! - Touches only Secrets it created (label `app.kubernetes.io/managed-by: capstan`).
//! - Every operation is idempotent (unchanged content, an already withdrawn Secret: success).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use jiff::Timestamp;
use tracing::{debug, info};

use crate::fingerprint::FingerprintKey;
use crate::providers::kube::{
    AdminKubeconfig, ClusterClient, ClusterError, KubeClusterClient, SecretRecord,
};
use crate::spec::FluxDelivery;

/// The Secret key Flux reads the kubeconfig from.
pub const VALUE_KEY: &str = "value";
/// Makes Flux reconcile the objects that reference the Secret as soon as it changes.
pub const WATCH_LABEL: &str = "reconcile.fluxcd.io/watch";
/// The watch label's value.
pub const WATCH_ENABLED: &str = "Enabled";
/// Marks what capstan owns; capstan overwrites or deletes only Secrets carrying it.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The managed-by label's value.
pub const MANAGED_BY: &str = "capstan";
/// The cluster the kubeconfig belongs to.
pub const CLUSTER_ANNOTATION: &str = "capstan.dev/cluster";
/// The Git revision capstan acted on when it delivered.
pub const REVISION_ANNOTATION: &str = "capstan.dev/revision";
/// When the kubeconfig's client certificate expires (RFC 3339).
pub const EXPIRY_ANNOTATION: &str = "capstan.dev/client-certificate-expiry";
/// The kubeconfig's keyed fingerprint ([`crate::fingerprint::FingerprintKey`]), `hmac-sha256:…`.
pub const FINGERPRINT_ANNOTATION: &str = "capstan.dev/kubeconfig-sha256";

/// Where a cluster's kubeconfig goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FluxTarget {
    /// The workload cluster's name.
    pub cluster: String,
    /// Namespace of the Secret on the management cluster.
    pub namespace: String,
    /// Name of the Secret.
    pub secret_name: String,
}

impl FluxTarget {
    /// The target a cluster file's `delivery.flux` describes.
    pub fn new(cluster: &str, delivery: &FluxDelivery) -> Self {
        FluxTarget {
            cluster: cluster.to_owned(),
            namespace: delivery.namespace.clone(),
            secret_name: delivery.secret_name_for(cluster),
        }
    }
}

/// What Flux holds now, as capstan observes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// Fingerprint of the Secret's `value` (computed from the data, not trusted from the
    /// annotation).
    pub fingerprint: String,
    /// The revision annotation.
    pub revision: Option<String>,
    /// The expiry annotation.
    pub client_certificate_expiry: Option<Timestamp>,
    /// Whether capstan manages the Secret.
    pub managed: bool,
}

/// What a delivery did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// The Secret did not exist and was created.
    Created,
    /// The Secret held another kubeconfig and was replaced.
    Updated,
    /// The Secret already held this kubeconfig; nothing was written.
    Unchanged,
}

/// A Flux delivery failed.
#[derive(Debug, thiserror::Error)]
pub enum FluxError {
    /// Reading the Secret failed.
    #[error("cannot read the Flux Secret {namespace}/{name}")]
    ReadSecret {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The cluster operation that failed, and its cause.
        #[source]
        source: ClusterError,
    },
    /// Writing the Secret failed.
    #[error("cannot write the Flux Secret {namespace}/{name}")]
    WriteSecret {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The cluster operation that failed, and its cause.
        #[source]
        source: ClusterError,
    },
    /// Listing the Secrets capstan manages failed.
    #[error("cannot list the Flux Secrets capstan manages")]
    ListSecrets(#[source] ClusterError),
    /// Deleting the Secret failed.
    #[error("cannot delete the Flux Secret {namespace}/{name}")]
    DeleteSecret {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The cluster operation that failed, and its cause.
        #[source]
        source: ClusterError,
    },
    /// The new kubeconfig does not authenticate against its cluster; the Secret was left as
    /// it was.
    #[error(
        "refusing to deliver cluster {cluster}'s new kubeconfig ({fingerprint}) to Flux: it does not authenticate against the cluster; the Secret was left unchanged"
    )]
    NotAuthenticated {
        /// Cluster.
        cluster: String,
        /// Fingerprint of the refused kubeconfig.
        fingerprint: String,
        /// The cluster operation that failed, and its cause.
        #[source]
        source: ClusterError,
    },
    /// A Secret of that name exists but capstan does not manage it.
    #[error(
        "Secret {namespace}/{name} exists but is not managed by capstan (no label {MANAGED_BY_LABEL}={MANAGED_BY}); refusing to touch it"
    )]
    NotOwned {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
}

impl FluxError {
    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            FluxError::ReadSecret { source, .. }
            | FluxError::WriteSecret { source, .. }
            | FluxError::DeleteSecret { source, .. }
            | FluxError::NotAuthenticated { source, .. }
            | FluxError::ListSecrets(source) => source.is_transient(),
            FluxError::NotOwned { .. } => false,
        }
    }
}

/// Delivers kubeconfigs to Flux.
///
/// # Guarantees
/// Idempotent: delivering the same kubeconfig twice writes once; withdrawing twice deletes
/// once.
///
/// # Errors
/// [`FluxError`], naming the Secret; see [`FluxError::is_transient`].
pub trait KubeconfigDelivery: Send + Sync {
    /// Writes `kubeconfig` for `target` unless Flux already holds it, after proving it
    /// authenticates. `revision` is the Git revision being acted on.
    fn deliver(
        &self,
        target: &FluxTarget,
        kubeconfig: &AdminKubeconfig,
        revision: &str,
    ) -> impl Future<Output = Result<DeliveryOutcome, FluxError>> + Send;

    /// What Flux holds for `target`, or `None` when there is no Secret.
    fn delivered(
        &self,
        target: &FluxTarget,
    ) -> impl Future<Output = Result<Option<Delivered>, FluxError>> + Send;

    /// Every Secret capstan manages on this management cluster, with the cluster its
    /// [`CLUSTER_ANNOTATION`] names: how the Secret of a cluster whose file is gone (and so
    /// its `delivery.flux`) is found again. One list call.
    fn held(&self) -> impl Future<Output = Result<Vec<(FluxTarget, Delivered)>, FluxError>> + Send;

    /// Deletes `target`'s Secret (cluster deletion). Returns whether it existed.
    fn withdraw(&self, target: &FluxTarget)
    -> impl Future<Output = Result<bool, FluxError>> + Send;
}

impl<T: KubeconfigDelivery> KubeconfigDelivery for Arc<T> {
    fn deliver(
        &self,
        target: &FluxTarget,
        kubeconfig: &AdminKubeconfig,
        revision: &str,
    ) -> impl Future<Output = Result<DeliveryOutcome, FluxError>> + Send {
        (**self).deliver(target, kubeconfig, revision)
    }
    fn delivered(
        &self,
        target: &FluxTarget,
    ) -> impl Future<Output = Result<Option<Delivered>, FluxError>> + Send {
        (**self).delivered(target)
    }
    fn held(&self) -> impl Future<Output = Result<Vec<(FluxTarget, Delivered)>, FluxError>> + Send {
        (**self).held()
    }
    fn withdraw(
        &self,
        target: &FluxTarget,
    ) -> impl Future<Output = Result<bool, FluxError>> + Send {
        (**self).withdraw(target)
    }
}

/// [`KubeconfigDelivery`] through a [`ClusterClient`] of the management cluster; kubeconfigs
/// are proven by connecting to their cluster with the kube crate.
#[derive(Debug, Clone)]
pub struct FluxDeliverer<C> {
    management: C,
    fingerprints: FingerprintKey,
}

impl<C: ClusterClient> FluxDeliverer<C> {
    /// Delivers through `management`, a client of the management cluster, naming kubeconfigs
    /// by their fingerprint under `fingerprints`.
    pub fn new(management: C, fingerprints: FingerprintKey) -> Self {
        FluxDeliverer {
            management,
            fingerprints,
        }
    }

    /// The management cluster's client it delivers through (capstan's other Secrets live
    /// there too).
    pub fn client(&self) -> &C {
        &self.management
    }

    async fn read(&self, target: &FluxTarget) -> Result<Option<SecretRecord>, FluxError> {
        self.management
            .secret(&target.namespace, &target.secret_name)
            .await
            .map_err(|source| FluxError::ReadSecret {
                namespace: target.namespace.clone(),
                name: target.secret_name.clone(),
                source,
            })
    }
}

/// What a Secret holds, as [`Delivered`] (the fingerprint computed from the data).
fn delivered(secret: &SecretRecord, fingerprints: &FingerprintKey) -> Delivered {
    Delivered {
        fingerprint: fingerprints
            .fingerprint(secret.data.get(VALUE_KEY).map_or(&[][..], Vec::as_slice)),
        revision: secret.annotations.get(REVISION_ANNOTATION).cloned(),
        client_certificate_expiry: secret
            .annotations
            .get(EXPIRY_ANNOTATION)
            .and_then(|t| t.parse().ok()),
        managed: is_managed(secret),
    }
}

fn is_managed(secret: &SecretRecord) -> bool {
    secret.labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
}

fn not_owned(target: &FluxTarget) -> FluxError {
    FluxError::NotOwned {
        namespace: target.namespace.clone(),
        name: target.secret_name.clone(),
    }
}

/// Proves a kubeconfig authenticates against the cluster it names; returns the user name.
async fn prove(kubeconfig: &AdminKubeconfig) -> Result<String, ClusterError> {
    KubeClusterClient::for_admin(kubeconfig)?
        .authenticated_user()
        .await
}

impl<C: ClusterClient> KubeconfigDelivery for FluxDeliverer<C> {
    #[tracing::instrument(skip_all, fields(cluster = %target.cluster, revision = %revision))]
    async fn deliver(
        &self,
        target: &FluxTarget,
        kubeconfig: &AdminKubeconfig,
        revision: &str,
    ) -> Result<DeliveryOutcome, FluxError> {
        let fingerprint = kubeconfig.fingerprint().to_owned();
        let existing = self.read(target).await?;
        if let Some(existing) = &existing {
            if !is_managed(existing) {
                return Err(not_owned(target));
            }
            let held = existing
                .data
                .get(VALUE_KEY)
                .map(|value| self.fingerprints.fingerprint(value));
            if held.as_deref() == Some(fingerprint.as_str()) {
                debug!(cluster = %target.cluster, %fingerprint, "flux already holds this kubeconfig");
                return Ok(DeliveryOutcome::Unchanged);
            }
        }
        let expiry = kubeconfig.client_certificate_expiry();
        let user = prove(kubeconfig)
            .await
            .map_err(|source| FluxError::NotAuthenticated {
                cluster: target.cluster.clone(),
                fingerprint: fingerprint.clone(),
                source,
            })?;
        debug!(cluster = %target.cluster, %user, "new kubeconfig authenticates");
        let mut record = existing.clone().unwrap_or_default();
        record.data = BTreeMap::from([(VALUE_KEY.to_owned(), kubeconfig.render().into_bytes())]);
        record
            .labels
            .insert(WATCH_LABEL.to_owned(), WATCH_ENABLED.to_owned());
        record
            .labels
            .insert(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned());
        let annotations = &mut record.annotations;
        annotations.insert(CLUSTER_ANNOTATION.to_owned(), target.cluster.clone());
        annotations.insert(REVISION_ANNOTATION.to_owned(), revision.to_owned());
        annotations.insert(FINGERPRINT_ANNOTATION.to_owned(), fingerprint.clone());
        match expiry {
            Some(expiry) => annotations.insert(EXPIRY_ANNOTATION.to_owned(), expiry.to_string()),
            None => annotations.remove(EXPIRY_ANNOTATION),
        };
        self.management
            .write_secret(&target.namespace, &target.secret_name, &record)
            .await
            .map_err(|source| FluxError::WriteSecret {
                namespace: target.namespace.clone(),
                name: target.secret_name.clone(),
                source,
            })?;
        let outcome = if existing.is_some() {
            DeliveryOutcome::Updated
        } else {
            DeliveryOutcome::Created
        };
        info!(
            cluster = %target.cluster,
            secret = %format!("{}/{}", target.namespace, target.secret_name),
            %fingerprint,
            %revision,
            ?outcome,
            "kubeconfig delivered to flux"
        );
        Ok(outcome)
    }

    async fn delivered(&self, target: &FluxTarget) -> Result<Option<Delivered>, FluxError> {
        Ok(self
            .read(target)
            .await?
            .map(|secret| delivered(&secret, &self.fingerprints)))
    }

    async fn held(&self) -> Result<Vec<(FluxTarget, Delivered)>, FluxError> {
        let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY}");
        let secrets = self
            .management
            .secrets_labelled(&selector)
            .await
            .map_err(FluxError::ListSecrets)?;
        Ok(secrets
            .into_iter()
            .filter_map(|listed| {
                let cluster = listed.record.annotations.get(CLUSTER_ANNOTATION)?.clone();
                let target = FluxTarget {
                    cluster,
                    namespace: listed.namespace,
                    secret_name: listed.name,
                };
                Some((target, delivered(&listed.record, &self.fingerprints)))
            })
            .collect())
    }

    async fn withdraw(&self, target: &FluxTarget) -> Result<bool, FluxError> {
        match self.read(target).await? {
            None => Ok(false),
            Some(secret) if !is_managed(&secret) => Err(not_owned(target)),
            Some(_) => {
                let existed = self
                    .management
                    .delete_secret(&target.namespace, &target.secret_name)
                    .await
                    .map_err(|source| FluxError::DeleteSecret {
                        namespace: target.namespace.clone(),
                        name: target.secret_name.clone(),
                        source,
                    })?;
                info!(cluster = %target.cluster, secret = %target.secret_name, "kubeconfig withdrawn from flux");
                Ok(existed)
            }
        }
    }
}
