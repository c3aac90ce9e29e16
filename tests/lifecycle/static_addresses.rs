//! Static node addresses on kubeadm and K3s (`network.nodeAddresses`), on a lab network with
//! no DHCP server: every node's InternalIP is an address of the declared range, distinct, the
//! one recorded on its VM, and stays so while the daemon is killed again and again (as with
//! `kill -9`) during the creation of the machines; a machine's address goes back to the range
//! when its VM is destroyed (a range with no spare address still lets every worker be
//! replaced).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use capstan::backoff::random_unit;
use capstan_lab::world::LabConfig;
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::{ClusterYaml, World, fleet_yaml, ready};

const KILLS: usize = 6;
/// Four addresses: one control plane, two workers and one more for a rollout's surge.
const RANGE: (Ipv4Addr, Ipv4Addr) = (
    Ipv4Addr::new(192, 168, 1, 200),
    Ipv4Addr::new(192, 168, 1, 203),
);

/// The default lab without a DHCP server: a VM has an address only when it is given one.
fn no_dhcp_lab() -> LabConfig {
    let mut config = LabConfig::default();
    config.proxmox.templates = Some(config.proxmox.effective_templates());
    config.proxmox.network.dhcp_range = None;
    config
}

fn network_line() -> String {
    format!(
        "network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"], nodeAddresses: {}-{}, gateway: 192.168.1.1, nameservers: [192.168.1.1], searchDomain: lab.example}}",
        RANGE.0, RANGE.1
    )
}

/// A kubeadm cluster (1 control plane, 2 workers on `template`) on static addresses.
fn kubeadm(name: &str, template: &str) -> String {
    let text = ClusterYaml::lab(name)
        .address(48)
        .template(template)
        .render();
    let plain = "network: {nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}";
    assert!(text.contains(plain), "the lab cluster's network line");
    text.replacen(plain, &network_line(), 1)
}

/// A K3s cluster (one server, two agents) on static addresses.
fn k3s(name: &str) -> String {
    let release = capstan_lab::world::DEFAULT_K3S_RELEASE;
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  proxmox: homelab
  kubernetes: {{distribution: k3s, version: {release}}}
  endpoint: {{host: k8s-{name}.lab.example, address: 192.168.1.49}}
  {}
  controlPlane:
    replicas: 1
    machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, placement: [pve1]}}
  workers:
    - pool: agents
      replicas: 2
      machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}}
  rollout: {{minWorkers: 1, drainTimeout: 4s, joinTimeout: 2m}}
  delivery:
    flux: {{cluster: management}}
",
        network_line()
    )
}

/// Each Node's InternalIP, by name.
fn internal_ips(world: &World, cluster: &str) -> BTreeMap<String, Ipv4Addr> {
    capstan_testkit::network::internal_ips(world, cluster)
        .into_iter()
        .map(|(name, ip)| (name, ip.parse().expect("an InternalIP")))
        .collect()
}

/// The addresses recorded on each VM of `cluster` (its `capstan-ip-…` tags), by name.
fn recorded(world: &World, cluster: &str) -> BTreeMap<String, Vec<Ipv4Addr>> {
    world
        .vms_of(cluster)
        .into_iter()
        .map(|vm| {
            let tags = vm.config.get("tags").cloned().unwrap_or_default();
            let addresses = tags
                .split([';', ',', ' '])
                .filter_map(|t| t.strip_prefix("capstan-ip-"))
                .filter_map(|a| a.parse().ok())
                .collect();
            (vm.name, addresses)
        })
        .collect()
}

/// Every Node's InternalIP is in the range, distinct, and the one address its VM records; the
/// VMs are the cluster's machines and no more.
fn assert_on_static_addresses(world: &World, cluster: &str, context: &str) {
    let ips = internal_ips(world, cluster);
    let tagged = recorded(world, cluster);
    assert_eq!(ips.len(), 3, "{context}: three nodes: {ips:?}");
    assert_eq!(
        tagged.len(),
        3,
        "{context}: three VMs, no orphan: {tagged:?}"
    );
    let distinct: BTreeSet<&Ipv4Addr> = ips.values().collect();
    assert_eq!(distinct.len(), 3, "{context}: distinct addresses: {ips:?}");
    for (name, ip) in &ips {
        assert!(
            (RANGE.0..=RANGE.1).contains(ip),
            "{context}: {name}'s InternalIP {ip} is in the declared range"
        );
        assert_eq!(
            tagged.get(name).map(Vec::as_slice),
            Some(std::slice::from_ref(ip)),
            "{context}: {name} records exactly its address"
        );
    }
}

