//! `capstan run --previews`: a task beside the reconcile loop that, on every poll, lists the
//! forge's open pull requests, reads each one's head from the Git remote
//! (`refs/pull/<N>/head`; GitLab: `refs/merge-requests/<N>/head`) and its base branch, previews the change against the state the last
//! pass observed, and posts it (sticky comment and commit status) when it differs from what
//! was posted for that pull request.
//!
//! # Guarantees
//! - The reconcile loop never waits on the forge: this task only reads the board's observed
//!   state. A failing forge or remote is logged (no token: errors carry none) and retried with
//!   its own capped backoff.
//! - Under leader election only the leader posts.
//! - A head is judged as the daemon would judge it (its secret policy and pins) and only
//!   planned: this task holds no connection and no secret reader, so nothing a head names
//!   is read or connected to.
//! - The dashboard shows each open pull request's comment as last rendered
//!   ([`StatusBoard`]'s previews, the latest [`crate::dashboard::preview::MAX_KEPT`]).
//! - A pull request is posted to again only when its preview changed: a new head, a moved
//!   base, or an observed state that changes its plan. The planning time alone is not a change.
//! - A pull request's head is planned off the runtime, on a thread of its own, within
//!   [`Limits`]: a head past them is posted as a refusal naming the limit, and neither the
//!   reconcile loop nor this task waits for it longer than the time limit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::backoff::{Backoff, random_unit};
use crate::clock::Clock;
use crate::dashboard::PreviewComment;
use crate::forge::{ForgeApi, PullHead, sticky};
use crate::observed::Observed;
use crate::preview::{Limits, Preview, RevisionFiles};
use crate::secrets::Admission;
use crate::source::GitOptions;
use crate::source::revisions::{RevisionError, read_remote_ref, verify_remote_head};
use crate::source::verify::Verifier;
use crate::timed_preview::build_limited;

use super::StatusBoard;

