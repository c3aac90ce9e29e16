//! The daemon's view of its source: the current snapshot, refreshed when due.
//!
//! # Guarantees
//! - A Git remote is asked at most once per poll interval (or at once when a [`PollTrigger`]
//!   fires); a failure is retried with capped exponential backoff.
//! - The last good snapshot is kept while the remote is unreachable: the daemon goes on
//!   reconciling it, and [`Refresh::unavailable`] says why the remote is not followed.
//! - A poll that finds the tip unchanged reads nothing: the snapshot returned is the same
//!   one, so the daemon (which parses by revision) re-validates nothing.
//! - With commit verification ([`Tracker::verifying`]), a tip is read only once it passes; a
//!   refused tip leaves the last verified snapshot in force, and is verified again at each poll
//!   (so a key added to the allowed keys lets it through without a new push).
//! - A tip passes only when it descends from the last verified revision: the management
//!   cluster's record of it once [`Tracker::with_verified_records`] gave one (read before, and
//!   written before the tip is applied), else this mirror's. The revision a daemon started
//!   from, verified against its mirror alone, is checked against the record at the first
//!   poll; refused, it is withdrawn: nothing is planned from it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::git::{GitError, GitSource, PollOutcome};
use super::tree::Revision;
use super::verify::record::VerifiedRecords;
use super::verify::{Refusal, Verifier, VerifyReport};
use super::{Limits, RepoWatcher, Snapshot, SourceError, SourceMetrics};
use crate::backoff::{Backoff, random_unit};
use crate::errors::error_chain;

/// How long a webhook's poll waits for more deliveries: a forge may send several for one push
/// (one per hook, redeliveries), and one poll a moment later covers them all.
const COALESCE: Duration = Duration::from_millis(200);

/// A request to poll now (from a webhook); requests made before the poll coalesce into one.
#[derive(Debug, Default)]
pub struct PollTrigger {
    requested: AtomicBool,
    notify: Notify,
}

impl PollTrigger {
    /// Asks for a poll as soon as possible.
    pub fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }

    /// Completes when a poll is asked for, and takes the request.
    pub async fn pulled(&self) {
        self.requested().await;
        self.take();
    }

    fn take(&self) -> bool {
        self.requested.swap(false, Ordering::SeqCst)
    }

    async fn requested(&self) {
        loop {
            let notified = self.notify.notified();
            if self.requested.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }
}

/// What the repository holds now, as far as the tracker knows.
#[derive(Debug, Clone)]
pub enum Content {
    /// A readable snapshot.
    Read(Arc<Snapshot>),
    /// The revision (if known) could not be read: a repository error.
    Unreadable {
        /// The revision, when known.
        revision: Option<String>,
        /// Why, one line.
        error: String,
    },
}

/// The outcome of [`Tracker::refresh`].
#[derive(Debug, Clone)]
pub struct Refresh {
    /// What to reconcile.
    pub content: Content,
    /// Why the remote is not being followed right now (redacted), if it is not.
    pub unavailable: Option<String>,
    /// A force-push seen by this refresh: (previous, new) revisions, and whether the new one
    /// is applied (under verification it is not, unless the operator allowed the rewrite).
    pub forced: Option<(String, String, bool)>,
    /// Where commit verification stands, when it is asked for.
    pub verification: Option<VerifyReport>,
}

/// Where commit verification stood when the daemon read its first revision.
#[derive(Debug, Clone, Default)]
pub struct VerifyStart {
    /// The revision that passed (the one read), if any.
    pub verified: Option<Revision>,
    /// The tip that was refused, if it was.
    pub refused: Option<Revision>,
    /// What the status says about it.
    pub report: Option<VerifyReport>,
}

