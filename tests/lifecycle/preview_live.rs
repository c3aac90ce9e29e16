//! Previews against a running daemon: after a rollout, `GET /observed` carries the step
//! durations the daemon measured; asking for it makes the next passes observe the cluster's
//! pods and PodDisruptionBudgets, and `capstan preview --server` then names the budget and the
//! pod that will block a drain of the change, with an estimated duration. `capstan observe
//! --workloads` puts the same pods and budgets in a snapshot file.

use capstan::clock::Clock as _;
use capstan_lab::kube::{SimDaemonSet, SimDeployment, SimWorkloads};

use capstan_testkit::{World, cluster_yaml, fleet_yaml, git};

const CLUSTER: &str = "live";

fn spec(template: &str) -> String {
    cluster_yaml(CLUSTER, 36, "1.36.2", 3, template)
}

async fn observed(server: &str) -> serde_json::Value {
    reqwest::get(format!("{server}/observed"))
        .await
        .expect("GET /observed")
        .json()
        .await
        .expect("a snapshot")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_against_the_daemon_names_the_blocking_budget_and_estimates_the_duration() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, spec("debian13-k8s"))],
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
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
        daemon_sets: vec![SimDaemonSet {
            name: "agent".into(),
            namespace: "kube-system".into(),
        }],
        ..SimWorkloads::default()
    })
    .expect("workloads");
    let address = capstan::daemon::http::serve("127.0.0.1:0".parse().expect("addr"), world.board())
        .await
        .expect("serve");
    let server = format!("http://{address}");

    // No pass listed pods so far: nobody asked for them.
    let before = world.board().observed().expect("observed");
    assert!(before.clusters[CLUSTER].pods.is_empty());
    assert!(before.clusters[CLUSTER].disruption_budgets.is_empty());

    // The first request wakes a pass that lists them, with the budget's live status, and
    // answers with it; the rollout's steps were timed.
    let snapshot = observed(&server).await;
    let durations = &snapshot["stepDurations"];
    for (action, at_least) in [
        ("create-machine", 4),
        ("init-control-plane", 1),
        ("join-node", 3),
    ] {
        assert!(
            durations[action]["samples"].as_u64() >= Some(at_least),
            "{action} measured at least {at_least} times: {durations:#}"
        );
        assert!(durations[action]["medianMs"].is_u64(), "{durations:#}");
    }
    let live = &snapshot["clusters"][CLUSTER];
    let budget = &live["disruptionBudgets"][0];
    assert_eq!(
        (&budget["namespace"], &budget["name"]),
        (&"shop".into(), &"web".into())
    );
    assert_eq!(budget["disruptionsAllowed"], 0, "{budget:#}");
    assert_eq!(budget["currentHealthy"], 3, "{budget:#}");
    let pods: Vec<&serde_json::Value> = live["pods"]
        .as_object()
        .expect("pods by node")
        .values()
        .flat_map(|pods| pods.as_array().expect("pods").iter())
        .collect();
    assert!(
        pods.iter()
            .any(|p| p["ownerKind"] == "DaemonSet" && p["namespace"] == "kube-system"),
        "{pods:#?}"
    );

    // A branch that changes the workers' template: each old worker's drain will block.
    let repo = capstan_testkit::git::preview_repo(
        world.repo.path(),
        CLUSTER,
        &spec("debian13-k8s"),
        "template",
        &spec("debian13-k8s-v2"),
    );
    let file = repo.path().join(format!("clusters/{CLUSTER}.yaml"));

    let now = world.lab.clock().now().to_string();
    let run = capstan_testkit::cli::preview(repo.path(), "template", &server, &now, "json").await;
    run.assert_code(0);
    let preview: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    let cluster = &preview["clusters"][0];
    assert_eq!(cluster["name"], CLUSTER);
    let drains = cluster["drains"].as_array().expect("drains");
    assert_eq!(drains.len(), 3, "one per replaced worker: {cluster:#}");
    for drain in drains {
        let node = drain["node"].as_str().expect("node");
        let web_pod = sim
            .pods_on(node)
            .into_iter()
            .find(|p| p.starts_with("shop/web-"))
            .expect("a web pod on the drained node");
        // The DaemonSet's pod stays; the web pod goes, and its budget refuses.
        assert_eq!(drain["evicts"], serde_json::json!([web_pod]), "{drain:#}");
        let block = &drain["blockedBy"][0];
        assert_eq!(block["budget"], "shop/web");
        assert_eq!(block["pods"], serde_json::json!([web_pod]));
        assert_eq!(
            block["message"],
            "this drain will block on `web` (minAvailable 3, 3 healthy)"
        );
    }
    assert!(
        preview["summary"]
            .as_str()
            .is_some_and(|s| s.contains("drains will block on PodDisruptionBudget shop/web")),
        "{preview:#}"
    );
    let estimate = &cluster["estimate"];
    assert!(
        estimate["measuredSteps"].as_u64() > Some(0),
        "the estimate uses the measured medians: {estimate:#}"
    );
    assert!(
        estimate["explanation"]
            .as_str()
            .is_some_and(|e| e.contains(" round(s), from the medians the daemon measured")),
        "{estimate:#}"
    );

    // With `rollout.blockedDrain: fail`, the same change fails its preview, naming the budget;
    // the `wait` above (the default) let it pass.
    git(repo.path(), &["checkout", "--quiet", "-b", "template-fail"]);
    let failing = spec("debian13-k8s-v2").replace(
        "  rollout: {minWorkers: 2,",
        "  rollout: {blockedDrain: fail, minWorkers: 2,",
    );
    assert!(
        failing.contains("blockedDrain: fail"),
        "the lab spec changed"
    );
    std::fs::write(&file, failing).expect("write");
    git(
        repo.path(),
        &[
            "commit",
            "--quiet",
            "-am",
            "template, failing on blocked drains",
        ],
    );
    let (dir, now) = (
        repo.path().display().to_string(),
        world.lab.clock().now().to_string(),
    );
    let server = format!("http://{address}");
    let run = tokio::task::spawn_blocking(move || {
        capstan_testkit::cli::capstan(&[
            "preview",
            "--repo",
            &dir,
            "--base",
            "main",
            "--head",
            "template-fail",
            "--server",
            &server,
            "--now",
            &now,
            "--format",
            "json",
        ])
    })
    .await
    .expect("joined");
    run.assert_code(1);
    let preview: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    let refusals = preview["refusals"].as_array().expect("refusals");
    assert_eq!(refusals.len(), 1, "one budget: {refusals:#?}");
    assert_eq!(refusals[0]["rule"], capstan::preview::BLOCKED_DRAIN);
    assert_eq!(refusals[0]["cluster"], CLUSTER);
    let message = refusals[0]["message"].as_str().expect("message");
    assert!(
        message.starts_with(
            "PodDisruptionBudget shop/web (minAvailable 3, 3 healthy) allows no disruption now: the drain of "
        ),
        "{message}"
    );
    assert!(
        refusals[0]["fix"]
            .as_str()
            .is_some_and(|fix| fix.contains("blockedDrain: wait")),
        "{refusals:#?}"
    );

    // `capstan observe --workloads` writes the same facts into a snapshot file.
    let repo = world.repo.path().display().to_string();
    let state = world.state.path().display().to_string();
    let snapshot = tokio::task::spawn_blocking(move || {
        capstan_testkit::cli::capstan(&[
            "observe",
            "--repo",
            &repo,
            "--lab-state",
            &state,
            "--workloads",
        ])
    })
    .await
    .expect("joined");
    snapshot.assert_code(0);
    let snapshot: serde_json::Value = serde_json::from_str(&snapshot.stdout).expect("json");
    assert_eq!(
        snapshot["clusters"][CLUSTER]["disruptionBudgets"][0]["name"], "web",
        "{snapshot:#}"
    );
}
