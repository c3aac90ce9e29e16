//! Where a Talos cluster's secrets live: the bundle in `capstan-system/capstan-talos-<cluster>`
//! on the management cluster (a `talos-bundle` record: generated once, found again after a
//! restart, as the K3s token is), marked once its etcd is bootstrapped; and the operators'
//! `talosconfig` in `capstan-system/<cluster>-talosconfig` (a `talosconfig` record).
//!
//! # Guarantees
//! - Both are read and written only as the cluster's own records, of its identity
//!   ([`crate::records`]): a bundle left by an earlier cluster of the same name (its CA keys,
//!   its bootstrap mark) is refused, never used, and a Secret of the talosconfig's name that
//!   is anything else is never replaced.
//! - Generated once: a Secret that exists is read, never regenerated; two replicas racing to
//!   create it both end with the one written first (the loser's create is a 409 and it reads
//!   the winner's).
//! - The bootstrap mark is written only after `Bootstrap` answered: a cluster without it has
//!   no admin kubeconfig, so the planner bootstraps it (again: a second `Bootstrap` is
//!   answered `AlreadyExists`, which counts as done).

use std::collections::BTreeMap;

use capstan_core::talos::SecretsBundle;

use crate::providers::kube::{ClusterClient, SecretRecord};
use crate::providers::talos::{
    AdminCredentials, TalosSecretsError, generate_bundle, read, record, secret_name, talosconfig,
};
use crate::records::{ClusterRecords, NAMESPACE, RecordError, RecordKind};

/// The annotation that records when the cluster's etcd was bootstrapped.
pub const BOOTSTRAPPED_ANNOTATION: &str = "capstan.dev/talos-bootstrapped";
/// The key of the talosconfig in its Secret (`talosctl --talosconfig`).
pub const TALOSCONFIG_KEY: &str = "talosconfig";

/// Reading or writing a Talos cluster's Secrets failed.
#[derive(Debug, thiserror::Error)]
pub enum TalosStoreError {
    /// The management cluster refused or did not answer, or the Secret is not the cluster's
    /// record.
    #[error("the Talos secrets of `{cluster}` in {NAMESPACE}")]
    Record {
        /// The workload cluster.
        cluster: String,
        /// Why.
        #[source]
        source: Box<RecordError>,
    },
    /// The bundle could not be generated or read.
    #[error(transparent)]
    Secrets(#[from] TalosSecretsError),
}

impl TalosStoreError {
    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            TalosStoreError::Record { source, .. } => source.is_transient(),
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

/// The stored bundle of `cluster`, if any. `live`: the cluster's VMs exist (a bundle an
/// earlier capstan made is adopted only then).
///
/// # Errors
/// [`TalosStoreError`] when the management cluster fails or holds a foreign or broken Secret.
pub async fn stored<C: ClusterClient>(
    management: &C,
    cluster: &str,
    live: bool,
) -> Result<Option<StoredBundle>, TalosStoreError> {
    let name = secret_name(cluster);
    let Some(secret) = ClusterRecords::new(management, cluster, live)
        .read(NAMESPACE, &name, RecordKind::TalosBundle)
        .await
        .map_err(wrap(cluster))?
    else {
        return Ok(None);
    };
    stored_from(&name, secret).map(Some)
}

fn stored_from(name: &str, secret: SecretRecord) -> Result<StoredBundle, TalosStoreError> {
    Ok(StoredBundle {
        bundle: read(name, &secret)?,
        bootstrapped: secret.annotations.contains_key(BOOTSTRAPPED_ANNOTATION),
        record: secret,
    })
}

/// The bundle of `cluster`, generated (its CAs valid from `now`) and stored on first use (the
/// cluster's identity minted first, when it has none).
///
/// # Errors
/// [`TalosStoreError`] when the management cluster fails or holds a foreign or broken Secret.
pub async fn bundle_or_create<C: ClusterClient>(
    management: &C,
    cluster: &str,
    live: bool,
    now: time::OffsetDateTime,
) -> Result<StoredBundle, TalosStoreError> {
    let name = secret_name(cluster);
    let mut generated = None;
    let fresh = || -> Result<SecretRecord, RecordError> {
        let bundle = generate_bundle(cluster, now).map_err(|source| {
            generated = Some(source);
            RecordError::Random(cluster.to_owned())
        })?;
        Ok(record(cluster, &bundle))
    };
    let outcome = ClusterRecords::new(management, cluster, live)
        .read_or_create(NAMESPACE, &name, RecordKind::TalosBundle, fresh)
        .await;
    if let Some(source) = generated {
        return Err(source.into());
    }
    let (secret, created) = outcome.map_err(wrap(cluster))?;
    if created {
        tracing::info!(cluster, secret = %format!("{NAMESPACE}/{name}"), "generated the Talos secrets bundle");
    }
    // The one stored is the one every machine gets, the winner's after a race.
    stored_from(&name, secret)
}

/// Marks `stored` bootstrapped at `now` (a no-op when it is).
///
/// # Errors
/// [`TalosStoreError::Record`] when the Secret cannot be replaced.
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
    ClusterRecords::new(management, cluster, true)
        .put(
            NAMESPACE,
            &secret_name(cluster),
            RecordKind::TalosBundle,
            record,
            Some(&stored.record),
        )
        .await
        .map(|_| ())
        .map_err(wrap(cluster))
}

/// The Secret holding `cluster`'s talosconfig for operators.
pub fn talosconfig_secret_name(cluster: &str) -> String {
    format!("{cluster}-talosconfig")
}

/// Writes (or replaces) `cluster`'s talosconfig: the OS CA, `admin`'s `os:admin` certificate,
/// and `endpoints` (the control planes' addresses). Replaces only the cluster's own
/// talosconfig record.
///
/// # Errors
/// [`TalosStoreError::Record`] when the Secret cannot be written or is not that record.
pub async fn write_talosconfig<C: ClusterClient>(
    management: &C,
    cluster: &str,
    bundle: &SecretsBundle,
    admin: &AdminCredentials,
    endpoints: &[String],
) -> Result<(), TalosStoreError> {
    let name = talosconfig_secret_name(cluster);
    let text = talosconfig(cluster, endpoints, &bundle.os_ca.certificate_pem, admin);
    let records = ClusterRecords::new(management, cluster, true);
    let existing = records
        .read(NAMESPACE, &name, RecordKind::Talosconfig)
        .await
        .map_err(wrap(cluster))?;
    let record = SecretRecord {
        data: BTreeMap::from([(TALOSCONFIG_KEY.to_owned(), text.into_bytes())]),
        ..SecretRecord::default()
    };
    records
        .put(
            NAMESPACE,
            &name,
            RecordKind::Talosconfig,
            record,
            existing.as_ref(),
        )
        .await
        .map(|_| ())
        .map_err(wrap(cluster))
}

fn wrap(cluster: &str) -> impl FnOnce(RecordError) -> TalosStoreError + '_ {
    move |source| TalosStoreError::Record {
        cluster: cluster.to_owned(),
        source: Box::new(source),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_talos_capability_names_the_talosconfig_record_the_demo_shows() {
        // The demo prints `<cluster>-<key>` and `.data.<key>` from the capability alone.
        let key = crate::spec::Distribution::Talos
            .capabilities()
            .os_client_config;
        assert_eq!(key, Some(TALOSCONFIG_KEY));
        assert_eq!(talosconfig_secret_name("t"), format!("t-{TALOSCONFIG_KEY}"));
    }
}
