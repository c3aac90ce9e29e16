//! Fingerprints: how capstan refers to certificates and secrets without showing them.
//!
//! Secrets (tokens, kubeconfigs, join tokens) never appear in logs, status or errors; where one
//! must be named, its fingerprint is shown instead.

use hmac::{Hmac, KeyInit as _, Mac as _};
use sha2::{Digest, Sha256};

/// SHA-256 of a certificate in the form Proxmox and browsers show: `AB:CD:...` (32 pairs).
pub fn certificate_sha256(der: &[u8]) -> String {
    let digest = Sha256::digest(der);
    let pairs: Vec<String> = digest.iter().map(|byte| format!("{byte:02X}")).collect();
    pairs.join(":")
}

/// Normalises a user-written certificate fingerprint (any case, with or without colons) to the
/// `AB:CD:...` form, so two spellings of one fingerprint compare equal.
pub fn normalize_certificate_sha256(text: &str) -> String {
    let hex: Vec<char> = text
        .chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_ascii_uppercase())
        .collect();
    let pairs: Vec<String> = hex.chunks(2).map(|pair| pair.iter().collect()).collect();
    pairs.join(":")
}

/// The key secret fingerprints are made with: an HMAC-SHA256 key the daemon derives from
/// secrets it holds, so a fingerprint shown in the status (or the status branch, or a Flux
/// Secret's annotation) says nothing about its secret to whoever lacks the key, even a secret
/// short enough to guess. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct FingerprintKey([u8; 32]);

/// What a derived key is bound to: another use of the same material gives another key.
const KEY_LABEL: &[u8] = b"capstan secret fingerprints v1";

impl FingerprintKey {
    /// The key derived from `material`, secrets the daemon holds, in a stable order: the same
    /// material gives the same key, so fingerprints survive restarts and agree between
    /// replicas; new material (a rotated secret) gives new fingerprints.
    pub fn derive<'a>(material: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut mac = Hmac::<Sha256>::new_from_slice(KEY_LABEL).expect("HMAC takes any key");
        for part in material {
            // Length-prefixed, so two lists of parts never give the same input.
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        FingerprintKey(mac.finalize().into_bytes().into())
    }

    /// A short, stable fingerprint of `secret`: `hmac-sha256:` and 16 hex digits of its
    /// HMAC-SHA256 under this key. Enough to tell two versions of a secret apart; useless for
    /// recovering it without the key.
    pub fn fingerprint(&self, secret: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key");
        mac.update(secret);
        format!("hmac-sha256:{}", short_hex(&mac.finalize().into_bytes()))
    }
}

impl std::fmt::Debug for FingerprintKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FingerprintKey(..)")
    }
}

/// A short, stable digest of content that is no secret (a rendered preview), `sha256:` and 16
/// hex digits, to tell two versions apart. Never for a secret: see [`FingerprintKey`].
pub fn content_sha256(content: &[u8]) -> String {
    format!("sha256:{}", short_hex(&Sha256::digest(content)))
}

fn short_hex(digest: &[u8]) -> String {
    digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_fingerprints_use_the_proxmox_form() {
        let fingerprint = certificate_sha256(b"certificate");
        assert_eq!(fingerprint.len(), 32 * 3 - 1);
        assert!(
            fingerprint
                .chars()
                .all(|c| c == ':' || c.is_ascii_hexdigit() && !c.is_ascii_lowercase())
        );
        assert_eq!(
            normalize_certificate_sha256(&fingerprint.to_lowercase().replace(':', "")),
            fingerprint
        );
    }

    #[test]
    fn secret_fingerprints_are_keyed_and_differ_per_secret() {
        let key = FingerprintKey::derive([&b"proxmox token"[..]]);
        let a = key.fingerprint(b"password1");
        assert_ne!(a, key.fingerprint(b"password2"));
        assert_eq!(
            a,
            FingerprintKey::derive([&b"proxmox token"[..]]).fingerprint(b"password1"),
            "stable for the same key material: across restarts and replicas"
        );
        assert!(a.starts_with("hmac-sha256:") && a.len() == 12 + 16, "{a}");
        // Without the key, a guessed secret's plain digest does not match what is shown.
        let unkeyed = content_sha256(b"password1");
        assert_ne!(a.trim_start_matches("hmac-"), unkeyed);
        assert_ne!(
            a,
            FingerprintKey::derive([&b"another token"[..]]).fingerprint(b"password1")
        );
        assert_ne!(
            FingerprintKey::derive([&b"ab"[..], &b"c"[..]]),
            FingerprintKey::derive([&b"a"[..], &b"bc"[..]]),
            "parts are delimited"
        );
        assert_eq!(format!("{key:?}"), "FingerprintKey(..)");
    }
}
