//! OpenPGP commit signatures (`git commit -S` with GnuPG), checked with rPGP (`pgp`, pure
//! Rust) against a file of public keys: what `gpg --armor --export KEYID...` writes, several
//! keys or several armored blocks allowed.
//!
//! # Guarantees
//! - A key is used only with a valid self-signature on one of its user ids (or a valid direct
//!   key signature); a subkey only with a valid binding signature and, to sign, the signing
//!   flag and a valid back-signature (as GnuPG requires).
//! - As GnuPG (and so `git verify-commit`) refuses them, a signature by a revoked key or
//!   subkey, or by a key expired now, is refused.
//! - Trust levels play no part: being in the file is what allows a key (as a keyring holding
//!   only these keys makes `git verify-commit` accept their signatures).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use git2::Oid;
use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey, SignedPublicSubKey};
use pgp::packet::{self, SignatureType};
use pgp::types::{KeyDetails, Tag};

use super::{KeyFileError, Refusal, Signer};

/// The armor line every key block starts with.
const KEY_BLOCK: &str = "-----BEGIN PGP PUBLIC KEY BLOCK-----";

/// The keys of an OpenPGP key file.
#[derive(Debug)]
pub struct OpenPgpKeys {
    path: PathBuf,
    certificates: Vec<Certificate>,
}

/// A primary key with its subkeys, as far as signing goes.
#[derive(Debug)]
struct Certificate {
    primary: packet::PublicKey,
    /// 40 hex digits, as GnuPG prints it.
    fingerprint: String,
    /// The first user id.
    identity: String,
    validity: Validity,
    subkeys: Vec<Subkey>,
}

#[derive(Debug)]
struct Subkey {
    key: packet::PublicSubkey,
    validity: Validity,
    can_sign: bool,
}

/// Revocation and expiry of a key, from its (self-)signatures.
#[derive(Debug, Clone, Copy)]
struct Validity {
    revoked: bool,
    /// Seconds since the epoch when it expires, if ever.
    expires: Option<u64>,
}

