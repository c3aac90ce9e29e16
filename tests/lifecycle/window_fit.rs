//! Changes that fit their window, on the lab: a certificate renewal measured at 3 minutes (the
//! lab clock moved on while it ran) is due again inside a 2-minute allow window; it does not
//! start there, the status says why and when it will, `capstan preview` against the daemon
//! says the change needs the next window, and in that window it runs.

use std::time::Duration;

use capstan::clock::Clock as _;
use capstan_lab::values::LabDuration;
use capstan_lab::world::LabConfig;
use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};
use jiff::{SignedDuration, Timestamp};

const CLUSTER: &str = "fit";
/// How long the lab clock moves on while the first renewal runs: what the daemon measures.
const RENEWAL: Duration = Duration::from_secs(180);

/// The lab cluster, its certificates renewed 363 days before they expire: two days after
/// each renewal, one is due again (the lab's management credentials do not last two years).
fn spec(workers: u32) -> String {
    cluster_yaml(CLUSTER, 43, "1.36.2", workers, "debian13-k8s").replacen(
        "  delivery:",
        "  certificates: {renewBefore: 363d}\n  delivery:",
        1,
    )
}

/// `spec` with two allow windows: 2 minutes from `short`, 4 hours from `long` (UTC).
fn with_windows(workers: u32, short: Timestamp, long: Timestamp) -> String {
    let cron = |at: Timestamp| at.strftime("0 %M %H %d %m *").to_string();
    let windows = format!(
        "  maintenance:\n    allow:\n      - {{schedule: \"{}\", duration: 2m}}\n      - {{schedule: \"{}\", duration: 4h}}\n  delivery:",
        cron(short),
        cron(long)
    );
    spec(workers).replacen("  delivery:", &windows, 1)
}

/// When a renewal is due for certificates expiring at `expiry`.
fn due(expiry: Timestamp) -> Timestamp {
    expiry - SignedDuration::from_hours(363 * 24)
}

/// Moves the lab clock to `at`.
fn move_to(world: &World, at: Timestamp) {
    let clock = world.lab.clock();
    clock.advance(Duration::try_from(clock.now().duration_until(at)).expect("ahead"));
}

fn renewals_waiting(world: &World) -> Vec<String> {
    world
        .status()
        .clusters
        .get(CLUSTER)
        .map(|c| {
            c.waiting_on
                .iter()
                .filter(|w| w.step.is_some_and(|s| s.name() == "renew-certificates"))
                .map(|w| w.resource.clone())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_measured_at_3_minutes_waits_out_a_2_minute_window_and_runs_in_the_next() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = LabConfig::default();
    // The renewal runs long enough (real time) for the test to move the lab clock meanwhile.
    config.proxmox.timings.kubeadm_upgrade = LabDuration(Duration::from_millis(1500));
    let mut world = World::with_lab(
        config,
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, spec(2))],
        false,
    )
    .await;
    world.start_daemon().await;
    let status = world
        .wait_for("the cluster Ready", |s| ready(s, &[CLUSTER]))
        .await;
    let expiry = status.clusters[CLUSTER]
        .certificate_expiry
        .expect("the certificate expiry");

    // A first renewal, with no window: the lab clock moves on 3 minutes while it runs, so
    // the daemon measures it at 3 minutes and some.
    let clock = world.lab.clock().clone();
    move_to(&world, due(expiry) + SignedDuration::from_mins(1));
    world
        .wait_for("the renewal started", |s| {
            s.clusters[CLUSTER]
                .next_steps
                .iter()
                .any(|step| step == "renew-certificates")
        })
        .await;
    clock.advance(RENEWAL);
    let status = world
        .wait_for("the certificates renewed", |s| {
            s.clusters[CLUSTER]
                .certificate_expiry
                .is_some_and(|e| e > expiry)
        })
        .await;
    assert_eq!(world.steps_ok("renew-certificates"), 1);
    let expiry = status.clusters[CLUSTER]
        .certificate_expiry
        .expect("the new expiry");

    // The next renewal is due two days later. A 2-minute window opens an hour after that, a
    // 4-hour one a day later.
    let short = (due(expiry) + SignedDuration::from_hours(1))
        .round(jiff::Unit::Minute)
        .expect("rounded");
    let long = short + SignedDuration::from_hours(24);
    world.write_cluster(CLUSTER, &with_windows(2, short, long));
    world.wait_passes(3).await;
    move_to(&world, short + SignedDuration::from_secs(30));

    // Inside the short window, some 1m 30s left: the renewal, measured at 3m, does not start.
    let waits = world
        .wait_for("the renewal waiting for a window it fits in", |_| {
            !renewals_waiting(&world).is_empty()
        })
        .await;
    let reason = renewals_waiting(&world).join("; ");
    let next = long.strftime("%a %Y-%m-%d %H:%M UTC").to_string();
    assert!(
        reason.starts_with("maintenance window: renew-certificates needs 3m")
            && reason.contains("(p90 of 1 run(s)); 1m ")
            && reason.contains("s of the window left")
            && reason.ends_with(&format!("waits until {next}")),
        "{reason}\n{waits:#?}"
    );
    world.wait_passes(10).await;
    assert_eq!(
        world.steps_ok("renew-certificates"),
        1,
        "no renewal in the short window"
    );

    // `capstan preview` of a change (a third worker) against the daemon: the renewal needs
    // the next window.
    let address = capstan::daemon::http::serve("127.0.0.1:0".parse().expect("addr"), world.board())
        .await
        .expect("serve");
    let repo = capstan_testkit::git::preview_repo(
        world.repo.path(),
        CLUSTER,
        &with_windows(2, short, long),
        "worker",
        &with_windows(3, short, long),
    );
    let (now, server) = (clock.now().to_string(), format!("http://{address}"));
    let run = capstan_testkit::cli::preview(repo.path(), "worker", &server, &now, "json").await;
    run.assert_code(0);
    let preview: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    let estimate = &preview["clusters"][0]["estimate"];
    assert_eq!(
        estimate["windows"]["opens"],
        serde_json::json!([long.to_string()]),
        "{estimate:#}"
    );
    let explanation = estimate["explanation"].as_str().unwrap_or_default();
    assert!(
        explanation.contains("held for a window it fits in (renew-certificates needs 3m")
            && explanation.contains(&format!("): starts {next}"))
            && explanation.contains("fits 3m")
            && explanation.contains(&format!("of the 4h window at {next}")),
        "{explanation}"
    );

    // In the next window it runs.
    move_to(&world, long + SignedDuration::from_secs(10));
    world
        .wait_for("the renewal in the long window", |_| {
            world.steps_ok("renew-certificates") == 2
        })
        .await;
}
