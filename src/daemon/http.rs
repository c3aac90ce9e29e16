//! The daemon's HTTP endpoint: `GET /status` (every cluster's status as JSON), `GET /observed`
//! (the last observed state, as the snapshot `capstan plan --observed FILE` reads: no secrets;
//! asking for it makes the passes of the next 15 minutes observe pods and PodDisruptionBudgets,
//! for previews' drain simulation: the first request in a while wakes a pass and waits up to
//! 30 s for it),
//! `GET /healthz` (200 while passes run) and `GET /metrics` (Prometheus text format).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::StatusBoard;
use crate::status::FleetStatus;

/// How long the first `GET /observed` in a while waits for a pass that lists pods and
/// PodDisruptionBudgets before it answers with the last state observed.
const WAIT_FOR_WORKLOADS: std::time::Duration = std::time::Duration::from_secs(30);

/// Serving the endpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Binds `addr` and serves the board until the runtime stops; returns the bound address.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(addr: SocketAddr, board: Arc<StatusBoard>) -> Result<SocketAddr, HttpError> {
    serve_with(addr, board, Router::new()).await
}

/// [`serve`], plus the routes of `extra` (the webhooks).
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve_with(
    addr: SocketAddr,
    board: Arc<StatusBoard>,
    extra: Router,
) -> Result<SocketAddr, HttpError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| HttpError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| HttpError::Bind { addr, source })?;
    let router = Router::new()
        .route("/status", get(status))
        .route("/observed", get(observed))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .with_state(board)
        .merge(extra);
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, router).await {
            tracing::warn!(error = %err, "the HTTP endpoint stopped");
        }
    });
    Ok(bound)
}

async fn status(State(board): State<Arc<StatusBoard>>) -> impl IntoResponse {
    axum::Json(board.status())
}

async fn observed(State(board): State<Arc<StatusBoard>>) -> axum::response::Response {
    if let Some(mut observed) = board.ask_for_observed() {
        // The first request in a while: wait for the pass it woke, which lists pods and
        // budgets (a preview needs them), but not for ever: after that, the last state.
        let _ = tokio::time::timeout(WAIT_FOR_WORKLOADS, observed.changed()).await;
    }
    match board.observed() {
        Some(observed) => axum::Json(observed.as_ref()).into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "nothing observed yet: no reconcile pass has completed\n",
        )
            .into_response(),
    }
}

async fn healthz(State(board): State<Arc<StatusBoard>>) -> impl IntoResponse {
    match board.counters().passes {
        0 => (
            StatusCode::SERVICE_UNAVAILABLE,
            "no reconcile pass has completed yet\n",
        ),
        _ => (StatusCode::OK, "ok\n"),
    }
}

async fn metrics(State(board): State<Arc<StatusBoard>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        render_metrics(&board),
    )
}

/// The Prometheus text exposition of the board.
pub fn render_metrics(board: &StatusBoard) -> String {
    let counters = board.counters();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP capstan_reconcile_passes_total Reconcile passes run.\n# TYPE capstan_reconcile_passes_total counter\ncapstan_reconcile_passes_total {}",
        counters.passes
    );
    let _ = writeln!(
        out,
        "# HELP capstan_guest_agent_calls_total Guest-agent requests made through Proxmox (observation and steps).\n# TYPE capstan_guest_agent_calls_total counter\ncapstan_guest_agent_calls_total {}",
        counters.guest_agent_calls
    );
    let _ = writeln!(
        out,
        "# HELP capstan_pass_guest_agent_calls Guest-agent requests made while the last pass observed (0 when converged and idle).\n# TYPE capstan_pass_guest_agent_calls gauge\ncapstan_pass_guest_agent_calls {}",
        counters.pass_guest_agent_calls
    );
    let _ = writeln!(
        out,
        "# HELP capstan_steps_total Steps run, by action and result.\n# TYPE capstan_steps_total counter"
    );
    for ((action, result), count) in &counters.steps {
        let _ = writeln!(
            out,
            "capstan_steps_total{{action=\"{action}\",result=\"{result}\"}} {count}"
        );
    }
    board.read_published(|status| render_clusters(status, &mut out));
    let _ = writeln!(
        out,
        "# HELP capstan_status_pushes_total Attempts to write the status branch, by outcome (pushed, unchanged, or why not).\n# TYPE capstan_status_pushes_total counter"
    );
    for (outcome, count) in &counters.status_pushes {
        let _ = writeln!(
            out,
            "capstan_status_pushes_total{{outcome=\"{outcome}\"}} {count}"
        );
    }
    board.source_metrics().render(&mut out);
    out
}

/// The metrics read from the published status: phases, Ready nodes, certificate expiry,
/// repository errors.
fn render_clusters(status: &FleetStatus, out: &mut String) {
    let _ = writeln!(
        out,
        "# HELP capstan_cluster_phase The cluster's phase (1 for the current one).\n# TYPE capstan_cluster_phase gauge"
    );
    for (name, cluster) in &status.clusters {
        let _ = writeln!(
            out,
            "capstan_cluster_phase{{cluster=\"{name}\",phase=\"{}\"}} 1",
            cluster.phase
        );
    }
    let _ = writeln!(
        out,
        "# HELP capstan_cluster_nodes_ready Ready nodes per cluster.\n# TYPE capstan_cluster_nodes_ready gauge"
    );
    for (name, cluster) in &status.clusters {
        let ready = cluster
            .nodes
            .iter()
            .filter(|n| n.ready == Some(true))
            .count();
        let _ = writeln!(
            out,
            "capstan_cluster_nodes_ready{{cluster=\"{name}\"}} {ready}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP capstan_certificate_expiry_timestamp_seconds When the cluster's certificates expire.\n# TYPE capstan_certificate_expiry_timestamp_seconds gauge"
    );
    for (name, cluster) in &status.clusters {
        if let Some(expiry) = cluster.certificate_expiry {
            let _ = writeln!(
                out,
                "capstan_certificate_expiry_timestamp_seconds{{cluster=\"{name}\"}} {}",
                expiry.as_second()
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP capstan_repository_errors Errors in the repository's files.\n# TYPE capstan_repository_errors gauge\ncapstan_repository_errors {}",
        status.repository_errors.len()
    );
}
