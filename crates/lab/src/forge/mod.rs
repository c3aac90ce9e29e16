//! A simulated forge: the part of GitHub's REST API that pull-request previews use (issue
//! comments, commit statuses, pulls, plus `GET /user` and `GET /repos/{owner}/{repo}` that
//! clients authenticate with), served on loopback over HTTP and HTTPS, at `/` (api.github.com's
//! layout), `/api/v3` (GitHub Enterprise Server's) and `/api/v1` (Gitea's); and GitLab's
//! merge requests, notes and commit statuses under `/api/v4`, over the same pulls.
//!
//! Pull requests point at branches of a real bare Git repository: a pull's head is the commit
//! its branch points to when the pull is read, and the forge keeps `refs/pull/<N>/head` (GitHub,
//! Gitea) and `refs/merge-requests/<N>/head` (GitLab) in that repository up to date, so a Git
//! client can fetch it.
//!
//! Payloads follow GitHub's published OpenAPI description (`tests/data/github-api-subset.json`
//! judges them); requests without the forge's token get 401, as GitHub answers.

mod payloads;
mod routes;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, PoisonError};

use crate::serve::{HttpServer, HttpsServer, ServeError};
use crate::tls::{CertificateAuthority, TlsError};

/// Starting the forge or changing its pulls failed.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// A server could not be started.
    #[error("cannot serve the forge")]
    Serve(#[source] ServeError),
    /// The HTTPS certificate could not be made.
    #[error("cannot make the forge's certificate")]
    Certificate(#[source] TlsError),
    /// `git` failed on the forge's repository.
    #[error("git {args} in {git_dir} failed: {message}")]
    Git {
        /// The arguments.
        args: String,
        /// The repository.
        git_dir: PathBuf,
        /// Git's standard error.
        message: String,
    },
    /// No pull request has this number.
    #[error("no pull request #{0}")]
    NoPull(u64),
}

/// What the forge serves.
#[derive(Clone)]
pub struct ForgeOptions {
    /// The repository's owner (`OWNER` of `OWNER/NAME`).
    pub owner: String,
    /// The repository's name.
    pub name: String,
    /// The token clients must send (`Authorization: token X` or `Bearer X`).
    pub token: String,
    /// The login of the user the token belongs to.
    pub login: String,
    /// The bare Git repository pulls point into.
    pub git_dir: PathBuf,
}

impl std::fmt::Debug for ForgeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("ForgeOptions")
            .field("owner", &self.owner)
            .field("name", &self.name)
            .field("login", &self.login)
            .field("git_dir", &self.git_dir)
            .finish_non_exhaustive()
    }
}

/// Something the forge answered, for tests to count calls by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, `PATCH`...
    pub method: String,
    /// The path without the API prefix (`/repos/o/r/issues/1/comments`).
    pub path: String,
    /// The status answered.
    pub status: u16,
}

/// A comment on a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// Its id.
    pub id: u64,
    /// The pull request (issue) it is on.
    pub issue: u64,
    /// Its Markdown.
    pub body: String,
    /// Who wrote it.
    pub author: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// A commit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus {
    /// Its id.
    pub id: u64,
    /// The commit.
    pub sha: String,
    /// `success`, `failure`, `pending` or `error` (GitLab: `success`, `failed`, `pending`,
    /// `running`, `canceled`, `skipped`).
    pub state: String,
    /// Its context (`capstan/preview`; GitLab's `name`).
    pub context: String,
    /// Its description.
    pub description: Option<String>,
    /// Its link.
    pub target_url: Option<String>,
    /// Who set it.
    pub creator: String,
    /// RFC 3339.
    pub created_at: String,
}

/// A pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pull {
    /// Its number (shared with comments' issue numbers).
    pub number: u64,
    /// Its title.
    pub title: String,
    /// The branch holding the change.
    pub head_ref: String,
    /// The commit `head_ref` pointed to when last read.
    pub head_sha: String,
    /// The branch it would merge into.
    pub base_ref: String,
    /// The commit `base_ref` pointed to when last read.
    pub base_sha: String,
    /// `open` or `closed`.
    pub state: String,
    /// RFC 3339.
    pub created_at: String,
}

