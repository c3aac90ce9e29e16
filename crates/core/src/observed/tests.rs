use super::*;

fn spec() -> MachineSpec {
    MachineSpec {
        template: "debian13-k8s".into(),
        cores: 4,
        memory_mib: 8192,
        disk_gib: 50,
        cpu: "x86-64-v2-AES".into(),
        kubernetes: "1.36.2".parse().expect("version"),
        distribution: Distribution::Kubeadm,
        role: Role::Worker,
        talos: None,
        patches: None,
    }
}

#[test]
fn spec_hashes_are_12_hex_digits_and_change_with_every_field() {
    let base = spec();
    let hash = base.spec_hash();
    assert_eq!(hash.len(), 12);
    assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));
    let mut changed = base.clone();
    changed.template = "debian13-k8s-v2".into();
    assert_ne!(changed.spec_hash(), hash);
    let mut changed = base.clone();
    changed.role = Role::ControlPlane;
    assert_ne!(changed.spec_hash(), hash);
    assert_eq!(base.clone().spec_hash(), hash, "stable");
    // Talos machines hash their release too; the others keep the hash they always had.
    assert_eq!(hash, "6926a32f0b77", "a kubeadm machine's hash never moves");
    let mut talos = base.clone();
    talos.distribution = Distribution::Talos;
    talos.talos = Some("v1.13.9".parse().expect("talos"));
    let mut newer_talos = talos.clone();
    newer_talos.talos = Some("v1.13.10".parse().expect("talos"));
    assert_ne!(talos.spec_hash(), newer_talos.spec_hash());
    assert_eq!(
        talos.differences(&newer_talos),
        vec!["talos v1.13.9 → v1.13.10"]
    );
}

#[test]
fn differences_name_each_changed_field() {
    let mut newer = spec();
    newer.template = "debian13-k8s-v2".into();
    newer.kubernetes = "1.36.4".parse().expect("version");
    assert_eq!(
        spec().differences(&newer),
        vec![
            "template debian13-k8s → debian13-k8s-v2",
            "kubernetes 1.36.2 → 1.36.4"
        ]
    );
}

#[test]
fn a_machine_summary_reads_back_as_the_same_spec() {
    let spec = spec();
    assert_eq!(
        MachineSpec::parse_summary(&spec.summary()),
        Some(spec.clone())
    );
    let talos = MachineSpec {
        distribution: Distribution::Talos,
        talos: Some("v1.13.9".parse().expect("talos")),
        ..spec.clone()
    };
    assert!(talos.summary().ends_with(" talos=v1.13.9"));
    assert_eq!(MachineSpec::parse_summary(&talos.summary()), Some(talos));
    assert_eq!(MachineSpec::parse_summary("template=x cores=four"), None);
}

#[test]
fn snapshots_round_trip_through_json() {
    let mut observed = Observed::nothing();
    observed.clusters.insert(
        "prod".into(),
        ObservedCluster {
            control_plane: Some(ObservedControlPlane {
                endpoint: Endpoint {
                    host: "k8s-prod.lab.example".into(),
                    address: "192.168.1.23".parse().expect("ip"),
                    port: 6443,
                },
                version: "1.36.2".parse().expect("version"),
                unreachable_since: None,
                certificates_expire: Some("2027-01-01T00:00:00Z".parse().expect("time")),
                admin_kubeconfig: Some("sha256:0011223344556677".into()),
                bootstrap_incomplete: false,
                network: None,
                api_service_address: None,
            }),
            ..ObservedCluster::default()
        },
    );
    let text = serde_json::to_string(&observed).expect("serialise");
    assert!(text.contains("\"certificatesExpire\":\"2027-01-01T00:00:00Z\""));
    let back: Observed = serde_json::from_str(&text).expect("parse");
    assert_eq!(back, observed);
}

#[test]
fn a_patch_digest_is_part_of_the_machine_spec_hash_summary_and_differences() {
    let plain = spec();
    let patched = MachineSpec {
        patches: Some("0123456789ab".into()),
        ..plain.clone()
    };
    assert!(patched.summary().ends_with(" patches=0123456789ab"));
    assert_eq!(
        MachineSpec::parse_summary(&patched.summary()),
        Some(patched.clone())
    );
    assert_ne!(patched.spec_hash(), plain.spec_hash());
    assert_eq!(
        plain.spec_hash(),
        "6926a32f0b77",
        "no patch: the hash it always had"
    );
    assert_eq!(plain.differences(&patched), vec!["patches changed"]);
}
