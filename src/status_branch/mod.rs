//! Status back to Git: each cluster's live state committed to the fleet's `status.branch`
//! (default `capstan-status`) of the remote the daemon follows, only when it changes.
//!
//! - [`capstan_core::status::branch`] (pure) turns the daemon's [`FleetStatus`] into
//!   `clusters/<name>.yaml` and a `README.md` table, and says what changed in the commit
//!   message; its `guard` refuses any content that looks like a secret, and its `debounce`
//!   decides when: a burst becomes one commit, a floor caps the rate, a cluster turning
//!   Blocked or Ready is written at once;
//! - [`branch`] commits on top of the branch's tip and pushes, never forcing;
//! - [`StatusWriter`] runs beside the daemon, fed every status it publishes, and reports the
//!   outcome as the fleet's `StatusPushed` condition. A failure is reported and reconciling
//!   carries on: the status branch never stops the daemon.
//!
//! Status commits cannot trigger reconciles: the daemon follows only its tracked branch, and
//! the status branch must be another one ([`StatusBranchError::SameBranch`]).

pub mod branch;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::Clock;
use crate::errors::error_chain;
use crate::source::{CredentialError, GitFailure};
use crate::status::branch::debounce::{Debounce, Decision};
use crate::status::branch::{self as render, Files};
use crate::status::{self, Condition, FleetStatus};
pub use branch::{BranchOptions, CommitSettings, Published, StatusRepository};

/// Changes within this window become one commit: a step's burst of status changes (a VM
/// created, started, joined) reads as one change in the history.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
/// At least this long between status commits, except a cluster turning Blocked or Ready:
/// a fleet of busy clusters makes at most one commit a minute.
pub const DEFAULT_FLOOR: Duration = Duration::from_secs(60);
/// Pushes tried when someone else keeps pushing first: a few, since each fetches the new tip.
pub const DEFAULT_ATTEMPTS: u32 = 5;

/// Writing the status branch failed.
#[derive(Debug, thiserror::Error)]
pub enum StatusBranchError {
    /// The status branch is the tracked branch: a status commit would trigger a reconcile.
    #[error("status.branch `{branch}` is the branch capstan follows: pick another one")]
    SameBranch {
        /// The branch.
        branch: String,
    },
    /// capstan's repository for the status branch could not be created or opened.
    #[error("cannot open the status repository {path}")]
    Open {
        /// Its folder.
        path: PathBuf,
        /// What libgit2 said, credentials redacted.
        #[source]
        source: GitFailure,
    },
    /// A credential could not be read.
    #[error("cannot read the Git credentials")]
    Credentials(#[source] CredentialError),
    /// The branch could not be fetched.
    #[error("cannot fetch {branch} from {remote}")]
    Fetch {
        /// The remote (credentials redacted).
        remote: String,
        /// The branch.
        branch: String,
        /// What libgit2 said, credentials redacted.
        #[source]
        source: GitFailure,
    },
    /// An object could not be read.
    #[error("cannot read {what}")]
    Read {
        /// What.
        what: String,
        /// What libgit2 said, credentials redacted.
        #[source]
        source: GitFailure,
    },
    /// An object could not be written.
    #[error("cannot write {what}")]
    Write {
        /// What.
        what: String,
        /// What libgit2 said, credentials redacted.
        #[source]
        source: GitFailure,
    },
    /// The remote refused the push (read-only credentials, a hook, the network).
    #[error("{remote} refused the push to {branch}")]
    Push {
        /// The remote (credentials redacted).
        remote: String,
        /// The branch.
        branch: String,
        /// The remote's words (redacted).
        #[source]
        source: GitFailure,
    },
    /// Every push was rejected because the branch kept moving.
    #[error("{remote} rejected {attempts} pushes to {branch} (someone else keeps pushing)")]
    Rejected {
        /// The remote (credentials redacted).
        remote: String,
        /// The branch.
        branch: String,
        /// Pushes tried.
        attempts: u32,
        /// The last rejection (redacted).
        #[source]
        source: GitFailure,
    },
    /// A file would be written outside `README.md` and `clusters/<DNS-1123 label>.yaml`.
    #[error(
        "refused to commit the status: {path:?} is not README.md or clusters/<DNS-1123 label>.yaml (a bug put it there; nothing was committed)"
    )]
    UnsafePath {
        /// The path (shown escaped).
        path: String,
    },
    /// The content would hold a secret: nothing was committed.
    #[error("refused to commit the status: {leak} (a bug put it there; nothing was committed)")]
    Secret {
        /// Which file holds what kind of secret (never the value).
        leak: String,
    },
    /// The blocking Git work stopped.
    #[error("the status branch work stopped: {message}")]
    Stopped {
        /// How the task ended (a panic's message, or its cancellation).
        message: String,
    },
}

