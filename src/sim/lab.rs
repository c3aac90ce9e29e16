//! The lab: assembles and runs the simulated world (today the simulated Proxmox VE; the
//! simulated Kubernetes clusters join later) and tells programs how to reach it through
//! `STATE_DIR/lab.json`:
//!
//! ```json
//! {"proxmox": {"url": "https://127.0.0.1:8006", "fingerprint": "AB:...", "tokenId": "capstan@pve!lab", "token": "..."},
//!  "clusters": {"prod": {"kubeconfig": "/path"}}}
//! ```
//!
//! # Invariants
//! - Every part of a lab shares one [`LabClock`].
//! - `lab.json` holds the lab's own token (a local lab: showing it is the point); it is written
//!   readable by its owner only.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::proxmox::{
    DefaultShell, FaultHandle, GuestSoftware, SimError, SimHandle, SimOptions, SimProxmox,
};
use super::world::LabConfig;
use crate::clock::LabClock;

/// The API token id the lab accepts.
pub const LAB_TOKEN_ID: &str = "capstan@pve!lab";
/// The state file's name inside the state directory.
pub const LAB_FILE: &str = "lab.json";

/// Starting the lab or writing its state failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The simulated Proxmox could not start.
    #[error("cannot start the simulated Proxmox VE")]
    Proxmox(#[source] SimError),
    /// The state directory or `lab.json` could not be written.
    #[error("cannot write {path}")]
    WriteState {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// How to run a lab.
#[derive(Clone)]
pub struct LabOptions {
    /// Where the simulated Proxmox listens (port 0 picks a free one).
    pub listen: SocketAddr,
    /// Where `lab.json` goes (none: not written).
    pub state_dir: Option<PathBuf>,
    /// The software inside the VMs.
    pub guest: Arc<dyn GuestSoftware>,
    /// Record every API request and answer (for fidelity checks).
    pub record: bool,
}

impl std::fmt::Debug for LabOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabOptions")
            .field("listen", &self.listen)
            .field("state_dir", &self.state_dir)
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

impl LabOptions {
    /// Loopback on a free port, no state file, the default shell in the VMs.
    pub fn ephemeral() -> Self {
        LabOptions {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            state_dir: None,
            guest: Arc::new(DefaultShell::new()),
            record: false,
        }
    }
}

/// `lab.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabFile {
    /// How to reach the simulated Proxmox.
    pub proxmox: LabProxmox,
    /// Simulated Kubernetes clusters by name.
    #[serde(default)]
    pub clusters: BTreeMap<String, LabCluster>,
}

/// How to reach the simulated Proxmox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabProxmox {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// Certificate fingerprint to pin.
    pub fingerprint: String,
    /// API token id.
    pub token_id: String,
    /// API token secret.
    pub token: String,
}

/// How to reach a simulated Kubernetes cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabCluster {
    /// Its admin kubeconfig.
    pub kubeconfig: PathBuf,
}

/// A running lab. Dropping it stops it.
#[derive(Debug)]
pub struct Lab {
    proxmox: SimProxmox,
    clock: LabClock,
    state_file: Option<PathBuf>,
}

impl Lab {
    /// Starts the world `config` describes and, with a state directory, writes `lab.json`.
    ///
    /// # Errors
    /// When the world is inconsistent, a server cannot start, or `lab.json` cannot be written.
    pub async fn start(config: LabConfig, options: LabOptions) -> Result<Lab, LabError> {
        let clock = LabClock::new();
        let sim_options = SimOptions {
            listen: options.listen,
            token_id: LAB_TOKEN_ID.to_owned(),
            token_secret: generate_token(),
            record: options.record,
        };
        let proxmox = SimProxmox::start(&config.proxmox, sim_options, clock.clone(), options.guest)
            .await
            .map_err(LabError::Proxmox)?;
        let mut lab = Lab {
            proxmox,
            clock,
            state_file: None,
        };
        if let Some(dir) = &options.state_dir {
            lab.state_file = Some(write_lab_file(dir, &lab.lab_file())?);
        }
        Ok(lab)
    }

