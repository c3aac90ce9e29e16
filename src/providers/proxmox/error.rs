//! What can go wrong talking to Proxmox VE, classified for retry, and the backoff between
//! retries (a pure function).
//!
//! # Invariants
//! - No variant holds the API token or any other secret: messages may be logged and shown.
//! - `is_transient()` is true only for failures that can go away by themselves (network, 5xx
//!   other than known-permanent texts, lock timeouts, a VM locked by a running task).
//!   Permanent failures carry a hint that says what to fix.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::model::VmId;

/// A failed Proxmox operation.
#[derive(Debug, thiserror::Error)]
pub enum ProxmoxError {
    /// The replica lost the Lease before the call: nothing was sent.
    #[error("nothing sent to Proxmox")]
    NotLeading(#[source] crate::fence::NotLeading),
    /// The connection settings cannot work (bad URL, bad token id).
    #[error("invalid Proxmox connection settings: {reason}")]
    Configure {
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The CA file named by `caFile` could not be read.
    #[error("cannot read the CA file {path}")]
    ReadCaFile {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The CA file holds no usable certificate.
    #[error("the CA file {path} holds no usable PEM certificate")]
    InvalidCaFile {
        /// The file.
        path: PathBuf,
    },
    /// The HTTPS client could not be built.
    #[error("cannot build the HTTPS client")]
    BuildClient {
        /// What the HTTP client said (no answer, or one it could not read).
        #[source]
        source: reqwest::Error,
    },
    /// The server's certificate is not the pinned one.
    #[error(
        "refusing {url}: its certificate has SHA-256 fingerprint {found}, but the connection pins {expected}; check tlsFingerprint (Proxmox: Node → System → Certificates) and that the URL reaches the right host"
    )]
    FingerprintMismatch {
        /// The API URL.
        url: String,
        /// The pinned fingerprint.
        expected: String,
        /// The fingerprint the server presented.
        found: String,
    },
    /// The server's certificate is not trusted (self-signed, or signed by another CA).
    #[error(
        "refusing {url}: its TLS certificate is not trusted; pin its SHA-256 fingerprint with tlsFingerprint (Proxmox: Node → System → Certificates) or name the CA that signed it with caFile"
    )]
    UntrustedCertificate {
        /// The API URL.
        url: String,
        /// The TLS failure.
        #[source]
        source: reqwest::Error,
    },
    /// The request never got an HTTP answer (connection refused or reset, timeout).
    #[error("{method} {path}: no answer from Proxmox")]
    Transport {
        /// HTTP method.
        method: &'static str,
        /// API path (below `/api2/json`).
        path: String,
        /// What the HTTP client said (no answer, or one it could not read).
        #[source]
        source: reqwest::Error,
    },
    /// Proxmox answered with an error status.
    #[error("{method} {path} failed with {status}: {message}{hint}")]
    Api {
        /// HTTP method.
        method: &'static str,
        /// API path (below `/api2/json`).
        path: String,
        /// HTTP status.
        status: u16,
        /// Proxmox's message (the reason phrase or the body's `message`), parameter errors
        /// folded in.
        message: String,
        /// Per-parameter errors of a 400.
        errors: BTreeMap<String, String>,
        /// What to do about it (empty, or starting with `: `).
        hint: String,
    },
    /// Proxmox's answer was larger than capstan reads (a broken or hostile server).
    #[error("{method} {path}: refused Proxmox's answer")]
    TooLarge {
        /// HTTP method.
        method: &'static str,
        /// API path.
        path: String,
        /// How large it was allowed to be.
        #[source]
        source: crate::http_client::BodyError,
    },
    /// Proxmox answered 2xx with a body we cannot read.
    #[error("{method} {path}: unexpected answer from Proxmox: {reason}")]
    Decode {
        /// HTTP method.
        method: &'static str,
        /// API path.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// A Proxmox task ended with an error.
    #[error("{0}")]
    TaskFailed(Box<TaskFailure>),
    /// A Proxmox task did not finish in time.
    #[error("Proxmox task {upid} still running after {waited:?}")]
    TaskTimeout {
        /// The task's UPID.
        upid: String,
        /// How long we waited.
        waited: Duration,
    },
    /// No template has the requested name.
    #[error(
        "no template named `{template}` on Proxmox (no VM with template=1 and that name): create the template, or fix machine.template"
    )]
    TemplateNotFound {
        /// The template name.
        template: String,
    },
    /// A machine names a resource pool Proxmox does not have, and the connection may not
    /// create one.
    #[error(
        "machine.pool: Proxmox has no resource pool `{pool}` (it has {existing}); create it (Datacenter → Permissions → Pools), name an existing one, or set `createPools: true` on the connection in capstan.yaml"
    )]
    PoolMissing {
        /// The pool named.
        pool: String,
        /// The pools there are, listed.
        existing: String,
    },
    /// A VM does not exist (where it must).
    #[error("VM {vmid} does not exist on {node}")]
    VmNotFound {
        /// The VMID.
        vmid: VmId,
        /// The Proxmox node asked.
        node: String,
    },
    /// The VM at a VMID is not the one the caller meant; nothing was done to it.
    #[error(
        "refusing to {action} VM {vmid} on {node}: {reason}; the VMID may have been reused by someone else, so it was left alone"
    )]
    NotOurs {
        /// What we were about to do (`stop`, `destroy`).
        action: &'static str,
        /// The VMID.
        vmid: VmId,
        /// The Proxmox node.
        node: String,
        /// What differs.
        reason: String,
    },
    /// Every VMID a clone tried was taken by a concurrent clone.
    #[error("cloning `{name}`: every VMID tried ({tried:?}) was taken by a concurrent clone")]
    VmidExhausted {
        /// The VM name.
        name: String,
        /// The VMIDs tried.
        tried: Vec<VmId>,
    },
    /// The disk is already larger than requested; Proxmox cannot shrink disks.
    #[error(
        "disk {disk} of VM {vmid} is {current_bytes} bytes, more than the requested {requested_bytes}: Proxmox cannot shrink disks; replace the VM instead"
    )]
    ShrinkDisk {
        /// The VMID.
        vmid: VmId,
        /// The disk key (`scsi0`, ...).
        disk: String,
        /// Current size.
        current_bytes: u64,
        /// Requested size.
        requested_bytes: u64,
    },
    /// The VM has no disk to resize.
    #[error("VM {vmid} has no disk to resize (looked for scsi0, virtio0, sata0, ide0)")]
    NoDisk {
        /// The VMID.
        vmid: VmId,
    },
    /// A command run through the guest agent did not finish in time.
    #[error("command `{program}` in VM {vmid} did not finish within {timeout:?}")]
    CommandTimeout {
        /// The VMID.
        vmid: VmId,
        /// The program (argv[0]).
        program: String,
        /// The timeout.
        timeout: Duration,
    },
    /// A file is too large for one guest-agent file-write.
    #[error(
        "{path} is {bytes} bytes; one guest-agent file-write takes at most {max} bytes (61440 base64 characters): split it"
    )]
    FileTooLarge {
        /// The file in the guest.
        path: String,
        /// Its size.
        bytes: usize,
        /// The largest size that fits.
        max: usize,
    },
    /// An ISO image was not sent: its file name or size cannot be uploaded as it is.
    #[error("refusing to upload ISO image `{name}` to storage {storage} on {node}: {reason}")]
    IsoRefused {
        /// The Proxmox node.
        node: String,
        /// The storage.
        storage: String,
        /// The file name asked for.
        name: String,
        /// Why.
        reason: String,
    },
    /// A storage of a node could not be read.
    #[error("cannot {action} storage {storage} on Proxmox node {node}")]
    Storage {
        /// What was being done (`read the content types of`, `list the volumes of`).
        action: &'static str,
        /// The Proxmox node.
        node: String,
        /// The storage.
        storage: String,
        /// What went wrong.
        #[source]
        source: Box<ProxmoxError>,
    },
    /// A node has no storage of that name.
    #[error(
        "Proxmox node {node} has no storage {storage}: name an existing storage (Datacenter → Storage)"
    )]
    StorageNotFound {
        /// The Proxmox node.
        node: String,
        /// The storage.
        storage: String,
    },
    /// An operation on a volume failed.
    #[error("cannot {action} volume {volume} on storage {storage} of Proxmox node {node}")]
    Volume {
        /// What was being done (`upload`, `delete`, `attach`, `detach`).
        action: &'static str,
        /// The Proxmox node.
        node: String,
        /// The storage.
        storage: String,
        /// The volume id.
        volume: String,
        /// What went wrong.
        #[source]
        source: Box<ProxmoxError>,
    },
    /// A command's output, as the guest agent reported it, is larger than capstan reads:
    /// the VM (whose root may be hostile) is not believed.
    #[error(
        "VM {vmid}'s guest agent answered `{program}` with {bytes} bytes of {stream}, more than the {max} read; refused"
    )]
    GuestOutputTooLarge {
        /// The VMID.
        vmid: VmId,
        /// The program (argv[0]).
        program: String,
        /// `stdout` or `stderr`.
        stream: &'static str,
        /// Its size.
        bytes: usize,
        /// The largest size read.
        max: usize,
    },
}

