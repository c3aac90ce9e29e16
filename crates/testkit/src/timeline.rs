//! Timelines of one cluster of a [`crate::World`] and the views they are made of.
//!
//! Rollout rules ("one at a time", "new before old") are asserted on a [`Timeline`]: a
//! [`Recorder`] samples a cluster's Nodes, VMs, served version, Flux Secret and daemon status
//! every 10 ms and keeps each change. The daemon observes afresh between two steps of a
//! cluster, so a state a rollout passes through usually lasts longer than the sampling period;
//! the safety properties are asserted on every sample taken (a state shorter than 10 ms may
//! go unseen: sampling can miss a violation, never invent one).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A Node as the simulated API server holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// Node name (= VM name).
    pub name: String,
    /// `Ready` is `True`.
    pub ready: bool,
    /// `spec.unschedulable`.
    pub cordoned: bool,
    /// `status.nodeInfo.kubeletVersion`.
    pub kubelet: String,
    /// Labelled as a control plane.
    pub control_plane: bool,
}

impl NodeView {
    /// Ready and schedulable: it carries workloads.
    pub fn is_serving(&self) -> bool {
        self.ready && !self.cordoned
    }
}

/// A VM of a cluster, with its ownership tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmView {
    /// VM name.
    pub name: String,
    /// VMID.
    pub vmid: u32,
    /// Running.
    pub running: bool,
    /// Tags.
    pub tags: Vec<String>,
}

impl VmView {
    /// The `spec-<hash>` tag's hash.
    pub fn spec_hash(&self) -> Option<&str> {
        self.tags.iter().find_map(|t| t.strip_prefix("spec-"))
    }

    /// Tagged as on its way out.
    pub fn is_retiring(&self) -> bool {
        self.tags
            .iter()
            .any(|t| t == capstan::observed::RETIRING_TAG)
    }

    /// Its pool, from its name (`capstan-<cluster>-<pool>-<suffix>`): a fresh clone carries
    /// no tags until its config call.
    pub fn pool(&self) -> &str {
        self.name.rsplit('-').nth(1).unwrap_or_default()
    }

    /// A worker (any pool but the control plane's `cp`).
    pub fn is_worker(&self) -> bool {
        !self.is_control_plane()
    }

    /// A control plane (pool `cp`).
    pub fn is_control_plane(&self) -> bool {
        self.pool() == "cp"
    }
}

/// One moment of a recorded timeline.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Since the recording started.
    pub at: Duration,
    /// The daemon's status of the cluster.
    pub status: Option<capstan::status::ClusterStatus>,
    /// Its Nodes.
    pub nodes: Vec<NodeView>,
    /// Its VMs.
    pub vms: Vec<VmView>,
    /// `/version`.
    pub version: Option<String>,
    /// `kubeadm-config`'s `kubernetesVersion`.
    pub kubeadm_config_version: Option<String>,
    /// Fingerprint of the kubeconfig in Flux's Secret.
    pub flux: Option<String>,
}

impl Sample {
    fn same_world(&self, other: &Sample) -> bool {
        self.status == other.status
            && self.nodes == other.nodes
            && self.vms == other.vms
            && self.version == other.version
            && self.kubeadm_config_version == other.kubeadm_config_version
            && self.flux == other.flux
    }

    /// A Node by name.
    pub fn node(&self, name: &str) -> Option<&NodeView> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Worker Nodes that are Ready and schedulable.
    pub fn serving_workers(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| !n.control_plane && n.is_serving())
            .count()
    }

    /// A one-line summary, for failure messages.
    pub fn summary(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                format!(
                    "{}{}{}",
                    n.name,
                    if n.ready { "" } else { "(NotReady)" },
                    if n.cordoned { "(cordoned)" } else { "" }
                )
            })
            .collect();
        let vms: Vec<String> = self
            .vms
            .iter()
            .map(|v| {
                format!(
                    "{}{}{}",
                    v.name,
                    if v.running { "" } else { "(stopped)" },
                    if v.is_retiring() { "(retiring)" } else { "" }
                )
            })
            .collect();
        let next = self
            .status
            .as_ref()
            .map(|s| format!("{} next {:?}", s.phase, s.next_steps))
            .unwrap_or_default();
        format!(
            "{:>6}ms {} nodes [{}] vms [{}] {next}",
            self.at.as_millis(),
            self.version.as_deref().unwrap_or("-"),
            nodes.join(" "),
            vms.join(" ")
        )
    }
}

