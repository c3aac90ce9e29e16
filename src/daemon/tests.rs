use super::*;
use crate::connect::Connections;

fn cluster_text(replicas: u32) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: x}}\nspec:\n  proxmox: p\n  kubernetes: {{version: 1.36.2}}\n  endpoint: {{host: k.example, address: 10.0.0.5}}\n  network: {{nodes: 10.0.0.0/24}}\n  controlPlane:\n    machine: {{template: t, cores: 2, memoryMiB: 4096, placement: [a]}}\n  workers:\n    - {{pool: w, replicas: {replicas}, machine: {{template: t, cores: 2, memoryMiB: 4096, placement: [a]}}}}\n"
    )
}

fn spec(replicas: u32) -> crate::spec::ClusterSpec {
    serde_saphyr::from_str::<crate::spec::Cluster>(&cluster_text(replicas))
        .expect("cluster")
        .spec
}

/// A daemon over `repo` with no Proxmox or management cluster to reach.
async fn daemon(repo: &std::path::Path, resync: Option<Duration>) -> Daemon<Connections> {
    let fleet: crate::spec::Fleet =
        serde_saphyr::from_str("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n").expect("fleet");
    let connections = Connections::from_fleet(&fleet, &Default::default(), Default::default())
        .await
        .expect("nothing to connect to");
    let mut options = DaemonOptions::new(repo.to_owned());
    options.resync = resync;
    Daemon::new(
        options,
        Arc::new(connections),
        Arc::new(crate::clock::SystemClock),
    )
}

fn write_fleet(repo: &std::path::Path, poll_interval: &str) {
    let text = format!(
        "apiVersion: capstan.dev/v1alpha1\nkind: Fleet\nclustersDir: clusters\npollInterval: {poll_interval}\n"
    );
    std::fs::write(repo.join("capstan.yaml"), text).expect("capstan.yaml");
}

#[tokio::test]
async fn the_resync_interval_follows_the_fleet_files_current_poll_interval() {
    let repo = tempfile::tempdir().expect("repo");
    std::fs::create_dir(repo.path().join("clusters")).expect("clusters");
    write_fleet(repo.path(), "2m");
    let mut daemon = daemon(repo.path(), None).await;
    assert!(daemon.pass().await, "an empty fleet is idle");
    assert_eq!(daemon.resync_interval(), Duration::from_secs(120));

    write_fleet(repo.path(), "5m");
    daemon.pass().await;
    assert_eq!(
        daemon.resync_interval(),
        Duration::from_secs(300),
        "a changed pollInterval applies from the next pass, not the next restart"
    );
}

#[tokio::test]
async fn a_resync_interval_set_in_the_daemon_options_wins_over_the_fleet_file() {
    let repo = tempfile::tempdir().expect("repo");
    std::fs::create_dir(repo.path().join("clusters")).expect("clusters");
    write_fleet(repo.path(), "2m");
    let mut daemon = daemon(repo.path(), Some(Duration::from_secs(15))).await;
    daemon.pass().await;
    write_fleet(repo.path(), "5m");
    daemon.pass().await;
    assert_eq!(daemon.resync_interval(), Duration::from_secs(15));
}

#[test]
fn a_failing_cluster_waits_out_its_backoff_unless_its_file_changed() {
    let retry = Retry {
        failures: 3,
        not_before: Some(Instant::now() + Duration::from_secs(300)),
        failed_with: Some(spec(2)),
        last: None,
    };
    assert!(!retry.allows(Some(&spec(2))), "the same spec waits");
    assert!(
        retry.allows(Some(&spec(3))),
        "a changed spec is tried at once"
    );
    assert!(
        Retry::default().allows(Some(&spec(2))),
        "no failure, no wait"
    );
}

/// The name of the issue's report: a path, a quote, newlines and a metric line.
const HOSTILE_NAME: &str = "x/../../y\"} 1\ninjected_metric{a=\"b\"} 42\n#";

/// Every line of an exposition is a comment or a sample of a `capstan_` metric.
fn assert_only_capstan_samples(exposition: &str) {
    for line in exposition.lines() {
        assert!(
            line.starts_with('#') || line.starts_with("capstan_"),
            "a line that is no capstan metric: {line:?} in\n{exposition}"
        );
    }
}

#[tokio::test]
async fn an_invalid_file_is_reported_under_its_path_never_under_its_name() {
    let repo = tempfile::tempdir().expect("repo");
    std::fs::create_dir(repo.path().join("clusters")).expect("clusters");
    write_fleet(repo.path(), "2m");
    let name = serde_json::to_string(HOSTILE_NAME).expect("json");
    // It parses (only validation refuses it: its name, its unknown connection).
    let text = cluster_text(2).replace(
        "metadata: {name: x}",
        &format!("metadata: {{name: {name}}}"),
    );
    assert!(text.contains("injected_metric"));
    std::fs::write(repo.path().join("clusters/evil.yaml"), text).expect("evil.yaml");
    let mut daemon = daemon(repo.path(), None).await;
    daemon.pass().await;
    let status = daemon.board.status();
    assert!(
        status.clusters.is_empty(),
        "no cluster is named after an invalid file: {:?}",
        status.clusters.keys()
    );
    assert!(
        status
            .repository_errors
            .iter()
            .any(|e| e.starts_with("clusters/evil.yaml:")),
        "{:?}",
        status.repository_errors
    );
    assert_only_capstan_samples(&http::render_metrics(&daemon.board));
}

