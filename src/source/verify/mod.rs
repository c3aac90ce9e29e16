//! Verified commits: a revision of the tracked branch is applied only when its commits are
//! signed by a key the operator allows (`source.verify` in the daemon's configuration, never in
//! the repository it verifies). SSH signatures ([`ssh`], `git config gpg.format ssh`) are
//! checked against an allowed-signers file, OpenPGP signatures ([`openpgp`], GnuPG) against a
//! file of public keys; `git verify-commit` with the same files is the judge of both.
//!
//! # Guarantees
//! - Mode `head`: the tip must carry a good signature by an allowed key. Mode `all`: every
//!   commit the tip brings must: those reachable from it and from none of the revisions already
//!   verified (nor from `since`, which the operator vouches for). With no verified revision yet,
//!   that is the whole history. More than `maxCommits` to verify is refused, saying so.
//! - In both modes a new tip must descend from the last verified revision
//!   ([`Verifier::check_descent`]): a signature binds a commit's contents, not the branch it
//!   is pushed to nor when, so an older signed commit pushed back (a rollback), a signed
//!   commit of another branch, or a rewritten history is refused (`NotDescendant`), unless
//!   the operator allows that one rewrite (`allowRewrite: {from, to}`), which then holds only
//!   while `from` is the last verified revision: once `to` is applied it allows nothing more.
//!   Where the last verified revision is kept, so that every replica refuses alike, is
//!   [`record`]'s.
//! - A refusal names the commit, the signer's key fingerprint when there is a signature, and
//!   why; commits are checked oldest first, so the one named is the oldest refused.
//! - The key files are read at each verification and parsed again only when their contents
//!   changed: a key added to or removed from them takes effect at the next poll, no restart.
//! - Only daemon-side files are read; a commit chooses nothing but which key it claims.

pub mod openpgp;
pub mod record;
pub mod ssh;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use git2::Oid;
use serde::Deserialize;

/// Largest key file read: a team's keys are a few KiB.
const MAX_KEY_FILE_BYTES: u64 = 1024 * 1024;

/// Which commits must be signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The tip of the branch.
    Head,
    /// Every commit the tip brings since the last verified revision.
    All,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Head => "head",
            Mode::All => "all",
        })
    }
}

/// What the operator asks for (`source.verify` in the daemon's configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyPolicy {
    /// Which commits must be signed.
    pub mode: Mode,
    /// SSH keys allowed to sign, in git's `gpg.ssh.allowedSignersFile` format.
    pub allowed_signers: Option<PathBuf>,
    /// OpenPGP public keys allowed to sign (armored or binary).
    pub openpgp_keys: Option<PathBuf>,
    /// Mode `all`: most commits verified for one revision.
    pub max_commits: u32,
    /// Mode `all`: a commit the operator vouches for; its history is not verified.
    pub since: Option<Oid>,
    /// The one history rewrite the operator allows: a tip `to` that does not descend from
    /// the last verified revision `from`.
    pub allow_rewrite: Option<Rewrite>,
}

/// A history rewrite the operator allows (`allowRewrite: {from, to}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rewrite {
    /// The last verified revision it may replace.
    pub from: Oid,
    /// The tip that may replace it.
    pub to: Oid,
}

impl VerifyPolicy {
    /// Commits verified for one revision at most, unless the configuration says otherwise: a
    /// push rarely brings more, and a first run over a long unsigned history should stop early
    /// and say so (set `since`) rather than walk it all.
    pub const DEFAULT_MAX_COMMITS: u32 = 1000;
}

/// A key file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than any key file should be.
    #[error("{path} is larger than {MAX_KEY_FILE_BYTES} bytes: not a key file")]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// A line of an allowed-signers file is not valid.
    #[error("{path}:{line}")]
    Line {
        /// The file.
        path: PathBuf,
        /// The line, counted from 1.
        line: usize,
        /// What is wrong with it and how to fix it.
        #[source]
        source: ssh::InvalidLine,
    },
    /// A line (or, for OpenPGP, a key) is not valid.
    #[error("{path}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line, for an allowed-signers file.
        line: Option<usize>,
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// Who signed a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// The key's fingerprint: `SHA256:...` for SSH, the 40 hex digits for OpenPGP.
    pub fingerprint: String,
    /// The principals of its allowed-signers line, or the OpenPGP key's first user id.
    pub identity: String,
}

