//! What a pass publishes: the fleet's status composed from the plan and the observation (with
//! the source's conditions, the clusters whose files have errors, and since when each is
//! converged), handed to the board, the notifier and the status branch writer.

use std::collections::BTreeMap;

use crate::connect::Providers;
use crate::observe::Observation;
use crate::plan::{self, Plan};
use crate::spec::Desired;
use crate::status::{self, FleetStatus, StatusInput};
use crate::status_branch::StatusWriter;

use super::Daemon;

impl<Pr: Providers> Daemon<Pr> {
    /// The fleet's conditions and events as of this pass (the source's, with `previous`'s
    /// transition times), published together with the revision so readers never see one
    /// without the other.
    pub(super) fn source_report(&self, status: &mut FleetStatus) {
        let condition = status::source_condition(
            self.source_unavailable.as_deref(),
            &status.conditions,
            self.clock.now(),
        );
        let verified = self.verification.as_ref().map(|report| {
            let outcome = report.outcome();
            let outcome = match &outcome {
                Ok(message) => Ok(message.as_str()),
                Err((reason, message)) => Err((*reason, message.as_str())),
            };
            status::source_verified_condition(outcome, &status.conditions, self.clock.now())
        });
        status.conditions.retain(|c| {
            c.kind != status::conditions::SOURCE_AVAILABLE
                && c.kind != status::conditions::SOURCE_VERIFIED
        });
        status.conditions.push(condition);
        status.conditions.extend(verified);
        status.events.clone_from(&self.events);
    }

    pub(super) fn repository_error(
        &mut self,
        errors: Vec<String>,
        revision: Option<String>,
    ) -> bool {
        let previous = self.board.status();
        let mut status = previous.clone();
        self.source_report(&mut status);
        status.repository_errors = errors;
        status.revision = revision.or(status.revision);
        status.updated = Some(self.clock.now());
        self.board.set(status);
        self.notify_published(&previous);
        self.report_progress();
        self.feed_status_branch();
        self.in_flight.is_empty()
    }

    pub(super) fn publish(
        &mut self,
        desired: &Desired,
        observation: &Observation,
        plan: &Plan,
        revision: String,
        repository_errors: Vec<String>,
    ) {
        let now = self.clock.now();
        let previous = self.board.status();
        let mut status = FleetStatus {
            revision: Some(revision),
            updated: Some(now),
            repository_errors,
            conditions: previous.conditions.clone(),
            ..FleetStatus::default()
        };
        self.source_report(&mut status);
        for cluster in &plan.clusters {
            let previous = previous.clusters.get(&cluster.name);
            let entry = match observation.failed.get(&cluster.name) {
                Some(reason) => status::unobserved(reason, previous, now),
                None => status::cluster_status(&StatusInput {
                    plan: cluster,
                    observed: observation.observed.clusters.get(&cluster.name),
                    delivers_to_flux: desired
                        .clusters
                        .get(&cluster.name)
                        .is_some_and(|c| c.spec.delivery.flux.is_some()),
                    declared_nodes: desired.clusters.get(&cluster.name).map(|c| {
                        c.spec.control_plane.replicas
                            + c.spec.workers.iter().map(|w| w.replicas).sum::<u32>()
                    }),
                    last_step: self
                        .retries
                        .get(&cluster.name)
                        .and_then(|r| r.last.as_ref()),
                    failures_to_block: self.options.failures_to_block,
                    previous,
                    api_down_because: observation
                        .access
                        .get(&cluster.name)
                        .and_then(|a| a.api_down_because.as_deref()),
                    now,
                }),
            };
            status.clusters.insert(cluster.name.clone(), entry);
        }
        // A cluster whose file has errors is not planned, but it is still declared: it keeps
        // its place in the status, Blocked on its file. A file whose name is no DNS-1123 label
        // declares no cluster: its errors are in `repository_errors`, under its path.
        for (path, declared) in &desired.invalid {
            let Some(name) = declared else {
                continue;
            };
            if status.clusters.contains_key(name) {
                continue;
            }
            let prefix = format!("{path}:");
            let errors: Vec<&str> = status
                .repository_errors
                .iter()
                .filter(|e| e.starts_with(&prefix))
                .map(String::as_str)
                .collect();
            let message = format!(
                "{path} has errors; nothing of this cluster changes until it is fixed: {}",
                errors.join("; ")
            );
            let entry = status::invalid_file(
                &message,
                observation.observed.clusters.get(name),
                previous.clusters.get(name),
                now,
            );
            status.clusters.insert(name.clone(), entry);
        }
        // The fleet's findings (orphans, removed clusters), then each cluster's (drift).
        status.findings = plan
            .findings
            .iter()
            .chain(plan.clusters.iter().flat_map(|cluster| &cluster.findings))
            .map(|f| f.message.clone())
            .collect();
        let revision = status.revision.clone().unwrap_or_default();
        for (name, entry) in &mut status.clusters {
            let before = match previous.clusters.get(name) {
                Some(cluster) => cluster.converged.as_ref(),
                // Not published since this daemon started: as published before it.
                None => self.restored.get(name),
            };
            entry.converged = plan::converged(entry.phase, before, &revision, now);
        }
        self.restored.clear();
        self.board.set(status);
        self.notify_published(&previous);
        self.report_progress();
        self.feed_status_branch();
    }

    /// Hands the news between `previous` and the status just published to the notifier.
    pub(super) fn notify_published(&self, previous: &FleetStatus) {
        if let Some(notifier) = &self.notifier {
            notifier.status_published(previous, &self.board.status());
        }
    }

    /// Hands the status just published to the status branch writer, while this replica leads:
    /// a standby writes nothing (and a change still waiting when leadership is lost is
    /// dropped), so two replicas never race on the branch.
    pub(super) fn feed_status_branch(&self) {
        let Some(out) = &self.status_out else {
            return;
        };
        if self.leadership.is_leading() {
            out.send_replace(Some(self.board.status()));
        } else {
            out.send_if_modified(|fed| fed.take().is_some());
        }
    }
}

/// The convergence records of the status on the status branch (see [`Daemon::restored`]);
/// none when it cannot be read, and then the soaks of the clusters followed start again.
pub(super) async fn restore_converged(
    writer: &mut StatusWriter,
) -> BTreeMap<String, plan::Converged> {
    match writer.published().await {
        Ok(published) => published
            .clusters
            .into_iter()
            .filter_map(|(name, cluster)| Some((name, cluster.converged?)))
            .collect(),
        Err(err) => {
            tracing::warn!(error = %crate::errors::error_chain(&err), "the status branch could not be read: the soaks of staged rollouts start again");
            BTreeMap::new()
        }
    }
}