/// A failed Proxmox task: what it was, how it ended and the end of its log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Proxmox task {kind} of {id} on {node} failed: {exitstatus} (task {upid}; log tail: {tail}){hint}",
    tail = .log_tail.join(" | ")
)]
pub struct TaskFailure {
    /// The task's UPID.
    pub upid: String,
    /// The node that ran it.
    pub node: String,
    /// Task type (`qmclone`, `qmstart`, ...).
    pub kind: String,
    /// Task id (usually a VMID).
    pub id: String,
    /// The task's exit status (the error text).
    pub exitstatus: String,
    /// The last lines of the task log.
    pub log_tail: Vec<String>,
    /// What to do about it (empty, or starting with ` (`).
    pub hint: String,
}

/// Texts of Proxmox errors that go away by themselves.
const TRANSIENT_TEXTS: &[&str] = &[
    "got timeout",
    "can't lock file",
    "is locked",
    "connection reset",
    "connection refused",
    "no route to host",
    "temporarily unavailable",
    "qemu guest agent is not running",
];

/// Texts of 500 errors that will not go away by retrying.
const PERMANENT_TEXTS: &[&str] = &[
    "does not exist",
    "no such",
    "not enough memory",
    "cannot allocate memory",
    "no space left",
    "not enough space",
    "already exists",
    "already running",
    "template",
    "not supported",
    "does not support",
    "can't upload to storage type",
    "not allowed",
    "no qemu guest agent configured",
    "is not running",
    "uses local storage",
    "permission check failed",
];

