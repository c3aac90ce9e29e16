//! The planner's output: a [`Plan`] per fleet, a [`ClusterPlan`] per cluster, and [`Step`]s
//! whose [`Action`] carries everything the executor needs to perform it without looking at the
//! spec again. Action names (`create-machine`, ...) are stable: previews, status files and tests
//! use them.

use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;
use serde::Serialize;
use smol_str::SmolStr;

use super::Suspension;

mod resource;
use crate::model::{NodeName, Ownership, Role, VmId};
use crate::observed::{FluxTarget, MachineSpec};
use crate::scheduling::{NodeScheduling, Relabel};
use crate::spec::{Endpoint, KubeVersion};
pub use resource::{Resource, Shortfall, WindowFit};
pub(crate) use resource::{day_and_time, seconds};

/// Prefix of the made-up fingerprint a predicted admin kubeconfig gets; the rest names the
/// step that changed it. The simulation writes it, the delivery rule reads it back to say why
/// the kubeconfig will change.
pub(crate) const PREDICTED: &str = "predicted after ";

/// What to do next, fleet-wide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The time the plan was made for.
    pub now: Timestamp,
    /// One entry per cluster that is desired or still exists and is to be deleted, by name.
    pub clusters: Vec<ClusterPlan>,
    /// Findings that belong to no desired cluster: orphans, removed cluster files.
    pub findings: Vec<Finding>,
}

impl Plan {
    /// The plan of one cluster.
    pub fn cluster(&self, name: &str) -> Option<&ClusterPlan> {
        self.clusters.iter().find(|c| c.name == name)
    }
}

/// Where a cluster is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Phase {
    /// Nothing exists yet.
    Pending,
    /// Being built: not initialised, or its kubeconfig never delivered.
    Provisioning,
    /// Converged: nothing to do.
    Ready,
    /// Built, with work to do (replacements, upgrades, renewals, deliveries).
    Updating,
    /// Something needs a person: a refusal, a timed-out drain, no capacity.
    Blocked,
    /// Its file was removed and `prune` is on: it is being deleted.
    Deleting,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The plan of one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPlan {
    /// `metadata.name`.
    pub name: String,
    /// Where the cluster is.
    pub phase: Phase,
    /// The steps that may run now, independent of each other: either non-disruptive steps
    /// only, or a single disruptive step. The executor runs them, re-observes and re-plans.
    pub steps: Vec<Step>,
    /// The whole predicted sequence to convergence, starting from now: each batch's expected
    /// effect applied to a copy of the observed state and planned again. Steps that wait for
    /// the maintenance window are included, with that wait.
    pub predicted: Vec<Step>,
    /// Why (part of) the cluster cannot proceed.
    pub blocked: Vec<Blocked>,
    /// What the cluster waits on now: the step, the resource, since when.
    pub waiting_on: Vec<Waiting>,
    /// Facts worth telling that change nothing (drift reports, cordoned nodes).
    pub findings: Vec<Finding>,
    /// Fencing held back: more nodes are NotReady than `remediation.maxUnhealthy` allows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediation_held: Option<RemediationHeld>,
    /// Its suspensions (Git's first, then the runtime one): while there is one, every step
    /// is held and `steps` is empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub suspended: Vec<Suspension>,
}

/// Fencing held back because too many nodes are unhealthy at once (a network fault looks like
/// every node dying): nothing is fenced or replaced for being dead until enough come back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemediationHeld {
    /// The NotReady nodes, in name order.
    pub unhealthy: Vec<NodeName>,
    /// The cluster's nodes.
    pub nodes: usize,
    /// The most that may be unhealthy for fencing to go on (`remediation.maxUnhealthy` of
    /// `nodes`).
    pub max_unhealthy: usize,
}

impl RemediationHeld {
    /// In words, naming the nodes.
    pub fn message(&self) -> String {
        let names: Vec<&str> = self.unhealthy.iter().map(NodeName::as_str).collect();
        format!(
            "{} of {} nodes NotReady ({}), over remediation.maxUnhealthy ({}): nothing is fenced or replaced until at most {} are; so many at once looks like the network, not the nodes",
            self.unhealthy.len(),
            self.nodes,
            names.join(", "),
            self.max_unhealthy,
            self.max_unhealthy
        )
    }
}

