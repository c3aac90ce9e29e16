//! Running commands inside a node's VM.
//!
//! capstan reaches a node's operating system through the QEMU guest agent (Proxmox's
//! `agent/exec`, `agent/exec-status` and `agent/file-write`), so it needs only a Proxmox API
//! token, no SSH keys. The transport is a trait so SSH can be added without touching what runs.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::model::{NodeName, VmId};

/// The VM a command runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTarget {
    /// Proxmox VM id.
    pub vmid: VmId,
    /// Proxmox node the VM runs on.
    pub proxmox_node: String,
    /// The VM's (and Kubernetes Node's) name.
    pub name: NodeName,
}

impl fmt::Display for NodeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (VM {} on {})",
            self.name, self.vmid, self.proxmox_node
        )
    }
}

/// A program and its arguments, run without a shell.
///
/// The arguments never hold a secret: QEMU's guest agent logs every command line to the guest's
/// syslog, and `/proc/*/cmdline` shows it to every user of the node. A secret goes into a file
/// created mode 0600 first (kubeadm's `write_secret`).
#[derive(Clone, PartialEq, Eq)]
pub struct Command {
    /// Program followed by its arguments.
    pub argv: Vec<String>,
    /// The output holds a secret (a join command, a kubeconfig): never log or report it.
    pub sensitive: bool,
    /// How long the command may run.
    pub timeout: Duration,
    /// The most output (standard output, and standard error) read of it: past this the
    /// command fails unread ([`ExecError::OutputTooLarge`]). A VM's root may answer anything.
    pub max_output: usize,
}

/// The most output a command's stream may have unless it says otherwise
/// ([`Command::max_output`]); the guest-agent client refuses more in any case.
pub const DEFAULT_MAX_OUTPUT: usize = crate::providers::proxmox::GUEST_OUTPUT_MAX_BYTES;

impl Command {
    /// A command from its words, with a default timeout of two minutes.
    pub fn new<S: AsRef<str>>(argv: &[S]) -> Self {
        Command {
            argv: argv.iter().map(|word| word.as_ref().to_owned()).collect(),
            sensitive: false,
            timeout: Duration::from_secs(120),
            max_output: DEFAULT_MAX_OUTPUT,
        }
    }

    /// Marks the command's output as secret.
    pub fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }

    /// Sets how long the command may run.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the most output read of the command (a file read's cap), at most
    /// [`DEFAULT_MAX_OUTPUT`].
    pub fn max_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes.min(DEFAULT_MAX_OUTPUT);
        self
    }

    /// The command as it may appear in logs and errors: the program and its first arguments,
    /// or only the program when the command is sensitive.
    pub fn display(&self) -> String {
        let shown = if self.sensitive { 1 } else { 4 };
        let mut words: Vec<&str> = self.argv.iter().take(shown).map(String::as_str).collect();
        if self.argv.len() > shown {
            words.push("…");
        }
        words.join(" ")
    }
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Command")
            .field("argv", &self.display())
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Who may read, replace or run a file capstan writes into a VM (root owns them all).
///
/// QEMU's guest agent creates a file mode 0666 whatever the umask, and creates no folder; so
/// every file is first created empty, with its mode and its folders, by
/// [`FileMode::create_command`] (coreutils' `install`, which replaces what was there, mode
/// included), then filled through the agent's file-write, which keeps the mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// A script root runs, 0700: no one else reads it, or swaps it between the write and the
    /// run.
    Script,
    /// A file that holds a secret (a token, a key, a DSN), 0600.
    Secret,
    /// Configuration with nothing secret in it, 0644.
    Config,
}

impl FileMode {
    /// The permission bits.
    pub fn bits(self) -> u32 {
        match self {
            FileMode::Script => 0o700,
            FileMode::Secret => 0o600,
            FileMode::Config => 0o644,
        }
    }

    /// `install -D -m MODE /dev/null PATH`: `path` empty, root's, of this mode, its folders
    /// created (0755).
    pub fn create_command(self, path: &str) -> Command {
        let mode = format!("{:04o}", self.bits());
        Command::new(&["install", "-D", "-m", &mode, "/dev/null", path])
    }
}

/// What a finished command printed and how it exited.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Output {
    /// Exit code (0 is success).
    pub exit_code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Output {
    /// Whether the command exited 0.
    pub fn success(&self) -> bool {
        self.exit_code == 0
    }

    /// The last lines of standard error, for an error message.
    pub fn stderr_tail(&self) -> String {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Output may hold secrets (a join command, a kubeconfig): show sizes only.
        f.debug_struct("Output")
            .field("exit_code", &self.exit_code)
            .field("stdout_bytes", &self.stdout.len())
            .field("stderr_bytes", &self.stderr.len())
            .finish()
    }
}

