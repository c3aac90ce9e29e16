//! HTTPS for the daemon's endpoint (`--http-tls-cert`, `--http-tls-key`), and client
//! certificates (`--http-client-ca`) that authenticate a caller as the bearer token does.
//!
//! # Guarantees
//! - A client certificate is asked for, not required, so the kubelet's probes of `/healthz`
//!   (which present none) still connect; a certificate that is presented must chain to the
//!   client CA, or the handshake fails.
//! - Only TLS 1.2 and 1.3 with rustls' safe defaults (ring).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
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
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|source| TlsError::ClientCa {
                    path: path.clone(),
                    source,
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
