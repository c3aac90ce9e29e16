//! A Git remote followed through a bare mirror (libgit2): a poll is one ref advertisement for
//! the tracked branch; objects are fetched only when the tip moved; files are read from the
//! commit's tree in the object database, never from a working checkout.
//!
//! # Guarantees
//! - A poll that finds the tip unchanged transfers no objects (it counts one ls-remote and no
//!   fetch in [`SourceMetrics`]).
//! - The fetch refspec is forced (`+`), so a force-pushed branch is taken as it is and never
//!   wedges the mirror; a tip that does not descend from the previous one is reported.
//! - Only blobs are read: symbolic links in the tree are never followed (skipped and
//!   reported), submodules and files outside `path` are ignored; per-file and per-tree size
//!   limits are enforced before a blob's content is decoded.
//! - Every message about the remote goes through the [`Redactor`]: no credential appears in an
//!   error, a log line, the status or a metric.
//! - SSH host keys are checked against the known_hosts given (see [`KnownHosts`]); without
//!   one, an SSH remote is refused.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use git2::{Direction, FetchOptions, RemoteCallbacks};

use super::credentials::{CredentialError, Redactor};
use super::gc::GcPolicy;
use super::transport::{GitCredentials, TokenAuth};
use super::tree::{CommitFiles, GitFailure, Revision, TreeError};
use super::verify::{Refusal, Verified, Verifier};
use super::{Limits, SourceMetrics};

/// Following the remote failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The local mirror could not be created or opened.
    #[error("cannot open the mirror {path}")]
    Mirror {
        /// The mirror's folder.
        path: PathBuf,
        /// What libgit2 said, credentials redacted.
        #[source]
        source: GitFailure,
    },
    /// The remote's refs could not be listed (unreachable, credentials or host key refused).
    #[error("cannot list the refs of {remote}")]
    LsRemote {
        /// The remote (credentials redacted).
        remote: String,
        /// What libgit2 said, credentials redacted.
        #[source]
        source: GitFailure,
    },
    /// The remote has no such branch.
    #[error("{remote} has no branch {branch}")]
    MissingBranch {
        /// The remote (credentials redacted).
        remote: String,
        /// The branch.
        branch: String,
    },
    /// Fetching the new tip failed.
    #[error("cannot fetch {branch} from {remote}")]
    Fetch {
        /// The remote (credentials redacted).
        remote: String,
        /// The branch.
        branch: String,
        /// What libgit2 said, credentials redacted.
        #[source]
        source: GitFailure,
    },
    /// A credential could not be read.
    #[error("cannot read the Git credentials")]
    Credentials(#[source] CredentialError),
    /// A commit's files could not be read from the mirror.
    #[error(transparent)]
    Tree(#[from] TreeError),
}

impl GitError {
    /// Whether trying again later may succeed (the remote or the network may come back).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            GitError::LsRemote { .. }
                | GitError::Fetch { .. }
                | GitError::MissingBranch { .. }
                | GitError::Credentials(_)
        )
    }
}

/// How to reach the remote and what to read from it.
#[derive(Debug, Clone)]
pub struct GitOptions {
    /// The remote URL (`https://`, `ssh://`, `user@host:path`, `git://`, `file://`).
    pub url: String,
    /// The branch followed.
    pub branch: String,
    /// The folder of the repository holding `capstan.yaml` (none: the root).
    pub path: Option<PathBuf>,
    /// Where bare mirrors are kept (one folder per remote URL).
    pub mirror_root: PathBuf,
    /// Credentials.
    pub credentials: GitCredentials,
    /// Size limits.
    pub limits: Limits,
}

/// What a poll found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollOutcome {
    /// The tip is the one read last.
    Unchanged(Revision),
    /// The tip moved (or was read for the first time); its objects are in the mirror.
    Moved {
        /// The new tip.
        revision: Revision,
        /// The tip read before, if any.
        previous: Option<Revision>,
        /// The new tip does not descend from the previous one (a force-push).
        forced: bool,
    },
}

impl PollOutcome {
    /// The tip found.
    pub fn revision(&self) -> &Revision {
        match self {
            PollOutcome::Unchanged(revision) | PollOutcome::Moved { revision, .. } => revision,
        }
    }
}

/// A remote followed through a bare mirror.
pub struct GitSource {
    options: GitOptions,
    mirror: git2::Repository,
    mirror_path: PathBuf,
    last: Option<Revision>,
    redactor: Redactor,
    metrics: Arc<SourceMetrics>,
    gc: GcPolicy,
}

impl std::fmt::Debug for GitSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitSource")
            .field("remote", &self.remote_name())
            .field("branch", &self.options.branch)
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