/// Reaching the VM failed (not: the command exited non-zero, which is an [`Output`]).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The transport (guest agent, SSH) refused or failed.
    #[error("cannot run `{command}` on {node}")]
    Transport {
        /// The VM.
        node: String,
        /// The command, as shown in logs.
        command: String,
        /// Whether trying again later may succeed (agent not up yet, API hiccup).
        transient: bool,
        /// What the layer below said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The command's output is larger than the command reads ([`Command::max_output`]).
    #[error("`{command}` on {node} printed {bytes} bytes, more than the {max} read; refused")]
    OutputTooLarge {
        /// The VM.
        node: String,
        /// The command, as shown in logs.
        command: String,
        /// The size of the larger stream.
        bytes: usize,
        /// The command's cap.
        max: usize,
    },
    /// The command did not finish in time.
    #[error("`{command}` on {node} did not finish within {}", humantime::format_duration(*.after))]
    Timeout {
        /// The VM.
        node: String,
        /// The command, as shown in logs.
        command: String,
        /// The timeout.
        after: Duration,
    },
}

impl ExecError {
    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            ExecError::Transport { transient, .. } => *transient,
            ExecError::Timeout { .. } => true,
            ExecError::OutputTooLarge { .. } => false,
        }
    }
}

/// Runs commands and writes files inside a node's VM.
///
/// # Guarantees
/// Implementations never log a [`Command::sensitive`] command's arguments or output, nor the
/// content of a file (files may hold tokens).
pub trait NodeExec: Send + Sync {
    /// Writes `content` to `path` inside the VM (replacing it). Over the guest agent a new
    /// file is 0666 and its folder must exist: create it first ([`FileMode::create_command`]).
    fn write_file(
        &self,
        target: &NodeTarget,
        path: &str,
        content: &str,
    ) -> impl Future<Output = Result<(), ExecError>> + Send;

    /// Runs `command` to completion inside the VM.
    fn run(
        &self,
        target: &NodeTarget,
        command: &Command,
    ) -> impl Future<Output = Result<Output, ExecError>> + Send;
}

impl<T: NodeExec> NodeExec for Arc<T> {
    fn write_file(
        &self,
        target: &NodeTarget,
        path: &str,
        content: &str,
    ) -> impl Future<Output = Result<(), ExecError>> + Send {
        (**self).write_file(target, path, content)
    }

