use super::*;
use base64::Engine as _;
use capstan_core::talos::iso9660::{IsoFile, write_image};

pub(in crate::nodes) struct Ca {
    pub(in crate::nodes) crt: String,
    pub(in crate::nodes) key: String,
}

pub(in crate::nodes) fn ca(name: &str) -> Ca {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("key");
    let certificate = params.self_signed(&key).expect("signs");
    Ca {
        crt: certificate.pem(),
        key: key.serialize_pem(),
    }
}

pub(in crate::nodes) fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

pub(in crate::nodes) struct Cas {
    pub(in crate::nodes) os: Ca,
    pub(in crate::nodes) kubernetes: Ca,
}

pub(in crate::nodes) fn cas() -> Cas {
    Cas {
        os: ca("talos"),
        kubernetes: ca("kubernetes"),
    }
}

pub(in crate::nodes) fn config(cas: &Cas, kind: &str, token: &str) -> String {
    let key = |ca: &Ca| {
        if kind == "controlplane" {
            format!("\n    key: {}", b64(&ca.key))
        } else {
            String::new()
        }
    };
    format!(
        "---\nversion: v1alpha1\nmachine:\n  type: {kind}\n  token: abcdef.0123456789abcdef\n  kubelet:\n    image: ghcr.io/siderolabs/kubelet:v1.36.2\n  ca:\n    crt: {}{}\ncluster:\n  id: cluster-id-1\n  secret: cluster-secret-1\n  clusterName: prod\n  controlPlane:\n    endpoint: https://10.20.0.10:6443\n  token: {token}\n  ca:\n    crt: {}{}\n---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: prod-1\n",
        b64(&cas.os.crt),
        key(&cas.os),
        b64(&cas.kubernetes.crt),
        key(&cas.kubernetes),
    )
}

pub(in crate::nodes) fn iso(volume: &str, user_data: &str) -> Vec<u8> {
    write_image(
        volume,
        &[
            IsoFile {
                name: "user-data",
                contents: user_data.as_bytes(),
            },
            IsoFile {
                name: "meta-data",
                contents: b"instance-id: prod-1\n",
            },
        ],
    )
    .expect("writes")
}

fn boot_one(image: &[u8]) -> Result<TalosMachine, TalosBootError> {
    boot([image], [])
}

#[test]
fn a_valid_control_plane_and_worker_config_are_taken() {
    let cas = cas();
    let cp = boot_one(&iso(
        "cidata",
        &config(&cas, "controlplane", "aaaaaa.0123456789abcdef"),
    ))
    .expect("taken");
    assert_eq!(cp.role, Role::ControlPlane);
    assert_eq!(cp.cluster_id, "cluster-id-1");
    assert_eq!(cp.endpoint, "https://10.20.0.10:6443");
    assert_eq!(cp.kubernetes_ca_pem, cas.kubernetes.crt);
    let worker = boot_one(&iso(
        "cidata",
        &config(&cas, "worker", "aaaaaa.0123456789abcdef"),
    ))
    .expect("taken");
    assert_eq!(worker.role, Role::Worker);
    let shown = format!("{cp:?}");
    assert!(
        !shown.contains("0123456789abcdef") && !shown.contains("secret"),
        "{shown}"
    );
}

#[test]
fn no_cidata_volume_no_user_data_or_no_yaml_is_refused() {
    let cas = cas();
    let text = config(&cas, "worker", "aaaaaa.0123456789abcdef");
    assert!(matches!(boot([], []), Err(TalosBootError::NoCidata)));
    assert!(matches!(
        boot_one(&iso("other", &text)),
        Err(TalosBootError::NoCidata)
    ));
    let no_user_data = write_image("cidata", &[]).expect("writes");
    assert!(matches!(
        boot_one(&no_user_data),
        Err(TalosBootError::NoUserData)
    ));
    assert!(matches!(
        boot_one(&iso("cidata", "machine: [unclosed")),
        Err(TalosBootError::ParseYaml(_))
    ));
    assert!(matches!(
        boot_one(&[0u8; 100]),
        Err(TalosBootError::ReadIso(_))
    ));
    // An unreadable image in another drive does not hide the cidata volume.
    let good = iso("cidata", &text);
    assert!(boot([&[0u8; 100][..], good.as_slice()], []).is_ok());
}

#[test]
fn missing_fields_and_bad_authorities_are_refused_by_name() {
    let cas = cas();
    let good = config(&cas, "controlplane", "aaaaaa.0123456789abcdef");
    let refused = |text: &str| {
        boot_one(&iso("cidata", text))
            .expect_err("refused")
            .to_string()
    };
    assert_eq!(
        refused(&good.replace("  token: abcdef.0123456789abcdef\n", "")),
        "the machine config has no machine.token"
    );
    assert_eq!(
        refused(&good.replace("type: controlplane", "type: init2")),
        "unknown machine type `init2`: controlplane or worker"
    );
    assert_eq!(
        refused(&good.replace("https://10.20.0.10:6443", "10.20.0.10:6443")),
        "cluster.controlPlane.endpoint is no https:// URL"
    );
    // The OS CA's key is the Kubernetes CA's: it does not match the certificate.
    let swapped = good.replacen(&b64(&cas.os.key), &b64(&cas.kubernetes.key), 1);
    assert_eq!(refused(&swapped), "machine.ca: key does not match crt");
    let garbage = good.replace(&b64(&cas.kubernetes.crt), &b64("not a certificate"));
    assert_eq!(refused(&garbage), "cluster.ca: crt is no PEM");
    let mut leaf_params = rcgen::CertificateParams::new(vec!["leaf".to_owned()]).expect("p");
    leaf_params.is_ca = rcgen::IsCa::NoCa;
    let leaf_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("key");
    let leaf = leaf_params.self_signed(&leaf_key).expect("signs").pem();
    let not_ca = good.replace(&b64(&cas.kubernetes.crt), &b64(&leaf));
    assert_eq!(refused(&not_ca), "cluster.ca: crt is no CA certificate");
    // A worker needs no keys; a control plane does.
    let keyless = good.replacen(&format!("\n    key: {}", b64(&cas.os.key)), "", 1);
    assert_eq!(refused(&keyless), "machine.ca: key is no base64");
}

