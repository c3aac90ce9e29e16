//! SSH commit signatures (`git config gpg.format ssh`, made by `ssh-keygen -Y sign -n git`),
//! checked with the `ssh-key` crate against an allowed-signers file in the format git's
//! `gpg.ssh.allowedSignersFile` and `ssh-keygen -Y verify` read:
//!
//! ```text
//! alice@example.com,alice@corp.example ssh-ed25519 AAAAC3Nza... alice's laptop
//! ci@example.com namespaces="git",valid-after="20260101" ssh-ed25519 AAAAC3Nza...
//! ```
//!
//! # Guarantees
//! - A signature is good only when its key is on a line of the file, that line allows the
//!   `git` namespace (`namespaces=`, patterns as OpenSSH matches them) and the commit's
//!   committer time (`valid-after=`, `valid-before=`, as git passes `-Overify-time`), the
//!   signature is in the `git` namespace, and it matches the commit.
//! - Lines with options capstan does not implement (`cert-authority`, unknown ones) refuse the
//!   whole file, naming the line: a key is never allowed more widely than the file says.

use std::path::{Path, PathBuf};

use git2::Oid;
use ssh_key::{HashAlg, PublicKey, SshSig};

use super::{KeyFileError, Refusal, Signer};
use crate::source::known_hosts::match_pattern_list;

/// The namespace git signs commits in.
const GIT_NAMESPACE: &str = "git";

/// The keys of an allowed-signers file.
#[derive(Debug)]
pub struct AllowedSigners {
    path: PathBuf,
    lines: Vec<AllowedSigner>,
}

/// One line of the file.
#[derive(Debug)]
struct AllowedSigner {
    principals: String,
    namespaces: Option<Vec<String>>,
    valid_after: Option<i64>,
    valid_before: Option<i64>,
    key: PublicKey,
}

impl AllowedSigners {
    /// Parses the file at `path`, whose contents are `contents`.
    ///
    /// # Errors
    /// The first line that is not `principals [options] keytype base64 [comment]`, or uses an
    /// option capstan does not implement.
    pub fn parse(path: &Path, contents: &[u8]) -> Result<Self, KeyFileError> {
        let invalid = |line: usize, source: InvalidLine| KeyFileError::Line {
            path: path.to_owned(),
            line,
            source,
        };
        let text = std::str::from_utf8(contents).map_err(|_| invalid(1, InvalidLine::NotText))?;
        let mut lines = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            lines.push(parse_line(line).map_err(|source| invalid(index + 1, source))?);
        }
        Ok(AllowedSigners {
            path: path.to_owned(),
            lines,
        })
    }
}

/// What is wrong with a line of an allowed-signers file.
#[derive(Debug, thiserror::Error)]
pub enum InvalidLine {
    /// The file is not UTF-8.
    #[error("not UTF-8 text")]
    NotText,
    /// Principals and nothing else.
    #[error("a line is `principals [options] keytype base64-key`; no key here")]
    NoKey,
    /// The key is not an OpenSSH public key.
    #[error("the key does not parse")]
    Key(#[source] ssh_key::Error),
    /// `cert-authority`: certificates are not checked.
    #[error("cert-authority is not supported: list each signer's own key instead")]
    CertAuthority,
    /// An option capstan does not implement: the key would be allowed more widely than the
    /// file says.
    #[error("unknown option `{option}` (namespaces=, valid-after=, valid-before= are known)")]
    UnknownOption {
        /// The option as written.
        option: String,
    },
    /// `valid-after=` or `valid-before=` is not a time.
    #[error("`{text}` is not a time YYYYMMDD[HHMM[SS]][Z]")]
    Time {
        /// The value as written.
        text: String,
    },
}

/// `principals [options] keytype base64 [comment]`.
fn parse_line(line: &str) -> Result<AllowedSigner, InvalidLine> {
    let (principals, rest) = next_field(line);
    if rest.is_empty() {
        return Err(InvalidLine::NoKey);
    }
    // As ssh-keygen reads it: a key right after the principals, else options then a key.
    let (options, key) = match PublicKey::from_openssh(rest) {
        Ok(key) => ("", key),
        Err(_) => {
            let (options, key) = next_field(rest);
            let key = PublicKey::from_openssh(key).map_err(InvalidLine::Key)?;
            (options, key)
        }
    };
    let mut signer = AllowedSigner {
        principals: principals.trim_matches('"').to_owned(),
        namespaces: None,
        valid_after: None,
        valid_before: None,
        key,
    };
    apply_options(&mut signer, options)?;
    Ok(signer)
}

/// The first whitespace-separated field of `text` (spaces inside double quotes do not
/// separate) and the rest, trimmed.
fn next_field(text: &str) -> (&str, &str) {
    let mut quoted = false;
    for (at, c) in text.char_indices() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => return (&text[..at], text[at..].trim_start()),
            _ => {}
        }
    }
    (text, "")
}