    fn run(
        &self,
        target: &NodeTarget,
        command: &Command,
    ) -> impl Future<Output = Result<Output, ExecError>> + Send {
        (**self).run(target, command)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitive_commands_show_only_the_program() {
        let join =
            Command::new(&["kubeadm", "token", "create", "--print-join-command"]).sensitive();
        assert_eq!(join.display(), "kubeadm …");
        let reset = Command::new(&["kubeadm", "reset", "--force"]);
        assert_eq!(reset.display(), "kubeadm reset --force");
    }

    #[tokio::test]
    async fn a_guest_reporting_an_absurd_signal_fails_its_command_without_overflow() {
        use crate::model::VmId;
        use crate::providers::proxmox::CommandOutput;
        use crate::providers::proxmox::recorder::Recorder;

        let target = NodeTarget {
            vmid: VmId(101),
            proxmox_node: "pve1".to_owned(),
            name: NodeName::from("cp-1"),
        };
        for signal in [i32::MAX, i32::MIN, -128, 0, -1] {
            let agent = GuestAgent::new(Recorder::new(move |_| CommandOutput {
                exit_code: None,
                signal: Some(signal),
                stdout: String::new(),
                stderr: String::new(),
            }));
            let output = agent
                .run(&target, &Command::new(&["true"]))
                .await
                .expect("ran");
            assert!(
                !output.success(),
                "signal {signal} read as exit {}",
                output.exit_code
            );
        }
        let agent = GuestAgent::new(Recorder::new(|_| CommandOutput {
            exit_code: None,
            signal: Some(9),
            stdout: String::new(),
            stderr: String::new(),
        }));
        let output = agent
            .run(&target, &Command::new(&["sleep", "1"]))
            .await
            .expect("ran");
        assert_eq!(output.exit_code, 137, "128 + SIGKILL, as a shell says");
    }

    #[tokio::test]
    async fn output_over_the_commands_cap_is_refused_naming_the_vm_and_the_cap() {
        use crate::model::VmId;
        use crate::providers::proxmox::CommandOutput;
        use crate::providers::proxmox::recorder::Recorder;

        let target = NodeTarget {
            vmid: VmId(101),
            proxmox_node: "pve1".to_owned(),
            name: NodeName::from("cp-1"),
        };
        let max = crate::providers::kube::MAX_KUBECONFIG_BYTES;
        let agent = GuestAgent::new(Recorder::new(move |_| CommandOutput {
            exit_code: Some(0),
            signal: None,
            stdout: "apiVersion: v1\n".repeat(max / 10),
            stderr: String::new(),
        }));
        for read in [
            crate::providers::kubeadm::read_admin_kubeconfig(),
            crate::providers::k3s::read_kubeconfig(),
        ] {
            assert_eq!(read.max_output, max, "a kubeconfig read's cap");
            let err = agent.run(&target, &read).await.expect_err("too large");
            let text = err.to_string();
            assert!(
                matches!(err, ExecError::OutputTooLarge { .. }) && !err.is_transient(),
                "{err:?}"
            );
            assert!(
                text.contains("cp-1 (VM 101 on pve1)") && text.contains(&format!("the {max} read")),
                "{text}"
            );
        }
        let output = agent
            .run(&target, &Command::new(&["cat", "/etc/os-release"]))
            .await
            .expect("under the default cap");
        assert!(output.success());
        let capped = Command::new(&["cat", "/x"]).max_output(usize::MAX);
        assert_eq!(
            capped.max_output, DEFAULT_MAX_OUTPUT,
            "never above the client's cap"
        );
    }

    #[test]
    fn output_debug_never_shows_content() {
        let output = Output {
            exit_code: 0,
            stdout: "token abcdef.0123456789abcdef".into(),
            stderr: String::new(),
        };
        assert!(!format!("{output:?}").contains("abcdef"));
    }
}

/// Commands through the QEMU guest agent of a Proxmox VM: all capstan needs is its API token.
#[derive(Debug, Clone)]
pub struct GuestAgent<P> {
    proxmox: P,
}

impl<P> GuestAgent<P> {
    /// A transport over `proxmox`'s guest-agent calls.
    pub fn new(proxmox: P) -> Self {
        GuestAgent { proxmox }
    }
}

fn vm_ref(target: &NodeTarget) -> crate::providers::proxmox::VmRef {
    crate::providers::proxmox::VmRef {
        node: crate::providers::proxmox::PveNode(target.proxmox_node.clone()),
        vmid: target.vmid,
    }
}

fn transport_error(
    target: &NodeTarget,
    command: String,
    err: crate::providers::proxmox::ProxmoxError,
) -> ExecError {
    ExecError::Transport {
        node: target.to_string(),
        command,
        transient: err.is_transient(),
        source: Box::new(err),
    }
}

impl<P: crate::providers::proxmox::ProxmoxProvider> NodeExec for GuestAgent<P> {
    async fn write_file(
        &self,
        target: &NodeTarget,
        path: &str,
        content: &str,
    ) -> Result<(), ExecError> {
        self.proxmox
            .write_file(&vm_ref(target), path, content.as_bytes())
            .await
            .map_err(|err| transport_error(target, format!("write {path}"), err))
    }

    async fn run(&self, target: &NodeTarget, command: &Command) -> Result<Output, ExecError> {
        let output = self
            .proxmox
            .run_command(&vm_ref(target), &command.argv, None, command.timeout)
            .await
            .map_err(|err| transport_error(target, command.display(), err))?;
        let bytes = output.stdout.len().max(output.stderr.len());
        if bytes > command.max_output {
            return Err(ExecError::OutputTooLarge {
                node: target.to_string(),
                command: command.display(),
                bytes,
                max: command.max_output,
            });
        }
        Ok(Output {
            exit_code: exit_code_of(output.exit_code, output.signal),
            stdout: output.stdout,
            stderr: output.stderr,
        })
    }
}

/// What a command ended with that a guest agent reports as an exit code, or as the signal
/// that killed it: 128 + N for signal N, as a shell says. Both come from the guest, which may
/// lie: a signal outside 1..=127 (or neither value) reads as [`UNKNOWN_EXIT`], a failure,
/// never as 0, and nothing overflows.
fn exit_code_of(exit_code: Option<i32>, signal: Option<i32>) -> i32 {
    match (exit_code, signal) {
        (Some(code), _) => code,
        (None, Some(signal @ 1..=127)) => 128 + signal,
        (None, _) => UNKNOWN_EXIT,
    }
}

/// The exit code of a command that ended in no way the guest agent could say (or said
/// something impossible): a failure, as `bash` reports an exit status out of range.
pub const UNKNOWN_EXIT: i32 = 255;
