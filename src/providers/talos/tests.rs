use super::*;
use capstan_core::talos::secrets::is_token;

fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(1_790_000_000).expect("a time")
}

#[test]
fn a_generated_bundle_has_every_field_in_the_shape_talos_requires() {
    let bundle = generate_bundle("prod", now()).expect("generates");
    assert_eq!(bundle.check(), Ok(()));
    assert!(is_token(&bundle.bootstrap_token) && is_token(&bundle.trustd_token));
    assert_ne!(bundle.bootstrap_token, bundle.trustd_token);
    assert!(
        bundle
            .os_ca
            .key_pem
            .starts_with("-----BEGIN ED25519 PRIVATE KEY-----\n")
    );
    for key in [
        &bundle.kubernetes_ca.key_pem,
        &bundle.etcd_ca.key_pem,
        &bundle.aggregator_ca.key_pem,
        &bundle.service_account_key_pem,
    ] {
        assert!(
            key.starts_with("-----BEGIN EC PRIVATE KEY-----\n"),
            "{}",
            &key[..30]
        );
    }
}

#[test]
fn two_bundles_share_no_secret() {
    let (a, b) = (
        generate_bundle("prod", now()).expect("generates"),
        generate_bundle("prod", now()).expect("generates"),
    );
    for (x, y) in a.secret_values().iter().zip(b.secret_values()) {
        assert_ne!(*x, y);
    }
}

#[test]
fn the_ca_certificates_name_the_cluster_and_are_valid_ten_years() {
    let bundle = generate_bundle("prod", now()).expect("generates");
    for (_, ca) in bundle.authorities() {
        let (_, pem) =
            x509_parser::pem::parse_x509_pem(ca.certificate_pem.as_bytes()).expect("PEM");
        let cert = pem.parse_x509().expect("X.509");
        assert!(cert.is_ca());
        assert!(
            cert.subject().to_string().contains("CN=prod "),
            "{}",
            cert.subject()
        );
        assert_eq!(
            cert.validity().not_before.timestamp(),
            now().unix_timestamp()
        );
        assert_eq!(
            cert.validity().not_after.timestamp(),
            (now() + CA_VALIDITY).unix_timestamp()
        );
    }
}

#[test]
fn the_admin_certificate_is_os_admin_for_client_auth_issued_by_the_os_ca() {
    let bundle = generate_bundle("prod", now()).expect("generates");
    let admin = admin_credentials(&bundle, now()).expect("issues");
    let (_, pem) = x509_parser::pem::parse_x509_pem(admin.certificate_pem.as_bytes()).expect("PEM");
    let cert = pem.parse_x509().expect("X.509");
    assert!(
        cert.subject().to_string().contains("O=os:admin"),
        "{}",
        cert.subject()
    );
    let (_, ca_pem) =
        x509_parser::pem::parse_x509_pem(bundle.os_ca.certificate_pem.as_bytes()).expect("PEM");
    let ca = ca_pem.parse_x509().expect("X.509");
    assert_eq!(cert.issuer(), ca.subject());
    // The signature itself is openssl's to judge (tests/talos/secrets.rs).
    let usage = cert.extended_key_usage().expect("parses").expect("present");
    assert!(usage.value.client_auth && !usage.value.server_auth);
    assert_eq!(
        cert.validity().not_after.timestamp(),
        (now() + ADMIN_VALIDITY).unix_timestamp()
    );
}

#[test]
fn the_bundle_round_trips_through_its_secret() {
    let bundle = generate_bundle("prod", now()).expect("generates");
    let secret = record("prod", &bundle);
    assert_eq!(secret.annotations[CLUSTER_ANNOTATION], "prod");
    assert_eq!(read(&secret_name("prod"), &secret).expect("reads"), bundle);
}

