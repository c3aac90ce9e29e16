//! A cluster whose file is removed: with `prune` off it is reported and kept as it is; with
//! `prune` on its VMs are destroyed and its Flux Secret withdrawn, and the other clusters are
//! left alone. A Secret left by an interrupted deletion (its VMs already gone) is withdrawn
//! too. A deleted cluster's pinned CA goes with it: a new cluster of that name has its own.

use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};

const GONE: &str = "gone";
const STAYS: &str = "stays";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_cluster_is_deleted_only_with_prune_on() {
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[
            (GONE, cluster_yaml(GONE, 36, "1.36.2", 2, "debian13-k8s")),
            (STAYS, cluster_yaml(STAYS, 37, "1.36.2", 2, "debian13-k8s")),
        ],
    )
    .await;
    world.start_daemon().await;
    world
        .wait_for("both clusters Ready", |s| ready(s, &[GONE, STAYS]))
        .await;
    let gone_vms = world.vm_views(GONE);
    let stays_vms = world.vm_views(STAYS);
    assert_eq!(gone_vms.len(), 3);
    assert!(world.flux_kubeconfig(GONE).is_some());
    let stays_kubeconfig = world.flux_kubeconfig(STAYS).expect("delivered");
    assert!(ca_pinned(&world, GONE) && ca_pinned(&world, STAYS));

    // What a deletion interrupted after its last VM leaves: only the Flux Secret of a cluster
    // whose file is gone (in a namespace and under a name only that file knew).
    let management = world.lab.kube().management().expect("management");
    management
        .create_object(
            "namespaces",
            None,
            serde_json::json!({"metadata": {"name": "tenants"}}),
        )
        .expect("namespace");
    management
        .create_object(
            "secrets",
            Some("tenants"),
            serde_json::json!({
                "metadata": {
                    "name": "ghost-admin",
                    "labels": {"app.kubernetes.io/managed-by": "capstan"},
                    "annotations": {"capstan.dev/cluster": "ghost"},
                },
                "data": {"value": "eA=="},
            }),
        )
        .expect("a leftover Secret");

    // Prune off: reported, kept.
    world.remove_cluster(GONE);
    let status = world
        .wait_for("the removed cluster reported", |s| {
            s.findings.iter().any(|f| f.contains(GONE))
        })
        .await;
    assert_eq!(
        status.findings,
        [
            "cluster ghost has no file any more; its 0 VM(s) and its kubeconfig are kept because prune is off",
            "cluster gone has no file any more; its 3 VM(s) and its kubeconfig are kept because prune is off",
        ]
    );
    let recorder = world.record(GONE);
    world.wait_passes(5).await;
    let timeline = recorder.finish().await;
    assert!(
        management
            .object("secrets", Some("tenants"), "ghost-admin")
            .is_some(),
        "the leftover Secret is kept while prune is off"
    );
    for sample in &timeline.0 {
        assert_eq!(sample.vms, gone_vms, "its VMs stay:\n{}", timeline.dump());
        assert!(sample.flux.is_some(), "its kubeconfig stays with Flux");
        assert!(
            sample.nodes.iter().all(|n| n.is_serving()),
            "nothing is drained:\n{}",
            timeline.dump()
        );
    }
    assert_eq!(world.steps_ok("delete-cluster"), 0);

    // Prune on: deleted; the other cluster untouched.
    world.write_fleet(&fleet_yaml(&["1.36"], true));
    let status = world
        .wait_for("the removed cluster deleted", |s| {
            s.findings.is_empty() && !s.clusters.contains_key(GONE) && ready(s, &[STAYS])
        })
        .await;
    assert_eq!(world.steps_ok("delete-cluster"), 2, "{GONE} and ghost");
    assert!(
        management
            .object("secrets", Some("tenants"), "ghost-admin")
            .is_none(),
        "the leftover Secret is withdrawn"
    );
    assert!(
        world.vm_views(GONE).is_empty(),
        "every VM of {GONE} destroyed"
    );
    for vm in &gone_vms {
        assert!(
            world.lab.proxmox().vm(vm.vmid).is_none(),
            "VM {} is gone from Proxmox",
            vm.vmid
        );
    }
    assert_eq!(
        world.flux_kubeconfig(GONE),
        None,
        "its Flux Secret withdrawn"
    );
    assert_eq!(world.vm_views(STAYS), stays_vms, "{STAYS} keeps its VMs");
    assert_eq!(
        world.flux_kubeconfig(STAYS),
        Some(stays_kubeconfig),
        "{STAYS} keeps its kubeconfig"
    );
    assert_eq!(status.clusters.keys().collect::<Vec<_>>(), [STAYS]);
    assert!(!ca_pinned(&world, GONE), "{GONE}'s pinned CA forgotten");
    assert!(ca_pinned(&world, STAYS), "{STAYS} keeps its pinned CA");
    world.kill_daemon().await;
}

/// Whether the management cluster holds `cluster`'s pinned CA.
fn ca_pinned(world: &World, cluster: &str) -> bool {
    world
        .lab
        .kube()
        .management()
        .expect("management")
        .object(
            "secrets",
            Some("capstan-system"),
            &capstan::records::ca_pins::record_name(cluster),
        )
        .is_some()
}
