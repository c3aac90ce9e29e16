//! The status branch writer on its own, against a `file://` remote (and sshd): a planted
//! secret is refused and never committed; the debounce on the lab clock (a burst waits out the
//! window, the floor holds, Ready goes at once, idle minutes commit nothing); an unreachable
//! remote is not asked every pass; a push over SSH checks the host key; the demo's status
//! commits; a status branch equal to the followed branch is refused.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use capstan::daemon::StatusBoard;
use capstan::plan::Phase;
use capstan::source::{GitCredentials, Redactor};
use capstan::status::branch as render;
use capstan::status::{
    ClusterStatus, FleetStatus, NodeStatus, StepRecord, WaitingOn, conditions, reasons,
};
use capstan::status_branch::{
    BranchOptions, CommitSettings, StatusRepository, StatusWriter, WriterOptions,
};

use super::servers;
use capstan_testkit::cli::capstan_ok as capstan;
use capstan_testkit::git::bare_git;
use capstan_testkit::{Remote, git};

use super::status_branch::{BRANCH, fleet, status_commits};

/// A status whose observed data carries a planted token and a kubeconfig key.
fn planted_status(token: &str) -> FleetStatus {
    let mut status = FleetStatus {
        revision: Some("main@sha1:0123456789012345678901234567890123456789".to_owned()),
        ..FleetStatus::default()
    };
    status.clusters.insert(
        "prod".to_owned(),
        ClusterStatus {
            phase: Phase::Provisioning,
            conditions: Vec::new(),
            version: None,
            certificate_expiry: None,
            kubeconfig_fingerprint: Some("sha256:0123456789ab".to_owned()),
            flux_kubeconfig_fingerprint: Some("sha256:0123456789ab".to_owned()),
            nodes: vec![NodeStatus {
                name: capstan::model::NodeName("capstan-prod-cp-a".into()),
                role: capstan::model::Role::ControlPlane,
                pool: "cp".to_owned(),
                vm_id: 100,
                proxmox_node: "pve1".to_owned(),
                ready: None,
                version: None,
                cordoned: false,
            }],
            declared_nodes: Some(3),
            refusals: Vec::new(),
            waiting_on: vec![WaitingOn {
                step: None,
                resource: format!("kubeadm join --token {token}"),
                since: None,
            }],
            next_steps: Vec::new(),
            last_step: Some(StepRecord {
                action: capstan::plan::ActionKind::from_name("deliver-kubeconfig").expect("action"),
                machine: None,
                message: "users:\n- user:\n    client-key-data: LS0tLS1CRUdJTiBFQw==".to_owned(),
                succeeded: false,
                failures: 1,
                at: jiff::Timestamp::UNIX_EPOCH,
                revision: None,
                refusal: None,
            }),
            suspended: Vec::new(),
            converged: None,
        },
    );
    status
}

#[tokio::test]
async fn a_planted_secret_never_reaches_the_branch() {
    let remote = Remote::new();
    let url = format!("file://{}", remote.bare().display());
    let token = "ghp_plantedTokenValue0042";
    let redactor = Redactor::default();
    redactor.remember(token);
    let mirrors = tempfile::tempdir().expect("mirrors");
    let mut writer = writer_to(
        url,
        mirrors.path(),
        redactor,
        (Duration::ZERO, Duration::ZERO),
        Arc::new(capstan::clock::SystemClock),
    );
    let board = StatusBoard::default();

    let planted = planted_status(token);
    writer.consider(&planted, &board, true).await;
    let status = board.status();
    let refused = status
        .conditions
        .iter()
        .find(|c| c.kind == conditions::STATUS_PUSHED)
        .expect("StatusPushed");
    assert_eq!(
        (refused.status.as_str(), refused.reason.as_str()),
        ("False", reasons::SECRET_REFUSED)
    );
    assert!(!refused.message.contains(token), "{}", refused.message);
    assert!(
        status_commits(&remote.bare()).is_empty(),
        "nothing committed"
    );

    // Without the secrets, the same status is committed.
    let mut clean = planted.clone();
    if let Some(prod) = clean.clusters.get_mut("prod") {
        prod.waiting_on.clear();
        prod.last_step = None;
    }
    writer.consider(&clean, &board, true).await;
    assert_eq!(status_commits(&remote.bare()).len(), 1);
    // Planted again on top of a committed status: refused again.
    writer.consider(&planted, &board, true).await;
    assert_eq!(status_commits(&remote.bare()).len(), 1);
    let everything = bare_git(&remote.bare(), &["log", "-p", "--all"]).expect("log");
    for secret in [token, "client-key-data", "LS0tLS1CRUdJTiBFQw"] {
        assert!(!everything.contains(secret), "{secret} reached Git");
    }
}

