//! Static node addresses on Talos: a cluster with `network.nodeAddresses` comes up with every
//! VM on its own address of the range (written into its cidata `network-config`, reported by
//! its guest agent, its Node's InternalIP) and the address tagged on the VM; a replacement
//! takes an address no other machine holds, nor one a `capstan-ip-` tag gives another VM.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use capstan_lab::proxmox::SimVm;
use capstan_lab::world::{CallFault, WorldVm};
use capstan_testkit::{World, kubectl_with, ready};

use crate::reconcile::{CLUSTER, NEXT_TALOS, TALOS, cluster, fleet, talos_lab};

/// The range of the cluster's node addresses.
const FIRST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 50);
const LAST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 59);

/// Three control planes and one worker at Talos `talos`, on static addresses from
/// 192.168.1.50-192.168.1.59.
fn static_cluster(talos: &str) -> String {
    let text = cluster(1, talos);
    let dhcp = "  network: {nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}\n";
    assert!(text.contains(dhcp), "the helper's network line moved");
    text.replace(
        dhcp,
        "  network:\n    nodes: 192.168.1.0/24\n    reserved: [\"192.168.1.170-192.168.1.189\"]\n    nodeAddresses: 192.168.1.50-192.168.1.59\n",
    )
}

/// Each VM's address (as its guest agent reports it), checked against the `capstan-ip-` tag on
/// the VM and the range; distinct.
fn addresses(vms: &[SimVm]) -> BTreeSet<Ipv4Addr> {
    let mut seen = BTreeSet::new();
    for vm in vms {
        let address = vm
            .address
            .unwrap_or_else(|| panic!("{} reports no address", vm.name));
        assert!(
            (FIRST..=LAST).contains(&address),
            "{} is on {address}, outside the range",
            vm.name
        );
        let tags = vm.config.get("tags").cloned().unwrap_or_default();
        assert!(
            tags.split(';')
                .any(|tag| tag == format!("capstan-ip-{address}")),
            "{} on {address} carries tags {tags}",
            vm.name
        );
        assert!(seen.insert(address), "{address} is held twice: {vms:?}");
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_talos_cluster_with_node_addresses_runs_every_machine_on_its_own_address_of_the_range() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::with_lab(
        talos_lab(),
        &fleet(),
        &[(CLUSTER, static_cluster(TALOS))],
        false,
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    let vms = world.vms_of(CLUSTER);
    assert_eq!(vms.len(), 4);
    let held = addresses(&vms);

    // The Nodes' InternalIPs are those addresses: the kubelets run on them.
    let delivered = world.flux_kubeconfig(CLUSTER).expect("delivered to Flux");
    let file = world.state.path().join("talos-static.kubeconfig");
    std::fs::write(&file, delivered).expect("write");
    let internal = kubectl_with(
        &file,
        &[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.status.addresses[?(@.type==\"InternalIP\")].address}{\"\\n\"}{end}",
        ],
    );
    let internal: BTreeSet<Ipv4Addr> = internal
        .lines()
        .map(|line| line.trim().parse().expect("an IPv4 InternalIP"))
        .collect();
    assert_eq!(internal, held);

    // A release change replaces every machine, new before old: each new one takes an address
    // of the range no other machine holds, and the VMs left are the new ones.
    let old: BTreeSet<String> = vms.into_iter().map(|vm| vm.name).collect();
    world.write_cluster(CLUSTER, &static_cluster(NEXT_TALOS));
    world
        .wait_for("every machine replaced", |s| {
            ready(s, &[CLUSTER])
                && s.clusters[CLUSTER].nodes.len() == 4
                && s.clusters[CLUSTER]
                    .nodes
                    .iter()
                    .all(|n| !old.contains(n.name.as_str()))
        })
        .await;
    let vms = world.vms_of(CLUSTER);
    assert_eq!(vms.len(), 4, "every old VM destroyed: {vms:?}");
    assert!(vms.iter().all(|vm| !old.contains(&vm.name)));
    addresses(&vms);
}

/// More failed uploads than the client's retries of one (at most 10) for four machines.
const FAILED_UPLOADS: u32 = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_whose_config_upload_failed_keeps_the_address_it_was_tagged_with() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::with_lab(
        talos_lab(),
        &fleet(),
        &[(CLUSTER, static_cluster(TALOS))],
        true,
    )
    .await;
    // Every upload fails for a while, more times than the client retries one: machines are
    // tagged with their address, then their create-machine fails and is tried again.
    world.lab.faults().fail_calls(CallFault {
        count: FAILED_UPLOADS,
        status: 503,
        message: "Service Unavailable".into(),
        path: Some("/upload".into()),
    });
    world.start_until_ready(&[CLUSTER]).await;
    let vms = world.vms_of(CLUSTER);
    assert_eq!(vms.len(), 4);
    addresses(&vms);
    for vm in &vms {
        let tags = vm.config.get("tags").cloned().unwrap_or_default();
        let recorded = tags
            .split(';')
            .filter(|t| t.starts_with("capstan-ip-"))
            .count();
        assert_eq!(recorded, 1, "{} carries {tags}", vm.name);
    }
    let failed = world
        .lab
        .proxmox()
        .exchanges()
        .iter()
        .filter(|e| e.template.ends_with("/upload") && e.status == 503)
        .count();
    assert_eq!(failed, FAILED_UPLOADS as usize, "the uploads failed first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_another_vm_is_tagged_with_is_never_given_to_a_machine() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // A VM no cluster owns, tagged by hand with the range's first address.
    let mut lab = talos_lab();
    lab.proxmox.vms.push(WorldVm {
        vmid: 900,
        name: "hand-made".into(),
        node: "pve1".into(),
        cores: 1,
        memory_mib: 1024,
        disk_gib: 10,
        tags: Some(format!("capstan-ip-{FIRST}")),
        description: None,
        running: false,
    });
    let mut world =
        World::with_lab(lab, &fleet(), &[(CLUSTER, static_cluster(TALOS))], false).await;
    world.start_until_ready(&[CLUSTER]).await;
    let held = addresses(&world.vms_of(CLUSTER));
    assert_eq!(held.len(), 4);
    assert!(
        !held.contains(&FIRST),
        "{FIRST} is tagged on another VM, yet a machine holds it: {held:?}"
    );
}
