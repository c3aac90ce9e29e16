//! The daemon builds Talos clusters on the lab from a pushed commit: machine configs delivered
//! only through the Proxmox API (a cidata ISO per VM, deleted once the machine took it), etcd
//! bootstrapped once through the Talos API, the admin kubeconfig computed from the bundle and
//! delivered to Flux, and not one guest-agent command.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use capstan::model::Role;
use capstan_lab::nodes::TalosClusterRef;
use capstan_lab::talos::EtcdCluster;
use capstan_lab::world::{LabConfig, ProxmoxWorld, WorldTemplate};
use capstan_testkit::{FleetYaml, World, kubectl_with, ready};

/// The Talos release of the lab's Talos templates (`talos-<release>`), and the next one.
pub const TALOS: &str = "v1.13.9";
/// The release a version change moves to.
pub const NEXT_TALOS: &str = "v1.13.10";
/// The cluster's name.
pub const CLUSTER: &str = "talos";

/// The default lab (a `local` ISO storage and a `talos-v1.13.9` template on every node) with a
/// template of the next Talos release per node.
pub fn talos_lab() -> LabConfig {
    let mut proxmox = ProxmoxWorld::default();
    let mut templates = proxmox.effective_templates();
    assert!(
        templates.iter().any(|t| t.talos.as_deref() == Some(TALOS)),
        "the default lab has talos-{TALOS}"
    );
    for (index, node) in proxmox.nodes.iter().enumerate() {
        templates.push(WorldTemplate {
            talos: Some(NEXT_TALOS.into()),
            tags: vec!["talos".into()],
            ..WorldTemplate::new(
                &format!("talos-{NEXT_TALOS}"),
                9500 + index as u32,
                &node.name,
            )
        });
    }
    proxmox.templates = Some(templates);
    LabConfig {
        proxmox,
        ..LabConfig::default()
    }
}

/// `capstan.yaml` whose connection names the ISO storage.
pub fn fleet() -> String {
    FleetYaml::new().render().replace(
        "    tokenId: capstan@pve!reconciler\n",
        "    tokenId: capstan@pve!reconciler\n    isoStorage: local\n",
    )
}

/// Three control planes on Talos's VIP and `workers` workers, at Talos `talos` (on its
/// template).
pub fn cluster(workers: u32, talos: &str) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {CLUSTER}}}
spec:
  proxmox: homelab
  kubernetes: {{distribution: talos, version: 1.36.2}}
  talos: {{version: {talos}}}
  endpoint: {{host: k8s-{CLUSTER}.lab.example, address: 192.168.1.66}}
  network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  controlPlane:
    replicas: 3
    machine: {{template: talos-{talos}, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}}
  workers:
    - pool: general
      replicas: {workers}
      machine: {{template: talos-{talos}, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}}
  rollout: {{minWorkers: 1, drainTimeout: 4s, joinTimeout: 2m}}
  delivery:
    flux: {{cluster: management}}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_talos_cluster_comes_up_ready_through_the_proxmox_and_talos_apis_alone() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world =
        World::with_lab(talos_lab(), &fleet(), &[(CLUSTER, cluster(2, TALOS))], true).await;
    let status = world.start_until_ready(&[CLUSTER]).await;
    let talos = &status.clusters[CLUSTER];
    assert_eq!(talos.nodes.len(), 5, "{talos:?}");

    // The stock kubectl, with the kubeconfig delivered to Flux, sees 5 Ready nodes at 1.36.2.
    let delivered = world.flux_kubeconfig(CLUSTER).expect("delivered to Flux");
    let file = world.state.path().join("talos-from-flux.kubeconfig");
    std::fs::write(&file, delivered).expect("write");
    let nodes = kubectl_with(
        &file,
        &[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.status.nodeInfo.kubeletVersion} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
        ],
    );
    let lines: Vec<&str> = nodes.lines().collect();
    assert_eq!(lines.len(), 5, "{nodes}");
    assert!(
        lines.iter().all(|line| line.ends_with(" v1.36.2 True")),
        "{nodes}"
    );

    // Every config ISO was deleted, and no VM holds one.
    let proxmox = world.lab.proxmox();
    for node in ["pve1", "pve2", "pve3"] {
        let left: Vec<String> = proxmox
            .volumes(node)
            .into_iter()
            .filter(|v| v.starts_with("local:iso/capstan-"))
            .collect();
        assert!(left.is_empty(), "{node} keeps {left:?}");
    }
    let exchanges = proxmox.exchanges();
    let uploads = exchanges
        .iter()
        .filter(|e| e.template.ends_with("/upload") && e.status == 200)
        .count();
    assert_eq!(uploads, 5, "one ISO per machine");
    // Not one command through a guest agent: Talos has nothing to execute.
    let execs: Vec<&str> = exchanges
        .iter()
        .filter(|e| e.template.contains("/agent/exec") || e.template.contains("/agent/file-write"))
        .map(|e| e.template.as_str())
        .collect();
    assert!(execs.is_empty(), "{execs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_talos_release_change_replaces_every_machine_keeping_etcd_quorum_and_no_stale_member() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::with_lab(
        talos_lab(),
        &fleet(),
        &[(CLUSTER, cluster(2, TALOS))],
        false,
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    let old: Vec<String> = world
        .vms_of(CLUSTER)
        .into_iter()
        .map(|vm| vm.name)
        .collect();
    assert_eq!(old.len(), 5);
    let etcd = world
        .lab
        .talos_etcd(TalosClusterRef::Named(CLUSTER))
        .expect("the cluster's etcd");
    let sampler = Sampler::start(etcd.clone());

    world.write_cluster(CLUSTER, &cluster(2, NEXT_TALOS));
    let status = world
        .wait_for("every machine replaced", |s| {
            ready(s, &[CLUSTER])
                && s.clusters[CLUSTER].nodes.len() == 5
                && s.clusters[CLUSTER]
                    .nodes
                    .iter()
                    .all(|n| !old.iter().any(|o| o == n.name.as_str()))
        })
        .await;
    let samples = sampler.finish();

    // etcd kept its quorum at every sample: never below 2 healthy of 3 (nor a majority of the
    // 4 members while a replacement had joined).
    assert!(samples.len() > 10, "sampled every 10 ms: {}", samples.len());
    for (members, healthy) in &samples {
        assert!(
            *healthy >= 2 && *healthy > members / 2,
            "{healthy} healthy of {members} members: {samples:?}"
        );
    }
    assert!(
        samples.iter().any(|(members, _)| *members == 4),
        "a new member joined before an old one left"
    );
    // At the end the members are the control-plane machines, no stale one.
    let members: BTreeSet<String> = etcd
        .members_unchecked()
        .into_iter()
        .map(|m| m.name)
        .collect();
    let control_planes: BTreeSet<String> = status.clusters[CLUSTER]
        .nodes
        .iter()
        .filter(|n| n.role == Role::ControlPlane)
        .map(|n| n.name.to_string())
        .collect();
    assert_eq!(members, control_planes);
    assert_eq!(world.vms_of(CLUSTER).len(), 5, "every old VM destroyed");
}

/// Samples an etcd's (members, healthy members) every 10 ms on a thread of its own.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(usize, usize)>>,
}

impl Sampler {
    fn start(etcd: EtcdCluster) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                let members = etcd.members_unchecked();
                let healthy = members.iter().filter(|m| m.healthy).count();
                samples.push((members.len(), healthy));
                std::thread::sleep(Duration::from_millis(10));
            }
            samples
        });
        Sampler { stop, thread }
    }

    fn finish(self) -> Vec<(usize, usize)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("sampler")
    }
}
