//! Pools steer workloads: a pool's labels and taint, and capstan's topology labels, on every
//! Node as the stock kubectl sees them; a change of a label in Git applied in place by one
//! `label-nodes` step with no VM cloned or destroyed, a label added by hand kept; compact
//! clusters (control planes schedulable, no worker) whose control planes carry no
//! `NoSchedule` taint, on kubeadm and K3s (Talos's: `tests/talos/labels.rs`).

use std::collections::BTreeMap;

use capstan_lab::world::LabConfig;
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::{ClusterYaml, World, fleet_yaml, ready};
use serde_json::Value;

const CLUSTER: &str = "pools";

/// The lab cluster with pool `general` labelled `workload-class: <class>` and tainted
/// `dedicated=<class>:NoSchedule`.
fn labelled(class: &str) -> String {
    let pool_machine = "placement: [pve1, pve2, pve3]}\n";
    ClusterYaml::lab(CLUSTER).address(41).render().replacen(
        pool_machine,
        &format!(
            "{pool_machine}      labels: {{workload-class: {class}}}\n      taints: [{{key: dedicated, value: memory, effect: NoSchedule}}]\n"
        ),
        1,
    )
}

/// Each Node of `cluster` as kubectl prints it: name → (labels, taints as `key=value:Effect`,
/// annotations).
type NodeFacts = (
    BTreeMap<String, String>,
    Vec<String>,
    BTreeMap<String, String>,
);