#[test]
fn a_member_with_other_cluster_secrets_is_refused() {
    let cas = cas();
    let first = boot_one(&iso(
        "cidata",
        &config(&cas, "controlplane", "aaaaaa.0123456789abcdef"),
    ))
    .expect("taken");
    let same = iso("cidata", &config(&cas, "worker", "aaaaaa.0123456789abcdef"));
    assert!(boot([same.as_slice()], [&first]).is_ok());
    let other = iso("cidata", &config(&cas, "worker", "bbbbbb.0123456789abcdef"));
    let err = boot([other.as_slice()], [&first]).expect_err("refused");
    assert!(matches!(err, TalosBootError::NotShared(_)), "{err}");
    assert!(!err.to_string().contains("bbbbbb"), "{err}");
}

#[test]
fn the_hostname_kubelet_version_and_control_plane_keys_are_read() {
    let cas = cas();
    let text = config(&cas, "controlplane", "aaaaaa.0123456789abcdef");
    let cp = boot_one(&iso("cidata", &text)).expect("taken");
    assert_eq!(cp.hostname.as_deref(), Some("prod-1"));
    assert_eq!(
        cp.kubernetes_version,
        Some("1.36.2".parse().expect("version"))
    );
    let kubernetes = cp.kubernetes_ca().expect("a control plane has the key");
    assert_eq!(kubernetes.key_pem, cas.kubernetes.key);
    assert_eq!(cp.os_ca().expect("the OS CA key").key_pem, cas.os.key);
    let worker = boot_one(&iso(
        "cidata",
        &config(&cas, "worker", "aaaaaa.0123456789abcdef"),
    ))
    .expect("taken");
    assert!(worker.kubernetes_ca().is_none() && worker.os_ca().is_none());
    // The older place of the hostname, and none at all.
    let older = text.replace(
        "---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: prod-1\n",
        "",
    );
    let older = older.replace(
        "  type: controlplane\n",
        "  type: controlplane\n  network:\n    hostname: prod-9\n",
    );
    let machine = boot_one(&iso("cidata", &older)).expect("taken");
    assert_eq!(machine.hostname.as_deref(), Some("prod-9"));
    let refused = |text: &str| {
        boot_one(&iso("cidata", text))
            .expect_err("refused")
            .to_string()
    };
    assert_eq!(
        refused(&text.replace("kubelet:v1.36.2", "kubelet:latest")),
        "machine.kubelet.image has no Kubernetes version (v1.36.2) as its tag"
    );
    assert_eq!(
        refused(&text.replace("hostname: prod-1", "hostname: Prod_1")),
        "the hostname of the machine config is no DNS name"
    );
    assert_eq!(
        refused(&text.replace("clusterName: prod", "clusterName: ../prod")),
        "cluster.clusterName is no DNS label (lowercase letters, digits and '-')"
    );
    let shown = format!("{cp:?}");
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
}

#[test]
fn an_image_tag_names_the_version_a_registry_port_does_not() {
    assert_eq!(
        image_version("ghcr.io/siderolabs/kubelet:v1.36.2"),
        Some("1.36.2".parse().expect("version"))
    );
    assert_eq!(
        image_version("registry.lab:5000/kubelet:v1.35.1@sha256:abcd"),
        Some("1.35.1".parse().expect("version"))
    );
    assert_eq!(image_version("registry.lab:5000/kubelet"), None);
    assert_eq!(image_version("kubelet"), None);
}

#[test]
fn the_taints_and_labels_a_node_registers_with_are_read_as_talos_applies_them() {
    let cas = cas();
    let text = config(&cas, "controlplane", "aaaaaa.0123456789abcdef");
    // Talos taints a control plane itself, and records that it owns the taint.
    let cp = boot_one(&iso("cidata", &text)).expect("taken");
    assert_eq!(
        cp.registration.taints,
        [crate::kube::SimTaint::control_plane()]
    );
    assert_eq!(
        cp.registration.annotations["talos.dev/owned-taints"],
        r#"["node-role.kubernetes.io/control-plane"]"#
    );
    // Unless told to let it take workloads; the kubelet registers with its own taints.
    let schedulable = text
        .replace(
            "cluster:\n",
            "cluster:\n  allowSchedulingOnControlPlanes: true\n",
        )
        .replace(
            "    image: ghcr.io/siderolabs/kubelet:v1.36.2\n",
            "    image: ghcr.io/siderolabs/kubelet:v1.36.2\n    extraConfig:\n      registerWithTaints: [{key: dedicated, value: db, effect: NoSchedule}]\n",
        )
        .replace("  type: controlplane\n", "  type: controlplane\n  nodeLabels: {tier: db}\n");
    let cp = boot_one(&iso("cidata", &schedulable)).expect("taken");
    assert_eq!(cp.registration.taints.len(), 1);
    assert_eq!(cp.registration.taints[0].key, "dedicated");
    assert_eq!(cp.registration.privileged_labels["tier"], "db");
    assert!(cp.registration.labels.is_empty(), "not the kubelet's own");
    let refused = schedulable.replace("effect: NoSchedule}", "effect: Never}");
    let err = boot_one(&iso("cidata", &refused)).expect_err("an unknown effect");
    assert!(err.to_string().contains("registerWithTaints"), "{err}");
}
