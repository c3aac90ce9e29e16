//! `capstan run` and `capstan demo`: the daemon, against the real connections of capstan.yaml
//! or an embedded lab.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::cli::{DaemonArgs, LeaderArgs, RunArgs};
use crate::clock::{Clock, SystemClock};
use crate::commands::Outcome;
use crate::config::DaemonConfig;
use crate::connect::{ConnectError, Connections};
use crate::daemon::actions::{Actions, InCluster};
use crate::daemon::http;
use crate::daemon::previews::Previewer;
use crate::daemon::{Daemon, DaemonOptions, StatusBoard};
use crate::dashboard::{CommitLinks, ForgeStyle};
use crate::forge::rest::{RestForge, RetryPolicy};
use crate::leader::{self, Leadership, LeaseTimings};
use crate::providers::kube::{ClusterError, KubeClusterClient, LeaseClient};
use crate::secrets::{Admission, Limits, LimitsError, SecretReader};
use crate::source::verify::{Refusal, Verifier};
use crate::source::webhook::Webhooks;
use crate::source::{
    self, CredentialError, GitError, GitSource, PollTrigger, Redactor, RepoLocation, Secret,
    SourceError, SourceMetrics, Tracker, VerifyStart,
};
use crate::spec::{self, Fleet, RepoFiles};
use crate::status_branch::{
    BranchOptions, CommitSettings, StatusBranchError, StatusRepository, StatusWriter, WriterOptions,
};
#[cfg(feature = "lab")]
use capstan_lab::lab::LabError;
#[cfg(feature = "lab")]
use capstan_lab::world::WorldError;

#[cfg(feature = "lab")]
mod lab;
#[cfg(feature = "lab")]
pub(super) use lab::{lab_connections, start_lab};
#[cfg(feature = "lab")]
use lab::{run_on_lab, with_lab_addresses};

/// Passes while busy in the lab, where every operation takes milliseconds.
#[cfg(feature = "lab")]
pub(super) const LAB_BUSY_INTERVAL: Duration = Duration::from_millis(250);