impl StatusBranchError {
    /// The `StatusPushed` reason for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            StatusBranchError::Secret { .. } => status::reasons::SECRET_REFUSED,
            StatusBranchError::Rejected { .. } => status::reasons::PUSH_REJECTED,
            StatusBranchError::Push { .. } | StatusBranchError::Credentials(_) => {
                status::reasons::PUSH_REFUSED
            }
            _ => status::reasons::STATUS_BRANCH_UNAVAILABLE,
        }
    }
}

/// Every outcome of a status branch attempt, as `capstan_status_pushes_total` counts them.
pub const PUSH_OUTCOMES: [&str; 6] = [
    "pushed",
    "unchanged",
    status::reasons::PUSH_REJECTED,
    status::reasons::PUSH_REFUSED,
    status::reasons::SECRET_REFUSED,
    status::reasons::STATUS_BRANCH_UNAVAILABLE,
];

/// Where the writer reports how its attempts end: the daemon's status board (which
/// implements this trait, so that this module does not depend on the daemon).
pub trait Report: Send + Sync {
    /// The fleet's conditions as published now (to keep transition times).
    fn fleet_conditions(&self) -> Vec<Condition>;
    /// Sets a fleet condition (`StatusPushed`).
    fn set_condition(&self, condition: Condition);
    /// Counts one attempt by outcome: `pushed`, `unchanged`, or the `StatusPushed` reason.
    fn count_status_push(&self, outcome: &'static str);
}

/// How the writer paces and signs its commits.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// What a commit says.
    pub commit: CommitSettings,
    /// Changes within this window become one commit.
    pub window: Duration,
    /// The least time between attempts (except a cluster turning Blocked or Ready).
    pub floor: Duration,
}

/// Writes the daemon's statuses to the status branch, debounced.
pub struct StatusWriter {
    repository: Arc<Mutex<StatusRepository>>,
    branch: String,
    options: WriterOptions,
    clock: Arc<dyn Clock>,
    debounce: Debounce,
    /// capstan's files on the branch as last seen (`None`: not read yet).
    branch_files: Option<Files>,
    /// The last status found to hold nothing new (without its `updated` time): a pass that
    /// publishes it again is not rendered again.
    settled: Option<FleetStatus>,
}