#[test]
fn an_empty_or_broken_secret_is_refused_without_quoting_it() {
    let bundle = generate_bundle("prod", now()).expect("generates");
    let name = secret_name("prod");
    assert_eq!(name, "capstan-talos-prod");

    let mut empty = record("prod", &bundle);
    empty.data.clear();
    assert!(matches!(
        read(&name, &empty),
        Err(TalosSecretsError::Malformed { .. })
    ));

    let mut broken = record("prod", &bundle);
    let mut json = serde_json::to_value(&bundle).expect("JSON");
    json["bootstrapToken"] = "NOT-a-token-but-a-secret".into();
    broken.data.insert(
        BUNDLE_KEY.to_owned(),
        serde_json::to_vec(&json).expect("JSON"),
    );
    let err = read(&name, &broken).expect_err("malformed");
    let chain = capstan_core::errors::error_chain(&err);
    assert_eq!(
        chain,
        "Secret capstan-talos-prod holds a malformed Talos secrets bundle: the Talos secrets bundle's bootstrapToken is not a token of the form [a-z0-9]{6}.[a-z0-9]{16}"
    );

    let mut garbled = record("prod", &bundle);
    garbled.data.insert(
        BUNDLE_KEY.to_owned(),
        b"{\"format\": 1, \"clusterId\": 7}".to_vec(),
    );
    let chain = capstan_core::errors::error_chain(&read(&name, &garbled).expect_err("garbled"));
    assert!(
        chain
            .starts_with("Secret capstan-talos-prod's `bundle.json` is not a Talos secrets bundle"),
        "{chain}"
    );
}

#[test]
fn every_secret_is_redacted_as_is_and_as_base64() {
    let bundle = generate_bundle("prod", now()).expect("generates");
    let admin = admin_credentials(&bundle, now()).expect("issues");
    for secret in bundle.secret_values() {
        assert_eq!(crate::redact::redact(secret), "***");
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(&bundle.etcd_ca.key_pem);
    assert_eq!(crate::redact::redact(&format!("key: {b64}")), "key: ***");
    assert_eq!(crate::redact::redact(&admin.key_pem), "***");
    let line = admin.key_pem.lines().nth(1).expect("a body line");
    let shown = format!("{bundle:?} {admin:?}");
    assert!(!shown.contains(&bundle.trustd_token) && !shown.contains(line));
}

#[test]
fn sec1_keeps_the_private_and_public_key_and_names_the_curve() {
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let pkcs8 = key.serialize_der();
    let sec1 = sec1_from_pkcs8(&pkcs8).expect("converts");
    let (tag, body, rest) = der_element(&sec1).expect("DER");
    assert_eq!((tag, rest.len()), (0x30, 0));
    assert!(body.windows(PRIME256V1.len()).any(|w| w == PRIME256V1));
    // The 65-byte uncompressed public point ring wrote is carried over.
    let public = key.public_key_raw();
    assert!(body.windows(public.len()).any(|w| w == public));
    assert_eq!(sec1_from_pkcs8(&pkcs8[..pkcs8.len() - 1]), None);
    assert_eq!(sec1_from_pkcs8(b"\x30\x00"), None);
}

#[test]
fn tokens_are_bootstrap_token_shaped() {
    for _ in 0..50 {
        assert!(is_token(&random_token().expect("random")));
    }
}

#[test]
fn ed25519_keys_are_pkcs8_v1_with_their_seed() {
    let key = KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("key");
    let v1 = ed25519_pkcs8_v1(&key.serialize_der()).expect("converts");
    assert_eq!(v1.len(), 48);
    assert_eq!(
        &v1[..16],
        b"\x30\x2e\x02\x01\x00\x30\x05\x06\x03\x2b\x65\x70\x04\x22\x04\x20"
    );
    // rcgen reads it back as the same key.
    let back = KeyPair::try_from(v1.as_slice()).expect("reads PKCS#8 v1");
    assert_eq!(back.public_key_raw(), key.public_key_raw());
    assert_eq!(ed25519_pkcs8_v1(b"\x30\x00"), None);
}

#[test]
fn the_talosconfig_has_one_context_with_the_os_ca_and_the_admin_credentials_as_base64() {
    let bundle = generate_bundle("prod", now()).expect("generates");
    let admin = admin_credentials(&bundle, now()).expect("issues");
    let endpoints = ["10.0.0.5".to_owned()];
    let text = talosconfig("prod", &endpoints, &bundle.os_ca.certificate_pem, &admin);
    let config: serde_json::Value = serde_saphyr::from_str(&text).expect("YAML");
    assert_eq!(config["context"], "prod");
    let context = &config["contexts"]["prod"];
    assert_eq!(context["endpoints"], serde_json::json!(["10.0.0.5"]));
    assert_eq!(context["nodes"], serde_json::json!(["10.0.0.5"]));
    let decode = |field: &str| {
        let text = context[field].as_str().expect("a string");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .expect("base64");
        String::from_utf8(bytes).expect("PEM")
    };
    assert_eq!(decode("ca"), bundle.os_ca.certificate_pem);
    assert_eq!(decode("crt"), admin.certificate_pem);
    assert_eq!(decode("key"), admin.key_pem);
}
