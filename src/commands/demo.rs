//! `capstan demo`: examples-repo as the first commit of a local bare Git remote, a clone to
//! push from, and the daemon of `capstan run --lab` following it, announcing when every
//! cluster is Ready.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::run::{
    LAB_BUSY_INTERVAL, RunError, lab_connections, open_remote, runtime, start_lab, status_branch,
    stop_signal,
};
use crate::cli::{DaemonArgs, DemoArgs};
use crate::clock::Clock;
use crate::commands::Outcome;
use crate::daemon::http;
use crate::daemon::{Daemon, DaemonOptions, StatusBoard};
use crate::secrets::{Admission, SecretPolicy, SecretReader};
use crate::source::{self, Redactor, Tracker};
use crate::spec;
use crate::status_branch::StatusWriter;
use capstan_lab::kube::MANAGEMENT;
use capstan_lab::world::LabConfig;

/// How often the demo polls its remote: a local bare repository answers in a millisecond, and
/// a newcomer who just pushed should not wait for the fleet's minute.
const DEMO_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// The branch the demo's remote holds and the daemon follows.
const DEMO_BRANCH: &str = "main";

/// Runs `capstan demo`: examples-repo as the first commit of a bare Git repository (the
/// remote the daemon follows), a working clone for the user, and an embedded lab.
///
/// # Errors
/// When the demo folder cannot be prepared or the lab cannot start.
pub fn demo(args: &DemoArgs, env: fn(&str) -> Option<String>) -> Result<Outcome, RunError> {
    let examples = args.examples.clone().unwrap_or_else(default_examples);
    let state_dir = std::path::absolute(&args.state_dir).map_err(|source| RunError::Prepare {
        path: args.state_dir.clone(),
        source,
    })?;
    let remote = state_dir.join("remote.git");
    let clone = state_dir.join("repo");
    let lab_dir = state_dir.join("lab");
    if clone.exists() && !clone.join(".git").exists() {
        return Err(RunError::StaleDemo { path: clone });
    }
    if !remote.exists() {
        source::seed::seed_remote(&examples, &remote, DEMO_BRANCH)?;
    }
    if !clone.exists() {
        source::seed::clone_for_user(&remote, &clone, DEMO_BRANCH)?;
    }
    let os_configs = os_client_configs(&clone);
    let url = format!("file://{}", remote.display());
    let redactor = Redactor::default();
    let git_options = source::GitOptions {
        url: url.clone(),
        branch: DEMO_BRANCH.to_owned(),
        path: None,
        mirror_root: state_dir.join("mirrors"),
        credentials: source::GitCredentials::default(),
        limits: source::Limits::default(),
    };
    // The demo's lab: the default policy (`CAPSTAN_` variables for a datastore's password).
    let admission = Admission::default();
    let reader = SecretReader::new(Arc::new(SecretPolicy::default()), env);
    let (fleet, git, snapshot, _) = open_remote(git_options.clone(), &redactor, &admission, None)?;
    let status = status_branch(&fleet, &git_options, &DaemonArgs::default(), &redactor)?;
    let tracker = Tracker::git(
        git,
        Some(DEMO_POLL_INTERVAL),
        crate::backoff::Backoff::default(),
    )
    .starting_from(snapshot);
    runtime()?.block_on(async {
        let mut out = std::io::stdout();
        let lab = start_lab(LabConfig::default(), Some(lab_dir.clone())).await?;
        let _ = writeln!(
            out,
            "capstan demo: the example clusters on an embedded lab, driven by `git push`"
        );
        let _ = writeln!(
            out,
            "  remote:     {} (a bare Git repository; capstan follows its {DEMO_BRANCH} branch every {}s)",
            remote.display(),
            DEMO_POLL_INTERVAL.as_secs()
        );
        let _ = writeln!(
            out,
            "  your clone: {} (edit, commit and push from here)",
            clone.display()
        );
        let _ = writeln!(
            out,
            "  lab:        simulated Proxmox VE at {}, state in {}",
            lab.proxmox_url(),
            lab_dir.display()
        );
        let connections = lab_connections(&fleet, &lab, &reader).await?;
        let clock: Arc<dyn Clock> = Arc::new(lab.clock().clone());
        let mut options = DaemonOptions::new(clone.clone());
        options.admission = admission;
        options.busy_interval = LAB_BUSY_INTERVAL;
        options.poll_interval = Some(DEMO_POLL_INTERVAL);
        let (repository, writer_options) = status;
        let writer = StatusWriter::new(repository, writer_options, Arc::clone(&clock));
        let daemon = Daemon::new(options, Arc::new(connections), clock)
            .with_tracker(tracker)
            .with_status_branch(writer)
            .with_progress(Box::new(std::io::stdout()));
        let board = daemon.board();
        let bound = http::serve(args.http, daemon.board()).await?;
        let _ = writeln!(
            out,
            "  dashboard:  http://{bound}/ (live in a browser)\n  \
             status:     capstan status --server http://{bound}\n"
        );
        let started = std::time::Instant::now();
        let announce = announce_when_ready(
            board,
            started,
            lab_dir.clone(),
            (clone.clone(), url.clone(), fleet.status.branch.clone()),
            (bound, os_configs),
            args.exit_when_ready,
        );
        let stop: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
            if args.exit_when_ready {
                Box::pin(announce)
            } else {
                tokio::spawn(announce);
                Box::pin(stop_signal())
            };
        daemon.run(stop).await?;
        lab.stop();
        Ok(Outcome::Success)
    })
}