impl OpenPgpKeys {
    /// Parses the key file at `path`, whose contents are `contents`.
    ///
    /// # Errors
    /// When it holds no public key, or a key without a valid self-signature.
    pub fn parse(path: &Path, contents: &[u8]) -> Result<Self, KeyFileError> {
        let invalid = |message: String| KeyFileError::Invalid {
            path: path.to_owned(),
            line: None,
            message,
        };
        let keys = read_keys(contents).map_err(|err| {
            invalid(format!(
                "not OpenPGP public keys ({err}); write it with `gpg --armor --export KEYID`"
            ))
        })?;
        if keys.is_empty() {
            return Err(invalid(
                "holds no OpenPGP public key; write it with `gpg --armor --export KEYID`"
                    .to_owned(),
            ));
        }
        let certificates = keys
            .iter()
            .map(|key| {
                Certificate::new(key).map_err(|why| {
                    invalid(format!("key {}: {why}", hex(key.primary_key.fingerprint())))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(OpenPgpKeys {
            path: path.to_owned(),
            certificates,
        })
    }
}

/// Every public key of `contents`: binary, or one or more armored blocks.
fn read_keys(contents: &[u8]) -> pgp::errors::Result<Vec<SignedPublicKey>> {
    if contents.first().is_some_and(|byte| byte & 0x80 != 0) {
        return SignedPublicKey::from_bytes_many(contents)?.collect();
    }
    let text = String::from_utf8_lossy(contents);
    let mut keys = Vec::new();
    for (at, _) in text.match_indices(KEY_BLOCK) {
        let (blocks, _) = SignedPublicKey::from_armor_many(text[at..].as_bytes())?;
        for key in blocks {
            keys.push(key?);
        }
    }
    Ok(keys)
}

/// Why a key cannot be used: at load (no self-signature) or for one signature (a limit it is
/// outside). The text is the `why` of the refusal, after the key's fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum KeyUnusable {
    /// No user id or direct signature of the key verifies against it.
    #[error("no valid self-signature (is it a complete public key export?)")]
    NoSelfSignature,
    /// The key (`what`: "the key", "its signing subkey") carries a revocation.
    #[error("{what} is revoked")]
    Revoked { what: &'static str },
    /// The key's self-signature set an expiry that has passed.
    #[error("{what} expired at {at}")]
    Expired { what: &'static str, at: String },
}

impl Certificate {
    fn new(key: &SignedPublicKey) -> Result<Certificate, KeyUnusable> {
        let primary = &key.primary_key;
        let self_signatures: Vec<&packet::Signature> = key
            .details
            .users
            .iter()
            .flat_map(|user| {
                user.signatures.iter().filter(|sig| {
                    sig.verify_certification(primary, Tag::UserId, &user.id)
                        .is_ok()
                })
            })
            .chain(
                key.details
                    .direct_signatures
                    .iter()
                    .filter(|sig| sig.verify_key(primary).is_ok()),
            )
            .collect();
        let Some(newest) = newest(&self_signatures) else {
            return Err(KeyUnusable::NoSelfSignature);
        };
        let revoked = key
            .details
            .revocation_signatures
            .iter()
            .any(|sig| sig.verify_key(primary).is_ok());
        let identity = key
            .details
            .users
            .first()
            .map(|user| String::from_utf8_lossy(user.id.id()).into_owned())
            .unwrap_or_default();
        Ok(Certificate {
            primary: primary.clone(),
            fingerprint: hex(primary.fingerprint()),
            identity,
            validity: Validity {
                revoked,
                expires: expiry(primary.created_at().as_secs(), newest),
            },
            subkeys: key
                .public_subkeys
                .iter()
                .filter_map(|subkey| Subkey::new(primary, subkey))
                .collect(),
        })
    }
}

impl Subkey {
    /// The subkey, when a valid binding signature ties it to `primary`.
    fn new(primary: &packet::PublicKey, subkey: &SignedPublicSubKey) -> Option<Subkey> {
        let valid =
            |sig: &&packet::Signature| sig.verify_subkey_binding(primary, &subkey.key).is_ok();
        let bindings: Vec<&packet::Signature> = subkey
            .signatures
            .iter()
            .filter(|sig| sig.typ() == Some(SignatureType::SubkeyBinding))
            .filter(valid)
            .collect();
        let binding = newest(&bindings)?;
        let can_sign = binding.key_flags().sign()
            && binding.embedded_signature().is_some_and(|back| {
                back.verify_primary_key_binding(&subkey.key, primary)
                    .is_ok()
            });
        let revoked = subkey
            .signatures
            .iter()
            .filter(|sig| sig.typ() == Some(SignatureType::SubkeyRevocation))
            .any(|sig| valid(&sig));
        Some(Subkey {
            key: subkey.key.clone(),
            validity: Validity {
                revoked,
                expires: expiry(subkey.key.created_at().as_secs(), binding),
            },
            can_sign,
        })
    }
}

/// The most recent of `signatures` (by creation time).
fn newest<'a>(signatures: &[&'a packet::Signature]) -> Option<&'a packet::Signature> {
    signatures
        .iter()
        .copied()
        .max_by_key(|sig| sig.created().map(|t| t.as_secs()))
}

/// When a key created at `created` expires, as `signature` says.
fn expiry(created: u32, signature: &packet::Signature) -> Option<u64> {
    signature
        .key_expiration_time()
        .map(|lifetime| lifetime.as_secs())
        .filter(|&seconds| seconds > 0)
        .map(|seconds| u64::from(created) + u64::from(seconds))
}

/// Upper-case hex, as GnuPG prints fingerprints and key ids.
fn hex(bytes: impl AsRef<[u8]>) -> String {
    use std::fmt::Write as _;
    bytes.as_ref().iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02X}");
        out
    })
}

/// Verifies an OpenPGP signature over `signed` (the commit without its signature) at `now`.
pub(super) fn verify(
    allowed: Option<&OpenPgpKeys>,
    commit: Oid,
    armored: &str,
    signed: &[u8],
    now: SystemTime,
) -> Result<Signer, Refusal> {
    let (signature, _) = DetachedSignature::from_armor_single(armored.as_bytes())
        .map_err(|err| Refusal::unparsable(commit, "OpenPGP", err))?;
    let signature = signature.signature;
    let issuer = issuer(&signature);
    let not_allowed = |file: Option<&Path>| {
        Refusal::not_allowed(commit, issuer.clone(), file, "openpgpKeys", "OpenPGP")
    };
    let Some(allowed) = allowed else {
        return Err(not_allowed(None));
    };
    let Some((certificate, key)) = allowed.signing_key(&signature) else {
        return Err(not_allowed(Some(&allowed.path)));
    };
    let fingerprint = certificate.fingerprint.clone();
    let not_valid = |why: String| Refusal::KeyNotValid {
        commit,
        fingerprint: fingerprint.clone(),
        why,
    };
    let now = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    certificate
        .validity
        .check(now, "the key")
        .map_err(|err| not_valid(err.to_string()))?;
    if let SigningKey::Subkey(subkey) = key {
        subkey
            .validity
            .check(now, "its signing subkey")
            .map_err(|err| not_valid(err.to_string()))?;
        if !subkey.can_sign {
            return Err(not_valid(
                "the subkey that made it is not bound as a signing subkey".to_owned(),
            ));
        }
    }
    if !matches!(
        signature.typ(),
        Some(SignatureType::Binary | SignatureType::Text)
    ) {
        return Err(Refusal::BadSignature {
            commit,
            fingerprint,
            detail: "it is not a signature over data".to_owned(),
        });
    }
    let checked = match key {
        SigningKey::Primary => signature.verify(&certificate.primary, signed),
        SigningKey::Subkey(subkey) => signature.verify(&subkey.key, signed),
    };
    checked.map_err(|err| Refusal::mismatch(commit, &fingerprint, err))?;
    Ok(Signer {
        fingerprint,
        identity: certificate.identity.clone(),
    })
}

