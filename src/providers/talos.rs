//! Talos Linux's daemon side, what needs randomness or a clock and so cannot be in core
//! (which renders every machine config from the bundle made here); the executor's Talos
//! distribution (`execute/distribution/talos/`) uses it, the records module
//! (`src/records/talos.rs`) keeps the bundle in the management cluster and `kubeconfig` computes the admin kubeconfig from it.
//!
//! A Talos cluster's secrets, generated once: the four CAs (the OS CA Ed25519 as Talos makes
//! it; Kubernetes, etcd and aggregator ECDSA P-256), the service-account key, the bootstrap
//! and trustd tokens, the secretbox key and the discovery id and secret; and `os:admin`
//! client certificates signed by the OS CA for the Talos API.
//!
//! Keys are PEM-encoded as Talos's own `secrets.yaml` holds them, because Talos picks the
//! parser by the PEM label (siderolabs/crypto `x509.PEMEncodedCertificateAndKey.GetKey`):
//! `ED25519 PRIVATE KEY` over PKCS#8, `EC PRIVATE KEY` over SEC1 (RFC 5915, with the curve
//! named).
//!
//! # Guarantees
//! - Every secret is known to the redactor ([`crate::redact`]) the moment it is generated or
//!   read, in the forms a message may quote it: as is, and a key also as the base64 a machine
//!   config carries.
//! - `Debug` of what this module returns shows no secret.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use capstan_core::talos::secrets::BUNDLE_FORMAT;
use capstan_core::talos::{BundleShape, CertificateAuthority, SecretsBundle};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SignatureAlgorithm,
};

use crate::providers::kube::SecretRecord;

pub mod api;
pub mod kubeconfig;

/// The Secret's key holding the bundle as JSON.
pub const BUNDLE_KEY: &str = "bundle.json";
/// The annotation naming the workload cluster (not Flux delivery's `capstan.dev/cluster`,
/// which marks delivered kubeconfigs).
pub const CLUSTER_ANNOTATION: &str = "capstan.dev/talos-cluster";
/// How long the CAs are valid: ten years, as Talos's own `gen secrets` makes them.
pub const CA_VALIDITY: time::Duration = time::Duration::days(3650);
/// How long an `os:admin` client certificate is valid: a year, as `talosctl gen config` makes
/// the talosconfig's; the daemon renews it well before.
pub const ADMIN_VALIDITY: time::Duration = time::Duration::days(365);
/// The Organization the Talos API reads a client's role from.
pub const ADMIN_ROLE: &str = "os:admin";

/// The talosconfig an operator (or any Talos API client) uses for `cluster`: one context named
/// after the cluster, with `endpoints` as its endpoints and nodes, the OS CA and the `os:admin`
/// certificate and key, each base64 of its PEM, as `talosctl` writes and reads it. It holds a
/// private key: it goes only into a Secret.
pub fn talosconfig(
    cluster: &str,
    endpoints: &[String],
    os_ca_pem: &str,
    admin: &AdminCredentials,
) -> String {
    #[derive(serde::Serialize)]
    struct Context<'a> {
        endpoints: &'a [String],
        nodes: &'a [String],
        ca: String,
        crt: String,
        key: String,
    }
    #[derive(serde::Serialize)]
    struct Config<'a> {
        context: &'a str,
        contexts: BTreeMap<&'a str, Context<'a>>,
    }
    let base64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let config = Config {
        context: cluster,
        contexts: BTreeMap::from([(
            cluster,
            Context {
                endpoints,
                nodes: endpoints,
                ca: base64(os_ca_pem),
                crt: base64(&admin.certificate_pem),
                key: base64(&admin.key_pem),
            },
        )]),
    };
    serde_saphyr::to_string(&config).expect("a talosconfig of strings serializes")
}

/// The Secret (in `capstan-system`) holding `cluster`'s bundle.
pub fn secret_name(cluster: &str) -> String {
    format!("capstan-talos-{cluster}")
}

