//! Credentials for a Git remote and the rules that keep them secret: where a token or webhook
//! secret is read from ([`SecretFrom`]), and the [`Redactor`] every message about a remote goes
//! through (the SSH host keys a remote must present are in [`super::known_hosts`]).
//!
//! # Guarantees
//! - A secret read from a file is read again at each use, so a rotated file works without a
//!   restart.
//! - Every secret value read is remembered by the process's [`Redactor`] ([`crate::redact`]),
//!   which replaces it (and any `user:password@` in a URL) with `***` in the messages it is
//!   given.

use std::path::PathBuf;

pub use crate::redact::Redactor;

/// Reading a secret or known_hosts failed.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The `env:VAR|file:PATH` text is malformed.
    #[error("`{text}` is not `env:VARIABLE` or `file:PATH`")]
    Syntax {
        /// What was given.
        text: String,
    },
    /// The environment variable is not set.
    #[error("environment variable {variable} is not set")]
    MissingVariable {
        /// Its name.
        variable: String,
    },
    /// A secret or known_hosts file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A token would travel unencrypted to the remote.
    #[error("refusing the Git remote's credentials")]
    Insecure(#[source] crate::http_client::InsecureUrl),
    /// The secret is empty.
    #[error("the secret from {origin} is empty")]
    Empty {
        /// Where it was read.
        origin: String,
    },
}

/// Where a secret comes from, as given on the command line: `env:VAR` or `file:PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretFrom {
    /// An environment variable (read by `main`, which passes its value down).
    Env {
        /// Its name.
        variable: String,
    },
    /// A file, read at each use.
    File(PathBuf),
}

impl std::str::FromStr for SecretFrom {
    type Err = CredentialError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once(':') {
            Some(("env", variable)) if !variable.is_empty() => Ok(SecretFrom::Env {
                variable: variable.to_owned(),
            }),
            Some(("file", path)) if !path.is_empty() => Ok(SecretFrom::File(PathBuf::from(path))),
            _ => Err(CredentialError::Syntax {
                text: text.to_owned(),
            }),
        }
    }
}

impl std::fmt::Display for SecretFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretFrom::Env { variable } => write!(f, "env:{variable}"),
            SecretFrom::File(path) => write!(f, "file:{}", path.display()),
        }
    }
}

/// A secret ready to be read: an environment variable's value taken once by `main`, or a file
/// read again at each use.
#[derive(Clone)]
pub struct Secret {
    origin: SecretFrom,
    /// The variable's value (for `env:`).
    value: Option<String>,
    redactor: Redactor,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({})", self.origin)
    }
}

impl Secret {
    /// Resolves `origin`: `env` reads the process environment (only `main` passes one that
    /// does). Every value read is handed to `redactor`.
    ///
    /// # Errors
    /// When the variable is not set.
    pub fn resolve(
        origin: SecretFrom,
        env: &dyn Fn(&str) -> Option<String>,
        redactor: &Redactor,
    ) -> Result<Secret, CredentialError> {
        let value = match &origin {
            SecretFrom::Env { variable } => {
                let value = env(variable).ok_or_else(|| CredentialError::MissingVariable {
                    variable: variable.clone(),
                })?;
                redactor.remember(&value);
                Some(value)
            }
            SecretFrom::File(_) => None,
        };
        Ok(Secret {
            origin,
            value,
            redactor: redactor.clone(),
        })
    }

    /// The secret's current value (a file is read now), without surrounding whitespace.
    ///
    /// # Errors
    /// When the file cannot be read or the secret is empty.
    pub fn read(&self) -> Result<String, CredentialError> {
        let raw = match (&self.origin, &self.value) {
            (SecretFrom::File(path), _) => {
                std::fs::read_to_string(path).map_err(|source| CredentialError::Read {
                    path: path.clone(),
                    source,
                })?
            }
            (SecretFrom::Env { .. }, Some(value)) => value.clone(),
            (SecretFrom::Env { variable }, None) => {
                return Err(CredentialError::MissingVariable {
                    variable: variable.clone(),
                });
            }
        };
        let value = raw.trim().to_owned();
        if value.is_empty() {
            return Err(CredentialError::Empty {
                origin: self.origin.to_string(),
            });
        }
        self.redactor.remember(&value);
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_url_passwords_are_redacted() {
        let redactor = Redactor::default();
        redactor.remember("s3cr3t-token\n");
        let text = "fetch https://bob:hunter22@git.example/x.git failed: s3cr3t-token refused";
        assert_eq!(
            redactor.redact(text),
            "fetch https://bob:***@git.example/x.git failed: *** refused"
        );
    }

    #[test]
    fn secret_from_parses_env_and_file() {
        assert_eq!(
            "env:TOKEN".parse::<SecretFrom>().ok(),
            Some(SecretFrom::Env {
                variable: "TOKEN".into()
            })
        );
        assert_eq!(
            "file:/run/token".parse::<SecretFrom>().ok(),
            Some(SecretFrom::File("/run/token".into()))
        );
        assert!("token".parse::<SecretFrom>().is_err());
    }

    #[test]
    fn a_rotated_secret_file_is_read_again() {
        let file = tempfile::NamedTempFile::new().expect("file");
        std::fs::write(file.path(), "first-token\n").expect("write");
        let redactor = Redactor::default();
        let secret = Secret::resolve(SecretFrom::File(file.path().into()), &|_| None, &redactor)
            .expect("secret");
        assert_eq!(secret.read().ok().as_deref(), Some("first-token"));
        std::fs::write(file.path(), "second-token").expect("write");
        assert_eq!(secret.read().ok().as_deref(), Some("second-token"));
        assert_eq!(redactor.redact("first-token second-token"), "*** ***");
    }
}
