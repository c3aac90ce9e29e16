//! `remediation.maxUnhealthy` on the lab: a cluster of one control plane and five workers
//! (six nodes; the default 40% allows two unhealthy). Three workers freeze (guest agent
//! silent, kubelet silent, so their Nodes go NotReady): nothing is fenced or replaced, the
//! status says `RemediationHeld` naming the three, and one notification reaches a `generic`
//! receiver. Two of them come back: the one still frozen is fenced (hard-stopped, tainted
//! out-of-service) and replaced, and the receiver is told of the fencing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capstan::model::Role;
use capstan::notify::NotifyOptions;
use capstan::plan::ActionKind;
use capstan::secrets::{SecretPolicy, SecretReader};
use capstan::status::FleetStatus;
use capstan_lab::values::LabDuration;
use capstan_lab::world::LabConfig;
use capstan_testkit::world::{Setup, ready_with};
use capstan_testkit::{ClusterYaml, FleetYaml, World, wait};

const CLUSTER: &str = "fence";
const SIGNING_KEY: &str = "remediation-signing-key-0123456789";

fn fleet() -> String {
    FleetYaml::new()
        .section(
            "notifications:
  providers:
    hook:
      type: generic
      addressFrom: {env: CAPSTAN_NOTIFICATION_HOOK_ADDRESS}
      signingKeyFrom: {env: CAPSTAN_NOTIFICATION_HOOK_SIGNING_KEY}
  alerts:
    - providers: [hook]
      kinds: [RemediationHeld, NodeFenced]
",
        )
        .render()
}

/// Five workers; a node NotReady for 2 s with a silent agent is fenced (maxUnhealthy: the
/// default 40%).
fn cluster() -> String {
    let text = ClusterYaml::lab(CLUSTER).address(32).workers(5).render();
    let fenced = text.replacen(
        "  delivery:\n",
        "  remediation: {fence: true, after: 2s}\n  delivery:\n",
        1,
    );
    assert_ne!(fenced, text);
    fenced
}

/// The default lab, with a hung agent's ping timing out after 200 ms instead of a real
/// host's 3 s (each pass pings every NotReady node's agent).
fn lab() -> LabConfig {
    let mut config = LabConfig::default();
    config.proxmox.timings.agent_timeout = LabDuration(Duration::from_millis(200));
    config
}

/// The bodies a receiver on loopback got (it answers 200).
async fn receiver() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let got: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let kept = Arc::clone(&got);
    let app = axum::Router::new().fallback(move |body: String| {
        let kept = Arc::clone(&kept);
        async move {
            let value = serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body));
            kept.lock().expect("received").push(value);
            "ok"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, got)
}

fn held(status: &FleetStatus) -> Option<String> {
    status.clusters.get(CLUSTER).and_then(|c| {
        c.conditions
            .iter()
            .find(|c| c.kind == "RemediationHeld" && c.status == "True")
            .map(|c| format!("{}: {}", c.reason, c.message))
    })
}

/// Whether `node` carries the fencing taint.
fn out_of_service(world: &World, node: &str) -> bool {
    let sim = world.lab.kube().cluster(CLUSTER).expect("cluster");
    sim.object("nodes", None, node).is_some_and(|n| {
        n["spec"]["taints"].as_array().is_some_and(|taints| {
            taints
                .iter()
                .any(|t| t["key"] == "node.kubernetes.io/out-of-service")
        })
    })
}

fn fences(world: &World) -> u64 {
    ["ok", "error"]
        .iter()
        .filter_map(|outcome| {
            world
                .counters()
                .steps
                .get(&(ActionKind::FenceMachine, *outcome))
                .copied()
        })
        .sum()
}