/// Which key of a certificate made a signature.
#[derive(Clone, Copy)]
enum SigningKey<'a> {
    Primary,
    Subkey(&'a Subkey),
}

impl OpenPgpKeys {
    /// The certificate and key the signature names as its issuer (by fingerprint, else by
    /// key id).
    fn signing_key(&self, signature: &packet::Signature) -> Option<(&Certificate, SigningKey<'_>)> {
        let fingerprints: Vec<String> = signature.issuer_fingerprint().iter().map(hex).collect();
        let key_ids: Vec<String> = signature.issuer_key_id().iter().map(hex).collect();
        let names = |fingerprint: String| {
            // A key id is the fingerprint's last 16 hex digits (v4 keys).
            fingerprints.contains(&fingerprint)
                || key_ids.iter().any(|id| {
                    fingerprint.len() >= 16 && fingerprint[fingerprint.len() - 16..] == *id
                })
        };
        self.certificates.iter().find_map(|certificate| {
            if names(certificate.fingerprint.clone()) {
                return Some((certificate, SigningKey::Primary));
            }
            certificate
                .subkeys
                .iter()
                .find(|subkey| names(hex(subkey.key.fingerprint())))
                .map(|subkey| (certificate, SigningKey::Subkey(subkey)))
        })
    }
}

/// The signature's issuer as it names it: its fingerprint, else its key id.
fn issuer(signature: &packet::Signature) -> String {
    signature
        .issuer_fingerprint()
        .first()
        .map(hex)
        .or_else(|| signature.issuer_key_id().first().map(hex))
        .unwrap_or_else(|| "an unnamed key".to_owned())
}

impl Validity {
    fn check(self, now: u64, what: &'static str) -> Result<(), KeyUnusable> {
        if self.revoked {
            return Err(KeyUnusable::Revoked { what });
        }
        match self.expires {
            Some(expires) if expires <= now => Err(KeyUnusable::Expired {
                what,
                at: i64::try_from(expires)
                    .ok()
                    .and_then(|at| jiff::Timestamp::from_second(at).ok())
                    .map_or_else(|| expires.to_string(), |at| at.to_string()),
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_keys_is_refused() {
        let err = OpenPgpKeys::parse(Path::new("/keys.asc"), b"hello\n").expect_err("no keys");
        assert!(err.to_string().contains("no OpenPGP public key"), "{err}");
        let err = OpenPgpKeys::parse(
            Path::new("/keys.asc"),
            format!("{KEY_BLOCK}\n\nnot base64 at all\n-----END PGP PUBLIC KEY BLOCK-----\n")
                .as_bytes(),
        )
        .expect_err("broken block");
        assert!(
            err.to_string().starts_with("/keys.asc: not OpenPGP"),
            "{err}"
        );
    }

    #[test]
    fn fingerprints_are_upper_case_hex() {
        assert_eq!(hex([0x54_u8, 0x2f, 0x0a]), "542F0A");
    }

    #[test]
    fn an_expired_or_revoked_key_may_not_sign() {
        let valid = Validity {
            revoked: false,
            expires: Some(100),
        };
        assert!(valid.check(99, "the key").is_ok());
        assert!(
            valid
                .check(100, "the key")
                .is_err_and(|w| matches!(w, KeyUnusable::Expired { .. }))
        );
        let revoked = Validity {
            revoked: true,
            expires: None,
        };
        assert!(
            revoked
                .check(0, "the key")
                .is_err_and(|w| matches!(w, KeyUnusable::Revoked { .. }))
        );
    }

    #[test]
    fn a_revoked_or_expired_key_says_which_limit_and_when() {
        let revoked = Validity {
            revoked: true,
            expires: None,
        };
        assert_eq!(
            revoked
                .check(0, "the key")
                .expect_err("revoked")
                .to_string(),
            "the key is revoked"
        );
        let expired = Validity {
            revoked: false,
            expires: Some(1_700_000_000),
        };
        assert_eq!(
            expired.check(1_700_000_000, "its signing subkey"),
            Err(KeyUnusable::Expired {
                what: "its signing subkey",
                at: "2023-11-14T22:13:20Z".to_owned(),
            })
        );
        assert_eq!(expired.check(1_699_999_999, "the key"), Ok(()));
    }
}
