//! The status branch of a remote, written through a bare repository of capstan's own (apart
//! from the mirror the tracked branch is read through): fetch its tip, commit capstan's files
//! on top of it, push without force, and on a rejection fetch, rewrite and retry.
//!
//! # Guarantees
//! - A push never forces: the refspec has no `+`. A non-fast-forward rejection (someone else
//!   pushed) is answered by fetching the new tip and committing capstan's files on top of it,
//!   so the other writer's commits and files survive.
//! - Only capstan's files ([`render::is_capstan_file`]) are written or removed; every other
//!   file of the tip is kept as it is.
//! - No commit is made when the tree would equal the tip's, and a branch that does not exist
//!   yet starts with an orphan commit.
//! - Every file and the message pass [`guard::find_secret`] before anything is committed.
//! - Every message about the remote goes through the [`Redactor`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use git2::{FetchOptions, Oid, PushOptions, Signature};
use jiff::Timestamp;

use super::StatusBranchError;
use crate::backoff::random_unit;
use crate::source::gc::{self, GcPolicy};
use crate::source::transport;
use crate::source::{GitCredentials, GitFailure, Limits, Redactor};
use crate::spec::{CAPSTAN_SIGNATURE, parse_signature};
use crate::status::FleetStatus;
use crate::status::branch::{self as render, Files, guard};

/// Where and how to write the status branch.
#[derive(Debug, Clone)]
pub struct BranchOptions {
    /// The remote (the one the daemon follows).
    pub url: String,
    /// The status branch.
    pub branch: String,
    /// Credentials for the remote.
    pub credentials: GitCredentials,
    /// Where capstan keeps its repositories (the status repository goes in a folder of it).
    pub mirror_root: PathBuf,
}

/// What a commit says besides the files.
#[derive(Debug, Clone)]
pub struct CommitSettings {
    /// The author, `Name <email>` (`status.author`).
    pub author: String,
    /// Mark the commit `[skip ci]`.
    pub skip_ci: bool,
    /// Pushes tried before a rejection is reported.
    pub max_attempts: u32,
}

/// What [`StatusRepository::publish`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// The branch already held these files.
    Unchanged,
    /// A commit landed.
    Pushed {
        /// The commit.
        commit: String,
        /// Its message.
        message: String,
        /// Pushes it took (more than one after a concurrent writer).
        attempts: u32,
    },
}

enum PushOutcome {
    Accepted,
    /// Not a fast-forward: someone else pushed first.
    Behind(String),
}

/// The status branch of one remote.
pub struct StatusRepository {
    repo: git2::Repository,
    path: PathBuf,
    options: BranchOptions,
    redactor: Redactor,
    /// The branch's tip on the remote as last seen (`None` inside: no such branch), once
    /// fetched.
    tip: Option<Option<Oid>>,
    /// When the repository is collected: each publish leaves loose objects, each fetch a pack.
    gc: GcPolicy,
}

