//! The lab: assembles and runs the simulated world — the simulated Proxmox VE, the simulated
//! Kubernetes API servers (`management` and the clusters the lab config declares), and the
//! software inside the VMs that turns kubeadm commands into clusters — and tells programs how
//! to reach it through `STATE_DIR/lab.json`:
//!
//! ```json
//! {"proxmox": {"url": "https://127.0.0.1:8006", "fingerprint": "AB:...", "tokenId": "capstan@pve!lab", "token": "..."},
//!  "clusters": {"management": {"kubeconfig": "/abs/state/management.kubeconfig"},
//!               "prod": {"kubeconfig": "/abs/state/prod.kubeconfig",
//!                        "endpoint": "k8s-prod.lab.example:6443", "address": "127.0.0.1:41234"}},
//!  "talosApis": {"10.20.0.51:50000": "127.0.0.1:41301"}}
//! ```
//!
//! `talosApis` (only when a Talos node serves) maps each Talos node's API, at the node's
//! address as its guest agent reports it and Talos's port, to where the lab serves it.
//!
//! # Invariants
//! - Every part of a lab shares one [`LabClock`].
//! - `lab.json` lists every cluster, including those `kubeadm init` creates later inside the
//!   VMs; it and the kubeconfig files are rewritten whenever a cluster appears or its
//!   certificates are renewed (see `state`).
//! - `lab.json` holds the lab's own token (a local lab: showing it is the point); it and the
//!   kubeconfigs are written readable by their owner only.

mod backend;
mod state;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use backend::{
    CLUSTER_CONFIGURATION_KEY, CredentialsHook, KUBEADM_CONFIG, LabBackend, TalosApisHook,
};

use super::kube::{KubeLab, SimCluster, SimKubeError};
use super::nodes::{NodeSoftware, NodeTimings, TalosClusterRef};
use super::proxmox::{FaultHandle, GuestSoftware, SimError, SimHandle, SimOptions, SimProxmox};
use super::talos::{EtcdCluster, TalosApis};
use super::world::{LabConfig, WorldError};
use crate::clock::LabClock;
use capstan_core::model::VmId;
use state::StateFiles;

/// The API token id the lab accepts.
pub const LAB_TOKEN_ID: &str = "capstan@pve!lab";
/// The state file's name inside the state directory.
pub const LAB_FILE: &str = "lab.json";

/// Starting the lab or writing its state failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The lab config is inconsistent.
    #[error("invalid lab config")]
    Config(#[source] WorldError),
    /// The simulated Proxmox could not start.
    #[error("cannot start the simulated Proxmox VE")]
    Proxmox(#[source] SimError),
    /// The simulated Kubernetes clusters could not start.
    #[error("cannot start the simulated Kubernetes clusters")]
    Clusters(#[source] SimKubeError),
    /// The state directory or a file in it could not be written.
    #[error("cannot write {path}")]
    WriteState {
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
}

/// The software inside the lab's VMs.
///
/// An enum rather than a ready-made [`GuestSoftware`]: the lab's own node software needs the
/// lab's clusters and clock, which exist only once [`Lab::start`] runs.
#[derive(Clone, Default)]
pub enum LabGuest {
    /// The lab's nodes: kubeadm, kubectl and the prepare scripts act on the lab's simulated
    /// clusters ([`NodeSoftware`] over a [`LabBackend`]).
    #[default]
    Nodes,
    /// Other software, e.g. [`super::proxmox::DefaultShell`] for tests of the Proxmox side only.
    Custom(Arc<dyn GuestSoftware>),
}

impl std::fmt::Debug for LabGuest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabGuest::Nodes => f.write_str("Nodes"),
            LabGuest::Custom(_) => f.write_str("Custom"),
        }
    }
}

/// How to run a lab.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Where the simulated Proxmox listens (port 0 picks a free one).
    pub listen: SocketAddr,
    /// Where `lab.json` and the kubeconfigs go (none: not written).
    pub state_dir: Option<PathBuf>,
    /// The software inside the VMs.
    pub guest: LabGuest,
    /// Record every Proxmox API request and answer (for fidelity checks).
    pub record: bool,
}

