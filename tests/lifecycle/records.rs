//! The records capstan keeps in the management cluster, with the daemon running (issue 34): a
//! Secret labelled capstan's but of another kind, planted where a cluster delivers its
//! kubeconfig, is never overwritten and the cluster is Blocked with a condition naming it; a
//! K3s cluster deleted with `prune: true` leaves no database, user or record behind, and a
//! new cluster of its name comes up on a fresh token.

use capstan_testkit::judge::{self, Judge};
use capstan_testkit::mariadb::{MariaDb, seed_k3s_cluster};
use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capstan_labelled_secret_of_another_kind_where_flux_reads_is_never_overwritten() {
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(
            "kept",
            cluster_yaml("kept", 38, "1.36.2", 2, "debian13-k8s"),
        )],
    )
    .await;
    // A CA pin of another cluster, by hand, at the name kept's kubeconfig goes to.
    let management = world.lab.kube().management().expect("management");
    let planted = serde_json::json!({
        "metadata": {
            "name": "kept-kubeconfig",
            "labels": {"app.kubernetes.io/managed-by": "capstan"},
            "annotations": {
                "capstan.dev/record-kind": "ca-pin",
                "capstan.dev/owner-cluster": "other",
            },
        },
        "data": {"ca-sha256": "QUE6QkI="},
    });
    management
        .create_object("secrets", Some("flux-system"), planted)
        .expect("a planted Secret");
    world.start_daemon().await;
    let status = world
        .wait_for("kept Blocked on the planted Secret", |s| {
            s.clusters.get("kept").is_some_and(|c| {
                c.conditions.iter().any(|c| {
                    c.kind == "Blocked" && c.status == "True" && c.reason == "RecordRefused"
                })
            })
        })
        .await;
    let blocked = status.clusters["kept"]
        .conditions
        .iter()
        .find(|c| c.kind == "Blocked")
        .expect("Blocked");
    assert!(
        blocked.message.contains(
            "Secret flux-system/kept-kubeconfig is a `ca-pin` record of cluster `other`, not the `flux-kubeconfig` record of cluster `kept`"
        ),
        "{}",
        blocked.message
    );
    let secret = management
        .object("secrets", Some("flux-system"), "kept-kubeconfig")
        .expect("still there");
    assert_eq!(secret["data"]["ca-sha256"], "QUE6QkI=", "{secret}");
    assert!(
        secret["data"]["value"].is_null(),
        "no kubeconfig written: {secret}"
    );
    world.kill_daemon().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_k3s_cluster_drops_its_database_and_user_and_comes_back_on_a_new_token() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let mariadb = MariaDb::start();
    let fleet = format!(
        "{}{}",
        fleet_yaml(&["1.36"], true),
        mariadb.datastores_yaml()
    );
    let mut world = World::new(&fleet, &[("edge", seed_k3s_cluster())]).await;
    world
        .datastore_passwords
        .insert("mariadb".to_owned(), mariadb.root_password.clone());
    world.start_daemon().await;
    world.wait_for("edge Ready", |s| ready(s, &["edge"])).await;
    let management = world.lab.kube().management().expect("management");
    let token = |management: &capstan_lab::kube::SimCluster| {
        management
            .object("secrets", Some("capstan-system"), "capstan-k3s-edge")
            .map(|s| s["data"]["k3s-token"].clone())
    };
    let old_token = token(&management).expect("edge's token");
    assert_eq!(
        mariadb.sql("SELECT COUNT(*) FROM mysql.user WHERE user = 'k3s_edge'"),
        "1\n"
    );

    world.remove_cluster("edge");
    world
        .wait_for("edge deleted", |s| {
            !s.clusters.contains_key("edge") && s.findings.is_empty()
        })
        .await;
    assert_eq!(
        mariadb
            .sql("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'k3s_edge'"),
        "0\n",
        "the database is dropped"
    );
    assert_eq!(
        mariadb.sql("SELECT COUNT(*) FROM mysql.user WHERE user = 'k3s_edge'"),
        "0\n",
        "the user is dropped"
    );
    let left: Vec<String> = management
        .objects("secrets", None)
        .into_iter()
        .filter_map(|s| s["metadata"]["name"].as_str().map(str::to_owned))
        .filter(|name| name.contains("edge"))
        .collect();
    assert!(left.is_empty(), "records of edge remain: {left:?}");

    // Added again: a new token, a fresh database, Ready.
    world.write_cluster("edge", &seed_k3s_cluster());
    world
        .wait_for("edge Ready again", |s| ready(s, &["edge"]))
        .await;
    assert_ne!(token(&management).expect("a new token"), old_token);
    world.kill_daemon().await;
}
