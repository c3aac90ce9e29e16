//! HTTPS for the daemon's endpoint (`--http-tls-cert`, `--http-tls-key`), and client
//! certificates (`--http-client-ca`) that authenticate a caller as the bearer token does,
//! unless the CA's revocation list (`--http-client-crl`) names them.
//!
//! # Guarantees
//! - A client certificate is asked for, not required, so the kubelet's probes of `/healthz`
//!   (which present none) still connect; a certificate that is presented must chain to the
//!   client CA and not be listed in its CRL, or the handshake fails.
//! - The CRL file is looked at (its size and modification time) at each handshake and read
//!   again when it changed: revoking a certificate needs no restart. A CRL that no longer
//!   parses leaves the one read before in force, with a warning each time it is tried; a CRL
//!   that does not come from the client certificate's issuer refuses that certificate
//!   (revocation unknown is not taken as valid).
//! - Only TLS 1.2 and 1.3 with rustls' safe defaults (ring).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

/// The files of `--http-tls-cert`, `--http-tls-key` and `--http-client-ca`.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The serving certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// The CA whose client certificates authenticate a caller (PEM), if any.
    pub client_ca: Option<PathBuf>,
    /// That CA's certificate revocation list (PEM or DER), if any.
    pub client_crl: Option<PathBuf>,
}

/// The TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("cannot read {what} from {path} (a PEM file is expected)")]
    Read {
        /// What was looked for.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Where the PEM does not parse.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The client CA file holds no usable certificate.
    #[error("the client CA {path} holds no CA certificate rustls accepts")]
    ClientCa {
        /// The file.
        path: PathBuf,
        /// Why rustls refused the client CAs.
        #[source]
        source: rustls::server::VerifierBuilderError,
    },
    /// The client CRL file holds a list rustls cannot use.
    #[error(
        "the client certificate revocation list {path} cannot be used (a CRL the client CA signed is expected, PEM or DER)"
    )]
    ClientCrl {
        /// The file.
        path: PathBuf,
        /// Why rustls refused it.
        #[source]
        source: rustls::server::VerifierBuilderError,
    },
    /// The certificate and key do not make a server configuration (e.g. they do not match).
    #[error("the certificate {cert} and the key {key} cannot serve TLS")]
    Config {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        #[source]
        source: rustls::Error,
    },
}

/// What identifies a version of the CRL file without reading it: its size and modification
/// time (a CRL is replaced whole, by `openssl ca -gencrl` or a mounted Secret's update).
type Stamp = Option<(u64, SystemTime)>;

fn stamp(path: Option<&Path>) -> Stamp {
    let metadata = std::fs::metadata(path?).ok()?;
    Some((metadata.len(), metadata.modified().ok()?))
}

/// The server's TLS configuration, rebuilt when the client CRL file changes.
pub struct ServerTls {
    files: TlsFiles,
    current: Mutex<(Stamp, Arc<rustls::ServerConfig>)>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Reads `files` now, so a broken one stops the daemon before it serves.
    ///
    /// # Errors
    /// As [`server_config`].
    pub fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let stamp = stamp(files.client_crl.as_deref());
        let config = server_config(&files)?;
        Ok(ServerTls {
            files,
            current: Mutex::new((stamp, config)),
        })
    }

    /// The configuration for the next handshake: built again when the CRL file changed
    /// since it was last read (the one before stays when the new file cannot be used).
    pub fn config(&self) -> Arc<rustls::ServerConfig> {
        let now = stamp(self.files.client_crl.as_deref());
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.0 != now {
            match server_config(&self.files) {
                Ok(config) => {
                    tracing::info!("the client certificate revocation list changed; read again");
                    *current = (now, config);
                }
                Err(err) => tracing::warn!(
                    "the client certificate revocation list changed but cannot be used; the one read before stays in force: {}",
                    crate::errors::error_chain(&err)
                ),
            }
        }
        Arc::clone(&current.1)
    }
}

/// The server configuration `files` describe.
///
/// # Errors
/// When a file cannot be read, holds no certificate or key, or the key does not match.
pub fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config_error = |source| TlsError::Config {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source,
    };
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(config_error)?;
    let builder = match &files.client_ca {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in certificates(path, "the client CA's certificates")? {
                // A certificate rustls cannot parse is left out; none at all is refused below.
                let _ = roots.add(cert);
            }
            let mut verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .allow_unauthenticated();
            if let Some(crl) = &files.client_crl {
                // One CA, so one CRL: it covers the certificates the CA issued, the clients'.
                verifier = verifier
                    .with_crls(revocation_lists(crl)?)
                    .only_check_end_entity_revocation();
            }
            let verifier =
                verifier
                    .build()
                    .map_err(|source| match (&source, &files.client_crl) {
                        (rustls::server::VerifierBuilderError::InvalidCrl(_), Some(crl)) => {
                            TlsError::ClientCrl {
                                path: crl.clone(),
                                source,
                            }
                        }
                        _ => TlsError::ClientCa {
                            path: path.clone(),
                            source,
                        },
                    })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let chain = certificates(&files.cert, "the serving certificate")?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|source| TlsError::Read {
        what: "the private key",
        path: files.key.clone(),
        source,
    })?;
    let mut config = builder.with_single_cert(chain, key).map_err(config_error)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The revocation lists of a CRL file: PEM blocks, else the whole file as one DER list.
fn revocation_lists(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, TlsError> {
    let read = |source| TlsError::Read {
        what: "the client certificate revocation list",
        path: path.to_owned(),
        source,
    };
    let lists = CertificateRevocationListDer::pem_file_iter(path)
        .map_err(read)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read)?;
    if !lists.is_empty() {
        return Ok(lists);
    }
    let der = std::fs::read(path).map_err(|err| read(rustls::pki_types::pem::Error::Io(err)))?;
    if der.first() != Some(&0x30) {
        // Not a DER SEQUENCE either.
        return Err(read(rustls::pki_types::pem::Error::NoItemsFound));
    }
    Ok(vec![CertificateRevocationListDer::from(der)])
}

/// Every certificate of a PEM file; none is an error.
fn certificates(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let read = |source| TlsError::Read {
        what,
        path: path.to_owned(),
        source,
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(read)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read)?;
    if certificates.is_empty() {
        return Err(read(rustls::pki_types::pem::Error::NoItemsFound));
    }
    Ok(certificates)
}
