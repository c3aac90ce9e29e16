//! Where a Talos cluster's secrets live: the bundle in `capstan-system/capstan-talos-<cluster>`
//! on the management cluster (generated once, found again after a restart, as the K3s token
//! is), marked once its etcd is bootstrapped; and the operators' `talosconfig` in
//! `capstan-system/<cluster>-talosconfig`.
//!
//! # Guarantees
//! - Generated once: a Secret that exists is read, never regenerated; two replicas racing to
//!   create it both end with the one written first (the loser's create is a 409 and it reads
//!   the winner's).
//! - The bootstrap mark is written only after `Bootstrap` answered: a cluster without it has
//!   no admin kubeconfig, so the planner bootstraps it (again: a second `Bootstrap` is
//!   answered `AlreadyExists`, which counts as done).

use std::collections::BTreeMap;

use capstan_core::talos::SecretsBundle;

use super::{
    AdminCredentials, TalosSecretsError, generate_bundle, read, record, secret_name, talosconfig,
};
use crate::providers::cluster_secrets::NAMESPACE;
use crate::providers::flux::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::providers::kube::{ClusterClient, ClusterError, SecretRecord};

/// The annotation that records when the cluster's etcd was bootstrapped.
pub const BOOTSTRAPPED_ANNOTATION: &str = "capstan.dev/talos-bootstrapped";
/// The key of the talosconfig in its Secret (`talosctl --talosconfig`).
pub const TALOSCONFIG_KEY: &str = "talosconfig";

/// Reading or writing a Talos cluster's Secrets failed.
#[derive(Debug, thiserror::Error)]
pub enum TalosStoreError {
    /// The management cluster refused or did not answer.
    #[error("the Talos secrets of `{cluster}` in {NAMESPACE}")]
    Cluster {
        /// The workload cluster.
        cluster: String,
        /// The cluster operation that failed.
        #[source]
        source: Box<ClusterError>,
    },
    /// The bundle could not be generated or read.
    #[error(transparent)]
    Secrets(#[from] TalosSecretsError),
}

impl TalosStoreError {
    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            TalosStoreError::Cluster { source, .. } => source.is_transient(),
            TalosStoreError::Secrets(TalosSecretsError::Malformed { .. }) => false,
            TalosStoreError::Secrets(_) => true,
        }
    }
}

/// A bundle as stored, with its bootstrap mark.
#[derive(Debug, Clone)]
pub struct StoredBundle {
    /// The cluster's secrets.
    pub bundle: SecretsBundle,
    /// Whether the cluster's etcd was bootstrapped.
    pub bootstrapped: bool,
    record: SecretRecord,
}

/// The stored bundle of `cluster`, if any.
///
/// # Errors
/// [`TalosStoreError`] when the management cluster fails or holds a foreign or broken Secret.
pub async fn stored<C: ClusterClient>(
    management: &C,
    cluster: &str,
) -> Result<Option<StoredBundle>, TalosStoreError> {
    let name = secret_name(cluster);
    let Some(secret) = management
        .secret(NAMESPACE, &name)
        .await
        .map_err(wrap(cluster))?
    else {
        return Ok(None);
    };
    Ok(Some(StoredBundle {
        bundle: read(&name, &secret)?,
        bootstrapped: secret.annotations.contains_key(BOOTSTRAPPED_ANNOTATION),
        record: secret,
    }))
}

/// The bundle of `cluster`, generated (its CAs valid from `now`) and stored on first use.
///
/// # Errors
/// [`TalosStoreError`] when the management cluster fails or holds a foreign or broken Secret.
pub async fn bundle_or_create<C: ClusterClient>(
    management: &C,
    cluster: &str,
    now: time::OffsetDateTime,
) -> Result<StoredBundle, TalosStoreError> {
    if let Some(existing) = stored(management, cluster).await? {
        return Ok(existing);
    }
    let fresh = generate_bundle(cluster, now)?;
    let name = secret_name(cluster);
    match management
        .write_secret(NAMESPACE, &name, &record(cluster, &fresh))
        .await
    {
        Ok(_) => {
            tracing::info!(cluster, secret = %format!("{NAMESPACE}/{name}"), "generated the Talos secrets bundle");
        }
        Err(err) if err.is_conflict() => {}
        Err(err) => return Err(wrap(cluster)(err)),
    }
    // Read back: the one stored is the one every machine gets, the winner's after a race.
    stored(management, cluster)
        .await?
        .ok_or(TalosStoreError::Secrets(TalosSecretsError::Malformed {
            name,
        }))
}

/// Marks `stored` bootstrapped at `now` (a no-op when it is).
///
/// # Errors
/// [`TalosStoreError::Cluster`] when the Secret cannot be replaced.
pub async fn mark_bootstrapped<C: ClusterClient>(
    management: &C,
    cluster: &str,
    stored: &StoredBundle,
    now: jiff::Timestamp,
) -> Result<(), TalosStoreError> {
    if stored.bootstrapped {
        return Ok(());
    }
    let mut record = stored.record.clone();
    record
        .annotations
        .insert(BOOTSTRAPPED_ANNOTATION.to_owned(), now.to_string());
    management
        .write_secret(NAMESPACE, &secret_name(cluster), &record)
        .await
        .map(|_| ())
        .map_err(wrap(cluster))
}

/// The Secret holding `cluster`'s talosconfig for operators.
pub fn talosconfig_secret_name(cluster: &str) -> String {
    format!("{cluster}-talosconfig")
}

/// Writes (or replaces) `cluster`'s talosconfig: the OS CA, `admin`'s `os:admin` certificate,
/// and `endpoints` (the control planes' addresses).
///
/// # Errors
/// [`TalosStoreError::Cluster`] when the Secret cannot be written.
pub async fn write_talosconfig<C: ClusterClient>(
    management: &C,
    cluster: &str,
    bundle: &SecretsBundle,
    admin: &AdminCredentials,
    endpoints: &[String],
) -> Result<(), TalosStoreError> {
    let name = talosconfig_secret_name(cluster);
    let text = talosconfig(cluster, endpoints, &bundle.os_ca.certificate_pem, admin);
    let existing = management
        .secret(NAMESPACE, &name)
        .await
        .map_err(wrap(cluster))?;
    let record = SecretRecord {
        data: BTreeMap::from([(TALOSCONFIG_KEY.to_owned(), text.into_bytes())]),
        labels: BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())]),
        annotations: BTreeMap::from([(super::CLUSTER_ANNOTATION.to_owned(), cluster.to_owned())]),
        resource_version: existing.and_then(|s| s.resource_version),
    };
    management
        .write_secret(NAMESPACE, &name, &record)
        .await
        .map(|_| ())
        .map_err(wrap(cluster))
}

fn wrap(cluster: &str) -> impl FnOnce(ClusterError) -> TalosStoreError + '_ {
    move |source| TalosStoreError::Cluster {
        cluster: cluster.to_owned(),
        source: Box::new(source),
    }
}
