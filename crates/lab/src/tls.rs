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
    /// A certificate authority handed in (a Talos machine config's `cluster.ca`) is unusable.
    #[error("the given certificate authority is unusable: {why}")]
    Authority {
        /// What is wrong with it (no secret).
        why: &'static str,
    },
}

/// A certificate authority's certificate and private key, PEM, handed to the lab (a Talos
/// cluster's Kubernetes CA, from its machine config) instead of one the lab makes.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthorityPem {
    /// The CA certificate.
    pub certificate_pem: String,
    /// Its key: PKCS#8 (`PRIVATE KEY`) or SEC1 P-256 (`EC PRIVATE KEY`, as Talos writes it).
    pub key_pem: String,
}

impl std::fmt::Debug for AuthorityPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorityPem").finish_non_exhaustive()
    }
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
    issuer: Issuer<'static, KeyPair>,
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
            issuer: Issuer::new(params, key),
            identity,
        })
    }

    /// The CA `authority` holds, signing with its key from now on.
    ///
    /// # Errors
    /// [`TlsError::Authority`] when the certificate or key does not parse, the key is of
    /// another kind, or it is not the certificate's key.
    pub fn from_pem(authority: &AuthorityPem) -> Result<Self, TlsError> {
        let refuse = |why| TlsError::Authority { why };
        let key_der = pkcs8_der(&authority.key_pem)
            .ok_or(refuse("its key is no PKCS#8 or SEC1 P-256 PEM key"))?;
        let key = KeyPair::try_from(&rustls::pki_types::PrivatePkcs8KeyDer::from(key_der))
            .map_err(|_| refuse("its key does not load"))?;
        let (_, pem) = x509_parser::pem::parse_x509_pem(authority.certificate_pem.as_bytes())
            .map_err(|_| refuse("its certificate is no PEM"))?;
        let certificate = pem
            .parse_x509()
            .map_err(|_| refuse("its certificate does not parse"))?;
        {
            use rcgen::PublicKeyData as _;
            if certificate.public_key().subject_public_key.data.as_ref() != key.der_bytes() {
                return Err(refuse("its key is not the certificate's"));
            }
        }
        let not_after = Timestamp::from_second(certificate.validity().not_after.timestamp())
            .map_err(|_| refuse("its certificate's expiry is out of range"))?;
        let identity = Identity {
            cert_pem: authority.certificate_pem.clone(),
            key_pem: key.serialize_pem(),
            cert_der: pem.contents.clone(),
            key_der: key.serialize_der(),
            not_after,
        };
        // The issuer named, and its key identified, exactly as the certificate has them, so
        // what it signs chains to it.
        let issuer = Issuer::from_ca_cert_pem(&authority.certificate_pem, key)
            .map_err(|_| refuse("its certificate does not parse"))?;
        Ok(CertificateAuthority { issuer, identity })
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
        let cert = params.signed_by(&key, &self.issuer).map_err(wrap)?;
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

/// The PKCS#8 DER of a PEM private key: PKCS#8 as is (Talos's `ED25519 PRIVATE KEY` label
/// wraps PKCS#8 too), SEC1 P-256 re-encoded (what rcgen and ring load).
fn pkcs8_der(key_pem: &str) -> Option<Vec<u8>> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(key_pem.as_bytes()).ok()?;
    match pem.label.as_str() {
        "PRIVATE KEY" | "ED25519 PRIVATE KEY" => Some(pem.contents),
        "EC PRIVATE KEY" => {
            use p256::pkcs8::EncodePrivateKey as _;
            let key = p256::SecretKey::from_sec1_der(&pem.contents).ok()?;
            Some(key.to_pkcs8_der().ok()?.as_bytes().to_vec())
        }
        _ => None,
    }
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

    fn pem_of(label: &str, der: &[u8]) -> String {
        use base64::Engine as _;
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).expect("ascii"))
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            lines.join("\n")
        )
    }

    /// A P-256 CA as Talos's secrets hold it: the certificate, and the key as SEC1.
    fn talos_style_ca() -> (rcgen::Certificate, String) {
        use p256::pkcs8::DecodePrivateKey as _;
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let mut params = base_params("prod Kubernetes CA", &["kubernetes"], in_a_year());
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let certificate = params.self_signed(&key).expect("self-signed");
        let secret = p256::SecretKey::from_pkcs8_der(&key.serialize_der()).expect("P-256");
        let sec1 = secret.to_sec1_der().expect("SEC1");
        (certificate, pem_of("EC PRIVATE KEY", &sec1))
    }

    #[test]
    fn a_given_ca_with_a_sec1_key_signs_certificates_that_chain_to_it() {
        let (certificate, key_pem) = talos_style_ca();
        let ca = CertificateAuthority::from_pem(&AuthorityPem {
            certificate_pem: certificate.pem(),
            key_pem,
        })
        .expect("loads");
        assert_eq!(ca.identity().cert_pem, certificate.pem());
        let admin = ca
            .issue_client("admin", &["system:masters"], in_a_year())
            .expect("issues");
        let (_, leaf) = x509_parser::parse_x509_certificate(&admin.cert_der).expect("parse");
        let (_, root) = x509_parser::parse_x509_certificate(certificate.der()).expect("parse");
        assert_eq!(leaf.issuer().as_raw(), root.subject().as_raw());
        leaf.verify_signature(Some(root.public_key()))
            .expect("signed by the given CA");

        let (_, other_key) = talos_style_ca();
        let mismatched = CertificateAuthority::from_pem(&AuthorityPem {
            certificate_pem: certificate.pem(),
            key_pem: other_key.clone(),
        })
        .expect_err("another key");
        assert_eq!(
            mismatched.to_string(),
            "the given certificate authority is unusable: its key is not the certificate's"
        );
        let shown = format!(
            "{:?}",
            AuthorityPem {
                certificate_pem: certificate.pem(),
                key_pem: other_key,
            }
        );
        assert!(!shown.contains("PRIVATE"), "{shown}");
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
