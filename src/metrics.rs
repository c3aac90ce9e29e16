//! Every metric `GET /metrics` serves, declared in this file and registered in one
//! prometheus-client [`Registry`] that the daemon owns ([`Metrics`], held by its status
//! board). The source and the webhooks count into [`SourceMetrics`], the passes, steps and
//! the status writer through the board; the cluster metrics are read from the published
//! status at each scrape.
//!
//! # Guarantees
//! - The exposition is written by prometheus-client's Prometheus text encoder (format 0.0.4),
//!   which escapes every label value (`\`, `"` and newlines): a cluster name from a Proxmox
//!   tag or a revision cannot add a line.
//! - Names and label sets are those the book lists (docs/src/reference/metrics.md is generated from this registry); counters get their `_total` from the
//!   library.

use std::sync::{Arc, Mutex, RwLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

use crate::plan::ActionKind;
use crate::status::FleetStatus;

/// The `Content-Type` of the exposition.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Steps by action and result.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    action: &'static str,
    result: &'static str,
}

/// Status branch attempts by outcome.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// Notifications by provider and outcome.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NotificationLabels {
    provider: String,
    outcome: &'static str,
}

/// Webhook requests by provider and result.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    provider: String,
    result: String,
}

/// The revision acted on.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RevisionLabels {
    revision: String,
}

/// The source's counters: Git polls, fetches, parses, webhooks and the revision acted on.
/// One made with `default()` counts into no registry (commands that serve no `/metrics`).
#[derive(Debug, Default)]
pub struct SourceMetrics {
    ls_remote: Counter,
    fetch: Counter,
    parses: Counter,
    webhooks: Family<WebhookLabels, Counter>,
    revision: Family<RevisionLabels, Gauge>,
    /// The revision `revision` holds a sample for, to remove it when another is acted on.
    current: Mutex<Option<String>>,
}

impl SourceMetrics {
    /// Counts one parse and validation of the repository's files (once per new revision).
    pub fn count_parse(&self) {
        self.parses.inc();
    }

    /// Parses and validations so far.
    pub fn parse_total(&self) -> u64 {
        self.parses.get()
    }

    /// Counts one ref advertisement.
    pub fn count_ls_remote(&self) {
        self.ls_remote.inc();
    }

    /// Counts one fetch.
    pub fn count_fetch(&self) {
        self.fetch.inc();
    }

    /// Counts one webhook request.
    pub fn count_webhook(&self, provider: &str, result: &str) {
        self.webhooks
            .get_or_create(&WebhookLabels {
                provider: provider.to_owned(),
                result: result.to_owned(),
            })
            .inc();
    }

    /// Records the revision acted on.
    pub fn set_revision(&self, revision: &str) {
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.as_deref() == Some(revision) {
            return;
        }
        self.revision
            .get_or_create(&RevisionLabels {
                revision: revision.to_owned(),
            })
            .set(1);
        if let Some(old) = current.replace(revision.to_owned()) {
            self.revision.remove(&RevisionLabels { revision: old });
        }
    }

    /// Ref advertisements so far.
    pub fn ls_remote_total(&self) -> u64 {
        self.ls_remote.get()
    }

    /// Fetches so far.
    pub fn fetch_total(&self) -> u64 {
        self.fetch.get()
    }

    /// Webhook requests so far, for one provider and result.
    pub fn webhook_total(&self, provider: &str, result: &str) -> u64 {
        self.webhooks
            .get(&WebhookLabels {
                provider: provider.to_owned(),
                result: result.to_owned(),
            })
            .map_or(0, |counter| counter.get())
    }

    fn register(&self, registry: &mut Registry) {
        registry.register(
            "capstan_git_ls_remote",
            "Ref advertisements asked of the Git remote",
            self.ls_remote.clone(),
        );
        registry.register(
            "capstan_git_fetch",
            "Fetches from the Git remote (only when its tip moved)",
            self.fetch.clone(),
        );
        registry.register(
            "capstan_repository_parses",
            "Parses and validations of the repository (once per new revision)",
            self.parses.clone(),
        );
        registry.register(
            "capstan_webhook_requests",
            "Webhook requests, by provider and result",
            self.webhooks.clone(),
        );
        registry.register(
            "capstan_source_info",
            "The revision of the repository acted on",
            self.revision.clone(),
        );
    }
}

