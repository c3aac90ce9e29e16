//! The software inside simulated VMs, behind [`GuestSoftware`]: the guest agent's `exec` and
//! `file-write` reach it, and it is told when a VM starts, stops or disappears. The lab takes
//! the implementation as a parameter, so a later issue can plug in a kubeadm emulator; the
//! default, [`DefaultShell`], is a minimal shell.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use capstan_core::model::VmId;

/// Which VM a call concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestIdentity {
    /// VMID.
    pub vmid: VmId,
    /// VM name (its hostname).
    pub name: String,
    /// The Proxmox node it runs on.
    pub node: String,
    /// Its IPv4 address (from the lab's DHCP range), once it has one.
    pub address: Option<Ipv4Addr>,
    /// The K3s release whose air-gap install its disk carries (from its template).
    pub k3s_airgap: Option<String>,
    /// The Talos version the VM boots (from its template), if it is a Talos VM.
    pub talos: Option<String>,
    /// The system extensions its Talos image carries (from its template).
    pub talos_extensions: Vec<String>,
    /// The images in a Talos VM's CD-ROM drives (`media=cdrom`), in drive order: what it
    /// reads its machine config from at start. Empty for other VMs.
    pub media: Vec<MediaImage>,
    /// The cluster its owner's tags name (`cluster-<name>`), if any: what the lab names a
    /// cluster it starts after (K3s itself knows no cluster name).
    pub cluster: Option<String>,
    /// Its block devices and network cards, as its config makes them.
    pub hardware: GuestHardware,
}

/// What a guest sees of its virtual hardware, derived from its VM's config alone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GuestHardware {
    /// Its disks in slot order (`sda` for `scsi0`, then `sdb`, ...), CD-ROMs left out.
    pub disks: Vec<GuestDisk>,
    /// Its network cards in slot order (`eth0` for `net0`, ...).
    pub cards: Vec<GuestCard>,
    /// Whether its disk carries cloud-init (from its template).
    pub cloud_init: bool,
}

/// A block device of a guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestDisk {
    /// Its kernel name (`sdb`).
    pub name: String,
    /// Its serial (the drive's `serial=`), if set.
    pub serial: Option<String>,
    /// Its size, bytes.
    pub size_bytes: u64,
}

/// A network card of a guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestCard {
    /// Its name (`eth1`).
    pub name: String,
    /// Its MAC address, lowercase.
    pub mac: String,
    /// Its MTU: the card's, else its bridge's.
    pub mtu: u32,
    /// Its IPv4 address, when it has one.
    pub address: Option<Ipv4Addr>,
}

/// An image in a CD-ROM drive, as the VM reads it.
#[derive(Clone, PartialEq, Eq)]
pub struct MediaImage(pub Arc<Vec<u8>>);

impl std::fmt::Debug for MediaImage {
    // A cidata image holds a machine config's secrets: show its size, never its bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MediaImage({} bytes)", self.0.len())
    }
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutcome {
    /// Exit code.
    pub exit_code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl ExecOutcome {
    /// Exit 0 with `stdout`.
    pub fn success(stdout: impl Into<String>) -> Self {
        ExecOutcome {
            exit_code: 0,
            stdout: stdout.into(),
            stderr: String::new(),
        }
    }

    /// Exit `code` with `stderr`.
    pub fn failure(code: i32, stderr: impl Into<String>) -> Self {
        ExecOutcome {
            exit_code: code,
            stdout: String::new(),
            stderr: stderr.into(),
        }
    }
}

/// What happened to a VM's power.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerEvent {
    /// The VM was started (its agent answers after the boot delay).
    Started,
    /// The VM was shut down cleanly.
    ShutDown,
    /// The VM was stopped hard (fencing, or a failed shutdown).
    HardStopped,
    /// The VM's Proxmox node went away; the VM is gone with it.
    HostLost,
    /// The VM was destroyed.
    Destroyed,
}

/// A command's completion, as a boxed future (the trait is used as `dyn`).
pub type ExecFuture = Pin<Box<dyn Future<Output = ExecOutcome> + Send>>;

/// The software inside the simulated VMs.
pub trait GuestSoftware: Send + Sync + 'static {
    /// Runs `command` (`command[0]` is the program) with optional standard input. The guest
    /// agent reports "not exited" until the future completes.
    fn exec(&self, guest: &GuestIdentity, command: &[String], input: Option<&str>) -> ExecFuture;

    /// A file was written through the agent's `file-write`.
    ///
    /// # Errors
    /// The agent's message when the file cannot be opened (its folder does not exist).
    fn file_written(
        &self,
        guest: &GuestIdentity,
        path: &str,
        content: &[u8],
    ) -> Result<(), FileOpenError>;

    /// The VM's power changed.
    fn power_event(&self, guest: &GuestIdentity, event: PowerEvent);

    /// The IPv4 address the VM, starting, gives its interface with MAC address `mac` itself
    /// (Talos: a static address in its cidata's `network-config`) instead of taking a DHCP
    /// lease; `None`: it takes a lease.
    fn static_address(&self, guest: &GuestIdentity, mac: &str) -> Option<Ipv4Addr> {
        let _ = (guest, mac);
        None
    }
}

