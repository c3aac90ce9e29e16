use crate::spec::{RepoFiles, SourceText, load};

const PROD: &str = include_str!("../../../../../examples-repo/clusters/prod.yaml");
const TALOS: &str = include_str!("../../../../../examples-repo/clusters/talos.yaml");
const FLEET: &str = include_str!("../../../../../examples-repo/capstan.yaml");
const GENERAL: &str = "machine: {template: debian13-k8s, cores: 4, memoryMiB: 8192, diskGiB: 50, placement: [pve1, pve2]}";

/// The findings of the example repository with `prod`'s `general` pool given `extra` (YAML
/// fields of its machine, flow style).
fn prod_findings(extra: &str) -> String {
    let machine = GENERAL.replacen("placement:", &format!("{extra}, placement:"), 1);
    let prod = PROD.replacen(GENERAL, &machine, 1);
    assert_ne!(prod, PROD, "the example's general pool is as expected");
    findings(vec![("clusters/prod.yaml", prod)])
}

fn findings(clusters: Vec<(&str, String)>) -> String {
    let files = RepoFiles {
        fleet: SourceText {
            path: "capstan.yaml".into(),
            text: FLEET.to_owned(),
        },
        clusters: clusters
            .into_iter()
            .map(|(path, text)| SourceText {
                path: path.to_owned(),
                text,
            })
            .collect(),
    };
    load(&files).diagnostics.to_string()
}

#[test]
fn disks_networks_sockets_tags_and_a_pool_as_proxmox_users_write_them_are_valid() {
    let base = prod_findings("sockets: 1");
    let full = prod_findings(
        "sockets: 2, disks: [{sizeGiB: 100, storage: local-lvm, ssd: true, discard: true, iothread: true, cache: none}, {sizeGiB: 20, mount: {path: /var/lib/longhorn, filesystem: xfs}}], networks: [{bridge: vmbr0, vlan: 20}, {bridge: vmbr1, vlan: 30, mtu: 9000, primary: true}], pci: [{mapping: gpu-a40}], tags: [storage, team-a], pool: k8s-prod",
    );
    assert_eq!(full, base, "no finding beyond the example's own");
}

#[test]
fn each_value_proxmox_would_refuse_is_refused_at_its_field() {
    let cases = [
        (
            "networks: [{bridge: vmbr0, vlan: 5000}]",
            "networks[0].vlan",
            "a VLAN tag is 1 to 4094",
        ),
        (
            "networks: [{bridge: 'vmbr 0'}]",
            "networks[0].bridge",
            "not a Proxmox bridge name",
        ),
        (
            "networks: [{bridge: vmbr1, mtu: 9000, model: e1000}]",
            "networks[0].mtu",
            "VirtIO cards only",
        ),
        (
            "networks: [{bridge: vmbr0, primary: true}, {bridge: vmbr1, primary: true}]",
            "networks",
            "one card carries",
        ),
        (
            "disks: [{sizeGiB: 0}]",
            "disks[0].sizeGiB",
            "1 to 65536 GiB",
        ),
        (
            "disks: [{sizeGiB: 10, storage: 'no such!'}]",
            "disks[0].storage",
            "not a Proxmox storage id",
        ),
        (
            "disks: [{sizeGiB: 10, mount: {path: var/data}}]",
            "disks[0].mount.path",
            "absolute path",
        ),
        (
            "disks: [{sizeGiB: 10, mount: {path: /etc}}]",
            "disks[0].mount.path",
            "the system's own",
        ),
        (
            "disks: [{sizeGiB: 10, cache: fast}]",
            "disks[0].cache",
            "unknown variant",
        ),
        (
            "pci: [{mapping: 9gpu}]",
            "pci[0].mapping",
            "not a Proxmox mapping id",
        ),
        (
            "tags: [capstan-ip-10.0.0.9]",
            "tags[0]",
            "starts with `capstan`",
        ),
        ("tags: [cluster-other]", "tags[0]", "starts with `cluster-`"),
        ("tags: [Team!]", "tags[0]", "not a Proxmox tag"),
        ("pool: 'a/b/c/d'", "pool", "not a Proxmox resource pool id"),
        ("sockets: 9", "sockets", "a VM has 1 to 8"),
    ];
    for (extra, field, words) in cases {
        let found = prod_findings(extra);
        let at = format!("spec.workers[0].machine.{field}");
        assert!(
            found
                .lines()
                .any(|line| line.contains(&at) && line.contains(words))
                || (words == "unknown variant" && found.contains(words)),
            "{extra}: expected `{words}` at {at}, got:\n{found}"
        );
    }
}

#[test]
fn talos_mounts_a_data_disk_only_under_var_mnt() {
    let talos_general = "machine: {template: talos-v1.13.9, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}";
    assert!(TALOS.contains(talos_general), "the example's talos workers");
    let with = |mount: &str| {
        let machine = talos_general.replacen(
            "placement:",
            &format!("disks: [{{sizeGiB: 50, mount: {{path: {mount}}}}}], placement:"),
            1,
        );
        findings(vec![(
            "clusters/talos.yaml",
            TALOS.replacen(talos_general, &machine, 1),
        )])
    };
    assert!(!with("/var/mnt/longhorn").contains("mount.path"));
    let refused = with("/var/lib/longhorn");
    assert!(
        refused.contains(
            "Talos mounts user volumes only at /var/mnt/<name>, not at /var/lib/longhorn"
        ),
        "{refused}"
    );
    assert!(
        refused.contains("kubelet extra mount"),
        "the fix says how: {refused}"
    );
}
