//! A generated Talos secrets bundle judged from outside: openssl verifies every CA and the
//! `os:admin` client certificate's chain, reads every key (the `EC PRIVATE KEY`s as SEC1) and
//! matches it to its certificate; Talos's published schema accepts the configs rendered from
//! it.

use std::path::Path;
use std::process::Command;

use capstan::providers::talos::{admin_credentials, generate_bundle};
use capstan_core::talos::{ClusterFacts, MachineRole, NodeFacts, render_machine_config};
use capstan_testkit::judge::{self, Judge};

fn openssl(args: &[&str], dir: &Path) -> (bool, String) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

#[test]
fn openssl_verifies_every_ca_and_the_admin_chain_and_reads_every_key() {
    if !judge::present(&[Judge::Openssl]) {
        return;
    }
    let bundle = generate_bundle("prod", now()).expect("generates");
    let admin = admin_credentials(&bundle, now()).expect("issues");
    let dir = tempfile::tempdir().expect("temp dir");
    let write =
        |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("write");

    for (name, ca) in bundle.authorities() {
        let (crt, key) = (format!("{name}.crt"), format!("{name}.key"));
        write(&crt, &ca.certificate_pem);
        // Talos labels Ed25519 keys `ED25519 PRIVATE KEY` over PKCS#8; openssl reads PKCS#8
        // under its standard label. `EC PRIVATE KEY` (SEC1) it reads as written.
        write(
            &key,
            &ca.key_pem.replace("ED25519 PRIVATE KEY", "PRIVATE KEY"),
        );
        let (ok, text) = openssl(&["verify", "-CAfile", &crt, &crt], dir.path());
        assert!(ok && text.contains(": OK"), "{name}: {text}");
        let (ok, text) = openssl(&["pkey", "-in", &key, "-check", "-noout"], dir.path());
        assert!(ok, "{name} key: {text}");
        let (_, from_key) = openssl(&["pkey", "-in", &key, "-pubout"], dir.path());
        let (_, from_crt) = openssl(&["x509", "-in", &crt, "-pubkey", "-noout"], dir.path());
        assert_eq!(from_key, from_crt, "{name}'s key is its certificate's");
    }
    let (_, os_ca) = openssl(&["x509", "-in", "osCa.crt", "-noout", "-text"], dir.path());
    assert!(
        os_ca.contains("ED25519"),
        "the OS CA is Ed25519, as Talos makes it: {os_ca}"
    );

    write("sa.key", &bundle.service_account_key_pem);
    let (ok, text) = openssl(&["pkey", "-in", "sa.key", "-check", "-noout"], dir.path());
    assert!(ok, "service-account key: {text}");

    write("admin.crt", &admin.certificate_pem);
    write("admin.key", &admin.key_pem);
    let (ok, text) = openssl(
        &[
            "verify",
            "-CAfile",
            "osCa.crt",
            "-purpose",
            "sslclient",
            "admin.crt",
        ],
        dir.path(),
    );
    assert!(ok && text.contains("admin.crt: OK"), "{text}");
    let (_, subject) = openssl(
        &["x509", "-in", "admin.crt", "-noout", "-subject"],
        dir.path(),
    );
    assert!(subject.contains("O = os:admin"), "{subject}");
    let (_, from_key) = openssl(&["pkey", "-in", "admin.key", "-pubout"], dir.path());
    let (_, from_crt) = openssl(
        &["x509", "-in", "admin.crt", "-pubkey", "-noout"],
        dir.path(),
    );
    assert_eq!(from_key, from_crt);

    // The judge judges: another cluster's OS CA does not verify this admin.
    let other = generate_bundle("other", now()).expect("generates");
    write("other.crt", &other.os_ca.certificate_pem);
    let (ok, text) = openssl(&["verify", "-CAfile", "other.crt", "admin.crt"], dir.path());
    assert!(!ok, "{text}");
}

#[test]
fn configs_rendered_from_a_generated_bundle_pass_talos_schema() {
    let schema: serde_json::Value = serde_json::from_str(include_str!(
        "../../crates/core/src/talos/reference/config.schema.json"
    ))
    .expect("JSON");
    let validator = jsonschema::validator_for(&schema).expect("compiles");
    let bundle = generate_bundle("prod", now()).expect("generates");
    let cluster = ClusterFacts {
        cluster_name: "prod".into(),
        endpoint_host: "k8s-prod.lab.example".into(),
        endpoint_address: "10.20.0.10".parse().expect("ip"),
        endpoint_port: 6443,
        kubernetes_version: "1.36.3".parse().expect("version"),
        talos_version: "v1.13.9".parse().expect("version"),
        installer_image: None,
        network: capstan::spec::Distribution::Talos
            .capabilities()
            .network
            .cluster_network(),
        authentication: None,
    };
    for role in [MachineRole::ControlPlane, MachineRole::Worker] {
        let node = NodeFacts {
            role,
            hostname: "prod-1".into(),
            install_disk: "/dev/sda".into(),
            mac_address: "bc:24:11:00:00:07".parse().expect("MAC"),
            static_address: None,
            register_with_taints: Vec::new(),
            patches: Vec::new(),
            links: Vec::new(),
            volumes: Vec::new(),
        };
        let config = render_machine_config(&cluster, &node, &bundle).expect("renders");
        let documents: Vec<serde_json::Value> =
            serde_saphyr::from_str_multiple(&config).expect("YAML");
        for document in &documents {
            let errors: Vec<String> = validator
                .iter_errors(document)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{role:?}: {errors:?}");
        }
        assert_eq!(documents[0]["machine"]["type"], role.as_talos());
    }
}
