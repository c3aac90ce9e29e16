//! Credentials for a Git remote and the rules that keep them secret: where a token or webhook
//! secret is read from ([`SecretFrom`]), the SSH host keys a remote must present
//! ([`KnownHosts`]), and the [`Redactor`] every message about a remote goes through.
//!
//! # Guarantees
//! - A secret read from a file is read again at each use, so a rotated file works without a
//!   restart.
//! - Every secret value read is remembered by the [`Redactor`], which replaces it (and any
//!   `user:password@` in a URL) with `***` in the messages it is given.
//! - An SSH host key is accepted only when known_hosts holds that very key for the host;
//!   otherwise the refusal names the key's SHA-256 fingerprint, as OpenSSH shows it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;

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
        /// Why.
        #[source]
        source: std::io::Error,
    },
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

/// Replaces known secret values, and passwords in URLs, with `***`.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Arc<Mutex<Vec<String>>>,
}

/// Shorter values are not redacted by value: replacing every `a` of a message would say
/// nothing and hide everything. Such a short secret is refused nowhere, only not searched for.
const MIN_REDACTED_LEN: usize = 4;

impl Redactor {
    /// Remembers `secret` (and its trimmed form) to redact from now on.
    pub fn remember(&self, secret: &str) {
        let mut secrets = self
            .secrets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for candidate in [secret, secret.trim()] {
            if candidate.len() >= MIN_REDACTED_LEN && !secrets.iter().any(|s| s == candidate) {
                secrets.push(candidate.to_owned());
            }
        }
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// `text` with every remembered secret and every URL password replaced by `***`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = capstan_core::errors::redact_url_passwords(text);
        let secrets = self
            .secrets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for secret in secrets.iter() {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), "***");
            }
        }
        out
    }
}

/// The SSH host keys a remote may present, from an OpenSSH `known_hosts` file (read again at
/// each check, so an updated file is taken without a restart).
#[derive(Debug, Clone)]
pub struct KnownHosts {
    path: PathBuf,
}

/// An SSH host key as the server presented it.
#[derive(Debug, Clone, Copy)]
pub struct PresentedKey<'a> {
    /// The key type as known_hosts spells it (`ssh-ed25519`, `ssh-rsa`, ...).
    pub kind: &'a str,
    /// The raw key blob (what known_hosts holds in base64).
    pub blob: &'a [u8],
}

impl KnownHosts {
    /// The known_hosts file at `path`.
    pub fn new(path: PathBuf) -> Self {
        KnownHosts { path }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts `key` for `host` on `port` when the file holds that key for it.
    ///
    /// # Errors
    /// A message for the user: why the key is refused, with its SHA-256 fingerprint.
    pub fn check(&self, host: &str, port: u16, key: PresentedKey<'_>) -> Result<(), String> {
        let text = std::fs::read_to_string(&self.path)
            .map_err(|err| format!("cannot read known_hosts {}: {err}", self.path.display()))?;
        let name = if port == 22 {
            host.to_owned()
        } else {
            format!("[{host}]:{port}")
        };
        let fingerprint = fingerprint(key.blob);
        let mut other_keys = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split_whitespace();
            let Some(mut hosts) = fields.next() else {
                continue;
            };
            let marker = hosts.starts_with('@').then_some(hosts);
            if marker.is_some() {
                let Some(next) = fields.next() else { continue };
                hosts = next;
            }
            let (Some(kind), Some(encoded)) = (fields.next(), fields.next()) else {
                continue;
            };
            if !hosts_match(hosts, &name) {
                continue;
            }
            let Ok(blob) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
                continue;
            };
            match marker {
                Some("@revoked") if blob == key.blob => {
                    return Err(format!(
                        "host key of {name} ({} {fingerprint}) is marked @revoked in {}",
                        key.kind,
                        self.path.display()
                    ));
                }
                Some(_) => continue,
                None if kind == key.kind && blob == key.blob => return Ok(()),
                None => other_keys.push(format!("{kind} {}", self::fingerprint(&blob))),
            }
        }
        if other_keys.is_empty() {
            Err(format!(
                "host key of {name} ({} {fingerprint}) is not in known_hosts {}: add it (e.g. from `ssh-keyscan`) after checking the fingerprint",
                key.kind,
                self.path.display()
            ))
        } else {
            Err(format!(
                "host key of {name} changed: the server presents {} {fingerprint}, known_hosts {} holds {}; refusing (the server may be impersonated)",
                key.kind,
                self.path.display(),
                other_keys.join(", ")
            ))
        }
    }
}