/// Starts the daemon and kills it after a random 50–900 ms, [`KILLS`] times.
async fn kill_repeatedly(world: &mut World) -> Vec<u64> {
    let mut kills = Vec::new();
    for _ in 0..KILLS {
        world.start_daemon().await;
        let after = 50 + (random_unit() * 850.0) as u64;
        tokio::time::sleep(Duration::from_millis(after)).await;
        world.kill_daemon().await;
        kills.push(after);
    }
    kills
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeadm_cluster_without_dhcp_comes_up_on_its_static_addresses_across_kills() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    const CLUSTER: &str = "fixed";
    let mut world = World::with_lab(
        no_dhcp_lab(),
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, kubeadm(CLUSTER, "debian13-k8s"))],
        false,
    )
    .await;
    let kills = kill_repeatedly(&mut world).await;
    world.start_daemon().await;
    world
        .wait_for_within(
            "Ready on static addresses after the kills",
            Duration::from_secs(120),
            |s| ready(s, &[CLUSTER]),
        )
        .await;
    assert_on_static_addresses(&world, CLUSTER, &format!("after kills at {kills:?} ms"));

    // Every worker replaced, with one address to spare: each new worker takes the one an old
    // worker gave back when its VM was destroyed.
    let before: BTreeSet<String> = recorded(&world, CLUSTER).into_keys().collect();
    world.write_cluster(CLUSTER, &kubeadm(CLUSTER, "debian13-k8s-v2"));
    world
        .wait_for_within("every worker replaced", Duration::from_secs(120), |s| {
            ready(s, &[CLUSTER])
                && world
                    .vms_of(CLUSTER)
                    .iter()
                    .filter(|vm| vm.name.contains("-general-"))
                    .all(|vm| !before.contains(&vm.name))
                && world.vms_of(CLUSTER).len() == 3
        })
        .await;
    assert_on_static_addresses(&world, CLUSTER, "after the replacement");
    world.kill_daemon().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_k3s_cluster_without_dhcp_comes_up_on_its_static_addresses_across_kills() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    const CLUSTER: &str = "fixedk3s";
    let mut world = World::with_lab(
        no_dhcp_lab(),
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, k3s(CLUSTER))],
        false,
    )
    .await;
    let kills = kill_repeatedly(&mut world).await;
    world.start_daemon().await;
    world
        .wait_for_within(
            "Ready on static addresses after the kills",
            Duration::from_secs(120),
            |s| ready(s, &[CLUSTER]),
        )
        .await;
    assert_on_static_addresses(&world, CLUSTER, &format!("after kills at {kills:?} ms"));
    world.kill_daemon().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_without_a_cloud_init_drive_is_refused_before_any_clone_saying_how_to_fix_it() {
    const CLUSTER: &str = "nodrive";
    let mut lab = no_dhcp_lab();
    for template in lab.proxmox.templates.iter_mut().flatten() {
        if template.name == "debian13-k8s" {
            template.cloud_init_drive = false;
        }
    }
    let mut world = World::with_lab(
        lab,
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, kubeadm(CLUSTER, "debian13-k8s"))],
        false,
    )
    .await;
    world.start_daemon().await;
    let words = "machine.template: template debian13-k8s has no cloud-init drive, through which kubeadm nodes get its static address (network.nodeAddresses)";
    let status = world
        .wait_for_within("the refusal", Duration::from_secs(30), |s| {
            serde_json::to_string(&s.clusters.get(CLUSTER))
                .unwrap_or_default()
                .contains(words)
        })
        .await;
    let text = serde_json::to_string(&status.clusters.get(CLUSTER)).unwrap_or_default();
    assert!(
        text.contains("--ide2 <storage>:cloudinit"),
        "says how: {text}"
    );
    assert!(world.vms_of(CLUSTER).is_empty(), "no VM cloned");
    world.kill_daemon().await;
}
