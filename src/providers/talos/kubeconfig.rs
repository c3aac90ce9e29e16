//! A Talos cluster's admin kubeconfig, computed from its bundle as `talosctl kubeconfig` makes
//! it: a client certificate for `admin` in `system:masters` signed by the cluster's Kubernetes
//! CA, the endpoint as the server. Nothing is read from a node: a Talos node has no shell to
//! print a file, and the bundle capstan generated is the authority the API server trusts.

use base64::Engine as _;
use capstan_core::talos::SecretsBundle;
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::{
    TalosSecretsError, der_length, der_sequence, ec_private_key_der, ec_private_key_parts, pem,
    subject_of,
};
use crate::spec::Endpoint;

/// The user and group Talos writes into an admin kubeconfig.
pub const KUBERNETES_ADMIN_USER: &str = "admin";
/// The group that makes the user cluster-admin.
pub const KUBERNETES_ADMIN_GROUP: &str = "system:masters";
/// How long the admin certificate lasts: a year, as `talosctl kubeconfig` issues it; the
/// daemon computes a fresh one whenever it needs one, so it never nears the end.
pub const KUBERNETES_ADMIN_VALIDITY: time::Duration = time::Duration::days(365);

/// The admin kubeconfig of Talos cluster `cluster` at `endpoint`, its certificate valid from
/// `now`; its key is remembered by the redactor. It holds a private key: it goes only to the
/// admission that pins it, and to Secrets.
///
/// # Errors
/// [`TalosSecretsError`] when the bundle's Kubernetes CA does not parse or rcgen refuses.
pub fn admin_kubeconfig(
    cluster: &str,
    bundle: &SecretsBundle,
    endpoint: &Endpoint,
    now: time::OffsetDateTime,
) -> Result<String, TalosSecretsError> {
    let wrap = |what| move |source| TalosSecretsError::Issue { what, source };
    let ca = &bundle.kubernetes_ca;
    let ca_key = pkcs8_from_sec1_pem(&ca.key_pem).ok_or(TalosSecretsError::Issue {
        what: "Kubernetes CA key",
        source: rcgen::Error::CouldNotParseKeyPair,
    })?;
    let ca_key = KeyPair::from_pem(&ca_key).map_err(wrap("Kubernetes CA key"))?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name =
        subject_of(&ca.certificate_pem).ok_or(TalosSecretsError::Issue {
            what: "Kubernetes CA certificate",
            source: rcgen::Error::CouldNotParseCertificate,
        })?;
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let issuer = Issuer::new(ca_params, &ca_key);
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, KUBERNETES_ADMIN_GROUP);
    name.push(DnType::CommonName, KUBERNETES_ADMIN_USER);
    params.distinguished_name = name;
    params.not_before = now;
    params.not_after = now + KUBERNETES_ADMIN_VALIDITY;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(wrap("Kubernetes admin key"))?;
    let certificate = params
        .signed_by(&key, &issuer)
        .map_err(wrap("Kubernetes admin certificate"))?;
    let key_pem = key.serialize_pem();
    crate::redact::remember(&key_pem);
    Ok(render(
        cluster,
        endpoint,
        &ca.certificate_pem,
        &certificate.pem(),
        &key_pem,
    ))
}

fn render(
    cluster: &str,
    endpoint: &Endpoint,
    ca_pem: &str,
    certificate_pem: &str,
    key_pem: &str,
) -> String {
    let base64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let user = format!("{KUBERNETES_ADMIN_USER}@{cluster}");
    let server = match endpoint.host.parse::<std::net::Ipv6Addr>() {
        Ok(_) => format!("https://[{}]:{}", endpoint.host, endpoint.port),
        Err(_) => format!("https://{}:{}", endpoint.host, endpoint.port),
    };
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {
            "server": server,
            "certificate-authority-data": base64(ca_pem),
        }}],
        "users": [{"name": user, "user": {
            "client-certificate-data": base64(certificate_pem),
            "client-key-data": base64(key_pem),
        }}],
        "contexts": [{"name": user, "context": {"cluster": cluster, "user": user}}],
        "current-context": user,
    });
    serde_saphyr::to_string(&kubeconfig).expect("a kubeconfig of strings serializes")
}

/// The OID of id-ecPublicKey (1.2.840.10045.2.1), DER.
const EC_PUBLIC_KEY: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

/// A SEC1 `EC PRIVATE KEY` (P-256, as the bundle holds it) as a PKCS#8 `PRIVATE KEY` PEM, which
/// rcgen (ring) loads: the curve moves to the algorithm identifier, and the `[0]` parameters,
/// which ring refuses inside PKCS#8, are left out.
fn pkcs8_from_sec1_pem(sec1_pem: &str) -> Option<String> {
    let (_, block) = x509_parser::pem::parse_x509_pem(sec1_pem.as_bytes()).ok()?;
    (block.label == "EC PRIVATE KEY").then_some(())?;
    let (private, public) = ec_private_key_parts(&block.contents)?;
    let inner = ec_private_key_der(private, public, false);
    let mut algorithm = EC_PUBLIC_KEY.to_vec();
    algorithm.extend_from_slice(super::PRIME256V1);
    let mut info = vec![0x02, 0x01, 0x00];
    info.extend(der_sequence(&algorithm));
    info.push(0x04);
    info.extend(der_length(inner.len()));
    info.extend(inner);
    Some(pem("PRIVATE KEY", &der_sequence(&info)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Endpoint {
        Endpoint {
            host: "k8s-talos.lab.example".to_owned(),
            address: "192.168.1.26".parse().expect("ip"),
            port: 6443,
        }
    }

    #[test]
    fn the_admin_certificate_is_signed_by_the_kubernetes_ca_for_system_masters() {
        let now = time::OffsetDateTime::now_utc();
        let bundle = super::super::generate_bundle("talos", now).expect("bundle");
        let kubeconfig = admin_kubeconfig("talos", &bundle, &endpoint(), now).expect("kubeconfig");
        let parsed: serde_json::Value = serde_saphyr::from_str(&kubeconfig).expect("yaml");
        assert_eq!(
            parsed["clusters"][0]["cluster"]["server"],
            "https://k8s-talos.lab.example:6443"
        );
        let data = |path: &str| {
            let text = parsed
                .pointer(path)
                .and_then(serde_json::Value::as_str)
                .expect(path);
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .expect("base64")
        };
        assert_eq!(
            data("/clusters/0/cluster/certificate-authority-data"),
            bundle.kubernetes_ca.certificate_pem.as_bytes()
        );
        let certificate_pem = data("/users/0/user/client-certificate-data");
        let (_, block) = x509_parser::pem::parse_x509_pem(&certificate_pem).expect("pem");
        let certificate = block.parse_x509().expect("x509");
        let (_, ca_block) =
            x509_parser::pem::parse_x509_pem(bundle.kubernetes_ca.certificate_pem.as_bytes())
                .expect("ca pem");
        let ca = ca_block.parse_x509().expect("ca x509");
        assert_eq!(certificate.issuer(), ca.subject());
        let subject = certificate.subject().to_string();
        assert!(subject.contains("O=system:masters"), "{subject}");
        assert!(subject.contains("CN=admin"), "{subject}");
        assert!(!format!("{:?}", bundle).contains(&bundle.kubernetes_ca.key_pem));
    }
}
