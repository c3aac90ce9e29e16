//! How capstan authenticates to a Git remote and checks who it talks to, shared by everything
//! that connects to one: following the tracked branch and pushing the status branch.
//!
//! # Guarantees
//! - Credentials are answered at most twice per connection (libgit2 asks again after a
//!   refusal; a second identical answer would loop).
//! - An SSH host key is accepted only when known_hosts holds it; without a known_hosts file an
//!   SSH remote is refused. TLS chains are verified by libgit2 against the system's roots.
//! - A refusal's message (ours, which says more than libgit2's) is kept for [`failure`], and
//!   every message goes through the [`Redactor`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use git2::{CertificateCheckStatus, CredentialType, RemoteCallbacks};

use super::credentials::{CredentialError, Redactor, Secret};
use super::known_hosts::{KnownHosts, PresentedKey};
use super::tree::GitFailure;

/// How an HTTPS token is sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TokenAuth {
    /// As the password of HTTP basic authentication (GitHub, GitLab, Gitea accept this).
    #[default]
    Basic,
    /// As `Authorization: Bearer <token>` on every request.
    Bearer,
}

impl std::str::FromStr for TokenAuth {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "basic" => Ok(TokenAuth::Basic),
            "bearer" => Ok(TokenAuth::Bearer),
            other => Err(format!("`{other}` is not `basic` or `bearer`")),
        }
    }
}

/// Credentials for the remote.
#[derive(Debug, Clone, Default)]
pub struct GitCredentials {
    /// SSH private key file (read by libssh2 at each connection).
    pub ssh_key: Option<PathBuf>,
    /// Host keys SSH remotes must present (required for SSH).
    pub known_hosts: Option<KnownHosts>,
    /// HTTPS token.
    pub token: Option<Secret>,
    /// How the token is sent.
    pub token_auth: TokenAuth,
    /// User name for the token (and SSH when the URL names none).
    pub username: String,
}

impl GitCredentials {
    /// Reads the token and opens the SSH key and known_hosts files once, so that a missing
    /// or unreadable one is reported when capstan starts rather than as a remote that does
    /// not answer.
    ///
    /// # Errors
    /// The first credential that cannot be read.
    pub fn check_readable(&self) -> Result<(), CredentialError> {
        if let Some(token) = &self.token {
            token.read()?;
        }
        let known_hosts = self
            .known_hosts
            .as_ref()
            .map(|hosts| hosts.path().to_owned());
        for path in self.ssh_key.iter().cloned().chain(known_hosts) {
            std::fs::File::open(&path).map_err(|source| CredentialError::Read { path, source })?;
        }
        Ok(())
    }
}

