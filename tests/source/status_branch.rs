//! Status back to Git, against real remotes: the daemon on a lab commits each cluster's
//! status to `capstan-status` of the remote it follows (lighttpd + `git http-backend` with a
//! token), only on change, never forcing, never a secret; a remote refusing pushes is
//! reported and reconciling goes on; `capstan status --repo` reads what `--server` shows.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan::plan::Phase;
use capstan::source::{GitCredentials, GitOptions, Redactor, Secret, SecretFrom, TokenAuth};
use capstan::status::{conditions, reasons};
use capstan_lab::world::LabConfig;
use capstan_testkit::cli::capstan_ok as capstan;
use capstan_testkit::git::bare_git;
use capstan_testkit::process::http_request;
use capstan_testkit::world::{condition, ready_with};
use capstan_testkit::{FleetYaml, Remote, Setup, World, git, lab_cluster, wait};

use super::servers;

pub const BRANCH: &str = "capstan-status";

/// capstan.yaml with a status author and `[skip ci]`.
pub fn fleet() -> String {
    FleetYaml::new().status_branch().render()
}

/// A daemon following `options` (polled every 200 ms, passes every 50 ms when converged),
/// writing the status branch with a `window` and a `floor` in lab time.
fn writing(options: GitOptions, redactor: Redactor, window: Duration, floor: Duration) -> Setup {
    Setup::git(options, Duration::from_millis(200))
        .redactor(redactor)
        .resync(Duration::from_millis(50))
        .status_branch(window, floor)
}