impl std::fmt::Debug for StatusRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusRepository")
            .field("remote", &self.remote_name())
            .field("branch", &self.options.branch)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl StatusRepository {
    /// Opens (or creates) capstan's bare repository for `options`' remote.
    ///
    /// # Errors
    /// When the folder cannot be created or opened.
    pub fn open(options: BranchOptions, redactor: Redactor) -> Result<Self, StatusBranchError> {
        let folder = format!(
            "status-{}",
            crate::source::git::mirror_folder_name(&redactor.redact(&options.url))
        );
        let path = options.mirror_root.join(folder);
        let repo = match git2::Repository::open_bare(&path) {
            Ok(repo) => repo,
            Err(_) => {
                // Nothing is kept here that the remote does not hold: made afresh when broken.
                if path.exists() {
                    let _ = std::fs::remove_dir_all(&path);
                }
                git2::Repository::init_bare(&path).map_err(|err| StatusBranchError::Open {
                    path: path.clone(),
                    source: GitFailure::new(&err, &redactor),
                })?
            }
        };
        Ok(StatusRepository {
            repo,
            path,
            options,
            redactor,
            tip: None,
            gc: GcPolicy::default(),
        })
    }

    /// Collects the repository as `policy` says (instead of [`GcPolicy::default`]).
    #[must_use]
    pub fn with_gc(mut self, policy: GcPolicy) -> Self {
        self.gc = policy;
        self
    }

    /// Collects the repository when it is due, after a push landed (only then did it grow by
    /// a commit). A failure is logged: the repository is whole either way, and the next
    /// publish tries again.
    fn collect_garbage(&mut self) {
        if let Err(err) = gc::collect_and_reopen(&mut self.repo, &self.path, &self.gc) {
            tracing::warn!(
                repository = %self.path.display(),
                "cannot collect the status repository: {}",
                crate::errors::error_chain(&err)
            );
        }
    }

    /// The remote, credentials redacted.
    pub fn remote_name(&self) -> String {
        self.redactor.redact(&self.options.url)
    }

    /// The status branch.
    pub fn branch(&self) -> &str {
        &self.options.branch
    }

    /// The repository's folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn tracking_ref(&self) -> String {
        format!("refs/capstan/status/{}", self.options.branch)
    }

    fn outgoing_ref(&self) -> String {
        format!("refs/capstan/outgoing/{}", self.options.branch)
    }

    /// Fetches the branch's tip from the remote; `None` when the remote has no such branch.
    ///
    /// # Errors
    /// When the remote cannot be reached or refuses us.
    pub fn fetch(&mut self) -> Result<Option<Oid>, StatusBranchError> {
        let wanted = format!("refs/heads/{}", self.options.branch);
        let rejection = Arc::new(Mutex::new(None));
        let bearer = transport::bearer_header(&self.options.credentials)
            .map_err(StatusBranchError::Credentials)?;
        let mut options = FetchOptions::new();
        options
            .remote_callbacks(self.callbacks(&rejection)?)
            .download_tags(git2::AutotagOption::None)
            .update_fetchhead(false);
        if let Some(header) = &bearer {
            options.custom_headers(&[header.as_str()]);
        }
        let mut remote = self
            .repo
            .remote_anonymous(&self.options.url)
            .map_err(|err| self.fetch_error(&err, &rejection))?;
        // One connection: the advertisement comes with the download (which transfers nothing
        // when the tip is known, or when the branch does not exist).
        let refspec = format!("+{wanted}:{}", self.tracking_ref());
        remote
            .download(&[refspec.as_str()], Some(&mut options))
            .map_err(|err| self.fetch_error(&err, &rejection))?;
        let tip = remote
            .list()
            .map_err(|err| self.fetch_error(&err, &rejection))?
            .iter()
            .find(|head| head.name() == wanted)
            .map(git2::RemoteHead::oid);
        let _ = remote.disconnect();
        drop(remote);
        match tip {
            Some(tip) => {
                self.remember_tip(tip)?;
                Ok(Some(tip))
            }
            None => {
                self.tip = Some(None);
                Ok(None)
            }
        }
    }

    fn remember_tip(&mut self, tip: Oid) -> Result<(), StatusBranchError> {
        self.repo
            .reference(
                &self.tracking_ref(),
                tip,
                true,
                "capstan: status branch tip",
            )
            .map_err(|err| self.write_error("the tracking ref", &err))?;
        self.tip = Some(Some(tip));
        Ok(())
    }

    /// The tip as last seen, fetched the first time.
    ///
    /// # Errors
    /// As [`StatusRepository::fetch`].
    pub fn known_tip(&mut self) -> Result<Option<Oid>, StatusBranchError> {
        match self.tip {
            Some(tip) => Ok(tip),
            None => self.fetch(),
        }
    }

    /// capstan's files at `tip` (none for no tip).
    ///
    /// # Errors
    /// When an object cannot be read.
    pub fn files_at(&self, tip: Option<Oid>) -> Result<Files, StatusBranchError> {
        let mut files = Files::new();
        let Some(tip) = tip else {
            return Ok(files);
        };
        let tree = self
            .repo
            .find_commit(tip)
            .and_then(|commit| commit.tree())
            .map_err(|err| self.read_error("the tip's tree", &err))?;
        let mut found = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |folder, entry| {
            let path = format!("{folder}{}", entry.name().unwrap_or_default());
            if entry.kind() == Some(git2::ObjectType::Blob) && render::is_capstan_file(&path) {
                found.push((path, entry.id()));
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(|err| self.read_error("the tip's tree", &err))?;
        let odb = self
            .repo
            .odb()
            .map_err(|err| self.read_error("the object database", &err))?;
        for (path, id) in found {
            // Anyone may push to the branch: a file of capstan's too large to be one of its
            // own is not read, only replaced.
            let (size, _) = odb
                .read_header(id)
                .map_err(|err| self.read_error(&path, &err))?;
            if size as u64 > Limits::default().max_file_bytes {
                files.insert(path, String::new());
                continue;
            }
            let blob = self
                .repo
                .find_blob(id)
                .map_err(|err| self.read_error(&path, &err))?;
            files.insert(path, String::from_utf8_lossy(blob.content()).into_owned());
        }
        Ok(files)
    }

    /// The message of the commit at `tip`.
    ///
    /// # Errors
    /// When the commit cannot be read.
    pub fn message_at(&self, tip: Oid) -> Result<String, StatusBranchError> {
        self.repo
            .find_commit(tip)
            .map(|commit| String::from_utf8_lossy(commit.message_bytes()).into_owned())
            .map_err(|err| self.read_error("the tip's message", &err))
    }

    /// Renders `status` on top of the branch's tip and pushes it when it differs; on a
    /// rejection, fetches the new tip and tries again (up to `settings.max_attempts`, with
    /// jitter). Returns what it did and capstan's files as the branch now holds them.
    ///
    /// # Errors
    /// [`StatusBranchError::Secret`] when a file would hold a secret (nothing is committed),
    /// [`StatusBranchError::Rejected`] when every push was rejected, and the remote's errors.
    pub fn publish(
        &mut self,
        status: &FleetStatus,
        settings: &CommitSettings,
        now: Timestamp,
    ) -> Result<(Published, Files), StatusBranchError> {
        let mut tip = self.known_tip()?;
        let mut last_rejection = String::new();
        let attempts = settings.max_attempts.max(1);
        for attempt in 1..=attempts {
            let before_files = self.files_at(tip)?;
            let before = render::parse_clusters(&before_files);
            let after = render::cluster_files(status, &before);
            let files = render::render(&after, status);
            let message = render::commit_message(
                &before,
                &after,
                status.revision.as_deref(),
                settings.skip_ci,
            );
            self.check(&files, &message)?;
            let Some(commit) = self.commit_on(tip, &files, &message, &settings.author, now)? else {
                return Ok((Published::Unchanged, files));
            };
            match self.push(commit)? {
                PushOutcome::Accepted => {
                    self.collect_garbage();
                    return Ok((
                        Published::Pushed {
                            commit: commit.to_string(),
                            message,
                            attempts: attempt,
                        },
                        files,
                    ));
                }
                PushOutcome::Behind(message) => {
                    tracing::info!(branch = %self.options.branch, attempt, "status push rejected as not a fast-forward: fetching the new tip");
                    last_rejection = message;
                    if attempt < attempts {
                        // Jitter: two writers rejected together should not retry in lockstep.
                        let pause = Duration::from_millis(50 * u64::from(attempt))
                            .mul_f64(1.0 + random_unit());
                        std::thread::sleep(pause);
                        tip = self.fetch()?;
                    }
                }
            }
        }
        Err(StatusBranchError::Rejected {
            remote: self.remote_name(),
            branch: self.options.branch.clone(),
            attempts,
            source: GitFailure::from_message(&last_rejection, &self.redactor),
        })
    }

    /// Refuses files or a message holding a secret, loudly.
    fn check(&self, files: &Files, message: &str) -> Result<(), StatusBranchError> {
        let leak = files
            .iter()
            .find_map(|(path, text)| guard::find_secret(path, text, &self.redactor.redact(text)))
            .or_else(|| {
                guard::find_secret(
                    "the commit message",
                    message,
                    &self.redactor.redact(message),
                )
            });
        match leak {
            Some(leak) => {
                tracing::error!(branch = %self.options.branch, file = %leak.path, what = leak.what, "refusing to commit the status: it would hold a secret");
                Err(StatusBranchError::Secret {
                    leak: leak.to_string(),
                })
            }
            None => Ok(()),
        }
    }

    /// A commit of `files` over `parent`'s tree (others' files kept), or `None` when the tree
    /// would not change.
    fn commit_on(
        &self,
        parent: Option<Oid>,
        files: &Files,
        message: &str,
        author: &str,
        now: Timestamp,
    ) -> Result<Option<Oid>, StatusBranchError> {
        // Render leaves out names that are not labels; a path built otherwise is a bug that
        // must not reach the tree (`..`, `/` or a newline would escape or break it).
        if let Some(path) = files.keys().find(|path| !render::is_writable_path(path)) {
            return Err(StatusBranchError::UnsafePath { path: path.clone() });
        }
        let write_error = |what: &str, err: &git2::Error| self.write_error(what, err);
        let parent_commit = parent
            .map(|id| self.repo.find_commit(id))
            .transpose()
            .map_err(|err| self.read_error("the tip", &err))?;
        let base = match &parent_commit {
            Some(commit) => commit
                .tree()
                .map_err(|err| self.read_error("the tip's tree", &err))?,
            None => {
                let empty = self
                    .repo
                    .treebuilder(None)
                    .and_then(|builder| builder.write())
                    .map_err(|err| write_error("an empty tree", &err))?;
                self.repo
                    .find_tree(empty)
                    .map_err(|err| self.read_error("the empty tree", &err))?
            }
        };
        let mut update = git2::build::TreeUpdateBuilder::new();
        for path in self.files_at(parent)?.keys() {
            if !files.contains_key(path) {
                update.remove(path.as_str());
            }
        }
        for (path, text) in files {
            let blob = self
                .repo
                .blob(text.as_bytes())
                .map_err(|err| write_error(path, &err))?;
            update.upsert(path.as_str(), blob, git2::FileMode::Blob);
        }
        let tree_id = update
            .create_updated(&self.repo, &base)
            .map_err(|err| write_error("the tree", &err))?;
        if parent_commit.is_some() && tree_id == base.id() {
            return Ok(None);
        }
        let tree = self
            .repo
            .find_tree(tree_id)
            .map_err(|err| self.read_error("the new tree", &err))?;
        let time = git2::Time::new(now.as_second(), 0);
        let signature = |text: &str| {
            let (name, email) = parse_signature(text)
                .or_else(|| parse_signature(CAPSTAN_SIGNATURE))
                .unwrap_or(("capstan", "capstan@noreply.capstan.dev"));
            Signature::new(name, email, &time)
        };
        let author = signature(author).map_err(|err| write_error("the author", &err))?;
        let committer =
            signature(CAPSTAN_SIGNATURE).map_err(|err| write_error("the committer", &err))?;
        let parents: Vec<&git2::Commit<'_>> = parent_commit.iter().collect();
        let commit = self
            .repo
            .commit(None, &author, &committer, message, &tree, &parents)
            .map_err(|err| write_error("the commit", &err))?;
        Ok(Some(commit))
    }

    /// Pushes `commit` to the branch, never forcing.
    fn push(&mut self, commit: Oid) -> Result<PushOutcome, StatusBranchError> {
        self.repo
            .reference(
                &self.outgoing_ref(),
                commit,
                true,
                "capstan: status to push",
            )
            .map_err(|err| self.write_error("the outgoing ref", &err))?;
        let rejection = Arc::new(Mutex::new(None));
        let refused = Arc::new(Mutex::new(None::<String>));
        let mut callbacks = self.callbacks(&rejection)?;
        let refused_by_remote = Arc::clone(&refused);
        callbacks.push_update_reference(move |_name, status| {
            if let Some(status) = status {
                *refused_by_remote
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(status.to_owned());
            }
            Ok(())
        });
        let bearer = transport::bearer_header(&self.options.credentials)
            .map_err(StatusBranchError::Credentials)?;
        let mut options = PushOptions::new();
        options.remote_callbacks(callbacks);
        if let Some(header) = &bearer {
            options.custom_headers(&[header.as_str()]);
        }
        // No `+`: the remote refuses anything but a fast-forward.
        let refspec = format!("{}:refs/heads/{}", self.outgoing_ref(), self.options.branch);
        let mut remote = self
            .repo
            .remote_anonymous(&self.options.url)
            .map_err(|err| {
                self.push_error(&transport::failure(&err, &rejection, &self.redactor))
            })?;
        if let Err(err) = remote.push(&[refspec.as_str()], Some(&mut options)) {
            let failure = transport::failure(&err, &rejection, &self.redactor);
            // libgit2 checks before sending: the remote's tip is unknown here or not an
            // ancestor of ours.
            return if err.code() == git2::ErrorCode::NotFastForward
                || is_not_fast_forward(&failure.to_string())
            {
                Ok(PushOutcome::Behind(failure.to_string()))
            } else {
                Err(self.push_error(&failure))
            };
        }
        drop(remote);
        let refused = refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match refused {
            Some(message) if is_not_fast_forward(&message) => {
                Ok(PushOutcome::Behind(self.redactor.redact(&message)))
            }
            Some(message) => {
                Err(self.push_error(&GitFailure::from_message(&message, &self.redactor)))
            }
            None => {
                self.remember_tip(commit)?;
                Ok(PushOutcome::Accepted)
            }
        }
    }

    fn callbacks(
        &self,
        rejection: &Arc<Mutex<Option<String>>>,
    ) -> Result<git2::RemoteCallbacks<'static>, StatusBranchError> {
        transport::callbacks(&self.options.credentials, &self.options.url, rejection)
            .map_err(StatusBranchError::Credentials)
    }

    fn fetch_error(
        &self,
        err: &git2::Error,
        rejection: &Arc<Mutex<Option<String>>>,
    ) -> StatusBranchError {
        StatusBranchError::Fetch {
            remote: self.remote_name(),
            branch: self.options.branch.clone(),
            source: transport::failure(err, rejection, &self.redactor),
        }
    }

    fn push_error(&self, failure: &GitFailure) -> StatusBranchError {
        StatusBranchError::Push {
            remote: self.remote_name(),
            branch: self.options.branch.clone(),
            source: GitFailure::from_message(&failure.to_string(), &self.redactor),
        }
    }

    fn read_error(&self, what: &str, err: &git2::Error) -> StatusBranchError {
        StatusBranchError::Read {
            what: what.to_owned(),
            source: GitFailure::new(err, &self.redactor),
        }
    }

    fn write_error(&self, what: &str, err: &git2::Error) -> StatusBranchError {
        StatusBranchError::Write {
            what: what.to_owned(),
            source: GitFailure::new(err, &self.redactor),
        }
    }
}

/// Whether a push was refused because the branch moved on the remote (libgit2 and Git's
/// receive-pack spell it several ways), as opposed to a refusal that a retry cannot fix.
fn is_not_fast_forward(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "non-fast-forward",
        "fastforward",
        "fast forward",
        "fetch first",
        "cannot lock ref",
        "failed to lock",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejections_a_fetch_can_fix_are_told_from_refusals() {
        assert!(is_not_fast_forward(
            "cannot push non-fastforwardable reference"
        ));
        assert!(is_not_fast_forward("non-fast-forward"));
        assert!(is_not_fast_forward("failed to update ref: fetch first"));
        assert!(!is_not_fast_forward("request failed with status code: 403"));
        assert!(!is_not_fast_forward("pre-receive hook declined"));
    }
}