/// A timeline being recorded; [`Recorder::finish`] stops it and hands the samples over.
pub struct Recorder {
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Recorder {
    /// Samples `cluster` of `kube` and `proxmox` (and its status on `board`) until finished.
    pub fn start(
        kube: Arc<capstan_lab::kube::KubeLab>,
        proxmox: capstan_lab::proxmox::SimHandle,
        board: Option<Arc<capstan::daemon::StatusBoard>>,
        cluster: &str,
    ) -> Recorder {
        let cluster = cluster.to_owned();
        let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let samples = Arc::clone(&samples);
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let started = tokio::time::Instant::now();
                loop {
                    let sample = Sample {
                        at: started.elapsed(),
                        status: board
                            .as_ref()
                            .and_then(|b| b.status().clusters.get(&cluster).cloned()),
                        nodes: nodes_of(&kube, &cluster),
                        vms: vm_views(&proxmox, &cluster),
                        version: kube.cluster(&cluster).map(|c| c.version()),
                        kubeadm_config_version: kubeadm_config_version(&kube, &cluster),
                        flux: flux_fingerprint(&kube, &cluster),
                    };
                    {
                        let mut samples = samples.lock().expect("samples");
                        if samples.last().is_none_or(|last| !last.same_world(&sample)) {
                            samples.push(sample);
                        }
                    }
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        };
        Recorder {
            samples,
            stop,
            task: Some(task),
        }
    }

    /// Stops recording (after one last sample) and returns the timeline.
    pub async fn finish(mut self) -> Timeline {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(task) = self.task.take() {
            task.await.expect("recorder runs");
        }
        let samples = std::mem::take(&mut *self.samples.lock().expect("samples"));
        Timeline(samples)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Recorded samples, each differing from the one before.
#[derive(Debug, Clone)]
pub struct Timeline(pub Vec<Sample>);

impl Timeline {
    /// The whole timeline, one line per sample, for failure messages.
    pub fn dump(&self) -> String {
        self.0
            .iter()
            .map(Sample::summary)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Index of the first sample where `what` holds.
    pub fn first(&self, what: impl Fn(&Sample) -> bool) -> Option<usize> {
        self.0.iter().position(what)
    }

    /// The last sample.
    pub fn last(&self) -> &Sample {
        self.0.last().expect("a timeline has at least one sample")
    }
}

pub(crate) fn nodes_of(kube: &capstan_lab::kube::KubeLab, cluster: &str) -> Vec<NodeView> {
    let Some(sim) = kube.cluster(cluster) else {
        return Vec::new();
    };
    let mut nodes: Vec<NodeView> = sim
        .objects("nodes", None)
        .iter()
        .map(|node| NodeView {
            name: node["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            ready: node["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True"),
            cordoned: node["spec"]["unschedulable"] == true,
            kubelet: node["status"]["nodeInfo"]["kubeletVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            control_plane: node["metadata"]["labels"]
                .get("node-role.kubernetes.io/control-plane")
                .is_some(),
        })
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    nodes
}

pub(crate) fn vm_views(proxmox: &capstan_lab::proxmox::SimHandle, cluster: &str) -> Vec<VmView> {
    let prefix = format!("capstan-{cluster}-");
    let mut vms: Vec<VmView> = proxmox
        .vms()
        .into_iter()
        .filter(|vm| !vm.template && vm.name.starts_with(&prefix))
        .map(|vm| VmView {
            tags: vm
                .config
                .get("tags")
                .map(|t| {
                    t.split([';', ',', ' '])
                        .filter(|t| !t.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            name: vm.name,
            vmid: vm.vmid,
            running: vm.running,
        })
        .collect();
    vms.sort_by(|a, b| a.name.cmp(&b.name));
    vms
}

pub(crate) fn kubeadm_config_version(
    kube: &capstan_lab::kube::KubeLab,
    cluster: &str,
) -> Option<String> {
    let config =
        kube.cluster(cluster)?
            .object("configmaps", Some("kube-system"), "kubeadm-config")?;
    let text = config["data"]["ClusterConfiguration"].as_str()?;
    // YAML from `kubeadm init`; an upgrade may store it as JSON, which is YAML too.
    let document: serde_json::Value = serde_saphyr::from_str(text).ok()?;
    document["kubernetesVersion"].as_str().map(str::to_owned)
}

pub(crate) fn flux_fingerprint(kube: &capstan_lab::kube::KubeLab, cluster: &str) -> Option<String> {
    let secret = kube.management()?.object(
        "secrets",
        Some("flux-system"),
        &format!("{cluster}-kubeconfig"),
    )?;
    let value = secret["data"]["value"].as_str()?;
    // Only to tell one Secret from the next: the daemon's fingerprints are keyed.
    Some(capstan::fingerprint::content_sha256(value.as_bytes()))
}
