//! How a step reaches its cluster: the Proxmox client and the guest agents (fenced), the
//! Kubernetes API, a VM's address, a control plane to act through; and how failures are
//! named.

use crate::connect::Providers;
use crate::model::{NodeName, Role};
use crate::plan::{ActionKind, MachineRef};
use crate::providers::kube::{AdminKubeconfig, ClusterError};
use crate::providers::kubeadm::{Kubeadm, KubeadmError, NodeStep};
use crate::providers::node_exec::{GuestAgent, NodeExec, NodeTarget};
use crate::providers::proxmox::{
    ExpectedVm, Fenced, ProxmoxError, ProxmoxProvider, PveNode, VmRef,
};
use crate::spec::ClusterSpec;

use super::{ExecuteError, Executor, StepContext};

/// How the executor reaches one cluster.
#[derive(Clone, Default)]
pub struct ClusterAccess {
    /// The Proxmox connection its VMs live on.
    pub connection: String,
    /// The current admin kubeconfig, when a control plane gave one that was admitted.
    pub kubeconfig: Option<AdminKubeconfig>,
    /// The control plane it was read from.
    pub read_from: Option<NodeTarget>,
    /// Why its API does not answer, when capstan knows more than "it does not answer" (a K3s
    /// cluster's datastore that is down).
    pub api_down_because: Option<String>,
    /// The connection's storage for ISO images (`isoStorage`), where Talos machine configs go.
    pub iso_storage: Option<String>,
    /// Whether the connection lets capstan create a missing resource pool (`createPools`).
    pub create_pools: bool,
}

impl std::fmt::Debug for ClusterAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterAccess")
            .field("connection", &self.connection)
            .field(
                "kubeconfig",
                &self.kubeconfig.as_ref().map(AdminKubeconfig::fingerprint),
            )
            .field("read_from", &self.read_from)
            .field("api_down_because", &self.api_down_because)
            .field("iso_storage", &self.iso_storage)
            .field("create_pools", &self.create_pools)
            .finish()
    }
}

impl<Pr: Providers> Executor<Pr> {
    /// The cluster's Proxmox client, fenced: every change it makes, and every command or
    /// file it sends to a guest, first checks that the step's replica still leads.
    pub(crate) fn proxmox(
        &self,
        ctx: StepContext<'_>,
    ) -> Result<Fenced<Pr::Proxmox>, ExecuteError> {
        let connection = &ctx.access.connection;
        self.providers
            .proxmox(connection)
            .map(|client| Fenced::new(client.clone(), ctx.fence.clone()))
            .ok_or_else(|| ExecuteError::NoConnection {
                connection: connection.clone(),
            })
    }

    /// Commands on the cluster's nodes, through their guest agents (fenced).
    pub(crate) fn nodes(
        &self,
        ctx: StepContext<'_>,
    ) -> Result<Kubeadm<GuestAgent<Fenced<Pr::Proxmox>>>, ExecuteError> {
        Ok(Kubeadm::new(GuestAgent::new(self.proxmox(ctx)?)))
    }

    /// A client of the cluster's API, from the admin kubeconfig observed.
    pub(super) async fn api(
        &self,
        ctx: StepContext<'_>,
        action: ActionKind,
    ) -> Result<Pr::Cluster, ExecuteError> {
        let kubeconfig = ctx
            .access
            .kubeconfig
            .as_ref()
            .ok_or(ExecuteError::NoKubeconfig { action })?;
        self.providers
            .connect_cluster(kubeconfig)
            .await
            .map_err(api_failed(action.name()))
    }

    /// The VM's first IPv4 address, as its guest agent reports it.
    pub(crate) async fn address(
        &self,
        ctx: StepContext<'_>,
        target: &NodeTarget,
    ) -> Result<std::net::IpAddr, ExecuteError> {
        let vm = VmRef {
            node: PveNode(target.proxmox_node.clone()),
            vmid: target.vmid,
        };
        let addresses = self
            .proxmox(ctx)?
            .vm_addresses(&vm)
            .await
            .map_err(proxmox_failed("read address"))?;
        // A static address recorded on the VM is the node's (its cards may carry others).
        let recorded: Vec<std::net::IpAddr> = ctx
            .observed
            .machines
            .get(&target.name)
            .map(|m| capstan_core::addresses::tagged_addresses(&m.tags).collect())
            .unwrap_or_default();
        addresses
            .iter()
            .map(|a| std::net::IpAddr::V4(*a))
            .find(|a| recorded.contains(a))
            .or_else(|| addresses.first().map(|a| std::net::IpAddr::V4(*a)))
            .ok_or_else(|| ExecuteError::NoAddress {
                machine: target.name.clone(),
            })
    }

    /// A Ready, running control plane other than `excluding`, preferring the one the admin
    /// kubeconfig was read from.
    pub(crate) fn healthy_control_plane(
        &self,
        ctx: StepContext<'_>,
        action: ActionKind,
        excluding: &NodeName,
    ) -> Result<NodeTarget, ExecuteError> {
        let ready = |name: &NodeName| ctx.observed.nodes.get(name).is_some_and(|n| n.ready);
        if let Some(read_from) = &ctx.access.read_from
            && read_from.name != *excluding
            && ready(&read_from.name)
            && is_member_control_plane(ctx, &read_from.name)
        {
            return Ok(read_from.clone());
        }
        control_plane_where(ctx, excluding, ready).ok_or_else(|| ExecuteError::NoControlPlane {
            action,
            excluding: excluding.clone(),
        })
    }

