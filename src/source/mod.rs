//! Where the desired state comes from: a Git remote ([`git`]) or a folder on disk
//! ([`folder`]). Either way the result is a [`Snapshot`]: a revision and the texts of
//! `capstan.yaml` and the cluster files, which `spec` (no I/O) parses.
//!
//! A Git revision is shown as Flux shows it, `main@sha1:<40 hex>`; a folder's revision is a
//! hash of its files' contents, `dir:<12 hex>`.
//!
//! The daemon follows the source through a [`Tracker`]: polls at the fleet's `pollInterval`
//! (at once on a webhook, see [`webhook`], or a file-system event), keeps the last good
//! snapshot when the remote is unreachable, and retries with backoff.

pub mod credentials;
pub mod folder;
pub mod gc;
pub mod git;
pub mod known_hosts;
pub mod revisions;
pub mod seed;
mod settings;
mod tracker;
pub(crate) mod transport;
mod tree;
pub mod verify;
pub mod webhook;

use std::path::PathBuf;

pub use crate::metrics::SourceMetrics;
pub use credentials::{CredentialError, Redactor, Secret, SecretFrom};
pub use folder::{RepoWatcher, SourceError, read_repo, read_repo_within, watch};
pub use git::{GitError, GitOptions, GitSource, PollOutcome};
pub use known_hosts::{HostKeyError, KnownHosts};
pub use settings::{GitSettings, SettingsError, git_options, read_once};
pub use tracker::{Content, PollTrigger, Refresh, Tracker, VerifyStart, verified_start};
pub use transport::{GitCredentials, TokenAuth};
pub use tree::{CommitFiles, GitFailure, Revision, TreeError};

use crate::spec::RepoFiles;

/// Where the repository is: a Git remote or a local folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepoLocation {
    /// A folder on disk, read as it is (no Git involved).
    Folder(PathBuf),
    /// A Git remote URL: `https://`, `http://`, `ssh://`, `git://`, `file://` or the scp-like
    /// `user@host:path`.
    Remote(String),
}

impl RepoLocation {
    /// Whether this is a Git remote.
    pub fn is_remote(&self) -> bool {
        matches!(self, RepoLocation::Remote(_))
    }
}

/// A remote URL that no retry can make reachable: refused as it is given, so `capstan run`
/// exits at once instead of waiting for a remote that cannot answer.
#[derive(Debug, thiserror::Error)]
pub enum MalformedRemote {
    /// The scheme is not one libgit2 speaks.
    #[error(
        "`{scheme}://` is not a Git transport capstan speaks (https://, http://, ssh://, git://, file://)"
    )]
    Scheme {
        /// The scheme given.
        scheme: String,
    },
    /// The text after the scheme is not a URL.
    #[error("`{url}` is not a valid URL")]
    Url {
        /// The remote (password redacted).
        url: String,
        /// What the URL parser said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A network URL without a host.
    #[error("`{url}` names no host")]
    NoHost {
        /// The remote (password redacted).
        url: String,
    },
}

/// The transports libgit2 (as built here) speaks.
const GIT_SCHEMES: [&str; 7] = ["https", "http", "ssh", "git", "file", "ssh+git", "git+ssh"];

impl std::str::FromStr for RepoLocation {
    type Err = MalformedRemote;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if !looks_like_remote(text) {
            return Ok(RepoLocation::Folder(PathBuf::from(text)));
        }
        check_remote(text)?;
        Ok(RepoLocation::Remote(text.to_owned()))
    }
}

/// Refuses a `scheme://` remote whose scheme libgit2 does not speak, that does not parse, or
/// that names no host (but `file://`). The scp-like `user@host:path` has nothing to check.
fn check_remote(text: &str) -> Result<(), MalformedRemote> {
    let Some((scheme, _)) = text.split_once("://") else {
        return Ok(());
    };
    let scheme = scheme.to_ascii_lowercase();
    if !GIT_SCHEMES.contains(&scheme.as_str()) {
        return Err(MalformedRemote::Scheme { scheme });
    }
    if scheme == "file" {
        return Ok(());
    }
    let shown = || capstan_core::errors::redact_url_passwords(text);
    let url = reqwest::Url::parse(text).map_err(|source| MalformedRemote::Url {
        url: shown(),
        source: Box::new(source),
    })?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(MalformedRemote::NoHost { url: shown() });
    }
    Ok(())
}

impl std::fmt::Display for RepoLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RepoLocation::Folder(path) => write!(f, "{}", path.display()),
            RepoLocation::Remote(url) => f.write_str(&Redactor::default().redact(url)),
        }
    }
}

/// `scheme://...`, or scp-like `[user@]host:path` where the part before the first `:` holds
/// no `/` (so `./a:b` and `/tmp/x:y` stay folders).
fn looks_like_remote(text: &str) -> bool {
    if let Some((scheme, _)) = text.split_once("://") {
        return !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    }
    match text.split_once(':') {
        Some((host, path)) => {
            !host.is_empty() && !host.contains('/') && !path.is_empty() && host.contains('@')
        }
        None => false,
    }
}

/// Size limits on what is read from a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest file read, in bytes.
    pub max_file_bytes: u64,
    /// Largest sum of the files read from one revision, in bytes.
    pub max_tree_bytes: u64,
}

impl Default for Limits {
    /// 1 MiB per file (a cluster file is a few KiB), 32 MiB per tree (thousands of clusters).
    fn default() -> Self {
        Limits {
            max_file_bytes: 1024 * 1024,
            max_tree_bytes: 32 * 1024 * 1024,
        }
    }
}

/// One revision's files.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// `main@sha1:...` or `dir:...`.
    pub revision: String,
    /// The texts.
    pub files: RepoFiles,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_remotes_and_paths_are_folders() {
        for remote in [
            "https://git.example/org/fleet.git",
            "ssh://git@git.example:2222/fleet.git",
            "git@github.com:org/fleet.git",
            "git://127.0.0.1/fleet.git",
            "file:///srv/git/fleet.git",
        ] {
            assert!(
                remote.parse::<RepoLocation>().is_ok_and(|l| l.is_remote()),
                "{remote}"
            );
        }
        for folder in [".", "examples-repo", "/tmp/x:y", "./a:b", "C"] {
            assert!(
                folder.parse::<RepoLocation>().is_ok_and(|l| !l.is_remote()),
                "{folder}"
            );
        }
    }

    #[test]
    fn a_remote_no_retry_can_reach_is_refused_as_given() {
        for (text, says) in [
            (
                "htps://git.example/fleet.git",
                "`htps://` is not a Git transport",
            ),
            ("ssh:///srv/fleet.git", "names no host"),
            ("ssh://git@exa mple:22/fleet.git", "is not a valid URL"),
            (
                "https://bob:hunter22@[::1/fleet.git",
                "`https://bob:***@[::1/fleet.git` is not a valid URL",
            ),
        ] {
            let refused = text.parse::<RepoLocation>().expect_err(text);
            let message = refused.to_string();
            assert!(message.contains(says), "{text}: {message}");
            assert!(!message.contains("hunter22"), "{message}");
        }
    }

    #[test]
    fn a_remote_is_shown_without_its_password() {
        let location: RepoLocation = "https://bob:hunter22@git.example/fleet.git"
            .parse()
            .expect("location");
        assert_eq!(
            location.to_string(),
            "https://bob:***@git.example/fleet.git"
        );
    }
}