/// Generating or reading a bundle failed.
#[derive(Debug, thiserror::Error)]
pub enum TalosSecretsError {
    /// The system gave no randomness.
    #[error("no randomness to generate the Talos secrets")]
    Random(#[source] getrandom::Error),
    /// rcgen refused to make a key or a certificate.
    #[error("cannot issue the Talos {what}")]
    Issue {
        /// Which certificate or key.
        what: &'static str,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// A key did not have the PKCS#8 shape ring writes (a defect, not bad input).
    #[error("cannot re-encode the Talos {0} key as SEC1")]
    KeyEncoding(&'static str),
    /// The Secret lacks the bundle.
    #[error(
        "Secret {name} lacks `{BUNDLE_KEY}`: delete it only if no machine of the cluster was ever configured from it"
    )]
    Malformed {
        /// The Secret's name.
        name: String,
    },
    /// The Secret's bundle does not parse (the parser's message quotes no value).
    #[error("Secret {name}'s `{BUNDLE_KEY}` is not a Talos secrets bundle")]
    Unreadable {
        /// The Secret's name.
        name: String,
        /// Where it does not parse.
        #[source]
        source: serde_json::Error,
    },
    /// The Secret's bundle has a malformed field.
    #[error("Secret {name} holds a malformed Talos secrets bundle")]
    Shape {
        /// The Secret's name.
        name: String,
        /// The field.
        #[source]
        source: BundleShape,
    },
}

/// An `os:admin` client certificate and its key, PEM (the key Ed25519, `PRIVATE KEY` PKCS#8,
/// which talosctl and gRPC clients read).
#[derive(Clone, PartialEq, Eq)]
pub struct AdminCredentials {
    /// The client certificate.
    pub certificate_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl fmt::Debug for AdminCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminCredentials").finish_non_exhaustive()
    }
}

/// A new bundle for cluster `cluster`, its CAs valid from `now` for [`CA_VALIDITY`]; every
/// secret in it is remembered by the redactor.
///
/// # Errors
///
/// [`TalosSecretsError`] when the system gives no randomness or rcgen refuses.
pub fn generate_bundle(
    cluster: &str,
    now: time::OffsetDateTime,
) -> Result<SecretsBundle, TalosSecretsError> {
    let bundle = SecretsBundle {
        format: BUNDLE_FORMAT,
        cluster_id: random_base64()?,
        cluster_secret: random_base64()?,
        bootstrap_token: random_token()?,
        secretbox_encryption_secret: random_base64()?,
        trustd_token: random_token()?,
        os_ca: authority("OS CA", &["talos"], cluster, Algorithm::Ed25519, now)?,
        kubernetes_ca: authority(
            "Kubernetes CA",
            &["kubernetes"],
            cluster,
            Algorithm::P256,
            now,
        )?,
        etcd_ca: authority("etcd CA", &["etcd"], cluster, Algorithm::P256, now)?,
        aggregator_ca: authority("aggregator CA", &[], cluster, Algorithm::P256, now)?,
        service_account_key_pem: {
            let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|source| {
                TalosSecretsError::Issue {
                    what: "service-account key",
                    source,
                }
            })?;
            ec_private_key_pem(&key, "service-account")?
        },
    };
    remember_bundle(&bundle);
    Ok(bundle)
}