/// Waits for every cluster to be Ready, then prints how to look at them.
async fn announce_when_ready(
    board: Arc<StatusBoard>,
    started: std::time::Instant,
    lab_dir: PathBuf,
    (repo, remote, status_branch): (PathBuf, String, String),
    (http, os_configs): (std::net::SocketAddr, Vec<(String, &'static str)>),
    quiet_after: bool,
) {
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let status = board.status();
        if !status.all_ready() {
            continue;
        }
        let mut out = std::io::stdout();
        let _ = writeln!(
            out,
            "\nall {} clusters Ready in {:.1}s",
            status.clusters.len(),
            started.elapsed().as_secs_f64()
        );
        for (name, cluster) in &status.clusters {
            let kubeconfig = lab_dir.join(format!("{name}.kubeconfig"));
            let version = cluster.version.map(|v| format!("v{v}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "  {name:<10} {} nodes {version}: kubectl --kubeconfig {} get nodes -o wide",
                cluster.nodes.len(),
                kubeconfig.display()
            );
        }
        let management = lab_dir.join(format!("{MANAGEMENT}.kubeconfig"));
        let _ = writeln!(
            out,
            "  Flux's kubeconfig Secrets: kubectl --kubeconfig {} -n flux-system get secrets",
            management.display()
        );
        for (name, config) in &os_configs {
            let _ = writeln!(
                out,
                "  {name}'s {config}: kubectl --kubeconfig {} -n capstan-system get secret {name}-{config} -o jsonpath='{{.data.{config}}}' | base64 -d",
                management.display()
            );
        }
        let _ = writeln!(
            out,
            "\nchange a cluster the GitOps way: edit, commit, push\n  \
             cd {}\n  \
             edit clusters/prod.yaml: under `workers:`, set `replicas: 4` (it says 3)\n  \
             git commit -am \"prod: 4 workers\"\n  \
             git push\n\
             capstan sees the push within {}s and a fourth worker joins prod; \
             `capstan status prod --server http://{}` shows the commit it acted on (main@sha1:...)",
            repo.display(),
            DEMO_POLL_INTERVAL.as_secs(),
            http
        );
        let _ = writeln!(
            out,
            "\ncapstan commits each cluster's status to the {status_branch} branch when it changes:\n  \
             git -C {repo} fetch -q && git -C {repo} log --oneline origin/{status_branch}\n  \
             capstan status --repo {remote}   (no daemon needed)",
            repo = repo.display(),
        );
        if !quiet_after {
            let _ = writeln!(out, "  reconciling; stop with Ctrl-C\n");
        }
        let _ = out.flush();
        return;
    }
}

/// The clusters of the repository in `clone` whose distribution keeps an OS client
/// configuration (Talos's talosconfig), with its record's key, for the walkthrough to show;
/// none when the repository cannot be read or loaded (the daemon then says why).
fn os_client_configs(clone: &Path) -> Vec<(String, &'static str)> {
    let Ok(files) = source::read_repo(clone) else {
        return Vec::new();
    };
    spec::load(&files)
        .desired
        .map(|desired| {
            desired
                .clusters
                .into_iter()
                .filter_map(|(name, cluster)| {
                    let capabilities = cluster.spec.kubernetes.distribution.capabilities();
                    capabilities.os_client_config.map(|config| (name, config))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// examples-repo/ next to the current folder, or of the checkout this binary was built from.
fn default_examples() -> PathBuf {
    let here = PathBuf::from("examples-repo");
    if here.join(spec::FLEET_FILE).exists() {
        here
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples-repo")
    }
}
