//! `spec.suspend: true` pushed in the middle of a rolling replacement: the step running when
//! it lands finishes, then nothing more starts on that cluster for ten passes (its VMs, its
//! Proxmox tasks and its Nodes stay as they are) while another cluster of the fleet goes on
//! converging; the status says Suspended meanwhile, and reverting the commit lets the
//! replacement go on to the end.

use std::time::Duration;

use capstan::model::Role;
use capstan::plan::ActionKind;
use capstan::status::FleetStatus;
use capstan_lab::values::LabDuration;
use capstan_lab::world::LabConfig;
use capstan_testkit::world::ready_with;
use capstan_testkit::{ClusterYaml, World, fleet_yaml, ready, wait};

const HELD: &str = "prod";
const OTHER: &str = "other";

fn prod(template: &str, suspend: bool) -> String {
    let text = ClusterYaml::lab(HELD)
        .address(30)
        .workers(3)
        .template(template)
        .render();
    if suspend {
        text.replacen("spec:\n", "spec:\n  suspend: true\n", 1)
    } else {
        text
    }
}

fn other(workers: u32) -> String {
    ClusterYaml::lab(OTHER)
        .address(31)
        .workers(workers)
        .render()
}

/// The default lab with clones that take 1.5 s, so the suspension is sure to land while a
/// clone (the first step of each replacement) is running.
fn slow_clones() -> LabConfig {
    let mut config = LabConfig::default();
    config.proxmox.timings.clone = LabDuration(Duration::from_millis(1500));
    config
}

/// What the Proxmox side holds of the suspended cluster: its VMs (name, running) and the
/// tasks run on them (UPID, exit status).
#[derive(Debug, PartialEq, Eq)]
struct ProxmoxView {
    vms: Vec<(String, bool)>,
    tasks: Vec<(String, Option<String>)>,
}

fn proxmox_view(world: &World) -> ProxmoxView {
    let vms = world.vms_of(HELD);
    let ids: Vec<String> = vms.iter().map(|vm| vm.vmid.to_string()).collect();
    let tasks = world
        .lab
        .proxmox()
        .tasks()
        .into_iter()
        .filter(|task| ids.contains(&task.id))
        .map(|task| (task.upid, task.exitstatus))
        .collect();
    ProxmoxView {
        vms: vms.into_iter().map(|vm| (vm.name, vm.running)).collect(),
        tasks,
    }
}

/// The Nodes of the suspended cluster: (name, Ready, cordoned).
fn nodes(world: &World) -> Vec<(String, bool, bool)> {
    world
        .nodes_of(HELD)
        .into_iter()
        .map(|n| (n.name, n.ready, n.cordoned))
        .collect()
}

/// Waits until the suspended cluster has a VM that is none of `old` (a clone under way).
async fn new_vm(world: &World, old: &[String]) -> String {
    wait::on("a replacement being cloned")
        .until(async || {
            let vms = world.vms_of(HELD);
            vms.iter()
                .find(|vm| !vm.template && !old.contains(&vm.name) && vm.name.contains("-general-"))
                .map(|vm| vm.name.clone())
                .ok_or_else(|| format!("{:?}", vms.iter().map(|vm| &vm.name).collect::<Vec<_>>()))
        })
        .await
}

