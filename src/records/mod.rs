//! The records capstan keeps in the management cluster: one Secret each, for a cluster's Flux
//! kubeconfig, its pinned CA, its K3s token, its Talos secrets bundle and talosconfig, its
//! runtime suspension and its identity. Start here to see which Secret is whose and what may
//! overwrite it.
//!
//! Each record carries, besides the label `app.kubernetes.io/managed-by: capstan`, three
//! annotations: its kind ([`KIND_ANNOTATION`], a [`RecordKind`]), the cluster that owns it
//! ([`OWNER_ANNOTATION`]) and, for the records of one incarnation of a cluster, that
//! incarnation's identity ([`IDENTITY_ANNOTATION`], minted by [`identity`] before the
//! cluster's first record is written). The label says "capstan's"; the annotations say
//! "this one, of this cluster, of this cluster's life": a commit can name any Secret as its
//! Flux delivery, and a cluster deleted and added again under the same name must not inherit
//! the keys of the one before.
//!
//! # Guarantees
//! - Every write of a record goes through [`ClusterRecords`]: it overwrites a Secret only when
//!   that Secret is the same record (kind, owner and, where it applies, identity), and
//!   otherwise refuses with a [`RecordRefusal`] naming the Secret and what it is, which the
//!   status reports as the `Blocked` reason `RecordRefused`. Nothing is overwritten silently
//!   and nothing panics.
//! - A record of another identity is never used: reading it is the same refusal.
//! - Migration: a record made before these annotations existed (its kind and owner are told by
//!   the annotations capstan wrote then) is adopted, stamped with its kind, owner and the
//!   cluster's identity, the first time it is read while the cluster's VMs exist, so upgrading
//!   capstan never locks out a live cluster. While no VM of the cluster exists such a record
//!   may be a leftover of an earlier cluster of that name: it is refused, saying so.
//! - Deleting a cluster deletes its records ([`delete_owned`]), its identity last, so a
//!   deletion interrupted part-way is found again by the records that remain.

pub mod ca_pins;
pub mod flux;
pub mod identity;
pub mod k3s;
pub mod talos;

use std::collections::BTreeMap;
use std::fmt;

use crate::providers::kube::{ClusterClient, ClusterError, SecretRecord};
pub use identity::ClusterUid;

/// The namespace of the management cluster that holds capstan's own records (every kind but
/// the Flux kubeconfig, which goes where the cluster file says).
pub use capstan_core::spec::RECORDS_NAMESPACE as NAMESPACE;

/// Marks what capstan made; capstan overwrites or deletes only Secrets carrying it.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The managed-by label's value.
pub const MANAGED_BY: &str = "capstan";
/// What a record is ([`RecordKind::name`]).
pub const KIND_ANNOTATION: &str = "capstan.dev/record-kind";
/// The cluster a record belongs to.
pub const OWNER_ANNOTATION: &str = "capstan.dev/owner-cluster";
/// The identity of the cluster's incarnation a record belongs to ([`ClusterUid`]).
pub const IDENTITY_ANNOTATION: &str = "capstan.dev/cluster-uid";

/// The kinds of record capstan keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordKind {
    /// The admin kubeconfig delivered to Flux (where `delivery.flux` says).
    FluxKubeconfig,
    /// The CA a cluster's API server was first seen with.
    CaPin,
    /// A K3s cluster's token and datastore password.
    K3sSecrets,
    /// A Talos cluster's secrets bundle (every CA key).
    TalosBundle,
    /// A Talos cluster's talosconfig for operators.
    Talosconfig,
    /// An operator's runtime suspension of a cluster.
    Suspension,
    /// A cluster's identity: which incarnation of the name the other records belong to.
    ClusterIdentity,
}

impl RecordKind {
    /// Every kind.
    pub const ALL: [RecordKind; 7] = [
        RecordKind::FluxKubeconfig,
        RecordKind::CaPin,
        RecordKind::K3sSecrets,
        RecordKind::TalosBundle,
        RecordKind::Talosconfig,
        RecordKind::Suspension,
        RecordKind::ClusterIdentity,
    ];

