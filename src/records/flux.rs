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
//! - Overwrites or deletes only the `flux-kubeconfig` record of the same cluster (and, when
//!   writing, of the same identity): a Secret that is not capstan's, or is another kind of
//!   record (a Talos bundle, a suspension) or another cluster's kubeconfig, is refused by name
//!   ([`crate::records::RecordRefusal`]), whatever `delivery.flux` names.
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
use crate::records::{
    ClusterRecords, Expected, IdentityCheck, RecordError, RecordKind, delete_owned, judge,
};
use crate::spec::FluxDelivery;

/// The Secret key Flux reads the kubeconfig from.
pub const VALUE_KEY: &str = "value";
/// Makes Flux reconcile the objects that reference the Secret as soon as it changes.
pub const WATCH_LABEL: &str = "reconcile.fluxcd.io/watch";
/// The watch label's value.
pub const WATCH_ENABLED: &str = "Enabled";
/// The cluster the kubeconfig belongs to (also in [`crate::records::OWNER_ANNOTATION`]; kept
/// for whoever reads the Secret as earlier capstans wrote it).
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
    /// The Secret could not be read, written or deleted, or is not this cluster's record.
    #[error("the Flux Secret {namespace}/{name}")]
    Secret {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why: the management cluster's error, or the record refused.
        #[source]
        source: RecordError,
    },
    /// Listing the Secrets capstan manages failed.
    #[error("cannot list the Flux Secrets capstan manages")]
    ListSecrets(#[source] ClusterError),
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
}

impl FluxError {
    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            FluxError::Secret { source, .. } => source.is_transient(),
            FluxError::NotAuthenticated { source, .. } | FluxError::ListSecrets(source) => {
                source.is_transient()
            }
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

    /// The records of `target`'s cluster on this management cluster; the cluster is live
    /// (its kubeconfig authenticates), so an unmarked record is adopted.
    fn records<'a>(&'a self, target: &'a FluxTarget) -> ClusterRecords<'a, C> {
        ClusterRecords::new(&self.management, &target.cluster, true)
    }
}

/// `target`'s Secret failed for `source`.
fn secret_failed(target: &FluxTarget) -> impl FnOnce(RecordError) -> FluxError + '_ {
    move |source| FluxError::Secret {
        namespace: target.namespace.clone(),
        name: target.secret_name.clone(),
        source,
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
    }
}

/// Whether `secret` is `target`'s kubeconfig as a record (any identity: what Flux holds is
/// observed, not used).
fn is_delivered_record(target: &FluxTarget, secret: &SecretRecord) -> bool {
    let expected = Expected {
        kind: RecordKind::FluxKubeconfig,
        owner: &target.cluster,
        identity: IdentityCheck::Any,
    };
    judge(&target.namespace, &target.secret_name, secret, &expected).is_ok()
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
        let records = self.records(target);
        let (namespace, name) = (&target.namespace, &target.secret_name);
        let existing = records
            .read(namespace, name, RecordKind::FluxKubeconfig)
            .await
            .map_err(secret_failed(target))?;
        let held = existing
            .as_ref()
            .and_then(|existing| existing.data.get(VALUE_KEY))
            .map(|value| self.fingerprints.fingerprint(value));
        if held.as_deref() == Some(fingerprint.as_str()) {
            debug!(cluster = %target.cluster, %fingerprint, "flux already holds this kubeconfig");
            return Ok(DeliveryOutcome::Unchanged);
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
        let annotations = &mut record.annotations;
        annotations.insert(CLUSTER_ANNOTATION.to_owned(), target.cluster.clone());
        annotations.insert(REVISION_ANNOTATION.to_owned(), revision.to_owned());
        annotations.insert(FINGERPRINT_ANNOTATION.to_owned(), fingerprint.clone());
        match expiry {
            Some(expiry) => annotations.insert(EXPIRY_ANNOTATION.to_owned(), expiry.to_string()),
            None => annotations.remove(EXPIRY_ANNOTATION),
        };
        records
            .put(
                namespace,
                name,
                RecordKind::FluxKubeconfig,
                record,
                existing.as_ref(),
            )
            .await
            .map_err(secret_failed(target))?;
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
        let found = self
            .management
            .secret(&target.namespace, &target.secret_name)
            .await
            .map_err(|source| {
                secret_failed(target)(RecordError::Cluster {
                    namespace: target.namespace.clone(),
                    name: target.secret_name.clone(),
                    source: Box::new(source),
                })
            })?;
        // A Secret there that is not this cluster's kubeconfig is not what Flux holds for it:
        // delivering says why ([`crate::records::RecordRefusal`]).
        Ok(found
            .filter(|secret| is_delivered_record(target, secret))
            .map(|secret| delivered(&secret, &self.fingerprints)))
    }

    async fn held(&self) -> Result<Vec<(FluxTarget, Delivered)>, FluxError> {
        let listed = crate::records::list(&self.management)
            .await
            .map_err(FluxError::ListSecrets)?;
        Ok(listed
            .into_iter()
            .filter(|record| record.kind == RecordKind::FluxKubeconfig.name())
            .map(|record| {
                let target = FluxTarget {
                    cluster: record.owner,
                    namespace: record.namespace,
                    secret_name: record.name,
                };
                (target, delivered(&record.record, &self.fingerprints))
            })
            .collect())
    }

    async fn withdraw(&self, target: &FluxTarget) -> Result<bool, FluxError> {
        let existed = delete_owned(
            &self.management,
            &target.namespace,
            &target.secret_name,
            RecordKind::FluxKubeconfig.name(),
            &target.cluster,
        )
        .await
        .map_err(secret_failed(target))?;
        if existed {
            info!(cluster = %target.cluster, secret = %target.secret_name, "kubeconfig withdrawn from flux");
        }
        Ok(existed)
    }
}
