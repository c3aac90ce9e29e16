//! The operator's limits on what a revision may do with secrets: where the secrets its files
//! name may be read from ([`SecretPolicy`], read through a [`SecretReader`]), and where the
//! secrets capstan holds may be sent ([`Pins`]). [`Admission`] checks a revision against both
//! before anything of it is applied or previewed.
//!
//! A revision of the tracked branch is trusted to describe clusters, not to move credentials:
//! `capstan.yaml` names its secret sources and connection URLs, but the daemon's flags decide
//! which of them are allowed, so a commit can neither read a secret the operator did not give
//! the object that names it, nor send a secret to a server the operator did not pin.
//!
//! # Guarantees
//! - A source is bound to its owner: the environment variable of a secret is exactly
//!   `<prefix><KIND>_<NAME>_<FIELD>` (e.g. `CAPSTAN_PROXMOX_HOMELAB_TOKEN`) and its file lies
//!   under `<secrets-dir>/<kind>/<name>/` (e.g. `proxmox/homelab/token`), so one cluster's
//!   `endpointFrom` can never name another cluster's DSN, nor a Proxmox connection a
//!   datastore's password, nor anything any of them the daemon's own variables.
//! - A file is read only when, after every symbolic link is resolved, it is a regular file
//!   inside `--secrets-dir` of at most [`MAX_SECRET_BYTES`].
//! - Every Proxmox connection's `url` and `tlsFingerprint`, and every datastore server's
//!   `url`, must be the ones `--pin` gives: a revision that changes one, or adds a connection,
//!   is refused whole (nothing of it is applied) until the operator pins the new value. Pins
//!   live in the daemon's flags, so neither a commit nor a restart can move them.
//! - [`Admission`] does no I/O (previews stay pure); the reader checks the same rules again,
//!   and the file system's, when it reads.

mod admission;
mod pins;
mod policy;
mod reader;

use std::sync::Arc;

pub use admission::{Admission, PinCheck};
pub use pins::{Pin, PinError, Pins};
pub use policy::{
    DEFAULT_ENV_PREFIX, MAX_SECRET_BYTES, PolicyError, Refusal, SecretPolicy, SecretUse,
};
pub use reader::{SecretError, SecretReader};

/// The operator's limits as the daemon's flags give them.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Where secrets may come from.
    pub policy: Arc<SecretPolicy>,
    /// What every revision is checked against.
    pub admission: Admission,
}

/// The limits' flags are unusable.
#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    /// `--secrets-env-prefix` or `--secrets-dir`.
    #[error("cannot apply the secret policy")]
    Policy(#[from] PolicyError),
    /// `--pin`.
    #[error("cannot apply the pins")]
    Pins(#[from] PinError),
}