/// The revision a daemon starts from under `verifier`: `tip` when it passes, else the last
/// revision an earlier run verified (kept in the mirror), once its own signature passes the
/// current keys again (a key removed since no longer vouches for it).
///
/// # Errors
/// The tip's refusal, when no earlier revision can stand in: there is nothing to reconcile.
pub fn verified_start(
    git: &GitSource,
    verifier: &Verifier,
    tip: Revision,
) -> Result<(Revision, VerifyStart), Refusal> {
    let earlier = git.verified_tip();
    let last = earlier.as_ref().map(|r| r.commit);
    let refusal = match git.verify_after(verifier, tip.commit, last) {
        Ok(verified) => {
            record_verified(git, &tip);
            tracing::info!(revision = %tip, signer = %verified.signer, "revision verified");
            let report = VerifyReport::Verified {
                revision: tip.to_string(),
                signer: verified.signer,
                mode: verifier.policy().mode,
            };
            let start = VerifyStart {
                verified: Some(tip.clone()),
                refused: None,
                report: Some(report),
            };
            return Ok((tip, start));
        }
        Err(refusal) => refusal,
    };
    let stands_in = |earlier: &Revision| {
        earlier.commit != tip.commit
            && git
                .verify(verifier, earlier.commit, &[earlier.commit])
                .is_ok()
    };
    let Some(earlier) = earlier.filter(stands_in) else {
        return Err(refusal);
    };
    tracing::warn!(revision = %tip, kept = %earlier, "revision not applied: {}", error_chain(&refusal));
    let start = VerifyStart {
        report: Some(VerifyReport::refused(&tip, &refusal, Some(&earlier))),
        verified: Some(earlier.clone()),
        refused: Some(tip),
    };
    Ok((earlier, start))
}

/// Keeps `revision` in the mirror as the last verified one. Only a restart needs it, so a
/// failure is logged and verification goes on.
fn record_verified(git: &GitSource, revision: &Revision) {
    if let Err(err) = git.mark_verified(revision) {
        tracing::warn!(revision = %revision, "cannot record the verified revision: {}", error_chain(&err));
    }
}

/// Commit verification of a followed remote.
struct Verification {
    verifier: Arc<Verifier>,
    /// The last revision that passed (reconciled until another passes).
    verified: Option<Revision>,
    /// The tip refused last, verified again at each poll while it stays the tip.
    refused: Option<Revision>,
    report: Option<VerifyReport>,
    /// Where every replica reads the last verified revision, and the runtime its calls run
    /// on (verification runs on a blocking thread).
    records: Option<(Arc<dyn VerifiedRecords>, tokio::runtime::Handle)>,
    /// Whether `verified` still has to be checked against `records` (it was verified against
    /// the mirror alone, before the records could be reached).
    unconfirmed: bool,
}

/// The outcome of verifying a tip.
enum Verdict {
    Passed,
    /// Refused: `withdrawn` when the revision reconciled until now was the one refused (an
    /// unconfirmed start), with why.
    Refused {
        withdrawn: Option<String>,
    },
}

enum Kind {
    Folder {
        path: PathBuf,
        limits: Limits,
    },
    Git {
        source: Arc<Mutex<GitSource>>,
        verification: Option<Arc<Mutex<Verification>>>,
        /// The override of the fleet's `pollInterval` (`run`'s options), if any.
        poll_interval: Option<Duration>,
        /// The fleet's `pollInterval` as last read ([`Tracker::follow_poll_interval`]).
        fleet_interval: Option<Duration>,
        next_poll: Option<Instant>,
        /// When the last poll that reached the remote ended: the next is due one interval
        /// after it, whatever interval is in force now.
        polled_at: Option<Instant>,
        failures: u32,
        backoff: Backoff,
    },
}

/// The interval between polls before a fleet file was read (the default `pollInterval`).
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(60);

/// Follows a source for the daemon.
pub struct Tracker {
    kind: Kind,
    watcher: Option<RepoWatcher>,
    current: Option<Content>,
    unavailable: Option<String>,
    trigger: Arc<PollTrigger>,
    metrics: Arc<SourceMetrics>,
}

impl Tracker {
    /// Follows a folder (re-read every pass; see [`Tracker::start_watching`]).
    pub fn folder(path: PathBuf, metrics: Arc<SourceMetrics>) -> Self {
        Tracker {
            kind: Kind::Folder {
                path,
                limits: Limits::default(),
            },
            watcher: None,
            current: None,
            unavailable: None,
            trigger: Arc::default(),
            metrics,
        }
    }

    /// For a folder, starts the file-system watch that makes [`Tracker::changed`] complete at
    /// once on a change (a Git remote needs none).
    ///
    /// # Errors
    /// When the folder cannot be watched.
    pub fn start_watching(&mut self) -> Result<(), SourceError> {
        if let Kind::Folder { path, .. } = &self.kind
            && self.watcher.is_none()
        {
            self.watcher = Some(super::watch(path)?);
        }
        Ok(())
    }