/// Running the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The repository could not be read.
    #[error("cannot read the repository")]
    Source(#[from] SourceError),
    /// The Git remote could not be read.
    #[error("cannot follow the Git remote")]
    Git(#[from] GitError),
    /// A credential or the webhook secret could not be resolved.
    #[error("cannot resolve a secret")]
    Credentials(#[from] CredentialError),
    /// capstan.yaml has errors; `capstan validate` shows them.
    #[error("the repository has errors (run `capstan validate {repo}`):\n{errors}")]
    Invalid {
        /// The repository.
        repo: String,
        /// Its errors.
        errors: String,
    },
    /// capstan.yaml is valid but asks for what the daemon's flags do not allow (a secret
    /// source, a connection not pinned).
    #[error("the daemon's limits refuse the repository {repo}:\n{errors}")]
    Refused {
        /// The repository.
        repo: String,
        /// Each refusal, with its file, line, field and the flag that would allow it.
        errors: String,
    },
    /// `--secrets-env-prefix`, `--secrets-dir` or `--pin` is unusable.
    #[error(transparent)]
    Limits(#[from] LimitsError),
    /// The connections could not be built.
    #[error("cannot connect")]
    Connect(#[from] ConnectError),
    /// The lab config could not be read.
    #[cfg(feature = "lab")]
    #[error("cannot load the lab config")]
    LabConfig(#[source] WorldError),
    /// The lab could not start.
    #[cfg(feature = "lab")]
    #[error("cannot start the lab")]
    Lab(#[source] LabError),
    /// A lab was asked of a build without one.
    #[error(
        "{what} needs the lab, which this build of capstan leaves out (built with --no-default-features); build it with `cargo build --features lab`"
    )]
    NoLab {
        /// What asked for it.
        what: &'static str,
    },
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The HTTP endpoint could not start.
    #[error("cannot serve the HTTP endpoint")]
    Http(#[from] http::HttpError),
    /// The status branch cannot be written.
    #[error("cannot prepare the status branch")]
    StatusBranch(#[from] StatusBranchError),
    /// The demo's remote or clone could not be made.
    #[error("cannot prepare the demo's Git repositories")]
    Seed(#[from] source::seed::SeedError),
    /// The demo folder was made by an older capstan (a plain copy, not a clone).
    #[error(
        "{path} is not a Git clone (an older `capstan demo` made it): remove it, or pick another --state-dir"
    )]
    StaleDemo {
        /// The folder.
        path: PathBuf,
    },
    /// `--lease-kubeconfig` could not be read.
    #[error("cannot read the lease kubeconfig {path}")]
    LeaseKubeconfig {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// `--leader-elect` without a cluster to hold the Lease.
    #[error(
        "--leader-elect needs a cluster for the Lease: name a management cluster in capstan.yaml or pass --lease-kubeconfig"
    )]
    NoLeaseCluster,
    /// The cluster holding the Lease cannot be reached.
    #[error("cannot connect to the cluster holding the Lease")]
    LeaseCluster(#[source] ClusterError),
    /// The Lease timings contradict each other.
    #[error(
        "--lease-renew ({renew:?}) and --lease-retry ({retry:?}) must be shorter than --lease-duration ({duration:?})"
    )]
    LeaseTimings {
        /// `--lease-duration`.
        duration: Duration,
        /// `--lease-renew`.
        renew: Duration,
        /// `--lease-retry`.
        retry: Duration,
    },
    /// `--previews` on a folder: pull requests' heads are read from a Git remote.
    #[error("--previews needs a Git remote as --repo (pull requests' heads are fetched from it)")]
    PreviewsNeedRemote,
    /// The forge flags or token are incomplete or unusable.
    #[error("cannot post previews: {0}")]
    Forge(String),
    /// The daemon's configuration file is unreadable or invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// No revision of the remote passes verification, so there is nothing to reconcile.
    #[error(
        "the tip of the branch is not applied and no earlier revision was verified: nothing to reconcile (sign the tip with an allowed key and push it)"
    )]
    Unverified(#[source] Refusal),
    /// The demo's folder could not be prepared.
    #[error("cannot prepare {path}")]
    Prepare {
        /// The folder.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
}

/// Runs `capstan run`. `env` reads the process environment (`main` passes it), for the
/// secrets the flags and, as the operator's policy allows, capstan.yaml name.
///
/// # Errors
/// When the repository is invalid or refused by the daemon's limits, a connection cannot be
/// made, or the lab cannot start.
pub fn run(args: &RunArgs, env: fn(&str) -> Option<String>) -> Result<Outcome, RunError> {
    let redactor = Redactor::default();
    let Limits { policy, admission } = args
        .secrets
        .limits(args.target.lab, args.reserved_variables())?;
    let reader = SecretReader::new(policy, env);
    let verifier = DaemonConfig::verifier_of(args.config.as_deref(), args.repo.is_remote())?;
    let webhooks = match &args.daemon.webhook_secret_from {
        Some(origin) => Some(Secret::resolve(origin.clone(), &env, &redactor)?),
        None => None,
    };
    let listeners = args.daemon.listeners(&env, &redactor)?;
    // One board and one poll trigger from the start: HTTP is served (and webhooks heard)
    // while the remote is waited for, and the daemon goes on with them.
    let metrics = Arc::new(SourceMetrics::default());
    let board = Arc::new(StatusBoard::with_source_metrics(Arc::clone(&metrics)));
    let trigger = Arc::new(PollTrigger::default());
    let runtime = runtime()?;
    let mut previews = None;
    let (fleet, tracker, folder) = match &args.repo {
        RepoLocation::Folder(path) => {
            if args.previews {
                return Err(RunError::PreviewsNeedRemote);
            }
            let fleet = load_fleet(path, &admission)?;
            if webhooks.is_some() {
                tracing::warn!(
                    "--webhook-secret-from is ignored for a folder: file-system events are used instead"
                );
            }
            runtime.block_on(listeners.serve(Arc::clone(&board), None))?;
            (fleet, None, path.clone())
        }
        RepoLocation::Remote(url) => {
            let options = source::git_options(url, &args.git.settings(), &env, &redactor)?;
            if let Some(links) = CommitLinks::of_remote(url, args.forge.forge.map(forge_style)) {
                board.link_commits(links);
            }
            // What waiting cannot fix is said now, before any waiting.
            options.credentials.check_readable()?;
            if args.previews {
                let forge = previews_forge(args, &env, &redactor)?;
                previews = Some((forge, options.clone(), verifier.clone()));
            }
            let hooks = webhooks.map(|secret| {
                let webhooks = Webhooks::new(
                    secret,
                    args.git.branch.clone(),
                    Arc::clone(&trigger),
                    Arc::clone(&metrics),
                )
                .with_read_timeout(listeners.options.read_timeout);
                Arc::new(webhooks).router()
            });
            runtime.block_on(listeners.serve(Arc::clone(&board), hooks))?;
            let first = FirstRevision {
                options: options.clone(),
                redactor: &redactor,
                admission: &admission,
                verifier: verifier.as_deref(),
                metrics: Arc::clone(&metrics),
            };
            let waited = runtime.block_on(first.wait(
                &board,
                &trigger,
                &mut std::io::stdout(),
                stop_signal(),
            ));
            let Some((fleet, source, snapshot, start)) = waited? else {
                // Stopped before the remote ever answered: nothing was started.
                return Ok(Outcome::Success);
            };
            let mut tracker = Tracker::git(source, None, crate::backoff::Backoff::default())
                .with_trigger(Arc::clone(&trigger))
                .starting_from(snapshot);
            if let Some(verifier) = &verifier {
                tracker = tracker.verifying(Arc::clone(verifier), start);
            }
            let status = status_branch(&fleet, &options, &args.daemon, &redactor)?;
            (fleet, Some((tracker, status)), PathBuf::new())
        }
    };
    let (tracker, status_branch) = match tracker {
        Some((tracker, status)) => (Some(tracker), Some(status)),
        None => {
            tracing::info!("the repository is a folder: no status branch is written");
            (None, None)
        }
    };
    let source = DaemonSource {
        tracker,
        board,
        status_branch,
        previews: previews.map(|(forge, git, verify)| (forge, git, fleet.poll_interval.0, verify)),
        preview_limits: args.preview_limits.limits(),
        reader: reader.clone(),
    };
    runtime.block_on(async {
        let mut options = daemon_options(&folder, &args.daemon);
        options.observe_workloads = source.previews.is_some();
        options.admission = admission;
        if args.target.lab {
            run_on_lab(args, options, &fleet, &reader, source).await?;
        } else {
            // Every secret read is known to the redactor from now on (the status branch's
            // guard refuses any value it knows).
            let secrets = crate::connect::resolve_secrets(&fleet, &reader)?;
            let first_management = secrets.management_kubeconfigs.values().next().cloned();
            let election = election(&args.leader, first_management).await?;
            let mut connections = Connections::from_fleet(&fleet, &secrets, reader).await?;
            if let Some(dir) = &args.target.lab_addresses {
                connections = with_lab_addresses(connections, dir)?;
            }
            serve_daemon(
                options,
                connections,
                Arc::new(SystemClock),
                source,
                election,
                stop_signal(),
            )
            .await?;
        }
        Ok(Outcome::Success)
    })
}

/// `run --lab` in a build without the lab.
#[cfg(not(feature = "lab"))]
async fn run_on_lab(
    _: &RunArgs,
    _: DaemonOptions,
    _: &Fleet,
    _: &SecretReader,
    _: DaemonSource,
) -> Result<(), RunError> {
    Err(RunError::NoLab { what: "run --lab" })
}

/// `run --lab-addresses` in a build without the lab.
#[cfg(not(feature = "lab"))]
fn with_lab_addresses(_: Connections, _: &Path) -> Result<Connections, RunError> {
    Err(RunError::NoLab {
        what: "run --lab-addresses",
    })
}

/// What the daemon follows: a Git remote (with its webhooks) or, without a tracker, the
/// folder of the options.
struct DaemonSource {
    tracker: Option<Tracker>,
    /// What the daemon publishes on, served since before it started.
    board: Arc<StatusBoard>,
    /// Where the status is committed (a Git remote only).
    status_branch: Option<(StatusRepository, WriterOptions)>,
    /// `--previews`: the forge, the remote pulls' heads are fetched from, how often, and the
    /// commit verification a head must pass to be applied.
    previews: Option<(
        RestForge,
        source::GitOptions,
        Duration,
        Option<Arc<Verifier>>,
    )>,
    /// What planning a preview may take.
    preview_limits: crate::preview::Limits,
    /// Reads the secrets of notification providers (their addresses and signing keys).
    reader: SecretReader,
}

/// How `kind`'s web pages show a commit (the dashboard's links).
fn forge_style(kind: crate::forge::ForgeKind) -> ForgeStyle {
    match kind {
        crate::forge::ForgeKind::Github => ForgeStyle::Github,
        crate::forge::ForgeKind::Gitea => ForgeStyle::Gitea,
        crate::forge::ForgeKind::Gitlab => ForgeStyle::Gitlab,
    }
}

/// The forge `--previews` posts to; its token is remembered by the redactor, so the status
/// branch never carries it.
fn previews_forge(
    args: &RunArgs,
    env: &dyn Fn(&str) -> Option<String>,
    redactor: &Redactor,
) -> Result<RestForge, RunError> {
    let target = crate::commands::preview::forge_target(&args.forge, env)
        .map_err(|err| RunError::Forge(err.to_string()))?;
    redactor.remember(&target.token);
    RestForge::new(&target, RetryPolicy::default()).map_err(|err| RunError::Forge(err.to_string()))
}

/// The status branch of the remote `options` follows, as the fleet's `status` says, paced by
/// `args`.
pub(super) fn status_branch(
    fleet: &Fleet,
    options: &source::GitOptions,
    args: &DaemonArgs,
    redactor: &Redactor,
) -> Result<(StatusRepository, WriterOptions), RunError> {
    if fleet.status.branch == options.branch {
        return Err(StatusBranchError::SameBranch {
            branch: fleet.status.branch.clone(),
        }
        .into());
    }
    let repository = StatusRepository::open(
        BranchOptions {
            url: options.url.clone(),
            branch: fleet.status.branch.clone(),
            credentials: options.credentials.clone(),
            mirror_root: options.mirror_root.clone(),
        },
        redactor.clone(),
    )?;
    let writer = WriterOptions {
        commit: CommitSettings {
            author: fleet.status.author.clone(),
            skip_ci: fleet.status.skip_ci,
            max_attempts: crate::status_branch::DEFAULT_ATTEMPTS,
        },
        window: args.status_debounce.0,
        floor: args.status_min_interval.0,
    };
    Ok((repository, writer))
}

/// Leader election as `run` was asked for it.
struct Election {
    lease: LeaseClient,
    leadership: Arc<Leadership>,
    timings: LeaseTimings,
}

/// The election `--leader-elect` asks for (`None` without it), on the cluster of
/// `--lease-kubeconfig` or else of `default_kubeconfig`.
async fn election(
    args: &LeaderArgs,
    default_kubeconfig: Option<String>,
) -> Result<Option<Election>, RunError> {
    if !args.leader_elect {
        return Ok(None);
    }
    let timings = LeaseTimings {
        duration: args.lease_duration.0,
        renew: args.lease_renew.0,
        retry: args.lease_retry.0,
    };
    if timings.renew >= timings.duration || timings.retry >= timings.duration {
        return Err(RunError::LeaseTimings {
            duration: timings.duration,
            renew: timings.renew,
            retry: timings.retry,
        });
    }
    let cluster = if args.lease_in_cluster {
        KubeClusterClient::in_cluster().map_err(RunError::LeaseCluster)?
    } else {
        let kubeconfig = match &args.lease_kubeconfig {
            Some(path) => {
                std::fs::read_to_string(path).map_err(|source| RunError::LeaseKubeconfig {
                    path: path.clone(),
                    source,
                })?
            }
            None => default_kubeconfig.ok_or(RunError::NoLeaseCluster)?,
        };
        KubeClusterClient::connect(&kubeconfig)
            .await
            .map_err(RunError::LeaseCluster)?
    };
    let lease = LeaseClient::new(&cluster, &args.lease_namespace, &args.lease_name);
    let identity = args.lease_identity.clone().unwrap_or_else(default_identity);
    tracing::info!(identity = %identity, lease = %lease.describe(), "electing a leader");
    let leadership = Arc::new(Leadership::new(identity, lease.describe()));
    Ok(Some(Election {
        lease,
        leadership,
        timings,
    }))
}

/// The host name (a pod's name in Kubernetes) and the process id, so two replicas on one
/// machine differ too.
fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let host = if host.is_empty() {
        "capstan".to_owned()
    } else {
        host
    };
    format!("{host}_{}", std::process::id())
}

async fn serve_daemon(
    options: DaemonOptions,
    connections: Connections,
    clock: Arc<dyn Clock>,
    source: DaemonSource,
    election: Option<Election>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
    let admission = options.admission.clone();
    // Runtime suspensions are kept beside the CA pins, in the management cluster, so they
    // outlive this process; without one, in memory.
    let connections_management = crate::connect::Providers::management(&connections, None).cloned();
    let actions = match connections_management.clone() {
        Some(management) => Actions::new(Box::new(InCluster(management)), true),
        None => Actions::default(),
    };
    let notifier = crate::notify::Notifier::new(
        source.reader.clone(),
        crate::notify::NotifyOptions::default(),
        Arc::clone(&clock),
    );
    let mut daemon = Daemon::new(options, Arc::new(connections), Arc::clone(&clock))
        .with_actions(Arc::new(actions))
        .with_progress(Box::new(std::io::stdout()))
        .with_notifier(notifier);
    if let Some((repository, writer_options)) = source.status_branch {
        daemon = daemon.with_status_branch(StatusWriter::new(
            repository,
            writer_options,
            Arc::clone(&clock),
        ));
    }
    let (stop_electing, mut stopped) = tokio::sync::watch::channel(false);
    let mut elector = None;
    if let Some(election) = election {
        daemon = daemon.with_leadership(Arc::clone(&election.leadership));
        elector = Some(tokio::spawn(async move {
            let stop = async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            };
            leader::elect(election.lease, &election.leadership, election.timings, stop).await;
        }));
    }
    if let Some(tracker) = source.tracker {
        daemon = daemon.with_tracker(verified_records(tracker, &connections_management));
    }
    daemon = daemon.with_board(source.board);
    let previewer = source.previews.map(|(forge, git, interval, verifier)| {
        // Heads are previewed under the limits the daemon applies revisions under.
        let previewer = Previewer::new(forge, git, daemon.board(), clock, interval, admission)
            .with_verifier(verifier)
            .with_limits(source.preview_limits);
        let mut stopped = stop_electing.subscribe();
        tokio::spawn(previewer.run(async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        }))
    });
    let result = daemon.run(stop).await;
    // Steps in flight are gone with the daemon: only now is the Lease released.
    stop_electing.send_replace(true);
    if let Some(previewer) = previewer
        && let Err(err) = previewer.await
    {
        tracing::error!("the previews task failed: {err}");
    }
    if let Some(elector) = elector
        && let Err(err) = elector.await
    {
        tracing::error!("the leader election task failed: {err}");
    }
    result?;
    Ok(())
}

