//! `capstan suspend`, `capstan resume` and `capstan reconcile`: ask a running daemon, through
//! its authenticated `POST /actions/...`, to hold clusters, let them go, or reconcile now.
//! The token comes from a file or a variable (`--server-token-from`), never the command line,
//! and travels only over `https://` or to a loopback address.

use std::io::Write;

use crate::cli::{ReconcileArgs, ResumeArgs, ServerArgs, SuspendArgs};
use crate::commands::Outcome;
use crate::daemon::http::{ActionAnswer, ActionRequest};

/// The largest answer read (a line per cluster).
const ANSWER_LIMIT: usize = 1 << 20;

/// An action was not taken.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// The daemon did not answer.
    #[error(
        "cannot reach the daemon at {server}: is `capstan run --http ADDR` running there? (--server or CAPSTAN_SERVER says where)"
    )]
    Unreachable {
        /// Its endpoint.
        server: String,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// The token would travel unencrypted to another machine: nothing was sent.
    #[error("refusing to send the token to {server}")]
    Insecure {
        /// Its endpoint.
        server: String,
        /// Why.
        #[source]
        source: crate::http_client::InsecureUrl,
    },
    /// The daemon requires authentication the request did not carry.
    #[error(
        "the daemon at {server} refused {}: pass the token of its --http-token-from with --server-token-from env:VAR|file:PATH",
        if *sent { "the token given" } else { "a request without a token" }
    )]
    Unauthorized {
        /// Its endpoint.
        server: String,
        /// Whether a token was sent.
        sent: bool,
    },
    /// The daemon refused the action (not authenticated at all, unknown cluster, bad reason).
    #[error("the daemon at {server} refused ({status}): {message}")]
    Refused {
        /// Its endpoint.
        server: String,
        /// The HTTP status.
        status: u16,
        /// What it said (how to fix it).
        message: String,
    },
    /// `--server-token-from` could not be read.
    #[error("cannot read the daemon's token")]
    Token(#[source] crate::source::CredentialError),
    /// The answer could not be read.
    #[error("the daemon at {server} answered something capstan cannot read")]
    Answer {
        /// Its endpoint.
        server: String,
        /// Why.
        #[source]
        source: crate::http_client::BodyError,
    },
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// Writing to standard output failed.
    #[error("cannot write to standard output")]
    Print(#[source] std::io::Error),
}

/// `capstan suspend`.
///
/// # Errors
/// [`ActionError`]: the daemon unreachable, authentication refused, an unknown cluster.
pub fn suspend(
    args: &SuspendArgs,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut impl Write,
) -> Result<Outcome, ActionError> {
    let request = ActionRequest {
        clusters: args.cluster.iter().cloned().collect(),
        all: args.all,
        reason: Some(args.reason.clone()),
        user: args.user.clone(),
    };
    act(&args.server, "suspend", &request, env, out)
}

/// `capstan resume`.
///
/// # Errors
/// As [`suspend`].
pub fn resume(
    args: &ResumeArgs,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut impl Write,
) -> Result<Outcome, ActionError> {
    let request = ActionRequest {
        clusters: args.cluster.iter().cloned().collect(),
        all: args.all,
        ..ActionRequest::default()
    };
    act(&args.server, "resume", &request, env, out)
}

/// `capstan reconcile`.
///
/// # Errors
/// As [`suspend`].
pub fn reconcile(
    args: &ReconcileArgs,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut impl Write,
) -> Result<Outcome, ActionError> {
    let request = ActionRequest {
        clusters: args.cluster.iter().cloned().collect(),
        ..ActionRequest::default()
    };
    act(&args.server, "reconcile", &request, env, out)
}

fn act(
    server: &ServerArgs,
    action: &str,
    request: &ActionRequest,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut impl Write,
) -> Result<Outcome, ActionError> {
    let token = match &server.server_token_from {
        Some(origin) => Some(
            crate::source::Secret::resolve(
                origin.clone(),
                env,
                &crate::source::Redactor::default(),
            )
            .and_then(|secret| secret.read())
            .map_err(ActionError::Token)?,
        ),
        None => None,
    };
    let answer = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ActionError::Runtime)?
        .block_on(post(&server.server, action, request, token.as_deref()))?;
    let mut text = String::new();
    for message in &answer.messages {
        text.push_str(message);
        text.push('\n');
    }
    out.write_all(text.as_bytes()).map_err(ActionError::Print)?;
    Ok(Outcome::Success)
}

async fn post(
    server: &str,
    action: &str,
    request: &ActionRequest,
    token: Option<&str>,
) -> Result<ActionAnswer, ActionError> {
    let url = format!("{}/actions/{action}", server.trim_end_matches('/'));
    if token.is_some() {
        crate::http_client::may_carry_token(&url).map_err(|source| ActionError::Insecure {
            server: server.to_owned(),
            source,
        })?;
    }
    let unreachable = |source: reqwest::Error| ActionError::Unreachable {
        server: server.to_owned(),
        source: source.without_url(),
    };
    let client = crate::http_client::builder().build().map_err(unreachable)?;
    let mut sending = client.post(&url).json(request);
    if let Some(token) = token {
        sending = sending.bearer_auth(token);
    }
    let response = sending.send().await.map_err(unreachable)?;
    let status = response.status();
    let body = crate::http_client::read_body(response, ANSWER_LIMIT)
        .await
        .map_err(|source| ActionError::Answer {
            server: server.to_owned(),
            source,
        })?;
    if status == reqwest::StatusCode::UNAUTHORIZED {
        return Err(ActionError::Unauthorized {
            server: server.to_owned(),
            sent: token.is_some(),
        });
    }
    if !status.is_success() {
        let message = String::from_utf8_lossy(&body).trim().to_owned();
        return Err(ActionError::Refused {
            server: server.to_owned(),
            status: status.as_u16(),
            message: crate::redact::cap(&message, 2048),
        });
    }
    serde_json::from_slice(&body).map_err(|err| ActionError::Refused {
        server: server.to_owned(),
        status: status.as_u16(),
        message: format!(
            "not the answer expected ({err}): is this a capstan daemon of the same version?"
        ),
    })
}
