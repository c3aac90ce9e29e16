//! K3s datastores on a real MariaDB (Debian's `mariadbd`, started by the test): capstan's
//! preflight, its provisioning of a database and a user limited to it, the kine DSN that user
//! connects with, and the K3s secrets kept in the management cluster's `capstan-system`.

use std::process::Command;

use crate::kube_support::{drain_world, lab};
use capstan::providers::datastore::{AdminAccess, DatastoreError, KineEndpoint, generate_secret};
use capstan::providers::kube::KubeClusterClient;
use capstan::records::NAMESPACE;
use capstan::records::k3s::{self as k3s_records, K3sSecrets, k3s_secrets};
use capstan::spec::{DatastoreServer, SecretSource};
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::mariadb::MariaDb;

fn admin(server: &MariaDb, password: &str) -> AdminAccess {
    let declared = DatastoreServer {
        url: server.url(),
        admin_user: "root".to_owned(),
        admin_password_from: SecretSource::Env("CAPSTAN_MARIADB_ROOT_PASSWORD".to_owned()),
    };
    AdminAccess::new(&declared, password.to_owned()).expect("a mysql:// URL")
}

/// Runs `sql` with the stock `mariadb` client over TCP as `user`, as K3s's kine would connect.
fn as_user(server: &MariaDb, user: &str, password: &str, sql: &str) -> (bool, String) {
    let out = Command::new("mariadb")
        .arg("--no-defaults")
        .args([
            "--protocol=TCP",
            "--host=127.0.0.1",
            "--batch",
            "--skip-column-names",
        ])
        .arg(format!("--port={}", server.address().port()))
        .arg(format!("--user={user}"))
        .arg(format!("--password={password}"))
        .args(["-e", sql])
        .output()
        .expect("run the mariadb client");
    let text = String::from_utf8_lossy(if out.status.success() {
        &out.stdout
    } else {
        &out.stderr
    })
    .into_owned();
    (out.status.success(), text)
}

#[tokio::test]
async fn capstan_provisions_a_database_and_a_user_limited_to_it_twice_without_change() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let server = MariaDb::start();
    let access = admin(&server, &server.root_password);
    let version = access.preflight().await.expect("root answers");
    assert!(version.contains("MariaDB"), "{version}");

    let password = generate_secret().expect("random");
    let endpoint = access
        .provision("k3s_edge", &password)
        .await
        .expect("provisioned");
    let again = access
        .provision("k3s_edge", &password)
        .await
        .expect("idempotent");
    assert_eq!(endpoint, again);
    assert_eq!(
        server.sql("SELECT User, Host FROM mysql.user WHERE User = 'k3s_edge'"),
        "k3s_edge\t%\n",
        "one user, whatever address the K3s servers connect from"
    );
    assert!(!format!("{endpoint} {endpoint:?} {access:?}").contains(&password));
    assert!(!format!("{access:?}").contains(&server.root_password));

    endpoint
        .check()
        .await
        .expect("the cluster's user reaches its database");
    let (ok, _) = as_user(
        &server,
        "k3s_edge",
        &password,
        "CREATE TABLE k3s_edge.probe (id INT)",
    );
    assert!(ok, "the user owns its database");
    let (ok, err) = as_user(&server, "k3s_edge", &password, "CREATE DATABASE other");
    assert!(
        !ok && err.contains("ERROR 1044"),
        "limited to its database: {err}"
    );
    let (ok, err) = as_user(&server, "k3s_edge", &password, "SELECT * FROM mysql.user");
    assert!(
        !ok && err.contains("denied"),
        "sees no other database: {err}"
    );

    let parsed = KineEndpoint::parse(&endpoint.dsn()).expect("kine's form");
    assert_eq!(parsed, endpoint);
    assert!(endpoint.dsn().contains(&format!(
        "@tcp(127.0.0.1:{})/k3s_edge",
        server.address().port()
    )));
}

#[tokio::test]
async fn wrong_admin_credentials_are_refused_with_the_mariadb_error_and_no_password() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let server = MariaDb::start();
    let err = admin(&server, "not-the-root-password")
        .preflight()
        .await
        .expect_err("wrong password");
    assert!(!err.is_transient(), "a refusal, not an outage: {err}");
    let text = err.to_string();
    assert!(
        text.contains("refused admin user `root`: ERROR 1045 (28000): Access denied for user 'root'@'127.0.0.1' (using password: YES)"),
        "{text}"
    );
    assert!(!text.contains("not-the-root-password"), "{text}");
    assert_eq!(
        server.sql("SHOW DATABASES LIKE 'k3s%'"),
        "",
        "nothing was created"
    );
}

#[tokio::test]
async fn a_given_dsn_is_checked_as_its_own_user_and_an_unknown_database_is_named() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let server = MariaDb::start();
    let port = server.address().port();
    let dsn = format!(
        "mysql://root:{}@tcp(127.0.0.1:{port})/nowhere",
        server.root_password
    );
    let err = KineEndpoint::parse(&dsn)
        .expect("kine's form")
        .check()
        .await
        .expect_err("no such database");
    assert!(
        err.to_string()
            .contains("ERROR 1049 (42000): Unknown database 'nowhere'"),
        "{err}"
    );
    server.sql("CREATE DATABASE given");
    let dsn = dsn.replace("/nowhere", "/given");
    KineEndpoint::parse(&dsn)
        .expect("kine's form")
        .check()
        .await
        .expect("the user's own DSN works");
}

