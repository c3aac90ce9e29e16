//! The daemon following a remote, on a lab: a push that scales a cluster is applied and the
//! status names the pushed commit; an idle daemon asks for refs and fetches nothing; an
//! unreachable remote leaves the last revision in force with `SourceAvailable=False`; no
//! planted credential ever shows.

use std::path::Path;
use std::time::Duration;

use capstan::daemon::http;
use capstan::source::{GitCredentials, GitOptions};
use capstan::status::FleetStatus;
use capstan_lab::world::LabConfig;
use capstan_testkit::process::{CapstanRun, Spawned, announced_address, http_request, wait_status};
use capstan_testkit::world::{condition, ready_with};
use capstan_testkit::{Remote, Setup, World, lab_cluster, wait};

use super::servers;
use super::webhooks::sign;

/// A lab and a daemon following `options`, polled every `poll_interval`, in this process.
async fn follow(options: GitOptions, poll_interval: Duration) -> World {
    World::following(LabConfig::default(), Setup::git(options, poll_interval)).await
}

fn source_available(status: &FleetStatus) -> Option<&str> {
    condition(status, "SourceAvailable").map(|(status, _)| status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_that_scales_a_cluster_is_applied_and_an_unreachable_remote_changes_nothing() {
    let remote = Remote::new();
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 2));
    let first = remote.commit_and_push("prod: 2 workers");
    let Some(mut server) = servers::git_daemon(&remote.root()) else {
        return;
    };
    let url = format!("git://127.0.0.1:{}/fleet.git", server.port);
    let following = follow(
        remote.options(&url, GitCredentials::default()),
        Duration::from_millis(200),
    )
    .await;
    let status = following
        .wait_for("prod Ready with 3 nodes", |s| ready_with(s, "prod", 3))
        .await;
    assert_eq!(status.revision, Some(format!("main@sha1:{first}")));
    assert_eq!(source_available(&status), Some("True"));

    remote.write("clusters/prod.yaml", &lab_cluster("prod", 3));
    let pushed = remote.commit_and_push("prod: 3 workers");
    let revision = format!("main@sha1:{pushed}");
    let status = following
        .wait_for("the push applied", |s| {
            s.revision.as_deref() == Some(revision.as_str()) && ready_with(s, "prod", 4)
        })
        .await;
    let last_step = status.clusters["prod"]
        .last_step
        .as_ref()
        .expect("a step ran");
    assert_eq!(last_step.revision.as_deref(), Some(revision.as_str()));

    server.stop();
    let status = following
        .wait_for("SourceAvailable=False", |s| {
            source_available(s) == Some("False")
        })
        .await;
    let condition = status
        .conditions
        .iter()
        .find(|c| c.kind == "SourceAvailable")
        .expect("condition");
    assert!(
        condition.message.contains("cannot list the refs"),
        "{}",
        condition.message
    );
    // Passes go on with the last revision: nothing is removed because the remote is down.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let status = following.status();
    assert_eq!(status.revision.as_deref(), Some(revision.as_str()));
    assert!(ready_with(&status, "prod", 4), "{status:?}");
    assert!(
        status.repository_errors.is_empty(),
        "{:?}",
        status.repository_errors
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_daemon_asks_for_refs_and_never_fetches() {
    let remote = Remote::new();
    let Some(server) = servers::git_daemon(&remote.root()) else {
        return;
    };
    let url = format!("git://127.0.0.1:{}/fleet.git", server.port);
    let following = follow(
        remote.options(&url, GitCredentials::default()),
        Duration::from_millis(20),
    )
    .await;
    let head = remote.head();
    following
        .wait_for("the first revision", |s| s.revision.is_some())
        .await;
    let board = following.board();
    let metrics = board.source_metrics();
    let fetches = metrics.fetch_total();
    let parses = metrics.parse_total();
    let start = metrics.ls_remote_total();
    wait::on("60 polls")
        .every(Duration::from_millis(20))
        .until_true(|| metrics.ls_remote_total() >= start + 60)
        .await;
    assert_eq!(
        metrics.fetch_total(),
        fetches,
        "no fetch while the tip stays"
    );
    assert_eq!(fetches, 1, "one fetch in all: the first");
    assert_eq!(
        metrics.parse_total(),
        parses,
        "the files are not read or validated again while the revision stays"
    );
    assert_eq!(parses, 1, "one parse in all: the first revision's");
    let status = following.status();
    assert_eq!(status.revision, Some(format!("main@sha1:{head}")));
    let exposition = http::render_metrics(&following.board());
    assert!(
        exposition.contains(&format!(
            "capstan_source_info{{revision=\"main@sha1:{head}\"}} 1"
        )),
        "{exposition}"
    );
    assert!(
        exposition.contains("capstan_git_fetch_total 1"),
        "{exposition}"
    );
}

#[test]
fn a_planted_token_never_shows_in_logs_status_or_metrics() {
    let remote = Remote::new();
    let token = "planted-token-c0ffee42";
    let Some(mut server) = servers::lighttpd(&remote.root(), "capstan", token) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!(
        "http://capstan:{token}@127.0.0.1:{}/git/fleet.git",
        server.port
    );
    let stdout = std::fs::File::create(dir.path().join("stdout")).expect("stdout");
    let stderr = std::fs::File::create(dir.path().join("stderr")).expect("stderr");
    let child = capstan_testkit::cli::command()
        .args(["run", "--repo", &url, "--lab", "--log", "debug"])
        .args([
            "--git-token-from",
            "env:TEST_GIT_TOKEN",
            "--git-username",
            "capstan",
        ])
        .args(["--webhook-secret-from", "env:TEST_GIT_TOKEN"])
        .arg("--state-dir")
        .arg(dir.path().join("lab"))
        .arg("--git-mirror-dir")
        .arg(dir.path().join("mirrors"))
        .args(["--http", "127.0.0.1:0"])
        .env("TEST_GIT_TOKEN", token)
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .expect("capstan run starts");
    let mut child = Spawned(child);
    let addr = announced_address(&mut child.0, &dir.path().join("stderr"));
    wait_status(&mut child.0, addr, "a revision", &|body| {
        body.contains("main@sha1:")
    });
    server.stop();
    // A signed webhook makes the daemon poll now (the fleet's pollInterval is a minute).
    let push = br#"{"ref":"refs/heads/main"}"#;
    let (code, _) = http_request(
        addr,
        "POST",
        "/hooks/github",
        &[
            ("X-GitHub-Event", "push".to_owned()),
            ("X-GitHub-Delivery", "delivery-1".to_owned()),
            (
                "X-Hub-Signature-256",
                format!("sha256={}", sign(token, push)),
            ),
        ],
        push,
    );
    assert_eq!(code, 202);
    let status = wait_status(&mut child.0, addr, "SourceAvailable=False", &|body| {
        body.contains("SourceUnreachable")
    });
    let (_, metrics) = http_request(addr, "GET", "/metrics", &[], b"");
    // A webhook with a bad signature is logged too.
    let (code, _) = http_request(
        addr,
        "POST",
        "/hooks/github",
        &[
            ("X-GitHub-Event", "push".to_owned()),
            ("X-Hub-Signature-256", format!("sha256={token}")),
        ],
        br#"{"ref":"refs/heads/main"}"#,
    );
    assert_eq!(code, 401);
    drop(child);
    let logs = std::fs::read_to_string(dir.path().join("stdout")).expect("stdout")
        + &std::fs::read_to_string(dir.path().join("stderr")).expect("stderr");
    assert!(logs.contains("git remote unavailable"), "{logs}");
    for (what, text) in [("logs", &logs), ("status", &status), ("metrics", &metrics)] {
        assert!(
            !text.contains(token),
            "the token shows in the {what}:\n{text}"
        );
    }
    let mirror_config = walk_text(&dir.path().join("mirrors"));
    assert!(
        !mirror_config.contains(token),
        "the token is stored in the mirror"
    );
}

/// Every small text file under `dir`, concatenated.
fn walk_text(dir: &Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.push_str(&walk_text(&path));
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push_str(&text);
        }
    }
    out
}

