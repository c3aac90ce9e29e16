//! Upgrades on the lab: the control plane moves in place first (`kubeadm upgrade apply`: the
//! served `/version` and `kubeadm-config` change before any machine is replaced), Flux gets the
//! renewed kubeconfig, then every machine is replaced, the control plane first. A minor that
//! is not approved, and one that skips a minor, are refused and nothing changes.

use capstan_testkit::judge::{self, Judge};
use capstan_testkit::{Timeline, World, cluster_yaml, fleet_yaml, ready};

fn spec(cluster: &str, octet: u8, version: &str) -> String {
    cluster_yaml(cluster, octet, version, 2, "debian13-k8s")
}

/// Asserts the order of an upgrade to `to` on a recorded timeline: version in place, then the
/// kubeconfig delivery, then the control plane replaced, then the workers; every machine
/// replaced and at `to` at the end.
fn assert_upgrade_order(timeline: &Timeline, old: &[capstan_testkit::VmView], to: &str) {
    let dump = timeline.dump();
    let is_old = |name: &str| old.iter().any(|vm| vm.name == name);
    let old_cp = old
        .iter()
        .find(|vm| vm.is_control_plane())
        .expect("an old control plane");

    let served = timeline
        .first(|s| s.version.as_deref() == Some(to))
        .unwrap_or_else(|| panic!("/version moves to {to}:\n{dump}"));
    let configured = timeline
        .first(|s| s.kubeadm_config_version.as_deref() == Some(to))
        .unwrap_or_else(|| panic!("kubeadm-config moves to {to}:\n{dump}"));
    let initial_flux = timeline.0[0].flux.clone();
    assert!(initial_flux.is_some(), "Flux held a kubeconfig before");
    let delivered = timeline
        .first(|s| s.flux != initial_flux)
        .unwrap_or_else(|| panic!("the Flux Secret's content changes:\n{dump}"));
    let first_new_vm = timeline
        .first(|s| s.vms.iter().any(|vm| !is_old(&vm.name)))
        .unwrap_or_else(|| panic!("new machines are created:\n{dump}"));
    let first_disruption = timeline
        .first(|s| s.nodes.iter().any(|n| n.cordoned) || s.vms.iter().any(|v| v.is_retiring()))
        .unwrap_or_else(|| panic!("old machines leave:\n{dump}"));

    assert!(
        served.max(configured) < first_new_vm.min(first_disruption),
        "the control plane moves in place (sample {served}/{configured}) before any machine is created ({first_new_vm}) or leaves ({first_disruption}):\n{dump}"
    );
    // Then the kubeconfig goes to Flux, before any machine is created or leaves.
    assert!(
        delivered < first_new_vm.min(first_disruption),
        "the renewed kubeconfig is delivered (sample {delivered}) before any machine is created ({first_new_vm}) or leaves ({first_disruption}):\n{dump}"
    );

    // The control plane first: the first new machine and the first to leave are control
    // planes, and no new worker exists before the old control plane is on its way out.
    let first_new = &timeline.0[first_new_vm];
    assert!(
        first_new
            .vms
            .iter()
            .filter(|vm| !is_old(&vm.name))
            .all(|vm| vm.is_control_plane()),
        "the first new machine is a control plane: {:?}\n{dump}",
        first_new.vms
    );
    let leaving = &timeline.0[first_disruption];
    assert!(
        leaving
            .nodes
            .iter()
            .any(|n| n.control_plane && !is_old(&n.name) && n.is_serving() && n.kubelet == to),
        "the new control plane is Ready at {to} before the old one leaves:\n{dump}"
    );
    assert!(
        leaving
            .nodes
            .iter()
            .filter(|n| n.cordoned)
            .all(|n| n.name == old_cp.name),
        "the old control plane leaves first:\n{dump}"
    );
    let first_new_worker = timeline
        .first(|s| s.vms.iter().any(|vm| vm.is_worker() && !is_old(&vm.name)))
        .unwrap_or_else(|| panic!("new workers are created:\n{dump}"));
    let old_cp_out = timeline
        .first(|s| {
            s.vms
                .iter()
                .find(|vm| vm.name == old_cp.name)
                .is_none_or(|vm| vm.is_retiring())
        })
        .unwrap_or_else(|| panic!("the old control plane goes:\n{dump}"));
    assert!(
        old_cp_out <= first_new_worker,
        "workers are replaced only after the control plane (old one out at {old_cp_out}, first new worker at {first_new_worker}):\n{dump}"
    );
    // At most one old machine out at a time, and a control plane always there.
    for sample in &timeline.0 {
        let out = old
            .iter()
            .filter(|vm| {
                sample
                    .vms
                    .iter()
                    .any(|v| v.name == vm.name && v.is_retiring())
                    || sample.node(&vm.name).is_some_and(|n| n.cordoned)
            })
            .count();
        assert!(out <= 1, "one old machine out at a time:\n{dump}");
        assert!(
            sample
                .nodes
                .iter()
                .any(|n| n.control_plane && n.is_serving()),
            "a Ready control plane at every moment:\n{dump}"
        );
    }

    let last = timeline.last();
    assert!(
        last.vms.iter().all(|vm| !is_old(&vm.name)),
        "every machine is replaced:\n{dump}"
    );
    assert_eq!(last.nodes.len(), old.len(), "as many nodes as before");
    assert!(
        last.nodes.iter().all(|n| n.kubelet == to && n.ready),
        "every node Ready at {to}:\n{dump}"
    );
}

