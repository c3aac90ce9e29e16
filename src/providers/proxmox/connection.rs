//! How to reach one Proxmox VE cluster: the API URL, the API token and how the server's
//! certificate is trusted (a CA file, a pinned SHA-256 fingerprint, or the system roots).
//!
//! # Invariants
//! - The token secret is held in a [`TokenSecret`] whose `Debug` never shows it; it leaves
//!   this module only inside the `Authorization` header (marked sensitive).
//! - A pinned fingerprint is compared against the end-entity certificate only; anything else
//!   is refused before a byte of the request is sent.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::error::ProxmoxError;
use crate::fingerprint::{certificate_sha256, normalize_certificate_sha256};
use crate::spec::ProxmoxConnection;

/// An API token secret. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSecret(String);

impl TokenSecret {
    /// Wraps a secret read by the caller (from `tokenFrom`); the redactor knows it from now on.
    pub fn new(secret: impl Into<String>) -> Self {
        let secret = secret.into().trim().to_owned();
        crate::redact::remember(&secret);
        TokenSecret(secret)
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSecret(..)")
    }
}

/// How the server certificate is trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Certificates signed by the CA(s) in this PEM file.
    CaFile(PathBuf),
    /// Exactly the certificate with this SHA-256 fingerprint (`AB:CD:...`), as Proxmox's
    /// self-signed certificates are usually trusted.
    Fingerprint(String),
    /// The machine's trusted roots.
    SystemRoots,
}

/// Everything needed to talk to one Proxmox VE cluster.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// `https://HOST:8006/api2/json`.
    pub api_url: String,
    /// `USER@REALM!TOKENID`.
    pub token_id: String,
    /// The token's secret.
    pub secret: TokenSecret,
    /// How the server certificate is trusted.
    pub trust: Trust,
}

impl ConnectionConfig {
    /// Builds the configuration from a connection in `capstan.yaml` and the secret the caller
    /// resolved from its `tokenFrom`.
    ///
    /// # Errors
    /// [`ProxmoxError::Configure`] when the URL or token id is malformed, or both
    /// `tlsFingerprint` and `caFile` are set.
    pub fn from_spec(
        connection: &ProxmoxConnection,
        secret: TokenSecret,
    ) -> Result<Self, ProxmoxError> {
        let trust = match (&connection.tls_fingerprint, &connection.ca_file) {
            (Some(_), Some(_)) => {
                return Err(ProxmoxError::Configure {
                    reason: "set either tlsFingerprint or caFile, not both".into(),
                });
            }
            (Some(fingerprint), None) => Trust::Fingerprint(fingerprint.clone()),
            (None, Some(path)) => Trust::CaFile(path.clone()),
            (None, None) => Trust::SystemRoots,
        };
        ConnectionConfig::new(&connection.url, &connection.token_id, secret, trust)
    }

    /// Builds the configuration from its parts. `url` is `https://HOST[:PORT]` (with or
    /// without `/api2/json`).
    ///
    /// # Errors
    /// [`ProxmoxError::Configure`] when the URL is not https, the token id is not
    /// `USER@REALM!TOKENID`, or a fingerprint is not 32 hex pairs.
    pub fn new(
        url: &str,
        token_id: &str,
        secret: TokenSecret,
        trust: Trust,
    ) -> Result<Self, ProxmoxError> {
        let base = url.trim_end_matches('/');
        let base = base.strip_suffix("/api2/json").unwrap_or(base);
        if !base.starts_with("https://") || base.len() <= "https://".len() {
            return Err(ProxmoxError::Configure {
                reason: format!("url `{url}` must be https://HOST:8006"),
            });
        }
        let valid_token_id = token_id
            .split_once('@')
            .and_then(|(user, rest)| Some((user, rest.split_once('!')?)))
            .is_some_and(|(user, (realm, token))| {
                !user.is_empty() && !realm.is_empty() && !token.is_empty()
            });
        if !valid_token_id {
            return Err(ProxmoxError::Configure {
                reason: format!("tokenId `{token_id}` must look like USER@REALM!TOKENID"),
            });
        }
        if secret.expose().is_empty() {
            return Err(ProxmoxError::Configure {
                reason: format!("the secret of token {token_id} is empty"),
            });
        }
        let trust = match trust {
            Trust::Fingerprint(text) => {
                let normalized = normalize_certificate_sha256(&text);
                if normalized.len() != 95 {
                    return Err(ProxmoxError::Configure {
                        reason: format!(
                            "tlsFingerprint `{text}` is not a SHA-256 fingerprint (32 hex pairs)"
                        ),
                    });
                }
                Trust::Fingerprint(normalized)
            }
            other => other,
        };
        Ok(ConnectionConfig {
            api_url: format!("{base}/api2/json"),
            token_id: token_id.to_owned(),
            secret,
            trust,
        })
    }