#[test]
fn label_values_are_escaped_in_the_metrics() {
    let board = StatusBoard::default();
    let mut status = FleetStatus::default();
    let cluster = crate::status::invalid_file("broken", None, None, jiff::Timestamp::UNIX_EPOCH);
    status.clusters.insert(HOSTILE_NAME.to_owned(), cluster);
    board.set(status);
    let exposition = http::render_metrics(&board);
    assert_only_capstan_samples(&exposition);
    assert!(
        exposition.contains(
            r#"capstan_cluster_phase{cluster="x/../../y\"} 1\ninjected_metric{a=\"b\"} 42\n#",phase="Blocked"} 1"#
        ),
        "{exposition}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_says_stalled_once_the_loop_stops_completing_passes() {
    let repo = tempfile::tempdir().expect("repo");
    std::fs::create_dir(repo.path().join("clusters")).expect("clusters");
    write_fleet(repo.path(), "2m");
    let mut daemon = daemon(repo.path(), Some(Duration::from_millis(100))).await;
    daemon.options.busy_interval = Duration::from_millis(100);
    daemon.options.stall_allowance = Duration::from_millis(700);
    assert_eq!(daemon.stale_after(), Duration::from_secs(1));
    let board = daemon.board();
    assert_eq!(board.health(), board::Health::Starting);
    let running = tokio::spawn(daemon.run(std::future::pending()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while board.health() != board::Health::Live {
        assert!(Instant::now() < deadline, "no pass completed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The loop stops: no pass completes any more.
    running.abort();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        matches!(board.health(), board::Health::Stalled { limit, .. } if limit == Duration::from_secs(1)),
        "{:?}",
        board.health()
    );
}

#[tokio::test]
async fn a_failed_steps_message_is_redacted_and_capped_before_the_status_and_the_log_see_it() {
    let repo = tempfile::tempdir().expect("repo");
    std::fs::create_dir(repo.path().join("clusters")).expect("clusters");
    write_fleet(repo.path(), "2m");
    let mut daemon = daemon(repo.path(), None).await;
    // A K3s token, generated as the executor generates it, quoted by a 20 KiB error.
    let token = crate::providers::datastore::generate_secret().expect("random");
    let message = format!("the guest said: token {token} {}", "x".repeat(20 * 1024));
    daemon.fail(
        "edge",
        None,
        Failure {
            action: ActionKind::JoinNode,
            machine: None,
            message,
            transient: false,
            revision: "r1".to_owned(),
            refusal: None,
        },
    );
    let last = daemon.retries["edge"].last.as_ref().expect("recorded");
    assert!(
        last.message.starts_with("the guest said: token *** xxx"),
        "{}",
        &last.message[..80]
    );
    let (kept, cut) = last.message.split_once('…').expect("capped");
    assert!(kept.len() <= crate::redact::MESSAGE_CAP, "{}", kept.len());
    assert!(cut.ends_with(" bytes cut)"), "{cut}");
}

#[test]
fn a_published_status_carries_no_secret_capstan_knows() {
    let password = crate::providers::datastore::generate_secret().expect("random");
    let board = StatusBoard::default();
    let quoting = format!("datastore refused k3s_edge/{password}");
    board.set(FleetStatus {
        repository_errors: vec![quoting.clone()],
        events: vec![quoting.clone()],
        findings: vec![quoting.clone()],
        ..FleetStatus::default()
    });
    board.set_condition(crate::status::Condition {
        kind: "StatusPushed".to_owned(),
        status: "False".to_owned(),
        reason: "PushRefused".to_owned(),
        message: quoting,
        last_transition_time: jiff::Timestamp::UNIX_EPOCH,
    });
    let served = serde_json::to_string(&board.status()).expect("json");
    assert!(!served.contains(&password), "{served}");
    assert_eq!(served.matches("k3s_edge/***").count(), 4, "{served}");
}

#[tokio::test]
async fn a_step_stopped_by_a_lost_lease_is_no_failure_and_sets_no_backoff() {
    let repo = tempfile::tempdir().expect("repo");
    let mut daemon = daemon(repo.path(), None).await;
    let stopped = crate::fence::NotLeading {
        before: "destroying VM 101".to_owned(),
    };
    daemon.record(Finished {
        cluster: "prod".to_owned(),
        revision: "r1".to_owned(),
        spec: None,
        outcome: Some(StepOutcome {
            action: ActionKind::DestroyMachine,
            machine: None,
            result: Err(ExecuteError::NotLeading(stopped)),
            took: Duration::from_millis(5),
        }),
    });
    let retry = daemon.retries.get("prod").expect("recorded");
    assert_eq!(retry.failures, 0, "not counted toward Blocked");
    assert!(retry.not_before.is_none(), "no backoff");
    let last = retry.last.as_ref().expect("the last step");
    assert_eq!(
        last.message,
        "stopped before destroying VM 101: this replica no longer leads"
    );
    assert_eq!(
        daemon
            .board
            .counters()
            .steps
            .get(&(ActionKind::DestroyMachine, "stopped")),
        Some(&1)
    );
}

/// Commits a fleet file polling every `poll_interval` (and an empty clusters folder) on
/// `main` of the bare repository `remote`.
fn commit_fleet(remote: &git2::Repository, poll_interval: &str) {
    let fleet = format!(
        "apiVersion: capstan.dev/v1alpha1\nkind: Fleet\nclustersDir: clusters\npollInterval: {poll_interval}\n"
    );
    let blob = remote.blob(fleet.as_bytes()).expect("blob");
    let keep = remote.blob(b"").expect("blob");
    let mut clusters = remote.treebuilder(None).expect("tree");
    clusters.insert(".keep", keep, 0o100_644).expect("insert");
    let clusters = clusters.write().expect("tree");
    let mut root = remote.treebuilder(None).expect("tree");
    root.insert("capstan.yaml", blob, 0o100_644)
        .expect("insert");
    root.insert("clusters", clusters, 0o040_000)
        .expect("insert");
    let tree = remote.find_tree(root.write().expect("tree")).expect("tree");
    let who = git2::Signature::new("t", "t@example", &git2::Time::new(0, 0)).expect("sig");
    let parent = remote
        .refname_to_id("refs/heads/main")
        .ok()
        .map(|id| remote.find_commit(id).expect("parent"));
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    remote
        .commit(
            Some("refs/heads/main"),
            &who,
            &who,
            &format!("pollInterval: {poll_interval}"),
            &tree,
            &parents,
        )
        .expect("commit");
}

#[tokio::test(start_paused = true)]
async fn a_revision_that_shortens_the_poll_interval_is_followed_by_a_poll_within_the_new_one() {
    let dir = tempfile::tempdir().expect("dir");
    let remote = git2::Repository::init_bare(dir.path().join("remote.git")).expect("remote");
    commit_fleet(&remote, "5m");
    let options = crate::source::git::GitOptions {
        url: format!("file://{}", dir.path().join("remote.git").display()),
        branch: "main".to_owned(),
        path: None,
        mirror_root: dir.path().join("mirrors"),
        credentials: crate::source::GitCredentials::default(),
        limits: crate::source::Limits::default(),
    };
    let metrics = Arc::new(crate::metrics::SourceMetrics::default());
    let git = crate::source::GitSource::open(
        options,
        crate::source::Redactor::default(),
        Arc::clone(&metrics),
    )
    .expect("mirror");
    let mut daemon =
        daemon(dir.path(), None)
            .await
            .with_tracker(Tracker::git(git, None, Backoff::default()));
    assert!(daemon.pass().await, "an empty fleet is idle");
    assert_eq!(metrics.ls_remote_total(), 1);

    // The change arrives as a webhook would bring it.
    commit_fleet(&remote, "2s");
    daemon.poll_trigger().request();
    daemon.tracker.changed().await;
    daemon.pass().await;
    assert_eq!(daemon.resync_interval(), Duration::from_secs(2));
    assert_eq!(metrics.ls_remote_total(), 2);

    // The tracker's clock is tokio's, paused: the wait below lasts no real time.
    let started = Instant::now();
    daemon.tracker.changed().await;
    assert!(
        started.elapsed() <= Duration::from_secs(2),
        "the next poll waited {:?}, the old interval's time",
        started.elapsed()
    );
    daemon.pass().await;
    assert_eq!(metrics.ls_remote_total(), 3);
}

/// A writer the test reads back.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(
            &self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .into_owned()
    }
}

#[tokio::test]
async fn a_standby_prints_no_progress_lines_and_paces_itself_as_idle() {
    let repo = tempfile::tempdir().expect("repo");
    std::fs::create_dir(repo.path().join("clusters")).expect("clusters");
    write_fleet(repo.path(), "2m");
    std::fs::write(repo.path().join("clusters/broken.yaml"), "kind: [").expect("file");
    let (leader_out, standby_out) = (Captured::default(), Captured::default());
    let mut leader = daemon(repo.path(), None)
        .await
        .with_progress(Box::new(leader_out.clone()));
    let standby_lease = Arc::new(Leadership::new("b".to_owned(), "capstan".to_owned()));
    let mut standby = daemon(repo.path(), None)
        .await
        .with_leadership(standby_lease)
        .with_progress(Box::new(standby_out.clone()));
    leader.pass().await;
    standby.pass().await;
    assert!(
        leader_out
            .text()
            .contains("repository  clusters/broken.yaml"),
        "{}",
        leader_out.text()
    );
    assert_eq!(standby_out.text(), "", "the leader prints them");

    let busy = leader.options.busy_interval;
    assert_eq!(leader.next_delay(false), busy);
    assert_eq!(leader.next_delay(true), Duration::from_secs(120));
    assert_eq!(
        standby.next_delay(false),
        Duration::from_secs(120),
        "a standby observes at the resync interval, whatever work the leader has"
    );
}
