//! What a hostile workload VM sends back never carries a secret into the status, the Blocked
//! condition or the log: its guest agent answers the K3s install with an error that echoes
//! everything capstan sent the VM (the command line and every file written), and the daemon
//! reports that error with the K3s token and the generated datastore password as `***`.
//!
//! The runtime is single-threaded so that the log of this test alone can be captured (a
//! subscriber set for the thread sees every task of the daemon and the lab).

use base64::Engine as _;
use capstan::status::{FleetStatus, Phase};

use capstan_lab::world::LabConfig;
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::log::CapturedLog;
use capstan_testkit::mariadb::{MariaDb, seed_k3s_cluster};
use capstan_testkit::{World, fleet_yaml};

/// A K3s secret capstan generated and keeps in the management cluster.
fn generated(world: &World, key: &str) -> String {
    let management = world.lab.kube().management().expect("management cluster");
    let secret = management
        .object("secrets", Some("capstan-system"), "capstan-k3s-edge")
        .expect("capstan's K3s Secret");
    let encoded = secret["data"][key].as_str().expect("the key");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    String::from_utf8(bytes).expect("text")
}

/// Starts the daemon on `world`, whose K3s servers' agents echo what they got, and waits
/// until `edge` is Blocked on it; returns the status and the secrets that must not show.
async fn blocked_by_a_hostile_guest(
    world: &mut World,
    keys: &[&str],
) -> (FleetStatus, Vec<String>) {
    world.lab.faults().hostile_agent("capstan-edge-cp-*", "env");
    world.start_daemon().await;
    let status = world
        .wait_for("edge Blocked on its hostile servers", |s| {
            s.clusters
                .get("edge")
                .is_some_and(|c| c.phase == Phase::Blocked)
        })
        .await;
    let secrets = keys.iter().map(|key| generated(world, key)).collect();
    (status, secrets)
}

/// Nothing of `secrets` in the status or the log; the echo is there, redacted.
fn assert_only_stars(status: &FleetStatus, log: &str, secrets: &[String]) {
    let served = serde_json::to_string(status).expect("status serialises");
    for secret in secrets {
        assert!(
            !served.contains(secret.as_str()),
            "a secret in /status: {served}"
        );
        assert!(
            !log.contains(secret.as_str()),
            "a secret in the log:\n{log}"
        );
    }
    let edge = &status.clusters["edge"];
    let last = edge.last_step.as_ref().expect("the failing step");
    assert!(
        last.message.contains("Agent error") && last.message.contains("token: \"***\""),
        "the guest's echo is reported, redacted: {}",
        last.message
    );
    let blocked = edge
        .conditions
        .iter()
        .find(|c| c.kind == "Blocked")
        .expect("Blocked condition");
    assert!(
        blocked.status == "True" && blocked.message.contains("token: \"***\""),
        "{blocked:?}"
    );
    assert!(
        log.contains("step failed") && log.contains("token: \"***\""),
        "the failure is logged, redacted:\n{log}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_k3s_token_echoed_by_a_hostile_guest_reaches_status_blocked_and_log_only_as_stars() {
    let single = seed_k3s_cluster()
        .replace(", datastore: {server: mariadb, database: k3s_edge}", "")
        .replace("replicas: 3", "replicas: 1");
    let mut world = World::with_lab(
        LabConfig::default(),
        &fleet_yaml(&["1.36"], false),
        &[("edge", single)],
        false,
    )
    .await;
    let (log, _guard) = CapturedLog::capture(tracing::Level::INFO);
    let (status, secrets) = blocked_by_a_hostile_guest(&mut world, &["k3s-token"]).await;
    assert_only_stars(&status, &log.text(), &secrets);
}

#[tokio::test(flavor = "current_thread")]
async fn a_generated_datastore_password_echoed_by_a_hostile_guest_never_shows() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let mariadb = MariaDb::start();
    let fleet = format!(
        "{}{}",
        fleet_yaml(&["1.36"], false),
        mariadb.datastores_yaml()
    );
    let mut world = World::with_lab(
        LabConfig::default(),
        &fleet,
        &[("edge", seed_k3s_cluster())],
        false,
    )
    .await;
    world
        .datastore_passwords
        .insert("mariadb".to_owned(), mariadb.root_password.clone());
    let (log, _guard) = CapturedLog::capture(tracing::Level::INFO);
    let (status, secrets) =
        blocked_by_a_hostile_guest(&mut world, &["k3s-token", "datastore-password"]).await;
    let log = log.text();
    assert_only_stars(&status, &log, &secrets);
    let last = &status.clusters["edge"]
        .last_step
        .as_ref()
        .expect("step")
        .message;
    assert!(
        last.contains("datastore-endpoint: \"mysql://k3s_edge:***@tcp("),
        "{last}"
    );
}
