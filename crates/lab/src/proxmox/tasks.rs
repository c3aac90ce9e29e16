//! Simulated Proxmox tasks: each gets a UPID in the real format
//! (`UPID:node:pid:pstart:starttime:type:id:user:`), runs for its configured duration on tokio
//! time, then applies its work (or an injected failure) and records `TASK OK` or
//! `TASK ERROR: <text>` as its exit status and last log line.

use std::sync::Arc;
use std::time::Duration;

use super::guest::{GuestIdentity, PowerEvent};
use super::state::{Shared, SimState, TaskState};

/// The end of a task's work: extra log lines, an error (the exit status), warnings (a task
/// without error ends `WARNINGS: n` when it warned), and power events to tell the guest
/// software about once the state lock is released.
#[derive(Default)]
pub(super) struct TaskEnd {
    pub log: Vec<String>,
    pub error: Option<String>,
    pub warnings: u32,
    pub events: Vec<(GuestIdentity, PowerEvent)>,
}

impl TaskEnd {
    pub fn failed(message: impl Into<String>) -> Self {
        TaskEnd {
            error: Some(message.into()),
            ..TaskEnd::default()
        }
    }
}

/// What a task does when its time is up (with the injected failure, if any).
pub(super) type TaskWork = Box<dyn FnOnce(&mut SimState, Option<String>) -> TaskEnd + Send>;

/// Starts a task: records it as running with a UPID in the real format, and after `duration`
/// runs `work` and records its end. Returns the UPID.
#[allow(clippy::too_many_arguments)]
pub(super) fn start_task(
    shared: &Arc<Shared>,
    state: &mut SimState,
    node: &str,
    kind: &str,
    id: &str,
    user: &str,
    duration: Duration,
    first_log: Vec<String>,
    work: TaskWork,
) -> String {
    state.next_pid += 1;
    state.pstart += 37;
    let pid = state.next_pid;
    let pstart = state.pstart;
    let starttime = shared.unix_now();
    let upid = format!("UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{kind}:{id}:{user}:");
    let injected = state.faults.take_task_failure(kind);
    state.tasks.insert(
        upid.clone(),
        TaskState {
            node: node.to_owned(),
            pid,
            pstart,
            starttime,
            kind: kind.to_owned(),
            id: id.to_owned(),
            user: user.to_owned(),
            log: first_log,
            exitstatus: None,
        },
    );
    let shared = shared.clone();
    let key = upid.clone();
    tokio::spawn(async move {
        tokio::time::sleep(duration).await;
        let events = {
            let mut state = shared.lock();
            let end = work(&mut state, injected);
            if let Some(task) = state.tasks.get_mut(&key) {
                task.log.extend(end.log);
                match end.error {
                    Some(error) => {
                        task.log.push(format!("TASK ERROR: {error}"));
                        task.exitstatus = Some(error);
                    }
                    None if end.warnings > 0 => {
                        task.log.push(format!("TASK WARNINGS: {}", end.warnings));
                        task.exitstatus = Some(format!("WARNINGS: {}", end.warnings));
                    }
                    None => {
                        task.log.push("TASK OK".into());
                        task.exitstatus = Some("OK".into());
                    }
                }
            }
            end.events
        };
        shared.notify(events);
    });
    upid
}
