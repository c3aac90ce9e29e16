//! What the daemon serves: the fleet's status and the counters of `/metrics`, shared between
//! the reconcile loop (which writes them) and the HTTP endpoint (which reads them).
//!
//! # Guarantees
//! Every message a status or condition carries was redacted and capped as it was set here
//! ([`crate::redact::message`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::dashboard::{CommitLinks, Outcome, PreviewComment, StepHistory, View};
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::observed::Observed;
use crate::plan::{ActionKind, Plan};
use crate::source::SourceMetrics;
use crate::status::{Condition, FleetStatus};

/// The status the daemon serves, shared with the HTTP endpoint.
#[derive(Debug)]
pub struct StatusBoard {
    /// Shared with the metrics, which read the clusters' from it at each scrape.
    status: Arc<RwLock<FleetStatus>>,
    /// Set under leader election: `/status` says leader or standby.
    leadership: std::sync::OnceLock<Arc<Leadership>>,
    /// The actions `POST /actions/...` take (the daemon's).
    actions: Mutex<Option<Arc<super::actions::Actions>>>,
    /// Fleet conditions set apart from the passes (the status branch's), by type.
    conditions: Mutex<BTreeMap<String, Condition>>,
    metrics: Metrics,
    /// When the last pass ended, and how long without one means the loop is stuck.
    liveness: Mutex<Liveness>,
    /// The state the last pass observed (what `GET /observed` serves and previews plan
    /// against).
    observed: RwLock<Option<Arc<Observed>>>,
    /// When `GET /observed` was last asked for: until [`WORKLOADS_WANTED_FOR`] after it,
    /// passes observe pods and PodDisruptionBudgets too.
    observed_asked: Mutex<Option<Instant>>,
    /// When a caller not authenticated last turned that on (see [`UNAUTHENTICATED_ASKS_EVERY`]).
    unauthenticated_ask: Mutex<Option<Instant>>,
    /// Wakes the reconcile loop for a pass that observes pods and budgets.
    wake: tokio::sync::Notify,
    /// Counts observations that listed pods and budgets, for a request waiting on one.
    with_workloads: tokio::sync::watch::Sender<u64>,
    /// Whether the last observation listed them.
    last_with_workloads: std::sync::atomic::AtomicBool,
    /// Counts the statuses published: `GET /events` tells open pages when it moves. Bumping it
    /// is all a pass pays for the dashboard; pages are drawn when asked for.
    generation: tokio::sync::watch::Sender<u64>,
    /// The last plan and the revision's files it was made from (the dashboard's predicted
    /// steps and distributions), handed over by the pass that made them, never copied.
    drawn_from: RwLock<DrawnFrom>,
    /// The steps run lately, per cluster (the dashboard's timelines).
    history: Mutex<StepHistory>,
    /// Where the remote's commits are shown, when it is on a known forge.
    links: std::sync::OnceLock<CommitLinks>,
    /// The open pull requests' previews (`run --previews`), by number, the latest
    /// [`crate::dashboard::preview::MAX_KEPT`].
    previews: Mutex<Vec<PreviewComment>>,
    /// The daemon's clock (the lab's in a demo), for the pages' "ago".
    clock: Mutex<Option<DaemonClock>>,
}

/// The last plan and the files it was made from.
type DrawnFrom = (Option<Arc<Plan>>, Option<Arc<crate::spec::Loaded>>);

/// The daemon's clock, shared with the board.
#[derive(Clone)]
struct DaemonClock(Arc<dyn Clock>);

impl std::fmt::Debug for DaemonClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DaemonClock")
    }
}

/// How long one `GET /observed` keeps passes observing pods and PodDisruptionBudgets: a
/// preview reads the state again soon after, an idle daemon stops paying for them.
pub const WORKLOADS_WANTED_FOR: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Without an HTTP token anyone may ask for `/observed`: such a request turns pod and budget
/// listing on at most this often (so at most a quarter of the time), an authenticated one
/// whenever it comes.
pub const UNAUTHENTICATED_ASKS_EVERY: Duration = Duration::from_secs(60 * 60);

/// Passes that may be missed before `/healthz` says the loop is stuck: one late pass is a slow
/// observation, three in a row are not.
const MISSED_PASSES: u32 = 3;