impl std::fmt::Debug for StatusWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusWriter")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl StatusWriter {
    /// A writer to `repository`, reading time from `clock` (the lab's in a lab).
    pub fn new(
        repository: StatusRepository,
        options: WriterOptions,
        clock: Arc<dyn Clock>,
    ) -> Self {
        StatusWriter {
            branch: repository.branch().to_owned(),
            repository: Arc::new(Mutex::new(repository)),
            debounce: Debounce::new(options.window, options.floor),
            options,
            clock,
            branch_files: None,
            settled: None,
        }
    }

    /// Writes the statuses `statuses` receives until its sender is dropped, reporting each
    /// outcome on `board` as the fleet's `StatusPushed` condition. A change still waiting out
    /// the debounce when the sender is dropped is written then (a daemon stopping leaves the
    /// branch current).
    pub async fn run(
        mut self,
        mut statuses: watch::Receiver<Option<FleetStatus>>,
        board: Arc<dyn Report>,
    ) {
        let mut due: Option<jiff::Timestamp> = None;
        let mut latest: Option<FleetStatus> = None;
        loop {
            let sleep = async {
                match due {
                    Some(at) => {
                        let wait = at.duration_since(self.clock.now());
                        let wait = Duration::try_from(wait).unwrap_or(Duration::ZERO);
                        tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = statuses.changed() => if changed.is_err() {
                    if let (Some(status), Some(_)) = (&latest, due) {
                        self.consider(status, &*board, true).await;
                    }
                    break;
                },
                () = sleep => {}
            }
            latest.clone_from(&*statuses.borrow_and_update());
            due = match &latest {
                Some(status) => self.consider(status, &*board, false).await,
                // Not to be written (e.g. this replica no longer leads): nothing is due.
                None => None,
            };
        }
    }

    /// The status the branch holds (read back as `capstan status --repo` reads it): what
    /// this daemon, or the one before it, published last. A daemon starting reads it once.
    ///
    /// # Errors
    /// When the branch cannot be fetched or read.
    pub async fn published(&mut self) -> Result<FleetStatus, StatusBranchError> {
        let (files, message) = self
            .blocking(|repository| {
                let tip = repository.known_tip()?;
                let files = repository.files_at(tip)?;
                let message = tip.map(|tip| repository.message_at(tip)).transpose()?;
                Ok((files, message))
            })
            .await?;
        let revision = message.as_deref().and_then(render::revision_of);
        let status = render::fleet_status(&files, revision);
        self.branch_files = Some(files);
        Ok(status)
    }

    /// Decides about `status` and writes it when due (at once with `flush`); returns when to
    /// look again.
    pub async fn consider(
        &mut self,
        status: &FleetStatus,
        board: &dyn Report,
        flush: bool,
    ) -> Option<jiff::Timestamp> {
        let now = self.clock.now();
        let mut seen = status.clone();
        seen.updated = None;
        if self.settled.as_ref() == Some(&seen) {
            return None;
        }
        let branch_files = match &self.branch_files {
            Some(files) => files.clone(),
            // The branch could not be read: not asked again before the floor.
            None if self.debounce.retry_at(now).is_some() => {
                return self.debounce.retry_at(now);
            }
            None => match self
                .blocking(|repository| {
                    let tip = repository.known_tip()?;
                    repository.files_at(tip)
                })
                .await
            {
                Ok(files) => {
                    self.branch_files = Some(files.clone());
                    files
                }
                Err(err) => {
                    self.report(board, Err(&err));
                    self.debounce.attempted(now, false);
                    return now.checked_add(self.options.floor).ok();
                }
            },
        };
        for name in render::unwritable_clusters(status) {
            tracing::warn!(
                cluster = name.escape_debug().to_string(),
                "a cluster name that is not a DNS-1123 label gets no status file"
            );
        }
        let before = render::parse_clusters(&branch_files);
        let after = render::cluster_files(status, &before);
        let rendered = render::render(&after, status);
        let pending = rendered != branch_files;
        let urgent = render::is_urgent(&before, &after);
        let decision = match self.debounce.decide(now, pending, urgent) {
            Decision::WaitUntil(_) if flush => Decision::Write,
            decision => decision,
        };
        match decision {
            Decision::Idle => {
                self.settled = Some(seen);
                None
            }
            Decision::WaitUntil(at) => Some(at),
            Decision::Write => {
                let status = status.clone();
                let settings = self.options.commit.clone();
                let outcome = self
                    .blocking(move |repository| repository.publish(&status, &settings, now))
                    .await;
                match outcome {
                    Ok((published, files)) => {
                        if let Published::Pushed {
                            commit,
                            message,
                            attempts,
                        } = &published
                        {
                            let subject = message.lines().next().unwrap_or_default();
                            tracing::info!(branch = %self.branch, commit = %commit, attempts, subject, "status committed");
                        }
                        self.branch_files = Some(files);
                        self.debounce.attempted(now, true);
                        self.report(board, Ok(&published));
                        None
                    }
                    Err(err) => {
                        self.debounce.attempted(now, false);
                        self.report(board, Err(&err));
                        now.checked_add(self.options.floor).ok()
                    }
                }
            }
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut StatusRepository) -> Result<T, StatusBranchError> + Send + 'static,
    ) -> Result<T, StatusBranchError> {
        let repository = Arc::clone(&self.repository);
        tokio::task::spawn_blocking(move || {
            let mut repository = repository
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            work(&mut repository)
        })
        .await
        .map_err(|join| StatusBranchError::Stopped {
            message: join.to_string(),
        })?
    }

    fn report(&self, board: &dyn Report, outcome: Result<&Published, &StatusBranchError>) {
        let branch = &self.branch;
        let now = self.clock.now();
        let previous = board.fleet_conditions();
        board.count_status_push(match outcome {
            Ok(Published::Pushed { .. }) => "pushed",
            Ok(Published::Unchanged) => "unchanged",
            Err(err) => err.reason(),
        });
        let condition = match outcome {
            Ok(Published::Pushed { commit, .. }) => status::status_pushed_condition(
                Ok(&format!("{branch} holds the status (commit {commit})")),
                &previous,
                now,
            ),
            Ok(Published::Unchanged) => status::status_pushed_condition(
                Ok(&format!("{branch} holds the status")),
                &previous,
                now,
            ),
            Err(err) => {
                let message = error_chain(err);
                // A secret was already logged, as an error, where it was found.
                if !matches!(err, StatusBranchError::Secret { .. }) {
                    tracing::warn!(branch = %branch, retry_in = ?self.options.floor, error = %message, "status not pushed");
                }
                status::status_pushed_condition(Err((err.reason(), &message)), &previous, now)
            }
        };
        board.set_condition(condition);
    }
}