/// Applies `namespaces="..."`, `valid-after=...`, `valid-before=...`.
fn apply_options(signer: &mut AllowedSigner, options: &str) -> Result<(), InvalidLine> {
    for option in split_options(options) {
        let (name, value) = match option.split_once('=') {
            Some((name, value)) => (name, Some(value.trim_matches('"'))),
            None => (option, None),
        };
        match (name.to_ascii_lowercase().as_str(), value) {
            ("namespaces", Some(list)) => {
                signer.namespaces = Some(list.split(',').map(str::to_owned).collect());
            }
            ("valid-after", Some(time)) => signer.valid_after = Some(parse_time(time)?),
            ("valid-before", Some(time)) => signer.valid_before = Some(parse_time(time)?),
            ("cert-authority", None) => return Err(InvalidLine::CertAuthority),
            _ => {
                return Err(InvalidLine::UnknownOption {
                    option: option.to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// Options are comma-separated; commas inside double quotes do not separate.
fn split_options(options: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut quoted, mut start) = (false, 0);
    for (at, c) in options.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&options[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&options[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// `YYYYMMDD[HHMM[SS]][Z]`: UTC with `Z`, else the system's time zone (as ssh-keygen reads
/// it); seconds since the epoch.
fn parse_time(text: &str) -> Result<i64, InvalidLine> {
    let bad = || InvalidLine::Time {
        text: text.to_owned(),
    };
    let (digits, utc) = match text.strip_suffix(['Z', 'z']) {
        Some(digits) => (digits, true),
        None => (text, false),
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) || ![8, 12, 14].contains(&digits.len()) {
        return Err(bad());
    }
    let field = |range: std::ops::Range<usize>| -> Result<i8, InvalidLine> {
        digits
            .get(range)
            .map_or(Ok(0), |d| d.parse().map_err(|_| bad()))
    };
    let year: i16 = digits[..4].parse().map_err(|_| bad())?;
    let date = jiff::civil::Date::new(year, field(4..6)?, field(6..8)?).map_err(|_| bad())?;
    let time = jiff::civil::Time::new(field(8..10)?, field(10..12)?, field(12..14)?, 0)
        .map_err(|_| bad())?;
    let zone = if utc {
        jiff::tz::TimeZone::UTC
    } else {
        jiff::tz::TimeZone::system()
    };
    date.to_datetime(time)
        .to_zoned(zone)
        .map(|zoned| zoned.timestamp().as_second())
        .map_err(|_| bad())
}

/// Verifies an SSH signature over `signed` (the commit without its signature), made at
/// `committed` (the committer time, seconds since the epoch).
pub(super) fn verify(
    allowed: Option<&AllowedSigners>,
    commit: Oid,
    armored: &str,
    signed: &[u8],
    committed: i64,
) -> Result<Signer, Refusal> {
    let signature =
        SshSig::from_pem(armored).map_err(|err| Refusal::unparsable(commit, "SSH", err))?;
    let fingerprint = signature
        .public_key()
        .fingerprint(HashAlg::Sha256)
        .to_string();
    let not_allowed = |file: Option<&Path>, fingerprint: String| {
        Refusal::not_allowed(commit, fingerprint, file, "allowedSigners", "SSH")
    };
    let Some(allowed) = allowed else {
        return Err(not_allowed(None, fingerprint));
    };
    let lines: Vec<&AllowedSigner> = allowed
        .lines
        .iter()
        .filter(|line| line.key.key_data() == signature.public_key())
        .collect();
    if lines.is_empty() {
        return Err(not_allowed(Some(&allowed.path), fingerprint));
    }
    let mut why = String::new();
    let Some(line) = lines
        .into_iter()
        .find(|line| match line.refuses(committed) {
            Some(reason) => {
                why = reason;
                false
            }
            None => true,
        })
    else {
        return Err(Refusal::KeyNotValid {
            commit,
            fingerprint,
            why,
        });
    };
    if signature.namespace() != GIT_NAMESPACE {
        return Err(Refusal::BadSignature {
            commit,
            fingerprint,
            detail: format!(
                "it was made for the namespace `{}`, not `git`",
                signature.namespace()
            ),
        });
    }
    line.key
        .verify(GIT_NAMESPACE, signed, &signature)
        .map_err(|err| Refusal::mismatch(commit, &fingerprint, err))?;
    Ok(Signer {
        fingerprint,
        identity: line.principals.clone(),
    })
}

impl AllowedSigner {
    /// Why this line does not allow a `git` signature made at `time`, if it does not.
    fn refuses(&self, time: i64) -> Option<String> {
        if let Some(namespaces) = &self.namespaces
            && !match_pattern_list(namespaces.iter().map(String::as_str), GIT_NAMESPACE)
        {
            return Some(format!(
                "its line allows the namespaces \"{}\", not git",
                namespaces.join(",")
            ));
        }
        let shown = |at: i64| {
            jiff::Timestamp::from_second(at).map_or_else(|_| at.to_string(), |t| t.to_string())
        };
        if let Some(after) = self.valid_after
            && time < after
        {
            return Some(format!(
                "its line is valid after {}; the commit was made at {}",
                shown(after),
                shown(time)
            ));
        }
        if let Some(before) = self.valid_before
            && time > before
        {
            return Some(format!(
                "its line is valid before {}; the commit was made at {}",
                shown(before),
                shown(time)
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::error_chain;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIP1T+vMO67DccdZHaZWQyfyyliKhWvXbjo0/q1dKyf4G";

    fn parse(text: &str) -> Result<AllowedSigners, KeyFileError> {
        AllowedSigners::parse(Path::new("/etc/capstan/allowed_signers"), text.as_bytes())
    }

    #[test]
    fn lines_with_and_without_options_parse() {
        let signers = parse(&format!(
            "# the team\nalice@example.com {KEY} laptop\n\"ci@example.com\" namespaces=\"git,file\",valid-after=\"20260101Z\" {KEY}\n"
        ))
        .expect("parses");
        assert_eq!(signers.lines.len(), 2);
        assert_eq!(signers.lines[0].principals, "alice@example.com");
        assert_eq!(signers.lines[0].namespaces, None);
        let ci = &signers.lines[1];
        assert_eq!(ci.principals, "ci@example.com");
        assert_eq!(
            ci.namespaces.as_deref(),
            Some(&["git".to_owned(), "file".to_owned()][..])
        );
        assert_eq!(ci.valid_after, Some(1_767_225_600));
    }

    #[test]
    fn a_line_outside_its_namespaces_or_validity_refuses() {
        let signers = parse(&format!(
            "a namespaces=\"file\" {KEY}\nb valid-before=\"20200101Z\" {KEY}\nc valid-after=\"20300101Z\" {KEY}\n"
        ))
        .expect("parses");
        let now = 1_800_000_000;
        assert!(
            signers.lines[0]
                .refuses(now)
                .is_some_and(|w| w.contains("namespaces"))
        );
        assert!(
            signers.lines[1]
                .refuses(now)
                .is_some_and(|w| w.contains("valid before"))
        );
        assert!(
            signers.lines[2]
                .refuses(now)
                .is_some_and(|w| w.contains("valid after"))
        );
    }

    #[test]
    fn cert_authority_and_unknown_options_are_refused_with_their_line() {
        let err = parse(&format!("a {KEY}\n*@example.com cert-authority {KEY}\n"))
            .expect_err("cert-authority");
        let said = error_chain(&err);
        assert!(
            said.starts_with("/etc/capstan/allowed_signers:2: cert-authority is not supported"),
            "{said}"
        );
        let err = parse(&format!("a verify-required {KEY}\n")).expect_err("unknown");
        let said = error_chain(&err);
        assert!(
            said.contains(":1: unknown option `verify-required`"),
            "{said}"
        );
    }

    #[test]
    fn a_line_without_a_key_is_refused() {
        let err = parse("alice@example.com\n").expect_err("no key");
        assert!(error_chain(&err).contains(":1: a line is"), "{err}");
        let err = parse("alice@example.com ssh-ed25519 notbase64!\n").expect_err("bad key");
        let said = error_chain(&err);
        assert!(said.contains(":1: the key does not parse: "), "{said}");
    }

    #[test]
    fn times_are_read_as_ssh_keygen_reads_them() {
        assert_eq!(parse_time("20260101Z").ok(), Some(1_767_225_600));
        assert_eq!(parse_time("202601010130Z").ok(), Some(1_767_231_000));
        assert_eq!(parse_time("20260101013005Z").ok(), Some(1_767_231_005));
        assert!(parse_time("2026").is_err());
        assert!(parse_time("20261301Z").is_err());
    }
}