    /// The control plane a node joins through (its join token and certificate key are made
    /// there): a Ready one, else one whose Node is registered while the API answers, as
    /// `kubeadm init` leaves the first before the CNI makes it Ready.
    pub(crate) fn join_through(
        &self,
        ctx: StepContext<'_>,
        joining: &NodeName,
    ) -> Result<NodeTarget, ExecuteError> {
        let ready = self.healthy_control_plane(ctx, ActionKind::JoinNode, joining);
        let api_answers = ctx
            .observed
            .control_plane
            .as_ref()
            .is_some_and(|cp| cp.unreachable_since.is_none());
        if ready.is_ok() || !api_answers {
            return ready;
        }
        let registered = |name: &NodeName| ctx.observed.nodes.contains_key(name);
        control_plane_where(ctx, joining, registered).map_or(ready, Ok)
    }

    /// The observed VM of `machine`, as Proxmox changes expect it (name and ownership).
    pub(super) fn expected(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
    ) -> Result<ExpectedVm, ExecuteError> {
        let observed =
            ctx.observed
                .machines
                .get(&machine.name)
                .ok_or_else(|| ExecuteError::UnknownVm {
                    machine: machine.name.clone(),
                })?;
        Ok(ExpectedVm {
            vm: vm_ref(machine)?,
            name: machine.name.clone(),
            ownership: observed.ownership.clone(),
        })
    }
}

/// The cluster's spec, which `action` needs (a removed cluster has none).
pub(crate) fn require_spec(
    ctx: StepContext<'_>,
    action: ActionKind,
) -> Result<&ClusterSpec, ExecuteError> {
    ctx.spec.ok_or(ExecuteError::NoSpec { action })
}

/// `spec`'s `kubernetes.registries` with each password read from its source, under the
/// operator's rules (the redactor knows each from then on): what a node's runtime is given.
pub(crate) fn registries<Pr: Providers>(
    providers: &Pr,
    ctx: StepContext<'_>,
    spec: &ClusterSpec,
    action: ActionKind,
) -> Result<crate::spec::registries::ResolvedRegistries, ExecuteError> {
    let resolved = crate::spec::registries::ResolvedRegistries::resolve(
        &spec.kubernetes.registries,
        |registry, source| providers.registry_password(ctx.cluster, registry, source),
    )
    .map_err(|source| ExecuteError::RegistryPassword {
        action,
        source: Box::new(source),
    })?;
    // CRI-O's auth file holds the pair as base64: a guest echoing it must not leak it either.
    for credentials in resolved.credentials.values() {
        use base64::Engine as _;
        let pair = format!("{}:{}", credentials.username, credentials.password);
        crate::redact::remember(&base64::engine::general_purpose::STANDARD.encode(pair));
    }
    Ok(resolved)
}

/// Runs `steps` on `target`, named after `action` in errors.
pub(crate) async fn run_steps<E: NodeExec>(
    nodes: &Kubeadm<E>,
    action: ActionKind,
    target: &NodeTarget,
    steps: &[NodeStep],
) -> Result<(), ExecuteError> {
    nodes
        .run_steps(action.name(), target, steps)
        .await
        .map_err(kubeadm_failed(action.name()))
}

/// Checks the step's replica still leads before it changes `before`.
pub(crate) fn fenced(
    ctx: StepContext<'_>,
    before: impl std::fmt::Display,
) -> Result<(), ExecuteError> {
    ctx.fence.check(before).map_err(ExecuteError::NotLeading)
}

pub(super) fn proxmox_failed(action: &'static str) -> impl FnOnce(ProxmoxError) -> ExecuteError {
    move |source| ExecuteError::Proxmox {
        action,
        source: Box::new(source),
    }
}

pub(crate) fn api_failed(action: &'static str) -> impl FnOnce(ClusterError) -> ExecuteError {
    move |source| ExecuteError::Cluster {
        action,
        source: Box::new(source),
    }
}

pub(crate) fn kubeadm_failed(action: &'static str) -> impl FnOnce(KubeadmError) -> ExecuteError {
    move |source| ExecuteError::Kubeadm {
        action,
        source: Box::new(source),
    }
}

pub(super) fn vm_ref(machine: &MachineRef) -> Result<VmRef, ExecuteError> {
    let vmid = machine.vm_id.ok_or_else(|| ExecuteError::UnknownVm {
        machine: machine.name.clone(),
    })?;
    Ok(VmRef {
        node: PveNode(machine.proxmox_node.to_string()),
        vmid,
    })
}

/// Where commands for `machine` go.
pub(crate) fn node_target(machine: &MachineRef) -> Result<NodeTarget, ExecuteError> {
    let vm = vm_ref(machine)?;
    Ok(NodeTarget {
        vmid: vm.vmid,
        proxmox_node: vm.node.0,
        name: machine.name.clone(),
    })
}

/// Whether `name` is a running control-plane VM of the cluster, not retiring.
fn is_member_control_plane(ctx: StepContext<'_>, name: &NodeName) -> bool {
    ctx.observed.machines.get(name).is_some_and(|m| {
        m.ownership.role == Role::ControlPlane && m.is_running() && !m.is_retiring()
    })
}

/// The first control plane other than `excluding` that is a member and whose Node passes
/// `node_ok`.
fn control_plane_where(
    ctx: StepContext<'_>,
    excluding: &NodeName,
    node_ok: impl Fn(&NodeName) -> bool,
) -> Option<NodeTarget> {
    ctx.observed
        .machines
        .iter()
        .find(|(name, _)| *name != excluding && node_ok(name) && is_member_control_plane(ctx, name))
        .map(|(name, m)| NodeTarget {
            vmid: m.vm_id,
            proxmox_node: m.proxmox_node.to_string(),
            name: name.clone(),
        })
}
