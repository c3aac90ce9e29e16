//! From the command line's Git flags to [`GitOptions`], and the one-shot read that
//! `validate`, `plan` and `observe` use (a poll, a fetch if needed, a read: nothing is ever
//! pushed).

use std::sync::Arc;

use super::credentials::{CredentialError, KnownHosts, Redactor, Secret};
use super::git::{GitCredentials, GitError, GitOptions, GitSource};
use super::{Limits, RepoLocation, Snapshot, SourceError, SourceMetrics};
use crate::cli::GitArgs;

/// Reading the repository once failed.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The folder could not be read.
    #[error("cannot read the repository folder")]
    Folder(#[source] SourceError),
    /// A credential could not be resolved.
    #[error("cannot resolve the Git credentials")]
    Credentials(#[source] CredentialError),
    /// The remote could not be read.
    #[error("cannot read the Git remote")]
    Git(#[source] GitError),
}

/// The options to follow `url` as `args` say. `env` reads the process environment (for
/// `env:` secrets); every secret read is remembered by `redactor`.
///
/// # Errors
/// When a token's variable is not set.
pub fn git_options(
    url: &str,
    args: &GitArgs,
    env: &dyn Fn(&str) -> Option<String>,
    redactor: &Redactor,
) -> Result<GitOptions, CredentialError> {
    let token = args
        .git_token_from
        .clone()
        .map(|origin| Secret::resolve(origin, env, redactor))
        .transpose()?;
    Ok(GitOptions {
        url: url.to_owned(),
        branch: args.branch.clone(),
        path: args.path.clone(),
        mirror_root: args.git_mirror_dir.clone(),
        credentials: GitCredentials {
            ssh_key: args.git_ssh_key.clone(),
            known_hosts: args.git_known_hosts.clone().map(KnownHosts::new),
            token,
            token_auth: args.git_token_auth,
            username: args.git_username.clone(),
        },
        limits: Limits::default(),
    })
}

/// Reads the repository once: a folder as it is, a remote's tracked branch at its tip.
///
/// # Errors
/// When the folder or the remote cannot be read.
pub fn read_once(
    location: &RepoLocation,
    args: &GitArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Snapshot, SettingsError> {
    match location {
        RepoLocation::Folder(path) => {
            let files = super::read_repo(path).map_err(SettingsError::Folder)?;
            Ok(Snapshot {
                revision: files.content_revision(),
                files,
            })
        }
        RepoLocation::Remote(url) => {
            let redactor = Redactor::default();
            let options =
                git_options(url, args, env, &redactor).map_err(SettingsError::Credentials)?;
            let mut source = GitSource::open(options, redactor, Arc::new(SourceMetrics::default()))
                .map_err(SettingsError::Git)?;
            let outcome = source.poll().map_err(SettingsError::Git)?;
            let commit = source
                .read(outcome.revision())
                .map_err(SettingsError::Git)?;
            for skipped in &commit.skipped {
                tracing::warn!(revision = %commit.revision, "not read: {skipped}");
            }
            Ok(Snapshot {
                revision: commit.revision.to_string(),
                files: commit.files,
            })
        }
    }
}
