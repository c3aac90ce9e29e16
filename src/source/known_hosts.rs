//! The SSH host keys a Git remote may present, from an OpenSSH `known_hosts` file parsed with
//! the `ssh-key` crate, matched as OpenSSH matches them.
//!
//! # Guarantees
//! - A host key is accepted only when a line whose host patterns name the host holds that very
//!   key, and no `@revoked` line naming the host holds it.
//! - Host patterns follow OpenSSH: comma-separated, `*` and `?` wildcards, case-insensitive, a
//!   `!pattern` that matches excludes the line whatever else matches; a non-default port is
//!   looked up as `[host]:port`; hashed names (`|1|salt|hash`, `HashKnownHosts`) are compared
//!   by their HMAC-SHA1.
//! - `@cert-authority` lines never accept a key: libgit2 presents plain host keys, never
//!   certificates.
//! - The file is read again at each check, so an updated file is taken without a restart; a
//!   line that does not parse refuses every key, naming the file and the line.

use std::path::{Path, PathBuf};

use ssh_key::known_hosts::{Entry, HostPatterns, Marker};
use ssh_key::{HashAlg, PublicKey};

/// An SSH host key is refused.
#[derive(Debug, thiserror::Error)]
pub enum HostKeyError {
    /// The known_hosts file could not be read.
    #[error("cannot read known_hosts {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A line of the file does not parse.
    #[error("{path}:{line}: not a known_hosts line (marker, host patterns, key type, key)")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// Why the key does not parse.
        #[source]
        source: ssh_key::Error,
    },
    /// The server's key could not be decoded.
    #[error("the server's {kind} host key cannot be decoded")]
    Presented {
        /// The key type the server named.
        kind: String,
        /// Why the key does not parse.
        #[source]
        source: ssh_key::Error,
    },
    /// The key is marked `@revoked` for the host.
    #[error("host key of {name} ({kind} {fingerprint}) is marked @revoked in {path}")]
    Revoked {
        /// The host as looked up (`[host]:port` for a non-default port).
        name: String,
        /// The key type.
        kind: String,
        /// Its SHA-256 fingerprint.
        fingerprint: String,
        /// The file.
        path: PathBuf,
    },
    /// No line names the host.
    #[error(
        "host key of {name} ({kind} {fingerprint}) is not in known_hosts {path}: add it (e.g. from `ssh-keyscan`) after checking the fingerprint"
    )]
    Unknown {
        /// The host as looked up.
        name: String,
        /// The key type.
        kind: String,
        /// Its SHA-256 fingerprint.
        fingerprint: String,
        /// The file.
        path: PathBuf,
    },
    /// Lines name the host with other keys.
    #[error(
        "host key of {name} changed: the server presents {kind} {fingerprint}, known_hosts {path} holds {known}; refusing (the server may be impersonated)"
    )]
    Changed {
        /// The host as looked up.
        name: String,
        /// The key type.
        kind: String,
        /// The presented key's SHA-256 fingerprint.
        fingerprint: String,
        /// The file.
        path: PathBuf,
        /// The keys the file holds for the host (type and fingerprint).
        known: String,
    },
}

/// The host keys a remote may present, from an OpenSSH `known_hosts` file (read again at each
/// check, so an updated file is taken without a restart).
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
    /// Why the key is refused, with its SHA-256 fingerprint; or why the file cannot be used.
    pub fn check(&self, host: &str, port: u16, key: PresentedKey<'_>) -> Result<(), HostKeyError> {
        let text = std::fs::read_to_string(&self.path).map_err(|source| HostKeyError::Read {
            path: self.path.clone(),
            source,
        })?;
        let presented =
            PublicKey::from_bytes(key.blob).map_err(|source| HostKeyError::Presented {
                kind: key.kind.to_owned(),
                source,
            })?;
        let name = if port == 22 {
            host.to_ascii_lowercase()
        } else {
            format!("[{}]:{port}", host.to_ascii_lowercase())
        };
        let mut accepted = false;
        let mut other_keys = Vec::new();
        for entry in self.entries(&text)? {
            if !names(entry.host_patterns(), &name) {
                continue;
            }
            let same = entry.public_key().key_data() == presented.key_data();
            match entry.marker() {
                Some(Marker::Revoked) if same => {
                    return Err(HostKeyError::Revoked {
                        name,
                        kind: key.kind.to_owned(),
                        fingerprint: fingerprint_of(&presented),
                        path: self.path.clone(),
                    });
                }
                Some(_) => {}
                None if same => accepted = true,
                None => other_keys.push(format!(
                    "{} {}",
                    entry.public_key().algorithm(),
                    fingerprint_of(entry.public_key())
                )),
            }
        }
        // Every line is read first: a revocation anywhere in the file wins over an acceptance.
        if accepted {
            return Ok(());
        }
        let (kind, fingerprint, path) = (
            key.kind.to_owned(),
            fingerprint_of(&presented),
            self.path.clone(),
        );
        Err(if other_keys.is_empty() {
            HostKeyError::Unknown {
                name,
                kind,
                fingerprint,
                path,
            }
        } else {
            HostKeyError::Changed {
                name,
                kind,
                fingerprint,
                path,
                known: other_keys.join(", "),
            }
        })
    }

    /// Every entry of the file, or the first line that does not parse.
    fn entries(&self, text: &str) -> Result<Vec<Entry>, HostKeyError> {
        let mut entries = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.split_once('#').map_or(line, |(kept, _)| kept).trim();
            if line.is_empty() {
                continue;
            }
            entries.push(
                line.parse::<Entry>()
                    .map_err(|source| HostKeyError::Parse {
                        path: self.path.clone(),
                        line: index + 1,
                        source,
                    })?,
            );
        }
        Ok(entries)
    }
}