/// An `os:admin` client certificate signed by `bundle`'s OS CA, valid from `now` for
/// [`ADMIN_VALIDITY`]; its key is remembered by the redactor.
///
/// # Errors
///
/// [`TalosSecretsError::Issue`] when the OS CA's key or certificate does not parse.
pub fn admin_credentials(
    bundle: &SecretsBundle,
    now: time::OffsetDateTime,
) -> Result<AdminCredentials, TalosSecretsError> {
    let wrap = |what| move |source| TalosSecretsError::Issue { what, source };
    // Talos labels its Ed25519 keys `ED25519 PRIVATE KEY`; the content is PKCS#8, which is
    // what rcgen reads under the standard label.
    let ca_key_pem = bundle
        .os_ca
        .key_pem
        .replace("ED25519 PRIVATE KEY", "PRIVATE KEY");
    let ca_key = KeyPair::from_pem(&ca_key_pem).map_err(wrap("OS CA key"))?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name =
        subject_of(&bundle.os_ca.certificate_pem).ok_or(TalosSecretsError::Issue {
            what: "OS CA certificate",
            source: rcgen::Error::CouldNotParseCertificate,
        })?;
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let issuer = Issuer::new(ca_params, &ca_key);
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, ADMIN_ROLE);
    name.push(DnType::CommonName, "capstan");
    params.distinguished_name = name;
    params.not_before = now;
    params.not_after = now + ADMIN_VALIDITY;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate_for(&rcgen::PKCS_ED25519).map_err(wrap("os:admin key"))?;
    let certificate = params
        .signed_by(&key, &issuer)
        .map_err(wrap("os:admin certificate"))?;
    let key_der =
        ed25519_pkcs8_v1(&key.serialize_der()).ok_or(TalosSecretsError::KeyEncoding("os:admin"))?;
    let credentials = AdminCredentials {
        certificate_pem: certificate.pem(),
        key_pem: pem("PRIVATE KEY", &key_der),
    };
    remember_pem_key(&credentials.key_pem);
    Ok(credentials)
}

/// The subject of a certificate (its Organizations and Common Name, in order), as the issuer
/// of the certificates it signs must name it. rcgen reads a certificate only with its
/// `x509-parser` feature, which would build a second x509-parser; the daemon's reads it here.
fn subject_of(certificate_pem: &str) -> Option<DistinguishedName> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(certificate_pem.as_bytes()).ok()?;
    let certificate = pem.parse_x509().ok()?;
    let mut name = DistinguishedName::new();
    for attribute in certificate.subject().iter_attributes() {
        let value = attribute.as_str().ok()?.to_owned();
        let oid = attribute.attr_type();
        if *oid == x509_parser::oid_registry::OID_X509_ORGANIZATION_NAME {
            name.push(DnType::OrganizationName, value);
        } else if *oid == x509_parser::oid_registry::OID_X509_COMMON_NAME {
            name.push(DnType::CommonName, value);
        } else {
            return None;
        }
    }
    Some(name)
}

/// The Secret holding `bundle` for `cluster`: the bundle as JSON (the records module stamps
/// it as capstan's, with its kind, owner and identity, when it writes it).
pub fn record(cluster: &str, bundle: &SecretsBundle) -> SecretRecord {
    let json = serde_json::to_vec(bundle).expect("a bundle of strings serializes");
    SecretRecord {
        data: BTreeMap::from([(BUNDLE_KEY.to_owned(), json)]),
        labels: BTreeMap::new(),
        annotations: BTreeMap::from([(CLUSTER_ANNOTATION.to_owned(), cluster.to_owned())]),
        resource_version: None,
    }
}

/// The bundle a Secret named `name` holds (one the records module judged to be the cluster's
/// bundle), checked and remembered by the redactor.
///
/// # Errors
///
/// [`TalosSecretsError`] when the Secret lacks the bundle, or holds a malformed one (naming
/// the field, never a value).
pub fn read(name: &str, secret: &SecretRecord) -> Result<SecretsBundle, TalosSecretsError> {
    let malformed = || TalosSecretsError::Malformed {
        name: name.to_owned(),
    };
    let json = secret.data.get(BUNDLE_KEY).ok_or_else(malformed)?;
    let bundle: SecretsBundle =
        serde_json::from_slice(json).map_err(|source| TalosSecretsError::Unreadable {
            name: name.to_owned(),
            source,
        })?;
    // Remembered before it is checked: a malformed bundle's secrets are still secrets.
    remember_bundle(&bundle);
    bundle.check().map_err(|source| TalosSecretsError::Shape {
        name: name.to_owned(),
        source,
    })?;
    Ok(bundle)
}

/// Tells the redactor every secret of `bundle`, in every form a message may quote it.
pub fn remember_bundle(bundle: &SecretsBundle) {
    for secret in bundle.secret_values() {
        if secret.contains("PRIVATE KEY") {
            remember_pem_key(secret);
        } else {
            crate::redact::remember(secret);
        }
    }
}

