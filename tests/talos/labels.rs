//! Labels and taints on a Talos cluster the daemon builds: taints registered from the machine
//! config (`registerWithTaints`), every label through the API once the Node joined (Talos
//! reconciles `machine.nodeLabels` itself, so capstan leaves those to Talos), a label change
//! and `controlPlane.schedulable` applied in place with no VM cloned; a compact Talos cluster
//! whose control plane carries no `NoSchedule` taint.

use capstan_testkit::judge::{self, Judge};
use capstan_testkit::{World, kubectl_with, ready};
use serde_json::Value;

use crate::reconcile::{TALOS, fleet, talos_lab};

const CLUSTER: &str = "steer";

/// One control plane (`schedulable` when asked) and `workers` workers labelled
/// `workload-class: <class>` and tainted `dedicated=memory:NoSchedule`.
fn cluster(workers: u32, class: &str, schedulable: bool) -> String {
    let pool = if workers == 0 {
        "  workers: []\n".to_owned()
    } else {
        format!(
            "  workers:
    - pool: memory
      replicas: {workers}
      machine: {{template: talos-{TALOS}, cores: 2, memoryMiB: 4096, placement: [pve2]}}
      labels: {{workload-class: {class}}}
      taints: [{{key: dedicated, value: memory, effect: NoSchedule}}]
  rollout: {{minWorkers: 1}}
"
        )
    };
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {CLUSTER}}}
spec:
  proxmox: homelab
  kubernetes: {{distribution: talos, version: 1.36.2}}
  talos: {{version: {TALOS}}}
  endpoint: {{host: k8s-{CLUSTER}.lab.example, address: 192.168.1.67}}
  network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  controlPlane:
    replicas: 1
    schedulable: {schedulable}
    machine: {{template: talos-{TALOS}, cores: 2, memoryMiB: 4096, placement: [pve1]}}
{pool}  delivery:
    flux: {{cluster: management}}
"
    )
}

/// Every Node as the stock kubectl sees it with the kubeconfig delivered to Flux: (name,
/// labels, taints as `key[=value]:Effect`).
fn nodes(world: &World) -> Vec<(String, Value, Vec<String>)> {
    let delivered = world.flux_kubeconfig(CLUSTER).expect("delivered to Flux");
    let file = world.state.path().join("steer.kubeconfig");
    std::fs::write(&file, delivered).expect("write");
    let listed: Value =
        serde_json::from_str(&kubectl_with(&file, &["get", "nodes", "-o", "json"])).expect("JSON");
    let items = listed["items"].as_array().cloned().unwrap_or_default();
    items
        .into_iter()
        .map(|node| {
            let taints = node["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    let value = t["value"].as_str().map(|v| format!("={v}"));
                    let (key, effect) = (t["key"].as_str(), t["effect"].as_str());
                    format!(
                        "{}{}:{}",
                        key.unwrap_or_default(),
                        value.unwrap_or_default(),
                        effect.unwrap_or_default()
                    )
                })
                .collect();
            let name = node["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (name, node["metadata"]["labels"].clone(), taints)
        })
        .collect()
}

fn clones(world: &World) -> usize {
    let tasks = world.lab.proxmox().tasks();
    tasks.iter().filter(|t| t.kind == "qmclone").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_talos_pool_registers_its_taint_takes_its_labels_and_changes_them_in_place() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let text = cluster(1, "memory", false);
    let mut world = World::with_lab(talos_lab(), &fleet(), &[(CLUSTER, text)], false).await;
    world.start_until_ready(&[CLUSTER]).await;
    let seen = nodes(&world);
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (name, labels, taints) in &seen {
        assert_eq!(labels["topology.kubernetes.io/region"], "homelab", "{name}");
        if name.contains("-memory-") {
            assert_eq!(labels["workload-class"], "memory");
            assert_eq!(labels["topology.kubernetes.io/zone"], "pve2");
            assert_eq!(taints, &["dedicated=memory:NoSchedule"]);
        } else {
            assert_eq!(
                taints,
                &["node-role.kubernetes.io/control-plane:NoSchedule"]
            );
        }
    }

    let before = clones(&world);
    // The bootstrap may have run label-nodes already: wait for one run after the change.
    let labelled = world.steps_ok("label-nodes");
    world.write_cluster(CLUSTER, &cluster(1, "cpu", true));
    world
        .wait_for("the label-nodes step", |_| {
            world.steps_ok("label-nodes") > labelled
        })
        .await;
    world.wait_for("Ready", |s| ready(s, &[CLUSTER])).await;
    assert_eq!(clones(&world), before, "no VM cloned");
    for (name, labels, taints) in nodes(&world) {
        if name.contains("-memory-") {
            assert_eq!(labels["workload-class"], "cpu", "{name}");
        } else {
            assert!(taints.is_empty(), "{name} takes workloads now: {taints:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_talos_cluster_has_no_control_plane_taint() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let text = cluster(0, "", true);
    let mut world = World::with_lab(talos_lab(), &fleet(), &[(CLUSTER, text)], false).await;
    world.start_until_ready(&[CLUSTER]).await;
    let seen = nodes(&world);
    assert_eq!(seen.len(), 1, "{seen:?}");
    let (name, labels, taints) = &seen[0];
    assert!(
        labels
            .get("node-role.kubernetes.io/control-plane")
            .is_some(),
        "{name}"
    );
    assert!(taints.is_empty(), "{name}: {taints:?}");
}
