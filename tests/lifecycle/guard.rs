//! The replacement guard on the lab: with `replace: forbid` on the worker pool, a template
//! change is refused by `capstan preview` (exit 1, naming the field), the daemon clones and
//! cordons nothing for it and says why in the status, and a worker whose VM dies is still
//! replaced.

use capstan::clock::Clock as _;
use capstan::status::{FleetStatus, conditions};

use capstan_testkit::{World, cluster_yaml, fleet_yaml};

const CLUSTER: &str = "guard";

const CLONE: &str = "POST /nodes/{node}/qemu/{vmid}/clone";

/// Two workers on `template`, fencing after 5 s, the pool forbidding replacement or not.
fn spec(template: &str, forbid: bool) -> String {
    let text = cluster_yaml(CLUSTER, 38, "1.36.2", 2, template)
        + "  remediation: {fence: true, after: 5s}\n";
    if forbid {
        text.replace(
            "    - pool: general\n",
            "    - pool: general\n      replace: forbid\n",
        )
    } else {
        text
    }
}

/// The `Blocked` condition of the cluster: (reason, message).
fn blocked(status: &FleetStatus) -> Option<(String, String)> {
    let cluster = status.clusters.get(CLUSTER)?;
    cluster
        .conditions
        .iter()
        .find(|c| c.kind == conditions::BLOCKED && c.status == conditions::TRUE)
        .map(|c| (c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_forbid_refuses_a_template_change_yet_a_dead_worker_is_still_replaced() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, spec("debian13-k8s", false))],
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    let address = capstan::daemon::http::serve("127.0.0.1:0".parse().expect("addr"), world.board())
        .await
        .expect("serve");
    let server = format!("http://{address}");

    // The preview of the change against the live lab: refused, naming the field.
    let repo = capstan_testkit::git::preview_repo(
        world.repo.path(),
        CLUSTER,
        &spec("debian13-k8s", false),
        "template",
        &spec("debian13-k8s-v2", true),
    );
    let now = world.lab.clock().now().to_string();
    let run = capstan_testkit::cli::preview(repo.path(), "template", &server, &now, "text").await;
    run.assert_code(1)
        .assert_reports("rule 16: replacement guard")
        .assert_reports("workers.general.replace: forbid refuses replacing 2 live machine(s)")
        .assert_reports("workers.general.machine.template debian13-k8s → debian13-k8s-v2");

    // Merged anyway: the daemon clones nothing, cordons nothing, and says why.
    let workers: Vec<(String, u32)> = world
        .vm_views(CLUSTER)
        .into_iter()
        .filter(|vm| vm.is_worker())
        .map(|vm| (vm.name, vm.vmid))
        .collect();
    assert_eq!(workers.len(), 2);
    let clones = world.lab.proxmox().calls_of(CLONE);
    let (creates, cordons) = (world.steps_ok("create-machine"), world.steps_ok("cordon"));
    let recorder = world.record(CLUSTER);
    world.write_cluster(CLUSTER, &spec("debian13-k8s-v2", true));
    let status = world
        .wait_for("the change refused", |s| {
            blocked(s).is_some_and(|(reason, _)| reason == "ReplacementForbidden")
        })
        .await;
    let (_, message) = blocked(&status).expect("blocked");
    assert!(
        message.contains("rule 16 (replacement guard): workers.general.replace: forbid refuses replacing 2 live machine(s) of workers.general, caused by workers.general.machine.template debian13-k8s → debian13-k8s-v2"),
        "{message}"
    );
    world.wait_passes(3).await;
    assert_eq!(world.lab.proxmox().calls_of(CLONE), clones, "no clone");
    assert_eq!(world.steps_ok("create-machine"), creates);
    assert_eq!(world.steps_ok("cordon"), cordons, "no cordon");
    assert!(
        world.nodes_of(CLUSTER).iter().all(|n| !n.cordoned),
        "{:?}",
        world.nodes_of(CLUSTER)
    );
    let now_workers: Vec<String> = world
        .vm_views(CLUSTER)
        .into_iter()
        .filter(|vm| vm.is_worker())
        .map(|vm| vm.name)
        .collect();
    assert_eq!(
        now_workers,
        workers.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>()
    );

    // A worker's VM dies: it is replaced (from the new template; dead and outdated, its
    // replacement does not wait for fencing); the other one stays, never cordoned.
    let (dead, dead_vmid) = workers[0].clone();
    let (kept, _) = workers[1].clone();
    world.lab.faults().crash_vm(dead_vmid).expect("crash");
    world
        .wait_for("the dead worker replaced", |_| {
            let vms = world.vm_views(CLUSTER);
            let nodes = world.nodes_of(CLUSTER);
            let names: Vec<&str> = vms
                .iter()
                .filter(|vm| vm.is_worker())
                .map(|vm| vm.name.as_str())
                .collect();
            names.len() == 2
                && !names.contains(&dead.as_str())
                && names.contains(&kept.as_str())
                && nodes.iter().filter(|n| !n.control_plane).count() == 2
                && nodes.iter().all(|n| n.ready)
        })
        .await;
    assert_eq!(
        world.lab.proxmox().calls_of(CLONE),
        clones + 1,
        "one clone: the dead worker's replacement"
    );
    // Only the dead node may have been cordoned, on its way out; the kept one never was.
    let timeline = recorder.finish().await;
    for sample in &timeline.0 {
        assert!(
            sample
                .nodes
                .iter()
                .all(|node| !node.cordoned || node.name == dead),
            "a live node was cordoned: {}",
            timeline.dump()
        );
    }
    let status = world
        .wait_for("the kept worker still refused", |s| {
            blocked(s).is_some_and(|(_, message)| message.contains("replacing 1 live machine(s)"))
        })
        .await;
    assert_eq!(
        blocked(&status).map(|(reason, _)| reason),
        Some("ReplacementForbidden".to_owned())
    );
}