/// A PEM key as is, and as the base64 a machine config carries it in.
fn remember_pem_key(pem: &str) {
    crate::redact::remember(pem);
    crate::redact::remember(&base64::engine::general_purpose::STANDARD.encode(pem));
}

#[derive(Clone, Copy)]
enum Algorithm {
    Ed25519,
    P256,
}

impl Algorithm {
    fn rcgen(self) -> &'static SignatureAlgorithm {
        match self {
            Algorithm::Ed25519 => &rcgen::PKCS_ED25519,
            Algorithm::P256 => &rcgen::PKCS_ECDSA_P256_SHA256,
        }
    }
}

fn authority(
    what: &'static str,
    organizations: &[&str],
    cluster: &str,
    algorithm: Algorithm,
    now: time::OffsetDateTime,
) -> Result<CertificateAuthority, TalosSecretsError> {
    let wrap = |source| TalosSecretsError::Issue { what, source };
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    for organization in organizations {
        name.push(DnType::OrganizationName, *organization);
    }
    name.push(DnType::CommonName, format!("{cluster} {what}"));
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = now;
    params.not_after = now + CA_VALIDITY;
    let key = KeyPair::generate_for(algorithm.rcgen()).map_err(wrap)?;
    let certificate = params.self_signed(&key).map_err(wrap)?;
    let key_pem = match algorithm {
        Algorithm::Ed25519 => pem(
            "ED25519 PRIVATE KEY",
            &ed25519_pkcs8_v1(&key.serialize_der()).ok_or(TalosSecretsError::KeyEncoding(what))?,
        ),
        Algorithm::P256 => ec_private_key_pem(&key, what)?,
    };
    Ok(CertificateAuthority {
        certificate_pem: certificate.pem(),
        key_pem,
    })
}

/// `EC PRIVATE KEY`: the SEC1 structure inside ring's PKCS#8, with the curve named (`[0]
/// prime256v1`), which Go's `x509.ParseECPrivateKey` requires and ring leaves out.
fn ec_private_key_pem(key: &KeyPair, what: &'static str) -> Result<String, TalosSecretsError> {
    let sec1 = sec1_from_pkcs8(&key.serialize_der()).ok_or(TalosSecretsError::KeyEncoding(what))?;
    Ok(pem("EC PRIVATE KEY", &sec1))
}

/// An Ed25519 key as PKCS#8 v1 (RFC 8410: the algorithm and the 32-byte seed), from ring's
/// v2 (which adds the public key, and which openssl 3 does not read).
fn ed25519_pkcs8_v1(pkcs8: &[u8]) -> Option<Vec<u8>> {
    const ED25519: &[u8] = &[0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70];
    let (tag, info, _) = der_element(pkcs8)?;
    (tag == 0x30).then_some(())?;
    let (_, _, rest) = der_element(info)?; // version
    let (_, algorithm, rest) = der_element(rest)?;
    (algorithm == &ED25519[2..]).then_some(())?;
    let (tag, private, _) = der_element(rest)?;
    (tag == 0x04).then_some(())?;
    let (tag, seed, _) = der_element(private)?;
    (tag == 0x04 && seed.len() == 32).then_some(())?;
    let mut out = vec![0x30, 0x2e, 0x02, 0x01, 0x00];
    out.extend_from_slice(ED25519);
    out.extend_from_slice(&[0x04, 0x22, 0x04, 0x20]);
    out.extend_from_slice(seed);
    Some(out)
}

/// The OID of the P-256 curve (1.2.840.10045.3.1.7), DER.
const PRIME256V1: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

fn sec1_from_pkcs8(pkcs8: &[u8]) -> Option<Vec<u8>> {
    // PrivateKeyInfo ::= SEQUENCE { version, algorithm, privateKey OCTET STRING, ... }
    let (tag, info, _) = der_element(pkcs8)?;
    (tag == 0x30).then_some(())?;
    let (_, _, rest) = der_element(info)?; // version
    let (_, algorithm, rest) = der_element(rest)?;
    algorithm
        .windows(PRIME256V1.len())
        .any(|w| w == PRIME256V1)
        .then_some(())?;
    let (tag, inner, _) = der_element(rest)?;
    (tag == 0x04).then_some(())?;
    let (private, public) = ec_private_key_parts(inner)?;
    Some(ec_private_key_der(private, public, true))
}