/// One step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// What to do.
    #[serde(flatten)]
    pub action: Action,
    /// What it acts on.
    pub target: Target,
    /// Why, in plain words ("outdated: template debian13-k8s → debian13-k8s-v2").
    pub reason: String,
    /// Whether it disturbs running workloads (drains, control-plane restarts).
    pub disruptive: bool,
    /// What it waits on before it can run, when anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits_on: Option<Wait>,
}

impl Step {
    /// Which action it is.
    pub fn kind(&self) -> ActionKind {
        self.action.kind()
    }

    /// The stable action name.
    pub fn name(&self) -> &'static str {
        self.action.name()
    }
}

/// What a step acts on.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// The cluster.
    pub cluster: SmolStr,
    /// Machine (= VM = Node) name, when the step acts on one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<NodeName>,
    /// VM id, when the VM exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_id: Option<VmId>,
    /// Pool (`cp` for the control plane).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<SmolStr>,
    /// Role of the machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
}

/// A VM the executor acts on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineRef {
    /// VM name = hostname = Node name.
    pub name: NodeName,
    /// VM id. `None` only in predictions, for a VM an earlier predicted step creates.
    pub vm_id: Option<VmId>,
    /// Proxmox node it lives on.
    pub proxmox_node: SmolStr,
}

/// What to do. Serialised with the stable action name under `action`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// Full-clone the template into a new VM named `name` on `proxmox_node`, tagged with
    /// `ownership` from the first API call, sized and started. The name is deterministic, so
    /// repeating the step after a crash finds the VM instead of making a second one.
    #[serde(rename_all = "camelCase")]
    CreateMachine {
        /// VM name = hostname = Node name.
        name: NodeName,
        /// Tags to write.
        ownership: Ownership,
        /// What to build (written into the VM's description); boxed, as it carries the
        /// machine's hardware.
        machine: Box<MachineSpec>,
        /// Proxmox node chosen (rule 15).
        proxmox_node: SmolStr,
        /// Storage for the clone (default: the template's).
        #[serde(skip_serializing_if = "Option::is_none")]
        storage: Option<String>,
        /// The operator's Proxmox tags, beside capstan's (`machine.tags`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tags: Vec<String>,
        /// The resource pool the VM goes into (`machine.pool`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pool: Option<String>,
    },
    /// `kubeadm init` on the first control plane, with kube-vip holding the endpoint, then the
    /// CNI.
    #[serde(rename_all = "camelCase")]
    InitControlPlane {
        /// Where to run it.
        machine: MachineRef,
        /// The endpoint, fixed forever by this step.
        endpoint: Endpoint,
        /// Kubernetes release.
        version: KubeVersion,
        /// Pod network.
        pod_network: String,
        /// Service network.
        service_network: String,
        /// The labels and taints its Node carries: through its registration where the
        /// distribution allows, the rest through the API once it has registered. Shared by
        /// every node of its pool on one Proxmox node.
        #[serde(serialize_with = "shared")]
        scheduling: Arc<NodeScheduling>,
    },
    /// Run the prepare script (CRI-O and the Kubernetes packages of `version`) through the
    /// guest agent, then tag the VM [`crate::observed::PREPARED_TAG`] so it is never run twice.
    /// Non-disruptive; it runs as soon as the VM's guest agent answers, before any join.
    #[serde(rename_all = "camelCase")]
    PrepareNode {
        /// The VM.
        machine: MachineRef,
        /// Kubernetes release of the packages.
        version: KubeVersion,
    },
    /// Make a fresh join token and `kubeadm join` the machine through the endpoint.
    #[serde(rename_all = "camelCase")]
    JoinNode {
        /// The machine.
        machine: MachineRef,
        /// Control planes join with `--control-plane`.
        role: Role,
        /// The endpoint to join through.
        endpoint: Endpoint,
        /// The labels and taints its Node carries (as for `init-control-plane`).
        #[serde(serialize_with = "shared")]
        scheduling: Arc<NodeScheduling>,
    },
    /// Mark the Node unschedulable.
    #[serde(rename_all = "camelCase")]
    Cordon {
        /// The Node.
        node: NodeName,
    },
    /// Annotate the Node with [`crate::observed::DRAIN_STARTED_ANNOTATION`] (once) and evict
    /// its pods, honouring PodDisruptionBudgets, until `deadline`.
    #[serde(rename_all = "camelCase")]
    Drain {
        /// The Node.
        node: NodeName,
        /// The drain gives up at this time, leaving the node cordoned (rule 5).
        deadline: Timestamp,
    },
    /// Tag the VM [`crate::observed::RETIRING_TAG`], then delete the Node (for a control
    /// plane, its etcd member first).
    #[serde(rename_all = "camelCase")]
    DeleteNode {
        /// The Node.
        node: NodeName,
        /// Its role.
        role: Role,
        /// Its VM, to tag.
        #[serde(skip_serializing_if = "Option::is_none")]
        machine: Option<MachineRef>,
    },
    /// `kubeadm reset` on the VM through the guest agent, then shut it down.
    #[serde(rename_all = "camelCase")]
    ResetNode {
        /// The VM.
        machine: MachineRef,
    },
    /// Stop and destroy the VM, after checking it still carries `ownership`.
    #[serde(rename_all = "camelCase")]
    DestroyMachine {
        /// The VM.
        machine: MachineRef,
        /// The tags that must still be on it.
        ownership: Ownership,
    },
    /// `kubeadm upgrade apply` on a control plane (renews the certificates too).
    #[serde(rename_all = "camelCase")]
    UpgradeControlPlane {
        /// Where to run it.
        machine: MachineRef,
        /// Current version.
        from: KubeVersion,
        /// Target version.
        to: KubeVersion,
    },
    /// `kubeadm certs renew all` on every control plane and restart its static pods.
    #[serde(rename_all = "camelCase")]
    RenewCertificates {
        /// Every control plane.
        machines: Vec<MachineRef>,
    },
    /// Write the current admin kubeconfig into the Flux Secret (key `value`).
    #[serde(rename_all = "camelCase")]
    DeliverKubeconfig {
        /// Where.
        flux: FluxTarget,
    },
    /// Hard-stop the VM and taint its Node [`crate::observed::OUT_OF_SERVICE_TAINT`] so its
    /// volumes detach.
    #[serde(rename_all = "camelCase")]
    FenceMachine {
        /// The VM.
        machine: MachineRef,
        /// Its Node.
        node: NodeName,
    },
    /// Change labels and taints in place on running Nodes, through the API: set what the
    /// file declares, remove what capstan set and the file dropped, record capstan's keys on
    /// each Node. Never touches a key capstan did not set; replaces no machine.
    #[serde(rename_all = "camelCase")]
    LabelNodes {
        /// Each Node's change.
        nodes: Vec<Relabel>,
    },
    /// File VMs in place in Proxmox: the operator's tags the file declares (those capstan set
    /// and the file dropped removed; with `onDrift: replace`, any tag that is neither capstan's
    /// nor declared), and the resource pool. Replaces no machine.
    #[serde(rename_all = "camelCase")]
    TagMachines {
        /// Each VM's filing.
        machines: Vec<Filing>,
    },
    /// Destroy every VM of a removed cluster (without draining), withdraw its Flux Secret,
    /// then delete every record capstan keeps of it (its identity last) and its config ISOs.
    #[serde(rename_all = "camelCase")]
    DeleteCluster {
        /// Every VM, with the tags each must still carry.
        machines: Vec<MachineRef>,
        /// The Secret to delete.
        #[serde(skip_serializing_if = "Option::is_none")]
        flux: Option<FluxTarget>,
        /// The records capstan keeps of the cluster on the management clusters, deleted after
        /// the VMs.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        records: Vec<crate::observed::ObservedRecord>,
    },
}