/// Fault injection: what the next requests are answered instead of being served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 503, as a forge under maintenance answers.
    Outage,
    /// 429 with `Retry-After: <seconds>`.
    TooManyRequests {
        /// The `Retry-After` value.
        retry_after: u64,
    },
    /// 403 with `X-RateLimit-Remaining: 0` and `X-RateLimit-Reset` this many seconds ahead
    /// (GitHub's primary rate limit).
    RateLimited {
        /// Seconds until the reset.
        reset_in: u64,
    },
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    pulls: Vec<Pull>,
    comments: Vec<Comment>,
    statuses: Vec<CommitStatus>,
    requests: Vec<Request>,
    /// The fault, and how many more requests get it (`None`: every one).
    fault: Option<(Fault, Option<u32>)>,
}

impl State {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

struct Shared {
    options: ForgeOptions,
    state: Mutex<State>,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running simulated forge. Dropping it stops both servers.
pub struct SimForge {
    shared: Arc<Shared>,
    http: HttpServer,
    https: HttpsServer,
    ca: CertificateAuthority,
}

impl std::fmt::Debug for SimForge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("SimForge")
            .field("http", &self.http.url())
            .field("https", &self.https.url())
            .finish_non_exhaustive()
    }
}

impl SimForge {
    /// Serves the forge on two loopback ports: plain HTTP and HTTPS (a certificate for
    /// `localhost` and `127.0.0.1` signed by [`SimForge::ca_pem`]).
    ///
    /// # Errors
    /// When a server or the certificate cannot be made.
    pub async fn start(options: ForgeOptions) -> Result<Self, ForgeError> {
        let not_after = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * 365);
        let ca = CertificateAuthority::new("capstan-lab forge CA", not_after)
            .map_err(ForgeError::Certificate)?;
        let identity = ca
            .issue_server(
                "forge.lab",
                &["localhost".to_owned()],
                &[IpAddr::V4(Ipv4Addr::LOCALHOST)],
                not_after,
            )
            .map_err(ForgeError::Certificate)?;
        let shared = Arc::new(Shared {
            options,
            state: Mutex::new(State::default()),
        });
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let http = HttpServer::start(loopback, routes::router(shared.clone(), "http"))
            .await
            .map_err(ForgeError::Serve)?;
        let https = HttpsServer::start(
            loopback,
            &identity,
            None,
            routes::router(shared.clone(), "https"),
        )
        .await
        .map_err(ForgeError::Serve)?;
        Ok(SimForge {
            shared,
            http,
            https,
            ca,
        })
    }

    /// `http://127.0.0.1:PORT`: GitHub's layout at the root, `/api/v3`, Gitea's `/api/v1` and
    /// GitLab's `/api/v4`.
    pub fn http_url(&self) -> String {
        self.http.url()
    }

    /// The HTTPS server's address (`gh` speaks to `https://HOST:PORT/api/v3`).
    pub fn https_addr(&self) -> SocketAddr {
        self.https.local_addr()
    }

    /// The CA that signed the HTTPS certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca.identity().cert_pem
    }

    /// Opens a pull request from `head` into `base` (branches of the repository) and returns
    /// its number; `refs/pull/<N>/head` and `refs/merge-requests/<N>/head` point at `head`'s
    /// tip.
    ///
    /// # Errors
    /// When a branch does not exist.
    pub fn open_pull(&self, title: &str, head: &str, base: &str) -> Result<u64, ForgeError> {
        let git_dir = &self.shared.options.git_dir;
        let head_sha = branch_tip(git_dir, head)?;
        let base_sha = branch_tip(git_dir, base)?;
        let mut state = self.shared.state();
        let number = state.id();
        update_pull_ref(git_dir, number, &head_sha)?;
        state.pulls.push(Pull {
            number,
            title: title.to_owned(),
            head_ref: head.to_owned(),
            head_sha,
            base_ref: base.to_owned(),
            base_sha,
            state: "open".to_owned(),
            created_at: payloads::now(),
        });
        Ok(number)
    }

    /// Closes a pull request.
    ///
    /// # Errors
    /// When there is no such pull request.
    pub fn close_pull(&self, number: u64) -> Result<(), ForgeError> {
        let mut state = self.shared.state();
        let pull = state
            .pulls
            .iter_mut()
            .find(|p| p.number == number)
            .ok_or(ForgeError::NoPull(number))?;
        "closed".clone_into(&mut pull.state);
        Ok(())
    }

    /// The comments on pull request `number`, oldest first.
    pub fn comments(&self, number: u64) -> Vec<Comment> {
        let state = self.shared.state();
        state
            .comments
            .iter()
            .filter(|c| c.issue == number)
            .cloned()
            .collect()
    }

    /// The statuses set on `sha`, oldest first.
    pub fn statuses(&self, sha: &str) -> Vec<CommitStatus> {
        let state = self.shared.state();
        state
            .statuses
            .iter()
            .filter(|s| s.sha == sha)
            .cloned()
            .collect()
    }

    /// Every request answered so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.state().requests.clone()
    }

    /// The next `count` requests (`None`: every request until [`SimForge::heal`]) are answered
    /// with `fault`.
    pub fn inject(&self, fault: Fault, count: Option<u32>) {
        self.shared.state().fault = Some((fault, count));
    }

    /// Ends an injected fault.
    pub fn heal(&self) {
        self.shared.state().fault = None;
    }

    /// The pull request `number` as last read (heads refreshed from the repository).
    ///
    /// # Errors
    /// When there is no such pull, or its branches cannot be read.
    pub fn pull(&self, number: u64) -> Result<Pull, ForgeError> {
        let mut state = self.shared.state();
        refresh_pulls(&self.shared.options.git_dir, &mut state.pulls)?;
        state
            .pulls
            .iter()
            .find(|p| p.number == number)
            .cloned()
            .ok_or(ForgeError::NoPull(number))
    }
}

