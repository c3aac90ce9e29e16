//! The seed's K3s cluster (3 servers, 2 agents, kine on a MariaDB capstan provisions) built
//! by the daemon from the repository on the lab, against a real MariaDB: the stock kubectl sees
//! the servers and agents Ready, kine's table holds the cluster, Flux's kubeconfig works; and
//! a datastore that refuses the admin stops the cluster before any VM is cloned; the same on a
//! kine DSN given whole; scale, a template replacement and an upgrade with a server Ready at
//! every sampled moment.

use capstan_lab::world::{LabConfig, WorldTemplate};
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::mariadb::{MariaDb, seed_k3s_cluster};
use capstan_testkit::{NodeView, World, fleet_yaml, kubectl_with, ready};

const RELEASE: &str = capstan_lab::world::DEFAULT_K3S_RELEASE;

/// The lab's default world, whose templates (`debian13-k3s`, the air-gap install of
/// [`RELEASE`], on every node, among them) are spelled out so a test can add more.
fn k3s_lab() -> LabConfig {
    let mut config = LabConfig::default();
    config.proxmox.templates = Some(config.proxmox.effective_templates());
    config
}

fn fleet(mariadb: &MariaDb) -> String {
    format!(
        "{}{}",
        fleet_yaml(&["1.36", "1.37"], false),
        mariadb.datastores_yaml()
    )
}