/// Under `source.verify`, keeps the last verified revision in `management` (the fleet's
/// first management cluster, beside the runtime suspensions), where every replica reads it;
/// a fleet without one keeps it in the mirror only.
fn verified_records(tracker: Tracker, management: &Option<KubeClusterClient>) -> Tracker {
    let (true, Some(management)) = (tracker.is_verifying(), management) else {
        if tracker.is_verifying() {
            tracing::warn!(
                "source.verify: the fleet has no management cluster, so the last verified revision is kept in this replica's mirror only: a replica with an empty mirror cannot refuse a rollback to an older signed commit"
            );
        }
        return tracker;
    };
    let management = management.clone();
    tracker.with_verified_records(move |url, branch| {
        Arc::new(crate::daemon::verified::InCluster::new(
            management, url, branch,
        ))
    })
}

fn daemon_options(repo: &Path, args: &DaemonArgs) -> DaemonOptions {
    let mut options = DaemonOptions::new(repo.to_owned());
    if let Some(interval) = args.busy_interval {
        options.busy_interval = interval.0;
    }
    options.concurrency = args.concurrency.max(1);
    options
}

/// capstan.yaml, validated and admitted (cluster files with errors are reported by the
/// daemon, which leaves those clusters alone).
fn load_fleet(repo: &Path, admission: &Admission) -> Result<Fleet, RunError> {
    let files = source::read_repo(repo)?;
    fleet_of(&files, &repo.display().to_string(), admission)
}