/// The daemon's metrics, in one registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    passes: Counter,
    guest_agent_calls: Counter,
    pass_guest_agent_calls: Gauge,
    steps: Family<StepLabels, Counter>,
    status_pushes: Family<OutcomeLabels, Counter>,
    notifications: Family<NotificationLabels, Counter>,
    source: Arc<SourceMetrics>,
}

impl Metrics {
    /// The registry of a daemon whose source counts into `source` and whose status is
    /// published in `published`.
    pub fn new(source: Arc<SourceMetrics>, published: Arc<RwLock<FleetStatus>>) -> Self {
        let mut registry = Registry::default();
        let passes = Counter::default();
        registry.register(
            "capstan_reconcile_passes",
            "Reconcile passes run",
            passes.clone(),
        );
        let guest_agent_calls = Counter::default();
        registry.register(
            "capstan_guest_agent_calls",
            "Guest-agent requests made through Proxmox (observation and steps)",
            guest_agent_calls.clone(),
        );
        let pass_guest_agent_calls = Gauge::default();
        registry.register(
            "capstan_pass_guest_agent_calls",
            "Guest-agent requests made while the last pass observed (0 when converged and idle)",
            pass_guest_agent_calls.clone(),
        );
        let steps = Family::default();
        registry.register(
            "capstan_steps",
            "Steps run, by action and result",
            steps.clone(),
        );
        let status_pushes = Family::default();
        registry.register(
            "capstan_status_pushes",
            "Attempts to write the status branch, by outcome (pushed, unchanged, or why not)",
            status_pushes.clone(),
        );
        let notifications = Family::default();
        registry.register(
            "capstan_notifications",
            "Notifications by provider and outcome (sent, folded, rate_limited, retried, failed, rejected, dropped, not_leading, unconfigured)",
            notifications.clone(),
        );
        source.register(&mut registry);
        registry.register_collector(Box::new(ClusterMetrics(published)));
        Metrics {
            registry,
            passes,
            guest_agent_calls,
            pass_guest_agent_calls,
            steps,
            status_pushes,
            notifications,
            source,
        }
    }

    /// The source's counters.
    pub fn source(&self) -> &Arc<SourceMetrics> {
        &self.source
    }

    /// Counts a pass whose observation made `pass_calls` guest-agent requests, the daemon
    /// having made `total_calls` in all.
    pub fn count_pass(&self, pass_calls: u64, total_calls: u64) {
        self.passes.inc();
        self.pass_guest_agent_calls
            .set(i64::try_from(pass_calls).unwrap_or(i64::MAX));
        let counted = self.guest_agent_calls.get();
        if total_calls > counted {
            self.guest_agent_calls.inc_by(total_calls - counted);
        }
    }

    /// Passes run.
    pub fn passes(&self) -> u64 {
        self.passes.get()
    }

    /// Guest-agent requests so far, and those of the last pass.
    pub fn guest_agent_calls(&self) -> (u64, u64) {
        (
            self.guest_agent_calls.get(),
            u64::try_from(self.pass_guest_agent_calls.get()).unwrap_or(0),
        )
    }

    /// Counts a step of `action` that succeeded (`ok`) or not.
    pub fn count_step(&self, action: ActionKind, ok: bool) {
        self.steps
            .get_or_create(&StepLabels {
                action: action.name(),
                result: if ok { "ok" } else { "error" },
            })
            .inc();
    }

    /// Counts a step of `action` its replica stopped on losing the Lease (`stopped`).
    pub fn count_stopped_step(&self, action: ActionKind) {
        self.steps
            .get_or_create(&StepLabels {
                action: action.name(),
                result: "stopped",
            })
            .inc();
    }

    /// Steps of `action` with `result` (`ok`, `error` or `stopped`) so far.
    pub fn steps(&self, action: ActionKind, result: &'static str) -> u64 {
        self.steps
            .get(&StepLabels {
                action: action.name(),
                result,
            })
            .map_or(0, |counter| counter.get())
    }

