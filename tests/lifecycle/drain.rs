//! A drain blocked by a PodDisruptionBudget: the node stays cordoned and its VM intact, the
//! status names the pod and the budget (while the drain runs, and once it is past
//! `drainTimeout`); deleting the budget lets the drain finish and the rollout converge.

use capstan::plan::ActionKind;
use capstan::status::{Phase, conditions};
use capstan_lab::kube::{SimDeployment, SimWorkloads};
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};

const CLUSTER: &str = "pdb";

fn spec(workers: u32) -> String {
    cluster_yaml(CLUSTER, 35, "1.36.2", workers, "debian13-k8s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_blocked_by_a_budget_keeps_the_node_cordoned_and_finishes_once_it_goes() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let mut world = World::new(&fleet_yaml(&["1.36"], false), &[(CLUSTER, spec(3))]).await;
    world.start_until_ready(&[CLUSTER]).await;
    // One `web` pod per worker, and a budget that allows no disruption at all.
    let sim = world
        .lab
        .kube()
        .cluster(CLUSTER)
        .expect("simulated cluster");
    sim.add_workloads(&SimWorkloads {
        deployments: vec![SimDeployment {
            name: "web".into(),
            namespace: "shop".into(),
            replicas: 3,
            pdb_min_available: Some(3),
            empty_dir: false,
        }],
        ..SimWorkloads::default()
    })
    .expect("workloads");
    let workers: Vec<String> = world
        .vm_views(CLUSTER)
        .into_iter()
        .filter(|vm| vm.is_worker())
        .map(|vm| vm.name)
        .collect();
    for worker in &workers {
        assert!(
            sim.pods_on(worker)
                .iter()
                .any(|p| p.starts_with("shop/web-")),
            "a web pod on {worker}: {:?}",
            sim.pods_on(worker)
        );
    }

    // Scale down by one: the leaving worker's web pod may not be evicted.
    world.write_cluster(CLUSTER, &spec(2));
    let status = world
        .wait_for("the drain waiting on the pod", |s| {
            s.clusters.get(CLUSTER).is_some_and(|c| {
                c.waiting_on
                    .iter()
                    .any(|w| w.step == Some(ActionKind::Drain) && w.resource.contains("shop/web-"))
            })
        })
        .await;
    let waiting = status.clusters[CLUSTER]
        .waiting_on
        .iter()
        .find(|w| w.step == Some(ActionKind::Drain))
        .expect("waiting on the drain");
    assert!(
        waiting
            .resource
            .contains("The disruption budget web needs 3 healthy pods"),
        "the wait names the budget: {waiting:?}"
    );
    assert!(waiting.since.is_some(), "and since when: {waiting:?}");
    let node = workers
        .iter()
        .find(|w| waiting.resource.contains(&format!("on {w}")))
        .expect("the wait names the node")
        .clone();
    let pod = sim
        .pods_on(&node)
        .into_iter()
        .find(|p| p.starts_with("shop/web-"))
        .expect("web pod");
    assert!(
        waiting.resource.contains(&pod),
        "the wait names the pod {pod}: {waiting:?}"
    );

    // Past drainTimeout (4s): Blocked on that node, naming the pod; cordoned, VM intact.
    let status = world
        .wait_for("the drain past its deadline", |s| {
            s.clusters
                .get(CLUSTER)
                .is_some_and(|c| c.phase == Phase::Blocked)
        })
        .await;
    let blocked = status.clusters[CLUSTER]
        .conditions
        .iter()
        .find(|c| c.kind == conditions::BLOCKED)
        .expect("Blocked condition");
    assert_eq!(blocked.status, "True");
    for part in [
        format!("drain of {node} timed out"),
        pod.clone(),
        "The disruption budget web needs 3 healthy pods".to_owned(),
        "The node stays cordoned".to_owned(),
    ] {
        assert!(
            blocked.message.contains(&part),
            "the Blocked condition says {part:?}: {}",
            blocked.message
        );
    }
    let recorder = world.record(CLUSTER);
    world.wait_passes(5).await;
    let timeline = recorder.finish().await;
    for sample in &timeline.0 {
        assert!(
            sample.node(&node).is_some_and(|n| n.cordoned && n.ready),
            "{node} stays cordoned:\n{}",
            timeline.dump()
        );
        assert!(
            sample
                .vms
                .iter()
                .any(|vm| vm.name == node && vm.running && !vm.is_retiring()),
            "its VM stays intact:\n{}",
            timeline.dump()
        );
        assert_eq!(sample.vms.len(), 4, "no VM goes:\n{}", timeline.dump());
    }
    assert!(
        sim.pods_on(&node).contains(&pod),
        "the pod the budget protects stays where it is"
    );

    // Deleting the budget lets the drain finish and the rollout converge.
    world.kubectl(CLUSTER, &["-n", "shop", "delete", "pdb", "web"]);
    world
        .wait_for("the rollout converged", |s| {
            ready(s, &[CLUSTER])
                && s.clusters[CLUSTER]
                    .nodes
                    .iter()
                    .filter(|n| n.role == capstan::model::Role::Worker)
                    .count()
                    == 2
        })
        .await;
    assert!(
        world.vm_views(CLUSTER).iter().all(|vm| vm.name != node),
        "{node}'s VM is gone"
    );
    let web_pods: Vec<String> = sim
        .objects("pods", Some("shop"))
        .iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .filter_map(|p| p["spec"]["nodeName"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(web_pods.len(), 3, "web runs its 3 replicas again");
    assert!(
        web_pods.iter().all(|n| n != &node),
        "none on the removed node: {web_pods:?}"
    );
    world.kill_daemon().await;
}