/// The fleet of `files` as `admission` lets the daemon start on it: nothing is connected to
/// or read for a revision the daemon's limits refuse.
fn fleet_of(files: &RepoFiles, shown: &str, admission: &Admission) -> Result<Fleet, RunError> {
    let loaded = admission.load(files);
    if let Some(desired) = loaded.desired {
        return Ok(desired.fleet);
    }
    let errors = loaded.diagnostics.to_string();
    let repo = shown.to_owned();
    Err(if spec::load(files).desired.is_some() {
        RunError::Refused { repo, errors }
    } else {
        RunError::Invalid { repo, errors }
    })
}

/// Opens the mirror of a remote and reads its tip once: the fleet's connections are needed
/// before the daemon starts. When the remote cannot be reached but the mirror holds a tip
/// from an earlier run, that revision is reconciled meanwhile (the daemon keeps polling).
///
/// With `verifier`, the tip is read only when it passes; else the last revision verified by
/// an earlier run (kept in the mirror), if its signature still passes; else nothing can be
/// reconciled and the daemon does not start.
#[cfg(feature = "lab")]
pub(super) fn open_remote(
    options: source::GitOptions,
    redactor: &Redactor,
    admission: &Admission,
    verifier: Option<&Verifier>,
) -> Result<Opened, RunError> {
    open_remote_counted(
        options,
        redactor,
        admission,
        verifier,
        Arc::new(SourceMetrics::default()),
    )
}

