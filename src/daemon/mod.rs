//! The reconciler daemon: per pass, refresh the source, observe, plan, start the next steps
//! of every cluster that has no step in flight, report, and schedule the next pass.
//!
//! # Guarantees
//! - Level-triggered: every pass re-observes; nothing is journalled, so a restart at any
//!   moment continues from the facts. Files are parsed and validated again only when the
//!   source's revision changed.
//! - A Git remote that cannot be reached leaves the last revision read in force: nothing is
//!   removed because the source is unreachable, and the fleet reports `SourceAvailable=False`.
//! - Each step runs in its own task; when one ends, or has changed the world and goes on
//!   waiting (kubeadm done, its Node not Ready yet), the next pass starts at once and plans
//!   its cluster again. Newly ready steps that build machines start beside those still
//!   running, on other machines; a machine never has two steps in flight, and every other
//!   step runs alone ([`inflight`] has the rules). Clusters run concurrently, at most
//!   `concurrency` of them having steps in flight at a time.
//! - A failing step is retried with capped exponential backoff (per cluster, reset on success);
//!   after `failures_to_block` failures in a row the cluster reports Blocked with the error,
//!   and other clusters carry on. A step that panics counts as a failed step, the panic
//!   message being its error: its cluster is never left waiting on a task that is gone. Its
//!   message, as every message of a published status, is redacted ([`crate::redact`]).
//! - A step runs only while its replica leads: it checks its [`Fence`] before each change, and
//!   is stopped the moment leadership ends; a stopped step is no failure ([`outcomes`]).

pub mod actions;
mod board;
pub mod http;
mod inflight;
mod memory;
mod outcomes;
pub mod previews;
mod progress;
mod publish;
mod timings;
pub mod verified;

pub use board::{Counters, Health, StatusBoard};

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::connect::Providers;
use crate::execute::{ExecuteError, Executor, StepContext, StepReport};
use crate::fence::{Fence, NotLeading};
use crate::leader::Leadership;
use crate::observe::{ObserveSettings, Observer};
use crate::plan::{self, ActionKind, Policy, Step};
use crate::source::{self, Content, Tracker};
use crate::spec::{self, Desired};
use crate::status::{FleetStatus, StepRecord};
use crate::status_branch::StatusWriter;

/// The delay after a converged pass until a fleet file was read (the default `pollInterval`).
const DEFAULT_RESYNC: Duration = Duration::from_secs(60);

/// How the daemon paces itself.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    /// The repository folder (unless a [`Tracker`] is given with [`Daemon::with_tracker`]).
    pub repo: PathBuf,
    /// How often to poll a Git remote (default: the fleet's `pollInterval`).
    pub poll_interval: Option<Duration>,
    /// Delay between passes while work is in flight or pending.
    pub busy_interval: Duration,
    /// Delay between passes when converged; `None` follows the fleet's current `pollInterval`.
    pub resync: Option<Duration>,
    /// Clusters whose steps run at the same time.
    pub concurrency: usize,
    /// Retry pacing of failing steps.
    pub backoff: Backoff,
    /// Failures in a row before a cluster reports Blocked.
    pub failures_to_block: u32,
    /// Observe every cluster's pods and PodDisruptionBudgets on every pass (`run
    /// --previews`: previews simulate drains). Otherwise only while `GET /observed` is
    /// being asked for.
    pub observe_workloads: bool,
    /// The operator's limits every revision is checked against before anything of it is
    /// applied (secret sources, pinned connections).
    pub admission: crate::secrets::Admission,
    /// The longest a pass may take: `/healthz` turns 503 when no pass completed for three
    /// times the longest delay between passes plus this.
    pub stall_allowance: Duration,
}

impl DaemonOptions {
    /// Defaults for a real fleet: a pass every 5 s while busy.
    pub fn new(repo: PathBuf) -> Self {
        DaemonOptions {
            repo,
            poll_interval: None,
            busy_interval: Duration::from_secs(5),
            resync: None,
            concurrency: 4,
            backoff: Backoff::default(),
            failures_to_block: 5,
            observe_workloads: false,
            admission: crate::secrets::Admission::default(),
            stall_allowance: board::DEFAULT_STALL_ALLOWANCE,
        }
    }
}