#[test]
fn the_demo_commits_its_status_and_status_repo_reads_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("demo");
    let output = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["demo", "--exit-when-ready", "--http", "127.0.0.1:0"])
        .arg("--state-dir")
        .arg(&state)
        .output()
        .expect("capstan demo runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{printed}");
    assert!(
        printed.contains("log --oneline origin/capstan-status"),
        "{printed}"
    );
    let clone = state.join("repo");
    git(&clone, &["fetch", "-q"]);
    // The whole messages: a commit that several clusters' changes share says each in its body.
    let log = git(&clone, &["log", "--format=%B", "origin/capstan-status"]);
    assert!(
        log.lines().any(|l| l.contains("→ Ready")),
        "a status commit says a cluster turned Ready:\n{log}"
    );
    let url = format!("file://{}", state.join("remote.git").display());
    let mirrors = dir.path().join("mirrors");
    let shown = capstan(&[
        "status",
        "--repo",
        &url,
        "--git-mirror-dir",
        mirrors.to_str().expect("path"),
    ]);
    for cluster in ["platform  Ready", "prod  Ready"] {
        assert!(shown.contains(cluster), "{shown}");
    }
}

#[test]
fn a_status_branch_that_is_the_followed_branch_is_refused_before_anything_runs() {
    let remote = Remote::new();
    remote.write("capstan.yaml", &fleet());
    remote.commit_and_push("fleet");
    remote.push_to(BRANCH);
    let state = tempfile::tempdir().expect("state");
    let output = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["run", "--lab", "--branch", BRANCH, "--repo"])
        .arg(format!("file://{}", remote.bare().display()))
        .arg("--state-dir")
        .arg(state.path().join("lab"))
        .arg("--git-mirror-dir")
        .arg(state.path().join("mirrors"))
        .output()
        .expect("capstan runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("status.branch `capstan-status` is the branch capstan follows"),
        "{stderr}"
    );
}

/// A one-cluster status in `phase` whose control plane is Ready or not.
/// A status writer pushing to `url`'s status branch as capstan, three attempts a push, with
/// the debounce `(window, floor)`.
fn writer_to(
    url: String,
    mirror_root: &std::path::Path,
    redactor: Redactor,
    (window, floor): (Duration, Duration),
    clock: Arc<dyn capstan::clock::Clock>,
) -> StatusWriter {
    let repository = StatusRepository::open(
        BranchOptions {
            url,
            branch: BRANCH.to_owned(),
            credentials: GitCredentials::default(),
            mirror_root: mirror_root.to_owned(),
        },
        redactor,
    )
    .expect("status repository opens");
    StatusWriter::new(
        repository,
        WriterOptions {
            commit: CommitSettings {
                author: capstan::spec::CAPSTAN_SIGNATURE.to_owned(),
                skip_ci: false,
                max_attempts: 3,
            },
            window,
            floor,
        },
        clock,
    )
}

fn simple_status(phase: Phase, ready: bool) -> FleetStatus {
    let mut status = planted_status("unused-token-value");
    if let Some(prod) = status.clusters.get_mut("prod") {
        prod.phase = phase;
        prod.waiting_on.clear();
        prod.last_step = None;
        prod.nodes[0].ready = Some(ready);
    }
    status
}

