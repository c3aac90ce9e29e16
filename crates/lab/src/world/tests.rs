//! The lab world's defaults and checks.

use super::*;

#[test]
fn the_default_world_has_three_nodes_and_the_example_templates_on_each() {
    let world = ProxmoxWorld::default();
    world.check().expect("consistent");
    let names: Vec<&str> = world.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["pve1", "pve2", "pve3"]);
    let templates = world.effective_templates();
    for node in ["pve1", "pve2", "pve3"] {
        for name in [
            "debian13-k8s",
            "debian13-k8s-v2",
            "debian13-k3s",
            "talos-v1.13.9",
        ] {
            assert!(
                templates.iter().any(|t| t.node == node && t.name == name),
                "{name} on {node}"
            );
        }
    }
    assert_eq!(templates.len(), 12);
    let talos: Vec<&WorldTemplate> = templates.iter().filter(|t| t.talos.is_some()).collect();
    assert_eq!(talos.len(), 3);
    assert!(
        talos.iter().all(|t| t.talos.as_deref() == Some("v1.13.9")
            && t.tags == ["talos"]
            && t.k3s.is_none())
    );
}

#[test]
fn the_default_world_keeps_vm_disks_on_local_lvm_and_iso_images_on_local() {
    let world = ProxmoxWorld::default();
    let names: Vec<&str> = world.storages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["local-lvm", "local"]);
    assert_eq!(world.storages[0].content_types(), ["images", "rootdir"]);
    assert!(
        world.storages[1]
            .content_types()
            .contains(&"iso".to_owned())
    );
    assert_eq!(world.storages[1].kind, "dir");
}

#[test]
fn a_config_file_overrides_parts_and_rejects_typos() {
    let config = LabConfig::parse(
        "proxmox:\n  nodes: [{name: a, cores: 4, memoryGiB: 8}]\n  timings: {clone: 2s}\n  faults:\n    failTasks: [{kind: qmstart, message: boom}]\n",
    )
    .expect("valid");
    assert_eq!(config.proxmox.nodes.len(), 1);
    assert_eq!(
        config.proxmox.timings.clone.0,
        std::time::Duration::from_secs(2)
    );
    assert_eq!(config.proxmox.timings.stop, Timings::default().stop);
    assert_eq!(config.proxmox.faults.fail_tasks[0].count, 1);
    config.proxmox.check().expect("templates follow the nodes");
    let typo = LabConfig::parse("proxmox:\n  nodez: []\n")
        .expect_err("typo")
        .to_string();
    assert!(typo.contains("nodez"), "{typo}");
}

#[test]
fn clusters_of_the_config_are_checked() {
    let config = LabConfig::parse(
        "clusters:\n  edge:\n    version: v1.35.4\n    nodes: [{name: a}, {name: b}]\n",
    )
    .expect("valid");
    config.check().expect("consistent");

    let twice =
        LabConfig::parse("clusters:\n  edge: {nodes: [{name: a}, {name: a}]}\n").expect("parses");
    let err = twice.check().expect_err("a node twice").to_string();
    assert!(
        err.contains("clusters.edge") && err.contains("twice"),
        "{err}"
    );
    let version = LabConfig::parse("clusters:\n  edge: {version: latest}\n").expect("parses");
    assert!(version.check().is_err());
}

#[test]
fn inconsistent_worlds_are_refused() {
    let mut world = ProxmoxWorld::default();
    world.vms.push(WorldVm {
        vmid: 9000,
        name: "dup".into(),
        node: "pve1".into(),
        cores: 1,
        memory_mib: 512,
        disk_gib: 1,
        tags: None,
        description: None,
        running: false,
    });
    assert!(world.check().is_err());
}