    /// The value of [`KIND_ANNOTATION`].
    pub fn name(self) -> &'static str {
        match self {
            RecordKind::FluxKubeconfig => "flux-kubeconfig",
            RecordKind::CaPin => "ca-pin",
            RecordKind::K3sSecrets => "k3s-secrets",
            RecordKind::TalosBundle => "talos-bundle",
            RecordKind::Talosconfig => "talosconfig",
            RecordKind::Suspension => "suspension",
            RecordKind::ClusterIdentity => "cluster-identity",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        RecordKind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// Whether a record of this kind belongs to one incarnation of its cluster (carries its
    /// identity): the secrets and trust of a cluster do; an operator's suspension names a
    /// cluster whatever its life, and the identity record is the identity.
    pub fn carries_identity(self) -> bool {
        !matches!(self, RecordKind::Suspension | RecordKind::ClusterIdentity)
    }
}

impl fmt::Display for RecordKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The annotations records made before kinds existed named their cluster with, by kind (the
/// suspension also had its label `capstan.dev/suspension`).
const LEGACY_OWNERS: [(&str, RecordKind); 5] = [
    ("capstan.dev/suspended-cluster", RecordKind::Suspension),
    ("capstan.dev/ca-of-cluster", RecordKind::CaPin),
    ("capstan.dev/k3s-cluster", RecordKind::K3sSecrets),
    ("capstan.dev/talos-cluster", RecordKind::TalosBundle),
    // Last: a Flux delivery of an earlier capstan wrote it onto whatever Secret it replaced.
    ("capstan.dev/cluster", RecordKind::FluxKubeconfig),
];

/// What a Secret says it is: its kind and owner as annotated, else as an earlier capstan's
/// annotations tell them; `None` for a Secret that says neither.
pub fn described(name: &str, secret: &SecretRecord) -> Option<(String, String)> {
    let annotations = &secret.annotations;
    if let (Some(kind), Some(owner)) = (
        annotations.get(KIND_ANNOTATION),
        annotations.get(OWNER_ANNOTATION),
    ) {
        return Some((kind.clone(), owner.clone()));
    }
    if annotations.contains_key(KIND_ANNOTATION) || annotations.contains_key(OWNER_ANNOTATION) {
        return None;
    }
    let (kind, owner) = legacy(name, secret)?;
    Some((kind.name().to_owned(), owner.to_owned()))
}

/// The kind and owner of a record an earlier capstan made, from its annotations.
fn legacy<'a>(name: &str, secret: &'a SecretRecord) -> Option<(RecordKind, &'a str)> {
    LEGACY_OWNERS.iter().find_map(|(annotation, kind)| {
        let owner = secret.annotations.get(*annotation)?;
        let kind = match kind {
            // One annotation for both Talos records: the talosconfig's name says which.
            RecordKind::TalosBundle if name.ends_with("-talosconfig") => RecordKind::Talosconfig,
            other => *other,
        };
        Some((kind, owner.as_str()))
    })
}

/// Which identity a record must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityCheck<'a> {
    /// Not checked (a record being deleted with its cluster, or only looked at).
    Any,
    /// This one; `None` when the cluster has no identity yet, so a record carrying one
    /// belongs to an earlier cluster of that name.
    Is(Option<&'a ClusterUid>),
}

/// What a record must be to be used or overwritten.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// Its kind.
    pub kind: RecordKind,
    /// Its cluster.
    pub owner: &'a str,
    /// Its identity.
    pub identity: IdentityCheck<'a>,
}

impl fmt::Display for Expected<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the `{}` record of cluster `{}`", self.kind, self.owner)?;
        match self.identity {
            IdentityCheck::Is(Some(uid)) if self.kind.carries_identity() => {
                write!(f, " (identity {uid})")
            }
            _ => Ok(()),
        }
    }
}

/// How a Secret stands against what was expected of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// It is the record expected, every annotation in place.
    Ours,
    /// It is the record expected as an earlier capstan made it (no kind, owner or identity
    /// annotation yet): adopted only while the cluster's VMs exist.
    Unmarked,
}

/// A Secret is not the record capstan expected there; nothing was written. Names the Secret,
/// what it is and what was expected, never its content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Secret {namespace}/{name} is {found}, not {wanted}: {hint}")]
pub struct RecordRefusal {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// What it is.
    pub found: String,
    /// What capstan expected.
    pub wanted: String,
    /// What to do.
    pub hint: String,
}