/// A step's outcome as a cluster task reports it.
struct Finished {
    cluster: String,
    /// The revision the step was decided at.
    revision: String,
    /// The spec the step was planned from (to tell a fixed file from a repeat failure).
    spec: Option<crate::spec::ClusterSpec>,
    /// The step's outcome (none when leadership was lost before it started).
    outcome: Option<StepOutcome>,
}

/// How one step ended.
struct StepOutcome {
    /// The step's action.
    action: ActionKind,
    /// The machine it worked on.
    machine: Option<crate::model::NodeName>,
    /// What it did, or why it failed.
    result: Result<StepReport, ExecuteError>,
    /// Its wall time on the daemon's clock (zero when the clock went back).
    took: Duration,
}

/// What a step task in flight works on, to account for it when it ends without reporting
/// (it panicked, or was cancelled).
struct Running {
    cluster: String,
    /// The revision its step was decided at.
    revision: String,
    /// The spec its step was planned from.
    spec: Option<crate::spec::ClusterSpec>,
    /// Its step's action.
    action: ActionKind,
    /// Its step's machine.
    machine: Option<crate::model::NodeName>,
    /// Its run in the board's step history.
    history: u64,
}

/// A cluster as the pass that starts its steps observed it.
struct Seen {
    observed: crate::observed::ObservedCluster,
    access: crate::observe::ClusterAccess,
}

/// A step that failed, as the status reports it.
struct Failure {
    action: ActionKind,
    machine: Option<crate::model::NodeName>,
    /// The error chain, in one line.
    message: String,
    /// Whether a retry may succeed with nothing changed.
    transient: bool,
    /// The revision the step was decided at.
    revision: String,
    /// The `Blocked` reason of a failure no retry lifts (a record refused), reported at once.
    refusal: Option<&'static str>,
}

/// Per-cluster retry state.
#[derive(Debug, Default, Clone)]
struct Retry {
    failures: u32,
    not_before: Option<Instant>,
    /// The spec the failing step was planned from: once the file changes, the backoff is over
    /// (the fix is tried at once, not after up to five minutes).
    failed_with: Option<crate::spec::ClusterSpec>,
    last: Option<StepRecord>,
}

impl Retry {
    /// Whether the cluster may run steps now, its spec being `spec`.
    fn allows(&self, spec: Option<&crate::spec::ClusterSpec>) -> bool {
        self.not_before.is_none_or(|t| Instant::now() >= t) || self.failed_with.as_ref() != spec
    }
}

/// The daemon.
pub struct Daemon<Pr: Providers> {
    options: DaemonOptions,
    clock: Arc<dyn Clock>,
    observer: Observer<Pr>,
    executor: Arc<Executor<Pr>>,
    board: Arc<StatusBoard>,
    progress: Option<progress::Progress>,
    retries: BTreeMap<String, Retry>,
    in_flight: JoinSet<Finished>,
    /// What each task of `in_flight` works on, by task id.
    running: BTreeMap<tokio::task::Id, Running>,
    /// The steps in flight of each cluster that has any.
    busy: BTreeMap<String, inflight::ClusterWork>,
    limit: Arc<Semaphore>,
    /// The `pollInterval` of the last fleet file read (re-read every pass).
    poll_interval: Option<Duration>,
    tracker: Tracker,
    /// The last revision parsed, and what it gave: files are parsed again only when the
    /// revision changes.
    loaded: Option<(String, Arc<spec::Loaded>)>,
    /// The source's recent events (force-pushes), newest last.
    events: Vec<String>,
    /// Why the source is not followed right now (redacted), if it is not.
    source_unavailable: Option<String>,
    /// Where commit verification stands, when it is asked for.
    verification: Option<source::verify::VerifyReport>,
    /// Whether this replica may start steps (always, without leader election).
    leadership: Arc<Leadership>,
    /// Writes the status branch, once [`Daemon::run`] starts it.
    status_writer: Option<StatusWriter>,
    /// Feeds the status branch writer every status published.
    status_out: Option<watch::Sender<Option<FleetStatus>>>,
    /// Recent successful steps' durations, exported in the observed state.
    timings: timings::StepTimings,
    /// The convergence records of the status published before this daemon started (read
    /// from the status branch), for its first publication: a restart does not restart the
    /// soaks of staged rollouts.
    restored: BTreeMap<String, plan::Converged>,
    /// Runtime suspensions and `reconcile` requests, shared with the HTTP endpoint.
    actions: Arc<actions::Actions>,
    /// Sends notifications, when the daemon was given one.
    notifier: Option<crate::notify::Notifier>,
}