/// The remote ref followed: `refs/heads/<branch>`, or a full ref name as given
/// (`refs/pull/7/head`, which forges keep for pull requests' heads).
fn remote_ref(branch: &str) -> String {
    if branch.starts_with("refs/") {
        branch.to_owned()
    } else {
        format!("refs/heads/{branch}")
    }
}

/// The ref the mirror keeps the fetched tip under.
fn mirror_ref(branch: &str) -> String {
    format!("refs/capstan/heads/{branch}")
}

/// The ref the mirror keeps the last verified tip under (commit verification), so a restarted
/// daemon resumes from it when the branch's tip is refused. Never touched by a fetch.
fn verified_ref(branch: &str) -> String {
    format!("refs/capstan/verified/{branch}")
}

impl GitSource {
    /// Opens (or creates) the bare mirror of `options.url` under `options.mirror_root`.
    ///
    /// # Errors
    /// [`GitError::Mirror`] when the folder cannot be created or is not a repository.
    pub fn open(
        options: GitOptions,
        redactor: Redactor,
        metrics: Arc<SourceMetrics>,
    ) -> Result<Self, GitError> {
        let mirror_path = options
            .mirror_root
            .join(mirror_folder_name(&redactor.redact(&options.url)));
        let mirror = match git2::Repository::open_bare(&mirror_path) {
            Ok(repo) => repo,
            Err(_) => {
                // Not there yet, or not a repository any more: a mirror holds nothing that
                // the remote does not, so it is made afresh.
                if mirror_path.exists() {
                    let _ = std::fs::remove_dir_all(&mirror_path);
                }
                git2::Repository::init_bare(&mirror_path).map_err(|err| GitError::Mirror {
                    path: mirror_path.clone(),
                    source: GitFailure::new(&err, &redactor),
                })?
            }
        };
        Ok(GitSource {
            options,
            mirror,
            mirror_path,
            last: None,
            redactor,
            metrics,
            gc: GcPolicy::default(),
        })
    }

    /// Collects the mirror as `policy` says (instead of [`GcPolicy::default`]).
    pub fn with_gc(mut self, policy: GcPolicy) -> Self {
        self.gc = policy;
        self
    }

    /// Collects the mirror when it is due ([`super::gc`]). A failure is logged: the mirror
    /// is whole either way, and the next poll that fetches tries again.
    fn collect_garbage(&mut self) {
        if let Err(err) =
            super::gc::collect_and_reopen(&mut self.mirror, &self.mirror_path, &self.gc)
        {
            tracing::warn!(
                mirror = %self.mirror_path.display(),
                "cannot collect the git mirror: {}",
                crate::errors::error_chain(&err)
            );
        }
    }

    /// The remote, credentials redacted.
    pub fn remote_name(&self) -> String {
        self.redactor.redact(&self.options.url)
    }

    /// The branch followed.
    pub fn branch(&self) -> &str {
        &self.options.branch
    }

    /// The remote's URL as given (it may hold a credential: never show it; see
    /// [`GitSource::remote_name`]).
    pub fn url(&self) -> &str {
        &self.options.url
    }

    /// The mirror's folder.
    pub fn mirror_path(&self) -> &Path {
        &self.mirror_path
    }

    /// The counters this source updates.
    pub fn metrics(&self) -> Arc<SourceMetrics> {
        Arc::clone(&self.metrics)
    }

    /// The redactor messages about this remote go through.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The tip read last.
    pub fn last(&self) -> Option<&Revision> {
        self.last.as_ref()
    }

    /// One ref advertisement: the commit the tracked branch points to on the remote.
    ///
    /// # Errors
    /// [`GitError::LsRemote`] when the remote cannot be reached or refuses us,
    /// [`GitError::MissingBranch`] when it has no such branch.
    pub fn ls_remote(&self) -> Result<git2::Oid, GitError> {
        self.metrics.count_ls_remote();
        let rejection = Arc::new(Mutex::new(None));
        if let (Some(token), TokenAuth::Bearer) = (
            &self.options.credentials.token,
            self.options.credentials.token_auth,
        ) {
            let token = token.read().map_err(GitError::Credentials)?;
            return self.advertise_with_bearer(&token, &rejection);
        }
        let callbacks = self.callbacks(&rejection)?;
        let mut remote = self
            .mirror
            .remote_anonymous(&self.options.url)
            .map_err(|err| self.ls_remote_error(&err, &rejection))?;
        let connection = remote
            .connect_auth(Direction::Fetch, Some(callbacks), None)
            .map_err(|err| self.ls_remote_error(&err, &rejection))?;
        let wanted = remote_ref(&self.options.branch);
        let heads = connection
            .list()
            .map_err(|err| self.ls_remote_error(&err, &rejection))?;
        heads
            .iter()
            .find(|head| head.name() == wanted)
            .map(git2::RemoteHead::oid)
            .ok_or_else(|| GitError::MissingBranch {
                remote: self.remote_name(),
                branch: self.options.branch.clone(),
            })
    }