/// Judges `secret` (Secret `namespace/name`) against `expected`. Pure.
///
/// # Errors
/// A [`RecordRefusal`] when it is not capstan's, or is another kind, cluster or identity.
pub fn judge(
    namespace: &str,
    name: &str,
    secret: &SecretRecord,
    expected: &Expected<'_>,
) -> Result<Standing, RecordRefusal> {
    let refuse = |found: String, hint: &str| RecordRefusal {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        found,
        wanted: expected.to_string(),
        hint: hint.to_owned(),
    };
    const OTHER: &str = "capstan uses and overwrites only its record of the same kind and cluster; if this Secret is not needed, delete it, else choose another name (delivery.flux.secretName)";
    if secret.labels.get(MANAGED_BY_LABEL).map(String::as_str) != Some(MANAGED_BY) {
        return Err(refuse(
            format!("not capstan's (no label {MANAGED_BY_LABEL}={MANAGED_BY})"),
            "capstan never overwrites a Secret it did not make: delete or rename it, or choose another name (delivery.flux.secretName)",
        ));
    }
    let Some((kind, owner)) = described(name, secret) else {
        return Err(refuse(
            "a Secret of capstan's that says neither its kind nor its cluster".to_owned(),
            OTHER,
        ));
    };
    if kind != expected.kind.name() || owner != expected.owner {
        return Err(refuse(
            format!("a `{kind}` record of cluster `{owner}`"),
            OTHER,
        ));
    }
    let marked = secret.annotations.contains_key(KIND_ANNOTATION);
    let carried = secret.annotations.get(IDENTITY_ANNOTATION);
    let IdentityCheck::Is(wanted) = expected.identity else {
        return Ok(if marked {
            Standing::Ours
        } else {
            Standing::Unmarked
        });
    };
    if !expected.kind.carries_identity() {
        return Ok(if marked {
            Standing::Ours
        } else {
            Standing::Unmarked
        });
    }
    match (carried, wanted) {
        (Some(carried), Some(wanted)) if carried == wanted.as_str() => Ok(Standing::Ours),
        (Some(carried), _) => Err(refuse(
            format!("a `{kind}` record of an earlier cluster `{owner}` (identity {carried})"),
            "a record of another life of this cluster's name is never used: delete it if no machine of this cluster was configured from it",
        )),
        (None, _) => Ok(Standing::Unmarked),
    }
}

/// The refusal of an unmarked record while no VM of its cluster exists.
fn unmarked_without_machines(
    namespace: &str,
    name: &str,
    expected: &Expected<'_>,
) -> RecordRefusal {
    RecordRefusal {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        found: format!(
            "a `{}` record of cluster `{}` made before records carried an identity",
            expected.kind, expected.owner
        ),
        wanted: format!("one of the cluster `{}` being built now", expected.owner),
        hint: format!(
            "no VM of cluster `{}` exists, so it may be left by an earlier cluster of that name: delete it for the cluster to start with secrets of its own",
            expected.owner
        ),
    }
}

/// Reading, writing or deleting a record failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The Secret is not the record expected.
    #[error(transparent)]
    Refused(#[from] RecordRefusal),
    /// The management cluster refused or did not answer.
    #[error("cannot read or write Secret {namespace}/{name} on the management cluster")]
    Cluster {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The cluster operation that failed.
        #[source]
        source: Box<ClusterError>,
    },
    /// The system gave no randomness for a new identity.
    #[error("no randomness to mint the identity of cluster `{0}`")]
    Random(String),
}

impl RecordError {
    /// Whether retrying later may succeed (the management cluster may answer again); a
    /// refusal needs a person.
    pub fn is_transient(&self) -> bool {
        match self {
            RecordError::Cluster { source, .. } => source.is_transient(),
            RecordError::Refused(_) => false,
            RecordError::Random(_) => true,
        }
    }

    /// Whether the write lost a race (a 409: someone wrote the Secret first).
    pub fn is_conflict(&self) -> bool {
        matches!(self, RecordError::Cluster { source, .. } if source.is_conflict())
    }
}

/// The record refusal anywhere in `err`'s chain, if there is one.
pub fn refusal_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a RecordRefusal> {
    let mut next = Some(err);
    while let Some(err) = next {
        if let Some(refusal) = err.downcast_ref::<RecordRefusal>() {
            return Some(refusal);
        }
        if let Some(RecordError::Refused(refusal)) = err.downcast_ref::<RecordError>() {
            return Some(refusal);
        }
        // A boxed source is its own `dyn Error` (std's `impl Error for Box<T>`).
        if let Some(refusal) = err.downcast_ref::<Box<RecordRefusal>>() {
            return Some(refusal);
        }
        if let Some(boxed) = err.downcast_ref::<Box<RecordError>>()
            && let RecordError::Refused(refusal) = &**boxed
        {
            return Some(refusal);
        }
        next = err.source();
    }
    None
}

