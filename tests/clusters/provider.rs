//! capstan's cluster operations (`providers::kube`) against simulated clusters: the same
//! scenarios kubectl meets, asserted on what moved, what stayed and what the errors say.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::kube_support::{drain_world, lab, open_spare_workers, pods_named};
use capstan::model::NodeName;
use capstan::providers::kube::{
    ClusterClient, ClusterError, DrainOptions, KubeClusterClient, NodeState, SecretRecord,
    SkipReason, Taint, TaintEffect, client_certificate_expiry,
};

fn node(name: &str) -> NodeName {
    NodeName::from(name)
}

/// Short enough that a blocked drain ends in about a second.
fn quick(timeout_ms: u64) -> DrainOptions {
    DrainOptions {
        timeout: Duration::from_millis(timeout_ms),
        retry_interval: Duration::from_millis(100),
        ..DrainOptions::new(Duration::ZERO)
    }
}

/// What `nodes()` says of `name`.
async fn node_state(client: &KubeClusterClient, name: &NodeName) -> NodeState {
    client
        .nodes()
        .await
        .expect("nodes")
        .into_iter()
        .find(|n| &n.name == name)
        .expect("the node is listed")
}

async fn admin(cluster: &capstan_lab::kube::SimCluster) -> KubeClusterClient {
    KubeClusterClient::connect(&cluster.admin_kubeconfig())
        .await
        .expect("client")
}

#[tokio::test]
async fn await_ready_sees_a_node_become_ready_as_it_happens_and_gives_up_at_the_limit() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    prod.set_node_ready("w3", false).expect("w3");
    let client = admin(&prod).await;
    // Not Ready, and nothing changes it: false at the limit.
    let waited = client
        .await_ready(&node("w3"), Duration::from_millis(300))
        .await
        .expect("watch");
    assert!(!waited, "w3 is not Ready");
    // Ready already: true at once; Ready while watched: true, seen through the watch.
    assert!(
        client
            .await_ready(&node("w2"), Duration::from_secs(5))
            .await
            .expect("watch")
    );
    let becomes_ready = {
        let prod = prod.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            prod.set_node_ready("w3", true).expect("w3");
        })
    };
    let waited = client
        .await_ready(&node("w3"), Duration::from_secs(20))
        .await
        .expect("watch");
    assert!(waited, "w3 became Ready while watched");
    becomes_ready.await.expect("set Ready");
}

#[tokio::test]
async fn nodes_report_readiness_versions_roles_and_addresses() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    prod.set_node_ready("w3", false).expect("w3");
    prod.set_kubelet_version("w2", "1.35.4").expect("w2");
    let client = admin(&prod).await;
    let nodes = client.nodes().await.expect("nodes");
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["cp", "w1", "w2", "w3"]);
    let cp = &nodes[0];
    assert!(cp.ready && !cp.unschedulable);
    assert_eq!(cp.roles, ["control-plane"]);
    assert_eq!(cp.kubelet_version, "v1.36.2");
    assert_eq!(
        cp.taints,
        [Taint {
            key: "node-role.kubernetes.io/control-plane".into(),
            value: None,
            effect: TaintEffect::NoSchedule,
        }]
    );
    assert!(
        cp.addresses
            .iter()
            .any(|a| a.kind == "InternalIP" && a.address == "10.30.0.10")
    );
    assert_eq!(nodes[2].kubelet_version, "v1.35.4");
    assert!(nodes[2].unschedulable);
    assert!(!nodes[3].ready);
    assert!(nodes[3].ready_since.is_some());
}

#[tokio::test]
async fn node_changes_are_idempotent() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let client = admin(&prod).await;
    let w1 = node("w1");
    for _ in 0..2 {
        client.cordon(&w1).await.expect("cordon");
    }
    assert!(node_state(&client, &w1).await.unschedulable);
    for _ in 0..2 {
        client
            .annotate(&w1, "capstan.dev/spec-hash", Some("abc123"))
            .await
            .expect("annotate");
    }
    let annotations = node_state(&client, &w1).await.annotations;
    assert_eq!(annotations["capstan.dev/spec-hash"], "abc123");
    client
        .annotate(&w1, "capstan.dev/spec-hash", None)
        .await
        .expect("remove annotation");
    let annotations = node_state(&client, &w1).await.annotations;
    assert!(!annotations.contains_key("capstan.dev/spec-hash"));
    for _ in 0..2 {
        client.delete_node(&node("w3")).await.expect("delete");
    }
    assert!(prod.object("nodes", None, "w3").is_none());
    let missing = client.cordon(&node("w3")).await.expect_err("no such node");
    assert!(matches!(missing, ClusterError::Cordon { .. }));
    assert!(!missing.is_transient());
}

