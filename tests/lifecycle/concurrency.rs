//! Steps of one cluster run side by side: a machine that is slow to prepare holds back only
//! itself. The control plane initialises and the other workers join and become Ready while
//! it is still running its prepare script.

use capstan::observed::PREPARED_TAG;
use capstan_testkit::{World, cluster_yaml, fleet_yaml};

const CLUSTER: &str = "prod";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_slow_to_prepare_holds_back_only_itself() {
    // One control plane, two workers in `general` and one in `slow`.
    let spec = cluster_yaml(CLUSTER, 41, "1.36.2", 2, "debian13-k8s").replace(
        "  rollout:",
        "    - pool: slow\n      replicas: 1\n      machine: {template: debian13-k8s, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}\n  rollout:",
    );
    let mut world = World::new(&fleet_yaml(&["1.36"], false), &[(CLUSTER, spec)]).await;
    // Its prepare script takes 6 s where the others' take 0.2 s.
    world
        .lab
        .nodes()
        .expect("the lab runs its node software")
        .slow_down("capstan-prod-slow-*", 30);
    let recorder = world.record(CLUSTER);
    world.start_until_ready(&[CLUSTER]).await;
    let timeline = recorder.finish().await;
    world.kill_daemon().await;

    let slow_prepared = |sample: &capstan_testkit::Sample| {
        sample
            .vms
            .iter()
            .any(|vm| vm.pool() == "slow" && vm.tags.iter().any(|t| t == PREPARED_TAG))
    };
    let others_ready = |sample: &capstan_testkit::Sample| {
        sample.nodes.len() == 3
            && sample.nodes.iter().all(|n| n.ready)
            && sample.nodes.iter().all(|n| !n.name.contains("-slow-"))
    };
    let others = timeline.first(others_ready).unwrap_or_else(|| {
        panic!(
            "the others Ready without the slow one:\n{}",
            timeline.dump()
        )
    });
    let prepared = timeline
        .first(slow_prepared)
        .unwrap_or_else(|| panic!("the slow one prepared:\n{}", timeline.dump()));
    assert!(
        others < prepared,
        "the control plane and the general workers are Ready before the slow machine is prepared:\n{}",
        timeline.dump()
    );
}
