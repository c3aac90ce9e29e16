//! Waiting for Proxmox tasks: poll `/nodes/{node}/tasks/{upid}/status` with a growing delay
//! until the task stops, and turn a failure into [`ProxmoxError::TaskFailed`] carrying the exit
//! status and the tail of the task log.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::api::{Method, Params, Retry, segment};
use super::client::{ClientOptions, ProxmoxClient};
use super::error::{ProxmoxError, TaskFailure, hint_for};
use super::upid::Upid;
use super::wire::text;

/// Lines of a failed task's log carried in the error.
const LOG_TAIL_LINES: usize = 10;

impl ProxmoxClient {
    /// Waits for a task to finish, up to the configured task timeout.
    ///
    /// # Errors
    /// [`ProxmoxError::TaskFailed`] with exit status and log tail when the task failed;
    /// [`ProxmoxError::TaskTimeout`] when it is still running at the deadline.
    pub async fn wait_task(&self, upid: &str) -> Result<(), ProxmoxError> {
        self.wait_task_for(upid, self.options.task_timeout).await
    }

    pub(super) async fn wait_task_for(
        &self,
        upid: &str,
        timeout: Duration,
    ) -> Result<(), ProxmoxError> {
        let parsed = Upid::parse(upid).ok_or_else(|| ProxmoxError::Decode {
            method: "POST",
            path: "(task)".into(),
            reason: format!("`{upid}` is not a UPID"),
        })?;
        let path = format!(
            "/nodes/{}/tasks/{}/status",
            segment(&parsed.node),
            segment(upid)
        );
        let started = Instant::now();
        loop {
            match self
                .api
                .call_value(Method::Get, &path, &Vec::new(), Retry::Transient)
                .await
            {
                Ok(status) => {
                    if text(&status, "status").as_deref() == Some("stopped") {
                        let exitstatus =
                            text(&status, "exitstatus").unwrap_or_else(|| "unknown".into());
                        if exitstatus == "OK" || exitstatus.starts_with("WARNINGS") {
                            return Ok(());
                        }
                        let log_tail = self.log_tail(&parsed, upid).await;
                        // The log often says more than the exit status (e.g. the kvm line
                        // behind "QEMU exited with code 1").
                        let hint = hint_for(500, &format!("{exitstatus} {}", log_tail.join(" ")));
                        return Err(ProxmoxError::TaskFailed(Box::new(TaskFailure {
                            upid: upid.to_owned(),
                            node: parsed.node.clone(),
                            kind: parsed.kind.clone(),
                            id: parsed.id.clone(),
                            hint,
                            exitstatus,
                            log_tail,
                        })));
                    }
                }
                // A task can be invisible for a moment right after it was forked.
                Err(ProxmoxError::Api { status: 400, .. }) => {}
                Err(err) => return Err(err),
            }
            if started.elapsed() >= timeout {
                return Err(ProxmoxError::TaskTimeout {
                    upid: upid.to_owned(),
                    waited: started.elapsed(),
                });
            }
            tokio::time::sleep(poll_delay(started.elapsed(), &self.options)).await;
        }
    }

    /// The last lines of a task's log (best effort: an unreadable log gives no lines).
    async fn log_tail(&self, upid: &Upid, raw: &str) -> Vec<String> {
        let path = format!("/nodes/{}/tasks/{}/log", segment(&upid.node), segment(raw));
        let read = |start: u64| {
            let path = path.clone();
            async move {
                let params: Params = vec![
                    ("start".into(), start.to_string()),
                    ("limit".into(), "500".into()),
                ];
                self.api
                    .call_value(Method::Get, &path, &params, Retry::Transient)
                    .await
            }
        };
        let Ok(lines) = read(0).await else {
            return Vec::new();
        };
        let lines: Vec<String> = lines
            .as_array()
            .map(|entries| entries.iter().filter_map(|e| text(e, "t")).collect())
            .unwrap_or_default();
        let skip = lines.len().saturating_sub(LOG_TAIL_LINES);
        lines.into_iter().skip(skip).collect()
    }

    /// Waits for the UPID an async call returned; `null` (finished within
    /// `background_delay`) is success.
    pub(super) async fn await_data(&self, data: Value) -> Result<(), ProxmoxError> {
        match data {
            Value::String(upid) => self.wait_task(&upid).await,
            _ => Ok(()),
        }
    }
}

/// The delay before the next poll of a task running for `elapsed`: a tenth of it, within the
/// options' bounds, so the end of a task is seen at most about 10% late (a doubling delay can
/// see a 4 s clone end a whole second late) while a long one is polled rarely.
fn poll_delay(elapsed: Duration, options: &ClientOptions) -> Duration {
    (elapsed / 10).clamp(options.task_poll_min, options.task_poll_max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_polled_at_a_tenth_of_its_age_within_bounds() {
        let options = ClientOptions::default();
        let ms = Duration::from_millis;
        // Young tasks at the shortest delay, a 4 s clone seen at most 0.4 s late, a long
        // one at the longest delay.
        assert_eq!(poll_delay(ms(0), &options), options.task_poll_min);
        assert_eq!(poll_delay(ms(4_000), &options), ms(400));
        assert_eq!(poll_delay(ms(600_000), &options), options.task_poll_max);
    }
}