/// The longest a pass may take on top of the delays between passes: an observation whose
/// Proxmox or cluster requests run into their timeouts, a Git remote that answers slowly.
pub const DEFAULT_STALL_ALLOWANCE: Duration = Duration::from_secs(120);

/// How long without a completed pass means the loop is stuck (`/healthz` turns 503):
/// [`MISSED_PASSES`] times the longest delay between passes, plus the longest a pass may take
/// (`allowance`). Steps run in tasks of their own, so a long drain or kubeadm never holds a
/// pass up; only observing and reading the source do.
pub fn stale_after(longest_delay: Duration, allowance: Duration) -> Duration {
    longest_delay
        .saturating_mul(MISSED_PASSES)
        .saturating_add(allowance)
}

/// The loop's heartbeat, for `/healthz`.
#[derive(Debug, Clone, Copy)]
struct Liveness {
    /// When the last pass ended (monotonic) and what the daemon's clock said then.
    last_pass: Option<(Instant, jiff::Timestamp)>,
    /// How long without a pass means the loop is stuck.
    stale_after: Duration,
}

/// What `/healthz` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// No pass has completed yet.
    Starting,
    /// A pass completed within the limit.
    Live,
    /// No pass completed for longer than the limit: the loop is stuck.
    Stalled {
        /// When the last one ended (the daemon's clock).
        since: jiff::Timestamp,
        /// How long ago that was.
        ago: Duration,
        /// The limit.
        limit: Duration,
    },
}

/// What `/metrics` counts, as of one moment (read from the metrics).
#[derive(Debug, Default, Clone)]
pub struct Counters {
    /// Passes run.
    pub passes: u64,
    /// Steps by (action, "ok"|"error"|"stopped").
    pub steps: BTreeMap<(ActionKind, &'static str), u64>,
    /// When the last pass ended.
    pub last_pass: Option<jiff::Timestamp>,
    /// Guest-agent requests the daemon made through Proxmox (observation and steps).
    pub guest_agent_calls: u64,
    /// Guest-agent requests made while the last pass observed.
    pub pass_guest_agent_calls: u64,
    /// Status branch attempts by outcome: `pushed`, `unchanged`, or the `StatusPushed` reason.
    pub status_pushes: BTreeMap<&'static str, u64>,
}

impl Default for StatusBoard {
    /// A board whose source counts into no one else's registry.
    fn default() -> Self {
        StatusBoard::with_source_metrics(Arc::default())
    }
}

impl StatusBoard {
    /// A board whose `/metrics` include the source's counters.
    pub fn with_source_metrics(source: Arc<SourceMetrics>) -> Self {
        let status = Arc::new(RwLock::new(FleetStatus::default()));
        StatusBoard {
            metrics: Metrics::new(source, Arc::clone(&status)),
            status,
            leadership: std::sync::OnceLock::new(),
            actions: Mutex::default(),
            conditions: Mutex::default(),
            liveness: Mutex::new(Liveness {
                last_pass: None,
                stale_after: Duration::MAX,
            }),
            observed: RwLock::default(),
            observed_asked: Mutex::default(),
            unauthenticated_ask: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            with_workloads: tokio::sync::watch::Sender::new(0),
            last_with_workloads: std::sync::atomic::AtomicBool::new(false),
            generation: tokio::sync::watch::Sender::new(0),
            drawn_from: RwLock::default(),
            history: Mutex::default(),
            links: std::sync::OnceLock::new(),
            previews: Mutex::default(),
            clock: Mutex::default(),
        }
    }

    /// The source's counters (Git polls, fetches, webhooks).
    pub fn source_metrics(&self) -> &SourceMetrics {
        self.metrics.source()
    }

    /// Every metric, in the registry `/metrics` serves.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The current status.
    pub fn status(&self) -> FleetStatus {
        let mut status = self
            .status
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        status.leadership = self.leadership.get().map(|l| l.status());
        self.add_conditions_set_apart(&mut status.conditions);
        status
    }

    /// The fleet's conditions as [`StatusBoard::status`] shows them, without copying the
    /// rest of the status (the status writer reads them after every attempt).
    pub fn fleet_conditions(&self) -> Vec<Condition> {
        let mut conditions = self.read_published(|status| status.conditions.clone());
        self.add_conditions_set_apart(&mut conditions);
        conditions
    }