fn nodes(world: &World, cluster: &str) -> BTreeMap<String, NodeFacts> {
    let listed: Value =
        serde_json::from_str(&world.kubectl(cluster, &["get", "nodes", "-o", "json"]))
            .expect("kubectl prints JSON");
    let strings = |value: &Value| -> BTreeMap<String, String> {
        value
            .as_object()
            .map(|map| {
                map.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    listed["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|node| {
            let taints = node["spec"]["taints"]
                .as_array()
                .map(|taints| {
                    taints
                        .iter()
                        .map(|t| {
                            let value = t["value"].as_str().map(|v| format!("={v}"));
                            format!(
                                "{}{}:{}",
                                t["key"].as_str().unwrap_or_default(),
                                value.unwrap_or_default(),
                                t["effect"].as_str().unwrap_or_default()
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            (
                node["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                (
                    strings(&node["metadata"]["labels"]),
                    taints,
                    strings(&node["metadata"]["annotations"]),
                ),
            )
        })
        .collect()
}

/// `qmclone` and `qmdestroy` tasks the simulated Proxmox ran so far.
fn clones_and_destroys(world: &World) -> (usize, usize) {
    let tasks = world.lab.proxmox().tasks();
    let count = |kind: &str| tasks.iter().filter(|t| t.kind == kind).count();
    (count("qmclone"), count("qmdestroy"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pools_labels_and_taint_show_on_its_nodes_and_a_label_change_applies_in_place() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, labelled("memory"))],
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    let vms = world.vms_of(CLUSTER);
    let seen = nodes(&world, CLUSTER);
    assert_eq!(seen.len(), 3, "{seen:?}");
    for vm in &vms {
        let (labels, taints, annotations) = &seen[&vm.name];
        let worker = vm.name.contains("-general-");
        assert_eq!(
            labels["topology.kubernetes.io/zone"], vm.node,
            "{}",
            vm.name
        );
        assert_eq!(labels["topology.kubernetes.io/region"], "homelab");
        assert_eq!(
            labels["capstan.dev/pool"],
            if worker { "general" } else { "cp" }
        );
        assert!(annotations["capstan.dev/managed-labels"].contains("capstan.dev/pool"));
        if worker {
            assert_eq!(labels["workload-class"], "memory");
            assert_eq!(taints, &["dedicated=memory:NoSchedule"]);
        } else {
            assert_eq!(
                taints,
                &["node-role.kubernetes.io/control-plane:NoSchedule"]
            );
        }
    }

    // Someone labels a node by hand; capstan never set that key, so it stays.
    let hand = vms
        .iter()
        .find(|vm| vm.name.contains("-general-"))
        .expect("a worker");
    world.kubectl(CLUSTER, &["label", "node", &hand.name, "owner=alice"]);
    let taint = "maintenance=soon:PreferNoSchedule";
    world.kubectl(CLUSTER, &["taint", "node", &hand.name, taint]);
    let before = clones_and_destroys(&world);
    // The bootstrap may have run label-nodes already: wait for one run after the change.
    let labelled_before = world.steps_ok("label-nodes");
    world.write_cluster(CLUSTER, &labelled("cpu"));
    world
        .wait_for("the label-nodes step", |_| {
            world.steps_ok("label-nodes") > labelled_before
        })
        .await;
    let status = world
        .wait_for("Ready again", |s| ready(s, &[CLUSTER]))
        .await;
    assert_eq!(world.steps_ok("label-nodes"), 1, "one step for every node");
    assert_eq!(
        clones_and_destroys(&world),
        before,
        "no VM cloned or destroyed"
    );
    assert_eq!(world.vms_of(CLUSTER).len(), vms.len());
    assert_eq!(status.clusters[CLUSTER].nodes.len(), 3);
    let seen = nodes(&world, CLUSTER);
    for vm in vms.iter().filter(|vm| vm.name.contains("-general-")) {
        let (labels, taints, annotations) = &seen[&vm.name];
        assert_eq!(labels["workload-class"], "cpu", "{}", vm.name);
        assert!(taints.contains(&"dedicated=memory:NoSchedule".to_owned()));
        assert!(!annotations["capstan.dev/managed-labels"].contains("owner"));
    }
    let (labels, mut taints, _) = seen[&hand.name].clone();
    taints.sort();
    assert_eq!(labels["owner"], "alice", "the hand-made label stays");
    assert_eq!(
        taints,
        ["dedicated=memory:NoSchedule", taint],
        "so does the hand-made taint"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_daemon_removes_the_keys_it_set_that_the_file_dropped_and_no_other() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, labelled("memory"))],
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    let workers: Vec<String> = world
        .vms_of(CLUSTER)
        .into_iter()
        .filter(|vm| vm.name.contains("-general-"))
        .map(|vm| vm.name)
        .collect();
    world.kubectl(
        CLUSTER,
        &["label", "node", &workers[0], "workload-tier=gold"],
    );
    // A new daemon knows only what the Nodes record: the file drops the pool's label and
    // taint while none runs.
    world.kill_daemon().await;
    world.write_cluster(CLUSTER, &ClusterYaml::lab(CLUSTER).address(41).render());
    world.start_daemon().await;
    world
        .wait_for("the label-nodes step", |_| {
            world.steps_ok("label-nodes") >= 1
        })
        .await;
    let seen = nodes(&world, CLUSTER);
    for worker in &workers {
        let (labels, taints, annotations) = &seen[worker];
        assert!(
            !labels.contains_key("workload-class"),
            "{worker}: {labels:?}"
        );
        assert!(taints.is_empty(), "{worker}: {taints:?}");
        assert_eq!(labels["capstan.dev/pool"], "general");
        let record = &annotations["capstan.dev/managed-labels"];
        assert!(!record.contains("workload-class"), "{record}");
    }
    assert_eq!(
        seen[&workers[0]].0["workload-tier"], "gold",
        "not capstan's"
    );
}

/// A single control plane that takes workloads and no worker, on `template`.
fn compact(name: &str, distribution: &str, version: &str, template: &str) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  proxmox: homelab
  kubernetes: {{distribution: {distribution}, version: {version}}}
  endpoint: {{host: k8s-{name}.lab.example, address: 192.168.1.42}}
  network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  controlPlane:
    replicas: 1
    schedulable: true
    machine: {{template: {template}, cores: 2, memoryMiB: 4096, placement: [pve1]}}
  workers: []
  delivery:
    flux: {{cluster: management}}
"
    )
}

fn assert_no_control_plane_taint(world: &World, cluster: &str) {
    let seen = nodes(world, cluster);
    assert_eq!(seen.len(), 1, "{seen:?}");
    for (name, (labels, taints, _)) in &seen {
        assert!(
            labels.contains_key("node-role.kubernetes.io/control-plane"),
            "{name}"
        );
        assert!(
            !taints.iter().any(|t| t.ends_with(":NoSchedule")),
            "{name}: {taints:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_kubeadm_cluster_has_no_control_plane_taint() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let cluster = compact("tiny", "kubeadm", "1.36.2", "debian13-k8s");
    let mut world = World::new(&fleet_yaml(&["1.36"], false), &[("tiny", cluster)]).await;
    world.start_until_ready(&["tiny"]).await;
    assert_no_control_plane_taint(&world, "tiny");
}

fn k3s_lab() -> LabConfig {
    let mut config = LabConfig::default();
    config.proxmox.templates = Some(config.proxmox.effective_templates());
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_k3s_cluster_has_no_control_plane_taint() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let release = capstan_lab::world::DEFAULT_K3S_RELEASE;
    let cluster = compact("edge", "k3s", release, "debian13-k3s");
    let fleet = fleet_yaml(&["1.36"], false);
    let mut world = World::with_lab(k3s_lab(), &fleet, &[("edge", cluster)], false).await;
    world.start_until_ready(&["edge"]).await;
    assert_no_control_plane_taint(&world, "edge");
}

/// One K3s server (embedded SQLite) and an agent pool labelled `workload-class: <class>`,
/// tainted `dedicated=memory:NoSchedule`.
fn k3s_pool(class: &str) -> String {
    let release = capstan_lab::world::DEFAULT_K3S_RELEASE;
    compact("edge", "k3s", release, "debian13-k3s")
        .replace("    schedulable: true\n", "")
        .replace(
            "  workers: []\n",
            &format!("  workers:\n    - pool: agents\n      replicas: 1\n      machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, placement: [pve2]}}\n      labels: {{workload-class: {class}}}\n      taints: [{{key: dedicated, value: memory, effect: NoSchedule}}]\n  rollout: {{minWorkers: 1}}\n"),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_k3s_agent_registers_with_its_pools_labels_and_taint_which_change_in_place() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let fleet = fleet_yaml(&["1.36"], false);
    let mut world =
        World::with_lab(k3s_lab(), &fleet, &[("edge", k3s_pool("memory"))], false).await;
    world.start_until_ready(&["edge"]).await;
    let seen = nodes(&world, "edge");
    let (agent, (labels, taints, _)) = seen
        .iter()
        .find(|(name, _)| name.contains("-agents-"))
        .expect("the agent");
    assert_eq!(labels["workload-class"], "memory", "{agent}");
    assert_eq!(labels["topology.kubernetes.io/zone"], "pve2");
    assert_eq!(taints, &["dedicated=memory:NoSchedule"]);
    let server = seen
        .iter()
        .find(|(name, _)| name.contains("-cp-"))
        .expect("server");
    assert!(
        server.1.1.is_empty(),
        "K3s servers run workloads: {:?}",
        server.1.1
    );

    let before = clones_and_destroys(&world);
    // The bootstrap may have run label-nodes already: wait for one run after the change.
    let labelled_before = world.steps_ok("label-nodes");
    world.write_cluster("edge", &k3s_pool("cpu"));
    world
        .wait_for("the label-nodes step", |_| {
            world.steps_ok("label-nodes") > labelled_before
        })
        .await;
    assert_eq!(
        clones_and_destroys(&world),
        before,
        "no VM cloned or destroyed"
    );
    assert_eq!(nodes(&world, "edge")[agent].0["workload-class"], "cpu");
}
