//! Where the last verified revision is kept, so that every replica refuses the same
//! rollback.
//!
//! A revision's mirror (`refs/capstan/verified/<branch>`) is one replica's: a standby, or a
//! new pod whose mirror is empty, would take an older signed commit as if it were new. So
//! when the fleet has a management cluster, the last verified revision is also kept there
//! (the daemon's `verified` module implements [`VerifiedRecords`] with a Secret), read before
//! each new tip is verified and written before it is applied; the mirror's stays for a fleet
//! without one.
//!
//! # Guarantees
//! - A tip is applied only after the record names it; a record that cannot be read or written
//!   applies nothing new (`RecordUnavailable`), and the revision reconciled stays.
//! - The record only moves forward: it is replaced at the version read, by a tip that
//!   descends from what it named (or the rewrite the operator allowed from it).

use std::future::Future;
use std::pin::Pin;

use git2::Oid;

/// A boxed future: stores are used behind `dyn` by the tracker.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The record cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[error("the last verified revision cannot be {action} {location}")]
pub struct RecordError {
    /// `read from` or `written to`.
    pub action: &'static str,
    /// Where: `Secret capstan-system/NAME on the management cluster`.
    pub location: String,
    /// What the store said.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// The last verified revision as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The commit.
    pub commit: Oid,
    /// The store's version of the record, the precondition for replacing it.
    pub version: Option<String>,
}

/// Where every replica reads the last verified revision of the branch it follows.
pub trait VerifiedRecords: Send + Sync {
    /// The last verified revision, if one was recorded.
    fn read(&self) -> BoxFuture<'_, Result<Option<Recorded>, RecordError>>;

    /// Records `commit` as the last verified revision, replacing `previous` (as read: a
    /// record changed since is not overwritten, and the write fails).
    fn write<'a>(
        &'a self,
        commit: Oid,
        previous: Option<&'a Recorded>,
    ) -> BoxFuture<'a, Result<(), RecordError>>;
}
