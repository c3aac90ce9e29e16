//! `rollout.maxSurge`: while a pool is replaced, the cluster never holds more than that many
//! VMs above its declared count, at any sampled moment; with a surge of 2 replacements overlap.

use capstan::model::Role;
use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};

const CLUSTER: &str = "surge";
/// One control plane and three workers.
const DECLARED: usize = 4;

fn spec(template: &str, surge: u32) -> String {
    cluster_yaml(CLUSTER, 33, "1.36.2", 3, template).replace(
        "rollout: {minWorkers: 2,",
        &format!("rollout: {{maxSurge: {surge}, minWorkers: 2,"),
    )
}

/// Replaces the three workers with `surge` and returns the most VMs seen at once.
async fn most_vms_during_a_template_change(surge: u32) -> usize {
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, spec("debian13-k8s", surge))],
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    let old: Vec<String> = world
        .vm_views(CLUSTER)
        .into_iter()
        .filter(|vm| vm.is_worker())
        .map(|vm| vm.name)
        .collect();
    assert_eq!(old.len(), 3);

    let recorder = world.record(CLUSTER);
    world.write_cluster(CLUSTER, &spec("debian13-k8s-v2", surge));
    world
        .wait_for("every worker replaced", |s| {
            ready(s, &[CLUSTER])
                && s.clusters[CLUSTER]
                    .nodes
                    .iter()
                    .filter(|n| n.role == Role::Worker)
                    .all(|n| !old.iter().any(|o| o == n.name.as_str()))
        })
        .await;
    let timeline = recorder.finish().await;
    world.kill_daemon().await;
    let limit = DECLARED + surge as usize;
    for sample in &timeline.0 {
        assert!(
            sample.vms.len() <= limit,
            "maxSurge {surge}: at most {limit} VMs, saw {}:\n{}\n\ntimeline:\n{}",
            sample.vms.len(),
            sample.summary(),
            timeline.dump()
        );
    }
    timeline.0.iter().map(|s| s.vms.len()).max().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_surge_of_one_never_holds_more_than_one_extra_vm() {
    let most = most_vms_during_a_template_change(1).await;
    assert_eq!(
        most,
        DECLARED + 1,
        "the replacement itself is the one extra VM"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_surge_of_two_overlaps_replacements_within_two_extra_vms() {
    let most = most_vms_during_a_template_change(2).await;
    assert_eq!(most, DECLARED + 2, "two replacements are built at once");
}