/// Callbacks answering `url`'s requests for credentials and checking its host key; a host-key
/// refusal's message is left in `rejection`.
///
/// # Errors
/// When the token cannot be read.
pub(crate) fn callbacks(
    credentials: &GitCredentials,
    url: &str,
    rejection: &Arc<Mutex<Option<String>>>,
) -> Result<RemoteCallbacks<'static>, CredentialError> {
    let mut attempts = 0_u32;
    let mut callbacks = RemoteCallbacks::new();
    let token = match &credentials.token {
        Some(secret) => Some(secret.read()?),
        None => None,
    };
    let username = credentials.username.clone();
    let ssh_key = credentials.ssh_key.clone();
    // A bearer token travels as a header (see [`bearer_header`]), never as a password.
    let basic = credentials.token_auth == TokenAuth::Basic;
    callbacks.credentials(move |_url, username_from_url, allowed| {
        // libgit2 asks again after a refusal; a second answer would be the same one.
        attempts += 1;
        if attempts > 2 {
            return Err(git2::Error::from_str("the remote refused the credentials"));
        }
        let user = username_from_url.unwrap_or(&username);
        if allowed.contains(CredentialType::USERNAME) {
            return git2::Cred::username(user);
        }
        if allowed.contains(CredentialType::SSH_KEY)
            && let Some(key) = &ssh_key
        {
            return git2::Cred::ssh_key(user, None, key, None);
        }
        if allowed.contains(CredentialType::USER_PASS_PLAINTEXT)
            && basic
            && let Some(token) = &token
        {
            return git2::Cred::userpass_plaintext(user, token);
        }
        Err(git2::Error::from_str(
            "the remote asks for credentials that were not given (--git-ssh-key, --git-token-from)",
        ))
    });
    let known_hosts = credentials.known_hosts.clone();
    let port = ssh_port(url);
    let rejection = Arc::clone(rejection);
    callbacks.certificate_check(move |cert, host| {
        let Some(hostkey) = cert.as_hostkey() else {
            // TLS: libgit2 verifies the chain against the system's roots.
            return Ok(CertificateCheckStatus::CertificatePassthrough);
        };
        let verdict = match (&known_hosts, hostkey.hostkey(), hostkey.hostkey_type()) {
            (None, _, _) => Err(
                "an SSH remote needs --git-known-hosts: host keys are never accepted unchecked"
                    .to_owned(),
            ),
            (Some(known), Some(blob), Some(kind)) => known
                .check(
                    host,
                    port,
                    PresentedKey {
                        kind: kind.name(),
                        blob,
                    },
                )
                .map_err(|refused| crate::errors::error_chain(&refused)),
            (Some(_), _, _) => Err("the server's host key could not be read".to_owned()),
        };
        match verdict {
            Ok(()) => Ok(CertificateCheckStatus::CertificateOk),
            Err(message) => {
                *rejection
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(message.clone());
                Err(git2::Error::from_str(&message))
            }
        }
    });
    Ok(callbacks)
}

/// The `Authorization: Bearer` header to send with every request, when the token is a bearer
/// token (libgit2 sends custom headers only with a download or a push, not with a bare ref
/// advertisement).
///
/// # Errors
/// When the token cannot be read.
pub(crate) fn bearer_header(
    credentials: &GitCredentials,
) -> Result<Option<String>, CredentialError> {
    match (&credentials.token, credentials.token_auth) {
        (Some(token), TokenAuth::Bearer) => {
            Ok(Some(format!("Authorization: Bearer {}", token.read()?)))
        }
        _ => Ok(None),
    }
}

/// `err` as a redacted failure, or the refusal the callbacks left in `rejection` (libgit2 may
/// replace the callback's message with its own: ours says more).
pub(crate) fn failure(
    err: &git2::Error,
    rejection: &Arc<Mutex<Option<String>>>,
    redactor: &Redactor,
) -> GitFailure {
    let rejected = rejection
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    match rejected {
        Some(message) => GitFailure::from_message(&message, redactor),
        None => GitFailure::new(err, redactor),
    }
}

/// The SSH port of `url` (22 unless `ssh://host:port/` says otherwise).
fn ssh_port(url: &str) -> u16 {
    let Some(rest) = url
        .strip_prefix("ssh://")
        .or_else(|| url.strip_prefix("git+ssh://"))
        .or_else(|| url.strip_prefix("ssh+git://"))
    else {
        return 22;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let port = if let Some(bracketed) = host_port.strip_prefix('[') {
        bracketed.split_once("]:").map(|(_, port)| port)
    } else {
        host_port.split_once(':').map(|(_, port)| port)
    };
    port.and_then(|p| p.parse().ok()).unwrap_or(22)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ssh_port_comes_from_the_url() {
        assert_eq!(ssh_port("ssh://git@127.0.0.1:2222/srv/repo.git"), 2222);
        assert_eq!(ssh_port("ssh://git@[::1]:2200/repo.git"), 2200);
        assert_eq!(ssh_port("ssh://git@host/repo.git"), 22);
        assert_eq!(ssh_port("git@host:org/repo.git"), 22);
    }
}