impl LabOptions {
    /// Loopback on a free port, no state files, the lab's node software in the VMs.
    pub fn ephemeral() -> Self {
        LabOptions {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            state_dir: None,
            guest: LabGuest::Nodes,
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
    /// The Talos APIs the lab's Talos nodes serve: `<node address>:50000` → where.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub talos_apis: BTreeMap<String, SocketAddr>,
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
    /// The API endpoint it stands for (`host:port`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Where the lab serves that endpoint (`127.0.0.1:PORT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<SocketAddr>,
}

/// Where the lab serves each cluster's API endpoint, and each Talos node's Talos API:
/// `host:port` → a loopback address of its own, as curl's `--resolve` maps a name. A lab's clusters cannot listen on their declared
/// endpoints (`k8s-prod.lab.example:6443` resolves nowhere), so capstan, told by the operator
/// that it runs against a lab, dials the address given here and still verifies the server's
/// certificate for the endpoint's host name. Clusters `kubeadm init` creates later are found
/// too (a live view of an in-process lab). A Talos node's API is found by the node's address
/// (as its guest agent reports it) and port 50000.
#[derive(Clone)]
pub struct ApiAddresses(Addresses);

#[derive(Clone)]
enum Addresses {
    Live(Arc<KubeLab>, TalosApis),
    Listed(LabFile),
    StateFile(PathBuf),
}

impl ApiAddresses {
    /// The addresses `lab.json` lists (a lab running in another process, as it was when the
    /// file was read).
    pub fn from_lab_file(file: &LabFile) -> Self {
        ApiAddresses(Addresses::Listed(file.clone()))
    }

    /// The addresses the `lab.json` in `state_dir` lists, read again at every lookup (a lab
    /// running in another process, whose clusters appear as capstan builds them).
    pub fn from_state_dir(state_dir: &Path) -> Self {
        ApiAddresses(Addresses::StateFile(state_dir.join(LAB_FILE)))
    }

    /// Where the lab serves the API endpoint `host:port`, if it does.
    pub fn resolve(&self, host: &str, port: u16) -> Option<SocketAddr> {
        match &self.0 {
            Addresses::Live(kube, talos) => kube
                .api_address(host, port)
                .or_else(|| talos.resolve(host, port)),
            Addresses::Listed(file) => listed(file, host, port),
            Addresses::StateFile(path) => {
                let read = std::fs::read_to_string(path)
                    .ok()
                    .and_then(|text| serde_json::from_str::<LabFile>(&text).ok());
                if read.is_none() {
                    tracing::debug!(path = %path.display(), "no lab.json to find API addresses in");
                }
                listed(&read?, host, port)
            }
        }
    }
}

/// The address `file` lists for the endpoint `host:port`.
fn listed(file: &LabFile, host: &str, port: u16) -> Option<SocketAddr> {
    let endpoint = format!("{host}:{port}");
    let cluster = file.clusters.values().find_map(|cluster| {
        cluster
            .endpoint
            .as_deref()
            .filter(|listed| listed.eq_ignore_ascii_case(&endpoint))
            .and(cluster.address)
    });
    cluster.or_else(|| {
        let node: IpAddr = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .ok()?;
        file.talos_apis
            .get(&SocketAddr::new(node, port).to_string())
            .copied()
    })
}

impl std::fmt::Debug for ApiAddresses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Addresses::Live(kube, talos) => f
                .debug_tuple("Live")
                .field(&kube.names())
                .field(&talos.listed())
                .finish(),
            Addresses::Listed(file) => f.debug_tuple("Listed").field(&file.clusters).finish(),
            Addresses::StateFile(path) => f.debug_tuple("StateFile").field(path).finish(),
        }
    }
}

/// A running lab. Dropping it stops it.
pub struct Lab {
    proxmox: SimProxmox,
    kube: Arc<KubeLab>,
    nodes: Option<NodeSoftware<LabBackend>>,
    talos_apis: TalosApis,
    clock: LabClock,
    state: Arc<StateFiles>,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("proxmox", &self.proxmox)
            .field("clusters", &self.kube.names())
            .field("nodes", &self.nodes.is_some())
            .field("state", &self.state.lab_json_path())
            .finish_non_exhaustive()
    }
}