/// Source events kept in the status.
const KEPT_EVENTS: usize = 10;

impl<Pr: Providers> Daemon<Pr> {
    /// A daemon over `providers`.
    pub fn new(options: DaemonOptions, providers: Arc<Pr>, clock: Arc<dyn Clock>) -> Self {
        let limit = Arc::new(Semaphore::new(options.concurrency.max(1)));
        let tracker = Tracker::folder(options.repo.clone(), Arc::default());
        Daemon {
            tracker,
            loaded: None,
            events: Vec::new(),
            source_unavailable: None,
            verification: None,
            status_writer: None,
            status_out: None,
            timings: timings::StepTimings::default(),
            restored: BTreeMap::new(),
            actions: Arc::default(),
            notifier: None,
            observer: Observer::new(Arc::clone(&providers)),
            executor: Arc::new(Executor::new(providers, Arc::clone(&clock))),
            clock,
            board: Arc::new(StatusBoard::default()),
            progress: None,
            retries: BTreeMap::new(),
            in_flight: JoinSet::new(),
            running: BTreeMap::new(),
            busy: BTreeMap::new(),
            limit,
            poll_interval: None,
            leadership: Arc::new(Leadership::always(String::new())),
            options,
        }
        .sharing_actions()
    }

    /// Keeps runtime suspensions in `actions`' store (a management cluster's, for them to
    /// survive restarts) instead of this process's memory.
    pub fn with_actions(mut self, actions: Arc<actions::Actions>) -> Self {
        self.actions = actions;
        self.sharing_actions()
    }

    /// The actions the HTTP endpoint takes, through the board it serves.
    fn sharing_actions(self) -> Self {
        self.board.share_actions(Arc::clone(&self.actions));
        self.board.share_clock(Arc::clone(&self.clock));
        self
    }

    /// Starts steps only while `leadership` says this replica leads; observes, plans and
    /// reports either way, and reports the role in `/status`.
    pub fn with_leadership(mut self, leadership: Arc<Leadership>) -> Self {
        self.leadership = leadership;
        self.share_leadership();
        self
    }

    fn share_leadership(&self) {
        if self.leadership.is_elected() {
            // Set once per board; a board made by `with_tracker` after this gets it again.
            self.board.share_leadership(Arc::clone(&self.leadership));
        }
    }

    /// Prints a line to `out` whenever a cluster's phase, next step or wait changes.
    pub fn with_progress(mut self, out: Box<dyn Write + Send>) -> Self {
        self.progress = Some(progress::Progress::new(out));
        self
    }

    /// Follows `tracker` (e.g. a Git remote) instead of the folder of the options.
    pub fn with_tracker(mut self, tracker: Tracker) -> Self {
        self.board = Arc::new(StatusBoard::with_source_metrics(tracker.metrics()));
        self.tracker = tracker;
        self.share_leadership();
        self.sharing_actions()
    }

    /// Publishes on `board` (one served since before the daemon started, e.g. while the
    /// remote was waited for); its source counters must be the tracker's.
    pub fn with_board(mut self, board: Arc<StatusBoard>) -> Self {
        self.board = board;
        self.share_leadership();
        self.sharing_actions()
    }