#[tokio::test]
async fn the_writer_debounces_on_the_lab_clock_and_writes_ready_at_once() {
    let remote = Remote::new();
    let mirrors = tempfile::tempdir().expect("mirrors");
    let clock = capstan_lab::clock::LabClock::new();
    let mut writer = writer_to(
        format!("file://{}", remote.bare().display()),
        mirrors.path(),
        Redactor::default(),
        (
            capstan::status_branch::DEFAULT_WINDOW,
            capstan::status_branch::DEFAULT_FLOOR,
        ),
        Arc::new(clock.clone()),
    );
    let board = StatusBoard::default();
    let bare = remote.bare();
    let commits = || status_commits(&bare).len();

    let provisioning = simple_status(Phase::Provisioning, false);
    assert!(
        writer
            .consider(&provisioning, &board, false)
            .await
            .is_some()
    );
    assert_eq!(commits(), 0, "a change waits out the window");
    clock.advance(Duration::from_secs(11));
    writer.consider(&provisioning, &board, false).await;
    assert_eq!(commits(), 1, "then it is written");

    let node_ready = simple_status(Phase::Provisioning, true);
    clock.advance(Duration::from_secs(15));
    writer.consider(&node_ready, &board, false).await;
    clock.advance(Duration::from_secs(15));
    writer.consider(&node_ready, &board, false).await;
    assert_eq!(commits(), 1, "past the window, the floor still holds it");
    clock.advance(Duration::from_secs(31));
    writer.consider(&node_ready, &board, false).await;
    assert_eq!(commits(), 2, "a minute after the last commit it is written");

    let ready = simple_status(Phase::Ready, true);
    writer.consider(&ready, &board, false).await;
    assert_eq!(commits(), 3, "turning Ready is written at once");
    for _ in 0..60 {
        clock.advance(Duration::from_secs(5));
        assert_eq!(writer.consider(&ready, &board, false).await, None);
    }
    assert_eq!(commits(), 3, "five idle minutes of lab time make no commit");
}

#[tokio::test]
async fn an_unreachable_remote_is_asked_again_only_after_the_floor() {
    let dir = tempfile::tempdir().expect("dir");
    let clock = capstan_lab::clock::LabClock::new();
    let mut writer = writer_to(
        format!("file://{}", dir.path().join("nowhere.git").display()),
        &dir.path().join("mirrors"),
        Redactor::default(),
        (
            capstan::status_branch::DEFAULT_WINDOW,
            capstan::status_branch::DEFAULT_FLOOR,
        ),
        Arc::new(clock.clone()),
    );
    let board = StatusBoard::default();
    let status = simple_status(Phase::Ready, true);
    let failures = |board: &StatusBoard| {
        board
            .counters()
            .status_pushes
            .get(reasons::STATUS_BRANCH_UNAVAILABLE)
            .copied()
            .unwrap_or_default()
    };
    for _ in 0..20 {
        writer.consider(&status, &board, false).await;
        clock.advance(Duration::from_secs(2));
    }
    assert_eq!(failures(&board), 1, "one attempt in 40 s of passes");
    let pushed = board.status();
    let condition = pushed
        .conditions
        .iter()
        .find(|c| c.kind == conditions::STATUS_PUSHED)
        .expect("StatusPushed");
    assert_eq!(condition.status, "False");
    clock.advance(Duration::from_secs(21));
    writer.consider(&status, &board, false).await;
    assert_eq!(failures(&board), 2, "asked again once the minute is over");
}

