//! `capstan run --lab --previews`: the daemon posts a preview on a pull request (a GitLab merge
//! request) opened on the lab forge, and edits it after a push to the pull request's branch; a forge that is down
//! meanwhile does not hold up reconciliation; its `GET /observed`
//! serves the state it plans against, which `capstan preview --server` reads.

use std::path::Path;
use std::time::Duration;

use capstan::observed::Observed;
use capstan_lab::forge::Fault;
use capstan_testkit::process::CapstanRun;
use capstan_testkit::{announced, git, wait};

use crate::fixture::Fleet;
use crate::forge::{Flavour, NAME, OWNER, OnForge, TOKEN};

pub(crate) const PROD: &str = "clusters/prod.yaml";

/// Starts `capstan run --lab --previews` on the lab forge (see `announced`).
pub(crate) fn spawn_daemon(on: &OnForge, flavour: Flavour, dir: &Path) -> CapstanRun {
    spawn_daemon_with(on, flavour, dir, &[])
}

/// [`spawn_daemon`] with `extra` arguments.
fn spawn_daemon_with(on: &OnForge, flavour: Flavour, dir: &Path, extra: &[&str]) -> CapstanRun {
    CapstanRun::start(dir, |command| {
        command
            .args([
                "--lab",
                "--log",
                &format!(
                    "warn,capstan::daemon::previews=debug,{}",
                    announced::ANNOUNCING
                ),
                "--previews",
            ])
            .arg("--repo")
            .arg(format!("file://{}", on.bare().display()))
            .args([
                "--forge",
                flavour.name(),
                "--forge-repo",
                &format!("{OWNER}/{NAME}"),
            ])
            .args(["--forge-url", &flavour.api(&on.forge)])
            .args(extra)
            .env("CAPSTAN_FORGE_TOKEN", TOKEN);
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_posts_a_preview_for_an_opened_pull_request_and_updates_it_after_a_push() {
    posts_and_updates_after_a_push(Flavour::Github).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_posts_a_preview_for_an_opened_gitlab_merge_request_and_updates_it() {
    posts_and_updates_after_a_push(Flavour::Gitlab).await;
}

/// The example fleet, polled every 2 s (the fleet file warns about it, and runs).
pub(crate) fn fast_fleet() -> Fleet {
    let fleet = Fleet::new();
    let capstan_yaml = fleet.path().join("capstan.yaml");
    let text = std::fs::read_to_string(&capstan_yaml).expect("read");
    std::fs::write(
        &capstan_yaml,
        text.replace("pollInterval: 1m", "pollInterval: 2s"),
    )
    .expect("write");
    git(fleet.path(), &["commit", "--quiet", "-am", "poll every 2s"]);
    fleet
}

async fn posts_and_updates_after_a_push(flavour: Flavour) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fleet = fast_fleet();
    fleet.branch("scale", PROD, "replicas: 3", "replicas: 4");
    let on = OnForge::start(fleet).await;
    let dir = tempfile::tempdir().expect("temp dir");
    // The forge is down from the start: reconciliation must not wait for it.
    on.forge.inject(Fault::Outage, None);
    let mut daemon = spawn_daemon(&on, flavour, dir.path());
    let pr = on
        .forge
        .open_pull("Scale prod", "scale", "main")
        .expect("pull");
    let url = format!("http://{}", daemon.address());
    let prod_ready = || async {
        let Ok(response) = reqwest::get(format!("{url}/status")).await else {
            return false;
        };
        let status: serde_json::Value = response.json().await.unwrap_or_default();
        status["clusters"]["prod"]["phase"] == "Ready"
    };
    wait::on("prod Ready")
        .every(Duration::from_millis(200))
        .until(async || {
            assert!(daemon.is_running(), "capstan run exited");
            if prod_ready().await {
                Ok(())
            } else {
                Err(String::new())
            }
        })
        .await;
    assert!(on.forge.comments(pr).is_empty());
    assert!(
        on.forge.requests().iter().any(|r| r.status == 503),
        "the daemon tried the forge while it was down"
    );
    on.forge.heal();
    let head = on.forge.pull(pr).expect("pull").head_sha;
    let posted_for = |sha: &str| {
        let wanted = format!("{}@sha1:{sha}", flavour.head_ref(pr));
        on.forge
            .comments(pr)
            .first()
            .is_some_and(|c| c.body.contains(&wanted))
            && on
                .forge
                .statuses(sha)
                .iter()
                .any(|s| s.context == "capstan/preview")
    };
    daemon
        .wait_until("the first preview", || posted_for(&head))
        .await;
    let first = on.forge.comments(pr);
    assert!(first[0].body.starts_with("<!-- capstan-preview -->"));

    let new_head = on.push_edit("scale", PROD, "replicas: 4", "replicas: 5");
    daemon
        .wait_until("the preview of the pushed head", || posted_for(&new_head))
        .await;
    let comments = on.forge.comments(pr);
    assert_eq!(comments.len(), 1, "one sticky comment, edited in place");
    assert_eq!(comments[0].id, first[0].id);

    // The state the daemon plans against, for `capstan preview --server`.
    let body = reqwest::get(format!("{url}/observed"))
        .await
        .expect("GET /observed")
        .text()
        .await
        .expect("a body");
    let observed: Observed = serde_json::from_str(&body).expect("the snapshot schema");
    assert!(observed.clusters.contains_key("prod"), "{body}");
    assert!(!body.contains(TOKEN));
    let bare = on.bare().display().to_string();
    let run = tokio::task::spawn_blocking(move || {
        capstan_testkit::cli::capstan(&[
            "preview", "--repo", &bare, "--base", "main", "--head", "scale", "--server", &url,
            "--format", "json",
        ])
    })
    .await
    .expect("capstan ran");
    let preview: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}\n{}", run.stdout, run.stderr));
    assert!(
        preview["summary"]
            .as_str()
            .is_some_and(|s| s.contains("prod"))
    );
}

/// prod's phase and Node count in the daemon's `GET /status`.
async fn prod_status(url: &str) -> Option<(String, usize)> {
    let response = reqwest::get(format!("{url}/status")).await.ok()?;
    let status: serde_json::Value = response.json().await.ok()?;
    let prod = &status["clusters"]["prod"];
    Some((
        prod["phase"].as_str()?.to_owned(),
        prod["nodes"].as_array()?.len(),
    ))
}

/// Waits until prod is Ready with `nodes` Nodes (any count when `None`); returns the count.
async fn prod_ready(daemon: &mut CapstanRun, url: &str, nodes: Option<usize>) -> usize {
    wait::on(format!("prod Ready with {nodes:?} Nodes"))
        .every(Duration::from_millis(200))
        .until(async || {
            assert!(
                daemon.is_running(),
                "capstan run exited while prod was to become Ready"
            );
            match prod_status(url).await {
                Some((phase, count))
                    if phase == "Ready" && nodes.is_none_or(|wanted| wanted == count) =>
                {
                    Ok(count)
                }
                seen => Err(format!("{seen:?}")),
            }
        })
        .await
}

/// Whether every cluster of the daemon's `GET /status` is Ready.
async fn fleet_ready(url: &str) -> bool {
    let Ok(response) = reqwest::get(format!("{url}/status")).await else {
        return false;
    };
    let status: serde_json::Value = response.json().await.unwrap_or_default();
    status["clusters"].as_object().is_some_and(|clusters| {
        !clusters.is_empty() && clusters.values().all(|c| c["phase"] == "Ready")
    })
}

/// A pull request asking for a billion workers is refused by validation, one whose plan holds
/// more steps than `--preview-max-steps` is refused for it, each in its comment and a failed
/// status; and the daemon, which planning the first used to abort ("memory allocation of ...
/// failed"), goes on reconciling: a change merged afterwards is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_pull_requests_are_refused_and_the_daemon_keeps_reconciling() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fleet = fast_fleet();
    fleet.branch("huge", PROD, "replicas: 3", "replicas: 1000000000");
    // Every worker of prod replaced: 24 steps, over the limit of 20 (the base plans none once
    // the fleet is built).
    fleet.branch(
        "wide",
        PROD,
        "cores: 4, memoryMiB: 8192, diskGiB: 50",
        "cores: 6, memoryMiB: 8192, diskGiB: 50",
    );
    let on = OnForge::start(fleet).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut daemon = spawn_daemon_with(
        &on,
        Flavour::Github,
        dir.path(),
        &["--preview-max-steps", "20"],
    );
    let huge = on.forge.open_pull("Huge", "huge", "main").expect("pull");
    let wide = on.forge.open_pull("Wide", "wide", "main").expect("pull");
    let url = format!("http://{}", daemon.address());
    let nodes = prod_ready(&mut daemon, &url, None).await;

    let refused = |pr: u64, text: &str| {
        let head = on.forge.pull(pr).expect("pull").head_sha;
        on.forge
            .comments(pr)
            .first()
            .is_some_and(|c| c.body.contains(text))
            && on
                .forge
                .statuses(&head)
                .last()
                .is_some_and(|s| s.context == "capstan/preview" && s.state == "failure")
    };
    let too_many = "clusters/prod.yaml:34:7` `spec.workers[0].replicas`: 1000000000 workers: a cluster has at most 5000 machines";
    daemon
        .wait_until("the refusal of a billion workers", || {
            refused(huge, too_many)
        })
        .await;
    wait::on("the fleet built")
        .every(Duration::from_millis(200))
        .until(async || {
            if fleet_ready(&url).await {
                Ok(())
            } else {
                Err(String::new())
            }
        })
        .await;
    let past_limit = "planning the head revision exceeded 20 predicted steps: refused";
    daemon
        .wait_until("the refusal of a plan past its limit", || {
            refused(wide, past_limit)
        })
        .await;

    on.push_edit("main", PROD, "replicas: 3", "replicas: 4");
    prod_ready(&mut daemon, &url, Some(nodes + 1)).await;
    assert!(daemon.is_running(), "capstan run is still running");
}
