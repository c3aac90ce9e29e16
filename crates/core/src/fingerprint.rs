//! Fingerprints: how capstan refers to certificates and secrets without showing them.
//!
//! Secrets (tokens, kubeconfigs, join tokens) never appear in logs, status or errors; where one
//! must be named, its fingerprint is shown instead.

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

/// A short, stable fingerprint of a secret, `sha256:` and 16 hex digits: enough to tell two
/// versions apart, useless for recovering the secret.
pub fn secret_sha256(secret: &[u8]) -> String {
    let digest = Sha256::digest(secret);
    let hex: String = digest
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("sha256:{hex}")
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
    fn secret_fingerprints_differ_per_secret_and_hide_it() {
        let a = secret_sha256(b"kubeconfig-a");
        assert_ne!(a, secret_sha256(b"kubeconfig-b"));
        assert_eq!(a, secret_sha256(b"kubeconfig-a"));
        assert!(a.starts_with("sha256:") && a.len() == 7 + 16);
    }
}
