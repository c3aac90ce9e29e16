//! What the daemon serves: the fleet's status and the counters of `/metrics`, shared between
//! the reconcile loop (which writes them) and the HTTP endpoint (which reads them).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use crate::leader::Leadership;
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
}

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

    /// The current counters.
    pub fn counters(&self) -> Counters {
        self.counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
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
