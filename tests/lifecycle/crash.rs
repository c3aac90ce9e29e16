//! Crash safety: the daemon is killed at random points (as with `kill -9`: steps in flight are
//! dropped mid-way) during a bootstrap and then during a rolling template change, 24 times in
//! all, and restarted each time from nothing but the facts. It must converge with no orphan
//! VM, no duplicate VM or Node, nothing left half-done.

use std::collections::BTreeSet;
use std::time::Duration;

use capstan::backoff::random_unit;
use capstan::model::Role;
use capstan::observed::{MachineSpec, RETIRING_TAG};
use capstan::spec::{Distribution, KubeVersion, Machine};
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};

const KILLS_PER_PHASE: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_daemon_at_random_points_leaves_no_orphan_and_no_duplicate() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(
            "prod",
            cluster_yaml("prod", 30, "1.36.2", 3, "debian13-k8s"),
        )],
    )
    .await;
    let mut kills = Vec::new();

    // Phase 1: the bootstrap, interrupted again and again.
    kill_repeatedly(&mut world, &mut kills).await;
    world.start_daemon().await;
    world
        .wait_for("prod Ready after the interrupted bootstrap", |s| {
            ready(s, &["prod"])
        })
        .await;
    assert_converged(&world, "debian13-k8s", &kills);

    // Phase 2: a rolling replacement of every worker, interrupted again and again.
    world.kill_daemon().await;
    world.write_cluster(
        "prod",
        &cluster_yaml("prod", 30, "1.36.2", 3, "debian13-k8s-v2"),
    );
    kill_repeatedly(&mut world, &mut kills).await;
    world.start_daemon().await;
    world
        .wait_for_within(
            "prod Ready on the new template after the interrupted rollout",
            Duration::from_secs(120),
            |s| ready(s, &["prod"]),
        )
        .await;
    assert_converged(&world, "debian13-k8s-v2", &kills);
    world.kill_daemon().await;
}

/// Starts the daemon and kills it after a random 50..900 ms, [`KILLS_PER_PHASE`] times.
async fn kill_repeatedly(world: &mut World, kills: &mut Vec<u64>) {
    for _ in 0..KILLS_PER_PHASE {
        world.start_daemon().await;
        let after = 50 + (random_unit() * 850.0) as u64;
        tokio::time::sleep(Duration::from_millis(after)).await;
        world.kill_daemon().await;
        kills.push(after);
    }
}

fn worker_hash(template: &str) -> String {
    let machine = Machine {
        template: template.to_owned(),
        cores: 2,
        memory_mib: 4096,
        disk_gib: 50,
        placement: vec!["pve1".into(), "pve2".into(), "pve3".into()],
        cpu: "x86-64-v2-AES".to_owned(),
        storage: None,
        sockets: None,
        disks: Vec::new(),
        networks: Vec::new(),
        pci: Vec::new(),
        tags: Vec::new(),
        pool: None,
    };
    let version = KubeVersion {
        major: 1,
        minor: 36,
        patch: 2,
        k3s_release: None,
    };
    MachineSpec::new(&machine, version, Distribution::Kubeadm, Role::Worker)
        .spec_hash()
        .to_string()
}

fn assert_converged(world: &World, worker_template: &str, kills: &[u64]) {
    let context = format!("after kills at {kills:?} ms");
    let vms = world.vms_of("prod");
    let names: BTreeSet<&str> = vms.iter().map(|vm| vm.name.as_str()).collect();
    assert_eq!(
        names.len(),
        vms.len(),
        "no two VMs share a name {context}: {vms:#?}"
    );
    assert_eq!(
        vms.len(),
        4,
        "one control plane and three workers, no orphan {context}: {names:?}"
    );
    assert!(vms.iter().all(|vm| vm.running), "every VM runs {context}");
    for vm in &vms {
        let tags = vm.config.get("tags").cloned().unwrap_or_default();
        assert!(
            !tags.contains(RETIRING_TAG),
            "{} is not left retiring {context}",
            vm.name
        );
        if vm.name.contains("-general-") {
            assert!(
                tags.contains(&worker_hash(worker_template)),
                "{} is built from {worker_template} {context}: {tags}",
                vm.name
            );
        }
    }
    let listed: serde_json::Value =
        serde_json::from_str(&world.kubectl("prod", &["get", "nodes", "-o", "json"]))
            .expect("json");
    let nodes: BTreeSet<String> = listed["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| {
            n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    let vm_names: BTreeSet<String> = names.iter().map(|n| (*n).to_owned()).collect();
    assert_eq!(
        nodes, vm_names,
        "one Node per VM and one VM per Node {context}"
    );
    for node in listed["items"].as_array().expect("items") {
        assert_ne!(
            node["spec"]["unschedulable"], true,
            "{} is not left cordoned {context}",
            node["metadata"]["name"]
        );
    }
    let status = world.status();
    let delivered = status.clusters["prod"]
        .conditions
        .iter()
        .find(|c| c.kind == "KubeconfigDelivered")
        .expect("condition");
    assert_eq!(
        delivered.status, "True",
        "Flux holds the current kubeconfig {context}"
    );
}