    /// The `Authorization` header value. Secret: never log it.
    pub(crate) fn authorization(&self) -> String {
        format!("PVEAPIToken={}={}", self.token_id, self.secret.expose())
    }
}

/// Where a pinned-fingerprint verifier records the fingerprint it refused, so the client can
/// report both fingerprints instead of a bare TLS error.
pub(crate) type MismatchSlot = Arc<Mutex<Option<String>>>;

/// The rustls client configuration for `trust`, plus the mismatch slot when pinning.
pub(crate) fn tls_config(
    trust: &Trust,
) -> Result<(rustls::ClientConfig, Option<MismatchSlot>), ProxmoxError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|err| ProxmoxError::Configure {
            reason: format!("TLS setup: {err}"),
        })?;
    match trust {
        Trust::Fingerprint(expected) => {
            let slot = MismatchSlot::default();
            let verifier = PinnedFingerprint {
                expected: expected.clone(),
                provider,
                mismatch: slot.clone(),
            };
            let config = builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth();
            Ok((config, Some(slot)))
        }
        Trust::CaFile(path) => {
            let roots = roots_from_file(path)?;
            Ok((
                builder.with_root_certificates(roots).with_no_client_auth(),
                None,
            ))
        }
        Trust::SystemRoots => {
            let mut roots = rustls::RootCertStore::empty();
            let native = rustls_native_certs::load_native_certs();
            let (_added, _ignored) = roots.add_parsable_certificates(native.certs);
            Ok((
                builder.with_root_certificates(roots).with_no_client_auth(),
                None,
            ))
        }
    }
}

fn roots_from_file(path: &Path) -> Result<rustls::RootCertStore, ProxmoxError> {
    let pem = std::fs::read(path).map_err(|source| ProxmoxError::ReadCaFile {
        path: path.to_owned(),
        source,
    })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem).flatten() {
        // A certificate rustls cannot use as a root is skipped; an empty store is an error.
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(ProxmoxError::InvalidCaFile {
            path: path.to_owned(),
        });
    }
    Ok(roots)
}

/// Accepts exactly the server certificate whose SHA-256 fingerprint is pinned. Handshake
/// signatures are still verified, so a peer must hold the certificate's private key.
#[derive(Debug)]
struct PinnedFingerprint {
    expected: String,
    provider: Arc<CryptoProvider>,
    mismatch: MismatchSlot,
}

impl ServerCertVerifier for PinnedFingerprint {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let found = certificate_sha256(end_entity.as_ref());
        if found == self.expected {
            return Ok(ServerCertVerified::assertion());
        }
        let message = format!(
            "certificate fingerprint {found} does not match the pinned {}",
            self.expected
        );
        *self.mismatch.lock().unwrap_or_else(PoisonError::into_inner) = Some(found);
        Err(rustls::Error::General(message))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> TokenSecret {
        TokenSecret::new("1a2b3c4d-0000-4000-8000-123456789abc")
    }

    #[test]
    fn urls_are_normalised_to_the_api_root() {
        for url in [
            "https://pve1:8006",
            "https://pve1:8006/",
            "https://pve1:8006/api2/json",
        ] {
            let config = ConnectionConfig::new(url, "capstan@pve!ci", secret(), Trust::SystemRoots)
                .expect("valid");
            assert_eq!(config.api_url, "https://pve1:8006/api2/json");
        }
        assert!(
            ConnectionConfig::new("http://pve1:8006", "a@pve!b", secret(), Trust::SystemRoots)
                .is_err()
        );
    }

    #[test]
    fn token_ids_need_user_realm_and_token() {
        for bad in ["capstan", "capstan@pve", "capstan@pve!", "@pve!x"] {
            let err = ConnectionConfig::new("https://h:8006", bad, secret(), Trust::SystemRoots)
                .expect_err(bad);
            assert!(err.to_string().contains("USER@REALM!TOKENID"), "{err}");
        }
    }

    #[test]
    fn the_secret_never_shows_in_debug_output() {
        let config =
            ConnectionConfig::new("https://h:8006", "a@pve!b", secret(), Trust::SystemRoots)
                .expect("valid");
        let debug = format!("{config:?}");
        assert!(!debug.contains("1a2b3c4d"), "{debug}");
        assert!(debug.contains("TokenSecret(..)"), "{debug}");
    }

    #[test]
    fn fingerprints_are_normalised_and_checked() {
        let lower = "ab".repeat(32);
        let config = ConnectionConfig::new(
            "https://h:8006",
            "a@pve!b",
            secret(),
            Trust::Fingerprint(lower),
        )
        .expect("valid");
        assert_eq!(config.trust, Trust::Fingerprint(vec!["AB"; 32].join(":")));
        assert!(
            ConnectionConfig::new(
                "https://h:8006",
                "a@pve!b",
                secret(),
                Trust::Fingerprint("AB:CD".into())
            )
            .is_err()
        );
    }
}