/// Waits until the daemon's status shows the cluster Ready at `version` with every node at it.
async fn wait_upgraded(world: &World, cluster: &str, version: &str) {
    let want: capstan::spec::KubeVersion = version.parse().expect("version");
    world
        .wait_for(&format!("{cluster} Ready at {version}"), |s| {
            ready(s, &[cluster])
                && s.clusters[cluster].version == Some(want)
                && s.clusters[cluster]
                    .nodes
                    .iter()
                    .all(|n| n.version == Some(want) && n.ready == Some(true))
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_upgrade_moves_the_control_plane_first_and_refused_minors_change_nothing() {
    const CLUSTER: &str = "patch";
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, spec(CLUSTER, 32, "1.36.2"))],
    )
    .await;
    world.start_daemon().await;
    wait_upgraded(&world, CLUSTER, "1.36.2").await;
    let old = world.vm_views(CLUSTER);

    let recorder = world.record(CLUSTER);
    world.write_cluster(CLUSTER, &spec(CLUSTER, 32, "1.36.3"));
    wait_upgraded(&world, CLUSTER, "1.36.3").await;
    let timeline = recorder.finish().await;
    assert_upgrade_order(&timeline, &old, "v1.36.3");
    assert_eq!(world.steps_ok("upgrade-control-plane"), 1);

    // An unapproved minor: `capstan validate` refuses it, and so does the daemon.
    let settled = world.vm_views(CLUSTER);
    let flux = world.flux_kubeconfig(CLUSTER);
    world.write_cluster(CLUSTER, &spec(CLUSTER, 32, "1.37.0"));
    let status = world
        .wait_for("the unapproved minor reported", |s| {
            !s.repository_errors.is_empty()
        })
        .await;
    assert!(
        status
            .repository_errors
            .iter()
            .any(|e| e.contains("minor 1.37 is not approved")),
        "{:?}",
        status.repository_errors
    );
    let recorder = world.record(CLUSTER);
    world.wait_passes(5).await;
    let timeline = recorder.finish().await;
    assert_nothing_changes(&timeline, &settled, "v1.36.3");

    // A skipped minor (1.36 → 1.38), even approved: the planner refuses it, one minor at a time.
    // The cluster file first: the other order would briefly approve the 1.37.0 still asked
    // for, a valid upgrade the daemon would start.
    world.write_cluster(CLUSTER, &spec(CLUSTER, 32, "1.38.0"));
    world.write_fleet(&fleet_yaml(&["1.36", "1.37", "1.38"], false));
    let status = world
        .wait_for("the skipped minor refused", |s| {
            s.repository_errors.is_empty()
                && s.clusters
                    .get(CLUSTER)
                    .is_some_and(|c| c.phase == capstan::status::Phase::Blocked)
        })
        .await;
    let blocked = status.clusters[CLUSTER]
        .conditions
        .iter()
        .find(|c| c.kind == capstan::status::conditions::BLOCKED)
        .expect("a Blocked condition");
    assert_eq!(blocked.status, "True");
    assert!(
        blocked
            .message
            .contains("1.36.3 → 1.38.0 refused (rule 7): one minor at a time: move to 1.37 first"),
        "{}",
        blocked.message
    );
    let recorder = world.record(CLUSTER);
    world.wait_passes(5).await;
    let timeline = recorder.finish().await;
    assert_nothing_changes(&timeline, &settled, "v1.36.3");
    assert_eq!(world.flux_kubeconfig(CLUSTER), flux, "nothing re-delivered");
    assert_eq!(world.steps_ok("upgrade-control-plane"), 1);
    world.kill_daemon().await;
}

fn assert_nothing_changes(timeline: &Timeline, vms: &[capstan_testkit::VmView], version: &str) {
    for sample in &timeline.0 {
        assert_eq!(sample.vms, vms, "no VM changes:\n{}", timeline.dump());
        assert_eq!(
            sample.version.as_deref(),
            Some(version),
            "/version stays:\n{}",
            timeline.dump()
        );
        assert_eq!(
            sample.kubeadm_config_version.as_deref(),
            Some(version),
            "kubeadm-config stays:\n{}",
            timeline.dump()
        );
        assert!(
            sample
                .nodes
                .iter()
                .all(|n| n.is_serving() && n.kubelet == version),
            "every Node stays Ready, schedulable, at {version}:\n{}",
            timeline.dump()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_minor_upgrade_moves_the_control_plane_first_then_replaces_every_node() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    const CLUSTER: &str = "minor";
    let mut world = World::new(
        &fleet_yaml(&["1.36", "1.37"], false),
        &[(CLUSTER, spec(CLUSTER, 33, "1.36.4"))],
    )
    .await;
    world.start_daemon().await;
    wait_upgraded(&world, CLUSTER, "1.36.4").await;
    let old = world.vm_views(CLUSTER);

    let recorder = world.record(CLUSTER);
    world.write_cluster(CLUSTER, &spec(CLUSTER, 33, "1.37.0"));
    wait_upgraded(&world, CLUSTER, "1.37.0").await;
    let timeline = recorder.finish().await;
    assert_upgrade_order(&timeline, &old, "v1.37.0");
    assert_eq!(world.steps_ok("upgrade-control-plane"), 1);

    // The delivered kubeconfig works, and the cluster says 1.37.
    let delivered = world.flux_kubeconfig(CLUSTER).expect("delivered");
    let file = world.state.path().join("minor-from-flux.kubeconfig");
    std::fs::write(&file, delivered).expect("write");
    let version = capstan_testkit::kubectl_with(&file, &["version", "-o", "json"]);
    let version: serde_json::Value = serde_json::from_str(&version).expect("json");
    assert_eq!(version["serverVersion"]["gitVersion"], "v1.37.0");
    world.kill_daemon().await;
}