impl std::fmt::Display for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.fingerprint, self.identity)
    }
}

/// Why a revision is not applied.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// A commit carries no signature.
    #[error("commit {commit} is not signed")]
    Unsigned {
        /// The commit.
        commit: Oid,
    },
    /// A commit is signed by a key the files do not allow.
    #[error("commit {commit} is signed by {fingerprint}, which is not an allowed key ({allowed})")]
    KeyNotAllowed {
        /// The commit.
        commit: Oid,
        /// The signing key's fingerprint.
        fingerprint: String,
        /// The file that would have to allow it.
        allowed: String,
    },
    /// A commit's signature does not match its contents (or does not parse).
    #[error("commit {commit} has a bad signature by {fingerprint}: {detail}")]
    BadSignature {
        /// The commit.
        commit: Oid,
        /// The signing key's fingerprint, or `unknown key` when the signature does not parse.
        fingerprint: String,
        /// What does not match.
        detail: String,
    },
    /// An allowed key may not make this signature (revoked, expired, outside its validity or
    /// namespaces).
    #[error("commit {commit} is signed by {fingerprint}, which may not sign it: {why}")]
    KeyNotValid {
        /// The commit.
        commit: Oid,
        /// The signing key's fingerprint.
        fingerprint: String,
        /// Which limit of the key the signature is outside (revoked, expired, namespace).
        why: String,
    },
    /// A commit carries a kind of signature capstan does not verify.
    #[error("commit {commit} carries {what}, which capstan cannot verify (SSH and OpenPGP only)")]
    Unsupported {
        /// The commit.
        commit: Oid,
        /// What it carries.
        what: String,
    },
    /// Mode `all`: more commits to verify than allowed.
    #[error(
        "more than {limit} commits to verify up to {tip} (mode all): set source.verify.since to a commit you vouch for, or raise maxCommits"
    )]
    TooManyCommits {
        /// The tip.
        tip: Oid,
        /// `maxCommits`.
        limit: u32,
    },
    /// The tip does not descend from the last verified revision.
    #[error(
        "commit {tip} does not descend from {last}, the last verified revision{held}: a rollback or a rewritten history is not applied under source.verify; if this rewrite is deliberate, set `allowRewrite: {{from: {last}, to: {tip}}}` under source.verify in the daemon's configuration and restart it",
        held = if *in_mirror { "" } else { " (which the branch no longer holds)" }
    )]
    NotDescendant {
        /// The tip.
        tip: Oid,
        /// The last verified revision.
        last: Oid,
        /// Whether the mirror holds `last` (else the branch was rewritten past it).
        in_mirror: bool,
    },
    /// The record of the last verified revision cannot be read or written.
    #[error("no new revision is applied until the record of the last verified revision answers")]
    Record(#[source] record::RecordError),
    /// The allowed keys cannot be read.
    #[error("the allowed keys cannot be read")]
    Keys(#[source] KeyFileError),
    /// The commits could not be read from the mirror.
    #[error("commit {commit} cannot be read from the mirror")]
    Repository {
        /// The commit.
        commit: Oid,
        /// What libgit2 said.
        #[source]
        source: git2::Error,
    },
}

impl Refusal {
    /// The status reason (`SourceVerified=False`) for this refusal.
    pub fn reason(&self) -> &'static str {
        use crate::status::reasons;
        match self {
            Refusal::Unsigned { .. } => reasons::UNSIGNED,
            Refusal::KeyNotAllowed { .. } => reasons::KEY_NOT_ALLOWED,
            Refusal::BadSignature { .. } => reasons::BAD_SIGNATURE,
            Refusal::KeyNotValid { .. } => reasons::KEY_NOT_VALID,
            Refusal::Unsupported { .. } => reasons::UNSUPPORTED_SIGNATURE,
            Refusal::TooManyCommits { .. } => reasons::TOO_MANY_COMMITS,
            Refusal::NotDescendant { .. } => reasons::NOT_DESCENDANT,
            Refusal::Record(_) => reasons::RECORD_UNAVAILABLE,
            Refusal::Keys(_) => reasons::KEYS_UNREADABLE,
            Refusal::Repository { .. } => reasons::UNVERIFIABLE,
        }
    }

    /// A `kind` (`SSH`, `OpenPGP`) signature that does not parse: its key is unknown.
    fn unparsable(commit: Oid, kind: &str, err: impl std::fmt::Display) -> Self {
        Refusal::BadSignature {
            commit,
            fingerprint: "unknown key".to_owned(),
            detail: format!("the {kind} signature does not parse: {err}"),
        }
    }

    /// A signature by an allowed, valid key that does not match the commit.
    fn mismatch(commit: Oid, fingerprint: &str, err: impl std::fmt::Display) -> Self {
        Refusal::BadSignature {
            commit,
            fingerprint: fingerprint.to_owned(),
            detail: format!("it does not match the commit ({err})"),
        }
    }

    /// A signature by a key that `file`, the file of allowed keys, does not hold (`None`:
    /// no such file is configured; `setting` names it, `kind` the signatures it is for).
    fn not_allowed(
        commit: Oid,
        fingerprint: String,
        file: Option<&Path>,
        setting: &str,
        kind: &str,
    ) -> Self {
        let allowed = match file {
            Some(path) => format!("not in {}", path.display()),
            None => format!("no {setting} file is configured for {kind} signatures"),
        };
        Refusal::KeyNotAllowed {
            commit,
            fingerprint,
            allowed,
        }
    }
}