fn failed(namespace: &str, name: &str) -> impl FnOnce(ClusterError) -> RecordError {
    let (namespace, name) = (namespace.to_owned(), name.to_owned());
    move |source| RecordError::Cluster {
        namespace,
        name,
        source: Box::new(source),
    }
}

/// Writes the label and annotations `expected` asks for onto `record` (`uid`: the cluster's
/// identity, for a kind that carries one).
fn stamp(record: &mut SecretRecord, kind: RecordKind, owner: &str, uid: Option<&ClusterUid>) {
    record
        .labels
        .insert(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned());
    let annotations = &mut record.annotations;
    annotations.insert(KIND_ANNOTATION.to_owned(), kind.name().to_owned());
    annotations.insert(OWNER_ANNOTATION.to_owned(), owner.to_owned());
    match uid {
        Some(uid) => annotations.insert(IDENTITY_ANNOTATION.to_owned(), uid.to_string()),
        None => annotations.remove(IDENTITY_ANNOTATION),
    };
}

/// The records of one cluster on one management cluster, read and written through the one
/// guarded path.
///
/// # Guarantees
/// - [`ClusterRecords::read`] returns a record only when it is the cluster's, of that kind
///   and identity (adopting an unmarked one while `live`).
/// - [`ClusterRecords::put`] writes only over a record `read` returned (its resourceVersion
///   is the precondition: a Secret changed in between is a 409, never overwritten), or
///   creates one where there was none (a 409 if one appeared).
#[derive(Debug, Clone, Copy)]
pub struct ClusterRecords<'a, C> {
    client: &'a C,
    cluster: &'a str,
    live: bool,
}

impl<'a, C: ClusterClient> ClusterRecords<'a, C> {
    /// The records of `cluster` on the management cluster `client` reaches; `live` when the
    /// cluster's VMs exist (only then is an unmarked record adopted).
    pub fn new(client: &'a C, cluster: &'a str, live: bool) -> Self {
        ClusterRecords {
            client,
            cluster,
            live,
        }
    }

    /// The cluster's name.
    pub fn cluster(&self) -> &'a str {
        self.cluster
    }

    /// The record of `kind` at `namespace/name`, or `None` when there is no Secret there.
    ///
    /// # Errors
    /// [`RecordError::Refused`] when the Secret is not that record (or is unmarked while the
    /// cluster has no VM); [`RecordError::Cluster`] when the management cluster fails.
    pub async fn read(
        &self,
        namespace: &str,
        name: &str,
        kind: RecordKind,
    ) -> Result<Option<SecretRecord>, RecordError> {
        let Some(secret) = self
            .client
            .secret(namespace, name)
            .await
            .map_err(failed(namespace, name))?
        else {
            return Ok(None);
        };
        let uid = if kind.carries_identity() {
            identity::current(self.client, self.cluster).await?
        } else {
            None
        };
        let expected = Expected {
            kind,
            owner: self.cluster,
            identity: IdentityCheck::Is(uid.as_ref()),
        };
        match judge(namespace, name, &secret, &expected)? {
            Standing::Ours => Ok(Some(secret)),
            Standing::Unmarked if self.live => self.adopt(namespace, name, kind, secret).await,
            Standing::Unmarked => Err(unmarked_without_machines(namespace, name, &expected).into()),
        }
    }

    /// Stamps an unmarked record of the live cluster with its kind, owner and identity.
    async fn adopt(
        &self,
        namespace: &str,
        name: &str,
        kind: RecordKind,
        mut secret: SecretRecord,
    ) -> Result<Option<SecretRecord>, RecordError> {
        let uid = self.identity(kind).await?;
        stamp(&mut secret, kind, self.cluster, uid.as_ref());
        let version = self
            .client
            .write_secret(namespace, name, &secret)
            .await
            .map_err(failed(namespace, name))?;
        secret.resource_version = Some(version);
        tracing::info!(cluster = self.cluster, record = %format!("{namespace}/{name}"), %kind, "adopted a record made by an earlier capstan");
        Ok(Some(secret))
    }

    /// Writes `record` as the cluster's record of `kind` at `namespace/name`, stamped, over
    /// `over` (what [`ClusterRecords::read`] returned: `None` creates). Returns the record as
    /// written.
    ///
    /// # Errors
    /// [`RecordError::Cluster`] (a 409, [`RecordError::is_conflict`], when the Secret changed
    /// since it was read).
    pub async fn put(
        &self,
        namespace: &str,
        name: &str,
        kind: RecordKind,
        mut record: SecretRecord,
        over: Option<&SecretRecord>,
    ) -> Result<SecretRecord, RecordError> {
        let uid = self.identity(kind).await?;
        stamp(&mut record, kind, self.cluster, uid.as_ref());
        record.resource_version = over.and_then(|o| o.resource_version.clone());
        let version = self
            .client
            .write_secret(namespace, name, &record)
            .await
            .map_err(failed(namespace, name))?;
        record.resource_version = Some(version);
        Ok(record)
    }

    /// The record of `kind` at `namespace/name`, created from `fresh()` when there is none:
    /// for records generated once. Two replicas racing both end with the one written first.
    ///
    /// # Errors
    /// As [`ClusterRecords::read`] and [`ClusterRecords::put`].
    pub async fn read_or_create(
        &self,
        namespace: &str,
        name: &str,
        kind: RecordKind,
        fresh: impl FnOnce() -> Result<SecretRecord, RecordError>,
    ) -> Result<(SecretRecord, bool), RecordError> {
        if let Some(existing) = self.read(namespace, name, kind).await? {
            return Ok((existing, false));
        }
        match self.put(namespace, name, kind, fresh()?, None).await {
            Ok(written) => Ok((written, true)),
            Err(err) if err.is_conflict() => self
                .read(namespace, name, kind)
                .await?
                .map(|written| (written, false))
                .ok_or(err),
            Err(err) => Err(err),
        }
    }

    /// The identity a record of `kind` is stamped with: the cluster's, minted now if it has
    /// none (this is the cluster's first record); none for a kind that carries none.
    async fn identity(&self, kind: RecordKind) -> Result<Option<ClusterUid>, RecordError> {
        if kind.carries_identity() {
            identity::mint(self.client, self.cluster).await.map(Some)
        } else {
            Ok(None)
        }
    }
}

