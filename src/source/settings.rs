//! From the command line's Git flags to [`GitOptions`], and the one-shot read that
//! `validate`, `plan` and `observe` use (a poll, a fetch if needed, a read: nothing is ever
//! pushed).

use std::sync::Arc;

use super::credentials::{CredentialError, Redactor, Secret};
use super::git::{GitError, GitOptions, GitSource};
use super::known_hosts::KnownHosts;
use super::transport::GitCredentials;
use super::{Limits, RepoLocation, Snapshot, SourceError, SourceMetrics};

/// How to reach and read a Git remote: what the command line's Git flags say (the `cli`
/// module turns its flags into this, so the source knows nothing of the command line).
#[derive(Debug, Clone)]
pub struct GitSettings {
    /// The branch followed.
    pub branch: String,
    /// The folder of the repository holding `capstan.yaml` (none: the root).
    pub path: Option<std::path::PathBuf>,
    /// The SSH private key.
    pub git_ssh_key: Option<std::path::PathBuf>,
    /// The known_hosts file an SSH remote's host key must be in.
    pub git_known_hosts: Option<std::path::PathBuf>,
    /// Where an HTTPS token is read from.
    pub git_token_from: Option<super::SecretFrom>,
    /// How the token is sent.
    pub git_token_auth: super::TokenAuth,
    /// The user name sent with a basic-auth token.
    pub git_username: String,
    /// Where bare mirrors are kept.
    pub git_mirror_dir: std::path::PathBuf,
}

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
    args: &GitSettings,
    env: &dyn Fn(&str) -> Option<String>,
    redactor: &Redactor,
) -> Result<GitOptions, CredentialError> {
    let token = args
        .git_token_from
        .clone()
        .map(|origin| Secret::resolve(origin, env, redactor))
        .transpose()?;
    check_transport(url, token.is_some())?;
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

/// Refuses a token (from `--git-token-from` or in the URL) on a plain `http://` remote other
/// than this machine; warns that a `git://` remote is neither authenticated nor encrypted.
fn check_transport(url: &str, has_token: bool) -> Result<(), CredentialError> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("git://") {
        tracing::warn!(
            remote = %capstan_core::errors::redact_url_passwords(url),
            "git:// is neither authenticated nor encrypted: anyone on the path can change what capstan applies; prefer https:// or ssh://"
        );
    }
    let in_url = reqwest::Url::parse(url).is_ok_and(|parsed| parsed.password().is_some());
    if lower.starts_with("http://") && (has_token || in_url) {
        crate::http_client::may_carry_token(url).map_err(CredentialError::Insecure)?;
    }
    Ok(())
}

/// Reads the repository once: a folder as it is, a remote's tracked branch at its tip.
///
/// # Errors
/// When the folder or the remote cannot be read.
pub fn read_once(
    location: &RepoLocation,
    args: &GitSettings,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(token: bool) -> GitSettings {
        GitSettings {
            branch: "main".to_owned(),
            path: None,
            git_ssh_key: None,
            git_known_hosts: None,
            git_token_from: token.then(|| super::super::SecretFrom::Env {
                variable: "GIT_TOKEN".to_owned(),
            }),
            git_token_auth: super::super::TokenAuth::default(),
            git_username: "git".to_owned(),
            git_mirror_dir: std::path::PathBuf::from("/nonexistent"),
        }
    }

    fn options(url: &str, token: bool) -> Result<GitOptions, CredentialError> {
        let env = |name: &str| (name == "GIT_TOKEN").then(|| "t0ken-s3cret".to_owned());
        git_options(url, &settings(token), &env, &Redactor::default())
    }

    #[test]
    fn a_token_is_refused_on_a_plain_http_remote_of_another_host() {
        for (url, token) in [
            ("http://git.example.com/platform/fleet.git", true),
            (
                "http://capstan:pa55@git.example.com/platform/fleet.git",
                false,
            ),
        ] {
            let err = options(url, token).expect_err(url);
            let chain = crate::errors::error_chain(&err);
            assert!(chain.contains("use https://"), "{chain}");
            assert!(
                !chain.contains("pa55") && !chain.contains("s3cret"),
                "{chain}"
            );
        }
        for (url, token) in [
            ("https://git.example.com/platform/fleet.git", true),
            ("http://127.0.0.1:3000/platform/fleet.git", true),
            ("http://git.example.com/platform/fleet.git", false),
            ("git://git.example.com/platform/fleet.git", false),
        ] {
            assert!(options(url, token).is_ok(), "{url}");
        }
    }
}