/// A revision that passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The tip.
    pub commit: Oid,
    /// Who signed the tip.
    pub signer: Signer,
    /// How many commits were verified.
    pub commits: usize,
}

/// A key file, parsed, with the contents it was parsed from (parsed again only when they
/// change).
struct Cached<T> {
    contents: Vec<u8>,
    keys: Arc<T>,
}

/// Verifies revisions against the operator's policy; shared by the tracker and the previews.
pub struct Verifier {
    policy: VerifyPolicy,
    ssh: Mutex<Option<Cached<ssh::AllowedSigners>>>,
    openpgp: Mutex<Option<Cached<openpgp::OpenPgpKeys>>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// The keys in force for one verification.
struct Keys {
    ssh: Option<Arc<ssh::AllowedSigners>>,
    openpgp: Option<Arc<openpgp::OpenPgpKeys>>,
}

impl Verifier {
    /// A verifier for `policy` (the key files are read at the first verification).
    pub fn new(policy: VerifyPolicy) -> Self {
        Verifier {
            policy,
            ssh: Mutex::new(None),
            openpgp: Mutex::new(None),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &VerifyPolicy {
        &self.policy
    }

    /// Reads the key files now, to refuse a broken one before the daemon starts.
    ///
    /// # Errors
    /// When a key file cannot be read or holds an invalid key.
    pub fn check_keys(&self) -> Result<(), KeyFileError> {
        self.keys().map(|_| ())
    }

    /// Verifies the commits `tip` brings, as the mode says: the tip alone, or (mode `all`)
    /// every commit reachable from it and from none of `vouched` (revisions verified before)
    /// nor the policy's `since`.
    ///
    /// # Errors
    /// The first refusal, oldest commit first.
    pub fn verify(
        &self,
        repository: &git2::Repository,
        tip: Oid,
        vouched: &[Oid],
    ) -> Result<Verified, Refusal> {
        let keys = self.keys().map_err(Refusal::Keys)?;
        let commits = match self.policy.mode {
            Mode::Head => vec![tip],
            Mode::All => self.commits_to_verify(repository, tip, vouched)?,
        };
        let mut tip_signer = None;
        for &commit in commits.iter().rev() {
            let signer = verify_commit(repository, commit, &keys)?;
            if commit == tip {
                tip_signer = Some(signer);
            }
        }
        let signer = match tip_signer {
            Some(signer) => signer,
            // The tip is vouched for (a revision verified before, or `since`): its signature
            // still says who signed it.
            None => verify_commit(repository, tip, &keys)?,
        };
        Ok(Verified {
            commit: tip,
            signer,
            commits: commits.len(),
        })
    }

    /// Whether `tip` may follow `last`, the last verified revision: it is `last`, descends
    /// from it, or is the rewrite the policy allows from it. Nothing verified yet allows any
    /// tip.
    ///
    /// # Errors
    /// [`Refusal::NotDescendant`] otherwise (also when the mirror does not hold `last`: no
    /// descent can be shown from a commit the branch lost).
    pub fn check_descent(
        &self,
        repository: &git2::Repository,
        tip: Oid,
        last: Option<Oid>,
    ) -> Result<(), Refusal> {
        let Some(last) = last else {
            return Ok(());
        };
        if tip == last {
            return Ok(());
        }
        if self.policy.allow_rewrite
            == Some(Rewrite {
                from: last,
                to: tip,
            })
        {
            tracing::warn!(from = %last, to = %tip, "history rewrite allowed by source.verify.allowRewrite");
            return Ok(());
        }
        let in_mirror = repository.find_commit(last).is_ok();
        if in_mirror && repository.graph_descendant_of(tip, last).unwrap_or(false) {
            return Ok(());
        }
        Err(Refusal::NotDescendant {
            tip,
            last,
            in_mirror,
        })
    }

    /// The commits reachable from `tip` and from none of `vouched` (nor `since`), newest
    /// first; at most `max_commits`.
    fn commits_to_verify(
        &self,
        repository: &git2::Repository,
        tip: Oid,
        vouched: &[Oid],
    ) -> Result<Vec<Oid>, Refusal> {
        let failed = |commit: Oid| move |source| Refusal::Repository { commit, source };
        let mut walk = repository.revwalk().map_err(failed(tip))?;
        walk.push(tip).map_err(failed(tip))?;
        for &hidden in vouched.iter().chain(self.policy.since.iter()) {
            // A vouched commit the mirror does not hold (gone with a force-push long ago)
            // hides nothing.
            if repository.find_commit(hidden).is_ok() {
                walk.hide(hidden).map_err(failed(hidden))?;
            }
        }
        let limit = self.policy.max_commits as usize;
        // The walk is lazy: it stops one past the limit, however long the history.
        let commits = walk
            .take(limit + 1)
            .collect::<Result<Vec<Oid>, _>>()
            .map_err(failed(tip))?;
        if commits.len() > limit {
            return Err(Refusal::TooManyCommits {
                tip,
                limit: self.policy.max_commits,
            });
        }
        Ok(commits)
    }

    fn keys(&self) -> Result<Keys, KeyFileError> {
        Ok(Keys {
            ssh: load(
                self.policy.allowed_signers.as_deref(),
                &self.ssh,
                ssh::AllowedSigners::parse,
            )?,
            openpgp: load(
                self.policy.openpgp_keys.as_deref(),
                &self.openpgp,
                openpgp::OpenPgpKeys::parse,
            )?,
        })
    }
}

/// The keys of `path`, read now and parsed again only when the contents changed.
fn load<T>(
    path: Option<&Path>,
    cache: &Mutex<Option<Cached<T>>>,
    parse: fn(&Path, &[u8]) -> Result<T, KeyFileError>,
) -> Result<Option<Arc<T>>, KeyFileError> {
    let Some(path) = path else {
        return Ok(None);
    };
    let contents = read_bounded(path)?;
    let mut cache = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(cached) = cache.as_ref()
        && cached.contents == contents
    {
        return Ok(Some(Arc::clone(&cached.keys)));
    }
    let keys = Arc::new(parse(path, &contents)?);
    if cache.is_some() {
        tracing::info!(file = %path.display(), "allowed keys changed; read again");
    }
    *cache = Some(Cached {
        contents,
        keys: Arc::clone(&keys),
    });
    Ok(Some(keys))
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, KeyFileError> {
    use std::io::Read as _;
    let read_error = |source| KeyFileError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut contents = Vec::new();
    file.take(MAX_KEY_FILE_BYTES + 1)
        .read_to_end(&mut contents)
        .map_err(read_error)?;
    if contents.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(KeyFileError::TooLarge {
            path: path.to_owned(),
        });
    }
    Ok(contents)
}

/// The armor line each kind of signature git writes starts with.
const SSH_ARMOR: &str = "-----BEGIN SSH SIGNATURE-----";
const OPENPGP_ARMOR: &str = "-----BEGIN PGP SIGNATURE-----";
const X509_ARMOR: &str = "-----BEGIN SIGNED MESSAGE-----";

/// Verifies one commit's signature against `keys`.
fn verify_commit(
    repository: &git2::Repository,
    commit: Oid,
    keys: &Keys,
) -> Result<Signer, Refusal> {
    let (signature, signed) = match repository.extract_signature(&commit, None) {
        Ok(pair) => pair,
        Err(err) if err.code() == git2::ErrorCode::NotFound => {
            return Err(Refusal::Unsigned { commit });
        }
        Err(source) => return Err(Refusal::Repository { commit, source }),
    };
    let Ok(armored) = std::str::from_utf8(&signature) else {
        return Err(Refusal::Unsupported {
            commit,
            what: "a signature that is not text".to_owned(),
        });
    };
    let armored = armored.trim_start();
    if armored.starts_with(SSH_ARMOR) {
        let committed = repository
            .find_commit(commit)
            .map_err(|source| Refusal::Repository { commit, source })?
            .committer()
            .when()
            .seconds();
        ssh::verify(keys.ssh.as_deref(), commit, armored, &signed, committed)
    } else if armored.starts_with(OPENPGP_ARMOR) {
        openpgp::verify(
            keys.openpgp.as_deref(),
            commit,
            armored,
            &signed,
            std::time::SystemTime::now(),
        )
    } else {
        let what = if armored.starts_with(X509_ARMOR) {
            "an X.509 (gpgsm) signature".to_owned()
        } else {
            "an unknown kind of signature".to_owned()
        };
        Err(Refusal::Unsupported { commit, what })
    }
}

/// Where verification stands, as the status reports it (`SourceVerified`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyReport {
    /// The revision reconciled passed.
    Verified {
        /// `main@sha1:...`.
        revision: String,
        /// Who signed its tip.
        signer: Signer,
        /// The mode it was verified in.
        mode: Mode,
    },
    /// The branch's tip was refused.
    Refused {
        /// The refused tip, `main@sha1:...`.
        tip: String,
        /// The status reason ([`Refusal::reason`]).
        reason: &'static str,
        /// The refusal, naming the commit, the key and why.
        message: String,
        /// The last verified revision, still reconciled (none: nothing is).
        kept: Option<String>,
    },
}

impl VerifyReport {
    /// What the `SourceVerified` condition says: its message when True, its reason and
    /// message when False.
    pub fn outcome(&self) -> Result<String, (&'static str, String)> {
        match self {
            VerifyReport::Verified {
                revision,
                signer,
                mode,
            } => Ok(format!("{revision} is signed by {signer} (mode {mode})")),
            VerifyReport::Refused {
                tip,
                reason,
                message,
                kept,
            } => {
                let kept = kept.as_ref().map_or_else(
                    || {
                        "no verified revision is reconciled meanwhile: nothing is applied"
                            .to_owned()
                    },
                    |kept| format!("still reconciling {kept}, the last verified revision"),
                );
                Err((reason, format!("{tip} is not applied: {message}; {kept}")))
            }
        }
    }

    /// The report of `refusal` of `tip`, `kept` being reconciled meanwhile.
    pub fn refused(tip: &impl ToString, refusal: &Refusal, kept: Option<&impl ToString>) -> Self {
        VerifyReport::Refused {
            tip: tip.to_string(),
            reason: refusal.reason(),
            message: crate::errors::error_chain(refusal),
            kept: kept.map(ToString::to_string),
        }
    }
}
