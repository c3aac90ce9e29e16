use std::net::SocketAddr;
use std::sync::OnceLock;

use base64::Engine as _;
use capstan_lab::tls::CertificateAuthority;
use serde_json::{Value, json};

use super::*;

const HOST: &str = "k8s-prod.lab.example";

struct Material {
    ca_pem: String,
    other_ca_pem: String,
    certificate_pem: String,
    key_pem: String,
    not_after: Timestamp,
}

/// A CA and an admin certificate, made once (RSA-free: rcgen's ECDSA keys are quick).
fn material() -> &'static Material {
    static MATERIAL: OnceLock<Material> = OnceLock::new();
    MATERIAL.get_or_init(|| {
        let not_after = Timestamp::from_second(2_000_000_000).expect("timestamp");
        let ca = CertificateAuthority::new("kubernetes", not_after).expect("CA");
        let other = CertificateAuthority::new("kubernetes", not_after).expect("other CA");
        let admin = ca
            .issue_client("kubernetes-admin", &["kubeadm:cluster-admins"], not_after)
            .expect("admin certificate");
        Material {
            ca_pem: ca.identity().cert_pem.clone(),
            other_ca_pem: other.identity().cert_pem.clone(),
            certificate_pem: admin.cert_pem.clone(),
            key_pem: admin.key_pem.clone(),
            not_after,
        }
    })
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// kubeadm's admin.conf, as a value to edit.
fn admin_conf(server: &str) -> Value {
    let m = material();
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubernetes", "cluster": {
            "certificate-authority-data": b64(&m.ca_pem),
            "server": server,
        }}],
        "contexts": [{"name": "kubernetes-admin@kubernetes", "context": {"cluster": "kubernetes", "user": "kubernetes-admin"}}],
        "current-context": "kubernetes-admin@kubernetes",
        "preferences": {},
        "users": [{"name": "kubernetes-admin", "user": {
            "client-certificate-data": b64(&m.certificate_pem),
            "client-key-data": b64(&m.key_pem),
        }}],
    })
}

fn endpoint() -> ApiEndpoint {
    ApiEndpoint::declared(HOST, 6443)
}

/// The fingerprint key of these tests, as a daemon derives one from its tokens.
fn key() -> fingerprint::FingerprintKey {
    fingerprint::FingerprintKey::derive([&b"a Proxmox token"[..]])
}

fn reduce(document: &Value, endpoint: &ApiEndpoint) -> Result<AdminKubeconfig, KubeconfigRefused> {
    AdminKubeconfig::reduce(
        &serde_json::to_string(document).expect("json"),
        endpoint,
        &key(),
    )
}

fn refusal(document: &Value) -> String {
    reduce(document, &endpoint())
        .expect_err("refused")
        .to_string()
}

#[test]
fn kubeadms_admin_conf_is_reduced_to_its_server_ca_and_client_certificate() {
    let m = material();
    let reduced = reduce(
        &admin_conf("https://k8s-prod.lab.example:6443"),
        &endpoint(),
    )
    .expect("accepted");
    assert_eq!(reduced.server(), "https://k8s-prod.lab.example:6443");
    assert_eq!(reduced.tls_server_name(), None);
    assert_eq!(reduced.client_certificate_expiry(), Some(m.not_after));
    assert_eq!(reduced.ca_pem(), m.ca_pem.replace("\r\n", "\n"));
    let (_, ca) = x509_parser::pem::parse_x509_pem(m.ca_pem.as_bytes()).expect("PEM");
    assert_eq!(
        reduced.ca_fingerprint(),
        fingerprint::certificate_sha256(&ca.contents)
    );
    assert!(
        !format!("{reduced:?}").contains(&b64(&m.key_pem)[..20]),
        "Debug hides the key"
    );

    // What Flux receives names nothing but these parts, and reduces to the same again.
    let rendered = reduced.render();
    let again = AdminKubeconfig::reduce(&rendered, &endpoint(), &key()).expect("its own rendering");
    assert_eq!(again, reduced);
    assert_eq!(
        reduced.fingerprint(),
        key().fingerprint(rendered.as_bytes())
    );
}

#[test]
fn a_yaml_kubeconfig_as_kubeadm_writes_it_is_accepted() {
    let m = material();
    let text = format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: https://K8S-PROD.lab.example:6443\n  name: kubernetes\ncontexts:\n- context:\n    cluster: kubernetes\n    user: kubernetes-admin\n  name: kubernetes-admin@kubernetes\ncurrent-context: kubernetes-admin@kubernetes\nkind: Config\npreferences: {{}}\nusers:\n- name: kubernetes-admin\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
        b64(&m.ca_pem),
        b64(&m.certificate_pem),
        b64(&m.key_pem)
    );
    let reduced = AdminKubeconfig::reduce(&text, &endpoint(), &key()).expect("accepted");
    assert_eq!(reduced.server(), "https://k8s-prod.lab.example:6443");
}