    /// Commits every status published to the status branch (debounced), in a task beside
    /// the passes: a failure there is reported as `StatusPushed=False`, never stops them.
    pub fn with_status_branch(mut self, writer: StatusWriter) -> Self {
        self.status_writer = Some(writer);
        self
    }

    /// Sends the notifications each revision's `notifications:` asks for, through `notifier`
    /// (only while this replica leads; see [`crate::notify`]).
    pub fn with_notifier(mut self, notifier: crate::notify::Notifier) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// The trigger webhooks pull to make the next poll of the source happen now.
    pub fn poll_trigger(&self) -> Arc<source::PollTrigger> {
        self.tracker.trigger()
    }

    /// The status board (for the HTTP endpoint and tests).
    pub fn board(&self) -> Arc<StatusBoard> {
        Arc::clone(&self.board)
    }

    /// Reconciles until `shutdown` completes. Steps in flight are abandoned then: each is safe
    /// to repeat, and the next daemon finds where they left the world.
    ///
    /// # Errors
    /// When the repository folder cannot be watched.
    pub async fn run(
        mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), source::SourceError> {
        self.tracker.start_watching()?;
        if let Some(writer) = &mut self.status_writer {
            self.restored = match self.tracker.is_verifying() {
                // Whoever can push to the remote can write the status branch: under
                // source.verify its convergence records would let them end a soak early.
                true => {
                    tracing::info!(
                        "source.verify: the status branch's convergence records are not read back; the soaks of staged rollouts start again"
                    );
                    BTreeMap::new()
                }
                false => publish::restore_converged(writer).await,
            };
        }
        let writer = self.status_writer.take().map(|writer| {
            let (out, statuses) = watch::channel(None);
            self.status_out = Some(out);
            let board: Arc<dyn crate::status_branch::Report> = self.board.clone();
            tokio::spawn(writer.run(statuses, board))
        });
        self.actions.set_trigger(self.tracker.trigger());
        tokio::pin!(shutdown);
        loop {
            let number = self.actions.pass_started();
            let idle = self.pass().await;
            self.actions.pass_completed(number);
            self.board
                .pass_completed(self.clock.now(), self.stale_after());
            if idle {
                memory::release_freed_memory();
            }
            let delay = self.next_delay(idle);
            tokio::select! {
                () = &mut shutdown => break,
                () = self.tracker.changed() => tracing::debug!("source may have changed"),
                () = self.leadership.changed() => tracing::debug!("leadership changed"),
                () = self.board.woken_for_workloads() => tracing::debug!("GET /observed asks for pods and PodDisruptionBudgets"),
                () = self.executor.changed() => tracing::debug!("a step in flight changed the world"),
                () = self.actions.woken() => tracing::debug!("an action asks for a pass"),
                Some(done) = self.in_flight.join_next_with_id(), if !self.in_flight.is_empty() => {
                    self.settle(done);
                }
                () = tokio::time::sleep(delay) => {}
            }
        }
        self.in_flight.abort_all();
        // The writer ends once its feed closes, after the push it may be making.
        self.status_out = None;
        if let Some(writer) = writer {
            let _ = writer.await;
        }
        Ok(())
    }

    /// The delay until the next pass: the busy interval while this replica's work is in
    /// progress, else the resync interval. A standby starts no step, so the work its passes
    /// see is the leader's: it observes at the resync interval (the leader observes busy),
    /// and a change of leadership wakes it at once.
    fn next_delay(&self, idle: bool) -> Duration {
        if idle || !self.leadership.is_leading() {
            self.resync_interval()
        } else {
            self.options.busy_interval
        }
    }

    /// Prints the progress lines of the status just published, when this replica leads: a
    /// standby's would repeat the leader's.
    fn report_progress(&mut self) {
        if !self.leadership.is_leading() {
            return;
        }
        if let Some(progress) = &mut self.progress {
            self.board.read_published(|status| progress.report(status));
        }
    }

