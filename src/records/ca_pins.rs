//! The CA each workload cluster's API server was first seen with, pinned outside its VMs.
//!
//! A kubeconfig read from a control plane names the CA capstan verifies the API server with;
//! root on that VM could swap it for its own and have capstan talk to a server of its choice.
//! So the CA first seen (at `kubeadm init`, or when capstan first reads a cluster made before
//! it pinned CAs) is recorded in a Secret per cluster in the management cluster's
//! `capstan-system` namespace, `capstan-ca-<cluster>`, and every later kubeconfig must name the
//! same one. The record survives restarts and leader changes; a Secret rather than a ConfigMap
//! because whoever may change it decides whom capstan trusts.
//!
//! A fleet without a management cluster keeps the pins in the daemon's memory: they last until
//! it restarts.
//!
//! # Guarantees
//! - The record is the cluster's `ca-pin` record ([`crate::records`]): a Secret of that name
//!   that is another record, another cluster's or another identity's is refused by name, never
//!   read as a pin nor overwritten.
//! - A CA other than the pinned one is refused ([`PinError::Changed`], naming the cluster, both
//!   fingerprints and how to accept a new CA on purpose: delete the record). Nothing is
//!   replaced automatically.
//! - A record is written once: two replicas racing to create it both end with the one written
//!   first (the loser's create is a 409 and it reads the winner's).
//! - The record is read at every check, so deleting it takes effect without a restart, on
//!   every replica. While the management cluster does not answer, the pin this daemon read
//!   last stands in: the same CA is still accepted, no other.
//! - Deleting a cluster forgets its pin ([`CaPins::forget`]), so a new cluster of the same
//!   name is not refused for having a CA of its own.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::providers::kube::{AdminKubeconfig, ClusterClient, SecretRecord};
use crate::records::{ClusterRecords, NAMESPACE, RecordError, RecordKind, RecordRefusal};

/// The record's key holding the CA's fingerprint.
pub const FINGERPRINT_KEY: &str = "ca-sha256";
/// The record's key holding the CA certificates (PEM), for an operator to read.
pub const CERTIFICATE_KEY: &str = "ca.crt";
/// The record's name for `cluster`.
pub fn record_name(cluster: &str) -> String {
    format!("capstan-ca-{cluster}")
}

/// Where the pins are kept.
#[derive(Debug)]
pub enum PinStore<'a, C> {
    /// In the management cluster of that name.
    Management(&'a str, &'a C),
    /// In this daemon's memory only (the fleet has no management cluster).
    Memory,
}

// By hand: derived, they would require `C: Copy`, and a client is not.
impl<C> Clone for PinStore<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for PinStore<'_, C> {}

/// Checking or recording a pin failed.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The kubeconfig names another CA than the one pinned.
    #[error(
        "its CA {offered} is not the CA {pinned} pinned for cluster {cluster} when capstan first saw it, and a changed CA is not trusted; if the cluster's CA was replaced on purpose, {accept}"
    )]
    Changed {
        /// The workload cluster.
        cluster: String,
        /// The pinned CA's fingerprint.
        pinned: String,
        /// The offered CA's fingerprint.
        offered: String,
        /// How to accept the new CA.
        accept: String,
    },
    /// The management cluster refused or did not answer.
    #[error(
        "cannot read or record the pinned CA of cluster {cluster} (Secret {NAMESPACE}/{name} on management cluster `{management}`)"
    )]
    Management {
        /// The workload cluster.
        cluster: String,
        /// The record's name.
        name: String,
        /// The management cluster.
        management: String,
        /// The operation that failed, and its cause.
        #[source]
        source: Box<RecordError>,
    },
    /// The Secret of the record's name is not the cluster's CA record.
    #[error("the pinned CA of cluster {cluster} on management cluster `{management}`")]
    Refused {
        /// The workload cluster.
        cluster: String,
        /// The management cluster.
        management: String,
        /// What the Secret is.
        #[source]
        source: Box<RecordRefusal>,
    },
    /// The record lacks the fingerprint.
    #[error(
        "Secret {NAMESPACE}/{name} on management cluster `{management}` holds no CA fingerprint (key {FINGERPRINT_KEY}): delete it and capstan pins the CA it sees next"
    )]
    Malformed {
        /// The record's name.
        name: String,
        /// The management cluster.
        management: String,
    },
}

impl PinError {
    /// Whether retrying later may succeed (the management cluster may answer again).
    pub fn is_transient(&self) -> bool {
        match self {
            PinError::Management { source, .. } => source.is_transient(),
            PinError::Changed { .. } | PinError::Malformed { .. } | PinError::Refused { .. } => {
                false
            }
        }
    }
}

/// The pins as last read, by cluster: the CA fingerprint. With a management cluster the
/// record there is the truth and is read at every check (checks are rare: a kubeconfig is
/// admitted when it is read from a VM, not on every pass), so a record an operator deleted or
/// another replica wrote is seen at once; what was last read stands in only while the
/// management cluster does not answer. Without one, this is where the pins live.
#[derive(Debug, Default)]
pub struct CaPins {
    last_read: Mutex<BTreeMap<String, String>>,
}

