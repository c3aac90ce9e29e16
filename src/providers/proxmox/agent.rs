//! The guest-agent requests of [`ProxmoxClient`], each counted.

use std::sync::atomic::Ordering;

use serde_json::Value;

use super::api::{Method, Params, Retry};
use super::client::ProxmoxClient;
use super::error::ProxmoxError;
use super::wire::{flag, text, uint, uint_signed, vm_path};
use super::{CommandOutput, ExecPid, ExecStatus, VmRef};

/// The most output (each of standard output and standard error) read of a command run in a
/// VM. Capstan's commands print kilobytes (the prepare script's package installs the most, a
/// few hundred); a guest may answer with anything up to the API body limit, and its text goes
/// on into redaction, parsers and errors, so past this it is refused unread.
pub const GUEST_OUTPUT_MAX_BYTES: usize = 1024 * 1024;

impl ProxmoxClient {
    /// Guest-agent requests this client (and its clones) made so far.
    pub fn guest_agent_calls(&self) -> u64 {
        self.agent_calls.load(Ordering::Relaxed)
    }

    /// One guest-agent request (counted: see [`ProxmoxClient::guest_agent_calls`]).
    pub(super) async fn agent_call(
        &self,
        method: Method,
        vm: &VmRef,
        command: &str,
        params: &Params,
    ) -> Result<Value, ProxmoxError> {
        self.agent_calls.fetch_add(1, Ordering::Relaxed);
        self.api
            .call_value(
                method,
                &vm_path(vm, &format!("/agent/{command}")),
                params,
                Retry::TransientExceptAgent,
            )
            .await
    }

    /// Starts a command in the guest (`command[0]` is the program).
    pub(super) async fn agent_exec(
        &self,
        vm: &VmRef,
        command: &[String],
        input: Option<&str>,
    ) -> Result<ExecPid, ProxmoxError> {
        let mut params: Params = command
            .iter()
            .map(|part| ("command".to_owned(), part.clone()))
            .collect();
        if let Some(input) = input {
            params.push(("input-data".into(), input.to_owned()));
        }
        let data = self.agent_call(Method::Post, vm, "exec", &params).await?;
        uint(&data, "pid")
            .map(ExecPid)
            .ok_or_else(|| ProxmoxError::Decode {
                method: "POST",
                path: vm_path(vm, "/agent/exec"),
                reason: "no pid in the answer".into(),
            })
    }

    /// Reads the state of a command started by `agent_exec` (`program` is its argv[0], for
    /// errors).
    ///
    /// # Errors
    /// Besides the API's: [`ProxmoxError::GuestOutputTooLarge`] when either stream is over
    /// [`GUEST_OUTPUT_MAX_BYTES`].
    pub(super) async fn agent_exec_status(
        &self,
        vm: &VmRef,
        pid: ExecPid,
        program: &str,
    ) -> Result<ExecStatus, ProxmoxError> {
        let params: Params = vec![("pid".into(), pid.0.to_string())];
        let data = self
            .agent_call(Method::Get, vm, "exec-status", &params)
            .await?;
        if !flag(&data, "exited") {
            return Ok(ExecStatus::Running);
        }
        for (key, stream) in [("out-data", "stdout"), ("err-data", "stderr")] {
            let bytes = data.get(key).and_then(Value::as_str).map_or(0, str::len);
            if bytes > GUEST_OUTPUT_MAX_BYTES {
                return Err(ProxmoxError::GuestOutputTooLarge {
                    vmid: vm.vmid,
                    program: program.to_owned(),
                    stream,
                    bytes,
                    max: GUEST_OUTPUT_MAX_BYTES,
                });
            }
        }
        Ok(ExecStatus::Exited(CommandOutput {
            exit_code: uint_signed(&data, "exitcode"),
            signal: uint_signed(&data, "signal"),
            stdout: text(&data, "out-data").unwrap_or_default(),
            stderr: text(&data, "err-data").unwrap_or_default(),
        }))
    }
}