/// The private key and, when present, the public key of a DER `ECPrivateKey`
/// (`SEQUENCE { version 1, privateKey OCTET STRING, [0] params OPTIONAL, [1] publicKey
/// OPTIONAL }`) of a P-256 key.
fn ec_private_key_parts(der: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let (tag, ec, _) = der_element(der)?;
    (tag == 0x30).then_some(())?;
    let (_, _, fields) = der_element(ec)?; // version
    let (tag, private, mut fields) = der_element(fields)?;
    (tag == 0x04 && private.len() == 32).then_some(())?;
    let mut public = None;
    while !fields.is_empty() {
        let (tag, content, after) = der_element(fields)?;
        if tag == 0xa1 {
            public = Some(content);
        }
        fields = after;
    }
    Some((private, public))
}

/// A DER `ECPrivateKey` of a P-256 key: with the curve named (`[0] prime256v1`, which Go
/// requires in SEC1) or without (what ring requires inside PKCS#8).
fn ec_private_key_der(private: &[u8], public: Option<&[u8]>, with_curve: bool) -> Vec<u8> {
    let mut body = vec![0x02, 0x01, 0x01, 0x04, 0x20];
    body.extend_from_slice(private);
    if with_curve {
        body.push(0xa0);
        body.extend(der_length(PRIME256V1.len()));
        body.extend_from_slice(PRIME256V1);
    }
    if let Some(public) = public {
        body.push(0xa1);
        body.extend(der_length(public.len()));
        body.extend_from_slice(public);
    }
    der_sequence(&body)
}

/// A DER SEQUENCE of `body`.
fn der_sequence(body: &[u8]) -> Vec<u8> {
    let mut out = vec![0x30];
    out.extend(der_length(body.len()));
    out.extend_from_slice(body);
    out
}

/// One DER element: its tag, its content, and what follows it.
fn der_element(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *bytes.first()?;
    let first = *bytes.get(1)?;
    let (length, header) = match first {
        0..=0x7f => (usize::from(first), 2),
        0x81 => (usize::from(*bytes.get(2)?), 3),
        0x82 => (
            usize::from(u16::from_be_bytes([*bytes.get(2)?, *bytes.get(3)?])),
            4,
        ),
        _ => return None,
    };
    let content = bytes.get(header..header + length)?;
    Some((tag, content, &bytes[header + length..]))
}

fn der_length(length: usize) -> Vec<u8> {
    match u8::try_from(length) {
        Ok(short) if short < 0x80 => vec![short],
        Ok(byte) => vec![0x81, byte],
        Err(_) => {
            let [high, low] = u16::try_from(length).unwrap_or(u16::MAX).to_be_bytes();
            vec![0x82, high, low]
        }
    }
}

fn pem(label: &str, der: &[u8]) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in encoded.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// 32 random bytes, standard base64 (the discovery id and secret, the secretbox key).
fn random_base64() -> Result<String, TalosSecretsError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(TalosSecretsError::Random)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// A bootstrap-token-shaped token, `[a-z0-9]{6}.[a-z0-9]{16}`, each character uniform.
fn random_token() -> Result<String, TalosSecretsError> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut token = String::with_capacity(23);
    while token.len() < 23 {
        if token.len() == 6 {
            token.push('.');
            continue;
        }
        let mut byte = [0u8; 1];
        getrandom::fill(&mut byte).map_err(TalosSecretsError::Random)?;
        // 252 = 7 × 36: rejecting the rest keeps every character equally likely.
        if byte[0] < 252 {
            token.push(char::from(ALPHABET[usize::from(byte[0]) % ALPHABET.len()]));
        }
    }
    Ok(token)
}

#[cfg(test)]
mod tests;
