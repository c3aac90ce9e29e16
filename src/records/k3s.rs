//! Secrets capstan generates for a K3s cluster and must find again after a restart: the K3s
//! cluster token (every later server and agent presents the same one) and the password of the
//! cluster's datastore user. They live in one Secret per cluster in the management cluster's
//! `capstan-system` namespace (a `k3s-secrets` record, [`crate::records`]), never in Git, logs
//! or status. The record also names the datastore database capstan provisioned for the
//! cluster ([`DATASTORE_ANNOTATION`]), so deleting the cluster, whose file is gone by then,
//! knows which database and user to drop.
//!
//! # Guarantees
//! - Only the cluster's own record, of its identity, is read or written; a Secret of that
//!   name that is anything else is refused by name.
//! - Both are known to the redactor ([`crate::redact`]) once generated or read.
//! - Generated once: a Secret that exists is read, never regenerated; two replicas racing to
//!   create it both end with the one that was written first (the loser's create is a 409 and
//!   it reads the winner's).
//! - `Debug` shows fingerprints only.

use std::collections::BTreeMap;
use std::fmt;

use crate::providers::datastore::generate_secret;
use crate::providers::kube::{ClusterClient, SecretRecord};
use crate::records::{ClusterRecords, NAMESPACE, RecordError, RecordKind};

/// Secret key of the K3s cluster token.
pub const TOKEN_KEY: &str = "k3s-token";
/// Secret key of the datastore user's password.
pub const DATASTORE_PASSWORD_KEY: &str = "datastore-password";

/// The datastore database capstan provisioned for the cluster, `<server>/<database>` (a
/// server of `datastores:` in `capstan.yaml`); absent for the embedded SQLite and a DSN given
/// whole (`endpointFrom`), whose database capstan did not create.
pub const DATASTORE_ANNOTATION: &str = "capstan.dev/datastore-database";

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
    /// The management cluster refused or did not answer, or the Secret is not the cluster's
    /// record.
    #[error("the K3s secrets of `{cluster}` in {NAMESPACE}")]
    Record {
        /// The workload cluster.
        cluster: String,
        /// Why.
        #[source]
        source: Box<RecordError>,
    },
    /// The Secret lacks a key.
    #[error(
        "Secret {NAMESPACE}/{name} lacks `{key}`: delete it only if no server of the cluster was ever started with it"
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

impl SecretsError {
    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            SecretsError::Record { source, .. } => source.is_transient(),
            SecretsError::Malformed { .. } => false,
            SecretsError::Random(_) => true,
        }
    }
}

/// The datastore database a K3s cluster's servers use, as its record names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvisionedDatabase {
    /// The datastore server (a name under `datastores:` in `capstan.yaml`).
    pub server: String,
    /// The database, and the user of the same name.
    pub database: String,
}

impl ProvisionedDatabase {
    fn annotation(&self) -> String {
        format!("{}/{}", self.server, self.database)
    }

    /// The database `record` names, if it names one.
    pub fn of(record: &SecretRecord) -> Option<Self> {
        let (server, database) = record
            .annotations
            .get(DATASTORE_ANNOTATION)?
            .split_once('/')?;
        Some(ProvisionedDatabase {
            server: server.to_owned(),
            database: database.to_owned(),
        })
    }
}

/// The secrets of `cluster`, generated and stored on first use, its record naming `database`
/// (the database capstan provisions for it, if any). `live`: the cluster was seen running (a
/// record an earlier capstan made is adopted only then).
///
/// # Errors
/// [`SecretsError`] when the management cluster fails or holds a foreign or broken Secret.
pub async fn k3s_secrets<C: ClusterClient>(
    management: &C,
    cluster: &str,
    database: Option<&ProvisionedDatabase>,
    live: bool,
) -> Result<K3sSecrets, SecretsError> {
    let name = secret_name(cluster);
    let records = ClusterRecords::new(management, cluster, live);
    let fresh = || -> Result<SecretRecord, RecordError> {
        let random = |_| RecordError::Random(cluster.to_owned());
        let secrets = K3sSecrets {
            token: generate_secret().map_err(random)?,
            datastore_password: generate_secret().map_err(random)?,
        };
        Ok(record(&secrets, database))
    };
    let (stored, created) = records
        .read_or_create(NAMESPACE, &name, RecordKind::K3sSecrets, fresh)
        .await
        .map_err(wrap(cluster))?;
    if created {
        tracing::info!(cluster, secret = %format!("{NAMESPACE}/{name}"), "generated the K3s token and datastore password");
    }
    let secrets = read(&name, &stored)?;
    if let Some(database) = database {
        name_database(&records, &stored, database)
            .await
            .map_err(wrap(cluster))?;
    }
    Ok(secrets)
}

/// Names `database` on the cluster's record `stored` unless it does: before the database is
/// provisioned, so a deletion finds what to drop.
async fn name_database<C: ClusterClient>(
    records: &ClusterRecords<'_, C>,
    stored: &SecretRecord,
    database: &ProvisionedDatabase,
) -> Result<(), RecordError> {
    if ProvisionedDatabase::of(stored).as_ref() == Some(database) {
        return Ok(());
    }
    let mut named = stored.clone();
    named
        .annotations
        .insert(DATASTORE_ANNOTATION.to_owned(), database.annotation());
    let name = secret_name(records.cluster());
    records
        .put(
            NAMESPACE,
            &name,
            RecordKind::K3sSecrets,
            named,
            Some(stored),
        )
        .await
        .map(drop)
}

fn wrap(cluster: &str) -> impl Fn(RecordError) -> SecretsError + '_ {
    move |source| SecretsError::Record {
        cluster: cluster.to_owned(),
        source: Box::new(source),
    }
}

fn record(secrets: &K3sSecrets, database: Option<&ProvisionedDatabase>) -> SecretRecord {
    SecretRecord {
        data: BTreeMap::from([
            (TOKEN_KEY.to_owned(), secrets.token.clone().into_bytes()),
            (
                DATASTORE_PASSWORD_KEY.to_owned(),
                secrets.datastore_password.clone().into_bytes(),
            ),
        ]),
        annotations: database
            .map(|d| BTreeMap::from([(DATASTORE_ANNOTATION.to_owned(), d.annotation())]))
            .unwrap_or_default(),
        ..SecretRecord::default()
    }
}

fn read(name: &str, secret: &SecretRecord) -> Result<K3sSecrets, SecretsError> {
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