impl CaPins {
    /// Checks that `admin` names the CA pinned for `cluster` in `store`, pinning it when none
    /// is.
    ///
    /// # Errors
    /// [`PinError`]: another CA is pinned, or the management cluster cannot tell (and this
    /// daemon has not read the pin before).
    pub async fn check<C: ClusterClient>(
        &self,
        store: PinStore<'_, C>,
        cluster: &str,
        admin: &AdminKubeconfig,
    ) -> Result<(), PinError> {
        let offered = admin.ca_fingerprint();
        let (pinned, accept) = match store {
            PinStore::Management(name, management) => {
                let pinned = match recorded(name, management, cluster, admin).await {
                    Ok(pinned) => pinned,
                    Err(err @ PinError::Management { .. }) => {
                        let last = self.lock().get(cluster).cloned();
                        if last.as_deref() != Some(offered) {
                            return Err(err);
                        }
                        tracing::warn!(cluster, error = %crate::errors::error_chain(&err), "the management cluster does not answer: the CA pinned when it last did is used");
                        offered.to_owned()
                    }
                    Err(err) => return Err(err),
                };
                let accept = format!(
                    "delete Secret {NAMESPACE}/{} on management cluster `{name}` and capstan pins the CA it sees next",
                    record_name(cluster)
                );
                (pinned, accept)
            }
            PinStore::Memory => (
                self.lock()
                    .get(cluster)
                    .cloned()
                    .unwrap_or_else(|| {
                        tracing::info!(cluster, ca = %offered, "pinned the cluster's CA in memory");
                        offered.to_owned()
                    }),
                "restart capstan (the fleet has no management cluster: pins last as long as the daemon)".to_owned(),
            ),
        };
        self.lock().insert(cluster.to_owned(), pinned.clone());
        if pinned != offered {
            return Err(PinError::Changed {
                cluster: cluster.to_owned(),
                pinned,
                offered: offered.to_owned(),
                accept,
            });
        }
        Ok(())
    }

    /// Forgets the CA pinned for `cluster` in `store` (the cluster was deleted: a new cluster
    /// of that name has a CA of its own). Forgetting what is not pinned succeeds.
    ///
    /// # Errors
    /// [`PinError::Management`] when the record cannot be deleted.
    pub async fn forget<C: ClusterClient>(
        &self,
        store: PinStore<'_, C>,
        cluster: &str,
    ) -> Result<(), PinError> {
        self.lock().remove(cluster);
        match store {
            PinStore::Memory => {}
            PinStore::Management(name, management) => {
                let record = record_name(cluster);
                let deleted = crate::records::delete_owned(
                    management,
                    NAMESPACE,
                    &record,
                    RecordKind::CaPin.name(),
                    cluster,
                )
                .await
                .map_err(|source| pin_failed(cluster, &record, name, source))?;
                if deleted {
                    tracing::info!(cluster, record = %format!("{NAMESPACE}/{record}"), management = name, "forgot the deleted cluster's pinned CA");
                }
            }
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        self.last_read
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// `source` as the error of the pin of `cluster` (record `name` on management cluster
/// `management`).
fn pin_failed(cluster: &str, name: &str, management: &str, source: RecordError) -> PinError {
    match source {
        RecordError::Refused(refusal) => PinError::Refused {
            cluster: cluster.to_owned(),
            management: management.to_owned(),
            source: Box::new(refusal),
        },
        other => PinError::Management {
            cluster: cluster.to_owned(),
            name: name.to_owned(),
            management: management.to_owned(),
            source: Box::new(other),
        },
    }
}

/// The fingerprint the record on `management` holds for `cluster`, recording `admin`'s CA
/// when there is none. The cluster is live (its kubeconfig was read from it), so a record
/// an earlier capstan made is adopted.
async fn recorded<C: ClusterClient>(
    management_name: &str,
    management: &C,
    cluster: &str,
    admin: &AdminKubeconfig,
) -> Result<String, PinError> {
    let name = record_name(cluster);
    let records = ClusterRecords::new(management, cluster, true);
    let (record, created) = records
        .read_or_create(NAMESPACE, &name, RecordKind::CaPin, || Ok(record(admin)))
        .await
        .map_err(|source| pin_failed(cluster, &name, management_name, source))?;
    if created {
        tracing::info!(cluster, ca = %admin.ca_fingerprint(), record = %format!("{NAMESPACE}/{name}"), management = management_name, "pinned the cluster's CA");
    }
    fingerprint_of(&record).ok_or_else(|| PinError::Malformed {
        name,
        management: management_name.to_owned(),
    })
}

fn record(admin: &AdminKubeconfig) -> SecretRecord {
    SecretRecord {
        data: BTreeMap::from([
            (
                FINGERPRINT_KEY.to_owned(),
                admin.ca_fingerprint().as_bytes().to_vec(),
            ),
            (CERTIFICATE_KEY.to_owned(), admin.ca_pem().into_bytes()),
        ]),
        ..SecretRecord::default()
    }
}

fn fingerprint_of(record: &SecretRecord) -> Option<String> {
    record
        .data
        .get(FINGERPRINT_KEY)
        .and_then(|bytes| String::from_utf8(bytes.clone()).ok())
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
}
