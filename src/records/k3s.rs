//! Secrets capstan generates for a K3s cluster and must find again after a restart: the K3s
//! cluster token (every later server and agent presents the same one) and the password of the
//! cluster's datastore user. They live in one Secret per cluster in the management cluster's
//! `capstan-system` namespace, never in Git, logs or status.
//!
//! # Guarantees
//! - Both are known to the redactor ([`crate::redact`]) once generated or read.
//! - Generated once: a Secret that exists is read, never regenerated; two replicas racing to
//!   create it both end with the one that was written first (the loser's create is a 409 and
//!   it reads the winner's).
//! - `Debug` shows fingerprints only.

use std::collections::BTreeMap;
use std::fmt;

use crate::providers::datastore::generate_secret;
use crate::providers::flux::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::providers::kube::{ClusterClient, ClusterError, SecretRecord};

/// The namespace of the management cluster that holds capstan's own Secrets.
pub const NAMESPACE: &str = "capstan-system";
/// Secret key of the K3s cluster token.
pub const TOKEN_KEY: &str = "k3s-token";
/// Secret key of the datastore user's password.
pub const DATASTORE_PASSWORD_KEY: &str = "datastore-password";

/// The annotation naming the workload cluster. Not Flux delivery's `capstan.dev/cluster`: the
/// listing of delivered kubeconfigs (which finds a deleted cluster's Secret) reads that one, and
/// must not take this Secret for a kubeconfig.
pub const CLUSTER_ANNOTATION: &str = "capstan.dev/k3s-cluster";

/// The Secret's name for `cluster`.
pub fn secret_name(cluster: &str) -> String {
    format!("capstan-k3s-{cluster}")
}

/// A K3s cluster's generated secrets. `Debug` shows fingerprints only.
#[derive(Clone, PartialEq, Eq)]
pub struct K3sSecrets {
    /// `--token` of every server and agent.
    pub token: String,
    /// The password of the cluster's datastore user.
    pub datastore_password: String,
}

impl fmt::Debug for K3sSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("K3sSecrets").finish_non_exhaustive()
    }
}

/// Reading or creating the Secret failed.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    /// The management cluster refused or did not answer.
    #[error("the K3s secrets of `{cluster}` in {NAMESPACE}")]
    Cluster {
        /// The workload cluster.
        cluster: String,
        /// The cluster operation that failed, and its cause.
        #[source]
        source: Box<ClusterError>,
    },
    /// The Secret exists but lacks a key, or was made by someone else.
    #[error(
        "Secret {NAMESPACE}/{name} lacks `{key}` or is not capstan's: delete it only if no server of the cluster was ever started with it"
    )]
    Malformed {
        /// The Secret's name.
        name: String,
        /// The missing key.
        key: &'static str,
    },
    /// The system gave no randomness.
    #[error("no randomness to generate the K3s secrets of `{0}`")]
    Random(String),
}

/// The secrets of `cluster`, generated and stored on first use.
///
/// # Errors
/// [`SecretsError`] when the management cluster fails or holds a foreign or broken Secret.
pub async fn k3s_secrets<C: ClusterClient>(
    management: &C,
    cluster: &str,
) -> Result<K3sSecrets, SecretsError> {
    let name = secret_name(cluster);
    let wrap = |source| SecretsError::Cluster {
        cluster: cluster.to_owned(),
        source: Box::new(source),
    };
    if let Some(existing) = management.secret(NAMESPACE, &name).await.map_err(wrap)? {
        return read(&name, &existing);
    }
    let fresh = K3sSecrets {
        token: generate_secret().map_err(|_| SecretsError::Random(cluster.to_owned()))?,
        datastore_password: generate_secret()
            .map_err(|_| SecretsError::Random(cluster.to_owned()))?,
    };
    match management
        .write_secret(NAMESPACE, &name, &record(cluster, &fresh))
        .await
    {
        Ok(_) => {
            tracing::info!(cluster, secret = %format!("{NAMESPACE}/{name}"), "generated the K3s token and datastore password");
            Ok(fresh)
        }
        Err(err) if err.is_conflict() => {
            let written = management.secret(NAMESPACE, &name).await.map_err(wrap)?;
            read(&name, &written.unwrap_or_default())
        }
        Err(err) => Err(wrap(err)),
    }
}

fn record(cluster: &str, secrets: &K3sSecrets) -> SecretRecord {
    SecretRecord {
        data: BTreeMap::from([
            (TOKEN_KEY.to_owned(), secrets.token.clone().into_bytes()),
            (
                DATASTORE_PASSWORD_KEY.to_owned(),
                secrets.datastore_password.clone().into_bytes(),
            ),
        ]),
        labels: BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())]),
        annotations: BTreeMap::from([(CLUSTER_ANNOTATION.to_owned(), cluster.to_owned())]),
        resource_version: None,
    }
}

fn read(name: &str, secret: &SecretRecord) -> Result<K3sSecrets, SecretsError> {
    if secret.labels.get(MANAGED_BY_LABEL).map(String::as_str) != Some(MANAGED_BY) {
        return Err(SecretsError::Malformed {
            name: name.to_owned(),
            key: MANAGED_BY_LABEL_KEY,
        });
    }
    let value = |key: &'static str| {
        secret
            .data
            .get(key)
            .and_then(|bytes| String::from_utf8(bytes.clone()).ok())
            .filter(|text| !text.is_empty())
            .ok_or_else(|| SecretsError::Malformed {
                name: name.to_owned(),
                key,
            })
    };
    let secrets = K3sSecrets {
        token: value(TOKEN_KEY)?,
        datastore_password: value(DATASTORE_PASSWORD_KEY)?,
    };
    crate::redact::remember(&secrets.token);
    crate::redact::remember(&secrets.datastore_password);
    Ok(secrets)
}

/// Named in [`SecretsError::Malformed`] when the managed-by label is missing.
const MANAGED_BY_LABEL_KEY: &str = "label app.kubernetes.io/managed-by=capstan";