#[test]
fn k3s_loopback_server_is_accepted_only_with_the_endpoints_port_and_dialled_at_the_endpoint() {
    let k3s = admin_conf("https://127.0.0.1:6443");
    let reduced = reduce(&k3s, &endpoint().or_node_loopback()).expect("K3s");
    assert_eq!(reduced.server(), "https://k8s-prod.lab.example:6443");
    assert!(
        refusal(&k3s).contains("is not the cluster's endpoint https://k8s-prod.lab.example:6443"),
        "a kubeadm cluster's kubeconfig never names a loopback"
    );
    let other_port = admin_conf("https://127.0.0.1:16443");
    assert!(reduce(&other_port, &endpoint().or_node_loopback()).is_err());
}

#[test]
fn a_lab_dials_its_own_address_and_verifies_the_endpoint_name() {
    let address: SocketAddr = "127.0.0.1:41234".parse().expect("address");
    let lab = endpoint().served_at(address);
    let reduced = reduce(&admin_conf("https://127.0.0.1:41234"), &lab).expect("lab");
    assert_eq!(reduced.server(), "https://127.0.0.1:41234");
    assert_eq!(reduced.tls_server_name(), Some(HOST));
    assert!(
        reduced
            .render()
            .contains("tls-server-name: k8s-prod.lab.example")
    );
    // Another loopback port is another server.
    let elsewhere = reduce(&admin_conf("https://127.0.0.1:41235"), &lab).expect_err("refused");
    assert!(
        matches!(elsewhere, KubeconfigRefused::Server { .. }),
        "{elsewhere}"
    );
}

#[test]
fn another_server_is_refused_naming_the_field_and_the_endpoint() {
    for server in [
        "https://attacker.example:6443",
        "https://k8s-prod.lab.example:443",
        "https://k8s-prod.lab.example.attacker.example:6443",
        "https://192.168.1.23:6443",
    ] {
        assert_eq!(
            refusal(&admin_conf(server)),
            "clusters[0].cluster.server is not the cluster's endpoint https://k8s-prod.lab.example:6443: capstan talks to no other server",
            "{server}"
        );
    }
    for server in [
        "http://k8s-prod.lab.example:6443",
        "https://user:pw@k8s-prod.lab.example:6443",
        "https://k8s-prod.lab.example:6443/proxy",
        "k8s-prod.lab.example:6443",
    ] {
        assert_eq!(
            refusal(&admin_conf(server)),
            "clusters[0].cluster.server is not an https:// URL with no path",
            "{server}"
        );
    }
}

#[test]
fn credential_plugins_files_and_tokens_are_refused_naming_the_field() {
    let genuine = admin_conf("https://k8s-prod.lab.example:6443");
    let cases = [
        (
            "exec",
            json!({"command": "/bin/sh", "args": ["-c", "id"], "apiVersion": "client.authentication.k8s.io/v1"}),
            "users[0].user.exec is not accepted: capstan runs no credential plugin a VM names",
        ),
        (
            "auth-provider",
            json!({"name": "gcp"}),
            "users[0].user.auth-provider is not accepted: capstan runs no credential plugin a VM names",
        ),
        (
            "tokenFile",
            json!("/var/run/secrets/capstan/proxmox-token"),
            "users[0].user.tokenFile is not accepted: capstan authenticates to a cluster with the client certificate only",
        ),
        (
            "token",
            json!("abcdef.0123456789abcdef"),
            "users[0].user.token is not accepted: capstan authenticates to a cluster with the client certificate only",
        ),
        (
            "client-key",
            json!("/etc/capstan/management.kubeconfig"),
            "users[0].user.client-key is not accepted: capstan reads no file a VM names; certificates must be inline (*-data)",
        ),
        (
            "as",
            json!("system:admin"),
            "users[0].user.as is not accepted: capstan impersonates nobody",
        ),
    ];
    for (key, value, message) in cases {
        let mut hostile = genuine.clone();
        hostile["users"][0]["user"][key] = value;
        let refused = refusal(&hostile);
        assert_eq!(refused, message);
        assert!(!refused.contains("/bin/sh") && !refused.contains("abcdef"));
    }
}