#[tokio::test]
async fn the_out_of_service_taint_fences_a_node_and_moves_its_pods() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    open_spare_workers(&prod);
    let client = admin(&prod).await;
    let w1 = node("w1");
    for _ in 0..2 {
        client
            .add_taint(&w1, &Taint::out_of_service())
            .await
            .expect("taint");
    }
    let state = node_state(&client, &w1).await;
    assert_eq!(state.taints, [Taint::out_of_service()]);
    assert!(
        pods_named(&prod, "w1", "web-").is_empty(),
        "pods without a toleration left the fenced node"
    );
}

#[tokio::test]
async fn drain_evicts_workloads_skips_daemons_and_leaves_the_node_cordoned() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    prod.add_workloads(
        &serde_saphyr::from_str(
            "pods:\n  - {name: scratch, node: w1, emptyDir: true}\n  - {name: kube-apiserver-w1, node: w1, mirror: true}\n",
        )
        .expect("pods"),
    )
    .expect("add pods");
    open_spare_workers(&prod);
    let web_before = pods_named(&prod, "w1", "web-");
    assert_eq!(web_before.len(), 2);
    let client = admin(&prod).await;
    let report = client
        .drain(&node("w1"), &quick(5_000))
        .await
        .expect("drain succeeds");
    let evicted: Vec<String> = report.evicted.iter().map(ToString::to_string).collect();
    let mut expected = web_before.clone();
    expected.push("default/scratch".to_owned());
    expected.sort();
    assert_eq!(evicted, expected);
    let skipped: Vec<(String, SkipReason)> = report
        .skipped
        .iter()
        .map(|s| (s.pod.name.clone(), s.reason))
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped.contains(&("kube-apiserver-w1".to_owned(), SkipReason::Mirror)));
    assert!(
        skipped
            .iter()
            .any(|(name, reason)| name.starts_with("agent-") && *reason == SkipReason::DaemonSet)
    );
    let left = prod.pods_on("w1");
    assert_eq!(left.len(), 2, "the daemon and the mirror stay: {left:?}");
    let moved = pods_named(&prod, "w2", "web-").len() + pods_named(&prod, "w3", "web-").len();
    assert_eq!(moved, 2, "web's replicas run elsewhere");
    assert!(prod.object("pods", Some("default"), "scratch").is_none());
    assert_eq!(
        prod.object("nodes", None, "w1").expect("w1")["spec"]["unschedulable"],
        true
    );
    let again = client
        .drain(&node("w1"), &quick(1_000))
        .await
        .expect("again");
    assert!(again.evicted.is_empty(), "a drained node drains at once");
}

#[tokio::test]
async fn a_drain_blocked_by_a_budget_times_out_naming_the_pod_and_the_budget() {
    let lab = lab(&drain_world(true)).await;
    let prod = lab.cluster("prod").expect("prod");
    open_spare_workers(&prod);
    let db = pods_named(&prod, "w1", "db-");
    assert_eq!(db.len(), 1);
    let client = admin(&prod).await;
    let blockers = client.drain_blockers(&node("w1")).await.expect("blockers");
    assert_eq!(
        blockers
            .iter()
            .map(|b| b.pod.to_string())
            .collect::<Vec<_>>(),
        db,
        "before the drain, only db is blocked"
    );
    assert!(prod.object("nodes", None, "w1").expect("w1")["spec"]["unschedulable"] != true);
    let to_move: Vec<String> = client
        .pods_to_move(&node("w1"))
        .await
        .expect("pods to move")
        .iter()
        .map(ToString::to_string)
        .collect();
    for pod in db.iter().chain(&pods_named(&prod, "w1", "web-")) {
        assert!(to_move.contains(pod), "{pod} must still move: {to_move:?}");
    }
    assert_eq!(
        pods_named(&prod, "w1", "web-").len(),
        2,
        "dry runs change nothing"
    );

    let err = client
        .drain(&node("w1"), &quick(800))
        .await
        .expect_err("blocked");
    let ClusterError::DrainTimedOut { blockers, .. } = &err else {
        panic!("unexpected error: {err}");
    };
    assert_eq!(blockers.len(), 1);
    assert_eq!(blockers[0].pod.to_string(), db[0]);
    let message = err.to_string();
    assert!(
        message.starts_with("drain of node w1 timed out after 800ms; the node stays cordoned; could not evict: default/db-"),
        "{message}"
    );
    assert!(
        message.contains(
            "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget db needs 1 healthy pods and has 1 currently"
        ),
        "{message}"
    );
    assert!(err.is_transient());
    assert_eq!(pods_named(&prod, "w1", "db-"), db, "db stayed");
    assert!(pods_named(&prod, "w1", "web-").is_empty(), "web moved");
    assert_eq!(
        prod.object("nodes", None, "w1").expect("w1")["spec"]["unschedulable"],
        true
    );
}