#[tokio::test]
async fn the_status_is_pushed_over_ssh_with_the_host_key_checked() {
    let remote = Remote::new();
    let Some(ssh) = servers::sshd() else {
        return;
    };
    let url = format!(
        "ssh://{}@127.0.0.1:{}{}",
        ssh.user,
        ssh.server.port,
        remote.bare().display()
    );
    let mirrors = tempfile::tempdir().expect("mirrors");
    let open = |known_hosts: std::path::PathBuf| {
        StatusRepository::open(
            BranchOptions {
                url: url.clone(),
                branch: BRANCH.to_owned(),
                credentials: GitCredentials {
                    ssh_key: Some(ssh.client_key.clone()),
                    known_hosts: Some(capstan::source::KnownHosts::new(known_hosts)),
                    ..GitCredentials::default()
                },
                mirror_root: mirrors.path().to_owned(),
            },
            Redactor::default(),
        )
        .expect("status repository opens")
    };
    let settings = CommitSettings {
        author: capstan::spec::CAPSTAN_SIGNATURE.to_owned(),
        skip_ci: false,
        max_attempts: 3,
    };
    let status = simple_status(Phase::Ready, true);
    let now = jiff::Timestamp::now();

    let wrong = servers::wrong_known_hosts(mirrors.path(), ssh.server.port);
    let refused = open(wrong)
        .publish(&status, &settings, now)
        .expect_err("an unknown host key is refused");
    assert!(
        capstan::errors::error_chain(&refused).contains("host key"),
        "{}",
        capstan::errors::error_chain(&refused)
    );
    assert!(status_commits(&remote.bare()).is_empty());

    let (published, _) = open(ssh.known_hosts.clone())
        .publish(&status, &settings, now)
        .expect("pushed over ssh");
    assert!(matches!(
        published,
        capstan::status_branch::Published::Pushed { attempts: 1, .. }
    ));
    assert_eq!(status_commits(&remote.bare()).len(), 1);
}

#[test]
fn a_cluster_no_longer_declared_leaves_the_branch_and_others_files_stay() {
    let remote = Remote::new();
    let mirrors = tempfile::tempdir().expect("mirrors");
    let mut repository = StatusRepository::open(
        BranchOptions {
            url: format!("file://{}", remote.bare().display()),
            branch: BRANCH.to_owned(),
            credentials: GitCredentials::default(),
            mirror_root: mirrors.path().to_owned(),
        },
        Redactor::default(),
    )
    .expect("status repository opens");
    let settings = CommitSettings {
        author: capstan::spec::CAPSTAN_SIGNATURE.to_owned(),
        skip_ci: false,
        max_attempts: 3,
    };
    let mut two = simple_status(Phase::Ready, true);
    let edge = two.clusters["prod"].clone();
    two.clusters.insert("edge".to_owned(), edge);
    let now = jiff::Timestamp::now();
    repository.publish(&two, &settings, now).expect("published");
    // Someone keeps notes on the branch.
    let work = tempfile::tempdir().expect("work");
    git(
        work.path(),
        &[
            "clone",
            "-q",
            "-b",
            BRANCH,
            remote.bare().to_str().expect("path"),
            "clone",
        ],
    );
    let clone = work.path().join("clone");
    std::fs::write(clone.join("clusters/edge.md"), "edge is leaving\n").expect("notes");
    git(&clone, &["add", "-A"]);
    git(&clone, &["commit", "-q", "-m", "notes"]);
    git(&clone, &["push", "-q", "origin", BRANCH]);

    let one = simple_status(Phase::Ready, true);
    let (published, files) = repository.publish(&one, &settings, now).expect("published");
    let capstan::status_branch::Published::Pushed {
        message, attempts, ..
    } = published
    else {
        panic!("a commit: {published:?}");
    };
    assert_eq!(attempts, 2, "the first push met the notes and was rejected");
    assert!(message.starts_with("edge: no longer declared"), "{message}");
    assert!(!files.contains_key("clusters/edge.yaml"));
    let tree = bare_git(&remote.bare(), &["ls-tree", "-r", "--name-only", BRANCH]).expect("tree");
    assert_eq!(
        tree.lines().collect::<Vec<_>>(),
        ["README.md", "clusters/edge.md", "clusters/prod.yaml"]
    );
}

