//! Talking to a forge (GitHub, GitHub Enterprise, Gitea, GitLab) about pull requests (GitLab's
//! merge requests): their heads, one sticky preview comment each, and a commit status on the
//! head.
//!
//! [`ForgeApi`] is the provider trait (domain verbs, no HTTP types); [`rest::RestForge`]
//! implements it over GitHub's REST API, which Gitea mirrors under `/api/v1`, and over GitLab's
//! `/api/v4` (merge-request notes and commit statuses, in `rest/gitlab.rs`); [`sticky`] holds the
//! posting logic, tested against an in-memory forge.
//!
//! # Guarantees
//! - The token is sent only in the `Authorization` header (marked sensitive) and never appears
//!   in an error, a log line or `Debug` output.
//! - No redirect is followed (the token would go with it to another host); no answer is read
//!   past [`rest::BODY_LIMIT`], and no listing past [`rest::MAX_PAGES`] pages.
//! - 403 (rate limit) and 429 answers are retried after the wait the forge asks for
//!   (`Retry-After`, else `X-RateLimit-Reset` or GitLab's `RateLimit-Reset`), when that wait
//!   is within the client's cap;
//!   otherwise the call fails with [`ForgeError::RateLimited`], which is transient.

pub mod rest;
pub mod sticky;

use std::future::Future;

/// The flavour of forge API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ForgeKind {
    /// GitHub or GitHub Enterprise Server (`https://HOST/api/v3`).
    Github,
    /// Gitea or Forgejo (`https://HOST/api/v1`).
    Gitea,
    /// GitLab (`https://HOST/api/v4`): merge requests, their notes, commit statuses.
    Gitlab,
}

impl ForgeKind {
    /// The longest comment the forge accepts, in characters (GitHub's 65,536; GitLab's notes
    /// take 1,000,000; Gitea documents none, so GitHub's is kept).
    pub fn comment_limit(self) -> usize {
        match self {
            ForgeKind::Github | ForgeKind::Gitea => crate::preview::comment::GITHUB_COMMENT_LIMIT,
            ForgeKind::Gitlab => 1_000_000,
        }
    }

    /// The ref the forge keeps at pull request `number`'s head, which a Git client can fetch.
    pub fn head_ref(self, number: u64) -> String {
        match self {
            ForgeKind::Github | ForgeKind::Gitea => format!("refs/pull/{number}/head"),
            ForgeKind::Gitlab => format!("refs/merge-requests/{number}/head"),
        }
    }

    /// The API's word for `state` (GitLab says `failed` where GitHub says `failure`).
    pub fn status_word(self, state: StatusState) -> &'static str {
        match (self, state) {
            (ForgeKind::Gitlab, StatusState::Failure) => "failed",
            (_, state) => state.as_str(),
        }
    }
}

/// A call to the forge failed.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// The HTTP client could not be built (TLS setup).
    #[error("cannot set up the forge client: {reason}")]
    Configure {
        /// What is wrong.
        reason: String,
    },
    /// The request did not get an answer.
    #[error("{operation}: the forge did not answer")]
    Request {
        /// What was being done (`list comments on #7`).
        operation: String,
        /// What the HTTP client said (no answer, or one it could not read).
        #[source]
        source: reqwest::Error,
    },
    /// The forge answered with an error status.
    #[error("{operation}: the forge answered {status}: {message}")]
    Status {
        /// What was being done.
        operation: String,
        /// The HTTP status.
        status: u16,
        /// The forge's `message`.
        message: String,
    },
    /// The forge asks to wait longer than the client's cap before retrying.
    #[error("{operation}: rate limited by the forge for {wait_seconds}s")]
    RateLimited {
        /// What was being done.
        operation: String,
        /// How long the forge asks to wait.
        wait_seconds: u64,
    },
    /// The answer was not the JSON expected.
    #[error("{operation}: unexpected answer from the forge")]
    Decode {
        /// What was being done.
        operation: String,
        /// Where the JSON does not match what was expected.
        #[source]
        source: serde_json::Error,
    },
    /// The answer was larger than capstan reads (a broken or hostile forge).
    #[error("{operation}: refused the forge's answer")]
    TooLarge {
        /// What was being done.
        operation: String,
        /// The limit it passed.
        #[source]
        source: crate::http_client::BodyError,
    },
    /// A listing went on for more pages than capstan reads (a forge that pages without end).
    #[error(
        "{operation}: the forge still had more after {pages} pages of {per_page}; refused (a listing that long is a broken or hostile forge)"
    )]
    TooManyPages {
        /// What was being done.
        operation: String,
        /// Pages read.
        pages: usize,
        /// Items asked for per page.
        per_page: usize,
    },
}

impl ForgeError {
    /// Whether retrying later may succeed with nothing changed (an outage, a rate limit).
    pub fn is_transient(&self) -> bool {
        match self {
            ForgeError::Request { .. } | ForgeError::RateLimited { .. } => true,
            ForgeError::Status { status, .. } => *status >= 500 || *status == 429 || *status == 403,
            ForgeError::Configure { .. }
            | ForgeError::Decode { .. }
            | ForgeError::TooLarge { .. }
            | ForgeError::TooManyPages { .. } => false,
        }
    }
}

/// A comment on a pull request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct IssueComment {
    /// Its id.
    pub id: u64,
    /// Its Markdown (`null` on some forges for an emptied comment).
    #[serde(default)]
    pub body: Option<String>,
}

/// An open pull request's head and base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullHead {
    /// Its number.
    pub number: u64,
    /// The commit at its head.
    pub head_sha: String,
    /// The branch holding the change.
    pub head_ref: String,
    /// The branch it would be merged into.
    pub base_ref: String,
}

/// The state of a commit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusState {
    /// The change may merge.
    Success,
    /// The change is refused.
    Failure,
}

impl StatusState {
    /// The API's word.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusState::Success => "success",
            StatusState::Failure => "failure",
        }
    }
}

/// A commit status to set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus {
    /// Success or failure.
    pub state: StatusState,
    /// One line (GitHub keeps 140 characters).
    pub description: String,
    /// `capstan/preview`.
    pub context: String,
}

/// What capstan asks of a forge, for one repository.
pub trait ForgeApi: Send + Sync {
    /// Which forge this is (its comment limit, the ref of a pull request's head).
    fn kind(&self) -> ForgeKind;
    /// The comments on pull request `pr`, oldest first (every page).
    fn comments(
        &self,
        pr: u64,
    ) -> impl Future<Output = Result<Vec<IssueComment>, ForgeError>> + Send;
    /// Adds a comment to pull request `pr`.
    fn create_comment(
        &self,
        pr: u64,
        body: &str,
    ) -> impl Future<Output = Result<IssueComment, ForgeError>> + Send;
    /// Replaces the body of comment `id` on pull request `pr`.
    fn edit_comment(
        &self,
        pr: u64,
        id: u64,
        body: &str,
    ) -> impl Future<Output = Result<(), ForgeError>> + Send;
    /// Sets a status on commit `sha`.
    fn set_status(
        &self,
        sha: &str,
        status: &CommitStatus,
    ) -> impl Future<Output = Result<(), ForgeError>> + Send;
    /// The open pull requests.
    fn open_pulls(&self) -> impl Future<Output = Result<Vec<PullHead>, ForgeError>> + Send;
    /// Pull request `pr`.
    fn pull(&self, pr: u64) -> impl Future<Output = Result<PullHead, ForgeError>> + Send;
}