async fn world(mariadb: &MariaDb, password: &str, record: bool) -> World {
    let mut world = World::with_lab(
        k3s_lab(),
        &fleet(mariadb),
        &[("edge", seed_k3s_cluster())],
        record,
    )
    .await;
    world
        .datastore_passwords
        .insert("mariadb".to_owned(), password.to_owned());
    world
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_k3s_cluster_comes_up_on_a_provisioned_mariadb_and_flux_gets_a_working_kubeconfig()
{
    if !judge::present(&[Judge::Mariadb, Judge::Kubectl]) {
        return;
    }
    let mariadb = MariaDb::start();
    let mut world = world(&mariadb, &mariadb.root_password.clone(), false).await;
    world.start_daemon().await;
    let status = world
        .wait_for("the K3s cluster Ready", |s| ready(s, &["edge"]))
        .await;
    assert_eq!(
        status.clusters["edge"]
            .version
            .map(|v| v.to_string())
            .as_deref(),
        Some("1.36.2+k3s1"),
        "the version is read from the servers' kubelets"
    );

    let delivered = world.flux_kubeconfig("edge").expect("the Flux Secret");
    let file = world.state.path().join("edge-from-flux.kubeconfig");
    std::fs::write(&file, &delivered).expect("write kubeconfig");
    let listed = kubectl_with(&file, &["get", "nodes", "--no-headers"]);
    let ready_lines: Vec<&str> = listed
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
        .collect();
    assert_eq!(ready_lines.len(), 5, "3 servers and 2 agents:\n{listed}");
    let servers = ready_lines
        .iter()
        .filter(|l| l.contains("control-plane"))
        .count();
    assert_eq!(servers, 3, "three servers:\n{listed}");
    assert!(
        ready_lines.iter().all(|l| l.contains(RELEASE)),
        "every kubelet runs {RELEASE}:\n{listed}"
    );

    let mut server_names: Vec<String> = ready_lines
        .iter()
        .filter(|l| l.contains("control-plane"))
        .filter_map(|l| l.split_whitespace().next())
        .map(|name| format!("/registry/minions/{name}"))
        .collect();
    server_names.sort();
    let registered = mariadb
        .sql("SELECT name FROM k3s_edge.kine WHERE name LIKE '/registry/minions/%' ORDER BY name");
    assert_eq!(
        registered.lines().collect::<Vec<_>>(),
        server_names,
        "kine's table holds the servers' registrations"
    );
    assert_eq!(
        mariadb.sql("SELECT COUNT(*) FROM k3s_edge.kine WHERE name LIKE '/bootstrap/%'"),
        "1\n",
        "one bootstrap, shared by the three servers"
    );
    assert_eq!(
        mariadb.sql("SELECT User FROM mysql.user WHERE User = 'k3s_edge'"),
        "k3s_edge\n",
        "capstan made the cluster's own user"
    );
    let secret = world.lab.kube().management().expect("management").object(
        "secrets",
        Some("capstan-system"),
        "capstan-k3s-edge",
    );
    assert!(
        secret.is_some(),
        "the token is kept in capstan-system on the management cluster"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_datastore_credentials_are_refused_before_any_vm_is_cloned() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let mariadb = MariaDb::start();
    let mut world = world(&mariadb, "not-the-root-password", true).await;
    world.start_daemon().await;
    let text = refusal_in_status(&world, "the datastore refusal in the status").await;
    assert!(
        text.contains("datastore `mariadb`") && text.contains("ERROR 1045 (28000)"),
        "the refusal names the datastore and carries MariaDB's error: {text}"
    );
    assert!(
        !text.contains("not-the-root-password"),
        "no password in the status"
    );
    assert_nothing_cloned(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_k3s_minor_upgrade_replaces_the_machines_with_a_server_ready_at_every_moment() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    // The next minor, approved by the fleet (`approvedMinors: ["1.36", "1.37"]`).
    const NEXT: &str = "v1.37.0+k3s1";
    let mariadb = MariaDb::start();
    let world = edge_ready_with_template(&mariadb, "debian13-k3s-v2", Some(NEXT)).await;
    let before: Vec<String> = world.vms_of("edge").into_iter().map(|vm| vm.name).collect();

    // The air-gap template carries the release: a new release is a new template.
    world.write_cluster(
        "edge",
        &seed_k3s_cluster()
            .replace(RELEASE, NEXT)
            .replace("template: debian13-k3s,", "template: debian13-k3s-v2,"),
    );
    let fewest_ready_servers = fewest_ready_servers_until(&world, "upgraded", |nodes| {
        nodes.len() == 5 && nodes.iter().all(|n| n.ready && n.kubelet == NEXT)
    })
    .await;
    assert!(
        fewest_ready_servers >= 1,
        "at least one Ready server at every sample"
    );
    let after: Vec<String> = world.vms_of("edge").into_iter().map(|vm| vm.name).collect();
    assert!(
        after.iter().all(|name| !before.contains(name)),
        "every machine was replaced: before {before:?}, after {after:?}"
    );
    assert_eq!(
        world.steps_ok("upgrade-control-plane"),
        0,
        "no in-place step"
    );
}

/// Samples the cluster's Nodes (every 10 ms) until `done` holds of them and `edge` is Ready in
/// the status; returns the fewest Ready servers any sample saw (the K3s rule: never 0).
async fn fewest_ready_servers_until(
    world: &World,
    what: &str,
    done: impl Fn(&[NodeView]) -> bool,
) -> usize {
    let mut fewest_ready_servers = usize::MAX;
    let deadline = std::time::Instant::now() + capstan_testkit::PATIENCE;
    loop {
        let nodes = world.nodes_of("edge");
        let servers = nodes.iter().filter(|n| n.control_plane && n.ready).count();
        fewest_ready_servers = fewest_ready_servers.min(servers);
        if done(&nodes) && ready(&world.status(), &["edge"]) {
            return fewest_ready_servers;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not {what} in time: {nodes:?}\n{:#?}",
            world.status().clusters.get("edge")
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k3s_agents_scale_and_a_template_replaces_the_servers_with_one_ready_at_every_moment() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let mariadb = MariaDb::start();
    let world = edge_ready_with_template(&mariadb, "debian13-k3s-b", None).await;
    let agents = |nodes: &[NodeView]| nodes.iter().filter(|n| !n.control_plane && n.ready).count();
    let mut fewest = usize::MAX;

    let three_agents = seed_k3s_cluster().replace("replicas: 2", "replicas: 3");
    world.write_cluster("edge", &three_agents);
    fewest = fewest.min(
        fewest_ready_servers_until(&world, "scaled to 3 agents", |nodes| {
            nodes.len() == 6 && agents(nodes) == 3
        })
        .await,
    );
    world.write_cluster("edge", &seed_k3s_cluster());
    fewest = fewest.min(
        fewest_ready_servers_until(&world, "scaled back to 2 agents", |nodes| {
            nodes.len() == 5 && agents(nodes) == 2
        })
        .await,
    );
    assert_eq!(
        world.vms_of("edge").len(),
        5,
        "the third agent's VM is gone"
    );
    let names = |control_plane: bool| -> Vec<String> {
        let mut names: Vec<String> = world
            .nodes_of("edge")
            .into_iter()
            .filter(|n| n.control_plane == control_plane)
            .map(|n| n.name)
            .collect();
        names.sort();
        names
    };
    let servers_before = names(true);
    let agents_before = names(false);

    // A new template for the servers only: each is replaced, new before old.
    let servers_rebuilt =
        seed_k3s_cluster().replacen("template: debian13-k3s,", "template: debian13-k3s-b,", 1);
    world.write_cluster("edge", &servers_rebuilt);
    fewest = fewest.min(
        fewest_ready_servers_until(&world, "servers replaced", |nodes| {
            let servers: Vec<&NodeView> = nodes.iter().filter(|n| n.control_plane).collect();
            nodes.len() == 5
                && nodes.iter().all(|n| n.ready)
                && servers.len() == 3
                && servers.iter().all(|n| !servers_before.contains(&n.name))
        })
        .await,
    );
    assert!(fewest >= 1, "at least one Ready server at every sample");
    assert_eq!(names(false), agents_before, "the agents were left alone");
    assert_eq!(
        mariadb.sql("SELECT COUNT(*) FROM k3s_edge.kine WHERE name LIKE '/bootstrap/%'"),
        "1\n",
        "the new servers joined the same datastore"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_mariadb_makes_capstan_wait_naming_the_datastore_and_it_resumes_when_back() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let mut mariadb = MariaDb::start();
    let mut world = world(&mariadb, &mariadb.root_password.clone(), false).await;
    world.start_daemon().await;
    world
        .wait_for("the K3s cluster Ready", |s| ready(s, &["edge"]))
        .await;
    let vms_before: Vec<String> = world.vms_of("edge").into_iter().map(|vm| vm.name).collect();

    mariadb.stop();
    let api_down = |s: &capstan::status::FleetStatus| {
        s.clusters.get("edge").and_then(|c| {
            c.conditions
                .iter()
                .find(|c| c.kind == "APIAvailable" && c.status == "False")
                .cloned()
        })
    };
    let status = world
        .wait_for("APIAvailable=False naming the datastore", |s| {
            api_down(s).is_some_and(|c| c.reason == "DatastoreUnavailable")
        })
        .await;
    let condition = api_down(&status).expect("the condition");
    assert!(
        condition
            .message
            .contains("its K3s datastore `mariadb` (database `k3s_edge`) is unavailable"),
        "{}",
        condition.message
    );
    world.wait_passes(5).await;
    let vms_during: Vec<String> = world.vms_of("edge").into_iter().map(|vm| vm.name).collect();
    assert_eq!(
        vms_during, vms_before,
        "nothing replaced while the datastore is away"
    );

    mariadb.resume();
    world
        .wait_for("Ready again once MariaDB is back", |s| ready(s, &["edge"]))
        .await;
    let vms_after: Vec<String> = world.vms_of("edge").into_iter().map(|vm| vm.name).collect();
    assert_eq!(vms_after, vms_before, "the same machines serve again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_k3s_server_on_the_embedded_sqlite_needs_no_datastore() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let single = seed_k3s_cluster()
        .replace(", datastore: {server: mariadb, database: k3s_edge}", "")
        .replace("replicas: 3", "replicas: 1");
    let mut world = World::with_lab(
        k3s_lab(),
        &fleet_yaml(&["1.36"], false),
        &[("edge", single)],
        false,
    )
    .await;
    world.start_daemon().await;
    world
        .wait_for("the single-server K3s cluster Ready", |s| {
            ready(s, &["edge"])
        })
        .await;
    let delivered = world.flux_kubeconfig("edge").expect("the Flux Secret");
    let file = world.state.path().join("edge-from-flux.kubeconfig");
    std::fs::write(&file, &delivered).expect("write kubeconfig");
    let listed = kubectl_with(&file, &["get", "nodes", "--no-headers"]);
    let ready_nodes = listed
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
        .count();
    assert_eq!(ready_nodes, 3, "one server and two agents:\n{listed}");
}

/// The seed's cluster on a kine DSN the user gives whole (`endpointFrom: {file}`, in the
/// cluster's folder of the daemon's `--secrets-dir`), on a database and user made by hand, as
/// a DBA would; the DSN carries `password`. The folder returned holds the DSN file: it must
/// live as long as the world (the daemon reads the DSN at each install).
async fn given_world(mariadb: &MariaDb, password: &str) -> (World, tempfile::TempDir) {
    mariadb.sql(
        "CREATE DATABASE kine_given; \
         CREATE USER 'given'@'%' IDENTIFIED BY 'given-pw-4b1d'; \
         GRANT ALL PRIVILEGES ON kine_given.* TO 'given'@'%';",
    );
    let dsn_dir = tempfile::tempdir().expect("temporary folder");
    std::fs::create_dir_all(dsn_dir.path().join("clusters/edge")).expect("the cluster's folder");
    let dsn_file = dsn_dir.path().join("clusters/edge/k3s-dsn");
    let address = mariadb.address();
    std::fs::write(
        &dsn_file,
        format!("mysql://given:{password}@tcp({address})/kine_given\n"),
    )
    .expect("write the DSN");
    let cluster = seed_k3s_cluster().replace(
        "datastore: {server: mariadb, database: k3s_edge}",
        &format!(
            "datastore: {{endpointFrom: {{file: {}}}}}",
            dsn_file.display()
        ),
    );
    let mut world = World::with_lab(k3s_lab(), &fleet(mariadb), &[("edge", cluster)], true).await;
    world
        .datastore_passwords
        .insert("mariadb".to_owned(), mariadb.root_password.clone());
    let policy = capstan::secrets::SecretPolicy::new("CAPSTAN_", Some(dsn_dir.path()))
        .expect("the secrets folder");
    world.secret_reader =
        capstan::secrets::SecretReader::new(std::sync::Arc::new(policy), |_| None);
    (world, dsn_dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kine_dsn_given_whole_brings_the_cluster_up_on_its_database() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let mariadb = MariaDb::start();
    let (mut world, _dsn) = given_world(&mariadb, "given-pw-4b1d").await;
    world.start_daemon().await;
    let status = world
        .wait_for("the K3s cluster Ready on the given DSN", |s| {
            ready(s, &["edge"])
        })
        .await;
    let registered =
        mariadb.sql("SELECT COUNT(*) FROM kine_given.kine WHERE name LIKE '/registry/minions/%'");
    assert_eq!(
        registered, "3\n",
        "the three servers registered in the given database"
    );
    assert_eq!(
        mariadb.sql("SELECT COUNT(*) FROM mysql.user WHERE User = 'k3s_edge'"),
        "0\n",
        "capstan provisioned nothing on a datastore given whole"
    );
    let text = serde_json::to_string(&status).expect("json");
    assert!(
        !text.contains("given-pw-4b1d"),
        "the DSN's password is in no status"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_kine_dsn_is_refused_before_any_clone_with_mariadbs_error() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let mariadb = MariaDb::start();
    let (mut world, _dsn) = given_world(&mariadb, "not-the-given-pw").await;
    world.start_daemon().await;
    let text = refusal_in_status(&world, "the DSN's refusal in the status").await;
    assert!(
        text.contains("datastore `endpointFrom`")
            && text.contains("the cluster's user `given`")
            && text.contains("ERROR 1045 (28000)"),
        "the refusal names the given datastore, its user and MariaDB's error: {text}"
    );
    assert!(
        !text.contains("not-the-given-pw"),
        "no password in the status"
    );
    assert_nothing_cloned(&world).await;
}

/// Three more passes, and still no clone was ever asked of Proxmox and `edge` has no VM.
async fn assert_nothing_cloned(world: &World) {
    world.wait_passes(3).await;
    let clones = world
        .lab
        .proxmox()
        .exchanges()
        .into_iter()
        .filter(|e| e.template.ends_with("/clone"))
        .count();
    assert_eq!(clones, 0, "no clone was ever asked of Proxmox");
    assert!(world.vms_of("edge").is_empty(), "no VM of the cluster");
}

/// The `edge` cluster Ready on `mariadb`, on a lab whose K3s template has a second copy named
/// `template` on every node (carrying the K3s release `k3s`, or the same one), for a test to
/// move the cluster to.
async fn edge_ready_with_template(mariadb: &MariaDb, template: &str, k3s: Option<&str>) -> World {
    let mut config = k3s_lab();
    let mut templates = config.proxmox.templates.clone().unwrap_or_default();
    let copies: Vec<WorldTemplate> = templates
        .iter()
        .filter(|t| t.name == "debian13-k3s")
        .map(|t| WorldTemplate {
            name: template.into(),
            vmid: t.vmid + 100,
            k3s: k3s.map(str::to_owned).or_else(|| t.k3s.clone()),
            ..t.clone()
        })
        .collect();
    templates.extend(copies);
    config.proxmox.templates = Some(templates);
    let mut world = World::with_lab(
        config,
        &fleet(mariadb),
        &[("edge", seed_k3s_cluster())],
        false,
    )
    .await;
    world
        .datastore_passwords
        .insert("mariadb".to_owned(), mariadb.root_password.clone());
    world.start_daemon().await;
    world
        .wait_for("the K3s cluster Ready", |s| ready(s, &["edge"]))
        .await;
    world
}

/// Waits until edge's status carries MariaDB's "Access denied"; returns that status as JSON.
async fn refusal_in_status(world: &World, what: &str) -> String {
    let status = world
        .wait_for(what, |s| {
            s.clusters.get("edge").is_some_and(|c| {
                serde_json::to_string(c)
                    .expect("json")
                    .contains("Access denied for user")
            })
        })
        .await;
    serde_json::to_string(&status.clusters["edge"]).expect("json")
}

/// `capstan run --lab` (the real binary, whose environment holds another cluster's DSN): the
/// cluster file naming that variable is refused with its line, field and the variable it may
/// use, and capstan neither reads the DSN nor connects where it points, pass after pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clusters_endpoint_from_cannot_read_another_clusters_dsn() {
    use crate::real_connections::{Hostile, free_port, status_until};
    let repo = tempfile::tempdir().expect("repo");
    std::fs::create_dir(repo.path().join("clusters")).expect("clusters");
    std::fs::write(
        repo.path().join("capstan.yaml"),
        fleet_yaml(&["1.36"], false),
    )
    .expect("capstan.yaml");
    let edge = seed_k3s_cluster().replace(
        "datastore: {server: mariadb, database: k3s_edge}",
        "datastore: {endpointFrom: {env: CAPSTAN_CLUSTER_PROD_DATASTORE_ENDPOINT}}",
    );
    std::fs::write(repo.path().join("clusters/edge.yaml"), edge).expect("edge.yaml");
    // A cluster to build meanwhile, so passes come every --busy-interval.
    std::fs::write(
        repo.path().join("clusters/prod.yaml"),
        capstan_testkit::cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s"),
    )
    .expect("prod.yaml");
    let prods_datastore = Hostile::bind();
    let state = tempfile::tempdir().expect("state");
    let port = free_port();
    let mut daemon = std::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["run", "--lab", "--repo"])
        .arg(repo.path())
        .arg("--state-dir")
        .arg(state.path())
        .args(["--http", &format!("127.0.0.1:{port}")])
        .env(
            "CAPSTAN_CLUSTER_PROD_DATASTORE_ENDPOINT",
            format!(
                "mysql://prod:prod-pw-9c1e@tcp(127.0.0.1:{})/kine_prod",
                prods_datastore.port()
            ),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("capstan run starts");
    let status = status_until(&mut daemon, port, "edge refused", |s| {
        s["repositoryErrors"]
            .as_array()
            .is_some_and(|errors| !errors.is_empty())
    })
    .await;
    let errors = status["repositoryErrors"].to_string();
    assert!(
        errors.contains("clusters/edge.yaml:6:")
            && errors.contains("spec.kubernetes.datastore.endpointFrom")
            && errors.contains("CAPSTAN_CLUSTER_PROD_DATASTORE_ENDPOINT")
            && errors.contains("name it CAPSTAN_CLUSTER_EDGE_DATASTORE_ENDPOINT"),
        "{errors}"
    );
    assert!(!errors.contains("prod-pw-9c1e"));
    // Once prod is built, pass after pass, nothing of edge was built and its DSN's server
    // never heard from capstan.
    let status = status_until(&mut daemon, port, "prod Ready", |s| {
        s["clusters"]["prod"]["phase"] == "Ready"
    })
    .await;
    assert_eq!(status["clusters"]["edge"]["phase"], "Blocked", "{status:#}");
    assert_eq!(
        status["clusters"]["edge"]["nodes"],
        serde_json::json!([]),
        "{status:#}"
    );
    assert!(
        !prods_datastore.was_contacted(),
        "capstan connected to the DSN of another cluster"
    );
    let _ = daemon.kill();
    let _ = daemon.wait();
}

/// K3s's critical values must be equal on every server, and on an external datastore K3s
/// does not refuse a mismatch: a new server whose `disable: servicelb` differs from the
/// running servers' is refused by capstan before it starts, naming the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_critical_values_differ_from_the_running_ones_is_refused_before_it_starts() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let mariadb = MariaDb::start();
    let world = edge_ready_with_template(&mariadb, "debian13-k3s-b", None).await;
    let servers_before: Vec<String> = world
        .nodes_of("edge")
        .into_iter()
        .filter(|n| n.control_plane)
        .map(|n| n.name)
        .collect();
    let changed = seed_k3s_cluster().replacen(
        "  controlPlane:\n",
        "  patches:\n    - disable: [servicelb]\n  controlPlane:\n",
        1,
    );
    assert!(changed.contains("servicelb"), "the seed cluster changed");
    world.write_cluster("edge", &changed);
    let status = world
        .wait_for("the new server refused", |s| {
            serde_json::to_string(&s.clusters["edge"])
                .expect("json")
                .contains("critical values disable differ")
        })
        .await;
    let text = serde_json::to_string(&status.clusters["edge"]).expect("json");
    assert!(text.contains("every server must have the same"), "{text}");
    let servers_now: Vec<String> = world
        .nodes_of("edge")
        .into_iter()
        .filter(|n| n.control_plane && n.ready)
        .map(|n| n.name)
        .collect();
    for server in &servers_before {
        assert!(
            servers_now.contains(server),
            "{server} still serves: {servers_now:?}"
        );
    }
}
