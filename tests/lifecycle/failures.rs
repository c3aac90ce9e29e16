//! A step that keeps failing blocks its cluster with the error and what to look at, is retried
//! with backoff, and does not stop the other clusters.

use crate::lifecycle_support::{World, cluster_yaml, fleet_yaml, ready};
use capstan::status::Phase;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_steps_keep_failing_is_blocked_and_the_others_carry_on() {
    let broken = cluster_yaml("edge", 31, "1.36.2", 2, "debian13-k8s").replace(
        "machine: {template: debian13-k8s, cores: 2, memoryMiB: 4096, placement: [pve1]}",
        "machine: {template: no-such-template, cores: 2, memoryMiB: 4096, placement: [pve1]}",
    );
    assert!(broken.contains("no-such-template"));
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[
            (
                "prod",
                cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s"),
            ),
            ("edge", broken),
        ],
    )
    .await;
    world.start_daemon().await;
    let status = world
        .wait_for("prod Ready and edge Blocked", |s| {
            ready(s, &["prod"])
                && s.clusters
                    .get("edge")
                    .is_some_and(|c| c.phase == Phase::Blocked)
        })
        .await;
    let edge = &status.clusters["edge"];
    let last = edge
        .last_step
        .as_ref()
        .expect("the failing step is reported");
    assert_eq!(last.action, "create-machine");
    assert!(!last.succeeded && last.failures >= 5, "{last:?}");
    assert!(
        last.message.contains("no-such-template"),
        "the error names what to fix: {}",
        last.message
    );
    let blocked = edge
        .conditions
        .iter()
        .find(|c| c.kind == "Blocked")
        .expect("Blocked condition");
    assert_eq!(
        (blocked.status.as_str(), blocked.reason.as_str()),
        ("True", "StepFailing")
    );
    assert!(
        blocked.message.contains("create-machine keeps failing"),
        "{}",
        blocked.message
    );
    assert!(
        world.vms_of("edge").is_empty(),
        "nothing half-made is left for the failing cluster"
    );

    // Fixing the file unblocks it.
    world.write_cluster(
        "edge",
        &cluster_yaml("edge", 31, "1.36.2", 2, "debian13-k8s"),
    );
    world
        .wait_for("edge Ready once fixed", |s| ready(s, &["prod", "edge"]))
        .await;
    world.kill_daemon().await;
}