/// Re-reads open pulls' branch tips, moving `refs/pull/<N>/head` and
/// `refs/merge-requests/<N>/head` with their heads (a push to a
/// pull's branch is seen at the next read, as GitHub's asynchronous ref update is).
fn refresh_pulls(git_dir: &Path, pulls: &mut [Pull]) -> Result<(), ForgeError> {
    for pull in pulls.iter_mut().filter(|p| p.state == "open") {
        let head = branch_tip(git_dir, &pull.head_ref)?;
        if head != pull.head_sha {
            update_pull_ref(git_dir, pull.number, &head)?;
            pull.head_sha = head;
        }
        pull.base_sha = branch_tip(git_dir, &pull.base_ref)?;
    }
    Ok(())
}

fn branch_tip(git_dir: &Path, branch: &str) -> Result<String, ForgeError> {
    git(
        git_dir,
        &[
            "rev-parse",
            "--verify",
            &format!("refs/heads/{branch}^{{commit}}"),
        ],
    )
}

/// Moves the refs GitHub (and Gitea) and GitLab keep at a pull's head.
fn update_pull_ref(git_dir: &Path, number: u64, sha: &str) -> Result<(), ForgeError> {
    for reference in [
        format!("refs/pull/{number}/head"),
        format!("refs/merge-requests/{number}/head"),
    ] {
        git(git_dir, &["update-ref", &reference, sha])?;
    }
    Ok(())
}

/// Commits, files, added and removed lines of `head` over `base` (`git diff --numstat`).
fn diff_stats(
    git_dir: &Path,
    base: &str,
    head: &str,
) -> Result<(usize, usize, usize, usize), ForgeError> {
    let commits = git(
        git_dir,
        &["rev-list", "--count", &format!("{base}..{head}")],
    )?
    .parse()
    .unwrap_or(0);
    let numstat = git(git_dir, &["diff", "--numstat", base, head])?;
    let (mut files, mut added, mut removed) = (0, 0, 0);
    for line in numstat.lines() {
        let mut fields = line.split_whitespace();
        files += 1;
        added += fields
            .next()
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        removed += fields
            .next()
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
    }
    Ok((commits, files, added, removed))
}

/// Whether `sha` names a commit of the repository.
fn has_commit(git_dir: &Path, sha: &str) -> bool {
    sha.len() == 40
        && sha.bytes().all(|b| b.is_ascii_hexdigit())
        && git(git_dir, &["cat-file", "-e", &format!("{sha}^{{commit}}")]).is_ok()
}

fn git(git_dir: &Path, args: &[&str]) -> Result<String, ForgeError> {
    let failed = |message: String| ForgeError::Git {
        args: args.join(" "),
        git_dir: git_dir.to_path_buf(),
        message,
    };
    let output = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .output()
        .map_err(|err| failed(err.to_string()))?;
    if !output.status.success() {
        return Err(failed(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests;