/// A minimal shell: `true`, `false`, `echo`, `hostname`, `cat` of files written through the
/// agent; anything else exits 127, "command not found". Files vanish with the VM. It has no
/// folders (every write succeeds): the lab's node software (the `nodes` module) models them.
#[derive(Debug, Default)]
pub struct DefaultShell {
    files: Mutex<HashMap<VmId, BTreeMap<String, Vec<u8>>>>,
}

impl DefaultShell {
    /// A shell with no files.
    pub fn new() -> Self {
        DefaultShell::default()
    }

    fn run(&self, guest: &GuestIdentity, command: &[String]) -> ExecOutcome {
        let Some((program, args)) = command.split_first() else {
            return ExecOutcome::failure(127, "sh: empty command\n");
        };
        let program = program.rsplit('/').next().unwrap_or(program);
        match program {
            "true" => ExecOutcome::success(""),
            "false" => ExecOutcome::failure(1, ""),
            "echo" => ExecOutcome::success(format!("{}\n", args.join(" "))),
            "hostname" => ExecOutcome::success(format!("{}\n", guest.name)),
            "cat" => {
                let files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
                let mine = files.get(&guest.vmid);
                let mut out = Vec::new();
                let mut err = String::new();
                for path in args {
                    match mine.and_then(|files| files.get(path)) {
                        Some(content) => out.extend_from_slice(content),
                        None => err.push_str(&format!("cat: {path}: No such file or directory\n")),
                    }
                }
                ExecOutcome {
                    exit_code: if err.is_empty() { 0 } else { 1 },
                    stdout: String::from_utf8_lossy(&out).into_owned(),
                    stderr: err,
                }
            }
            other => ExecOutcome::failure(127, format!("sh: 1: {other}: command not found\n")),
        }
    }
}

impl GuestSoftware for DefaultShell {
    fn exec(&self, guest: &GuestIdentity, command: &[String], _input: Option<&str>) -> ExecFuture {
        let outcome = self.run(guest, command);
        Box::pin(async move { outcome })
    }

    fn file_written(
        &self,
        guest: &GuestIdentity,
        path: &str,
        content: &[u8],
    ) -> Result<(), FileOpenError> {
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(guest.vmid)
            .or_default()
            .insert(path.to_owned(), content.to_vec());
        Ok(())
    }

    fn power_event(&self, guest: &GuestIdentity, event: PowerEvent) {
        if event == PowerEvent::Destroyed {
            self.files
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&guest.vmid);
        }
    }
}

/// The guest agent could not open a file for `file-write`, in qga's words
/// (`failed to open file '/etc/x' (mode: 'wb'): No such file or directory`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to open file '{path}' (mode: 'wb'): {why}")]
pub struct FileOpenError {
    /// The path asked for.
    pub path: String,
    /// `fopen`'s reason (`No such file or directory`, `Is a directory`).
    pub why: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest() -> GuestIdentity {
        GuestIdentity {
            vmid: VmId(101),
            name: "capstan-prod-cp-a1b2c".into(),
            node: "pve1".into(),
            address: None,
            k3s_airgap: None,
            talos: None,
            talos_extensions: Vec::new(),
            media: Vec::new(),
            cluster: None,
            hardware: Default::default(),
        }
    }

    fn run(shell: &DefaultShell, argv: &[&str]) -> ExecOutcome {
        let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
        shell.run(&guest(), &argv)
    }

    #[test]
    fn the_default_shell_knows_a_few_commands() {
        let shell = DefaultShell::new();
        assert_eq!(run(&shell, &["true"]).exit_code, 0);
        assert_eq!(run(&shell, &["/bin/false"]).exit_code, 1);
        assert_eq!(run(&shell, &["echo", "a", "b"]).stdout, "a b\n");
        assert_eq!(run(&shell, &["hostname"]).stdout, "capstan-prod-cp-a1b2c\n");
        let unknown = run(&shell, &["kubeadm", "init"]);
        assert_eq!(unknown.exit_code, 127);
        assert!(unknown.stderr.contains("command not found"));
    }

    #[test]
    fn cat_reads_files_written_through_the_agent_until_the_vm_is_destroyed() {
        let shell = DefaultShell::new();
        shell
            .file_written(&guest(), "/etc/x", b"hello\n")
            .expect("written");
        assert_eq!(run(&shell, &["cat", "/etc/x"]).stdout, "hello\n");
        let missing = run(&shell, &["cat", "/etc/y"]);
        assert_eq!(missing.exit_code, 1);
        shell.power_event(&guest(), PowerEvent::Destroyed);
        assert_eq!(run(&shell, &["cat", "/etc/x"]).exit_code, 1);
    }
}