/// A remote's mirror, opened, with the fleet, snapshot and verification of the revision read.
pub(super) type Opened = (Fleet, GitSource, source::Snapshot, VerifyStart);

/// [`open_remote`], counting into `metrics`.
fn open_remote_counted(
    options: source::GitOptions,
    redactor: &Redactor,
    admission: &Admission,
    verifier: Option<&Verifier>,
    metrics: Arc<SourceMetrics>,
) -> Result<Opened, RunError> {
    let mut git = GitSource::open(options, redactor.clone(), metrics)?;
    let revision = match git.poll() {
        Ok(outcome) => outcome.revision().clone(),
        Err(err) if err.is_transient() => {
            let Some(tip) = git.mirrored_tip() else {
                return Err(err.into());
            };
            tracing::warn!(revision = %tip, "the remote cannot be reached; starting from the mirror's last revision: {}", crate::errors::error_chain(&err));
            tip
        }
        Err(err) => return Err(err.into()),
    };
    let (revision, start) = match verifier {
        None => (revision, VerifyStart::default()),
        Some(verifier) => {
            source::verified_start(&git, verifier, revision).map_err(RunError::Unverified)?
        }
    };
    let commit = git.read(&revision)?;
    let fleet = fleet_of(&commit.files, &git.remote_name(), admission)?;
    let snapshot = source::Snapshot {
        revision: revision.to_string(),
        files: commit.files,
    };
    Ok((fleet, git, snapshot, start))
}

