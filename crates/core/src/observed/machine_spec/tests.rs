//! Unit tests of a machine's spec and its hash, with the hardware a file declares.

use crate::spec::{RepoFiles, SourceText, load};

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
        hardware: MachineHardware::default(),
        patches: None,
        registries: None,
        authentication: None,
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

const PROD: &str = include_str!("../../../../../examples-repo/clusters/prod.yaml");
const FLEET: &str = include_str!("../../../../../examples-repo/capstan.yaml");

#[test]
fn hardware_is_in_the_spec_hash_but_tags_and_pool_are_not_and_absent_fields_hash_as_before() {
    let desired = load(&RepoFiles {
        fleet: SourceText {
            path: "capstan.yaml".into(),
            text: FLEET.to_owned(),
        },
        clusters: vec![SourceText {
            path: "clusters/prod.yaml".into(),
            text: PROD.to_owned(),
        }],
    });
    let desired = desired.desired.expect("the example fleet is valid");
    let spec = &desired.clusters["prod"].spec;
    let hash = |machine: &crate::spec::Machine| {
        MachineSpec::new(
            machine,
            spec.kubernetes.version,
            Distribution::Kubeadm,
            crate::model::Role::Worker,
        )
        .spec_hash()
    };
    let base = spec.workers[0].machine.clone();
    let before = hash(&base);
    // Pinned: the example's general pool hashes as it did before hardware existed.
    assert_eq!(
        before, "6926a32f0b77",
        "an unchanged file never changes a hash"
    );
    let mut placed = base.clone();
    placed.tags = vec!["team-a".into()];
    placed.pool = Some("k8s".into());
    placed.sockets = Some(1);
    assert_eq!(
        hash(&placed),
        before,
        "tags, pool and one socket replace nothing"
    );
    let mut disks = base.clone();
    disks.disks = serde_json::from_str(r#"[{"sizeGiB": 100}]"#).expect("disk");
    let mut cards = base.clone();
    cards.networks = serde_json::from_str(r#"[{"bridge": "vmbr0", "vlan": 20}]"#).expect("card");
    let mut gpu = base.clone();
    gpu.pci = serde_json::from_str(r#"[{"mapping": "gpu-a40"}]"#).expect("pci");
    let mut sockets = base.clone();
    sockets.sockets = Some(2);
    for changed in [&disks, &cards, &gpu, &sockets] {
        assert_ne!(hash(changed), before, "{changed:?}");
    }
    let built = MachineSpec::new(
        &disks,
        spec.kubernetes.version,
        Distribution::Kubeadm,
        crate::model::Role::Worker,
    );
    assert_eq!(
        MachineSpec::parse_summary(&built.summary()),
        Some(built.clone())
    );
    let older = MachineSpec::new(
        &base,
        spec.kubernetes.version,
        Distribution::Kubeadm,
        crate::model::Role::Worker,
    );
    assert_eq!(older.differences(&built), vec!["disks [] → [100 GiB]"]);
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

#[test]
fn a_registries_digest_is_part_of_the_machine_spec_hash_summary_and_differences() {
    let plain = spec();
    let mirrored = MachineSpec {
        registries: Some("ba9876543210".into()),
        ..plain.clone()
    };
    assert!(mirrored.summary().ends_with(" registries=ba9876543210"));
    assert_eq!(
        MachineSpec::parse_summary(&mirrored.summary()),
        Some(mirrored.clone())
    );
    assert_ne!(mirrored.spec_hash(), plain.spec_hash());
    assert_eq!(
        plain.spec_hash(),
        "6926a32f0b77",
        "none: the hash it always had"
    );
    assert_eq!(plain.differences(&mirrored), vec!["registries changed"]);
}

#[test]
fn an_authentication_digest_is_part_of_the_machine_spec_hash_summary_and_differences() {
    let plain = MachineSpec {
        role: Role::ControlPlane,
        ..spec()
    };
    let signed_on = MachineSpec {
        authentication: Some("a1b2c3d4e5f6".into()),
        ..plain.clone()
    };
    assert!(
        signed_on
            .summary()
            .ends_with(" authentication=a1b2c3d4e5f6")
    );
    assert_eq!(
        MachineSpec::parse_summary(&signed_on.summary()),
        Some(signed_on.clone())
    );
    assert_ne!(signed_on.spec_hash(), plain.spec_hash());
    assert_eq!(
        plain.differences(&signed_on),
        vec!["authentication changed"]
    );
}