/// How one VM is filed in Proxmox ([`Action::TagMachines`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Filing {
    /// The VM.
    pub machine: MachineRef,
    /// Its owner, checked before anything changes.
    pub ownership: Ownership,
    /// The operator's tags it must carry.
    pub tags: Vec<String>,
    /// The resource pool it must be in (none: it stays where it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Also remove the tags that are neither capstan's nor declared (`onDrift: replace`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub remove_foreign: bool,
    /// What changes, in words (`tags +team-a −team-b, pool → k8s`).
    pub changes: String,
}

/// A shared value, serialised as the value itself.
fn shared<T: Serialize, S: serde::Serializer>(
    value: &Arc<T>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    T::serialize(value, serializer)
}

impl Action {
    /// Which action this is.
    pub fn kind(&self) -> ActionKind {
        match self {
            Action::CreateMachine { .. } => ActionKind::CreateMachine,
            Action::InitControlPlane { .. } => ActionKind::InitControlPlane,
            Action::PrepareNode { .. } => ActionKind::PrepareNode,
            Action::JoinNode { .. } => ActionKind::JoinNode,
            Action::Cordon { .. } => ActionKind::Cordon,
            Action::Drain { .. } => ActionKind::Drain,
            Action::DeleteNode { .. } => ActionKind::DeleteNode,
            Action::ResetNode { .. } => ActionKind::ResetNode,
            Action::DestroyMachine { .. } => ActionKind::DestroyMachine,
            Action::UpgradeControlPlane { .. } => ActionKind::UpgradeControlPlane,
            Action::RenewCertificates { .. } => ActionKind::RenewCertificates,
            Action::DeliverKubeconfig { .. } => ActionKind::DeliverKubeconfig,
            Action::FenceMachine { .. } => ActionKind::FenceMachine,
            Action::LabelNodes { .. } => ActionKind::LabelNodes,
            Action::TagMachines { .. } => ActionKind::TagMachines,
            Action::DeleteCluster { .. } => ActionKind::DeleteCluster,
        }
    }

