//! [`ClientOptions`]: the timeouts, polling and retry settings of a
//! [`ProxmoxClient`](super::ProxmoxClient).

use std::time::Duration;

use super::error::RetryPolicy;

/// Timeouts, polling and retry settings of a [`ProxmoxClient`].
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Retry of transient request failures.
    pub retry: RetryPolicy,
    /// Timeout of one HTTP request.
    pub request_timeout: Duration,
    /// How long a task may run before we give up waiting.
    pub task_timeout: Duration,
    /// Shortest delay between task status polls (the delay is a tenth of the time the task
    /// has run, within these bounds).
    pub task_poll_min: Duration,
    /// Longest delay between task status polls.
    pub task_poll_max: Duration,
    /// VMIDs a clone tries before giving up on races.
    pub clone_attempts: u32,
    /// Delay between guest agent polls (`run_command`, `await_agent`).
    pub agent_poll: Duration,
    /// How long `await_agent` waits for a booting VM's guest agent.
    pub agent_wait: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            retry: RetryPolicy::default(),
            request_timeout: Duration::from_secs(60),
            // A full clone of a 50 GiB disk on spinning storage takes minutes.
            task_timeout: Duration::from_secs(15 * 60),
            task_poll_min: Duration::from_millis(200),
            task_poll_max: Duration::from_secs(2),
            clone_attempts: 5,
            agent_poll: Duration::from_secs(1),
            // Most VMs boot in seconds; a slower one is left to the next passes.
            agent_wait: Duration::from_secs(60),
        }
    }
}

impl ClientOptions {
    /// Short delays for the lab, whose tasks take milliseconds.
    pub fn for_lab() -> Self {
        ClientOptions {
            retry: RetryPolicy {
                attempts: 5,
                base: Duration::from_millis(20),
                cap: Duration::from_millis(200),
            },
            request_timeout: Duration::from_secs(30),
            task_timeout: Duration::from_secs(60),
            task_poll_min: Duration::from_millis(10),
            task_poll_max: Duration::from_millis(100),
            clone_attempts: 5,
            agent_poll: Duration::from_millis(20),
            agent_wait: Duration::from_secs(5),
        }
    }
}