/// A round of previews failed.
#[derive(Debug, thiserror::Error)]
pub enum PreviewRoundError {
    /// The forge could not be asked or told.
    #[error("the forge")]
    Forge(#[from] crate::forge::ForgeError),
    /// A revision could not be read from the remote.
    #[error("pull request #{pr}")]
    Revision {
        /// The pull request.
        pr: u64,
        /// Why the revision could not be read.
        #[source]
        source: RevisionError,
    },
    /// Reading revisions or planning them panicked or was cancelled.
    #[error("reading or planning revisions was interrupted")]
    Interrupted(#[source] tokio::task::JoinError),
}

/// Posts previews of every open pull request.
pub struct Previewer<F> {
    forge: F,
    git: GitOptions,
    board: Arc<StatusBoard>,
    clock: Arc<dyn Clock>,
    interval: Duration,
    backoff: Backoff,
    /// What planning one preview may take.
    limits: Limits,
    /// Per pull request, the fingerprint of the preview last posted.
    posted: BTreeMap<u64, String>,
    /// The daemon's limits, which a head is previewed under.
    admission: Admission,
    /// Commit verification, when the daemon applies only verified revisions.
    verifier: Option<Arc<Verifier>>,
}

impl<F: ForgeApi> Previewer<F> {
    /// Previews the pulls of `forge`, reading their revisions from the remote `git` names,
    /// every `interval`, under the daemon's `admission` (its secret policy and pins: a head
    /// the daemon would refuse is previewed as refused).
    pub fn new(
        forge: F,
        git: GitOptions,
        board: Arc<StatusBoard>,
        clock: Arc<dyn Clock>,
        interval: Duration,
        admission: Admission,
    ) -> Self {
        Previewer {
            forge,
            git,
            board,
            clock,
            interval,
            backoff: Backoff::default(),
            limits: Limits::default(),
            posted: BTreeMap::new(),
            admission,
            verifier: None,
        }
    }

    /// Says on a pull request whose head the daemon would not apply (its commits not signed by
    /// an allowed key) that it will not be applied.
    pub fn with_verifier(mut self, verifier: Option<Arc<Verifier>>) -> Self {
        self.verifier = verifier;
        self
    }

    /// Plans previews within `limits` instead of [`Limits::default`].
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Runs rounds until `shutdown` completes.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut failures = 0;
        loop {
            let delay = match self.round().await {
                Ok(()) => {
                    failures = 0;
                    self.interval
                }
                Err(err) => {
                    failures += 1;
                    let delay = self
                        .backoff
                        .delay(failures, random_unit())
                        .max(self.interval);
                    tracing::warn!(
                        error = %crate::errors::error_chain(&err),
                        retry_in_ms = delay.as_millis(),
                        "previews not posted"
                    );
                    delay
                }
            };
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// One round: every open pull request previewed, and posted when its preview changed.
    ///
    /// # Errors
    /// The first failure; pulls before it are posted, pulls after it wait for the next round.
    pub async fn round(&mut self) -> Result<(), PreviewRoundError> {
        if !self.board.is_leading() {
            // One replica posts: a standby's posts would race the leader's.
            return Ok(());
        }
        let Some(observed) = self.board.observed() else {
            tracing::debug!("no pass has observed the fleet yet: no previews");
            return Ok(());
        };
        let pulls = self.forge.open_pulls().await?;
        self.posted
            .retain(|number, _| pulls.iter().any(|p| p.number == *number));
        let open: Vec<u64> = pulls.iter().map(|p| p.number).collect();
        self.board.retain_previews(&open);
        for pull in pulls {
            let (preview, body) = self.preview(&pull, Arc::clone(&observed)).await?;
            let key = sticky::fingerprint(&preview);
            self.board.preview_made(PreviewComment {
                pull: pull.number,
                head: preview.head.clone(),
                markdown: body.clone(),
                at: self.clock.now(),
                fingerprint: key.clone(),
            });
            if self.posted.get(&pull.number) == Some(&key) {
                continue;
            }
            let posted = sticky::post(
                &self.forge,
                pull.number,
                preview.head_commit(),
                &body,
                &sticky::status_for(&preview),
            )
            .await?;
            tracing::info!(
                pr = pull.number,
                head = %preview.head,
                action = ?posted.action,
                "preview posted"
            );
            self.posted.insert(pull.number, key);
        }
        Ok(())
    }

    /// The preview of `pull` and its comment, read, planned and written off the runtime.
    async fn preview(
        &self,
        pull: &PullHead,
        observed: Arc<Observed>,
    ) -> Result<(Preview, String), PreviewRoundError> {
        let git = self.git.clone();
        let number = pull.number;
        let base_ref = pull.base_ref.clone();
        let head_ref = self.forge.kind().head_ref(number);
        let verifier = self.verifier.clone();
        let (now, limits) = (self.clock.now(), self.limits);
        let admission = self.admission.clone();
        let comment_limit = self.forge.kind().comment_limit();
        tokio::task::spawn_blocking(move || {
            let failed = |source| PreviewRoundError::Revision { pr: number, source };
            let read = |reference: &str| read_remote_ref(&git, reference).map_err(failed);
            let (base, head) = (read(&base_ref)?, read(&head_ref)?);
            let refusal = match &verifier {
                Some(verifier) => {
                    verify_remote_head(&git, verifier, &head.revision, &base.revision)
                        .map_err(failed)?
                        .err()
                }
                None => None,
            };
            let (base, head) = (
                RevisionFiles {
                    revision: base.revision,
                    files: base.files,
                },
                RevisionFiles {
                    revision: head.revision,
                    files: head.files,
                },
            );
            let mut preview =
                build_limited(&base, &head, &observed, now, &admission, &limits);
            if preview.is_over_limits() {
                tracing::warn!(pr = number, head = %preview.head, summary = %preview.summary, "preview past its planning limits");
            }
            if let Some(refusal) = refusal {
                preview.refuse_unverified(&crate::errors::error_chain(&refusal));
            }
            let body = sticky::sticky_comment(&preview, comment_limit);
            Ok((preview, body))
        })
        .await
        .map_err(PreviewRoundError::Interrupted)?
    }
}