    /// `conditions` (a pass's) with those [`StatusBoard::set_condition`] set in place of
    /// theirs.
    fn add_conditions_set_apart(&self, conditions: &mut Vec<Condition>) {
        let extra = self
            .conditions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        conditions.retain(|c| !extra.contains_key(&c.kind));
        conditions.extend(extra.values().cloned());
    }

    /// Reads the status as the last pass published it (without the conditions set apart
    /// and the leadership), without copying it: `/metrics` reads it on every scrape.
    pub fn read_published<R>(&self, read: impl FnOnce(&FleetStatus) -> R) -> R {
        read(
            &self
                .status
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Sets a fleet condition that the passes do not compute (e.g. `StatusPushed`): kept
    /// until set again, whatever the passes publish meanwhile.
    pub fn set_condition(&self, mut condition: Condition) {
        condition.message = crate::redact::message(&condition.message);
        self.conditions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(condition.kind.clone(), condition);
        self.generation.send_modify(|generation| *generation += 1);
    }

    /// Reports `leadership`'s role in every status from now on (once per board).
    pub(super) fn share_leadership(&self, leadership: Arc<Leadership>) {
        let _ = self.leadership.set(leadership);
    }

    /// Takes `POST /actions/...` through `actions` (the daemon's, replacing any before).
    pub(super) fn share_actions(&self, actions: Arc<super::actions::Actions>) {
        *self
            .actions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(actions);
    }

    /// The actions `POST /actions/...` take; `None` for a board no daemon serves.
    pub fn actions(&self) -> Option<Arc<super::actions::Actions>> {
        self.actions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Whether this replica leads (always, without leader election).
    pub(super) fn is_leading(&self) -> bool {
        self.leadership.get().is_none_or(|l| l.is_leading())
    }

    /// The current counters.
    pub fn counters(&self) -> Counters {
        let metrics = &self.metrics;
        let (guest_agent_calls, pass_guest_agent_calls) = metrics.guest_agent_calls();
        let steps = ActionKind::ALL
            .into_iter()
            .flat_map(|action| [(action, "ok"), (action, "error"), (action, "stopped")])
            .map(|(action, result)| ((action, result), metrics.steps(action, result)))
            .filter(|(_, count)| *count > 0)
            .collect();
        let status_pushes = crate::status_branch::PUSH_OUTCOMES
            .into_iter()
            .map(|outcome| (outcome, metrics.status_pushes(outcome)))
            .filter(|(_, count)| *count > 0)
            .collect();
        Counters {
            passes: metrics.passes(),
            steps,
            last_pass: self.liveness().last_pass.map(|(_, at)| at),
            guest_agent_calls,
            pass_guest_agent_calls,
            status_pushes,
        }
    }

    fn liveness(&self) -> Liveness {
        *self
            .liveness
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the reconcile loop is alive: a pass completed within the limit the last
    /// pass set (see [`StatusBoard::pass_completed`]).
    pub fn health(&self) -> Health {
        let liveness = self.liveness();
        match liveness.last_pass {
            None => Health::Starting,
            Some((ended, since)) => {
                let ago = ended.elapsed();
                if ago > liveness.stale_after {
                    Health::Stalled {
                        since,
                        ago,
                        limit: liveness.stale_after,
                    }
                } else {
                    Health::Live
                }
            }
        }
    }

    /// Records a completed pass, ended at `now` (the daemon's clock): `/healthz` reports
    /// the loop stuck when no other completes within `stale_after`.
    pub fn pass_completed(&self, now: jiff::Timestamp, stale_after: Duration) {
        *self
            .liveness
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Liveness {
            last_pass: Some((Instant::now(), now)),
            stale_after,
        };
    }

    /// Publishes that the source has not answered before any revision could be read:
    /// `SourceAvailable=False` with `error` (redacted here, as every message). Each attempt
    /// counts as the loop's heartbeat, so `/healthz` says alive while the next attempt,
    /// `retry_in` from now, comes in time ([`stale_after`]).
    pub fn source_unreachable_before_first_revision(
        &self,
        error: &str,
        now: jiff::Timestamp,
        retry_in: Duration,
    ) {
        let previous = self.read_published(|status| status.conditions.clone());
        let mut condition = crate::status::source_condition(Some(error), &previous, now);
        condition.message =
            format!("{error}; no revision read yet: nothing is reconciled until it answers");
        self.set(FleetStatus {
            updated: Some(now),
            conditions: vec![condition],
            ..FleetStatus::default()
        });
        self.pass_completed(now, stale_after(retry_in, DEFAULT_STALL_ALLOWANCE));
    }

    /// The state the last pass observed (`None` before the first observation). It holds no
    /// secret: kubeconfigs are known by fingerprint only.
    pub fn observed(&self) -> Option<Arc<Observed>> {
        self.observed
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Notes that the observed state was asked for (`GET /observed`). When pods and budgets
    /// were not being observed, wakes the reconcile loop for a pass that observes them, and
    /// returns a receiver that changes once one has (to wait on). A caller that is not
    /// `authenticated` (no HTTP token is configured) turns them on at most once every
    /// [`UNAUTHENTICATED_ASKS_EVERY`]; otherwise it gets the last state observed.
    pub fn ask_for_observed(
        &self,
        authenticated: bool,
    ) -> Option<tokio::sync::watch::Receiver<u64>> {
        let was_wanted = self.workloads_wanted()
            || self
                .last_with_workloads
                .load(std::sync::atomic::Ordering::SeqCst);
        if !authenticated && !was_wanted {
            let mut last = self
                .unauthenticated_ask
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if last.is_some_and(|at| at.elapsed() < UNAUTHENTICATED_ASKS_EVERY) {
                return None;
            }
            *last = Some(Instant::now());
        }
        if !authenticated && was_wanted {
            // Keeping them on is for authenticated callers: the window runs out.
            return None;
        }
        *self
            .observed_asked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
        if was_wanted {
            return None;
        }
        let observed = self.with_workloads.subscribe();
        self.wake.notify_one();
        Some(observed)
    }

    /// Completes when `GET /observed` asks for a pass that observes pods and budgets.
    pub(super) async fn woken_for_workloads(&self) {
        self.wake.notified().await;
    }

    /// Whether passes should observe pods and PodDisruptionBudgets for `GET /observed`.
    pub fn workloads_wanted(&self) -> bool {
        self.observed_asked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some_and(|asked| asked.elapsed() < WORKLOADS_WANTED_FOR)
    }

    /// Publishes a pass's observation; `with_workloads` when it listed pods and budgets.
    pub(super) fn set_observed(&self, observed: Observed, with_workloads: bool) {
        *self
            .observed
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(observed));
        self.last_with_workloads
            .store(with_workloads, std::sync::atomic::Ordering::SeqCst);
        if with_workloads {
            self.with_workloads.send_modify(|count| *count += 1);
        }
    }

    /// Publishes `status`, every message of it redacted and capped ([`crate::redact::message`]):
    /// what `/status`, `/metrics`, the status branch and the progress lines read.
    pub(super) fn set(&self, status: FleetStatus) {
        let mut status = status.map_messages(crate::redact::message);
        self.history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain_clusters(|name| status.clusters.contains_key(name));
        let mut published = self
            .status
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // With pages open, an idle pass (the same status, computed later) draws nothing again;
        // with none, comparing would be the only cost, so it is skipped.
        let news = self.generation.receiver_count() == 0 || differs(&published, &mut status);
        *published = status;
        drop(published);
        if news {
            self.generation.send_modify(|generation| *generation += 1);
        }
    }

    /// The generation of the status published last (it moves with every status).
    pub fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// A receiver that changes whenever a new status is published (`GET /events`).
    pub fn watch_generation(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Keeps `plan` and the files it was made from for the dashboard (moved in, not copied).
    pub(super) fn share_plan(&self, plan: Arc<Plan>, loaded: Arc<crate::spec::Loaded>) {
        *self
            .drawn_from
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (Some(plan), Some(loaded));
    }

    /// Records that a step started (the dashboard's timeline); returns its id for
    /// [`StatusBoard::step_ended`].
    pub(super) fn step_started(
        &self,
        cluster: &str,
        action: ActionKind,
        machine: Option<crate::model::NodeName>,
        revision: &str,
        at: jiff::Timestamp,
    ) -> u64 {
        let id = self
            .history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .started(cluster, action, machine, revision, at);
        self.generation.send_modify(|generation| *generation += 1);
        id
    }

    /// Records how step `id` of `cluster` ended (a failure's message redacted here).
    pub(super) fn step_ended(&self, cluster: &str, id: u64, outcome: Outcome, at: jiff::Timestamp) {
        let outcome = match outcome {
            Outcome::Failed(message) => Outcome::Failed(crate::redact::message(&message)),
            other => other,
        };
        self.history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .ended(cluster, id, outcome, at);
        self.generation.send_modify(|generation| *generation += 1);
    }

    /// Keeps pull request `comment.pull`'s preview for the dashboard (replacing the one before);
    /// open pages hear of it when its fingerprint changed.
    pub(super) fn preview_made(&self, comment: PreviewComment) {
        let mut previews = self
            .previews
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let news = !previews
            .iter()
            .any(|kept| kept.pull == comment.pull && kept.fingerprint == comment.fingerprint);
        previews.retain(|kept| kept.pull != comment.pull);
        previews.push(comment);
        previews.sort_by_key(|kept| std::cmp::Reverse(kept.pull));
        previews.truncate(crate::dashboard::preview::MAX_KEPT);
        drop(previews);
        if news {
            self.generation.send_modify(|generation| *generation += 1);
        }
    }

    /// Forgets the previews of pull requests not in `open`.
    pub(super) fn retain_previews(&self, open: &[u64]) {
        self.previews
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|kept| open.contains(&kept.pull));
    }

    /// Links revisions to their commits on `links`' forge from now on (once per board).
    pub fn link_commits(&self, links: CommitLinks) {
        let _ = self.links.set(links);
    }

    /// Reads time from `clock` (the daemon's) for the dashboard.
    pub(super) fn share_clock(&self, clock: Arc<dyn Clock>) {
        *self
            .clock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(DaemonClock(clock));
    }

    /// Draws with `draw` from the status as published now, the last observation and plan and
    /// the steps run lately. Pages are drawn only here, when one is asked for.
    pub fn draw<R>(&self, draw: impl FnOnce(&View<'_>) -> R) -> R {
        // Read first: a status published while drawing moves it past, and the page fetches again.
        let generation = self.generation();
        let now = self
            .clock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map_or_else(|| crate::clock::SystemClock.now(), |clock| clock.0.now());
        let status = self.status();
        let observed = self.observed();
        let (plan, loaded) = self
            .drawn_from
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let history = self
            .history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let previews = self
            .previews
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        draw(&View {
            status: &status,
            observed: observed.as_deref(),
            plan: plan.as_deref(),
            desired: loaded.as_ref().and_then(|loaded| loaded.desired.as_ref()),
            history: &history,
            links: self.links.get(),
            previews: &previews,
            generation,
            now,
        })
    }
}

/// Whether `new` says something `old` does not, when it was computed aside.
fn differs(old: &FleetStatus, new: &mut FleetStatus) -> bool {
    let updated = std::mem::replace(&mut new.updated, old.updated);
    let differs = old != new;
    new.updated = updated;
    differs
}

impl crate::status_branch::Report for StatusBoard {
    fn fleet_conditions(&self) -> Vec<Condition> {
        StatusBoard::fleet_conditions(self)
    }

    fn set_condition(&self, condition: Condition) {
        StatusBoard::set_condition(self, condition);
    }

    fn count_status_push(&self, outcome: &'static str) {
        self.metrics.count_status_push(outcome);
    }
}

/// Notifications count into the board's registry.
impl crate::notify::Outcomes for StatusBoard {
    fn count(&self, provider: &str, outcome: &'static str) {
        self.metrics.count_notification(provider, outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unauthenticated_ask_for_workloads_counts_once_an_hour_and_an_authenticated_one_always() {
        let board = StatusBoard::default();
        assert!(
            board.ask_for_observed(false).is_some(),
            "the first ask wakes a pass that lists pods and budgets"
        );
        assert!(board.workloads_wanted());
        // Its window ran out (as after 15 minutes); the hour is not over.
        *board
            .observed_asked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        assert!(
            board.ask_for_observed(false).is_none(),
            "not again within the hour"
        );
        assert!(!board.workloads_wanted());
        assert!(
            board.ask_for_observed(true).is_some(),
            "a caller with the token turns them on"
        );
        assert!(board.workloads_wanted());
    }
}