#[test]
fn a_daemon_started_while_the_remote_is_down_reconciles_the_mirrors_last_revision() {
    let remote = Remote::new();
    let revision = format!("main@sha1:{}", remote.head());
    let Some(mut server) = servers::git_daemon(&remote.root()) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("git://127.0.0.1:{}/fleet.git", server.port);
    let mut first = CapstanRun::lab(dir.path(), &url);
    let addr = first.address();
    first.wait_status(addr, "the first run's revision", &|body| {
        body.contains(&revision)
    });
    drop(first);

    server.stop();
    let mut second = CapstanRun::lab(dir.path(), &url);
    let addr = second.address();
    let status = second.wait_status(addr, "SourceAvailable=False", &|body| {
        body.contains("SourceUnreachable")
    });
    drop(second);
    let status: FleetStatus = serde_json::from_str(&status).expect("status");
    assert_eq!(status.revision.as_deref(), Some(revision.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_push_is_taken_and_the_status_names_both_revisions() {
    let remote = Remote::new();
    let before = remote.commit_and_push("before the rewrite");
    let url = format!("file://{}", remote.bare().display());
    let following = follow(
        remote.options(&url, GitCredentials::default()),
        Duration::from_millis(100),
    )
    .await;
    let old = format!("main@sha1:{before}");
    following
        .wait_for("the first revision", |s| {
            s.revision.as_deref() == Some(old.as_str())
        })
        .await;
    remote.write("clusters/README.md", "rewritten\n");
    let after = remote.amend_and_force_push("the rewrite");
    let new = format!("main@sha1:{after}");
    let status = following
        .wait_for("the rewritten revision", |s| {
            s.revision.as_deref() == Some(new.as_str())
        })
        .await;
    assert!(
        status
            .events
            .iter()
            .any(|e| e.contains("force-push") && e.contains(&old) && e.contains(&new)),
        "{:?}",
        status.events
    );
}