    /// Follows a Git remote. `poll_interval` overrides the fleet's `pollInterval`.
    pub fn git(source: GitSource, poll_interval: Option<Duration>, backoff: Backoff) -> Self {
        Tracker {
            metrics: Arc::clone(&source.metrics()),
            kind: Kind::Git {
                source: Arc::new(Mutex::new(source)),
                verification: None,
                poll_interval,
                fleet_interval: None,
                next_poll: None,
                polled_at: None,
                failures: 0,
                backoff,
            },
            watcher: None,
            current: None,
            unavailable: None,
            trigger: Arc::default(),
        }
    }

    /// Starts from `snapshot` (already read): the first refresh returns it unless the remote
    /// moved, and keeps it if the remote cannot be reached.
    pub fn starting_from(mut self, snapshot: Snapshot) -> Self {
        self.current = Some(Content::Read(Arc::new(snapshot)));
        self
    }

    /// Applies only revisions `verifier` passes, starting from where verification stood when
    /// the first revision was read.
    pub fn verifying(mut self, verifier: Arc<Verifier>, start: VerifyStart) -> Self {
        if let Kind::Git { verification, .. } = &mut self.kind {
            *verification = Some(Arc::new(Mutex::new(Verification {
                verifier,
                verified: start.verified,
                refused: start.refused,
                report: start.report,
                records: None,
                unconfirmed: false,
            })));
        }
        self
    }

    /// Under verification, keeps the last verified revision where every replica reads it:
    /// `records` makes the store for the remote's URL and branch. Call it within the runtime
    /// the tracker runs on. The revision started from is checked against the store at the
    /// next poll.
    pub fn with_verified_records(
        self,
        records: impl FnOnce(&str, &str) -> Arc<dyn VerifiedRecords>,
    ) -> Self {
        if let Kind::Git {
            source,
            verification: Some(verification),
            ..
        } = &self.kind
        {
            let store = {
                let source = source
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                records(source.url(), source.branch())
            };
            let mut state = verification
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            state.records = Some((store, tokio::runtime::Handle::current()));
            state.unconfirmed = state.verified.is_some();
        }
        self
    }

    /// Whether revisions are applied only once verified (`source.verify`).
    pub fn is_verifying(&self) -> bool {
        matches!(
            &self.kind,
            Kind::Git {
                verification: Some(_),
                ..
            }
        )
    }

    /// Polls when `trigger` is pulled (instead of a trigger of its own): webhooks served
    /// before the tracker was made.
    pub fn with_trigger(mut self, trigger: Arc<PollTrigger>) -> Self {
        self.trigger = trigger;
        self
    }

    /// The trigger a webhook pulls to make the next poll happen now.
    pub fn trigger(&self) -> Arc<PollTrigger> {
        Arc::clone(&self.trigger)
    }

    /// The source's counters.
    pub fn metrics(&self) -> Arc<SourceMetrics> {
        Arc::clone(&self.metrics)
    }

