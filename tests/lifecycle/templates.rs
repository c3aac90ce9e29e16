//! A template that exists on one Proxmox node only, on local storage: the plan places every
//! clone on that node, or refuses (rule 15) before any clone when no node of a pool's
//! placement can receive one; Proxmox never answers "can't clone VM to node ... (VM uses
//! local storage)".

use capstan::plan::{Action, Rule};
use capstan_lab::proxmox::Exchange;
use capstan_lab::world::{LabConfig, WorldTemplate};

use capstan_testkit::{World, cluster_yaml, fleet_yaml};

const CLUSTER: &str = "solo";

/// The default lab with one template only: `debian13-k8s` on pve1, on `local-lvm` (local).
fn lab_with_one_local_template() -> LabConfig {
    let mut config = LabConfig::default();
    config.proxmox.templates = Some(vec![WorldTemplate {
        storage: Some("local-lvm".into()),
        ..WorldTemplate::new("debian13-k8s", 9000, "pve1")
    }]);
    config
}

/// Clone requests Proxmox refused, and clone tasks that ended other than `OK`; a VMID taken
/// by a concurrent clone ("config file already exists") is a race the client retries, not a
/// failed clone.
fn failed_clones(exchanges: &[Exchange]) -> Vec<String> {
    let refused = exchanges
        .iter()
        .filter(|e| e.method == "POST" && e.template.ends_with("/clone") && e.status != 200)
        .filter(|e| !e.body.to_string().contains("already exists"))
        .map(|e| format!("clone answered {}: {}", e.status, e.body));
    let failed_tasks = exchanges
        .iter()
        .filter(|e| e.template.ends_with("/status") && e.template.contains("/tasks/"))
        .filter(|e| e.body["data"]["type"] == "qmclone")
        .filter(|e| {
            e.body["data"]["exitstatus"]
                .as_str()
                .is_some_and(|status| status != "OK")
        })
        .map(|e| format!("clone task ended {}", e.body["data"]["exitstatus"]));
    refused.chain(failed_tasks).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_go_to_the_only_node_holding_a_local_template() {
    let spec = cluster_yaml(CLUSTER, 40, "1.36.2", 2, "debian13-k8s");
    let mut world = World::with_lab(
        lab_with_one_local_template(),
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, spec)],
        true,
    )
    .await;
    let plan = world.observe_and_plan().await;
    let cluster = plan.cluster(CLUSTER).expect("planned");
    assert!(cluster.blocked.is_empty(), "{:?}", cluster.blocked);
    // The predicted sequence repeats the steps of now: one entry per machine name.
    let clones: std::collections::BTreeMap<String, &str> = cluster
        .steps
        .iter()
        .chain(&cluster.predicted)
        .filter_map(|step| match &step.action {
            Action::CreateMachine {
                name, proxmox_node, ..
            } => Some((name.to_string(), proxmox_node.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(clones.len(), 3, "a control plane and 2 workers: {clones:?}");
    assert!(clones.values().all(|node| *node == "pve1"), "{clones:?}");

    world.start_until_ready(&[CLUSTER]).await;
    let vms = world.vms_of(CLUSTER);
    assert_eq!(vms.len(), 3);
    assert!(vms.iter().all(|vm| vm.node == "pve1"), "{vms:?}");
    let failures = failed_clones(&world.lab.proxmox().exchanges());
    assert!(failures.is_empty(), "{failures:?}");
    world.kill_daemon().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_no_node_of_which_holds_the_local_template_is_refused_before_any_clone() {
    let spec = cluster_yaml(CLUSTER, 41, "1.36.2", 2, "debian13-k8s")
        .replace("placement: [pve1, pve2, pve3]", "placement: [pve2, pve3]");
    let mut world = World::with_lab(
        lab_with_one_local_template(),
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, spec)],
        true,
    )
    .await;
    let plan = world.observe_and_plan().await;
    let cluster = plan.cluster(CLUSTER).expect("planned");
    let refusal = cluster
        .blocked
        .iter()
        .find(|b| b.rule == Rule::Capacity)
        .unwrap_or_else(|| panic!("refused: {:?}", cluster.blocked));
    for part in [
        "pool general",
        "template debian13-k8s is on pve1 (VM 9000, local storage)",
        "cannot be cloned to placement pve2, pve3",
        "add pve1 to placement",
    ] {
        assert!(
            refusal.message.contains(part),
            "{part}: {}",
            refusal.message
        );
    }
    assert!(
        !cluster
            .steps
            .iter()
            .any(|s| matches!(s.action, Action::CreateMachine { .. })),
        "nothing is cloned, not even the control plane: {:?}",
        cluster.steps
    );

    world.start_daemon().await;
    let status = world
        .wait_for("the refusal in the status", |s| {
            s.clusters.get(CLUSTER).is_some_and(|c| {
                c.refusals
                    .iter()
                    .any(|r| r.message.contains("debian13-k8s"))
            })
        })
        .await;
    assert_eq!(
        status.clusters[CLUSTER].phase,
        capstan::status::Phase::Blocked
    );
    world.wait_passes(2).await;
    let exchanges = world.lab.proxmox().exchanges();
    assert!(
        !exchanges
            .iter()
            .any(|e| e.method == "POST" && e.template.ends_with("/clone")),
        "no clone was attempted"
    );
    assert!(world.vms_of(CLUSTER).is_empty());
    world.kill_daemon().await;
}