    /// The ref advertisement with a bearer token. libgit2 sends custom headers only with a
    /// download, so the advertisement comes from one: when the tip did not move, the
    /// negotiation finds nothing to send and no object is transferred (counted as a fetch only
    /// when objects were). The tip's objects are in the mirror afterwards.
    fn advertise_with_bearer(
        &self,
        token: &str,
        rejection: &Arc<Mutex<Option<String>>>,
    ) -> Result<git2::Oid, GitError> {
        let header = format!("Authorization: Bearer {token}");
        let mut options = FetchOptions::new();
        options
            .remote_callbacks(self.callbacks(rejection)?)
            .download_tags(git2::AutotagOption::None)
            .update_fetchhead(false)
            .custom_headers(&[&header]);
        let mut remote = self
            .mirror
            .remote_anonymous(&self.options.url)
            .map_err(|err| self.ls_remote_error(&err, rejection))?;
        remote
            .download(&[self.refspec().as_str()], Some(&mut options))
            .map_err(|err| self.ls_remote_error(&err, rejection))?;
        if remote.stats().received_objects() > 0 {
            self.metrics.count_fetch();
        }
        let wanted = remote_ref(&self.options.branch);
        let tip = remote
            .list()
            .map_err(|err| self.ls_remote_error(&err, rejection))?
            .iter()
            .find(|head| head.name() == wanted)
            .map(git2::RemoteHead::oid);
        let _ = remote.disconnect();
        let tip = tip.ok_or_else(|| GitError::MissingBranch {
            remote: self.remote_name(),
            branch: self.options.branch.clone(),
        })?;
        self.mirror
            .reference(
                &mirror_ref(&self.options.branch),
                tip,
                true,
                "capstan: fetched",
            )
            .map_err(|err| GitError::Fetch {
                remote: self.remote_name(),
                branch: self.options.branch.clone(),
                source: GitFailure::new(&err, &self.redactor),
            })?;
        Ok(tip)
    }

    fn refspec(&self) -> String {
        format!(
            "+{}:{}",
            remote_ref(&self.options.branch),
            mirror_ref(&self.options.branch)
        )
    }

    /// Looks at the remote's tip and fetches it when it moved.
    ///
    /// # Errors
    /// As [`GitSource::ls_remote`], plus [`GitError::Fetch`].
    pub fn poll(&mut self) -> Result<PollOutcome, GitError> {
        let advertised = self.ls_remote()?;
        if let Some(last) = &self.last
            && last.commit == advertised
        {
            return Ok(PollOutcome::Unchanged(last.clone()));
        }
        let tip = if self.mirror.find_commit(advertised).is_ok() {
            advertised
        } else {
            self.fetch()?
        };
        let previous = self.last.clone().or_else(|| self.mirrored_tip());
        if let Ok(mut reference) = self
            .mirror
            .find_reference(&mirror_ref(&self.options.branch))
        {
            let _ = reference.set_target(tip, "capstan: tip read");
        }
        let forced = previous.as_ref().is_some_and(|previous| {
            previous.commit != tip
                && !self
                    .mirror
                    .graph_descendant_of(tip, previous.commit)
                    .unwrap_or(false)
        });
        let revision = Revision {
            branch: self.options.branch.clone(),
            commit: tip,
        };
        self.last = Some(revision.clone());
        // Only a moved tip brings objects (a fetch adds a pack), so only then may the mirror
        // have grown past its bounds.
        self.collect_garbage();
        Ok(PollOutcome::Moved {
            revision,
            previous: previous.filter(|p| p.commit != tip),
            forced,
        })
    }

    /// The tip a previous run of capstan fetched into the mirror, if any: what to reconcile
    /// when the remote cannot be reached at start.
    pub fn mirrored_tip(&self) -> Option<Revision> {
        let reference = self
            .mirror
            .find_reference(&mirror_ref(&self.options.branch))
            .ok()?;
        Some(Revision {
            branch: self.options.branch.clone(),
            commit: reference.target()?,
        })
    }

    /// Verifies the commits `tip` brings under `verifier`'s policy, the history of `vouched`
    /// (revisions verified before) taken as verified.
    ///
    /// # Errors
    /// Why the revision may not be applied.
    pub fn verify(
        &self,
        verifier: &Verifier,
        tip: git2::Oid,
        vouched: &[git2::Oid],
    ) -> Result<Verified, Refusal> {
        verifier.verify(&self.mirror, tip, vouched)
    }