/// The status branch's commits, newest first.
pub fn status_commits(bare: &Path) -> Vec<String> {
    bare_git(bare, &["rev-list", BRANCH])
        .map(|list| list.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// A file at the status branch's tip.
fn status_file(bare: &Path, path: &str) -> Option<String> {
    bare_git(bare, &["show", &format!("{BRANCH}:{path}")])
}

/// A token in a file, as `--git-token-from file:PATH` gives it, remembered by `redactor`.
fn token_credentials(dir: &Path, token: &str, redactor: &Redactor) -> (GitCredentials, PathBuf) {
    let file = dir.join("token");
    std::fs::write(&file, format!("{token}\n")).expect("token file");
    let secret =
        Secret::resolve(SecretFrom::File(file.clone()), &|_| None, redactor).expect("secret");
    let credentials = GitCredentials {
        token: Some(secret),
        username: "capstan".to_owned(),
        ..GitCredentials::default()
    };
    (credentials, file)
}

/// Waits (in real time, for the writer's task) until `done` holds of the bare repository.
async fn wait_for_branch(bare: &Path, what: &str, done: impl Fn(&Path) -> bool) {
    wait::on(format!("the status branch: {what}"))
        .until(async || {
            if done(bare) {
                Ok(())
            } else {
                Err(format!(
                    "it holds {:?}",
                    bare_git(bare, &["log", "--format=%h %s", BRANCH])
                ))
            }
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_branch_follows_bootstrap_idle_scale_up_and_a_concurrent_writer() {
    let remote = Remote::new();
    remote.write("capstan.yaml", &fleet());
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 2));
    remote.commit_and_push("prod: 2 workers");
    let token = "status-writer-token-0c1d";
    let Some(server) = servers::lighttpd(&remote.root(), "capstan", token) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/git/fleet.git", server.port);
    let redactor = Redactor::default();
    let (credentials, token_file) = token_credentials(server.dir.path(), token, &redactor);
    let bare = remote.bare();
    let writing = World::following(
        LabConfig::default(),
        writing(
            remote.options(&url, credentials),
            redactor,
            Duration::from_millis(300),
            Duration::from_millis(1500),
        ),
    )
    .await;

    // Bootstrap: the branch holds prod Ready, as /status says.
    writing
        .wait_for("prod Ready with 3 nodes, status pushed", |s| {
            ready_with(s, "prod", 3) && condition(s, conditions::STATUS_PUSHED).is_some()
        })
        .await;
    wait_for_branch(&bare, "prod Ready with 3 nodes", |bare| {
        status_file(bare, "clusters/prod.yaml")
            .is_some_and(|f| f.contains("phase: Ready") && f.contains("nodesReady: 3"))
    })
    .await;
    let readme = status_file(&bare, "README.md").expect("README.md");
    assert!(
        readme.contains("| [prod](clusters/prod.yaml) | Ready | v1.36.2 | 3/3 |"),
        "{readme}"
    );
    let head = bare_git(
        &bare,
        &["log", "-1", "--format=%an <%ae>|%cn|%s|%b", BRANCH],
    )
    .expect("a status commit");
    assert!(
        head.starts_with("Platform Team <platform@example.com>|capstan|prod: "),
        "{head}"
    );
    assert!(head.contains("[skip ci]"), "{head}");
    let main = bare_git(&bare, &["rev-parse", "main"]).expect("main");
    assert!(
        head.contains(&format!("Capstan-Revision: main@sha1:{main}")),
        "{head}"
    );
    // `capstan status --repo` prints the tree `--server` prints (no daemon needed), once the
    // last change (e.g. the step recorded after prod turned Ready) waited out the floor.
    let mirrors = tempfile::tempdir().expect("mirrors");
    let token_from = format!("file:{}", token_file.display());
    let mirror_dir = mirrors.path().display().to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let from_server = capstan(&["status", "--server", &format!("http://{}", writing.http())]);
        let from_repo = capstan(&[
            "status",
            "--repo",
            &url,
            "--git-token-from",
            &token_from,
            "--git-username",
            "capstan",
            "--git-mirror-dir",
            &mirror_dir,
        ]);
        if from_repo == from_server {
            break;
        }
        assert!(Instant::now() < deadline, "{from_repo}\n!=\n{from_server}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Idle: 60 passes, no commit.
    let commits = status_commits(&bare);
    let passes = writing.passes();
    writing
        .wait_for("60 idle passes", |_| writing.passes() >= passes + 60)
        .await;
    assert_eq!(
        status_commits(&bare),
        commits,
        "an idle fleet commits nothing"
    );

    // Scale-up: a few commits, not one per pass; the last shows 4 nodes.
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 3));
    remote.commit_and_push("prod: 3 workers");
    let scale_up_started = Instant::now();
    let passes = writing.passes();
    writing
        .wait_for("prod Ready with 4 nodes", |s| ready_with(s, "prod", 4))
        .await;
    wait_for_branch(&bare, "prod Ready with 4 nodes", |bare| {
        status_file(bare, "clusters/prod.yaml")
            .is_some_and(|f| f.contains("phase: Ready") && f.contains("nodesReady: 4"))
    })
    .await;
    let after = status_commits(&bare);
    let new = after.len() - commits.len();
    let passes = writing.passes() - passes;
    let took = scale_up_started.elapsed();
    eprintln!("scale-up: {new} status commit(s) over {passes} passes in {took:?}");
    // Commits are at least the minimum interval (1.5 s) apart, plus the one at Ready: on a
    // loaded machine a slower scale-up may take one more, never one per pass.
    let allowed = 2 + (took.as_secs_f64() / 1.5) as usize;
    assert!(
        (1..=allowed).contains(&new),
        "{new} commits for one scale-up in {took:?}"
    );
    assert!(passes > 3 * new as u64, "{passes} passes, {new} commits");
    let subject = bare_git(&bare, &["log", "-1", "--format=%s", BRANCH]).expect("subject");
    assert!(
        subject.starts_with("prod: ") && subject.contains("→ Ready (4/4 nodes, v1.36.2)"),
        "{subject}"
    );

    // A concurrent writer pushes between two of capstan's commits: both survive.
    let other = tempfile::tempdir().expect("other writer");
    git(
        other.path(),
        &[
            "clone",
            "-q",
            "-b",
            BRANCH,
            bare.to_str().expect("path"),
            "clone",
        ],
    );
    let clone = other.path().join("clone");
    std::fs::write(clone.join("NOTES.md"), "maintenance on Saturday\n").expect("notes");
    git(&clone, &["add", "NOTES.md"]);
    git(&clone, &["commit", "-q", "-m", "ops: notes"]);
    git(&clone, &["push", "-q", "origin", BRANCH]);
    let theirs = git(&clone, &["rev-parse", "HEAD"]);
    let ours_before = after[0].clone();
    // A change of status: a cluster file with errors is Blocked on it.
    remote.write("clusters/broken.yaml", &lab_cluster("broken", 1));
    remote.commit_and_push("broken: one worker, fewer than minWorkers");
    wait_for_branch(&bare, "broken Blocked", |bare| {
        status_file(bare, "clusters/broken.yaml").is_some_and(|f| f.contains("phase: Blocked"))
    })
    .await;
    let tip = bare_git(&bare, &["rev-parse", BRANCH]).expect("tip");
    // capstan's commits land on top of the other writer's (one, or more when a later change
    // of status was committed meanwhile): every commit after it is capstan's.
    let range = format!("{theirs}..{tip}");
    let after_theirs = bare_git(&bare, &["rev-list", "--count", &range]).expect("count");
    let capstans_after_theirs = bare_git(
        &bare,
        &["rev-list", "--count", "--committer=capstan", &range],
    )
    .expect("count");
    assert_ne!(
        after_theirs, "0",
        "capstan's commit lands on top of the other"
    );
    assert_eq!(
        after_theirs, capstans_after_theirs,
        "only capstan's commits follow the other writer's"
    );
    for ancestor in [&theirs, &ours_before] {
        assert!(
            bare_git(&bare, &["merge-base", "--is-ancestor", ancestor, &tip]).is_some(),
            "{ancestor} is still in the history"
        );
    }
    assert_eq!(
        status_file(&bare, "NOTES.md").as_deref(),
        Some("maintenance on Saturday"),
        "the other writer's file stays"
    );
    let status = writing
        .wait_for("StatusPushed=True", |s| {
            condition(s, conditions::STATUS_PUSHED) == Some(("True", reasons::PUSHED))
        })
        .await;
    assert!(status.clusters.contains_key("broken"));
    // Every push that landed is counted, and only those.
    let capstan_commits = bare_git(
        &bare,
        &["rev-list", "--count", "--committer=capstan", BRANCH],
    )
    .expect("count");
    let (_, metrics) = http_request(writing.http(), "GET", "/metrics", &[], b"");
    assert!(
        metrics.contains(&format!(
            "capstan_status_pushes_total{{outcome=\"pushed\"}} {capstan_commits}\n"
        )),
        "{capstan_commits} commits:\n{metrics}"
    );
    let everything = bare_git(&bare, &["log", "-p", "--all"]).expect("log");
    assert!(!everything.contains(token), "the token never reaches Git");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_refusing_pushes_is_reported_and_reconciling_goes_on() {
    let remote = Remote::new();
    remote.write("capstan.yaml", &fleet());
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 2));
    remote.commit_and_push("prod: 2 workers");
    // A bearer token reads; git http-backend lets no anonymous user push (read-only).
    let token = "read-only-bearer-9f3e";
    let Some(server) = servers::lighttpd_bearer(&remote.root(), token) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/git/fleet.git", server.port);
    let redactor = Redactor::default();
    let (mut credentials, _) = token_credentials(server.dir.path(), token, &redactor);
    credentials.token_auth = TokenAuth::Bearer;
    let writing = World::following(
        LabConfig::default(),
        writing(
            remote.options(&url, credentials),
            redactor,
            Duration::from_millis(200),
            Duration::from_millis(500),
        ),
    )
    .await;
    let status = writing
        .wait_for("prod Ready while the status push is refused", |s| {
            ready_with(s, "prod", 3)
                && condition(s, conditions::STATUS_PUSHED) == Some(("False", reasons::PUSH_REFUSED))
        })
        .await;
    let pushed = status
        .conditions
        .iter()
        .find(|c| c.kind == conditions::STATUS_PUSHED)
        .expect("StatusPushed");
    assert!(
        pushed.message.contains("refused the push"),
        "{}",
        pushed.message
    );
    assert!(
        pushed.message.contains("still reconciling"),
        "{}",
        pushed.message
    );
    assert!(!pushed.message.contains(token), "{}", pushed.message);
    assert!(status_commits(&remote.bare()).is_empty(), "nothing landed");
    let (_, metrics) = http_request(writing.http(), "GET", "/metrics", &[], b"");
    assert!(
        metrics.contains("capstan_status_pushes_total{outcome=\"PushRefused\"}"),
        "{metrics}"
    );
    assert!(!metrics.contains("outcome=\"pushed\""), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_planted_in_what_proxmox_answers_never_reaches_the_branch() {
    let remote = Remote::new();
    remote.write("capstan.yaml", &fleet());
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 2));
    remote.commit_and_push("prod: 2 workers");
    let token = "planted-git-token-4b7e";
    let Some(server) = servers::lighttpd(&remote.root(), "capstan", token) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/git/fleet.git", server.port);
    let redactor = Redactor::default();
    let (credentials, _) = token_credentials(server.dir.path(), token, &redactor);
    // Every VM start fails, and Proxmox's message carries the token: the failing step's
    // message reaches the status (and so the branch) with the token as `***`.
    let config_file = server.dir.path().join("lab.yaml");
    std::fs::write(
        &config_file,
        format!(
            "proxmox:\n  faults:\n    failTasks: [{{kind: qmstart, count: 1000, message: \"start failed: {token}\"}}]\n"
        ),
    )
    .expect("lab config");
    let config = LabConfig::load(&config_file).expect("lab config loads");
    let writing = World::following(
        config,
        writing(
            remote.options(&url, credentials),
            redactor,
            Duration::from_millis(100),
            Duration::from_millis(300),
        ),
    )
    .await;
    let status = writing
        .wait_for("prod Blocked, its status pushed", |s| {
            s.clusters
                .get("prod")
                .is_some_and(|c| c.phase == Phase::Blocked)
                && condition(s, conditions::STATUS_PUSHED) == Some(("True", reasons::PUSHED))
        })
        .await;
    let last = status.clusters["prod"]
        .last_step
        .as_ref()
        .expect("the failing step");
    assert!(
        last.message.contains("start failed: ***"),
        "the redacted message: {}",
        last.message
    );
    // Give the writer a few more attempts, then search everything the remote holds.
    let passes = writing.passes();
    writing
        .wait_for("20 more passes", |_| writing.passes() >= passes + 20)
        .await;
    let everything = bare_git(&remote.bare(), &["log", "-p", "--all"]).expect("log");
    assert!(!everything.contains(token), "the planted token reached Git");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_replica_writes_no_status() {
    let remote = Remote::new();
    remote.write("capstan.yaml", &fleet());
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 2));
    remote.commit_and_push("prod: 2 workers");
    let url = format!("file://{}", remote.bare().display());
    // Never elected: another replica holds the Lease.
    let standby = Arc::new(capstan::leader::Leadership::new(
        "capstan-b".to_owned(),
        "capstan-system/capstan".to_owned(),
    ));
    let writing = World::following(
        LabConfig::default(),
        writing(
            remote.options(&url, GitCredentials::default()),
            Redactor::default(),
            Duration::ZERO,
            Duration::ZERO,
        )
        .leadership(standby),
    )
    .await;
    writing
        .wait_for("30 passes with prod in the status", |s| {
            s.clusters.contains_key("prod") && writing.passes() >= 30
        })
        .await;
    assert!(
        status_commits(&remote.bare()).is_empty(),
        "a standby commits no status"
    );
}

