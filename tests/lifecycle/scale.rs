//! Scaling a worker pool on the lab: up by one touches nothing else; down by two removes one
//! worker at a time and never goes below `rollout.minWorkers`; a spec below `minWorkers` is
//! refused as `capstan validate` refuses it, and nothing is drained.

use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};

const CLUSTER: &str = "scale";

fn spec(workers: u32) -> String {
    cluster_yaml(CLUSTER, 30, "1.36.2", workers, "debian13-k8s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_scales_up_then_down_one_at_a_time_and_never_below_min_workers() {
    let mut world = World::new(&fleet_yaml(&["1.36"], false), &[(CLUSTER, spec(3))]).await;
    world.start_daemon().await;
    world
        .wait_for("the cluster Ready with 3 workers", |s| ready(s, &[CLUSTER]))
        .await;
    let before = world.vm_views(CLUSTER);
    assert_eq!(before.iter().filter(|vm| vm.is_worker()).count(), 3);

    // Up by one: a new worker joins; nothing else is touched.
    let recorder = world.record(CLUSTER);
    world.write_cluster(CLUSTER, &spec(4));
    world
        .wait_for("a fourth worker Ready", |s| {
            ready(s, &[CLUSTER])
                && s.clusters[CLUSTER]
                    .nodes
                    .iter()
                    .filter(|n| n.role == capstan::model::Role::Worker && n.ready == Some(true))
                    .count()
                    == 4
        })
        .await;
    let timeline = recorder.finish().await;
    for sample in &timeline.0 {
        assert!(
            sample.nodes.iter().all(|n| !n.cordoned),
            "scaling up cordons nothing:\n{}",
            timeline.dump()
        );
        for vm in &before {
            assert!(
                sample.vms.iter().any(|v| v.vmid == vm.vmid && v.running),
                "scaling up keeps {} running:\n{}",
                vm.name,
                timeline.dump()
            );
        }
    }
    let after_up = world.vm_views(CLUSTER);
    assert_eq!(after_up.len(), before.len() + 1, "exactly one VM more");

    // Down by two: one worker at a time, never fewer than minWorkers (2) serving.
    let recorder = world.record(CLUSTER);
    world.write_cluster(CLUSTER, &spec(2));
    world
        .wait_for("two workers left", |s| {
            ready(s, &[CLUSTER])
                && s.clusters[CLUSTER]
                    .nodes
                    .iter()
                    .filter(|n| n.role == capstan::model::Role::Worker)
                    .count()
                    == 2
        })
        .await;
    let timeline = recorder.finish().await;
    let mut worker_vms_seen = Vec::new();
    for sample in &timeline.0 {
        // A worker is being removed from its cordon until its VM is gone.
        let leaving: Vec<&str> = sample
            .vms
            .iter()
            .filter(|vm| vm.is_worker())
            .filter(|vm| vm.is_retiring() || sample.node(&vm.name).is_none_or(|n| n.cordoned))
            .map(|vm| vm.name.as_str())
            .collect();
        assert!(
            leaving.len() <= 1,
            "at most one worker leaves at a time, saw {leaving:?} at\n{}\n\ntimeline:\n{}",
            sample.summary(),
            timeline.dump()
        );
        assert!(
            sample.serving_workers() >= 2,
            "never below minWorkers 2 Ready, schedulable workers:\n{}",
            timeline.dump()
        );
        let count = sample.vms.iter().filter(|vm| vm.is_worker()).count();
        if worker_vms_seen.last() != Some(&count) {
            worker_vms_seen.push(count);
        }
    }
    assert_eq!(
        worker_vms_seen,
        [4, 3, 2],
        "worker VMs go 4 → 3 → 2, none created:\n{}",
        timeline.dump()
    );
    let remaining = world.vm_views(CLUSTER);
    assert!(
        remaining
            .iter()
            .all(|vm| after_up.iter().any(|v| v.vmid == vm.vmid)),
        "the remaining VMs are ones that were there"
    );

    // Below minWorkers: refused as `capstan validate` refuses it, and nothing is drained.
    world.write_cluster(CLUSTER, &spec(1));
    let validate = std::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .arg("validate")
        .arg(world.repo.path())
        .output()
        .expect("capstan validate runs");
    let report = String::from_utf8_lossy(&validate.stdout);
    assert!(!validate.status.success(), "validate fails: {report}");
    assert!(
        report.contains("1 workers in all, below rollout.minWorkers 2"),
        "validate names the rule: {report}"
    );
    let status = world
        .wait_for("the daemon reports the repository error", |s| {
            !s.repository_errors.is_empty() && !s.findings.is_empty()
        })
        .await;
    assert!(
        status
            .repository_errors
            .iter()
            .any(|e| e.contains("1 workers in all, below rollout.minWorkers 2")),
        "the daemon reports validate's error: {:?}",
        status.repository_errors
    );
    // The cluster keeps its place in the status, Blocked on its file; it is not mistaken for
    // a removed cluster.
    let entry = status
        .clusters
        .get(CLUSTER)
        .expect("the cluster keeps its status entry");
    assert_eq!(entry.phase, capstan::status::Phase::Blocked);
    let blocked = entry
        .conditions
        .iter()
        .find(|c| c.kind == capstan::status::conditions::BLOCKED)
        .expect("Blocked condition");
    assert_eq!(blocked.reason, capstan::status::reasons::INVALID_FILE);
    assert!(
        blocked
            .message
            .contains("1 workers in all, below rollout.minWorkers 2"),
        "{}",
        blocked.message
    );
    assert_eq!(entry.nodes.len(), 3, "its machines are still reported");
    assert_eq!(
        status.findings,
        [
            "cluster scale: clusters/scale.yaml has errors; its 3 VM(s) are left as they are until the file is fixed"
        ]
    );
    let recorder = world.record(CLUSTER);
    world.wait_passes(5).await;
    let timeline = recorder.finish().await;
    for sample in &timeline.0 {
        assert_eq!(sample.vms, remaining, "no VM goes:\n{}", timeline.dump());
        assert!(
            sample.nodes.iter().all(|n| n.is_serving()),
            "every Node stays Ready and schedulable:\n{}",
            timeline.dump()
        );
    }
    assert_eq!(
        world.steps_ok("cordon"),
        2,
        "only the two removals cordoned"
    );
    world.kill_daemon().await;
}