impl ProxmoxError {
    /// Whether retrying later can succeed without anyone changing anything.
    pub fn is_transient(&self) -> bool {
        match self {
            ProxmoxError::Transport { .. }
            | ProxmoxError::TaskTimeout { .. }
            | ProxmoxError::VmidExhausted { .. } => true,
            ProxmoxError::Api {
                status, message, ..
            } => match status {
                502..=504 | 595 | 596 => true,
                500..=599 => is_transient_text(message) || !is_permanent_text(message),
                _ => false,
            },
            ProxmoxError::TaskFailed(failure) => is_transient_text(&failure.exitstatus),
            ProxmoxError::Storage { source, .. } | ProxmoxError::Volume { source, .. } => {
                source.is_transient()
            }
            _ => false,
        }
    }

    /// Whether the error says the guest agent is not (yet) answering: the VM may still be
    /// booting. Such errors are transient for the caller but not retried by each request.
    pub fn is_agent_unavailable(&self) -> bool {
        match self {
            ProxmoxError::Api { message, .. } => {
                let lower = message.to_ascii_lowercase();
                lower.contains("qemu guest agent is not running")
                    || lower.contains("qmp command 'guest-")
            }
            _ => false,
        }
    }

    /// Whether the error says the VM does not exist.
    pub fn is_not_found(&self) -> bool {
        match self {
            ProxmoxError::VmNotFound { .. } => true,
            ProxmoxError::Api {
                status, message, ..
            } => {
                *status == 500
                    && (message.contains("does not exist")
                        || message.contains("unable to find configuration file"))
            }
            _ => false,
        }
    }
}

fn is_transient_text(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    TRANSIENT_TEXTS.iter().any(|needle| lower.contains(needle))
}

fn is_permanent_text(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    PERMANENT_TEXTS.iter().any(|needle| lower.contains(needle))
}

/// What to tell the user to do about an API or task error (empty when we have nothing
/// better than Proxmox's own text).
pub(crate) fn hint_for(status: u16, message: &str) -> String {
    let lower = message.to_ascii_lowercase();
    let hint = if status == 401 {
        "check tokenId and the token secret (tokenFrom) in capstan.yaml; the token may have been deleted or expired"
    } else if status == 403 {
        "grant the token (or its user, when privilege separation is on) the privilege named above on that path"
    } else if status == 400 {
        "a parameter was refused: this is a capstan bug or an unsupported Proxmox version"
    } else if (300..400).contains(&status) {
        "capstan follows no redirect (the token would go with it): set url to the address the Proxmox API answers at itself"
    } else if status == 501 {
        "this Proxmox version does not offer this call: upgrade Proxmox VE (capstan needs 8.x or newer)"
    } else if lower.contains("not enough memory") || lower.contains("cannot allocate memory") {
        "free memory on that Proxmox node, or add other nodes to the pool's placement"
    } else if lower.contains("no space left") || lower.contains("not enough space") {
        "free space on the storage, or choose another one with machine.storage"
    } else if lower.contains("uses local storage") {
        "put a copy of the template on that node, or keep the template on shared storage"
    } else if lower.contains("pool") && lower.contains("does not exist") {
        "create the Proxmox resource pool, or remove it from the settings"
    } else if lower.contains("storage") && lower.contains("does not exist") {
        "fix machine.storage: that storage is not configured on this node"
    } else if status >= 500 && is_transient_text(message) {
        "transient: it is retried"
    } else {
        ""
    };
    if hint.is_empty() {
        String::new()
    } else {
        format!(" ({hint})")
    }
}