    /// How long without a completed pass means the loop is stuck ([`board::stale_after`]).
    fn stale_after(&self) -> Duration {
        let longest_delay = self.options.busy_interval.max(self.resync_interval());
        board::stale_after(longest_delay, self.options.stall_allowance)
    }

    /// The delay after a converged pass: the options' if set, else the fleet file's as last read.
    fn resync_interval(&self) -> Duration {
        self.options
            .resync
            .or(self.poll_interval)
            .unwrap_or(DEFAULT_RESYNC)
    }

    /// One pass; returns whether the fleet is idle (converged, nothing in flight).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn pass(&mut self) -> bool {
        while let Some(done) = self.in_flight.try_join_next_with_id() {
            self.settle(done);
        }
        let now = self.clock.now();
        let refresh = self.tracker.refresh().await;
        if let Some((previous, revision, taken)) = &refresh.forced {
            let outcome = match taken {
                true => "taken",
                false => "not applied (source.verify)",
            };
            self.events.push(format!(
                "force-push: {revision} does not descend from {previous}; {outcome}"
            ));
            if self.events.len() > KEPT_EVENTS {
                self.events.remove(0);
            }
        }
        self.source_unavailable = refresh.unavailable;
        self.verification = refresh.verification;
        let snapshot = match refresh.content {
            Content::Read(snapshot) => snapshot,
            Content::Unreadable { revision, error } => {
                return self.repository_error(vec![error], revision);
            }
        };
        let revision = snapshot.revision.clone();
        let loaded = match &self.loaded {
            Some((parsed, loaded)) if *parsed == revision => Arc::clone(loaded),
            _ => {
                tracing::debug!(revision = %revision, "parsing the repository");
                self.board.source_metrics().count_parse();
                let loaded = Arc::new(self.options.admission.load(&snapshot.files));
                self.loaded = Some((revision.clone(), Arc::clone(&loaded)));
                loaded
            }
        };
        let errors = repository_errors(&loaded.diagnostics);
        let Some(desired) = loaded.desired.as_ref() else {
            return self.repository_error(errors, Some(revision));
        };
        self.poll_interval = Some(desired.fleet.poll_interval.0);
        if let Some(notifier) = &mut self.notifier {
            let outcomes: Arc<dyn crate::notify::Outcomes> = self.board.clone();
            notifier.configure(&desired.fleet.notifications, &outcomes, &self.leadership);
        }
        self.tracker.follow_poll_interval(
            self.options
                .poll_interval
                .unwrap_or(desired.fleet.poll_interval.0),
        );
        let settings = ObserveSettings {
            workloads: self.options.observe_workloads || self.board.workloads_wanted(),
        };
        self.observer.set_settings(settings);
        let mut observation = self.observer.observe(desired, now).await;
        observation.observed.step_durations = self.timings.medians();
        let mut policy = Policy::of(desired);
        policy.suspended = self.actions.suspended().await;
        // Read in place: copying the whole fleet's status each pass for a few facts is waste.
        policy.stages = self.board.read_published(|status| status.stages(&revision));
        let plan = Arc::new(plan::plan(desired, &observation.observed, &policy, now));
        self.board
            .share_plan(Arc::clone(&plan), Arc::clone(&loaded));
        self.board
            .set_observed(observation.observed.clone(), settings.workloads);
        if self.leadership.is_leading() {
            // Config ISOs hold CA keys: any a failed step or a hand-destroyed VM left goes now.
            let fence = Fence::new(Arc::clone(&self.leadership) as Arc<dyn crate::fence::Licence>);
            self.executor
                .sweep_config_isos(&desired.fleet, &fence)
                .await;
        }
        let mut work = false;
        for cluster in &plan.clusters {
            let runnable = !cluster.steps.is_empty()
                && self.leadership.is_leading()
                && !observation.failed.contains_key(&cluster.name)
                && self
                    .retries
                    .get(&cluster.name)
                    .is_none_or(|r| r.allows(desired.clusters.get(&cluster.name).map(|c| &c.spec)));
            work |= !cluster.steps.is_empty() || !cluster.waiting_on.is_empty();
            if !runnable {
                continue;
            }
            let steps = match self.busy.get(&cluster.name) {
                Some(work) => work.startable(&cluster.steps),
                None => cluster.steps.clone(),
            };
            if steps.is_empty() {
                continue;
            }
            // The cluster as observed, read by each of its steps started now (shared: a
            // bootstrap starts a step per machine).
            let seen = Arc::new(Seen {
                observed: observation
                    .observed
                    .clusters
                    .get(&cluster.name)
                    .cloned()
                    .unwrap_or_default(),
                access: observation
                    .access
                    .get(&cluster.name)
                    .cloned()
                    .unwrap_or_default(),
            });
            for step in steps {
                self.start(desired, &seen, &revision, &cluster.name, step);
            }
        }
        self.publish(desired, &observation, &plan, revision, errors);
        self.board.metrics().count_pass(
            observation.guest_agent_calls,
            observation.guest_agent_calls_total,
        );
        !work && self.in_flight.is_empty()
    }

    /// Starts `step` of cluster `name` in a task of its own.
    fn start(
        &mut self,
        desired: &Desired,
        seen: &Arc<Seen>,
        revision: &str,
        name: &str,
        step: Step,
    ) {
        let spec = desired.clusters.get(name).map(|c| c.spec.clone());
        let seen = Arc::clone(seen);
        let executor = Arc::clone(&self.executor);
        let leadership = Arc::clone(&self.leadership);
        let limit = Arc::clone(&self.limit);
        let clock = Arc::clone(&self.clock);
        let revision = revision.to_owned();
        let history = self.board.step_started(
            name,
            step.kind(),
            step.target.machine.clone(),
            &revision,
            self.clock.now(),
        );
        let work = self.busy.entry(name.to_owned()).or_default();
        let slot = work.slot();
        let running = Running {
            history,
            cluster: name.to_owned(),
            revision: revision.clone(),
            spec: spec.clone(),
            action: step.kind(),
            machine: step.target.machine.clone(),
        };
        let name = name.to_owned();
        let in_flight = inflight::InFlight::of(&step);
        let task = self.in_flight.spawn(async move {
            inflight::hold(&slot, limit).await;
            let fence = Fence::new(leadership);
            let ctx = StepContext {
                cluster: &name,
                spec: spec.as_ref(),
                observed: &seen.observed,
                access: &seen.access,
                revision: &revision,
                fence: &fence,
            };
            // The slot may have been waited for: a replica that lost the Lease meanwhile
            // starts nothing (the new leader plans this step again). One that loses it while
            // the step runs stops it: at its next change (the executor checks the fence), or
            // now if it is waiting (a drain's pause, a command polled in a guest).
            let outcome = if fence.check("the step").is_ok() {
                // Timed on the daemon's clock, as windows are read: a lab's time is its own.
                let started = clock.now();
                let result = tokio::select! {
                    result = executor.run(ctx, &step) => result,
                    () = fence.lost() => Err(ExecuteError::NotLeading(NotLeading {
                        before: "the rest of the step".to_owned(),
                    })),
                };
                Some(StepOutcome {
                    action: step.kind(),
                    machine: step.target.machine.clone(),
                    result,
                    took: Duration::try_from(clock.now().duration_since(started))
                        .unwrap_or(Duration::ZERO),
                })
            } else {
                tracing::info!(cluster = %name, action = step.kind().name(), "not leading any more; step not started");
                None
            };
            Finished {
                cluster: name.clone(),
                revision: revision.clone(),
                spec,
                outcome,
            }
        });
        work.add(task.id(), in_flight);
        self.running.insert(task.id(), running);
    }
}

/// The repository's errors, one line each (warnings are for `capstan validate`).
fn repository_errors(diagnostics: &spec::Diagnostics) -> Vec<String> {
    diagnostics
        .0
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect()
}

#[cfg(test)]
mod tests;