    /// The stable action name.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }
}

/// Which [`Action`] a step is, without its data: what waits, errors, the status and metrics
/// name. Displayed, serialised and ordered as its stable name ([`ActionKind::name`]), so
/// everything that printed or sorted the name before prints and sorts the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionKind {
    /// [`Action::CreateMachine`].
    CreateMachine,
    /// [`Action::InitControlPlane`].
    InitControlPlane,
    /// [`Action::PrepareNode`].
    PrepareNode,
    /// [`Action::JoinNode`].
    JoinNode,
    /// [`Action::Cordon`].
    Cordon,
    /// [`Action::Drain`].
    Drain,
    /// [`Action::DeleteNode`].
    DeleteNode,
    /// [`Action::ResetNode`].
    ResetNode,
    /// [`Action::DestroyMachine`].
    DestroyMachine,
    /// [`Action::UpgradeControlPlane`].
    UpgradeControlPlane,
    /// [`Action::RenewCertificates`].
    RenewCertificates,
    /// [`Action::DeliverKubeconfig`].
    DeliverKubeconfig,
    /// [`Action::FenceMachine`].
    FenceMachine,
    /// [`Action::LabelNodes`].
    LabelNodes,
    /// [`Action::TagMachines`].
    TagMachines,
    /// [`Action::DeleteCluster`].
    DeleteCluster,
}

impl ActionKind {
    /// Every action, in declaration order.
    pub const ALL: [ActionKind; 16] = [
        ActionKind::CreateMachine,
        ActionKind::InitControlPlane,
        ActionKind::PrepareNode,
        ActionKind::JoinNode,
        ActionKind::Cordon,
        ActionKind::Drain,
        ActionKind::DeleteNode,
        ActionKind::ResetNode,
        ActionKind::DestroyMachine,
        ActionKind::UpgradeControlPlane,
        ActionKind::RenewCertificates,
        ActionKind::DeliverKubeconfig,
        ActionKind::FenceMachine,
        ActionKind::LabelNodes,
        ActionKind::TagMachines,
        ActionKind::DeleteCluster,
    ];

    /// The stable, kebab-case name users see (plans, status, metrics, logs).
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::CreateMachine => "create-machine",
            ActionKind::InitControlPlane => "init-control-plane",
            ActionKind::PrepareNode => "prepare-node",
            ActionKind::JoinNode => "join-node",
            ActionKind::Cordon => "cordon",
            ActionKind::Drain => "drain",
            ActionKind::DeleteNode => "delete-node",
            ActionKind::ResetNode => "reset-node",
            ActionKind::DestroyMachine => "destroy-machine",
            ActionKind::UpgradeControlPlane => "upgrade-control-plane",
            ActionKind::RenewCertificates => "renew-certificates",
            ActionKind::DeliverKubeconfig => "deliver-kubeconfig",
            ActionKind::FenceMachine => "fence-machine",
            ActionKind::LabelNodes => "label-nodes",
            ActionKind::TagMachines => "tag-machines",
            ActionKind::DeleteCluster => "delete-cluster",
        }
    }

    /// The action named `name`, if any.
    pub fn from_name(name: &str) -> Option<ActionKind> {
        ActionKind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

impl fmt::Display for ActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// By name, as the names sorted when they were strings (metrics list steps in this order).
impl Ord for ActionKind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl PartialOrd for ActionKind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for ActionKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for ActionKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        ActionKind::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown action `{name}`")))
    }
}

/// What something waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Wait {
    /// The resource.
    pub resource: Resource,
    /// Since when, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
}

