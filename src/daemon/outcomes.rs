//! How the daemon accounts for a step task that ended: a success resets the cluster's
//! backoff, a failure (or a panic) counts toward Blocked and backs off, and a step its replica
//! stopped on losing the Lease is neither.

use tokio::task::JoinError;
use tokio::time::Instant;

use super::{Daemon, Failure, Finished, StepOutcome};
use crate::backoff::random_unit;
use crate::connect::Providers;
use crate::dashboard::Outcome;
use crate::fence::NotLeading;
use crate::plan::ActionKind;
use crate::status::StepRecord;

impl<Pr: Providers> Daemon<Pr> {
    /// Forgets task `id` of `cluster` as in flight (and the cluster's concurrency slot with
    /// its last step).
    fn done(&mut self, cluster: &str, id: tokio::task::Id) {
        if let Some(work) = self.busy.get_mut(cluster)
            && work.remove(id)
        {
            self.busy.remove(cluster);
        }
    }

    /// Accounts for a step task that ended: its outcome, or, when it panicked, a failure of
    /// its steps carrying the panic message (so the cluster is retried with backoff, and
    /// blocked if it keeps panicking, instead of staying busy forever).
    pub(super) fn settle(&mut self, done: Result<(tokio::task::Id, Finished), JoinError>) {
        let (id, outcome) = match done {
            Ok((id, finished)) => (id, Ok(finished)),
            Err(err) => (err.id(), Err(err)),
        };
        let running = self.running.remove(&id);
        if let Some(running) = &running {
            self.done(&running.cluster, id);
            let ended = history_outcome(&outcome);
            self.board
                .step_ended(&running.cluster, running.history, ended, self.clock.now());
        }
        match outcome {
            Ok(finished) => self.record(finished),
            Err(err) => {
                let Some(running) = running else {
                    tracing::error!(task = %id, "a step task ended unaccounted for: {err}");
                    return;
                };
                if err.is_cancelled() {
                    // Only `run` cancels tasks, on its way out.
                    tracing::debug!(cluster = %running.cluster, "step task cancelled");
                    return;
                }
                let (action, machine) = (running.action, running.machine);
                let message = format!("step panicked: {}", panic_message(err));
                self.board.metrics().count_step(action, false);
                let failure = Failure {
                    action,
                    machine,
                    message,
                    transient: false,
                    revision: running.revision,
                    refusal: None,
                };
                self.fail(&running.cluster, running.spec.as_ref(), failure);
            }
        }
    }

    pub(super) fn record(&mut self, finished: Finished) {
        let now = self.clock.now();
        // Steps that rewrite admin.conf (even when they fail part-way): read it again.
        if finished
            .outcome
            .as_ref()
            .is_some_and(|outcome| outcome.action.changes().admin_credentials)
        {
            self.observer.forget_admin(&finished.cluster);
        }
        if let Some(StepOutcome {
            action,
            machine,
            result,
            took,
        }) = finished.outcome
        {
            if let Err(err) = &result
                && let Some(stopped) = err.not_leading()
            {
                let stopped = stopped.clone();
                self.stopped(
                    &finished.cluster,
                    &finished.revision,
                    action,
                    machine,
                    &stopped,
                    now,
                );
                return;
            }
            let ok = result.is_ok();
            if ok {
                self.timings.record(action, took);
            }
            self.board.metrics().count_step(action, ok);
            match result {
                Ok(report) => {
                    let retry = self.retries.entry(finished.cluster.clone()).or_default();
                    retry.failures = 0;
                    retry.not_before = None;
                    retry.failed_with = None;
                    retry.last = Some(StepRecord {
                        action,
                        machine,
                        message: report.summary,
                        succeeded: true,
                        failures: 0,
                        at: now,
                        revision: Some(finished.revision.clone()),
                        refusal: None,
                    });
                    self.notify_step(&finished.cluster);
                }
                Err(err) => {
                    let failure = Failure {
                        action,
                        machine,
                        message: crate::errors::error_chain(&err),
                        transient: err.is_transient(),
                        revision: finished.revision.clone(),
                        refusal: err
                            .record_refusal()
                            .map(|_| crate::status::reasons::RECORD_REFUSED),
                    };
                    self.fail(&finished.cluster, finished.spec.as_ref(), failure);
                }
            }
        }
    }

    /// Records a step its replica stopped on losing the Lease: not a failure (no backoff, not
    /// counted toward Blocked); the new leader plans it again from what it finds.
    fn stopped(
        &mut self,
        cluster: &str,
        revision: &str,
        action: ActionKind,
        machine: Option<crate::model::NodeName>,
        stopped: &NotLeading,
        now: jiff::Timestamp,
    ) {
        tracing::info!(cluster = %cluster, action = %action, "step {stopped}");
        self.board.metrics().count_stopped_step(action);
        let retry = self.retries.entry(cluster.to_owned()).or_default();
        retry.last = Some(StepRecord {
            action,
            machine,
            message: stopped.to_string(),
            succeeded: false,
            failures: retry.failures,
            at: now,
            revision: Some(revision.to_owned()),
            refusal: None,
        });
    }

    /// Counts a failed step of `cluster` (planned from `spec`) and sets its backoff.
    pub(super) fn fail(
        &mut self,
        cluster: &str,
        spec: Option<&crate::spec::ClusterSpec>,
        failure: Failure,
    ) {
        let retry = self.retries.entry(cluster.to_owned()).or_default();
        retry.failures += 1;
        let delay = self.options.backoff.delay(retry.failures, random_unit());
        retry.not_before = Some(Instant::now() + delay);
        retry.failed_with = spec.cloned();
        let Failure {
            action,
            machine,
            message,
            transient,
            revision,
            refusal,
        } = failure;
        let message = crate::redact::message(&message);
        tracing::warn!(cluster = %cluster, action = %action, failures = retry.failures, retry_in = ?delay, transient, "step failed: {message}");
        retry.last = Some(StepRecord {
            action,
            machine,
            message,
            succeeded: false,
            failures: retry.failures,
            at: self.clock.now(),
            revision: Some(revision),
            refusal: refusal.map(str::to_owned),
        });
        self.notify_step(cluster);
    }

    /// Hands the step `cluster` just finished to the notifier (a failure, a node fenced).
    fn notify_step(&self, cluster: &str) {
        if let (Some(notifier), Some(last)) = (
            &self.notifier,
            self.retries.get(cluster).and_then(|r| r.last.as_ref()),
        ) {
            notifier.step_finished(cluster, last);
        }
    }
}

/// How a step task ended, for the board's step history.
fn history_outcome(outcome: &Result<Finished, JoinError>) -> Outcome {
    match outcome {
        Ok(finished) => match finished.outcome.as_ref().map(|o| &o.result) {
            None => Outcome::Stopped,
            Some(Ok(_)) => Outcome::Succeeded,
            Some(Err(err)) if err.not_leading().is_some() => Outcome::Stopped,
            Some(Err(err)) => Outcome::Failed(crate::errors::error_chain(err)),
        },
        Err(err) if err.is_cancelled() => Outcome::Stopped,
        Err(_) => Outcome::Failed("the step panicked".to_owned()),
    }
}

/// What a panicking task said (the text given to `panic!`, when it was text).
fn panic_message(err: JoinError) -> String {
    match err.try_into_panic() {
        Ok(payload) => match payload.downcast::<String>() {
            Ok(text) => *text,
            Err(payload) => payload
                .downcast_ref::<&'static str>()
                .map_or_else(|| "(no message)".to_owned(), |text| (*text).to_owned()),
        },
        Err(err) => err.to_string(),
    }
}