#[test]
fn cluster_fields_that_move_trust_or_traffic_are_refused() {
    let genuine = admin_conf("https://k8s-prod.lab.example:6443");
    let cases = [
        (
            "insecure-skip-tls-verify",
            json!(true),
            "capstan always verifies the server against the CA",
        ),
        (
            "certificate-authority",
            json!("/etc/ssl/certs/ca.pem"),
            "capstan reads no file a VM names; certificates must be inline (*-data)",
        ),
        (
            "proxy-url",
            json!("socks5://attacker.example:1080"),
            "capstan alone decides where it connects",
        ),
        (
            "tls-server-name",
            json!("attacker.example"),
            "capstan alone decides where it connects",
        ),
    ];
    for (key, value, why) in cases {
        let mut hostile = genuine.clone();
        hostile["clusters"][0]["cluster"][key] = value;
        assert_eq!(
            refusal(&hostile),
            format!("clusters[0].cluster.{key} is not accepted: {why}")
        );
    }
    let mut unknown = genuine.clone();
    unknown["extensions"] = json!([{"name": "x", "extension": {}}]);
    assert_eq!(
        refusal(&unknown),
        "extensions is not accepted: capstan does not know it, and honours nothing it does not know"
    );
    let mut odd_key = genuine.clone();
    odd_key["users"][0]["user"]["line\nbreak"] = json!(1);
    assert!(refusal(&odd_key).starts_with("users[0].user.line\\nbreak is not accepted"));
    let mut preferences = genuine;
    preferences["preferences"] = json!({"colors": true});
    assert_eq!(
        refusal(&preferences),
        "preferences is not accepted: it must be empty"
    );
}

#[test]
fn every_entry_is_checked_not_only_the_current_contexts() {
    let mut hostile = admin_conf("https://k8s-prod.lab.example:6443");
    hostile["users"]
        .as_array_mut()
        .expect("users")
        .push(json!({"name": "spare", "user": {"exec": {"command": "sh"}}}));
    assert!(refusal(&hostile).starts_with("users[1].user.exec is not accepted"));
}

#[test]
fn malformed_documents_are_refused_without_quoting_them() {
    let m = material();
    let secret_line = format!("client-key-data: {}", b64(&m.key_pem));
    let broken = format!("users:\n- name: a\n  user:\n    {secret_line}\n   bad: [\n");
    let refused = AdminKubeconfig::reduce(&broken, &endpoint(), &key()).expect_err("not YAML");
    assert!(
        matches!(refused, KubeconfigRefused::NotYaml { .. }),
        "{refused}"
    );
    assert!(!refused.to_string().contains("client-key"), "{refused}");

    let huge = "#".repeat(MAX_KUBECONFIG_BYTES + 1);
    assert_eq!(
        AdminKubeconfig::reduce(&huge, &endpoint(), &key()).expect_err("too large"),
        KubeconfigRefused::TooLarge {
            bytes: MAX_KUBECONFIG_BYTES + 1
        }
    );

    let mut no_context = admin_conf("https://k8s-prod.lab.example:6443");
    no_context["current-context"] = json!("elsewhere");
    assert_eq!(
        refusal(&no_context),
        "the entry of contexts that current-context names is missing"
    );
    let mut not_base64 = admin_conf("https://k8s-prod.lab.example:6443");
    not_base64["users"][0]["user"]["client-key-data"] = json!("%%% not base64 %%%");
    assert_eq!(
        refusal(&not_base64),
        "users[0].user.client-key-data is not base64"
    );
    let mut certificate_as_key = admin_conf("https://k8s-prod.lab.example:6443");
    certificate_as_key["users"][0]["user"]["client-key-data"] = json!(b64(&m.certificate_pem));
    assert_eq!(
        refusal(&certificate_as_key),
        "users[0].user.client-key-data is not one PEM private key"
    );
    let mut key_as_ca = admin_conf("https://k8s-prod.lab.example:6443");
    key_as_ca["clusters"][0]["cluster"]["certificate-authority-data"] = json!(b64(&m.key_pem));
    assert_eq!(
        refusal(&key_as_ca),
        "clusters[0].cluster.certificate-authority-data is not PEM X.509 certificates"
    );
}

#[test]
fn the_ca_fingerprint_tells_two_cas_apart() {
    let m = material();
    let genuine = reduce(
        &admin_conf("https://k8s-prod.lab.example:6443"),
        &endpoint(),
    )
    .expect("genuine");
    let mut other = admin_conf("https://k8s-prod.lab.example:6443");
    other["clusters"][0]["cluster"]["certificate-authority-data"] = json!(b64(&m.other_ca_pem));
    let other = reduce(&other, &endpoint()).expect("well-formed");
    assert_ne!(genuine.ca_fingerprint(), other.ca_fingerprint());
    assert_ne!(genuine.fingerprint(), other.fingerprint());
}