    /// Counts a status branch attempt by outcome.
    pub fn count_status_push(&self, outcome: &'static str) {
        self.status_pushes
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Status branch attempts with `outcome` so far.
    pub fn status_pushes(&self, outcome: &'static str) -> u64 {
        self.status_pushes
            .get(&OutcomeLabels { outcome })
            .map_or(0, |counter| counter.get())
    }

    /// Counts a notification to `provider` by outcome.
    pub fn count_notification(&self, provider: &str, outcome: &'static str) {
        self.notifications
            .get_or_create(&NotificationLabels {
                provider: provider.to_owned(),
                outcome,
            })
            .inc();
    }

    /// Notifications to `provider` with `outcome` so far.
    pub fn notifications(&self, provider: &str, outcome: &'static str) -> u64 {
        self.notifications
            .get(&NotificationLabels {
                provider: provider.to_owned(),
                outcome,
            })
            .map_or(0, |counter| counter.get())
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(err) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        {
            // Writing to a String fails only if an encoder reports an error of its own.
            tracing::error!("cannot encode the metrics: {err}");
        }
        out
    }
}

/// The metrics read from the published status at each scrape: phases, Ready nodes,
/// certificate expiry, repository errors.
#[derive(Debug)]
struct ClusterMetrics(Arc<RwLock<FleetStatus>>);

impl Collector for ClusterMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let status = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut family = encoder.encode_descriptor(
            "capstan_cluster_phase",
            "The cluster's phase (1 for the current one).",
            None,
            MetricType::Gauge,
        )?;
        for (name, cluster) in &status.clusters {
            let phase = cluster.phase.to_string();
            let labels = [("cluster", name.as_str()), ("phase", phase.as_str())];
            ConstGauge::new(1_i64).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "capstan_cluster_nodes_ready",
            "Ready nodes per cluster.",
            None,
            MetricType::Gauge,
        )?;
        for (name, cluster) in &status.clusters {
            let ready = cluster
                .nodes
                .iter()
                .filter(|n| n.ready == Some(true))
                .count();
            ConstGauge::new(i64::try_from(ready).unwrap_or(i64::MAX))
                .encode(family.encode_family(&[("cluster", name.as_str())])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "capstan_certificate_expiry_timestamp_seconds",
            "When the cluster's certificates expire.",
            None,
            MetricType::Gauge,
        )?;
        for (name, cluster) in &status.clusters {
            if let Some(expiry) = cluster.certificate_expiry {
                ConstGauge::new(expiry.as_second())
                    .encode(family.encode_family(&[("cluster", name.as_str())])?)?;
            }
        }
        let errors = encoder.encode_descriptor(
            "capstan_repository_errors",
            "Errors in the repository's files.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(i64::try_from(status.repository_errors.len()).unwrap_or(0)).encode(errors)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The metric names the book's `/metrics` paragraph gives (`capstan_…` not followed by
    /// `::`, which is a crate's path).
    fn readme_metrics() -> BTreeSet<String> {
        let readme = include_str!("../docs/src/operating/status.md");
        readme
            .match_indices("capstan_")
            .filter_map(|(at, _)| {
                let name: String = readme[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                (!readme[at + name.len()..].starts_with("::")).then_some(name)
            })
            .collect()
    }

    /// The metric names of samples in `exposition`.
    fn sampled(exposition: &str) -> BTreeSet<String> {
        exposition
            .lines()
            .filter(|line| !line.starts_with('#') && !line.is_empty())
            .filter_map(|line| line.split(['{', ' ']).next())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_metric_the_readme_lists_is_served_and_every_one_served_is_listed() {
        let status: FleetStatus = serde_json::from_value(serde_json::json!({
            "clusters": {"prod": {
                "phase": "Ready", "conditions": [], "waitingOn": [], "nextSteps": [],
                "certificateExpiry": "2027-05-01T00:00:00Z",
                "nodes": [{"name": "capstan-prod-cp-a", "role": "control-plane", "pool": "cp",
                           "vmId": 101, "proxmoxNode": "pve1", "ready": true, "cordoned": false}]
            }}
        }))
        .expect("a status");
        let source = Arc::new(SourceMetrics::default());
        let metrics = Metrics::new(Arc::clone(&source), Arc::new(RwLock::new(status)));
        metrics.count_pass(1, 1);
        metrics.count_step(ActionKind::from_name("join-node").expect("an action"), true);
        metrics.count_status_push("pushed");
        metrics.count_notification("pager", "sent");
        source.count_ls_remote();
        source.count_fetch();
        source.count_parse();
        source.count_webhook("github", "accepted");
        source.set_revision("main@sha1:0123");
        let served = sampled(&metrics.encode());
        let listed = readme_metrics();
        assert!(served.len() >= 15, "{served:?}");
        assert_eq!(
            served, listed,
            "the book's /metrics paragraph and the registry"
        );
    }
}
