//! The observed state: what really exists, as plain data. `observe` builds it from the
//! providers (Proxmox, each cluster's API, the Flux Secret); the planner reads it; `capstan plan
//! --observed FILE` reads it from a JSON snapshot whose schema is `schemas/observed.schema.json`
//! (see `examples-repo/observed.example.json`).
//!
//! Invariants:
//! - Pure data, keyed by `BTreeMap`, so equal worlds serialise equally and plans are
//!   deterministic.
//! - Every fact the planner needs to continue after a crash lives in the world itself and is
//!   modelled here: the executor tags a VM [`RETIRING_TAG`] before it deletes its Node, and
//!   annotates a Node [`DRAIN_STARTED_ANNOTATION`] when it starts draining it. No journal.
//! - Secrets never appear: the admin kubeconfig and the one Flux holds are known by their
//!   [`crate::fingerprint::FingerprintKey::fingerprint`] only.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use jiff::Timestamp;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

use crate::model::{NodeName, Ownership, VmId};
use crate::spec::{Distribution, Endpoint, KubeVersion, RecordedNetwork};
use crate::workloads::{DisruptionBudget, ObservedPod};

mod machine_spec;
pub use machine_spec::MachineSpec;

/// Proxmox tag the executor puts on a VM just before it deletes the VM's Node: from then on the
/// VM is on its way out (reset, then destroy), never mistaken for a machine waiting to join.
pub const RETIRING_TAG: &str = "capstan-retiring";

/// Proxmox tag the executor puts on a VM once its prepare script (CRI-O and the packages)
/// succeeded: the `prepare-node` step is not run again, across restarts.
pub const PREPARED_TAG: &str = "capstan-prepared";

/// Node annotation (an RFC 3339 time) the executor sets when it starts draining a node; the
/// drain's deadline runs from it, across restarts.
pub const DRAIN_STARTED_ANNOTATION: &str = "capstan.dev/drain-started";

/// ConfigMap (namespace, name) the executor writes as the last act of `init-control-plane`,
/// once kube-vip and the CNI are in place: until it exists, a cluster whose `kubeadm init`
/// ran is not bootstrapped (an init interrupted after kubeadm is finished, not taken as done).
pub const BOOTSTRAP_MARKER: (&str, &str) = ("kube-system", "capstan-bootstrap");

/// Taint that tells Kubernetes a node is gone for good, so the attach-detach controller
/// releases its volumes (set by `fence-machine`).
pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// Everything capstan observed, fleet-wide.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Observed {
    /// Every cluster that has something in the world (an owned VM, an initialised control
    /// plane, a delivered kubeconfig), by `metadata.name`. A cluster with nothing is absent.
    /// A cluster here whose file is gone is a removed cluster.
    #[serde(default)]
    pub clusters: BTreeMap<String, ObservedCluster>,
    /// The Proxmox nodes by name, with their load. `None` when they were not observed (e.g.
    /// `--observed none`): placement then ignores memory and cannot refuse for capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxmox_nodes: Option<BTreeMap<String, ProxmoxNode>>,
    /// How long each action's steps took, as the daemon measured them (its recent successful
    /// steps, by action name such as `create-machine`), for previews' duration estimates.
    /// Absent in older snapshots and before the daemon ran any step.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub step_durations: BTreeMap<String, StepDuration>,
    /// The Proxmox templates by name, each copy with its node and whether its disks are on
    /// shared storage. `None` when they were not observed: placement then does not check
    /// where a template can be cloned to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxmox_templates: Option<BTreeMap<String, Vec<ObservedTemplate>>>,
    /// The Proxmox storages by id, with their `shared` flag (a full clone to another node
    /// must write to shared storage). `None` when not observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxmox_storages: Option<BTreeMap<String, ObservedStorage>>,
    /// The resource pools Proxmox has. `None` when not observed (no cluster names one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxmox_pools: Option<Vec<String>>,
    /// The PCI resource mappings, each with the Proxmox node of each of its devices. `None`
    /// when not observed (no cluster declares a PCI device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_mappings: Option<BTreeMap<String, Vec<String>>>,
}

/// The measured wall time of one action's steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StepDuration {
    /// The median of the measured steps, in milliseconds.
    pub median_ms: u64,
    /// How many steps the median is taken over (the daemon keeps the most recent ones only).
    pub samples: u32,
    /// The 90th percentile of the same steps, in milliseconds: what a maintenance window
    /// must have left for such a step to start in it. Absent in older snapshots: not
    /// measured (windows then hold no step for its duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90_ms: Option<u64>,
}

impl StepDuration {
    /// The high percentile steps of this action are planned with, when measured.
    pub fn high(&self) -> Option<std::time::Duration> {
        self.p90_ms.map(std::time::Duration::from_millis)
    }
}

