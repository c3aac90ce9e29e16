//! ISO images through the Proxmox API, capstan's client against the lab: an image uploaded
//! (multipart, `content=iso`), listed, attached as a VM's CD-ROM, read back by the lab byte
//! for byte, detached and deleted; every step repeatable; the refusals of the client (before
//! anything is sent) and of Proxmox (storage type, content types, missing storage), each
//! naming node, storage and volume.

use capstan::providers::proxmox::{
    ISO_UPLOAD_MAX_BYTES, ProxmoxError, ProxmoxProvider, PveNode, StorageContent, VmRef, VolumeId,
};
use capstan_core::errors::error_chain;
use capstan_core::model::VmId;
use capstan_lab::world::WorldVm;

use crate::proxmox_support::{SECRET, Setup, iso_world, start};

const UPLOAD: &str = "POST /nodes/{node}/storage/{storage}/upload";

fn pve1() -> PveNode {
    PveNode::from("pve1")
}

/// Bytes that are not text, with CR LF and a would-be multipart delimiter inside.
fn image() -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    bytes.extend_from_slice(b"\r\n--boundary\r\nContent-Disposition: form-data\r\n\r\n");
    bytes
}

/// A stopped VM on pve1 to attach images to.
fn vm(setup: &Setup) -> VmRef {
    setup
        .sim
        .handle()
        .add_vm(&WorldVm {
            vmid: 700,
            name: "talos-prod-cp-1".into(),
            node: "pve1".into(),
            cores: 2,
            memory_mib: 2048,
            disk_gib: 20,
            tags: None,
            description: None,
            running: false,
        })
        .expect("VM added");
    VmRef {
        node: pve1(),
        vmid: VmId(700),
    }
}

#[tokio::test]
async fn an_iso_goes_up_into_a_cdrom_and_away_again() {
    let setup = start(iso_world()).await;
    let client = &setup.client;
    let handle = setup.sim.handle();
    let vm = vm(&setup);
    let bytes = image();

    let volume = client
        .upload_iso(&pve1(), "local", "talos-prod-cp-1.iso", &bytes)
        .await
        .expect("uploaded");
    assert_eq!(volume.as_str(), "local:iso/talos-prod-cp-1.iso");
    assert_eq!(handle.volume("pve1", volume.as_str()), Some(bytes.clone()));
    // `local` is each node's own: pve2 does not see it.
    assert_eq!(handle.volume("pve2", volume.as_str()), None);

    let listed = client
        .storage_volumes(&pve1(), "local", StorageContent::Iso)
        .await
        .expect("listed");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].volid, volume);
    assert_eq!(listed[0].format, "iso");
    assert_eq!(listed[0].size_bytes, bytes.len() as u64);
    let backups = client
        .storage_volumes(&pve1(), "local", StorageContent::Backup)
        .await
        .expect("listed");
    assert!(backups.is_empty(), "{backups:?}");

    for _ in 0..2 {
        client.attach_cdrom(&vm, &volume).await.expect("attached");
    }
    let config = handle.vm(700).expect("VM").config;
    assert_eq!(config["ide2"], "local:iso/talos-prod-cp-1.iso,media=cdrom");
    assert_eq!(handle.cdrom_image(700, "ide2"), Some(bytes.clone()));

    for _ in 0..2 {
        client.detach_cdrom(&vm, &volume).await.expect("detached");
    }
    assert_eq!(
        handle.vm(700).expect("VM").config["ide2"],
        "none,media=cdrom"
    );
    assert_eq!(handle.cdrom_image(700, "ide2"), None);

    for _ in 0..2 {
        client
            .delete_volume(&pve1(), &volume)
            .await
            .expect("deleted, or already gone");
    }
    assert_eq!(handle.volume("pve1", volume.as_str()), None);
    let listed = client
        .storage_volumes(&pve1(), "local", StorageContent::Iso)
        .await
        .expect("listed");
    assert!(listed.is_empty(), "{listed:?}");
}

#[tokio::test]
async fn an_upload_repeated_replaces_the_image_and_a_shared_storage_serves_every_node() {
    let setup = start(iso_world()).await;
    let client = &setup.client;
    let handle = setup.sim.handle();
    for content in [b"first".as_slice(), b"second".as_slice()] {
        client
            .upload_iso(&pve1(), "isos", "seed.iso", content)
            .await
            .expect("uploaded");
    }
    let volume = "isos:iso/seed.iso";
    assert_eq!(handle.volume("pve1", volume), Some(b"second".to_vec()));
    assert_eq!(handle.volume("pve3", volume), Some(b"second".to_vec()));
    let seen_from_pve2 = client
        .storage_volumes(&PveNode::from("pve2"), "isos", StorageContent::Iso)
        .await
        .expect("listed");
    assert_eq!(seen_from_pve2.len(), 1);
}