/// Loose objects (the object database's two-hex-digit folders) in the bare repository at `path`.
fn loose_objects(path: &std::path::Path) -> usize {
    std::fs::read_dir(path.join("objects"))
        .expect("objects")
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().len() == 2)
        .map(|entry| std::fs::read_dir(entry.path()).map_or(0, Iterator::count))
        .sum()
}

#[test]
fn the_status_repository_is_collected_as_publishes_pile_up_and_stays_whole() {
    let remote = Remote::new();
    let mirrors = tempfile::tempdir().expect("mirrors");
    let policy = capstan::source::gc::GcPolicy {
        max_packs: 2,
        max_loose_objects: 8,
        grace: Duration::ZERO,
    };
    let mut repository = StatusRepository::open(
        BranchOptions {
            url: format!("file://{}", remote.bare().display()),
            branch: BRANCH.to_owned(),
            credentials: GitCredentials::default(),
            mirror_root: mirrors.path().to_owned(),
        },
        Redactor::default(),
    )
    .expect("status repository opens")
    .with_gc(policy);
    let settings = CommitSettings {
        author: capstan::spec::CAPSTAN_SIGNATURE.to_owned(),
        skip_ci: false,
        max_attempts: 3,
    };
    let mut status = simple_status(Phase::Ready, true);
    let prod = status.clusters["prod"].clone();
    const PUBLISHES: usize = 12;
    for round in 0..PUBLISHES {
        // Each round adds a cluster: a new file, a new tree, a new commit.
        status.clusters.insert(format!("c{round}"), prod.clone());
        let (published, _) = repository
            .publish(&status, &settings, jiff::Timestamp::now())
            .expect("published");
        assert!(
            matches!(published, capstan::status_branch::Published::Pushed { .. }),
            "round {round}: {published:?}"
        );
        let loose = loose_objects(repository.path());
        assert!(
            loose <= policy.max_loose_objects + 5,
            "round {round}: {loose} loose objects left in the status repository"
        );
    }
    assert_eq!(status_commits(&remote.bare()).len(), PUBLISHES);
    // Whole after the collections: the last tip's files read back, and a publish of the same
    // status finds nothing to change.
    let (again, files) = repository
        .publish(&status, &settings, jiff::Timestamp::now())
        .expect("published again");
    assert_eq!(again, capstan::status_branch::Published::Unchanged);
    assert!(files.contains_key(&format!("clusters/c{}.yaml", PUBLISHES - 1)));
}

#[test]
fn the_branch_reads_back_as_the_tree_the_server_shows() {
    let now = jiff::Timestamp::now();
    let mut status = simple_status(Phase::Updating, true);
    if let Some(prod) = status.clusters.get_mut("prod") {
        prod.conditions.push(capstan::status::Condition {
            kind: conditions::READY.to_owned(),
            status: "False".to_owned(),
            reason: reasons::RECONCILING.to_owned(),
            message: "phase Updating".to_owned(),
            last_transition_time: now,
        });
        prod.next_steps
            .push("join-node capstan-prod-general-b".to_owned());
        prod.waiting_on.push(WaitingOn {
            step: capstan::plan::ActionKind::from_name("join-node"),
            resource: "node capstan-prod-general-b: Ready".to_owned(),
            since: Some(now),
        });
        prod.last_step = Some(StepRecord {
            action: capstan::plan::ActionKind::from_name("join-node").expect("action"),
            machine: Some(capstan::model::NodeName("capstan-prod-general-b".into())),
            message: "joined as worker".to_owned(),
            succeeded: true,
            failures: 0,
            at: now,
            revision: status.revision.clone(),
            refusal: None,
        });
    }
    let files = render::render(
        &render::cluster_files(&status, &std::collections::BTreeMap::new()),
        &status,
    );
    let read = render::fleet_status(&files, status.revision.clone());
    assert_eq!(
        capstan::commands::status::render(&read, now),
        capstan::commands::status::render(&status, now)
    );
}