/// A daemon restarted reads back from the status branch since when each cluster is converged:
/// the soaks of the clusters that follow one (`rollout.after`) do not start again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_daemon_keeps_since_when_a_cluster_is_converged() {
    let remote = Remote::new();
    remote.write("capstan.yaml", &fleet());
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 2));
    remote.commit_and_push("prod: 2 workers");
    let url = format!("file://{}", remote.bare().display());
    let setup = || {
        writing(
            remote.options(&url, GitCredentials::default()),
            Redactor::default(),
            Duration::ZERO,
            Duration::ZERO,
        )
    };
    let converged = |s: &capstan::status::FleetStatus| {
        s.clusters
            .get("prod")
            .and_then(|c| c.converged.as_ref())
            .map(|c| c.since)
    };
    let mut world = World::following(LabConfig::default(), setup()).await;
    let status = world
        .wait_for("prod converged", |s| converged(s).is_some())
        .await;
    let since = converged(&status).expect("converged");
    wait_for_branch(&remote.bare(), "prod converged", |bare| {
        status_file(bare, "clusters/prod.yaml")
            .is_some_and(|f| f.contains(&format!("convergedSince: \"{since}\"")))
    })
    .await;

    // An hour later, a new daemon: prod has been converged since the same time.
    world.kill_daemon().await;
    world.lab.clock().advance(Duration::from_secs(3600));
    world
        .start_daemon_as(setup(), |connections| connections)
        .await;
    let status = world
        .wait_for("prod converged after the restart", |s| {
            converged(s).is_some()
        })
        .await;
    assert_eq!(converged(&status), Some(since), "{status:#?}");
}