fn kinds(got: &Mutex<Vec<serde_json::Value>>) -> Vec<String> {
    got.lock()
        .expect("received")
        .iter()
        .map(|body| body["kind"].as_str().unwrap_or("?").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_of_five_workers_frozen_hold_remediation_and_one_frozen_is_fenced_and_replaced() {
    let mut world = World::with_lab(lab(), &fleet(), &[(CLUSTER, cluster())], false).await;
    let (url, got) = receiver().await;
    let env = BTreeMap::from([
        ("CAPSTAN_NOTIFICATION_HOOK_ADDRESS".to_owned(), url),
        (
            "CAPSTAN_NOTIFICATION_HOOK_SIGNING_KEY".to_owned(),
            SIGNING_KEY.to_owned(),
        ),
    ]);
    world.secret_reader = SecretReader::new(Arc::new(SecretPolicy::default()), move |name| {
        env.get(name).cloned()
    });
    // Repeats are not folded (a held condition that flapped would be told twice).
    let options = NotifyOptions {
        fold_window: Duration::from_millis(1),
        min_gap: Duration::from_millis(50),
        ..NotifyOptions::default()
    };
    world
        .start_daemon_as(Setup::folder().notify(options), |connections| connections)
        .await;
    let status = world
        .wait_for("the cluster Ready with six nodes", |s| {
            ready_with(s, CLUSTER, 6)
        })
        .await;
    let mut workers: Vec<String> = status.clusters[CLUSTER]
        .nodes
        .iter()
        .filter(|n| n.role == Role::Worker)
        .map(|n| n.name.to_string())
        .collect();
    workers.sort();
    assert_eq!(workers.len(), 5);
    let vms_before: Vec<String> = world
        .vms_of(CLUSTER)
        .into_iter()
        .map(|vm| vm.name)
        .collect();

    // Three of five workers freeze: more than 40% of six nodes.
    let frozen = &workers[..3];
    for node in frozen {
        world.lab.freeze_machine(CLUSTER, node).expect("frozen");
    }
    let status = world
        .wait_for("RemediationHeld", |s| held(s).is_some())
        .await;
    let message = held(&status).expect("held");
    assert!(message.starts_with("TooManyUnhealthy: "), "{message}");
    for node in frozen {
        assert!(message.contains(node.as_str()), "{node} named: {message}");
    }
    wait::on("the RemediationHeld notification")
        .until_true(|| !got.lock().expect("received").is_empty())
        .await;
    // Passes go on; nothing is fenced, stopped, tainted or replaced meanwhile.
    world.wait_passes(10).await;
    assert!(held(&world.status()).is_some(), "still held");
    assert_eq!(fences(&world), 0, "no fence step ran");
    for node in frozen {
        assert!(!out_of_service(&world, node), "{node} not tainted");
        assert!(
            world
                .lab
                .proxmox()
                .vm_named(node)
                .is_some_and(|vm| vm.running),
            "{node}'s VM still runs"
        );
    }
    let vms_held: Vec<String> = world
        .vms_of(CLUSTER)
        .into_iter()
        .map(|vm| vm.name)
        .collect();
    assert_eq!(vms_held, vms_before, "no machine created or removed");
    let bodies = got.lock().expect("received").clone();
    assert_eq!(
        kinds(&got),
        ["RemediationHeld"],
        "one notification: {bodies:?}"
    );
    assert_eq!(bodies[0]["cluster"], CLUSTER);
    let told = bodies[0]["message"].as_str().unwrap_or_default();
    for node in frozen {
        assert!(told.contains(node.as_str()), "{node} in {told}");
    }

    // Two come back: one of six is unhealthy, within the limit: it is fenced and replaced.
    let dead = &frozen[0];
    for node in &frozen[1..] {
        world.lab.thaw_machine(CLUSTER, node).expect("thawed");
    }
    // (Its Node may be gone by the time this looks: the fencing is read from the step.)
    let status = world
        .wait_for("the frozen worker fenced", |s| {
            s.clusters[CLUSTER].last_step.as_ref().is_some_and(|step| {
                step.action == ActionKind::FenceMachine
                    && step.succeeded
                    && step
                        .machine
                        .as_ref()
                        .is_some_and(|m| m.as_str() == dead.as_str())
            }) || fences(&world) > 0
        })
        .await;
    assert!(held(&status).is_none(), "no longer held");
    let status = world
        .wait_for("the fenced worker replaced", |s| {
            ready_with(s, CLUSTER, 6)
                && s.clusters[CLUSTER]
                    .nodes
                    .iter()
                    .all(|n| n.name.as_str() != dead.as_str())
        })
        .await;
    assert!(
        world.lab.proxmox().vm_named(dead).is_none(),
        "{dead}'s VM destroyed"
    );
    assert_eq!(
        fences(&world),
        1,
        "one fence step: {:?}",
        world.counters().steps
    );
    for node in &frozen[1..] {
        assert!(
            status.clusters[CLUSTER]
                .nodes
                .iter()
                .any(|n| n.name.as_str() == node.as_str()),
            "{node} came back and stays"
        );
    }
    wait::on("the NodeFenced notification")
        .until_true(|| kinds(&got).len() >= 2)
        .await;
    let bodies = got.lock().expect("received").clone();
    assert_eq!(
        kinds(&got),
        ["RemediationHeld", "NodeFenced"],
        "held once, then the fencing: {bodies:?}"
    );
    assert!(
        bodies[1]["message"]
            .as_str()
            .is_some_and(|m| m.contains(dead.as_str())
                && m.contains("hard-stopped")
                && m.contains("tainted out-of-service")),
        "{}",
        bodies[1]
    );
    world.kill_daemon().await;
}
