//! Reading the files of named revisions, for `capstan preview`: any ref, branch or commit of a
//! local repository (resolved in its object database, never checked out), or a branch or a
//! full ref (`refs/pull/7/head`) of a remote (fetched into the same bare mirror [`GitSource`]
//! keeps).
//!
//! # Guarantees
//! - Files are read with the same commit reader as the daemon's ([`super::tree`]): links are
//!   never followed, size limits hold, nothing outside `--path` is read.
//! - Nothing is written to a local repository; a remote is only read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::credentials::{CredentialError, Redactor};
use super::git::{GitError, GitOptions, GitSource};
use super::settings::{GitSettings, git_options};
use super::tree::{GitFailure, Revision};
use super::verify::{Mode, Refusal, Verifier};
use super::{Limits, RepoLocation, Snapshot, SourceMetrics};

/// A revision could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    /// The folder is not a Git repository.
    #[error("{path} is not a Git repository (a preview reads revisions from Git)")]
    OpenRepository {
        /// The folder.
        path: PathBuf,
        /// What libgit2 said, credentials redacted.
        #[source]
        source: GitFailure,
    },
    /// The reference names no commit of the repository.
    #[error("{reference} names no commit of {repository}")]
    Resolve {
        /// What was asked for.
        reference: String,
        /// The repository (credentials redacted).
        repository: String,
        /// What libgit2 said, credentials redacted.
        #[source]
        source: GitFailure,
    },
    /// A credential could not be resolved.
    #[error("cannot resolve the Git credentials")]
    Credentials(#[source] CredentialError),
    /// The remote or the commit could not be read.
    #[error("cannot read {reference}")]
    Git {
        /// What was asked for.
        reference: String,
        /// The Git operation that failed, and its cause.
        #[source]
        source: GitError,
    },
}

/// Reads the files of `reference` in `location`: for a folder, anything `git rev-parse`
/// understands (a branch, a tag, `refs/pull/7/head`, a commit id, `HEAD~1`); for a remote, a
/// branch or a full ref it advertises (`refs/pull/7/head`).
///
/// The revision is shown as `<reference>@sha1:<commit>`.
///
/// # Errors
/// When the repository cannot be opened, the reference resolved, or the commit read.
pub fn read_revision(
    location: &RepoLocation,
    reference: &str,
    args: &GitSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Snapshot, RevisionError> {
    match location {
        RepoLocation::Folder(path) => read_local(path, reference, args.path.as_deref()),
        RepoLocation::Remote(url) => read_remote(url, reference, args, env),
    }
}

fn read_local(
    folder: &Path,
    reference: &str,
    sub_folder: Option<&Path>,
) -> Result<Snapshot, RevisionError> {
    let repository =
        git2::Repository::open(folder).map_err(|err| RevisionError::OpenRepository {
            path: folder.to_path_buf(),
            source: GitFailure::unredacted(&err),
        })?;
    let resolve_error = |err: &git2::Error| RevisionError::Resolve {
        reference: reference.to_owned(),
        repository: folder.display().to_string(),
        source: GitFailure::unredacted(err),
    };
    let commit = repository
        .revparse_single(reference)
        .and_then(|object| object.peel_to_commit())
        .map_err(|err| resolve_error(&err))?;
    let revision = Revision {
        branch: reference.to_owned(),
        commit: commit.id(),
    };
    let files = super::tree::read_commit(
        &repository,
        &revision,
        sub_folder,
        &Limits::default(),
        &Redactor::default(),
    )
    .map_err(|source| RevisionError::Git {
        reference: reference.to_owned(),
        source: source.into(),
    })?;
    for skipped in &files.skipped {
        tracing::warn!(revision = %files.revision, "not read: {skipped}");
    }
    Ok(Snapshot {
        revision: files.revision.to_string(),
        files: files.files,
    })
}

fn read_remote(
    url: &str,
    branch: &str,
    args: &GitSettings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Snapshot, RevisionError> {
    let options =
        git_options(url, args, env, &Redactor::default()).map_err(RevisionError::Credentials)?;
    read_remote_ref(&options, branch)
}

/// Reads the files of `reference` of the remote `options` names: a branch, or a full ref name
/// the remote advertises (`refs/pull/7/head`). Fetched into the same bare mirror the daemon
/// keeps, so only new objects cross the network.
///
/// # Errors
/// When the remote cannot be read or holds no such ref.
pub fn read_remote_ref(options: &GitOptions, reference: &str) -> Result<Snapshot, RevisionError> {
    let mut options = options.clone();
    reference.clone_into(&mut options.branch);
    let git_error = |source| RevisionError::Git {
        reference: reference.to_owned(),
        source,
    };
    let mut source = GitSource::open(
        options,
        Redactor::default(),
        Arc::new(SourceMetrics::default()),
    )
    .map_err(git_error)?;
    let outcome = source.poll().map_err(git_error)?;
    let files = source.read(outcome.revision()).map_err(git_error)?;
    for skipped in &files.skipped {
        tracing::warn!(revision = %files.revision, "not read: {skipped}");
    }
    Ok(Snapshot {
        revision: files.revision.to_string(),
        files: files.files,
    })
}

/// Verifies the commits `head` brings over `base` in the mirror of `options`, both read
/// before by [`read_remote_ref`] (shown `ref@sha1:<commit>`): the head's commit in mode
/// `head`, every commit of the head the base lacks in mode `all`.
///
/// # Errors
/// Outer: the mirror cannot be opened or a revision names no commit. Inner: the refusal.
pub fn verify_remote_head(
    options: &GitOptions,
    verifier: &Verifier,
    head: &str,
    base: &str,
) -> Result<Result<(), Refusal>, RevisionError> {
    let commit_of = |revision: &str| {
        revision
            .rsplit_once("@sha1:")
            .and_then(|(_, hex)| git2::Oid::from_str(hex).ok())
            .ok_or_else(|| RevisionError::Resolve {
                reference: revision.to_owned(),
                repository: Redactor::default().redact(&options.url),
                source: GitFailure::from_message(
                    "not a revision read from Git",
                    &Redactor::default(),
                ),
            })
    };
    let head = commit_of(head)?;
    let vouched = match verifier.policy().mode {
        Mode::Head => Vec::new(),
        Mode::All => vec![commit_of(base)?],
    };
    let source = GitSource::open(
        options.clone(),
        Redactor::default(),
        Arc::new(SourceMetrics::default()),
    )
    .map_err(|source| RevisionError::Git {
        reference: head.to_string(),
        source,
    })?;
    Ok(source.verify(verifier, head, &vouched).map(|_| ()))
}
