//! Certificates for the lab: a self-signed server certificate for the simulated Proxmox (as a
//! fresh Proxmox host has), and per-cluster CAs that issue serving and client certificates for
//! the simulated API servers (as `kubeadm init` does).
//!
//! # Time
//! Validity ends are computed from the lab's clock (a certificate issued "a year from now" after
//! the clock was advanced expires a year after the advanced time), but validity always *starts*
//! an hour before the machine's real time: TLS peers check certificates against the real clock,
//! and a certificate that starts in the lab's future would be refused as not yet valid.

use std::net::IpAddr;

use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use capstan_core::fingerprint;

/// Making a certificate failed (a bad name, or the crypto library refused).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen could not build the certificate.
    #[error("cannot issue certificate for {subject}")]
    Issue {
        /// Common name of the certificate.
        subject: String,
        /// What the certificate generator said.
        #[source]
        source: rcgen::Error,
    },
}

/// A certificate and its private key, in PEM and DER.
#[derive(Clone)]
pub struct Identity {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PEM (PKCS#8).
    pub key_pem: String,
    /// The certificate, DER.
    pub cert_der: Vec<u8>,
    /// The private key, DER (PKCS#8).
    pub key_der: Vec<u8>,
    /// When the certificate expires.
    pub not_after: Timestamp,
}

impl Identity {
    /// SHA-256 fingerprint of the certificate, `AB:CD:...`.
    pub fn fingerprint(&self) -> String {
        fingerprint::certificate_sha256(&self.cert_der)
    }
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the private key.
        f.debug_struct("Identity")
            .field("fingerprint", &self.fingerprint())
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// A certificate authority that signs serving and client certificates.
pub struct CertificateAuthority {
    params: CertificateParams,
    key: KeyPair,
    identity: Identity,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("identity", &self.identity)
            .finish()
    }
}

impl CertificateAuthority {
    /// A new CA named `common_name`, valid until `not_after`.
    ///
    /// # Errors
    /// When rcgen refuses the parameters.
    pub fn new(common_name: &str, not_after: Timestamp) -> Result<Self, TlsError> {
        let wrap = |source| TlsError::Issue {
            subject: common_name.to_owned(),
            source,
        };
        let mut params = base_params(common_name, &[], not_after);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(wrap)?;
        let cert = params.self_signed(&key).map_err(wrap)?;
        let identity = identity(cert, &key, not_after);
        Ok(CertificateAuthority {
            params,
            key,
            identity,
        })
    }

    /// The CA's own certificate (what clients trust).
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// A serving certificate for `dns_names` and `addresses`.
    ///
    /// # Errors
    /// When a name is not a valid DNS name.
    pub fn issue_server(
        &self,
        common_name: &str,
        dns_names: &[String],
        addresses: &[IpAddr],
        not_after: Timestamp,
    ) -> Result<Identity, TlsError> {
        let mut params = base_params(common_name, &[], not_after);
        params.subject_alt_names = subject_alt_names(common_name, dns_names, addresses)?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        self.sign(common_name, params, not_after)
    }

    /// A client certificate: `common_name` is the user, `organizations` its groups (how
    /// Kubernetes reads a client certificate).
    ///
    /// # Errors
    /// When rcgen refuses the parameters.
    pub fn issue_client(
        &self,
        common_name: &str,
        organizations: &[&str],
        not_after: Timestamp,
    ) -> Result<Identity, TlsError> {
        let mut params = base_params(common_name, organizations, not_after);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        self.sign(common_name, params, not_after)
    }

    fn sign(
        &self,
        subject: &str,
        params: CertificateParams,
        not_after: Timestamp,
    ) -> Result<Identity, TlsError> {
        let wrap = |source| TlsError::Issue {
            subject: subject.to_owned(),
            source,
        };
        let key = KeyPair::generate().map_err(wrap)?;
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(wrap)?;
        Ok(identity(cert, &key, not_after))
    }
}

/// A self-signed serving certificate, as a fresh Proxmox host has (`pve-ssl.pem`).
///
/// # Errors
/// When a name is not a valid DNS name.
pub fn self_signed_server(
    common_name: &str,
    dns_names: &[String],
    addresses: &[IpAddr],
    not_after: Timestamp,
) -> Result<Identity, TlsError> {
    let wrap = |source| TlsError::Issue {
        subject: common_name.to_owned(),
        source,
    };
    let mut params = base_params(common_name, &[], not_after);
    params.subject_alt_names = subject_alt_names(common_name, dns_names, addresses)?;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().map_err(wrap)?;
    let cert = params.self_signed(&key).map_err(wrap)?;
    Ok(identity(cert, &key, not_after))
}

fn base_params(
    common_name: &str,
    organizations: &[&str],
    not_after: Timestamp,
) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    for organization in organizations {
        name.push(DnType::OrganizationName, *organization);
    }
    name.push(DnType::CommonName, common_name);
    params.distinguished_name = name;
    params.not_before = offset_date_time(Timestamp::now() - jiff::SignedDuration::from_hours(1));
    params.not_after = offset_date_time(not_after);
    params
}

fn subject_alt_names(
    common_name: &str,
    dns_names: &[String],
    addresses: &[IpAddr],
) -> Result<Vec<SanType>, TlsError> {
    let mut names = Vec::new();
    for dns in dns_names {
        let name = dns.clone().try_into().map_err(|source| TlsError::Issue {
            subject: common_name.to_owned(),
            source,
        })?;
        names.push(SanType::DnsName(name));
    }
    names.extend(addresses.iter().map(|address| SanType::IpAddress(*address)));
    Ok(names)
}

fn identity(cert: rcgen::Certificate, key: &KeyPair, not_after: Timestamp) -> Identity {
    Identity {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
        not_after,
    }
}

fn offset_date_time(timestamp: Timestamp) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(timestamp.as_second())
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_a_year() -> Timestamp {
        Timestamp::now() + jiff::SignedDuration::from_hours(24 * 365)
    }

    #[test]
    fn a_ca_issues_client_certificates_with_user_and_groups() {
        let ca = CertificateAuthority::new("kubernetes", in_a_year()).expect("ca");
        let admin = ca
            .issue_client("kubernetes-admin", &["kubeadm:cluster-admins"], in_a_year())
            .expect("client");
        let (_, cert) = x509_parser::parse_x509_certificate(&admin.cert_der).expect("parse");
        let subject = cert.subject().to_string();
        assert!(subject.contains("CN=kubernetes-admin"), "{subject}");
        assert!(subject.contains("O=kubeadm:cluster-admins"), "{subject}");
        assert_eq!(cert.issuer().to_string(), "CN=kubernetes");
        assert_eq!(
            cert.validity().not_after.timestamp(),
            admin.not_after.as_second()
        );
    }

    #[test]
    fn validity_starts_in_the_real_past_even_when_it_ends_far_ahead() {
        let far = Timestamp::now() + jiff::SignedDuration::from_hours(24 * 700);
        let server = self_signed_server(
            "pve1",
            &["pve1".into()],
            &["127.0.0.1".parse().expect("ip")],
            far,
        )
        .expect("cert");
        let (_, cert) = x509_parser::parse_x509_certificate(&server.cert_der).expect("parse");
        assert!(cert.validity().not_before.timestamp() < Timestamp::now().as_second());
        assert_eq!(server.fingerprint().len(), 95);
    }
}