/// The first revision of a remote, waited for: `capstan run` started while the remote does
/// not answer and no mirror holds a revision yet keeps trying.
struct FirstRevision<'a> {
    options: source::GitOptions,
    redactor: &'a Redactor,
    admission: &'a Admission,
    verifier: Option<&'a Verifier>,
    metrics: Arc<SourceMetrics>,
}

impl FirstRevision<'_> {
    /// Opens the remote ([`open_remote`]); while it cannot be reached (and no earlier run left
    /// a revision in the mirror), tries again with capped backoff (at once when `trigger` is
    /// pulled, by a webhook), publishing `SourceAvailable=False` with the reason on `board`
    /// (which keeps `/healthz` alive) and a line on `out`. `None` when `stop` completes first.
    ///
    /// # Errors
    /// What trying again cannot fix: the mirror cannot be made, the revision is invalid,
    /// refused or unverified.
    async fn wait(
        self,
        board: &StatusBoard,
        trigger: &PollTrigger,
        out: &mut dyn Write,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<Option<Opened>, RunError> {
        let backoff = crate::backoff::Backoff::default();
        let remote = self.redactor.redact(&self.options.url);
        tokio::pin!(stop);
        let mut failures = 0_u32;
        loop {
            // libgit2 blocks; this runs on `block_on`'s own thread, so the runtime's workers
            // go on serving HTTP meanwhile.
            let err = match open_remote_counted(
                self.options.clone(),
                self.redactor,
                self.admission,
                self.verifier,
                Arc::clone(&self.metrics),
            ) {
                Ok(opened) => {
                    if failures > 0 {
                        let _ = writeln!(out, "source       {remote} answers");
                    }
                    return Ok(Some(opened));
                }
                Err(RunError::Git(err)) if is_worth_waiting_for(&err) => err,
                Err(err) => return Err(err),
            };
            failures = failures.saturating_add(1);
            let delay = backoff.delay(failures, crate::backoff::random_unit());
            let reason = self.redactor.redact(&crate::errors::error_chain(&err));
            board.source_unreachable_before_first_revision(&reason, SystemClock.now(), delay);
            tracing::warn!(remote = %remote, retry_in = ?delay, "git remote unavailable, no revision read yet: {reason}");
            let _ = writeln!(
                out,
                "{}",
                crate::redact::message(&format!(
                    "source       {reason}; no revision yet, trying again in {}s",
                    delay.as_secs().max(1)
                ))
            );
            let _ = out.flush();
            tokio::select! {
                () = &mut stop => return Ok(None),
                () = trigger.pulled() => tracing::debug!("a webhook asks for a poll"),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }
}

/// Whether `capstan run` should wait for the remote rather than exit: it does not answer,
/// or has no such branch yet. An unreadable credential is not waited for: it is the
/// operator's to fix, and is said at once.
fn is_worth_waiting_for(err: &GitError) -> bool {
    err.is_transient() && !matches!(err, GitError::Credentials(_))
}

pub(super) fn runtime() -> Result<tokio::runtime::Runtime, RunError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)
}

/// Completes on SIGTERM or Ctrl-C (or at once if the handlers cannot be installed: a daemon
/// that cannot be stopped cleanly should not start).
pub(super) async fn stop_signal() {
    #[cfg(unix)]
    {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            tracing::error!("cannot listen for SIGTERM; stopping");
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
