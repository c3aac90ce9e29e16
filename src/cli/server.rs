//! The arguments of the commands that talk to a running daemon (or its status branch):
//! `capstan status`, and the actions `suspend`, `resume` and `reconcile`.

use super::{GitArgs, ReportFormat};
use crate::env_vars;
use crate::source::SecretFrom;

/// `capstan status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Only this cluster.
    pub cluster: Option<String>,
    /// The daemon's HTTP endpoint.
    #[arg(long, default_value = "http://127.0.0.1:9464", env = env_vars::CAPSTAN_SERVER)]
    pub server: String,
    /// The bearer token the daemon requires (its `--http-token-from`), from `env:VARIABLE`
    /// or `file:PATH`; sent only over `https://`, or plain `http://` to a loopback address.
    #[arg(long, conflicts_with = "repo", env = env_vars::CAPSTAN_SERVER_TOKEN_FROM)]
    pub server_token_from: Option<SecretFrom>,
    /// Read the status branch of this Git remote instead of asking a daemon (no daemon
    /// needed): the status as of capstan's last status commit.
    #[arg(long, conflicts_with = "server", env = env_vars::CAPSTAN_STATUS_REPO)]
    pub repo: Option<String>,
    /// With `--repo`: the status branch (default: `status.branch` of the capstan.yaml on
    /// `--branch`).
    #[arg(long, requires = "repo", env = env_vars::CAPSTAN_STATUS_BRANCH)]
    pub status_branch: Option<String>,
    /// With `--repo`: reaching the remote.
    #[command(flatten)]
    pub git: GitArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text, env = env_vars::CAPSTAN_FORMAT)]
    pub format: ReportFormat,
}

/// A running daemon to act on, and how to authenticate to it.
#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// The daemon's HTTP endpoint (its `--http`).
    #[arg(long, default_value = "http://127.0.0.1:9464", env = env_vars::CAPSTAN_SERVER)]
    pub server: String,
    /// The bearer token the daemon requires (its `--http-token-from`), from `env:VARIABLE`
    /// or `file:PATH`; sent only over `https://`, or plain `http://` to a loopback address.
    #[arg(long, env = env_vars::CAPSTAN_SERVER_TOKEN_FROM)]
    pub server_token_from: Option<SecretFrom>,
}

/// `capstan suspend`.
#[derive(Debug, clap::Args)]
pub struct SuspendArgs {
    /// The cluster (its `metadata.name`).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub cluster: Option<String>,
    /// Every cluster the daemon manages.
    #[arg(long)]
    pub all: bool,
    /// Why, shown in the status to whoever looks next (at most 512 characters).
    #[arg(long, env = env_vars::CAPSTAN_SUSPEND_REASON)]
    pub reason: String,
    /// With a bearer token: who you are, recorded as declared (a token proves no name; a
    /// client certificate's subject is recorded instead when the daemon asks for one).
    #[arg(long, env = env_vars::CAPSTAN_USER)]
    pub user: Option<String>,
    /// The daemon.
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `capstan resume`.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The cluster (its `metadata.name`).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub cluster: Option<String>,
    /// Every cluster suspended at runtime.
    #[arg(long)]
    pub all: bool,
    /// The daemon.
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `capstan reconcile`.
#[derive(Debug, clap::Args)]
pub struct ReconcileArgs {
    /// Report on this cluster after the pass (a pass reconciles every cluster).
    pub cluster: Option<String>,
    /// The daemon.
    #[command(flatten)]
    pub server: ServerArgs,
}