/// How requests are retried on transient failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in all, the first one included (1 = no retry).
    pub attempts: u32,
    /// Delay before the first retry (doubled each time).
    pub base: Duration,
    /// Upper bound of one delay.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        // Five tries spread over ~10 s outlast a pmxcfs hiccup or a 10 s lock wait on the
        // server, and stay well inside a reconcile pass.
        RetryPolicy {
            attempts: 5,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(5),
        }
    }
}

/// Delay before retry number `retry` (0 = the first retry): `base · 2^retry`, capped, with
/// "equal jitter" (half fixed, half scaled by `jitter` in `[0, 1]`), so concurrent clients
/// spread out yet never retry at once.
pub fn backoff_delay(policy: &RetryPolicy, retry: u32, jitter: f64) -> Duration {
    crate::backoff::exponential_delay(policy.base, policy.cap, retry, jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, message: &str) -> ProxmoxError {
        ProxmoxError::Api {
            method: "POST",
            path: "/x".into(),
            status,
            message: message.into(),
            errors: BTreeMap::new(),
            hint: hint_for(status, message),
        }
    }

    #[test]
    fn backoff_doubles_until_the_cap_and_jitter_stays_in_the_upper_half() {
        let policy = RetryPolicy {
            attempts: 10,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
        };
        assert_eq!(backoff_delay(&policy, 0, 1.0), Duration::from_millis(100));
        assert_eq!(backoff_delay(&policy, 1, 1.0), Duration::from_millis(200));
        assert_eq!(backoff_delay(&policy, 2, 0.0), Duration::from_millis(200));
        assert_eq!(backoff_delay(&policy, 3, 1.0), Duration::from_millis(800));
        assert_eq!(backoff_delay(&policy, 4, 1.0), Duration::from_secs(1));
        assert_eq!(backoff_delay(&policy, 40, 1.0), Duration::from_secs(1));
        assert_eq!(backoff_delay(&policy, 40, 0.0), Duration::from_millis(500));
        assert_eq!(backoff_delay(&policy, 0, 7.0), Duration::from_millis(100));
    }

    #[test]
    fn server_errors_lock_timeouts_and_locks_are_transient() {
        assert!(api(503, "Service Unavailable").is_transient());
        assert!(api(595, "No route to host").is_transient());
        assert!(api(500, "Internal Server Error").is_transient());
        assert!(
            api(
                500,
                "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout"
            )
            .is_transient()
        );
        assert!(api(500, "VM is locked (clone)").is_transient());
    }

    #[test]
    fn client_errors_and_known_permanent_texts_are_not_transient() {
        assert!(!api(400, "Parameter verification failed.").is_transient());
        assert!(!api(401, "authentication failure").is_transient());
        assert!(!api(403, "Permission check failed (/vms/100, VM.Clone)").is_transient());
        assert!(
            !api(
                500,
                "Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist"
            )
            .is_transient()
        );
        assert!(!api(500, "unable to create VM 101: config file already exists").is_transient());
        let full = ProxmoxError::TaskFailed(Box::new(TaskFailure {
            upid: "UPID:x".into(),
            node: "pve1".into(),
            kind: "qmclone".into(),
            id: "9000".into(),
            exitstatus: "clone failed: not enough memory on node 'pve1'".into(),
            log_tail: vec![],
            hint: hint_for(500, "not enough memory"),
        }));
        assert!(!full.is_transient());
        assert!(
            full.to_string()
                .contains("free memory on that Proxmox node")
        );
    }

    #[test]
    fn permanent_errors_say_what_to_fix() {
        assert!(
            api(401, "authentication failure")
                .to_string()
                .contains("tokenId")
        );
        assert!(
            api(500, "storage 'fast' does not exist")
                .to_string()
                .contains("machine.storage")
        );
    }

    #[test]
    fn agent_unavailability_is_recognised() {
        assert!(api(500, "QEMU guest agent is not running").is_agent_unavailable());
        assert!(
            api(500, "VM 101 qmp command 'guest-ping' failed - got timeout").is_agent_unavailable()
        );
        assert!(!api(500, "No QEMU guest agent configured").is_agent_unavailable());
        assert!(!api(500, "No QEMU guest agent configured").is_transient());
    }
}