#[tokio::test]
async fn a_stopped_datastore_does_not_answer_and_answers_again_once_back() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let mut server = MariaDb::start();
    let access = admin(&server, &server.root_password);
    server.stop();
    let err = access.preflight().await.expect_err("down");
    assert!(matches!(err, DatastoreError::Unreachable { .. }), "{err}");
    assert!(err.is_transient());
    assert!(
        err.to_string()
            .starts_with(&format!("datastore {} does not answer", server.address())),
        "{err}"
    );
    server.resume();
    access.preflight().await.expect("back");
}

#[tokio::test]
async fn the_k3s_token_and_datastore_password_are_generated_once_and_found_after_a_restart() {
    let lab = lab(&drain_world(false)).await;
    let management = lab.management().expect("management");
    let client = KubeClusterClient::connect(&management.admin_kubeconfig())
        .await
        .expect("management client");
    let first: K3sSecrets = k3s_secrets(&client, "edge", None, false)
        .await
        .expect("generated");
    assert_eq!(first.token.len(), 64);
    assert_ne!(first.token, first.datastore_password);
    let debug = format!("{first:?}");
    assert!(!debug.contains(&first.token) && !debug.contains(&first.datastore_password));

    // A restarted daemon has a new client and nothing in memory.
    let restarted = KubeClusterClient::connect(&management.admin_kubeconfig())
        .await
        .expect("management client");
    let found = k3s_secrets(&restarted, "edge", None, false)
        .await
        .expect("found");
    assert_eq!(
        found, first,
        "the same token: later servers must present it"
    );
    let stored = management
        .object(
            "secrets",
            Some(NAMESPACE),
            &k3s_records::secret_name("edge"),
        )
        .expect("a Secret in capstan-system");
    assert_eq!(
        stored["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "capstan"
    );
    let annotations = &stored["metadata"]["annotations"];
    assert_eq!(annotations["capstan.dev/record-kind"], "k3s-secrets");
    assert_eq!(annotations["capstan.dev/owner-cluster"], "edge");
    let identity = management
        .object("secrets", Some(NAMESPACE), "capstan-cluster-edge")
        .expect("the cluster's identity, minted with its first record");
    assert_eq!(
        annotations["capstan.dev/cluster-uid"],
        identity["metadata"]["annotations"]["capstan.dev/cluster-uid"]
    );
    use capstan::records::flux::{FluxDeliverer, KubeconfigDelivery};
    let held = FluxDeliverer::new(
        restarted.clone(),
        capstan::fingerprint::FingerprintKey::derive([]),
    )
    .held()
    .await
    .expect("listed");
    assert!(
        held.iter().all(|(target, _)| target.namespace != NAMESPACE),
        "the token's Secret is not taken for a delivered kubeconfig: {held:?}"
    );
    let other = k3s_secrets(&restarted, "edge2", None, false)
        .await
        .expect("generated");
    assert_ne!(other.token, first.token, "each cluster its own token");
}

#[tokio::test]
async fn k3s_secrets_an_earlier_capstan_left_serve_only_a_cluster_that_was_running() {
    use capstan::providers::kube::ClusterClient as _;
    let lab = lab(&drain_world(false)).await;
    let management = lab.management().expect("management");
    let client = KubeClusterClient::connect(&management.admin_kubeconfig())
        .await
        .expect("management client");
    // As capstan wrote them before records carried a kind and an identity.
    let legacy = |cluster: &str| capstan::providers::kube::SecretRecord {
        data: std::collections::BTreeMap::from([
            (
                "k3s-token".to_owned(),
                b"0123456789abcdef0123456789abcdef".to_vec(),
            ),
            (
                "datastore-password".to_owned(),
                b"fedcba9876543210fedcba9876543210".to_vec(),
            ),
        ]),
        labels: std::collections::BTreeMap::from([(
            "app.kubernetes.io/managed-by".to_owned(),
            "capstan".to_owned(),
        )]),
        annotations: std::collections::BTreeMap::from([(
            "capstan.dev/k3s-cluster".to_owned(),
            cluster.to_owned(),
        )]),
        resource_version: None,
    };
    for cluster in ["old", "live"] {
        client
            .write_secret(
                NAMESPACE,
                &k3s_records::secret_name(cluster),
                &legacy(cluster),
            )
            .await
            .expect("a legacy record");
    }
    // A new cluster of a deleted one's name (no server seen yet): its token is not taken.
    let err = k3s_secrets(&client, "old", None, false)
        .await
        .expect_err("a leftover");
    let chain = capstan::errors::error_chain(&err);
    assert!(
        chain.contains("Secret capstan-system/capstan-k3s-old is a `k3s-secrets` record of cluster `old` made before records carried an identity")
            && chain.contains("delete it for the cluster to start with secrets of its own"),
        "{chain}"
    );
    // A running cluster keeps its token: the record is adopted.
    let kept = k3s_secrets(&client, "live", None, true)
        .await
        .expect("adopted");
    assert_eq!(kept.token, "0123456789abcdef0123456789abcdef");
    let stored = management
        .object(
            "secrets",
            Some(NAMESPACE),
            &k3s_records::secret_name("live"),
        )
        .expect("kept");
    assert_eq!(
        stored["metadata"]["annotations"]["capstan.dev/record-kind"],
        "k3s-secrets"
    );
    assert!(
        stored["metadata"]["annotations"]["capstan.dev/cluster-uid"].is_string(),
        "{stored}"
    );
}
