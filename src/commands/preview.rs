//! `capstan preview`: what merging one revision into another would make capstan do, read
//! from Git (never a checkout) and planned against an observed state.

use std::io::Write;

use crate::cli::{ForgeArgs, PlanFormat, PreviewArgs};
use crate::clock::Clock;
use crate::env_vars;
use crate::forge::rest::{ForgeTarget, RestForge, RetryPolicy};
use crate::forge::{ForgeError, ForgeKind, sticky};
use crate::observed::Observed;
use crate::preview::{Preview, RevisionFiles, render};
use crate::source::revisions::{self, RevisionError};

use super::Outcome;
use super::plan::{PlanError, read_observed};

/// The preview could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// The base revision could not be read.
    #[error("cannot read the base revision")]
    Base(#[source] RevisionError),
    /// The head revision could not be read.
    #[error("cannot read the head revision")]
    Head(#[source] RevisionError),
    /// The observed state could not be read.
    #[error("cannot read the observed state")]
    Observed(#[source] PlanError),
    /// The preview could not be written to stdout.
    #[error("cannot write the preview")]
    Output(#[source] std::io::Error),
    /// `--server-token-from` could not be read.
    #[error("cannot read the daemon's token (--server-token-from)")]
    ServerToken(#[source] crate::source::CredentialError),
    /// The daemon's observed state could not be read.
    #[error("cannot read the observed state from {url}/observed")]
    Server {
        /// The daemon.
        url: String,
        /// Why no answer could be read.
        #[source]
        source: crate::http_client::FetchError,
    },
    /// No TLS client could be set up to reach the daemon.
    #[error("cannot set up TLS to reach the daemon")]
    ServerTls(#[source] ForgeError),
    /// The forge flags are incomplete.
    #[error("{0}")]
    ForgeFlags(String),
    /// The preview could not be posted.
    #[error("cannot post the preview to pull request #{pr}")]
    Post {
        /// The pull request.
        pr: u64,
        /// The forge call that failed, and its cause.
        #[source]
        source: ForgeError,
    },
    /// No async runtime could be started to talk to the network.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

/// Reads both revisions and the observed state, and prints the preview to `out`.
///
/// # Errors
/// When a revision or the snapshot cannot be read, or the preview cannot be written. A
/// refused change is not an error of this function but [`Outcome::Failure`].
pub fn run(
    args: &PreviewArgs,
    clock: &impl Clock,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut impl Write,
) -> Result<Outcome, PreviewError> {
    let base_ref = args.base.as_deref().unwrap_or(&args.git.branch);
    let base = revisions::read_revision(&args.repo, base_ref, &args.git.settings(), env)
        .map_err(PreviewError::Base)?;
    let head = revisions::read_revision(&args.repo, &args.head, &args.git.settings(), env)
        .map_err(PreviewError::Head)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(PreviewError::Runtime)?;
    let observed = match &args.server {
        Some(url) => {
            let token = match &args.server_token_from {
                Some(origin) => Some(
                    crate::source::Secret::resolve(
                        origin.clone(),
                        env,
                        &crate::source::Redactor::default(),
                    )
                    .and_then(|secret| secret.read())
                    .map_err(PreviewError::ServerToken)?,
                ),
                None => None,
            };
            runtime.block_on(observed_from_server(url, token.as_deref()))?
        }
        None => read_observed(&args.observed).map_err(PreviewError::Observed)?,
    };
    let forge = match args.pr {
        Some(pr) => Some((pr, forge_target(&args.forge, env)?)),
        None => None,
    };
    let now = args.now.unwrap_or_else(|| clock.now());
    let preview = crate::timed_preview::build_limited(
        &RevisionFiles {
            revision: base.revision,
            files: base.files,
        },
        &RevisionFiles {
            revision: head.revision,
            files: head.files,
        },
        &observed,
        now,
        &crate::secrets::Admission::against_base(),
        &args.limits.limits(),
    );
    let text = match args.format {
        PlanFormat::Text => render::text(&preview),
        PlanFormat::Markdown => render::markdown(&preview),
        PlanFormat::Json => render::json(&preview),
    };
    out.write_all(text.as_bytes())
        .map_err(PreviewError::Output)?;
    if let Some((pr, target)) = forge {
        runtime
            .block_on(post(&target, pr, &preview))
            .map_err(|source| PreviewError::Post { pr, source })?;
    }
    Ok(if preview.is_refused() {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}

/// The observed state a running daemon serves at `GET /observed`.
async fn observed_from_server(url: &str, token: Option<&str>) -> Result<Observed, PreviewError> {
    let url = url.trim_end_matches('/');
    let failed = |source: crate::http_client::FetchError| PreviewError::Server {
        url: url.to_owned(),
        source,
    };
    let client = crate::http_client::builder()
        .tls_backend_preconfigured(
            crate::forge::rest::tls_config()
                .map_err(|err| PreviewError::ForgeFlags(err.to_string()))?,
        )
        .build()
        .map_err(|err| failed(crate::http_client::FetchError::Request(err)))?;
    let mut request = client.get(format!("{url}/observed"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    crate::http_client::get_json(request, OBSERVED_LIMIT)
        .await
        .map_err(failed)
}

/// The largest observed state read from a daemon: a fleet's VMs, Nodes, pods and budgets take
/// a few KiB per machine.
const OBSERVED_LIMIT: usize = 256 << 20;

/// The forge the flags and `CAPSTAN_FORGE_TOKEN` name.
///
/// # Errors
/// When `--forge`, `--forge-repo`, `--forge-url` (for Gitea and GitLab) or the token is
/// missing.
pub fn forge_target(
    args: &ForgeArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ForgeTarget, PreviewError> {
    let missing = |what: &str| PreviewError::ForgeFlags(format!("posting a preview needs {what}"));
    let kind = args
        .forge
        .ok_or_else(|| missing("--forge github|gitea|gitlab"))?;
    let api_url = match (&args.forge_url, kind) {
        (Some(url), _) => url.clone(),
        (None, ForgeKind::Github) => "https://api.github.com".to_owned(),
        (None, ForgeKind::Gitea) => {
            return Err(missing("--forge-url https://HOST/api/v1 for Gitea"));
        }
        (None, ForgeKind::Gitlab) => {
            return Err(missing("--forge-url https://HOST/api/v4 for GitLab"));
        }
    };
    crate::http_client::may_carry_token(&api_url)
        .map_err(|err| PreviewError::ForgeFlags(format!("--forge-url: {err}")))?;
    // GitLab's projects may sit in subgroups (`group/sub/name`).
    let parts_allowed = match kind {
        ForgeKind::Github | ForgeKind::Gitea => 2..=2,
        ForgeKind::Gitlab => 2..=usize::MAX,
    };
    let repository = args
        .forge_repo
        .clone()
        .filter(|r| {
            r.split('/').all(|part| !part.is_empty())
                && parts_allowed.contains(&r.split('/').count())
        })
        .ok_or_else(|| missing("--forge-repo OWNER/NAME (GitLab: GROUP/NAME)"))?;
    let token = env(env_vars::CAPSTAN_FORGE_TOKEN)
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| {
            missing(&format!(
                "a token in the environment variable {}",
                env_vars::CAPSTAN_FORGE_TOKEN
            ))
        })?;
    Ok(ForgeTarget {
        kind,
        api_url,
        repository,
        token: token.trim().to_owned(),
    })
}

async fn post(target: &ForgeTarget, pr: u64, preview: &Preview) -> Result<(), ForgeError> {
    let api = RestForge::new(target, RetryPolicy::default())?;
    let posted = sticky::post(
        &api,
        pr,
        preview.head_commit(),
        &sticky::sticky_comment(preview, target.kind.comment_limit()),
        &sticky::status_for(preview),
    )
    .await?;
    tracing::info!(pr, comment = posted.comment_id, action = ?posted.action, "preview posted");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Result<ForgeTarget, PreviewError> {
        let args = ForgeArgs {
            forge: Some(ForgeKind::Gitlab),
            forge_url: Some(url.to_owned()),
            forge_repo: Some("acme/fleet".to_owned()),
        };
        forge_target(&args, &|_| Some("forge-token".to_owned()))
    }

    #[test]
    fn a_forge_token_is_never_sent_over_plain_http_to_another_host() {
        let err = target("http://gitlab.example.com/api/v4").expect_err("refused");
        let message = err.to_string();
        assert!(
            message.contains("--forge-url") && message.contains("use https://"),
            "{message}"
        );
        for allowed in [
            "https://gitlab.example.com/api/v4",
            "http://127.0.0.1:8929/api/v4",
        ] {
            assert!(target(allowed).is_ok(), "{allowed}");
        }
    }
}
