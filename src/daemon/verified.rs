//! The last verified revision kept in the management cluster (`source.verify`), where every
//! replica reads it: a Secret `capstan-verified-<key>` in `capstan-system`, one per followed
//! remote and branch (see [`crate::source::verify::record`] for why).
//!
//! # Guarantees
//! - The Secret is marked as capstan's (`app.kubernetes.io/managed-by=capstan`) and as this
//!   kind of record (`capstan.dev/record-kind: verified-revision`), and names its branch
//!   (`capstan.dev/branch`). A Secret of that name without these marks, or whose commit does
//!   not parse, is an error, never an empty record: the daemon then applies nothing new until
//!   an operator looks (fail closed).
//! - It is replaced only at the `resourceVersion` read, so two replicas never move it
//!   backwards; it holds a commit id, nothing secret.

use std::collections::BTreeMap;

use git2::Oid;

use crate::providers::kube::{ClusterClient, SecretRecord};
use crate::records::{
    KIND_ANNOTATION as RECORD_KIND_ANNOTATION, MANAGED_BY, MANAGED_BY_LABEL, NAMESPACE,
};
use crate::source::verify::record::{BoxFuture, RecordError, Recorded, VerifiedRecords};

/// This record's kind (a fleet's record, not a cluster's: it is not one of
/// [`crate::records::RecordKind`], which each belong to a cluster).
pub const RECORD_KIND: &str = "verified-revision";

/// The annotation naming the branch whose revision the record holds.
pub const BRANCH_ANNOTATION: &str = "capstan.dev/branch";

/// The record's key holding the commit id (40 hex digits).
pub const COMMIT_KEY: &str = "commit";

/// The last verified revision of one remote's branch, in a management cluster.
#[derive(Debug, Clone)]
pub struct InCluster<C> {
    client: C,
    name: String,
    branch: String,
}

impl<C> InCluster<C> {
    /// The record of `branch` of the remote at `url`, through `client`.
    pub fn new(client: C, url: &str, branch: &str) -> Self {
        InCluster {
            client,
            name: record_name(url, branch),
            branch: branch.to_owned(),
        }
    }

    fn location(&self) -> String {
        format!("Secret {NAMESPACE}/{} on the management cluster", self.name)
    }

    fn failed(
        &self,
        action: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> RecordError {
        RecordError {
            action,
            location: self.location(),
            source: source.into(),
        }
    }
}

/// `capstan-verified-<16 hex digits>`: a digest of the remote (without any user or password
/// in its URL, so a rotated credential keeps the record) and the branch, so that daemons
/// following other repositories from one management cluster never share a record.
pub fn record_name(url: &str, branch: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("{}\n{branch}", without_userinfo(url)));
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("capstan-verified-{hex}")
}

/// `url` without the `user:password@` of a `scheme://` URL.
fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

impl<C: ClusterClient + Sync> VerifiedRecords for InCluster<C> {
    fn read(&self) -> BoxFuture<'_, Result<Option<Recorded>, RecordError>> {
        Box::pin(async move {
            let Some(secret) = self
                .client
                .secret(NAMESPACE, &self.name)
                .await
                .map_err(|err| self.failed("read from", err))?
            else {
                return Ok(None);
            };
            let is_record = secret.labels.get(MANAGED_BY_LABEL).map(String::as_str)
                == Some(MANAGED_BY)
                && secret
                    .annotations
                    .get(RECORD_KIND_ANNOTATION)
                    .map(String::as_str)
                    == Some(RECORD_KIND);
            if !is_record {
                return Err(self.failed(
                    "read from",
                    format!("it is not marked as capstan's {RECORD_KIND} record ({MANAGED_BY_LABEL}={MANAGED_BY}, {RECORD_KIND_ANNOTATION}: {RECORD_KIND}): find out who made it, then delete it"),
                ));
            }
            let commit = secret
                .data
                .get(COMMIT_KEY)
                .and_then(|bytes| std::str::from_utf8(bytes).ok())
                .filter(|text| text.len() == 40)
                .and_then(|text| Oid::from_str(text).ok())
                .ok_or_else(|| {
                    self.failed(
                        "read from",
                        format!("its `{COMMIT_KEY}` is not a commit id: find out who changed it, then delete it (the next verified revision is recorded anew)"),
                    )
                })?;
            Ok(Some(Recorded {
                commit,
                version: secret.resource_version,
            }))
        })
    }

    fn write<'a>(
        &'a self,
        commit: Oid,
        previous: Option<&'a Recorded>,
    ) -> BoxFuture<'a, Result<(), RecordError>> {
        Box::pin(async move {
            let record = SecretRecord {
                data: BTreeMap::from([(COMMIT_KEY.to_owned(), commit.to_string().into_bytes())]),
                labels: BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())]),
                annotations: BTreeMap::from([
                    (RECORD_KIND_ANNOTATION.to_owned(), RECORD_KIND.to_owned()),
                    (BRANCH_ANNOTATION.to_owned(), self.branch.clone()),
                ]),
                resource_version: previous.and_then(|p| p.version.clone()),
            };
            self.client
                .write_secret(NAMESPACE, &self.name, &record)
                .await
                .map(|_| ())
                .map_err(|err| self.failed("written to", err))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_one_per_remote_and_branch_whatever_credentials_the_url_carries() {
        let plain = record_name("https://git.example/org/fleet.git", "main");
        assert!(plain.starts_with("capstan-verified-"), "{plain}");
        assert_eq!(plain.len(), "capstan-verified-".len() + 16);
        assert_eq!(
            record_name("https://capstan:s3cret@git.example/org/fleet.git", "main"),
            plain
        );
        assert_ne!(
            record_name("https://git.example/org/fleet.git", "prod"),
            plain
        );
        assert_ne!(
            record_name("https://git.example/org/other.git", "main"),
            plain
        );
        assert_eq!(
            without_userinfo("git@git.example:org/fleet.git"),
            "git@git.example:org/fleet.git"
        );
    }
}