    /// Completes when the source may have changed: a file-system event, a poll falling due,
    /// or a trigger.
    pub async fn changed(&mut self) {
        match &self.kind {
            Kind::Folder { .. } => match &mut self.watcher {
                Some(watcher) => {
                    if !watcher.changed().await {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            },
            Kind::Git { next_poll, .. } => {
                let due = *next_poll;
                let sleep = async {
                    match due {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = sleep => {}
                    () = self.trigger.requested() => tokio::time::sleep(COALESCE).await,
                }
            }
        }
    }

    /// Follows the fleet's `pollInterval` as the daemon last read it. When that changes the
    /// interval in force, the next poll is re-scheduled at once, one new interval after the
    /// last poll: a revision that shortens it is followed by a poll within the new interval,
    /// not once the old one has run out. (A failing remote keeps its backoff.)
    pub fn follow_poll_interval(&mut self, interval: Duration) {
        let Kind::Git {
            poll_interval,
            fleet_interval,
            next_poll,
            polled_at,
            failures,
            ..
        } = &mut self.kind
        else {
            return;
        };
        let before = poll_interval.or(*fleet_interval);
        *fleet_interval = Some(interval);
        let after = poll_interval.or(*fleet_interval);
        if before != after
            && *failures == 0
            && let (Some(polled_at), Some(after)) = (*polled_at, after)
        {
            tracing::debug!(interval = ?after, "poll interval changed; next poll re-scheduled");
            *next_poll = Some(polled_at + after);
        }
    }

    /// The current content, polling the remote if a poll is due.
    pub async fn refresh(&mut self) -> Refresh {
        let mut forced = None;
        match &mut self.kind {
            Kind::Folder { path, limits } => {
                let path = path.clone();
                let limits = *limits;
                self.current = Some(
                    match tokio::task::spawn_blocking(move || {
                        super::read_repo_within(&path, &limits)
                    })
                    .await
                    {
                        Ok(Ok(files)) => Content::Read(Arc::new(Snapshot {
                            revision: files.content_revision(),
                            files,
                        })),
                        Ok(Err(err)) => Content::Unreadable {
                            revision: None,
                            error: error_chain(&err),
                        },
                        Err(join) => Content::Unreadable {
                            revision: None,
                            error: format!("reading the repository stopped: {join}"),
                        },
                    },
                );
            }
            Kind::Git {
                source,
                verification,
                poll_interval,
                fleet_interval,
                next_poll,
                polled_at,
                failures,
                backoff,
            } => {
                let now = Instant::now();
                let requested = self.trigger.take();
                if requested || next_poll.is_none_or(|at| now >= at) {
                    let interval = poll_interval
                        .or(*fleet_interval)
                        .unwrap_or(DEFAULT_POLL_INTERVAL);
                    let source = Arc::clone(source);
                    let verification = verification.clone();
                    let need_content = self.current.is_none();
                    let outcome = tokio::task::spawn_blocking(move || {
                        poll_and_read(&source, verification.as_deref(), need_content)
                    })
                    .await;
                    match outcome {
                        Ok(Ok(polled)) => {
                            *failures = 0;
                            let at = Instant::now();
                            *polled_at = Some(at);
                            *next_poll = Some(at + interval);
                            self.unavailable = None;
                            if let Some(content) = polled.content {
                                self.current = Some(content);
                            }
                            forced = polled.forced;
                        }
                        Ok(Err(err)) => {
                            *failures += 1;
                            let delay = backoff.delay(*failures, random_unit()).min(interval);
                            *next_poll = Some(Instant::now() + delay);
                            let message = error_chain(&err);
                            tracing::warn!(failures = *failures, retry_in = ?delay, transient = err.is_transient(), "git remote unavailable: {message}");
                            self.unavailable = Some(message);
                        }
                        Err(join) => {
                            *failures += 1;
                            *next_poll =
                                Some(Instant::now() + backoff.delay(*failures, random_unit()));
                            self.unavailable = Some(format!("the poll stopped: {join}"));
                        }
                    }
                }
            }
        }
        let content = self.current.clone().unwrap_or_else(|| Content::Unreadable {
            revision: None,
            error: self
                .unavailable
                .clone()
                .unwrap_or_else(|| "the repository has not been read yet".to_owned()),
        });
        let revision = match &content {
            Content::Read(snapshot) => Some(snapshot.revision.clone()),
            Content::Unreadable { revision, .. } => revision.clone(),
        };
        if let Some(revision) = &revision {
            self.metrics.set_revision(revision);
        }
        let verification = match &self.kind {
            Kind::Git {
                verification: Some(verification),
                ..
            } => verification
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .report
                .clone(),
            _ => None,
        };
        Refresh {
            content,
            unavailable: self.unavailable.clone(),
            forced,
            verification,
        }
    }
}

struct Polled {
    /// New content, when the tip moved.
    content: Option<Content>,
    forced: Option<(String, String, bool)>,
}

/// Polls; reads the files when the tip moved, or when `need_content` (nothing read yet), once
/// `verification` (if asked for) passes it.
fn poll_and_read(
    source: &Mutex<GitSource>,
    verification: Option<&Mutex<Verification>>,
    need_content: bool,
) -> Result<Polled, GitError> {
    let mut source = source
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let outcome = match source.poll()? {
        PollOutcome::Unchanged(revision)
            if need_content || verification.is_some_and(|v| is_to_verify(v, &revision)) =>
        {
            PollOutcome::Moved {
                revision,
                previous: None,
                forced: false,
            }
        }
        outcome => outcome,
    };
    match outcome {
        PollOutcome::Unchanged(_) => Ok(Polled {
            content: None,
            forced: None,
        }),
        PollOutcome::Moved {
            revision,
            previous,
            forced,
        } => {
            tracing::info!(revision = %revision, previous = previous.as_ref().map(ToString::to_string), "new revision");
            let verdict = verification.map(|v| passes(&source, v, &revision));
            let forced = match (&previous, forced) {
                (Some(previous), true) => {
                    let taken = matches!(verdict, None | Some(Verdict::Passed));
                    tracing::warn!(previous = %previous, revision = %revision, taken, "force-push: the branch no longer descends from the revision read before");
                    Some((previous.to_string(), revision.to_string(), taken))
                }
                _ => None,
            };
            if let Some(Verdict::Refused { withdrawn }) = verdict {
                return Ok(Polled {
                    content: withdrawn.map(|error| Content::Unreadable {
                        revision: None,
                        error,
                    }),
                    forced,
                });
            }
            let content = match source.read(&revision) {
                Ok(commit) => {
                    for skipped in &commit.skipped {
                        tracing::warn!(revision = %revision, "not read: {skipped}");
                    }
                    Content::Read(Arc::new(Snapshot {
                        revision: revision.to_string(),
                        files: commit.files,
                    }))
                }
                Err(err) => Content::Unreadable {
                    revision: Some(revision.to_string()),
                    error: error_chain(&err),
                },
            };
            Ok(Polled {
                content: Some(content),
                forced,
            })
        }
    }
}

/// Whether `revision`, the tip still, is verified again: it was refused last, or it is the
/// start not yet checked against the records.
fn is_to_verify(verification: &Mutex<Verification>, revision: &Revision) -> bool {
    let state = verification
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    state.refused.as_ref() == Some(revision) || state.unconfirmed
}

/// Verifies `revision` (it descends from the last verified one, and the commits it brings
/// since pass), recording it before it is applied; records the outcome. A refusal is
/// logged when it differs from the one before.
fn passes(source: &GitSource, verification: &Mutex<Verification>, revision: &Revision) -> Verdict {
    let mut state = verification
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (recorded, verdict) = verify_and_record(source, &state, revision);
    match verdict {
        Ok(verified) => {
            record_verified(source, revision);
            tracing::info!(revision = %revision, signer = %verified.signer, commits = verified.commits, "revision verified");
            state.report = Some(VerifyReport::Verified {
                revision: revision.to_string(),
                signer: verified.signer,
                mode: state.verifier.policy().mode,
            });
            state.verified = Some(revision.clone());
            state.refused = None;
            state.unconfirmed = false;
            Verdict::Passed
        }
        Err(refusal) => {
            // A start not yet confirmed stays when the records name it or hold nothing yet;
            // unreadable records withdraw it (fail closed).
            let started = state.verified.as_ref().map(|r| r.commit);
            let withdrawn = std::mem::take(&mut state.unconfirmed)
                && recorded.is_none_or(|named| named.is_some() && named != started);
            if withdrawn {
                state.verified = None;
            }
            let report = VerifyReport::refused(revision, &refusal, state.verified.as_ref());
            if state.report.as_ref() != Some(&report) {
                tracing::warn!(revision = %revision, kept = state.verified.as_ref().map(ToString::to_string), "revision not applied: {}", error_chain(&refusal));
            }
            let message = report.outcome().err().map(|(_, message)| message);
            state.report = Some(report);
            state.refused = Some(revision.clone());
            Verdict::Refused {
                withdrawn: message.filter(|_| withdrawn),
            }
        }
    }
}

/// What the records named: `None` when they could not be read, `Some(None)` when there are
/// none or they hold nothing yet.
type Named = Option<Option<git2::Oid>>;

/// Verifies `revision` after the last verified revision (the records', else this
/// daemon's), and records it there before it is applied; also what the records named.
fn verify_and_record(
    source: &GitSource,
    state: &Verification,
    revision: &Revision,
) -> (Named, Result<super::verify::Verified, Refusal>) {
    let recorded = match &state.records {
        // Verification runs on a blocking thread: it may wait for the store.
        Some((store, runtime)) => match runtime.block_on(store.read()) {
            Ok(recorded) => recorded,
            Err(err) => return (None, Err(Refusal::Record(err))),
        },
        None => None,
    };
    let named = recorded.as_ref().map(|r| r.commit);
    let last = named.or_else(|| state.verified.as_ref().map(|r| r.commit));
    let verified = match source.verify_after(&state.verifier, revision.commit, last) {
        Ok(verified) => verified,
        Err(refusal) => return (Some(named), Err(refusal)),
    };
    if let Some((store, runtime)) = &state.records
        && named != Some(revision.commit)
        && let Err(err) = runtime.block_on(store.write(revision.commit, recorded.as_ref()))
    {
        return (Some(named), Err(Refusal::Record(err)));
    }
    (Some(named), Ok(verified))
}
