//! What the one redactor costs: with the secrets of a 200-cluster fleet known (a K3s token, a
//! datastore password, an admin kubeconfig's token and client key, a join token each: 1,000
//! values), the time to redact and cap one 2 KiB message (a failed step, a log line), to
//! redact a whole published status (every pass does, in `StatusBoard::set`), and to remember
//! one more secret (the automaton is rebuilt).
//!
//! Run: `cargo bench --bench redact`. Goals (release build): a message in well under 100 µs,
//! a 200-cluster status in under 10 ms (a pass at 200 clusters takes about 100 ms).

use std::hint::black_box;
use std::time::Instant;

use capstan::status::FleetStatus;

const CLUSTERS: usize = 200;
const SECRETS_PER_CLUSTER: usize = 5;

fn secret(n: usize) -> String {
    format!("{n:08x}{}", "5e".repeat(28))
}

/// A status of `CLUSTERS` Blocked clusters, each with a 2 KiB failed step, its Blocked
/// condition quoting it, and a few ordinary messages.
fn status() -> FleetStatus {
    let step = format!(
        "init-control-plane on capstan-c-cp-0: `env …` exited 1: {}",
        "level=fatal msg=\"starting kubernetes\" ".repeat(50)
    );
    let clusters: serde_json::Map<String, serde_json::Value> = (0..CLUSTERS)
        .map(|i| {
            let condition = |kind: &str, message: &str| {
                serde_json::json!({"type": kind, "status": "False", "reason": "R",
                    "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"})
            };
            let cluster = serde_json::json!({
                "phase": "Blocked",
                "conditions": [
                    condition("Ready", "phase Blocked"),
                    condition("APIAvailable", "the API answers"),
                    condition("Blocked", &format!("init-control-plane keeps failing (5 times): {step}")),
                ],
                "nodes": [],
                "waitingOn": [{"resource": "node capstan-c-cp-0 Ready"}],
                "nextSteps": ["init-control-plane capstan-c-cp-0"],
                "lastStep": {"action": "init-control-plane", "message": step, "succeeded": false,
                    "failures": 5, "at": "2026-01-01T00:00:00Z"},
            });
            (format!("c{i}"), cluster)
        })
        .collect();
    serde_json::from_value(serde_json::json!({"clusters": clusters})).expect("a status")
}

fn main() {
    for n in 0..CLUSTERS * SECRETS_PER_CLUSTER {
        capstan::redact::remember(&secret(n));
    }
    let message = format!(
        "{} token {} {}",
        "x".repeat(1000),
        secret(417),
        "y".repeat(1000)
    );
    let rounds = 2_000;
    let started = Instant::now();
    for _ in 0..rounds {
        black_box(capstan::redact::message(black_box(&message)));
    }
    let per_message = started.elapsed() / rounds;
    assert!(capstan::redact::message(&message).contains(" token *** "));

    let status = status();
    let rounds = 20;
    let started = Instant::now();
    for _ in 0..rounds {
        black_box(status.clone().map_messages(capstan::redact::message));
    }
    let per_status = started.elapsed() / rounds;

    let started = Instant::now();
    capstan::redact::remember(&secret(CLUSTERS * SECRETS_PER_CLUSTER + 1));
    let remember = started.elapsed();

    println!(
        "{} secrets known: {per_message:?} per 2 KiB message, {per_status:?} per {CLUSTERS}-cluster status (clone included), {remember:?} to remember one more",
        CLUSTERS * SECRETS_PER_CLUSTER
    );
}