/// `SHA256:<base64>`, the fingerprint OpenSSH prints for a key.
fn fingerprint_of(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// Whether a line's host patterns name `name` (lowercase; `[host]:port` for another port).
fn names(patterns: &HostPatterns, name: &str) -> bool {
    match patterns {
        HostPatterns::Patterns(list) => match_pattern_list(list.iter().map(String::as_str), name),
        HostPatterns::HashedName { salt, hash } => {
            use hmac::{KeyInit as _, Mac as _};
            let Ok(mut mac) = hmac::Hmac::<sha1::Sha1>::new_from_slice(salt) else {
                return false;
            };
            mac.update(name.as_bytes());
            mac.verify_slice(hash).is_ok()
        }
    }
}

/// OpenSSH's `match_pattern_list`: true when some pattern matches `text` and no negated
/// (`!`) pattern does. Case-insensitive.
pub(crate) fn match_pattern_list<'a>(patterns: impl Iterator<Item = &'a str>, text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    let mut positive = false;
    for pattern in patterns {
        let (negated, pattern) = match pattern.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, pattern),
        };
        if glob(pattern.to_ascii_lowercase().as_bytes(), text.as_bytes()) {
            if negated {
                return false;
            }
            positive = true;
        }
    }
    positive
}

/// `*` matches any run of characters, `?` any one character, anything else itself.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    // Iterative with one backtrack point: linear enough for host names, never recursive.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    /// Two ed25519 public keys (from `ssh-keygen -t ed25519`), as known_hosts holds them.
    const KEY_A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIP1T+vMO67DccdZHaZWQyfyyliKhWvXbjo0/q1dKyf4G";
    const KEY_B: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIku+p/RHS/MOrspTTcEoW4TufExDMnvXFSL0TCDpngE";

    fn blob(key: &str) -> Vec<u8> {
        let encoded = key.split(' ').nth(1).expect("key field");
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64")
    }

    fn known_hosts(text: &str) -> (tempfile::NamedTempFile, KnownHosts) {
        let file = tempfile::NamedTempFile::new().expect("file");
        std::fs::write(file.path(), text).expect("write");
        let hosts = KnownHosts::new(file.path().to_owned());
        (file, hosts)
    }

    fn check(hosts: &KnownHosts, host: &str, port: u16, key: &str) -> Result<(), HostKeyError> {
        hosts.check(
            host,
            port,
            PresentedKey {
                kind: "ssh-ed25519",
                blob: &blob(key),
            },
        )
    }

    #[test]
    fn a_known_host_key_is_accepted_on_its_port_only() {
        let (_file, hosts) = known_hosts(&format!("[127.0.0.1]:2222 {KEY_A}\n"));
        assert!(check(&hosts, "127.0.0.1", 2222, KEY_A).is_ok());
        let refused = check(&hosts, "127.0.0.1", 22, KEY_A).expect_err("other port");
        assert!(matches!(refused, HostKeyError::Unknown { .. }), "{refused}");
        let presented = PublicKey::from_bytes(&blob(KEY_A)).expect("key");
        assert!(
            refused.to_string().contains(&fingerprint_of(&presented)),
            "{refused}"
        );
    }

    #[test]
    fn a_changed_host_key_is_refused_with_both_fingerprints() {
        let (_file, hosts) = known_hosts(&format!("git.example {KEY_A}\n"));
        let refused = check(&hosts, "git.example", 22, KEY_B).expect_err("changed");
        let text = refused.to_string();
        assert!(matches!(refused, HostKeyError::Changed { .. }), "{text}");
        for key in [KEY_A, KEY_B] {
            let fingerprint = fingerprint_of(&PublicKey::from_bytes(&blob(key)).expect("key"));
            assert!(text.contains(&fingerprint), "{text}");
        }
    }

    #[test]
    fn wildcard_patterns_match_as_openssh_matches_them() {
        let (_file, hosts) = known_hosts(&format!("*.git.example,git?.other {KEY_A}\n"));
        assert!(check(&hosts, "eu.git.example", 22, KEY_A).is_ok());
        assert!(check(&hosts, "EU.Git.Example", 22, KEY_A).is_ok());
        assert!(check(&hosts, "git1.other", 22, KEY_A).is_ok());
        assert!(check(&hosts, "git.example", 22, KEY_A).is_err());
        assert!(check(&hosts, "git12.other", 22, KEY_A).is_err());
    }

    #[test]
    fn a_matching_negation_excludes_the_line() {
        let (_file, hosts) = known_hosts(&format!("*.git.example,!evil.git.example {KEY_A}\n"));
        assert!(check(&hosts, "eu.git.example", 22, KEY_A).is_ok());
        let refused = check(&hosts, "evil.git.example", 22, KEY_A).expect_err("negated");
        assert!(matches!(refused, HostKeyError::Unknown { .. }), "{refused}");
    }

    #[test]
    fn a_non_default_port_matches_a_bracketed_pattern() {
        let (_file, hosts) = known_hosts(&format!("[*.git.example]:2222 {KEY_A}\n"));
        assert!(check(&hosts, "eu.git.example", 2222, KEY_A).is_ok());
        assert!(check(&hosts, "eu.git.example", 22, KEY_A).is_err());
        assert!(check(&hosts, "eu.git.example", 2200, KEY_A).is_err());
    }

    #[test]
    fn a_hashed_host_name_matches_only_its_host() {
        use hmac::{KeyInit as _, Mac as _};
        let engine = base64::engine::general_purpose::STANDARD;
        let salt = b"0123456789abcdef0123";
        let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(salt).expect("key");
        mac.update(b"[git.example]:2222");
        let hash = mac.finalize().into_bytes();
        let (_file, hosts) = known_hosts(&format!(
            "|1|{}|{} {KEY_A}\n",
            engine.encode(salt),
            engine.encode(hash)
        ));
        assert!(check(&hosts, "git.example", 2222, KEY_A).is_ok());
        assert!(check(&hosts, "git.example", 22, KEY_A).is_err());
        assert!(check(&hosts, "other.example", 2222, KEY_A).is_err());
    }

    #[test]
    fn a_revoked_key_is_refused_even_when_another_line_accepts_it() {
        let (_file, hosts) = known_hosts(&format!(
            "git.example {KEY_A}\n@revoked * {KEY_A}\ngit.example {KEY_B}\n"
        ));
        let refused = check(&hosts, "git.example", 22, KEY_A).expect_err("revoked");
        assert!(matches!(refused, HostKeyError::Revoked { .. }), "{refused}");
        assert!(check(&hosts, "git.example", 22, KEY_B).is_ok());
    }

    #[test]
    fn a_cert_authority_line_accepts_no_plain_key() {
        let (_file, hosts) = known_hosts(&format!("@cert-authority *.git.example {KEY_A}\n"));
        assert!(check(&hosts, "eu.git.example", 22, KEY_A).is_err());
    }

    #[test]
    fn a_line_that_does_not_parse_is_named() {
        let (_file, hosts) = known_hosts(&format!("# team hosts\ngit.example {KEY_A}\nbroken\n"));
        let refused = check(&hosts, "git.example", 22, KEY_A).expect_err("broken line");
        assert!(
            matches!(refused, HostKeyError::Parse { line: 3, .. }),
            "{refused}"
        );
        assert!(refused.to_string().contains(":3:"), "{refused}");
    }

    #[test]
    fn globs_match_runs_and_single_characters() {
        assert!(glob(b"*", b""));
        assert!(glob(b"a*b*c", b"axxbyyc"));
        assert!(!glob(b"a*b*c", b"axxbyy"));
        assert!(glob(b"??.example", b"eu.example"));
        assert!(!glob(b"?.example", b"eu.example"));
    }
}