fn suspended(status: &FleetStatus) -> bool {
    status.clusters.get(HELD).is_some_and(|c| {
        c.conditions
            .iter()
            .any(|c| c.kind == "Suspended" && c.status == "True" && c.reason == "SuspendedInGit")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_pushed_mid_rollout_lets_the_running_step_finish_holds_the_rest_and_the_revert_resumes()
 {
    let mut world = World::with_lab(
        slow_clones(),
        &fleet_yaml(&["1.36"], false),
        &[(HELD, prod("debian13-k8s", false)), (OTHER, other(2))],
        false,
    )
    .await;
    world.start_until_ready(&[HELD, OTHER]).await;
    let old: Vec<String> = world
        .vm_views(HELD)
        .into_iter()
        .filter(|vm| vm.is_worker())
        .map(|vm| vm.name)
        .collect();
    assert_eq!(old.len(), 3);

    // The template change starts a rolling replacement: its first step clones a new worker.
    world.write_cluster(HELD, &prod("debian13-k8s-v2", false));
    let cloning = new_vm(&world, &old).await;
    // The suspension lands while that clone runs; the other cluster is asked to scale up.
    world.write_cluster(HELD, &prod("debian13-k8s-v2", true));
    world.write_cluster(OTHER, &other(3));
    let status = world.wait_for("prod Suspended", suspended).await;
    let landed = status.clusters[HELD]
        .conditions
        .iter()
        .find(|c| c.kind == "Suspended")
        .map(|c| c.last_transition_time)
        .expect("Suspended");

    // The running step finishes: the new machine is created and started, after the landing.
    let status = world
        .wait_for("the running create-machine finished", |s| {
            s.clusters[HELD].last_step.as_ref().is_some_and(|step| {
                step.action == ActionKind::CreateMachine
                    && step.succeeded
                    && step.machine.as_ref().is_some_and(|m| m.as_str() == cloning)
            })
        })
        .await;
    let finished = status.clusters[HELD].last_step.clone().expect("last step");
    assert!(
        finished.at > landed,
        "the step ended ({}) after the suspension landed ({landed})",
        finished.at
    );
    assert!(
        world
            .lab
            .proxmox()
            .vm_named(&cloning)
            .is_some_and(|vm| vm.running),
        "{cloning} is whole and running"
    );
    let held = world
        .wait_for("prod waiting on its suspension", |s| {
            suspended(s)
                && s.clusters[HELD].waiting_on.iter().any(|w| {
                    w.resource
                        .starts_with("suspended in Git (spec.suspend: true)")
                })
        })
        .await;
    assert!(
        held.clusters[HELD]
            .conditions
            .iter()
            .any(|c| c.kind == "Suspended" && c.message.contains("remove it or set it to false")),
        "{:?}",
        held.clusters[HELD].conditions
    );

    // Ten passes: nothing starts on prod, neither on Proxmox nor in Kubernetes, while the
    // other cluster converges.
    let proxmox = proxmox_view(&world);
    let kube = nodes(&world);
    let passes = world.passes();
    world
        .wait_for("other scaled up while prod is held", |s| {
            ready_with(s, OTHER, 4)
        })
        .await;
    world.wait_passes(10).await;
    let seen = world.passes() - passes;
    assert!(seen >= 10, "{seen} passes");
    assert_eq!(
        proxmox_view(&world),
        proxmox,
        "no VM or Proxmox task of prod changed over {seen} passes"
    );
    assert_eq!(
        nodes(&world),
        kube,
        "no Node of prod changed over {seen} passes"
    );
    let status = world.status();
    assert!(suspended(&status), "still Suspended");
    assert_eq!(
        status.clusters[HELD].last_step.as_ref().map(|s| s.at),
        Some(finished.at),
        "no step of prod ran over {seen} passes"
    );

    // The revert: the replacement goes on to the end.
    world.write_cluster(HELD, &prod("debian13-k8s-v2", false));
    let status = world
        .wait_for("every prod worker replaced after the revert", |s| {
            ready(s, &[HELD, OTHER])
                && s.clusters[HELD]
                    .nodes
                    .iter()
                    .filter(|n| n.role == Role::Worker)
                    .all(|n| !old.iter().any(|o| o == n.name.as_str()))
        })
        .await;
    assert!(!suspended(&status));
    assert!(
        status.clusters[HELD]
            .conditions
            .iter()
            .all(|c| c.kind != "Suspended"),
        "Suspended is listed only while it holds"
    );
    let workers = world
        .vm_views(HELD)
        .into_iter()
        .filter(|vm| vm.is_worker())
        .count();
    assert_eq!(workers, 3);
    world.kill_daemon().await;
}