#[tokio::test]
async fn the_admin_is_authenticated_and_anonymous_is_refused() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let client = admin(&prod).await;
    assert_eq!(
        client.authenticated_user().await.expect("user"),
        "kubernetes-admin"
    );
    let anonymous = KubeClusterClient::connect(&prod.anonymous_kubeconfig())
        .await
        .expect("client");
    let refused = anonymous.authenticated_user().await.expect_err("401");
    assert!(matches!(refused, ClusterError::Authenticate(_)));
    assert!(!refused.is_transient());
}

#[tokio::test]
async fn kubeconfigs_with_tls_server_name_verify_against_the_endpoint_name() {
    let lab = lab(&drain_world(false)).await;
    let prod = lab.cluster("prod").expect("prod");
    let with_name = |name: &str| {
        prod.admin_kubeconfig().replace(
            "    server: ",
            &format!("    tls-server-name: {name}\n    server: "),
        )
    };
    let client = KubeClusterClient::connect(&with_name("k8s-prod.lab.example"))
        .await
        .expect("client");
    assert_eq!(
        client.authenticated_user().await.expect("user"),
        "kubernetes-admin"
    );
    let wrong = KubeClusterClient::connect(&with_name("k8s-other.lab.example"))
        .await
        .expect("client");
    assert!(
        wrong.authenticated_user().await.is_err(),
        "certificate name mismatch"
    );
}

#[tokio::test]
async fn client_certificate_expiry_follows_renewals() {
    let lab = lab("").await;
    let management = lab.management().expect("management");
    let before = client_certificate_expiry(&management.admin_kubeconfig())
        .expect("parse")
        .expect("a client certificate");
    assert_eq!(before, management.admin_certificate_expiry());
    let old_kubeconfig = management.admin_kubeconfig();
    lab.clock().advance(Duration::from_secs(200 * 86_400));
    let renewed = management.renew_certificates().expect("renew");
    let after = client_certificate_expiry(&management.admin_kubeconfig())
        .expect("parse")
        .expect("a client certificate");
    assert_eq!(after, renewed);
    let moved = after.duration_since(before).as_secs();
    assert!(
        (199 * 86_400..=201 * 86_400).contains(&moved),
        "moved {moved}s"
    );
    let old = KubeClusterClient::connect(&old_kubeconfig)
        .await
        .expect("client");
    assert_eq!(
        old.authenticated_user()
            .await
            .expect("the old certificate still works"),
        "kubernetes-admin"
    );
    let token = management.issue_token("flux", &["system:masters"]);
    assert_eq!(
        client_certificate_expiry(&management.token_kubeconfig("flux", &token)).expect("parse"),
        None
    );
    assert!(matches!(
        client_certificate_expiry("not: [a kubeconfig"),
        Err(ClusterError::ParseKubeconfig(_))
    ));
}

#[tokio::test]
async fn config_maps_and_secrets_round_trip() {
    let lab = lab("").await;
    let management = lab.management().expect("management");
    let client = admin(&management).await;
    assert_eq!(
        client
            .config_map("kube-system", "kubeadm-config")
            .await
            .expect("read"),
        None
    );
    let data = BTreeMap::from([(
        "ClusterConfiguration".to_owned(),
        "kind: ClusterConfiguration\n".to_owned(),
    )]);
    for _ in 0..2 {
        client
            .write_config_map("kube-system", "kubeadm-config", &data)
            .await
            .expect("write");
    }
    assert_eq!(
        client
            .config_map("kube-system", "kubeadm-config")
            .await
            .expect("read"),
        Some(data)
    );

    let secret = SecretRecord {
        data: BTreeMap::from([("value".to_owned(), b"one".to_vec())]),
        ..SecretRecord::default()
    };
    let first = client
        .write_secret("flux-system", "s", &secret)
        .await
        .expect("create");
    let mut read = client
        .secret("flux-system", "s")
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(read.data["value"], b"one");
    assert_eq!(read.resource_version.as_deref(), Some(first.as_str()));
    assert!(!format!("{read:?}").contains("one"), "Debug hides data");
    read.data.insert("value".to_owned(), b"two".to_vec());
    client
        .write_secret("flux-system", "s", &read)
        .await
        .expect("replace");
    let stale = client
        .write_secret("flux-system", "s", &read)
        .await
        .expect_err("stale resourceVersion");
    assert!(stale.is_conflict() && stale.is_transient(), "{stale}");
    assert!(
        client
            .delete_secret("flux-system", "s")
            .await
            .expect("delete")
    );
    assert!(
        !client
            .delete_secret("flux-system", "s")
            .await
            .expect("again")
    );
}