impl Observed {
    /// "Nothing exists yet": no VM, no cluster, Proxmox nodes not observed.
    pub fn nothing() -> Self {
        Observed::default()
    }
}

/// One Proxmox VE node, for placement (rule 15).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxmoxNode {
    /// Whether the node is online in the Proxmox cluster.
    pub online: bool,
    /// Physical memory in MiB.
    #[serde(rename = "memoryTotalMiB")]
    pub memory_total_mib: u64,
    /// Memory in use in MiB.
    #[serde(rename = "memoryUsedMiB")]
    pub memory_used_mib: u64,
    /// VMs on the node (any owner).
    pub vm_count: u32,
    /// Its bridges (`vmbr0`, ...). `None` when not observed (no cluster declares cards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridges: Option<Vec<String>>,
}

impl ProxmoxNode {
    /// Memory not in use, in MiB.
    pub fn memory_free_mib(&self) -> u64 {
        self.memory_total_mib.saturating_sub(self.memory_used_mib)
    }
}

/// One copy of a template (a VM with `template: 1`) on one Proxmox node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedTemplate {
    /// The Proxmox node it is on.
    pub proxmox_node: String,
    /// Its VMID.
    pub vm_id: VmId,
    /// Whether every volume of it (disks and cloud-init drive) is on shared storage: only
    /// then can Proxmox clone it to another node ("can't clone VM to node ... (VM uses local
    /// storage)" otherwise).
    pub shared_storage: bool,
    /// The distributions the template says it is built for, in its tags (`k3s`, `kubeadm`)
    /// or a line of its description (`distribution: k3s`); empty when it says nothing, and
    /// then it is not judged before a clone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distributions: Vec<Distribution>,
    /// Whether its `hotplug` option includes memory (its clones inherit it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memory_hotplug: bool,
    /// Whether its config has no cloud-init drive (its clones inherit that): Proxmox then
    /// writes no `ipconfig<n>` anywhere a guest reads it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub without_cloud_init_drive: bool,
}

impl ObservedTemplate {
    /// The distributions Proxmox `tags` and a `description` declare a template is built for:
    /// a tag named after a distribution, or a description line `distribution: NAME[, NAME]`
    /// (case-insensitive), in [`Distribution`]'s order, each once.
    pub fn declared_distributions<'a>(
        tags: impl IntoIterator<Item = &'a str>,
        description: &'a str,
    ) -> Vec<Distribution> {
        let in_description = description.lines().filter_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case("distribution")
                .then_some(value.split(','))
        });
        let mut declared: Vec<Distribution> = tags
            .into_iter()
            .chain(in_description.flatten())
            .filter_map(|word| Distribution::named(word.trim()))
            .collect();
        declared.sort_unstable_by_key(|d| *d as u8);
        declared.dedup();
        declared
    }
}

/// A Proxmox storage, as the storage configuration declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedStorage {
    /// The `shared` flag: the same content is reachable from every node.
    pub shared: bool,
    /// What each node sees of it: whether it holds disk images and its space. Empty in older
    /// snapshots: then data disks are not counted against it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, StorageOnNode>,
}

/// A storage as one node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorageOnNode {
    /// Whether it holds disk images (content `images`): only then can a disk be made on it.
    pub images: bool,
    /// Its size, GiB.
    #[serde(rename = "totalGiB")]
    pub total_gib: u64,
    /// What it uses, GiB: on thin storage what is written, not what is allocated.
    #[serde(rename = "usedGiB")]
    pub used_gib: u64,
}

impl StorageOnNode {
    /// What is left, GiB.
    pub fn free_gib(&self) -> u64 {
        self.total_gib.saturating_sub(self.used_gib)
    }
}

/// What exists of one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedCluster {
    /// VMs owned by the cluster (by their ownership tags), by VM name.
    #[serde(default)]
    pub machines: BTreeMap<NodeName, ObservedMachine>,
    /// Kubernetes Nodes by name (empty when the API does not answer or the cluster was never
    /// initialised).
    #[serde(default)]
    pub nodes: BTreeMap<NodeName, ObservedNode>,
    /// The control plane, once `init-control-plane` has succeeded; `None` means never
    /// initialised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ObservedControlPlane>,
    /// The Secret Flux reads this cluster's kubeconfig from, when it exists (found by its
    /// `capstan.dev/cluster` annotation among the Secrets capstan manages, so it is known even
    /// after the cluster file is removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flux: Option<FluxSecret>,
    /// The pods on each Node, for drain simulation (previews). Absent in older snapshots:
    /// then no drain is simulated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pods: BTreeMap<NodeName, Vec<ObservedPod>>,
    /// The cluster's PodDisruptionBudgets, for drain simulation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disruption_budgets: Vec<DisruptionBudget>,
    /// The Secrets capstan keeps for this cluster on the management clusters (its Flux
    /// kubeconfig, CA pin, secrets bundle, talosconfig, K3s token, suspension, identity),
    /// found by their owner annotation: what deleting the cluster must remove, so a deletion
    /// interrupted after its last VM is taken up again. Names only, never content.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<ObservedRecord>,
}