    /// `https://127.0.0.1:PORT` of the simulated Proxmox.
    pub fn proxmox_url(&self) -> String {
        self.proxmox.url()
    }

    /// Its certificate fingerprint.
    pub fn fingerprint(&self) -> String {
        self.proxmox.fingerprint()
    }

    /// The API token id.
    pub fn token_id(&self) -> &str {
        self.proxmox.token_id()
    }

    /// The API token secret.
    pub fn token(&self) -> &str {
        self.proxmox.token_secret()
    }

    /// The lab's clock.
    pub fn clock(&self) -> &LabClock {
        &self.clock
    }

    /// Fault injection into the simulated Proxmox.
    pub fn faults(&self) -> FaultHandle {
        self.proxmox.faults()
    }

    /// Inspection of the simulated Proxmox (counters, VMs, recorded requests).
    pub fn proxmox(&self) -> SimHandle {
        self.proxmox.handle()
    }

    /// The simulated Proxmox server itself.
    pub fn proxmox_server(&self) -> &SimProxmox {
        &self.proxmox
    }

    /// What `lab.json` says (with no clusters; callers that add clusters extend it and
    /// write it with [`write_lab_file`]).
    pub fn lab_file(&self) -> LabFile {
        LabFile {
            proxmox: LabProxmox {
                url: self.proxmox_url(),
                fingerprint: self.fingerprint(),
                token_id: self.token_id().to_owned(),
                token: self.token().to_owned(),
            },
            clusters: BTreeMap::new(),
        }
    }

    /// Where `lab.json` was written, if it was.
    pub fn state_file(&self) -> Option<&Path> {
        self.state_file.as_deref()
    }

    /// Stops serving.
    pub fn stop(&self) {
        self.proxmox.stop();
    }
}

/// Writes `dir/lab.json` (creating `dir`), readable by its owner only. Returns its path.
///
/// # Errors
/// When the directory or file cannot be written.
pub fn write_lab_file(dir: &Path, file: &LabFile) -> Result<PathBuf, LabError> {
    std::fs::create_dir_all(dir).map_err(|source| LabError::WriteState {
        path: dir.to_owned(),
        source,
    })?;
    let path = dir.join(LAB_FILE);
    let text = serde_json::to_string_pretty(file).expect("lab.json is plain data");
    let wrap = |source| LabError::WriteState {
        path: path.clone(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options.open(&path).map_err(wrap)?;
    out.write_all(text.as_bytes()).map_err(wrap)?;
    out.write_all(b"\n").map_err(wrap)?;
    Ok(path)
}

/// A fresh API token secret in the UUID form Proxmox uses.
pub fn generate_token() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: fall back to the clock's nanoseconds, unique per lab at least.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        bytes = nanos.to_le_bytes();
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_look_like_uuids_and_differ() {
        let a = generate_token();
        assert_eq!(a.len(), 36);
        assert_eq!(a.matches('-').count(), 4);
        assert_eq!(&a[14..15], "4");
        assert_ne!(a, generate_token());
    }

    #[tokio::test]
    async fn a_lab_writes_lab_json_with_an_empty_cluster_map() {
        let dir = tempfile::tempdir().expect("dir");
        let options = LabOptions {
            state_dir: Some(dir.path().join("state")),
            ..LabOptions::ephemeral()
        };
        let lab = Lab::start(LabConfig::default(), options)
            .await
            .expect("lab");
        let text =
            std::fs::read_to_string(dir.path().join("state").join(LAB_FILE)).expect("lab.json");
        let value: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(value["proxmox"]["url"], lab.proxmox_url());
        assert_eq!(value["proxmox"]["tokenId"], LAB_TOKEN_ID);
        assert_eq!(value["proxmox"]["token"], lab.token());
        assert_eq!(value["proxmox"]["fingerprint"], lab.fingerprint());
        assert_eq!(value["clusters"], serde_json::json!({}));
        lab.stop();
    }
}