#[tokio::test]
async fn storages_say_what_they_hold() {
    let setup = start(iso_world()).await;
    let client = &setup.client;
    let local = client
        .storage_content(&pve1(), "local")
        .await
        .expect("local");
    assert_eq!(
        local.into_iter().collect::<Vec<_>>(),
        vec![
            StorageContent::Iso,
            StorageContent::Vztmpl,
            StorageContent::Backup
        ]
    );
    let disks = client
        .storage_content(&pve1(), "local-lvm")
        .await
        .expect("local-lvm");
    assert!(disks.contains(&StorageContent::Images) && !disks.contains(&StorageContent::Iso));
    let missing = client
        .storage_content(&pve1(), "nowhere")
        .await
        .expect_err("no such storage");
    assert!(
        matches!(&missing, ProxmoxError::StorageNotFound { node, storage } if node == "pve1" && storage == "nowhere"),
        "{missing:?}"
    );
}

#[tokio::test]
async fn names_and_sizes_proxmox_would_change_or_choke_on_are_never_sent() {
    let setup = start(iso_world()).await;
    let client = &setup.client;
    for name in ["../seed.iso", "seed.img", "seed iso.iso", ".iso"] {
        let err = client
            .upload_iso(&pve1(), "local", name, b"x")
            .await
            .expect_err(name);
        assert!(matches!(err, ProxmoxError::IsoRefused { .. }), "{err:?}");
        let text = error_chain(&err);
        assert!(text.contains("local") && text.contains("pve1"), "{text}");
    }
    let too_big = vec![0u8; ISO_UPLOAD_MAX_BYTES + 1];
    let err = client
        .upload_iso(&pve1(), "local", "big.iso", &too_big)
        .await
        .expect_err("too big");
    assert!(error_chain(&err).contains("more than"), "{err}");
    assert_eq!(setup.sim.handle().calls_of(UPLOAD), 0);
}

#[tokio::test]
async fn proxmox_refusals_name_node_storage_and_volume() {
    let setup = start(iso_world()).await;
    let client = &setup.client;
    for (storage, says) in [
        ("local-lvm", "can't upload to storage type 'lvmthin'"),
        (
            "backups",
            "storage 'backups' does not support 'iso' content",
        ),
        ("nowhere", "storage 'nowhere' does not exist"),
    ] {
        let err = client
            .upload_iso(&pve1(), storage, "seed.iso", b"x")
            .await
            .expect_err(storage);
        let text = error_chain(&err);
        assert!(
            text.starts_with(&format!(
                "cannot upload volume {storage}:iso/seed.iso on storage {storage} of Proxmox node pve1"
            )),
            "{text}"
        );
        assert!(text.contains(says), "{text}");
        assert!(!err.is_transient(), "{text}");
        assert!(!text.contains(SECRET), "{text}");
    }
    let vm = vm(&setup);
    let elsewhere = VmRef {
        node: PveNode::from("pve2"),
        vmid: vm.vmid,
    };
    let volume = VolumeId::iso("local", "seed.iso");
    let err = client
        .attach_cdrom(&elsewhere, &volume)
        .await
        .expect_err("VM not on pve2");
    let text = error_chain(&err);
    assert!(
        text.starts_with(
            "cannot attach volume local:iso/seed.iso on storage local of Proxmox node pve2"
        ),
        "{text}"
    );
    // Nothing to detach from a VM that is gone, nor a drive holding something else.
    client
        .detach_cdrom(&elsewhere, &volume)
        .await
        .expect("gone VM holds nothing");
    let cloud_init = setup.sim.handle().vm(700).expect("VM").config["ide2"].clone();
    client
        .detach_cdrom(&vm, &volume)
        .await
        .expect("another volume is left alone");
    assert_eq!(
        setup.sim.handle().vm(700).expect("VM").config["ide2"],
        cloud_init
    );
}

#[tokio::test]
async fn an_upload_cut_short_by_a_passing_failure_is_sent_again() {
    let setup = start(iso_world()).await;
    setup
        .sim
        .faults()
        .fail_calls(capstan_lab::world::CallFault {
            count: 1,
            status: 503,
            message: "Service Unavailable".into(),
            path: Some("/upload".into()),
        });
    let volume = setup
        .client
        .upload_iso(&pve1(), "local", "seed.iso", &image())
        .await
        .expect("uploaded on the second try");
    assert_eq!(setup.sim.handle().calls_of(UPLOAD), 2);
    assert_eq!(
        setup.sim.handle().volume("pve1", volume.as_str()),
        Some(image())
    );
}