impl ObservedCluster {
    /// Whether nothing of the cluster exists.
    pub fn is_empty(&self) -> bool {
        self.machines.is_empty()
            && self.nodes.is_empty()
            && self.control_plane.is_none()
            && self.flux.is_none()
            && self.records.is_empty()
    }
}

/// A Secret capstan keeps for a cluster on a management cluster.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedRecord {
    /// The management cluster (a name under `managementClusters` in `capstan.yaml`).
    pub management: String,
    /// Namespace of the Secret.
    pub namespace: String,
    /// Name of the Secret.
    pub name: String,
    /// What it is (its `capstan.dev/record-kind`: `flux-kubeconfig`, `ca-pin`,
    /// `talos-bundle`, ...).
    pub kind: String,
}

impl fmt::Display for ObservedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}/{} on {}",
            self.kind, self.namespace, self.name, self.management
        )
    }
}

/// An owned VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedMachine {
    /// Proxmox VM id.
    pub vm_id: VmId,
    /// The Proxmox node the VM lives on.
    pub proxmox_node: SmolStr,
    /// Cluster, role, pool and spec hash, from the VM's tags.
    pub ownership: Ownership,
    /// Every Proxmox tag of the VM, as found (including [`RETIRING_TAG`]).
    #[serde(default)]
    pub tags: Vec<SmolStr>,
    /// Power state.
    pub power: PowerState,
    /// When the VM was created.
    #[schemars(schema_with = "timestamp_schema")]
    pub created: Timestamp,
    /// Whether the QEMU guest agent answers.
    #[serde(default)]
    pub guest_agent: bool,
    /// The machine spec the VM was built from (capstan writes it into the VM's description),
    /// to explain replacements field by field. `None` when unreadable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub built_from: Option<MachineSpec>,
    /// The VM's Proxmox configuration now, to detect drift (rule 14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<VmConfig>,
    /// A Proxmox task running on the VM (a clone, a start...), which its next step waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<ProxmoxTask>,
    /// The resource pool the VM is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<SmolStr>,
    /// The operator's tags capstan recorded as set on it (its description's record), when
    /// read (the VM carries tags the file does not declare).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_tags: Option<Vec<SmolStr>>,
}

impl ObservedMachine {
    /// Whether the executor marked the VM as on its way out ([`RETIRING_TAG`]).
    pub fn is_retiring(&self) -> bool {
        self.tags.iter().any(|tag| tag == RETIRING_TAG)
    }

    /// Whether its prepare script ran ([`PREPARED_TAG`]).
    pub fn is_prepared(&self) -> bool {
        self.tags.iter().any(|tag| tag == PREPARED_TAG)
    }

    /// Whether the VM runs.
    pub fn is_running(&self) -> bool {
        self.power == PowerState::Running
    }
}

/// Power state of a VM, as Proxmox reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PowerState {
    /// `running`.
    Running,
    /// `stopped`.
    Stopped,
    /// `paused` (also suspended).
    Paused,
}

/// The part of a VM's Proxmox configuration that capstan sets and watches for drift.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VmConfig {
    /// vCPUs (sockets × cores).
    pub cores: u32,
    /// Memory in MiB.
    #[serde(rename = "memoryMiB")]
    pub memory_mib: u32,
    /// Boot disk size in GiB.
    #[serde(rename = "diskGiB")]
    pub disk_gib: u32,
    /// Its sockets, data disks, cards and PCI devices as its config holds them (read for the
    /// machines of pools that declare any; mounts and `primary` are not in a config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<crate::spec::hardware::MachineHardware>,
}

/// A Proxmox task in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxmoxTask {
    /// The task's UPID, as the Proxmox GUI shows it.
    pub upid: String,
    /// Task type, e.g. `qmclone`, `qmstart`.
    pub kind: String,
    /// When it started.
    #[schemars(schema_with = "timestamp_schema")]
    pub started: Timestamp,
}