/// A record found by listing a management cluster.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Its kind, as it says (or as an earlier capstan's annotations tell).
    pub kind: String,
    /// Its cluster.
    pub owner: String,
    /// Its content and bookkeeping.
    pub record: SecretRecord,
}

/// Every record on the management cluster `client` reaches that names its cluster, sorted by
/// namespace and name. One list call.
///
/// # Errors
/// When the management cluster cannot list Secrets.
pub async fn list<C: ClusterClient>(client: &C) -> Result<Vec<Listed>, ClusterError> {
    let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY}");
    let secrets = client.secrets_labelled(&selector).await?;
    Ok(secrets
        .into_iter()
        .filter_map(|listed| {
            let (kind, owner) = described(&listed.name, &listed.record)?;
            Some(Listed {
                namespace: listed.namespace,
                name: listed.name,
                kind,
                owner,
                record: listed.record,
            })
        })
        .collect())
}

/// The records of every cluster, by cluster, from a listing.
pub fn by_owner(listed: Vec<Listed>) -> BTreeMap<String, Vec<Listed>> {
    let mut owners: BTreeMap<String, Vec<Listed>> = BTreeMap::new();
    for record in listed {
        owners.entry(record.owner.clone()).or_default().push(record);
    }
    owners
}

/// Deletes Secret `namespace/name` when it is a record of `kind` (a [`RecordKind::name`],
/// or a kind this capstan does not know) owned by `owner`, whatever its identity: the cluster
/// is being deleted. Returns whether it existed.
///
/// # Errors
/// [`RecordError::Refused`] when the Secret is not that record (nothing is deleted);
/// [`RecordError::Cluster`] when the management cluster fails.
pub async fn delete_owned<C: ClusterClient>(
    client: &C,
    namespace: &str,
    name: &str,
    kind: &str,
    owner: &str,
) -> Result<bool, RecordError> {
    let Some(secret) = client
        .secret(namespace, name)
        .await
        .map_err(failed(namespace, name))?
    else {
        return Ok(false);
    };
    let managed = secret.labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY);
    let is_it = described(name, &secret).is_some_and(|(k, o)| k == kind && o == owner);
    if !managed || !is_it {
        return Err(RecordRefusal {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            found: described(name, &secret).map_or_else(
                || "not a record of capstan's".to_owned(),
                |(k, o)| format!("a `{k}` record of cluster `{o}`"),
            ),
            wanted: format!("the `{kind}` record of the deleted cluster `{owner}`"),
            hint: "it changed since it was observed; the next pass looks again".to_owned(),
        }
        .into());
    }
    client
        .delete_secret(namespace, name)
        .await
        .map_err(failed(namespace, name))
}

#[cfg(test)]
mod tests;