impl Lab {
    /// Starts the world `config` describes: the simulated clusters, then the simulated Proxmox
    /// with the chosen software in its VMs; with a state directory, writes the kubeconfigs
    /// and `lab.json`.
    ///
    /// # Errors
    /// When the config is inconsistent, a server cannot start, or a state file cannot be
    /// written.
    pub async fn start(config: LabConfig, options: LabOptions) -> Result<Lab, LabError> {
        config.check().map_err(LabError::Config)?;
        let clock = LabClock::new();
        let kube = Arc::new(
            KubeLab::start(clock.clone(), &config.clusters)
                .await
                .map_err(LabError::Clusters)?,
        );
        let talos_apis = TalosApis::default();
        let state = Arc::new(StateFiles::new(
            options.state_dir.as_deref(),
            Arc::clone(&kube),
            talos_apis.clone(),
        ));
        let (guest, nodes): (Arc<dyn GuestSoftware>, _) = match options.guest {
            LabGuest::Nodes => {
                let rewrite = rewrite_state(Arc::clone(&state));
                let on_credentials = Arc::clone(&rewrite);
                let backend = LabBackend::new(Arc::clone(&kube))
                    .with_talos_apis(talos_apis.clone())
                    .on_credentials_change(Arc::new(move |cluster: &SimCluster| {
                        on_credentials(Some(cluster));
                    }))
                    .on_talos_apis_change(Arc::new(move || rewrite(None)));
                let nodes = NodeSoftware::new(
                    backend,
                    clock.clone(),
                    NodeTimings::from(&config.proxmox.timings),
                );
                (Arc::new(nodes.clone()), Some(nodes))
            }
            LabGuest::Custom(guest) => (guest, None),
        };
        let sim_options = SimOptions {
            listen: options.listen,
            token_id: LAB_TOKEN_ID.to_owned(),
            token_secret: generate_token(),
            record: options.record,
        };
        let proxmox = SimProxmox::start(&config.proxmox, sim_options, clock.clone(), guest)
            .await
            .map_err(LabError::Proxmox)?;
        state.set_proxmox(LabProxmox {
            url: proxmox.url(),
            fingerprint: proxmox.fingerprint(),
            token_id: proxmox.token_id().to_owned(),
            token: proxmox.token_secret().to_owned(),
        });
        state.sync()?;
        Ok(Lab {
            proxmox,
            kube,
            nodes,
            talos_apis,
            clock,
            state,
        })
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

    /// The lab's clock, shared by every part (advance it to age certificates).
    pub fn clock(&self) -> &LabClock {
        &self.clock
    }

    /// Fault injection into the simulated Proxmox.
    pub fn faults(&self) -> FaultHandle {
        self.proxmox.faults()
    }

    /// Freezes the machine `node` of `cluster` as a hung guest freezes: its VM keeps running,
    /// but its guest agent never answers (a clean shutdown times out) and its kubelet stops
    /// posting status, so its Node turns NotReady. Node and VM share the name, as capstan
    /// names them.
    ///
    /// # Errors
    /// When the cluster has no such Node (then nothing is frozen).
    pub fn freeze_machine(&self, cluster: &str, node: &str) -> Result<(), SimKubeError> {
        let sim = self
            .kube
            .cluster(cluster)
            .ok_or_else(|| SimKubeError::UnknownNode {
                cluster: cluster.to_owned(),
                node: node.to_owned(),
            })?;
        // The Node first: a Node that is unknown leaves no hung VM behind.
        sim.set_node_ready(node, false)?;
        self.faults().hang_vm(node);
        Ok(())
    }

    /// Thaws a machine [`Lab::freeze_machine`] froze: its guest agent answers again and its
    /// kubelet posts Ready.
    ///
    /// # Errors
    /// When the cluster has no such Node.
    pub fn thaw_machine(&self, cluster: &str, node: &str) -> Result<(), SimKubeError> {
        let sim = self
            .kube
            .cluster(cluster)
            .ok_or_else(|| SimKubeError::UnknownNode {
                cluster: cluster.to_owned(),
                node: node.to_owned(),
            })?;
        self.faults().unhang_vm(node);
        sim.set_node_ready(node, true)
    }

    /// Inspection of the simulated Proxmox (counters, VMs, recorded requests).
    pub fn proxmox(&self) -> SimHandle {
        self.proxmox.handle()
    }

    /// The simulated Proxmox server itself.
    pub fn proxmox_server(&self) -> &SimProxmox {
        &self.proxmox
    }

    /// The simulated Kubernetes clusters: `management`, the declared ones and those
    /// `kubeadm init` created.
    pub fn kube(&self) -> &Arc<KubeLab> {
        &self.kube
    }

    /// The management cluster's admin kubeconfig (where Flux runs).
    pub fn management_kubeconfig(&self) -> String {
        self.kube
            .management()
            .expect("a lab always has its management cluster")
            .admin_kubeconfig()
    }

    /// Where the lab serves each cluster's API endpoint, including clusters created later.
    pub fn api_addresses(&self) -> ApiAddresses {
        ApiAddresses(Addresses::Live(
            Arc::clone(&self.kube),
            self.talos_apis.clone(),
        ))
    }

    /// The simulated etcd of a Talos cluster (a handle a test may sample as often as it
    /// likes), once a machine of it runs in the lab's own node software.
    pub fn talos_etcd(&self, cluster: TalosClusterRef<'_>) -> Option<EtcdCluster> {
        self.nodes.as_ref()?.talos_etcd(cluster)
    }

    /// Where the Talos API of Talos VM `vmid` is served, while it runs a machine.
    pub fn talos_api_address(&self, vmid: VmId) -> Option<SocketAddr> {
        self.nodes.as_ref()?.talos_api_address(vmid)
    }

    /// A cluster's admin kubeconfig file in the state directory (what `lab.json` lists), when
    /// the lab has a state directory and the cluster exists.
    pub fn kubeconfig_path(&self, cluster: &str) -> Option<PathBuf> {
        self.kube.cluster(cluster)?;
        self.state.kubeconfig_path(cluster)
    }

    /// The node software inside the VMs, when the lab runs its own ([`LabGuest::Nodes`]).
    pub fn nodes(&self) -> Option<&NodeSoftware<LabBackend>> {
        self.nodes.as_ref()
    }

    /// What `lab.json` says: the Proxmox access and, with a state directory, every cluster's
    /// kubeconfig file.
    pub fn lab_file(&self) -> LabFile {
        self.state
            .lab_file()
            .expect("the Proxmox half is set before the lab is handed out")
    }

    /// Where `lab.json` was written, if it was.
    pub fn state_file(&self) -> Option<&Path> {
        self.state.lab_json_path()
    }

    /// Rewrites the kubeconfigs and `lab.json` from the clusters' current credentials (the
    /// lab does so by itself after `kubeadm init` and certificate renewals inside VMs; call
    /// this after changing a cluster directly through [`Lab::kube`]).
    ///
    /// # Errors
    /// When a file cannot be written.
    pub fn write_state(&self) -> Result<(), LabError> {
        self.state.sync()
    }

    /// Stops serving: the simulated Proxmox, every cluster's API server and every Talos API.
    pub fn stop(&self) {
        self.proxmox.stop();
        if let Some(nodes) = &self.nodes {
            nodes.stop_talos_apis();
        }
        for name in self.kube.names() {
            if let Some(cluster) = self.kube.cluster(&name) {
                cluster.stop();
            }
        }
    }
}

/// Rewrites the state files after a change (of the cluster given, if one).
type StateHook = Arc<dyn Fn(Option<&SimCluster>) + Send + Sync>;

/// The backend's hooks: after a cluster's credentials change (the cluster given), or a Talos
/// API starts or stops (none given), rewrite the state files.
fn rewrite_state(state: Arc<StateFiles>) -> StateHook {
    Arc::new(move |cluster| {
        if let Err(err) = state.sync() {
            tracing::warn!(
                cluster = cluster.map(SimCluster::name),
                error = %capstan_core::errors::error_chain(&err),
                "lab state files not rewritten"
            );
        }
    })
}

/// Writes `dir/lab.json` (creating `dir`), readable by its owner only, replacing any earlier
/// one atomically. Returns its path.
///
/// # Errors
/// When the directory or file cannot be written.
pub fn write_lab_file(dir: &Path, file: &LabFile) -> Result<PathBuf, LabError> {
    std::fs::create_dir_all(dir).map_err(|source| LabError::WriteState {
        path: dir.to_owned(),
        source,
    })?;
    let path = dir.join(LAB_FILE);
    state::write_private(&path, &state::lab_json(file))?;
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
    async fn a_frozen_machine_has_a_not_ready_node_until_it_is_thawed() {
        let config = LabConfig::parse(
            "clusters:\n  edge:\n    nodes: [{name: edge-cp, role: control-plane}, {name: edge-w1}]\n",
        )
        .expect("config");
        let lab = Lab::start(config, LabOptions::ephemeral())
            .await
            .expect("lab");
        let edge = lab.kube().cluster("edge").expect("edge");
        let ready = |node: &str| {
            edge.object("nodes", None, node).is_some_and(|n| {
                n["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
        };
        assert!(ready("edge-w1"));
        lab.freeze_machine("edge", "edge-w1").expect("frozen");
        assert!(!ready("edge-w1") && ready("edge-cp"));
        assert!(matches!(
            lab.freeze_machine("edge", "edge-w9"),
            Err(SimKubeError::UnknownNode { .. })
        ));
        assert!(lab.freeze_machine("gone", "edge-w1").is_err());
        lab.thaw_machine("edge", "edge-w1").expect("thawed");
        assert!(ready("edge-w1"));
        lab.stop();
    }

    #[tokio::test]
    async fn a_lab_writes_lab_json_with_management_and_the_declared_clusters() {
        let dir = tempfile::tempdir().expect("dir");
        let options = LabOptions {
            state_dir: Some(dir.path().join("state")),
            ..LabOptions::ephemeral()
        };
        let config = LabConfig::parse(
            "clusters:\n  edge:\n    version: 1.35.4\n    nodes: [{name: edge-cp, role: control-plane}]\n",
        )
        .expect("config");
        let lab = Lab::start(config, options).await.expect("lab");
        let text =
            std::fs::read_to_string(dir.path().join("state").join(LAB_FILE)).expect("lab.json");
        let value: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(value["proxmox"]["url"], lab.proxmox_url());
        assert_eq!(value["proxmox"]["tokenId"], LAB_TOKEN_ID);
        assert_eq!(value["proxmox"]["token"], lab.token());
        assert_eq!(value["proxmox"]["fingerprint"], lab.fingerprint());
        let names: Vec<&String> = value["clusters"]
            .as_object()
            .expect("clusters")
            .keys()
            .collect();
        assert_eq!(names, ["edge", "management"]);
        let edge = lab.kubeconfig_path("edge").expect("edge kubeconfig");
        assert_eq!(
            value["clusters"]["edge"]["kubeconfig"],
            edge.display().to_string()
        );
        let edge_cluster = lab.kube().cluster("edge").expect("edge");
        assert_eq!(edge_cluster.version(), "v1.35.4");
        assert_eq!(
            std::fs::read_to_string(edge).expect("kubeconfig"),
            edge_cluster.admin_kubeconfig()
        );
        assert_eq!(
            lab.lab_file(),
            serde_json::from_str(&text).expect("LabFile")
        );
        assert!(
            lab.management_kubeconfig()
                .contains("kubernetes-admin@management")
        );
        assert!(lab.nodes().is_some());
        lab.stop();
    }

    #[test]
    fn lab_json_lists_talos_apis_by_node_address_only_when_there_are_some() {
        let text = r#"{"proxmox": {"url": "https://127.0.0.1:8006", "fingerprint": "AB",
                       "tokenId": "capstan@pve!lab", "token": "t"},
                       "talosApis": {"10.20.0.51:50000": "127.0.0.1:41301"}}"#;
        let file: LabFile = serde_json::from_str(text).expect("lab.json");
        let addresses = ApiAddresses::from_lab_file(&file);
        assert_eq!(
            addresses.resolve("10.20.0.51", 50000),
            Some("127.0.0.1:41301".parse().expect("address"))
        );
        assert_eq!(addresses.resolve("10.20.0.51", 6443), None);
        assert_eq!(addresses.resolve("talos-cp-1", 50000), None);
        let without = LabFile {
            talos_apis: BTreeMap::new(),
            ..file
        };
        let written = String::from_utf8(state::lab_json(&without)).expect("UTF-8");
        assert!(!written.contains("talosApis"), "{written}");
    }

    #[tokio::test]
    async fn declared_clusters_are_checked_before_anything_starts() {
        let config =
            LabConfig::parse("clusters:\n  Bad_Name: {}\n").expect("parses, but is invalid");
        let err = Lab::start(config, LabOptions::ephemeral())
            .await
            .expect_err("refused");
        assert!(matches!(err, LabError::Config(_)), "{err:?}");
        let typo = LabConfig::parse("clusters:\n  edge: {versoin: 1.35.4}\n")
            .expect_err("typo")
            .to_string();
        assert!(typo.contains("versoin"), "{typo}");
    }

    #[tokio::test]
    async fn a_custom_guest_replaces_the_node_software() {
        let options = LabOptions {
            guest: LabGuest::Custom(Arc::new(crate::proxmox::DefaultShell::new())),
            ..LabOptions::ephemeral()
        };
        let lab = Lab::start(LabConfig::default(), options)
            .await
            .expect("lab");
        assert!(lab.nodes().is_none());
        assert!(lab.state_file().is_none());
        assert!(lab.lab_file().clusters.is_empty());
        assert_eq!(lab.kube().names(), ["management"]);
        lab.stop();
    }
}
