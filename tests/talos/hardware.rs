//! Machine hardware on a Talos cluster the daemon builds: workers with two data disks and two
//! cards (VLAN 20 on `vmbr0`, VLAN 30 at MTU 9000 on `vmbr1`) hold exactly those devices; the
//! machine config each boots from names both cards by MAC (`net0`, `net1`, the second at MTU
//! 9000) and mounts the disk that asks for it as a Talos user volume (`/var/mnt/data`, found by
//! the serial Proxmox set on it), the other disk left raw; the Node's InternalIP is on the first
//! card.

use std::collections::BTreeMap;
use std::time::Duration;

use capstan_lab::world::{WorldBridge, WorldSegment};
use capstan_testkit::{World, kubectl_with, ready};
use serde_json::Value;

use crate::reconcile::{CLUSTER, TALOS, cluster, fleet, talos_lab};

const WORKERS: &str = "      machine: {template: talos-v1.13.9, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}\n  rollout:";

fn segment(bridge: &str, vlan: u16, router: bool) -> WorldSegment {
    serde_json::from_value(serde_json::json!({
        "bridge": bridge,
        "vlan": vlan,
        "subnet": format!("10.{vlan}.0.0/24"),
        "dhcpRange": format!("10.{vlan}.0.100-10.{vlan}.0.150"),
        "router": router,
    }))
    .expect("a segment")
}

/// An option of a property string.
fn option<'a>(value: &'a str, key: &str) -> Option<&'a str> {
    value
        .split(',')
        .find_map(|part| part.strip_prefix(key)?.strip_prefix('='))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn talos_workers_get_their_disks_and_cards_a_user_volume_and_their_address_on_vlan_20() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut lab = talos_lab();
    for node in &mut lab.proxmox.nodes {
        node.bridges.push(WorldBridge {
            name: "vmbr1".into(),
            mtu: 9000,
        });
    }
    lab.proxmox.network.segments = vec![segment("vmbr0", 20, true), segment("vmbr1", 30, false)];
    let text = cluster(2, TALOS);
    assert!(text.contains(WORKERS), "the helper's workers");
    let text = text.replacen(
        WORKERS,
        &WORKERS.replacen(
            "placement:",
            "disks: [{sizeGiB: 20}, {sizeGiB: 10, mount: {path: /var/mnt/data, filesystem: xfs}}], networks: [{bridge: vmbr0, vlan: 20}, {bridge: vmbr1, vlan: 30, mtu: 9000}], placement:",
            1,
        ),
        1,
    );
    let mut world = World::with_lab(lab, &fleet(), &[(CLUSTER, text)], false).await;
    world.start_daemon().await;
    // Each machine's cidata image, caught while it is in a CD-ROM drive (capstan empties the
    // drive once the node has joined).
    let mut images: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !ready(&world.status(), &[CLUSTER]) {
        for vm in world.vms_of(CLUSTER) {
            if let Some(image) =
                (0..4).find_map(|i| world.lab.proxmox().cdrom_image(vm.vmid, &format!("ide{i}")))
            {
                images.insert(vm.vmid, image);
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "Ready in time");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let delivered = world.flux_kubeconfig(CLUSTER).expect("delivered to Flux");
    let file = world.state.path().join("talos-hw.kubeconfig");
    std::fs::write(&file, delivered).expect("write");
    let listed: Value =
        serde_json::from_str(&kubectl_with(&file, &["get", "nodes", "-o", "json"])).expect("JSON");
    let internal_ip = |name: &str| -> String {
        listed["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|n| n["metadata"]["name"] == name)
            .and_then(|n| {
                n["status"]["addresses"]
                    .as_array()?
                    .iter()
                    .find(|a| a["type"] == "InternalIP")?["address"]
                    .as_str()
                    .map(str::to_owned)
            })
            .unwrap_or_default()
    };
    let workers: Vec<_> = world
        .vms_of(CLUSTER)
        .into_iter()
        .filter(|vm| vm.name.contains("-general-"))
        .collect();
    assert_eq!(workers.len(), 2);
    for vm in &workers {
        let config = &vm.config;
        let disks: Vec<&String> = (1..31)
            .filter_map(|i| config.get(&format!("scsi{i}")))
            .collect();
        assert_eq!(disks.len(), 2, "{}: two data disks: {config:?}", vm.name);
        assert_eq!(option(disks[0], "serial"), Some("capstan-disk1"));
        assert_eq!(option(disks[1], "serial"), Some("capstan-disk2"));
        assert_eq!(option(disks[1], "size"), Some("10G"));
        let (net0, net1) = (&config["net0"], &config["net1"]);
        assert_eq!(
            (option(net0, "bridge"), option(net0, "tag")),
            (Some("vmbr0"), Some("20"))
        );
        assert_eq!(
            (
                option(net1, "bridge"),
                option(net1, "tag"),
                option(net1, "mtu")
            ),
            (Some("vmbr1"), Some("30"), Some("9000"))
        );
        assert!(
            config
                .keys()
                .all(|k| !k.starts_with("net") || k == "net0" || k == "net1")
        );

        // The machine config it booted from (the cidata image in its CD-ROM drive; an ISO 9660
        // image holds its files' bytes as they are).
        let image = images
            .get(&vm.vmid)
            .expect("its cidata image was seen in a drive");
        let text = String::from_utf8_lossy(image);
        let mac = |value: &str| {
            value
                .split(',')
                .next()
                .and_then(|first| first.split_once('='))
                .map(|(_, mac)| mac.to_lowercase())
                .expect("a MAC")
        };
        for (name, card) in [("net0", net0), ("net1", net1)] {
            assert!(
                text.contains(&format!("name: {name}"))
                    && text.contains(&format!("mac(link.permanent_addr) == \"{}\"", mac(card))),
                "{}: {name} is named by its MAC",
                vm.name
            );
        }
        assert!(
            text.contains("kind: LinkConfig") && text.contains("mtu: 9000"),
            "{}",
            vm.name
        );
        assert!(text.contains("kind: UserVolumeConfig"), "{}", vm.name);
        assert!(text.contains("name: data"), "{}", vm.name);
        assert!(
            text.contains("disk.serial == \"capstan-disk2\""),
            "{}",
            vm.name
        );
        assert!(
            !text.contains("capstan-disk1"),
            "{}: the raw disk is Talos's to leave alone",
            vm.name
        );

        let ip = internal_ip(&vm.name);
        assert!(
            ip.starts_with("10.20.0."),
            "{}: InternalIP {ip} on VLAN 20",
            vm.name
        );
    }
    world.kill_daemon().await;
}
