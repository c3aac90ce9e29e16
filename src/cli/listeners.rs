//! How `capstan run`'s HTTP flags ([`DaemonArgs`]) become the listeners' options: the token
//! resolved, the TLS files read, the host allow-list and the stream caps settled.

use std::sync::Arc;

use super::DaemonArgs;

impl DaemonArgs {
    /// Where and how the daemon serves HTTP; `env` reads `--http-token-from env:...`, whose
    /// value `redactor` learns.
    ///
    /// # Errors
    /// When the token's variable is not set, or a TLS file cannot be used.
    pub fn listeners(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        redactor: &crate::source::Redactor,
    ) -> Result<crate::daemon::http::Listeners, crate::daemon::http::HttpError> {
        let token = self.http_token_from.clone();
        Ok(crate::daemon::http::Listeners {
            http: self.http,
            hooks: self.hooks_listen,
            options: crate::daemon::http::HttpOptions {
                token: token
                    .map(|origin| crate::source::Secret::resolve(origin, env, redactor))
                    .transpose()
                    .map_err(crate::daemon::http::HttpError::Token)?,
                read_timeout: self.http_read_timeout.0,
                max_connections: self.http_max_connections,
                tls: self
                    .tls_files()
                    .map(crate::daemon::http::tls::ServerTls::load)
                    .transpose()
                    .map_err(crate::daemon::http::HttpError::Tls)?
                    .map(Arc::new),
                client_certificates: self.http_client_ca.is_some(),
                allowed_hosts: crate::daemon::http::AllowedHosts::new(&self.http_allowed_hosts),
                event_streams: crate::daemon::http::StreamCaps::of(
                    self.http_max_connections,
                    self.http_max_event_streams,
                    self.http_max_event_streams_per_client,
                ),
            },
        })
    }

    /// The TLS files of `--http-tls-cert`, `--http-tls-key` and `--http-client-ca`.
    pub fn tls_files(&self) -> Option<crate::daemon::http::tls::TlsFiles> {
        Some(crate::daemon::http::tls::TlsFiles {
            cert: self.http_tls_cert.clone()?,
            key: self.http_tls_key.clone()?,
            client_ca: self.http_client_ca.clone(),
            client_crl: self.http_client_crl.clone(),
        })
    }
}
