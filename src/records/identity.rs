//! A cluster's identity: a random UID minted before the first record of a new cluster is
//! written, kept in `capstan-system/capstan-cluster-<name>`, and stamped on every record of
//! that cluster's life ([`super::IDENTITY_ANNOTATION`]). A cluster deleted and added again
//! under the same name gets a new one, so nothing the old one left (a bundle whose CA keys
//! someone may hold, a "bootstrapped" mark, a pinned CA) is ever taken for the new one's.
//!
//! # Guarantees
//! - Minted once: two replicas racing both end with the one written first (the loser's
//!   create is a 409 and it reads the winner's).
//! - Deleted last when its cluster is deleted, so while any other record of it remains, the
//!   identity those records carry is still the cluster's and the deletion is taken up again.

use std::collections::BTreeMap;
use std::fmt;

use super::{
    Expected, IdentityCheck, NAMESPACE, RecordError, RecordKind, Standing, failed, judge, stamp,
};
use crate::providers::kube::{ClusterClient, SecretRecord};

/// The identity record's key holding the UID.
pub const UID_KEY: &str = "uid";

/// The identity record's name for `cluster`.
pub fn record_name(cluster: &str) -> String {
    format!("capstan-cluster-{cluster}")
}

/// One life of a cluster's name: 32 hex digits of randomness.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterUid(String);

impl ClusterUid {
    /// The identity spelled `text` (as a record carries it).
    pub fn new(text: &str) -> Self {
        ClusterUid(text.to_owned())
    }

    /// A fresh identity.
    ///
    /// # Errors
    /// When the system has no randomness to give.
    pub fn generate() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)?;
        Ok(ClusterUid(
            bytes.iter().map(|b| format!("{b:02x}")).collect(),
        ))
    }

    /// The UID as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterUid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The identity of `cluster` on the management cluster `client` reaches, `None` when it has
/// none yet (a new cluster, or one whose records are all gone).
///
/// # Errors
/// [`RecordError::Refused`] when the Secret of that name is not the cluster's identity
/// record; [`RecordError::Cluster`] when the management cluster fails.
pub async fn current<C: ClusterClient>(
    client: &C,
    cluster: &str,
) -> Result<Option<ClusterUid>, RecordError> {
    let name = record_name(cluster);
    let Some(secret) = client
        .secret(NAMESPACE, &name)
        .await
        .map_err(failed(NAMESPACE, &name))?
    else {
        return Ok(None);
    };
    read(cluster, &name, &secret).map(Some)
}

/// The identity of `cluster`, minted and recorded now when it has none.
///
/// # Errors
/// As [`current`]; [`RecordError::Random`] without randomness.
pub async fn mint<C: ClusterClient>(client: &C, cluster: &str) -> Result<ClusterUid, RecordError> {
    if let Some(uid) = current(client, cluster).await? {
        return Ok(uid);
    }
    let uid = ClusterUid::generate().map_err(|_| RecordError::Random(cluster.to_owned()))?;
    let name = record_name(cluster);
    let mut record = SecretRecord {
        data: BTreeMap::from([(UID_KEY.to_owned(), uid.as_str().as_bytes().to_vec())]),
        ..SecretRecord::default()
    };
    stamp(
        &mut record,
        RecordKind::ClusterIdentity,
        cluster,
        Some(&uid),
    );
    match client.write_secret(NAMESPACE, &name, &record).await {
        Ok(_) => {
            tracing::info!(cluster, identity = %uid, record = %format!("{NAMESPACE}/{name}"), "minted the cluster's identity");
            Ok(uid)
        }
        Err(err) if err.is_conflict() => current(client, cluster)
            .await?
            .ok_or_else(|| failed(NAMESPACE, &name)(err)),
        Err(err) => Err(failed(NAMESPACE, &name)(err)),
    }
}

/// The UID an identity record holds.
fn read(cluster: &str, name: &str, secret: &SecretRecord) -> Result<ClusterUid, RecordError> {
    let expected = Expected {
        kind: RecordKind::ClusterIdentity,
        owner: cluster,
        identity: IdentityCheck::Any,
    };
    let uid = secret
        .data
        .get(UID_KEY)
        .and_then(|bytes| std::str::from_utf8(bytes).ok())
        .map(str::trim)
        .filter(|uid| !uid.is_empty() && uid.bytes().all(|b| b.is_ascii_hexdigit()));
    match (judge(NAMESPACE, name, secret, &expected)?, uid) {
        (Standing::Ours, Some(uid)) => Ok(ClusterUid::new(uid)),
        _ => Err(super::RecordRefusal {
            namespace: NAMESPACE.to_owned(),
            name: name.to_owned(),
            found: "an identity record without a readable `uid`".to_owned(),
            wanted: expected.to_string(),
            hint: format!(
                "delete it only together with every other record of cluster `{cluster}` (the records carry the identity it held)"
            ),
        }
        .into()),
    }
}