/// What a cluster waits on now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    /// The step that waits; `None` when the whole cluster waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<ActionKind>,
    /// The machine it is for, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<NodeName>,
    /// What it waits on.
    pub resource: Resource,
    /// Since when, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
}

/// A lifecycle rule (the numbers of the planner's issue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(into = "u8")]
pub enum Rule {
    /// 1. Create before remove.
    CreateBeforeRemove,
    /// 2. One disruptive step at a time.
    OneDisruptionAtATime,
    /// 3. Never fewer than `rollout.minWorkers`.
    MinWorkers,
    /// 4. Removals one at a time.
    RemovalsOneAtATime,
    /// 5. Drain deadline.
    DrainTimeout,
    /// 6. Orphans and machines that never joined.
    Orphans,
    /// 7. Upgrades.
    Upgrades,
    /// 8. The endpoint is fixed.
    EndpointFixed,
    /// 9. Control-plane quorum.
    Quorum,
    /// 10. Certificates and kubeconfig delivery.
    Certificates,
    /// 11. Maintenance window.
    MaintenanceWindow,
    /// 12. Removed cluster files.
    RemovedCluster,
    /// 13. Fencing.
    Fencing,
    /// 14. Drift.
    Drift,
    /// 15. Capacity.
    Capacity,
    /// 16. The replacement guard: `replace: forbid` keeps live machines.
    ReplaceGuard,
    /// 17. The cluster network is fixed: pod and service ranges, CNI, kube-proxy.
    NetworkFixed,
}

impl Rule {
    /// Every rule, in number order.
    pub const ALL: [Rule; 17] = [
        Rule::CreateBeforeRemove,
        Rule::OneDisruptionAtATime,
        Rule::MinWorkers,
        Rule::RemovalsOneAtATime,
        Rule::DrainTimeout,
        Rule::Orphans,
        Rule::Upgrades,
        Rule::EndpointFixed,
        Rule::Quorum,
        Rule::Certificates,
        Rule::MaintenanceWindow,
        Rule::RemovedCluster,
        Rule::Fencing,
        Rule::Drift,
        Rule::Capacity,
        Rule::ReplaceGuard,
        Rule::NetworkFixed,
    ];

    /// The rule's number.
    pub fn number(self) -> u8 {
        self as u8 + 1
    }

    /// A short title.
    pub fn title(self) -> &'static str {
        match self {
            Rule::CreateBeforeRemove => "create before remove",
            Rule::OneDisruptionAtATime => "one disruptive step at a time",
            Rule::MinWorkers => "minimum workers",
            Rule::RemovalsOneAtATime => "removals one at a time",
            Rule::DrainTimeout => "drain deadline",
            Rule::Orphans => "orphans",
            Rule::Upgrades => "upgrades",
            Rule::EndpointFixed => "the endpoint is fixed",
            Rule::Quorum => "control-plane quorum",
            Rule::Certificates => "certificates",
            Rule::MaintenanceWindow => "maintenance window",
            Rule::RemovedCluster => "removed cluster",
            Rule::Fencing => "fencing",
            Rule::Drift => "drift",
            Rule::Capacity => "capacity",
            Rule::ReplaceGuard => "replacement guard",
            Rule::NetworkFixed => "the cluster network is fixed",
        }
    }
}

impl From<Rule> for u8 {
    fn from(rule: Rule) -> u8 {
        rule.number()
    }
}

/// Why (part of) a cluster cannot proceed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Blocked {
    /// The rule that refuses.
    pub rule: Rule,
    /// What is refused and what to do, in plain words.
    pub message: String,
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// An owned VM that matches no desired machine (rule 6).
    Orphan,
    /// A cluster whose file was removed (rule 12).
    RemovedCluster,
    /// A cluster whose file has errors: left as it is until the file is fixed.
    InvalidFile,
    /// A VM whose Proxmox config was changed outside capstan (rule 14).
    Drift,
    /// A node cordoned by someone else: not counted as schedulable.
    Cordoned,
    /// A label or taint the file declares that another controller owns on a node (Talos's
    /// machine config): capstan leaves it.
    OwnedElsewhere,
}

/// A fact worth telling that the plan does not act on (or acts on only with `prune`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// What it is about.
    pub kind: FindingKind,
    /// The cluster.
    pub cluster: String,
    /// The machine, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<NodeName>,
    /// Its VM id, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_id: Option<VmId>,
    /// In plain words.
    pub message: String,
}

#[cfg(test)]
mod tests;
