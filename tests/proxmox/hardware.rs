//! The lab's Proxmox refuses a VM's hardware as PVE does, in PVE's words and at the same moment:
//! a data disk on a storage that holds no disk images when the config call is made (a 400 on
//! `storage`), a card on a bridge the node lacks only when the VM starts (Proxmox writes any
//! bridge name into a config; `qm start` fails plugging the tap), and a PCI mapping without a
//! device on the node, also at start.

use capstan::providers::proxmox::{ProxmoxProvider, VmSettings};

use crate::proxmox_support::{clone_request, created, fast_world, ownership, start};
use capstan::model::Role;

fn settings(hardware: serde_json::Value) -> VmSettings {
    VmSettings {
        cores: 2,
        memory_mib: 2048,
        cpu_type: "host".into(),
        ownership: ownership("prod", Role::Worker, "general"),
        created: created(),
        cloud_init: None,
        built_from: None,
        hardware: serde_json::from_value(hardware).expect("hardware"),
        disk_storage: None,
        tags: Vec::new(),
    }
}

#[tokio::test]
async fn a_disk_on_a_storage_without_images_is_refused_by_the_config_call() {
    let setup = start(fast_world()).await;
    let vm = setup
        .client
        .clone_vm(&clone_request("prod", "general", "img01", "pve1"))
        .await
        .expect("clone");
    let err = setup
        .client
        .configure_vm(
            &vm,
            &settings(serde_json::json!({"disks": [{"sizeGiB": 10, "storage": "local"}]})),
        )
        .await
        .expect_err("refused");
    let text = capstan::errors::error_chain(&err);
    assert!(
        text.contains("storage 'local' does not support vm images"),
        "{text}"
    );
    let config = setup.sim.handle().vm(vm.vmid.0).expect("vm").config;
    assert!(
        !config.contains_key("scsi1"),
        "nothing allocated: {config:?}"
    );
}

#[tokio::test]
async fn a_card_on_a_missing_bridge_is_written_and_refused_when_the_vm_starts() {
    let setup = start(fast_world()).await;
    let vm = setup
        .client
        .clone_vm(&clone_request("prod", "general", "br01", "pve1"))
        .await
        .expect("clone");
    setup
        .client
        .configure_vm(
            &vm,
            &settings(serde_json::json!({"networks": [{"bridge": "vmbr9", "vlan": 20}]})),
        )
        .await
        .expect("Proxmox writes any bridge into a config");
    let err = setup
        .client
        .start_vm(&vm)
        .await
        .expect_err("refused at start");
    let text = capstan::errors::error_chain(&err);
    assert!(text.contains("bridge 'vmbr9' does not exist"), "{text}");
    assert!(!setup.sim.handle().vm(vm.vmid.0).expect("vm").running);
}

#[tokio::test]
async fn a_pci_mapping_without_a_device_on_the_node_is_refused_when_the_vm_starts() {
    let setup = start(fast_world()).await;
    let vm = setup
        .client
        .clone_vm(&clone_request("prod", "gpu", "pci01", "pve1"))
        .await
        .expect("clone");
    setup
        .client
        .configure_vm(
            &vm,
            &settings(serde_json::json!({"pci": [{"mapping": "gpu-a40"}]})),
        )
        .await
        .expect("configured");
    let config = setup.sim.handle().vm(vm.vmid.0).expect("vm").config;
    assert_eq!(
        config.get("hostpci0").map(String::as_str),
        Some("mapping=gpu-a40")
    );
    assert_eq!(config.get("balloon").map(String::as_str), Some("0"));
    let err = setup
        .client
        .start_vm(&vm)
        .await
        .expect_err("refused at start");
    let text = capstan::errors::error_chain(&err);
    assert!(
        text.contains("PCI device mapping not found for 'gpu-a40'"),
        "{text}"
    );
}
