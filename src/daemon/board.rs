//! What the daemon serves: the fleet's status and the counters of `/metrics`, shared between
//! the reconcile loop (which writes them) and the HTTP endpoint (which reads them).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use crate::leader::Leadership;
use crate::observed::Observed;
use crate::plan::ActionKind;
use crate::source::SourceMetrics;
use crate::status::{Condition, FleetStatus};

/// The status the daemon serves, shared with the HTTP endpoint.
#[derive(Debug, Default)]
pub struct StatusBoard {
    status: RwLock<FleetStatus>,
    /// Set under leader election: `/status` says leader or standby.
    leadership: std::sync::OnceLock<Arc<Leadership>>,
    /// Fleet conditions set apart from the passes (the status branch's), by type.
    conditions: Mutex<BTreeMap<String, Condition>>,
    counters: Mutex<Counters>,
    source: Arc<SourceMetrics>,
    /// The state the last pass observed (what `GET /observed` serves and previews plan
    /// against).
    observed: RwLock<Option<Arc<Observed>>>,
    /// When `GET /observed` was last asked for: until [`WORKLOADS_WANTED_FOR`] after it,
    /// passes observe pods and PodDisruptionBudgets too.
    observed_asked: Mutex<Option<std::time::Instant>>,
    /// Wakes the reconcile loop for a pass that observes pods and budgets.
    wake: tokio::sync::Notify,
    /// Counts observations that listed pods and budgets, for a request waiting on one.
    with_workloads: tokio::sync::watch::Sender<u64>,
    /// Whether the last observation listed them.
    last_with_workloads: std::sync::atomic::AtomicBool,
}

/// How long one `GET /observed` keeps passes observing pods and PodDisruptionBudgets: a
/// preview reads the state again soon after, an idle daemon stops paying for them.
pub const WORKLOADS_WANTED_FOR: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// What `/metrics` counts.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    /// Passes run.
    pub passes: u64,
    /// Steps by (action, "ok"|"error").
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

impl StatusBoard {
    /// A board whose `/metrics` include the source's counters.
    pub fn with_source_metrics(source: Arc<SourceMetrics>) -> Self {
        StatusBoard {
            source,
            ..StatusBoard::default()
        }
    }

    /// The source's counters (Git polls, fetches, webhooks).
    pub fn source_metrics(&self) -> &SourceMetrics {
        &self.source
    }

    /// The current status.
    pub fn status(&self) -> FleetStatus {
        let mut status = self
            .status
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        status.leadership = self.leadership.get().map(|l| l.status());
        let extra = self
            .conditions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        status.conditions.retain(|c| !extra.contains_key(&c.kind));
        status.conditions.extend(extra.values().cloned());
        status
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
    pub fn set_condition(&self, condition: Condition) {
        self.conditions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(condition.kind.clone(), condition);
    }

    /// Reports `leadership`'s role in every status from now on (once per board).
    pub(super) fn share_leadership(&self, leadership: Arc<Leadership>) {
        let _ = self.leadership.set(leadership);
    }

    /// Whether this replica leads (always, without leader election).
    pub(super) fn is_leading(&self) -> bool {
        self.leadership.get().is_none_or(|l| l.is_leading())
    }

    /// The current counters.
    pub fn counters(&self) -> Counters {
        self.counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
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
    /// returns a receiver that changes once one has (to wait on).
    pub fn ask_for_observed(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        let was_wanted = self.workloads_wanted()
            || self
                .last_with_workloads
                .load(std::sync::atomic::Ordering::SeqCst);
        *self
            .observed_asked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(std::time::Instant::now());
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

    pub(super) fn set(&self, status: FleetStatus) {
        *self
            .status
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = status;
    }

    pub(super) fn count(&self, update: impl FnOnce(&mut Counters)) {
        update(
            &mut self
                .counters
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
    }
}

impl crate::status_branch::Report for StatusBoard {
    fn fleet_conditions(&self) -> Vec<Condition> {
        self.status().conditions
    }

    fn set_condition(&self, condition: Condition) {
        StatusBoard::set_condition(self, condition);
    }

    fn count_status_push(&self, outcome: &'static str) {
        self.count(|c| *c.status_pushes.entry(outcome).or_default() += 1);
    }
}