    /// Verifies `tip` as the successor of `last`, the last verified revision: it must descend
    /// from it ([`Verifier::check_descent`]), and the commits it brings since must pass.
    ///
    /// # Errors
    /// Why the revision may not be applied.
    pub fn verify_after(
        &self,
        verifier: &Verifier,
        tip: git2::Oid,
        last: Option<git2::Oid>,
    ) -> Result<Verified, Refusal> {
        verifier.check_descent(&self.mirror, tip, last)?;
        let vouched: Vec<git2::Oid> = last.into_iter().collect();
        verifier.verify(&self.mirror, tip, &vouched)
    }

    /// The last revision verified by a previous run (or this one), if the mirror holds it.
    pub fn verified_tip(&self) -> Option<Revision> {
        let commit = self
            .mirror
            .find_reference(&verified_ref(&self.options.branch))
            .ok()?
            .target()?;
        self.mirror.find_commit(commit).ok()?;
        Some(Revision {
            branch: self.options.branch.clone(),
            commit,
        })
    }

    /// Records `revision` as the last verified one.
    ///
    /// # Errors
    /// When the mirror cannot be written.
    pub fn mark_verified(&self, revision: &Revision) -> Result<(), GitError> {
        self.mirror
            .reference(
                &verified_ref(&self.options.branch),
                revision.commit,
                true,
                "capstan: verified",
            )
            .map(|_| ())
            .map_err(|err| GitError::Mirror {
                path: self.mirror_path.clone(),
                source: GitFailure::new(&err, &self.redactor),
            })
    }

    /// Fetches the tracked branch (forced: history rewrites are taken) and returns its tip.
    fn fetch(&self) -> Result<git2::Oid, GitError> {
        self.metrics.count_fetch();
        let rejection = Arc::new(Mutex::new(None));
        let fetch_error =
            |err: &git2::Error, rejection: &Arc<Mutex<Option<String>>>| GitError::Fetch {
                remote: self.remote_name(),
                branch: self.options.branch.clone(),
                source: self.failure(err, rejection),
            };
        let callbacks = self.callbacks(&rejection)?;
        let mut options = FetchOptions::new();
        options
            .remote_callbacks(callbacks)
            .download_tags(git2::AutotagOption::None)
            .update_fetchhead(false);
        let refspec = self.refspec();
        let mut remote = self
            .mirror
            .remote_anonymous(&self.options.url)
            .map_err(|err| fetch_error(&err, &rejection))?;
        remote
            .fetch(&[refspec.as_str()], Some(&mut options), None)
            .map_err(|err| fetch_error(&err, &rejection))?;
        self.mirror
            .refname_to_id(&mirror_ref(&self.options.branch))
            .map_err(|err| fetch_error(&err, &rejection))
    }

    /// Reads `capstan.yaml` and the cluster files of `revision` from the object database.
    ///
    /// # Errors
    /// When an object is missing, a limit is exceeded, or `capstan.yaml` is missing or a link.
    pub fn read(&self, revision: &Revision) -> Result<CommitFiles, GitError> {
        Ok(super::tree::read_commit(
            &self.mirror,
            revision,
            self.options.path.as_deref(),
            &self.options.limits,
            &self.redactor,
        )?)
    }

    fn callbacks(
        &self,
        rejection: &Arc<Mutex<Option<String>>>,
    ) -> Result<RemoteCallbacks<'static>, GitError> {
        super::transport::callbacks(&self.options.credentials, &self.options.url, rejection)
            .map_err(GitError::Credentials)
    }

    fn failure(&self, err: &git2::Error, rejection: &Arc<Mutex<Option<String>>>) -> GitFailure {
        super::transport::failure(err, rejection, &self.redactor)
    }

    fn ls_remote_error(
        &self,
        err: &git2::Error,
        rejection: &Arc<Mutex<Option<String>>>,
    ) -> GitError {
        GitError::LsRemote {
            remote: self.remote_name(),
            source: self.failure(err, rejection),
        }
    }
}

/// A folder name for the mirror of `url`: readable and unique per URL.
pub(crate) fn mirror_folder_name(url: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(url.as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let tail: String = url
        .trim_end_matches('/')
        .trim_end_matches(".git")
        .rsplit(['/', ':'])
        .next()
        .unwrap_or("repo")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(40)
        .collect();
    format!("{tail}-{hex}.git")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_shown_as_flux_shows_them() {
        let revision = Revision {
            branch: "main".into(),
            commit: git2::Oid::from_str("0123456789abcdef0123456789abcdef01234567").expect("oid"),
        };
        assert_eq!(
            revision.to_string(),
            "main@sha1:0123456789abcdef0123456789abcdef01234567"
        );
    }

    #[test]
    fn mirror_folders_differ_per_url() {
        let a = mirror_folder_name("https://git.example/org/fleet.git");
        let b = mirror_folder_name("https://other.example/org/fleet.git");
        assert!(a.starts_with("fleet-") && a.ends_with(".git"), "{a}");
        assert_ne!(a, b);
    }
}
