//! `capstan status`: a running daemon's `/status`, or the status branch of a remote
//! (`--repo`), as a tree like `clusterctl describe`.

use std::fmt::Write as _;
use std::io::Write;

use jiff::Timestamp;

use crate::cli::{ReportFormat, StatusArgs};
use crate::commands::Outcome;
use crate::status::{ClusterStatus, FleetStatus};

/// Reading the status failed.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The daemon did not answer.
    #[error(
        "cannot reach the daemon at {server} (is `capstan run --http` or `capstan demo` running?)"
    )]
    Fetch {
        /// Its endpoint.
        server: String,
        /// Why no answer could be read.
        #[source]
        source: crate::http_client::FetchError,
    },
    /// The daemon requires a token (`--http-token-from`) and was given none, or another.
    #[error(
        "the daemon at {server} refused {}: pass its token with --server-token-from env:VAR|file:PATH",
        if *sent { "the token given" } else { "a request without a token" }
    )]
    Unauthorized {
        /// Its endpoint.
        server: String,
        /// Whether a token was sent.
        sent: bool,
    },
    /// `--server-token-from` could not be read.
    #[error("cannot read the daemon's token")]
    Token(#[source] crate::source::CredentialError),
    /// The cluster is not in the status.
    #[error("no cluster `{cluster}` in the daemon's status (known: {known})")]
    UnknownCluster {
        /// The cluster asked for.
        cluster: String,
        /// The clusters there are.
        known: String,
    },
    /// capstan.yaml could not be read to find the status branch.
    #[error("cannot read capstan.yaml to find the status branch (or give --status-branch)")]
    Fleet(#[source] crate::source::SettingsError),
    /// A credential could not be resolved.
    #[error("cannot resolve the Git credentials")]
    Credentials(#[source] crate::source::CredentialError),
    /// The status branch could not be read.
    #[error("cannot read the status branch")]
    StatusBranch(#[source] crate::status_branch::StatusBranchError),
    /// The remote has no status branch yet.
    #[error(
        "{remote} has no branch {branch} yet: capstan writes it once a daemon following the remote has a status"
    )]
    NoStatusBranch {
        /// The remote (credentials redacted).
        remote: String,
        /// The branch.
        branch: String,
    },
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// Writing to standard output failed.
    #[error("cannot write to standard output")]
    Print(#[source] std::io::Error),
}

/// Prints the status; exits 1 (`Failure`) when a cluster shown is Blocked. `env` reads the
/// process environment (for `--git-token-from env:...`).
///
/// # Errors
/// When the daemon (or the remote) does not answer or the cluster is unknown.
pub fn run(
    args: &StatusArgs,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut impl Write,
) -> Result<Outcome, StatusError> {
    let mut status = match &args.repo {
        Some(url) => from_repo(url, args, env)?,
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(StatusError::Runtime)?
            .block_on(fetch(&args.server, server_token(args, env)?.as_deref()))?,
    };
    if let Some(cluster) = &args.cluster {
        if !status.clusters.contains_key(cluster) {
            let known = status
                .clusters
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            return Err(StatusError::UnknownCluster {
                cluster: cluster.clone(),
                known,
            });
        }
        status.clusters.retain(|name, _| name == cluster);
    }
    let text = match args.format {
        ReportFormat::Json => format!("{:#}\n", serde_json::to_value(&status).unwrap_or_default()),
        ReportFormat::Text => render(&status, Timestamp::now()),
    };
    out.write_all(text.as_bytes()).map_err(StatusError::Print)?;
    let blocked = status
        .clusters
        .values()
        .any(|c| c.phase == crate::status::Phase::Blocked);
    Ok(if blocked || !status.repository_errors.is_empty() {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}

/// The status as the status branch of `url` holds it.
fn from_repo(
    url: &str,
    args: &StatusArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<FleetStatus, StatusError> {
    use crate::source::{self, RepoLocation};
    use crate::status::branch as render;
    use crate::status_branch::{BranchOptions, StatusRepository};
    let redactor = source::Redactor::default();
    let settings = args.git.settings();
    let options =
        source::git_options(url, &settings, env, &redactor).map_err(StatusError::Credentials)?;
    let branch = match &args.status_branch {
        Some(branch) => branch.clone(),
        None => {
            let snapshot = source::read_once(&RepoLocation::Remote(url.to_owned()), &settings, env)
                .map_err(StatusError::Fleet)?;
            crate::spec::load(&snapshot.files).desired.map_or_else(
                || crate::spec::StatusSettings::default().branch,
                |desired| desired.fleet.status.branch,
            )
        }
    };
    let mut repository = StatusRepository::open(
        BranchOptions {
            url: options.url.clone(),
            branch: branch.clone(),
            credentials: options.credentials.clone(),
            mirror_root: options.mirror_root.clone(),
        },
        redactor,
    )
    .map_err(StatusError::StatusBranch)?;
    let Some(tip) = repository.fetch().map_err(StatusError::StatusBranch)? else {
        return Err(StatusError::NoStatusBranch {
            remote: repository.remote_name(),
            branch,
        });
    };
    let files = repository
        .files_at(Some(tip))
        .map_err(StatusError::StatusBranch)?;
    let message = repository
        .message_at(tip)
        .map_err(StatusError::StatusBranch)?;
    Ok(render::fleet_status(&files, render::revision_of(&message)))
}

/// The token of `--server-token-from`, when given.
fn server_token(
    args: &StatusArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, StatusError> {
    let Some(origin) = &args.server_token_from else {
        return Ok(None);
    };
    crate::source::Secret::resolve(origin.clone(), env, &crate::source::Redactor::default())
        .and_then(|secret| secret.read())
        .map(Some)
        .map_err(StatusError::Token)
}

async fn fetch(server: &str, token: Option<&str>) -> Result<FleetStatus, StatusError> {
    let url = format!("{}/status", server.trim_end_matches('/'));
    let wrap = |source| StatusError::Fetch {
        server: server.to_owned(),
        source,
    };
    let client = crate::http_client::builder()
        .build()
        .map_err(|err| wrap(crate::http_client::FetchError::Request(err)))?;
    let mut request = client.get(&url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    match crate::http_client::get_json(request, STATUS_LIMIT).await {
        Err(crate::http_client::FetchError::Request(err))
            if err.status() == Some(reqwest::StatusCode::UNAUTHORIZED) =>
        {
            Err(StatusError::Unauthorized {
                server: server.to_owned(),
                sent: token.is_some(),
            })
        }
        fetched => fetched.map_err(wrap),
    }
}

/// The largest status read from a daemon (a few KiB per cluster).
const STATUS_LIMIT: usize = 64 << 20;

/// The node name column's width when every name is shorter: a generated name
/// (`capstan-<cluster>-<pool>-<suffix>`) of a cluster and pool with short names fits.
const MIN_NAME_WIDTH: usize = 34;

/// The status as a tree.
pub fn render(status: &FleetStatus, now: Timestamp) -> String {
    let mut out = String::new();
    if let Some(leadership) = &status.leadership {
        let leader = leadership.leader.as_deref().unwrap_or("nobody yet");
        let _ = match leadership.role.as_str() {
            "leader" => writeln!(
                out,
                "leader {} (lease {})",
                leadership.identity, leadership.lease
            ),
            _ => writeln!(
                out,
                "standby {}: {leader} leads (lease {}); this replica starts no step",
                leadership.identity, leadership.lease
            ),
        };
    }
    if let Some(revision) = &status.revision {
        let _ = writeln!(out, "revision {revision}");
    }
    for error in &status.repository_errors {
        let _ = writeln!(out, "repository error: {error}");
    }
    for condition in status.conditions.iter().filter(|c| !c.is_true()) {
        let _ = writeln!(
            out,
            "{}={} ({}): {}",
            condition.kind, condition.status, condition.reason, condition.message
        );
    }
    for event in &status.events {
        let _ = writeln!(out, "event: {event}");
    }
    for (name, cluster) in &status.clusters {
        render_cluster(&mut out, name, cluster, now);
    }
    for finding in &status.findings {
        let _ = writeln!(out, "note: {finding}");
    }
    out
}

fn render_cluster(out: &mut String, name: &str, cluster: &ClusterStatus, now: Timestamp) {
    let version = cluster
        .version
        .map(|v| format!("  v{v}"))
        .unwrap_or_default();
    let expiry = cluster
        .certificate_expiry
        .map(|e| {
            format!(
                "  certificates expire {} ({} days)",
                e.strftime("%Y-%m-%d"),
                e.duration_since(now).as_hours() / 24
            )
        })
        .unwrap_or_default();
    let _ = writeln!(out, "{name}  {}{version}{expiry}", cluster.phase);
    let conditions: Vec<String> = cluster
        .conditions
        .iter()
        .map(|c| format!("{}={} ({})", c.kind, c.status, c.reason))
        .collect();
    let _ = writeln!(out, "├─ conditions: {}", conditions.join(" · "));
    for condition in cluster
        .conditions
        .iter()
        .filter(|c| c.kind == crate::status::conditions::BLOCKED && c.is_true())
    {
        let _ = writeln!(out, "│  blocked: {}", condition.message);
    }
    for condition in cluster
        .conditions
        .iter()
        .filter(|c| c.kind == crate::status::conditions::SUSPENDED && c.is_true())
    {
        let _ = writeln!(out, "│  {}", condition.message);
    }
    let _ = writeln!(out, "├─ nodes");
    let name_width = cluster
        .nodes
        .iter()
        .map(|node| node.name.as_str().chars().count())
        .fold(MIN_NAME_WIDTH, usize::max);
    for (index, node) in cluster.nodes.iter().enumerate() {
        let branch = if index + 1 == cluster.nodes.len() {
            "└─"
        } else {
            "├─"
        };
        let ready = match node.ready {
            Some(true) => "Ready",
            Some(false) => "NotReady",
            None => "not joined",
        };
        let version = node.version.map(|v| format!("v{v}")).unwrap_or_default();
        let cordoned = if node.cordoned { "  cordoned" } else { "" };
        let _ = writeln!(
            out,
            "│  {branch} {:<name_width$} {:<13} {ready:<10} {version:<8} VM {} on {}{cordoned}",
            node.name.as_str(),
            node.role.to_string(),
            node.vm_id,
            node.proxmox_node
        );
    }
    if !cluster.next_steps.is_empty() {
        let _ = writeln!(out, "├─ next: {}", cluster.next_steps.join(", "));
    }
    if let Some(step) = &cluster.last_step {
        let outcome = if step.succeeded {
            "ok".to_owned()
        } else {
            format!("failed {} time(s)", step.failures)
        };
        let at = step
            .revision
            .as_ref()
            .map(|r| format!(" (decided at {r})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "├─ last step: {} {outcome}{at}: {}",
            step.action, step.message
        );
    }
    match cluster.waiting_on.as_slice() {
        [] => {
            let _ = writeln!(out, "└─ waiting on: nothing");
        }
        waits => {
            let _ = writeln!(out, "└─ waiting on");
            for wait in waits {
                let step = wait.step.map(|s| format!("{s}: ")).unwrap_or_default();
                let since = wait
                    .since
                    .map(|s| format!(" (since {s})"))
                    .unwrap_or_default();
                let _ = writeln!(out, "   · {step}{}{since}", wait.resource);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, role: &str, vm_id: u32) -> serde_json::Value {
        serde_json::json!({
            "name": name, "role": role, "pool": "general", "vmId": vm_id,
            "proxmoxNode": "pve1", "ready": true, "version": "1.36.2", "cordoned": false,
        })
    }

    #[test]
    fn node_columns_stay_aligned_when_a_node_name_is_longer_than_the_column() {
        let long = "capstan-a-cluster-with-a-long-name-general-x7k2q";
        assert!(long.len() > MIN_NAME_WIDTH);
        let status: FleetStatus = serde_json::from_value(serde_json::json!({
            "clusters": {"prod": {
                "phase": "Ready", "conditions": [], "waitingOn": [], "nextSteps": [],
                "nodes": [
                    node("capstan-prod-cp-a1b2c", "control-plane", 100),
                    node(long, "worker", 101),
                    node("capstan-prod-general-d3e4f", "worker", 102),
                ],
            }},
        }))
        .expect("status");
        let text = render(&status, Timestamp::UNIX_EPOCH);
        let rows: Vec<&str> = text.lines().filter(|l| l.contains(" VM ")).collect();
        assert_eq!(rows.len(), 3, "{text}");
        let column = |row: &str, word: &str| row.find(word).expect(word);
        let role = column(rows[0], "control-plane");
        let vm = column(rows[0], " VM ");
        for row in &rows[1..] {
            assert_eq!(column(row, "worker"), role, "roles aligned:\n{text}");
            assert_eq!(column(row, " VM "), vm, "VM ids aligned:\n{text}");
        }
    }

    #[test]
    fn a_standby_says_so_and_names_the_leader() {
        let status: FleetStatus = serde_json::from_value(serde_json::json!({
            "leadership": {"role": "standby", "identity": "capstan-b", "leader": "capstan-a",
                "lease": "capstan-system/capstan"},
        }))
        .expect("status");
        let text = render(&status, Timestamp::UNIX_EPOCH);
        assert_eq!(
            text.lines().next(),
            Some(
                "standby capstan-b: capstan-a leads (lease capstan-system/capstan); this replica starts no step"
            )
        );
    }

    #[test]
    fn short_node_names_keep_the_usual_column_width() {
        let status: FleetStatus = serde_json::from_value(serde_json::json!({
            "clusters": {"prod": {
                "phase": "Ready", "conditions": [], "waitingOn": [], "nextSteps": [],
                "nodes": [node("capstan-prod-cp-a1b2c", "control-plane", 100)],
            }},
        }))
        .expect("status");
        let text = render(&status, Timestamp::UNIX_EPOCH);
        assert!(
            text.contains(&format!("└─ {:<34} control-plane", "capstan-prod-cp-a1b2c")),
            "{text}"
        );
    }
}