/// Whether a known_hosts host field (comma-separated names, or one hashed `|1|salt|hash`)
/// names `name`. Wildcards and negations are not supported (never matched).
fn hosts_match(field: &str, name: &str) -> bool {
    if let Some(hashed) = field.strip_prefix("|1|") {
        return hashed_host_matches(hashed, name);
    }
    field
        .split(',')
        .any(|pattern| pattern.eq_ignore_ascii_case(name))
}

fn hashed_host_matches(hashed: &str, name: &str) -> bool {
    use hmac::{KeyInit as _, Mac as _};
    let engine = base64::engine::general_purpose::STANDARD;
    let Some((salt, hash)) = hashed.split_once('|') else {
        return false;
    };
    let (Ok(salt), Ok(hash)) = (engine.decode(salt), engine.decode(hash)) else {
        return false;
    };
    let Ok(mut mac) = hmac::Hmac::<sha1::Sha1>::new_from_slice(&salt) else {
        return false;
    };
    mac.update(name.as_bytes());
    mac.verify_slice(&hash).is_ok()
}

/// `SHA256:<base64>`, the fingerprint OpenSSH prints for a key blob.
pub fn fingerprint(blob: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(blob);
    format!(
        "SHA256:{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest)
    )
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

    fn known_hosts(text: &str) -> (tempfile::NamedTempFile, KnownHosts) {
        let file = tempfile::NamedTempFile::new().expect("file");
        std::fs::write(file.path(), text).expect("write");
        let hosts = KnownHosts::new(file.path().to_owned());
        (file, hosts)
    }

    #[test]
    fn a_known_host_key_is_accepted_on_its_port_only() {
        let blob = b"key-blob-one";
        let encoded = base64::engine::general_purpose::STANDARD.encode(blob);
        let (_file, hosts) = known_hosts(&format!("[127.0.0.1]:2222 ssh-ed25519 {encoded}\n"));
        let key = PresentedKey {
            kind: "ssh-ed25519",
            blob,
        };
        assert_eq!(hosts.check("127.0.0.1", 2222, key), Ok(()));
        let refused = hosts.check("127.0.0.1", 22, key).expect_err("other port");
        assert!(refused.contains("is not in known_hosts"), "{refused}");
        assert!(refused.contains(&fingerprint(blob)), "{refused}");
    }

    #[test]
    fn a_changed_host_key_is_refused_with_both_fingerprints() {
        let known = base64::engine::general_purpose::STANDARD.encode(b"old-key");
        let (_file, hosts) = known_hosts(&format!("git.example ssh-ed25519 {known}\n"));
        let refused = hosts
            .check(
                "git.example",
                22,
                PresentedKey {
                    kind: "ssh-ed25519",
                    blob: b"new-key",
                },
            )
            .expect_err("changed");
        assert!(refused.contains("changed"), "{refused}");
        assert!(refused.contains(&fingerprint(b"new-key")), "{refused}");
        assert!(refused.contains(&fingerprint(b"old-key")), "{refused}");
    }

    #[test]
    fn a_hashed_host_name_matches() {
        use hmac::{KeyInit as _, Mac as _};
        let engine = base64::engine::general_purpose::STANDARD;
        let salt = b"0123456789abcdef0123";
        let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(salt).expect("key");
        mac.update(b"git.example");
        let hash = mac.finalize().into_bytes();
        let field = format!("|1|{}|{}", engine.encode(salt), engine.encode(hash));
        assert!(hosts_match(&field, "git.example"));
        assert!(!hosts_match(&field, "other.example"));
    }
}