/// A Kubernetes Node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedNode {
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// When the `Ready` condition last changed (its `lastTransitionTime`).
    #[schemars(schema_with = "timestamp_schema")]
    pub ready_since: Timestamp,
    /// `status.nodeInfo.kubeletVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_version: Option<KubeVersion>,
    /// `spec.unschedulable` (cordoned).
    #[serde(default)]
    pub unschedulable: bool,
    /// `spec.taints`.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// capstan's drain, when it started one ([`DRAIN_STARTED_ANNOTATION`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<DrainObserved>,
    /// `spec.podCIDR`: the node's share of the pod network, once kube-controller-manager
    /// gave it one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub pod_cidr: Option<IpNet>,
    /// NotReady only because no CNI runs yet: its kubelet reports `NetworkPluginNotReady`,
    /// and it was never Ready since it registered. Remediation leaves it alone; once it was
    /// Ready, NotReady is NotReady.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub awaiting_network: bool,
    /// `metadata.labels`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The label and taint keys capstan set on it, as its annotations record them.
    #[serde(
        default,
        skip_serializing_if = "crate::node_keys::ManagedKeys::is_empty"
    )]
    pub managed: crate::node_keys::ManagedKeys,
    /// The label and taint keys another controller owns on it (Talos's record).
    #[serde(
        default,
        skip_serializing_if = "crate::node_keys::OwnedElsewhere::is_empty"
    )]
    pub owned_elsewhere: crate::node_keys::OwnedElsewhere,
}

impl ObservedNode {
    /// Whether the node carries the [`OUT_OF_SERVICE_TAINT`].
    pub fn is_out_of_service(&self) -> bool {
        self.taints.iter().any(|t| t.key == OUT_OF_SERVICE_TAINT)
    }
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// A drain capstan started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DrainObserved {
    /// When it started (the annotation's value).
    #[schemars(schema_with = "timestamp_schema")]
    pub started: Timestamp,
    /// Pods still to evict (DaemonSet and mirror pods excluded); empty means drained.
    #[serde(default)]
    pub remaining_pods: Vec<PodRef>,
}

/// A pod, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Why its eviction was refused, when known (e.g. a PodDisruptionBudget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The control plane of an initialised cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedControlPlane {
    /// The endpoint `kubeadm init` wrote into every certificate and kubeconfig.
    pub endpoint: Endpoint,
    /// The cluster's version (kubeadm's `ClusterConfiguration.kubernetesVersion`).
    pub version: KubeVersion,
    /// Since when the API endpoint has not answered; `None` when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "timestamp_schema")]
    pub unreachable_since: Option<Timestamp>,
    /// When the first of the control plane's certificates expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "timestamp_schema")]
    pub certificates_expire: Option<Timestamp>,
    /// Fingerprint of the current admin kubeconfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_kubeconfig: Option<String>,
    /// `kubeadm init` ran but the rest of the bootstrap (kube-vip's switch to admin.conf, the
    /// CNI) did not finish: no [`BOOTSTRAP_MARKER`] yet. `init-control-plane` runs again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bootstrap_incomplete: bool,
    /// The network the cluster was built with, as far as it tells: what capstan recorded in
    /// the [`BOOTSTRAP_MARKER`], or kubeadm's `ClusterConfiguration`. A file that leaves a
    /// field unset keeps it; one that sets another value is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<RecordedNetwork>,
    /// The `default/kubernetes` Service's ClusterIP: the first address of the service network
    /// the API server runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_service_address: Option<IpAddr>,
}

/// Where a Flux Secret lives (key `value` holds the kubeconfig).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FluxTarget {
    /// Management cluster (a name under `managementClusters` in `capstan.yaml`).
    pub cluster: String,
    /// Namespace of the Secret.
    pub namespace: String,
    /// Name of the Secret.
    pub secret_name: String,
}

/// The Secret Flux holds for a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FluxSecret {
    /// Where it is.
    pub target: FluxTarget,
    /// Fingerprint of the kubeconfig it holds.
    pub kubeconfig: String,
}

fn timestamp_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "format": "date-time", "description": "RFC 3339 time, e.g. 2026-05-02T01:00:00Z"})
}

/// The JSON Schema of an observed-state snapshot (`observed.schema.json`).
pub fn json_schema() -> serde_json::Value {
    schemars::schema_for!(Observed).to_value()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_round_trip_through_json() {
        let mut observed = Observed::nothing();
        observed.clusters.insert(
            "prod".into(),
            ObservedCluster {
                control_plane: Some(ObservedControlPlane {
                    endpoint: Endpoint {
                        host: "k8s-prod.lab.example".into(),
                        address: "192.168.1.23".parse().expect("ip"),
                        port: 6443,
                    },
                    version: "1.36.2".parse().expect("version"),
                    unreachable_since: None,
                    certificates_expire: Some("2027-01-01T00:00:00Z".parse().expect("time")),
                    admin_kubeconfig: Some("sha256:0011223344556677".into()),
                    bootstrap_incomplete: false,
                    network: None,
                    api_service_address: None,
                }),
                ..ObservedCluster::default()
            },
        );
        let text = serde_json::to_string(&observed).expect("serialise");
        assert!(text.contains("\"certificatesExpire\":\"2027-01-01T00:00:00Z\""));
        let back: Observed = serde_json::from_str(&text).expect("parse");
        assert_eq!(back, observed);
    }
}
