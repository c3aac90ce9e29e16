//! Runs one planned [`Step`] through the providers.
//!
//! # Guarantees
//! Every step is idempotent and tolerates being repeated after a crash or a cancellation:
//! a clone whose VM exists adopts it, init and join are skipped on a node that already has
//! their result, deleting or destroying what is gone succeeds, a delivery of an unchanged
//! kubeconfig writes nothing. Nothing is journalled: the next pass re-observes and re-plans.
//!
//! - Leadership is checked before each change a step makes: each command or file sent to a
//!   node and each Proxmox change go through [`Fenced`], each Kubernetes change and each
//!   drain round through the step's [`Fence`]; a step whose replica no longer leads ends with
//!   [`ExecuteError::NotLeading`] and sends nothing more.
//!
//! # Assumptions
//! The step comes from a plan made on the observation passed with it ([`StepContext`]), so the
//! machines it names were observed (a step that names a VM only a prediction knows is refused).

use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
use crate::connect::Providers;
use crate::fence::Fence;
use crate::model::{NodeName, Role};
use crate::observe::ClusterAccess;
use crate::observed::{ObservedCluster, PREPARED_TAG};
use crate::plan::{Action, ActionKind, MachineRef, Step};
use crate::providers::flux::{self, DeliveryOutcome, KubeconfigDelivery};
use crate::providers::kube::{ClusterClient, ClusterError, Taint};
use crate::providers::kubeadm::{self, Kubeadm, KubeadmError};
use crate::providers::node_exec::{GuestAgent, NodeTarget};
use crate::providers::proxmox::{
    CloneRequest, ExpectedVm, Fenced, ProxmoxError, ProxmoxProvider, PveNode, VmRef, VmSettings,
};
use crate::spec::{ClusterSpec, KubeVersion};

mod bootstrap;
mod error;
mod k3s;
mod removal;

pub use error::ExecuteError;

/// A clean shutdown after `kubeadm reset` gets this long before the VM is stopped hard.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(120);

/// What a step needs besides itself.
#[derive(Debug, Clone, Copy)]
pub struct StepContext<'a> {
    /// The cluster's name.
    pub cluster: &'a str,
    /// Its desired spec (`None` for a removed cluster).
    pub spec: Option<&'a ClusterSpec>,
    /// What was observed of it when the step was planned.
    pub observed: &'a ObservedCluster,
    /// How to reach it.
    pub access: &'a ClusterAccess,
    /// The repository revision acted on (annotated on the Flux Secret).
    pub revision: &'a str,
    /// Whether the step may still change anything (its replica leads).
    pub fence: &'a Fence,
}

/// Runs steps through `Pr`.
pub struct Executor<Pr> {
    providers: Arc<Pr>,
    clock: Arc<dyn Clock>,
    /// Pinged when a step changed the world and goes on waiting (kubeadm is done, the Node
    /// is not Ready yet): what was waiting on that change may be planned now.
    changed: Arc<tokio::sync::Notify>,
}

impl<Pr: Providers> Executor<Pr> {
    /// An executor over `providers`, reading time from `clock`.
    pub fn new(providers: Arc<Pr>, clock: Arc<dyn Clock>) -> Self {
        Executor {
            providers,
            clock,
            changed: Arc::default(),
        }
    }

    /// Completes when a step in flight has changed the world and keeps running (see
    /// [`Executor::run`]'s steps that wait for their Node to be Ready).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Performs `step`; returns what it did, in a few words, for the progress line.
    ///
    /// # Errors
    /// [`ExecuteError`], naming the operation; see [`ExecuteError::is_transient`].
    #[tracing::instrument(skip_all, fields(cluster = ctx.cluster, action = step.name(), machine = ?step.target.machine))]
    pub async fn run(&self, ctx: StepContext<'_>, step: &Step) -> Result<String, ExecuteError> {
        let result = match &step.action {
            Action::CreateMachine {
                name,
                ownership,
                machine,
                proxmox_node,
                storage,
            } => {
                let proxmox = self.proxmox(ctx)?;
                self.k3s_preflight(ctx).await?;
                let created = self.clock.now();
                let request = CloneRequest {
                    template: machine.template.to_string(),
                    target: PveNode(proxmox_node.to_string()),
                    name: name.clone(),
                    ownership: ownership.clone(),
                    created,
                    pool: None,
                    storage: storage.clone(),
                    built_from: Some(machine.summary()),
                };
                let vm = proxmox
                    .clone_vm(&request)
                    .await
                    .map_err(proxmox_failed("clone"))?;
                let settings = VmSettings {
                    cores: machine.cores,
                    memory_mib: machine.memory_mib,
                    cpu_type: machine.cpu.to_string(),
                    ownership: ownership.clone(),
                    created,
                    cloud_init: None,
                    built_from: Some(machine.summary()),
                };
                proxmox
                    .configure_vm(&vm, &settings)
                    .await
                    .map_err(proxmox_failed("configure"))?;
                proxmox
                    .resize_disk(&vm, machine.disk_gib)
                    .await
                    .map_err(proxmox_failed("resize disk"))?;
                proxmox
                    .start_vm(&vm)
                    .await
                    .map_err(proxmox_failed("start"))?;
                // Waiting for the agent here lets the prepare script start as the VM answers
                // (this step's end starts a pass), not a pass later.
                let agent = match proxmox.await_agent(&vm).await {
                    Ok(true) => ", its guest agent answering",
                    Ok(false) => ", its guest agent not answering yet",
                    Err(err) => {
                        tracing::debug!(vmid = %vm.vmid, error = %err, "cannot ping the new VM's guest agent; the next pass sees whether it answers");
                        ""
                    }
                };
                format!(
                    "VM {} cloned from {} on {proxmox_node} and started{agent}",
                    vm.vmid, machine.template
                )
            }
            Action::InitControlPlane {
                machine,
                endpoint,
                version,
                ..
            } if k3s::is_k3s(ctx) => self.k3s_init(ctx, machine, endpoint, *version).await?,
            Action::InitControlPlane {
                machine,
                endpoint,
                version,
                ..
            } => {
                let mut spec = ctx
                    .spec
                    .ok_or(ExecuteError::NoSpec {
                        action: ActionKind::InitControlPlane,
                    })?
                    .clone();
                spec.endpoint = endpoint.clone();
                spec.kubernetes.version = *version;
                let target = node_target(machine)?;
                let address = self.address(ctx, &target).await?;
                let kubeadm = self.kubeadm(ctx)?;
                let steps = [
                    prepare_unless_done(ctx, machine, *version),
                    kubeadm::init_control_plane(ctx.cluster, &spec, &target.name, address),
                ]
                .concat();
                run_steps(&kubeadm, ActionKind::InitControlPlane, &target, &steps).await?;
                let read = kubeadm
                    .admin_kubeconfig(&target)
                    .await
                    .map_err(kubeadm_failed(ActionKind::InitControlPlane.name()))?;
                // The first kubeconfig of the cluster: its CA is pinned here.
                let kubeconfig = self.admit(ctx, &spec, &target, &read).await?;
                self.mark_bootstrapped(ctx, &kubeconfig).await?;
                let ready = self.await_ready(&kubeconfig, &target.name).await;
                format!(
                    "kubeadm init on {} (endpoint {}:{}){ready}",
                    target.name, endpoint.host, endpoint.port
                )
            }
            Action::PrepareNode { machine, version } => {
                let target = node_target(machine)?;
                // A K3s template carries everything (the air-gapped binary): nothing to run.
                if !k3s::is_k3s(ctx) {
                    let steps = kubeadm::prepare_node(*version);
                    run_steps(
                        &self.kubeadm(ctx)?,
                        ActionKind::PrepareNode,
                        &target,
                        &steps,
                    )
                    .await?;
                }
                // The tag after the script: a crash in between runs the script again.
                let expected = self.expected(ctx, machine)?;
                self.proxmox(ctx)?
                    .add_tag(&expected, PREPARED_TAG)
                    .await
                    .map_err(proxmox_failed("tag prepared"))?;
                if k3s::is_k3s(ctx) {
                    format!("{} prepared: K3s {version} is in its template", target.name)
                } else {
                    format!("{} prepared: CRI-O and Kubernetes {version}", target.name)
                }
            }
            Action::JoinNode { machine, role, .. } if k3s::is_k3s(ctx) => {
                self.k3s_join(ctx, machine, *role).await?
            }
            Action::JoinNode { machine, role, .. } => self.join(ctx, machine, *role).await?,
            Action::Cordon { node } => {
                let api = self.api(ctx, ActionKind::Cordon).await?;
                fenced(ctx, format_args!("cordoning {node}"))?;
                api.cordon(node)
                    .await
                    .map_err(api_failed(ActionKind::Cordon.name()))?;
                format!("{node} cordoned")
            }
            Action::Drain { node, deadline } => self.drain(ctx, node, *deadline).await?,
            Action::DeleteNode {
                node,
                role,
                machine,
            } => self.delete_node(ctx, node, *role, machine.as_ref()).await?,
            Action::ResetNode { machine } => {
                let target = node_target(machine)?;
                if k3s::is_k3s(ctx) {
                    self.k3s_uninstall(ctx, machine).await?;
                } else {
                    run_steps(
                        &self.kubeadm(ctx)?,
                        ActionKind::ResetNode,
                        &target,
                        &kubeadm::reset_node(),
                    )
                    .await?;
                }
                let expected = self.expected(ctx, machine)?;
                self.proxmox(ctx)?
                    .shutdown_vm(&expected, SHUTDOWN_TIMEOUT)
                    .await
                    .map_err(proxmox_failed("shut down"))?;
                format!("{} reset and its VM shut down", target.name)
            }
            Action::DestroyMachine { machine, ownership } => {
                let expected = ExpectedVm {
                    vm: vm_ref(machine)?,
                    name: machine.name.clone(),
                    ownership: ownership.clone(),
                };
                self.proxmox(ctx)?
                    .destroy_vm(&expected)
                    .await
                    .map_err(proxmox_failed("destroy"))?;
                format!("VM {} ({}) destroyed", expected.vm.vmid, machine.name)
            }
            Action::UpgradeControlPlane { machine, to, .. } => {
                let target = node_target(machine)?;
                let kubeadm = self.kubeadm(ctx)?;
                run_steps(
                    &kubeadm,
                    ActionKind::UpgradeControlPlane,
                    &target,
                    &kubeadm::upgrade_control_plane(*to),
                )
                .await?;
                format!("kubeadm upgrade apply v{to} on {}", target.name)
            }
            Action::RenewCertificates { machines } if k3s::is_k3s(ctx) => {
                self.k3s_rotate(ctx, machines).await?
            }
            Action::RenewCertificates { machines } => {
                let kubeadm = self.kubeadm(ctx)?;
                for machine in machines {
                    let target = node_target(machine)?;
                    run_steps(
                        &kubeadm,
                        ActionKind::RenewCertificates,
                        &target,
                        &kubeadm::renew_certificates(),
                    )
                    .await?;
                }
                format!(
                    "certificates renewed on {} control plane(s)",
                    machines.len()
                )
            }
            Action::DeliverKubeconfig { flux } => {
                let kubeconfig =
                    ctx.access
                        .kubeconfig
                        .as_ref()
                        .ok_or(ExecuteError::NoKubeconfig {
                            action: ActionKind::DeliverKubeconfig,
                        })?;
                let deliverer = self.deliverer(flux)?;
                let target = flux_target(ctx, flux);
                fenced(ctx, "delivering the kubeconfig to Flux")?;
                let outcome = deliverer
                    .deliver(&target, kubeconfig, ctx.revision)
                    .await
                    .map_err(|err| ExecuteError::Flux(Box::new(err)))?;
                let verb = match outcome {
                    DeliveryOutcome::Created => "created",
                    DeliveryOutcome::Updated => "updated",
                    DeliveryOutcome::Unchanged => "already current",
                };
                format!(
                    "Flux Secret {}/{} on {} {verb}",
                    flux.namespace, flux.secret_name, flux.cluster
                )
            }
            Action::FenceMachine { machine, node } => {
                let expected = self.expected(ctx, machine)?;
                self.proxmox(ctx)?
                    .stop_vm(&expected)
                    .await
                    .map_err(proxmox_failed("fence (hard stop)"))?;
                let api = self.api(ctx, ActionKind::FenceMachine).await?;
                fenced(ctx, format_args!("tainting {node} out-of-service"))?;
                api.add_taint(node, &Taint::out_of_service())
                    .await
                    .map_err(api_failed("taint out-of-service"))?;
                format!(
                    "VM {} hard-stopped, {node} tainted out-of-service",
                    expected.vm.vmid
                )
            }
            Action::DeleteCluster { machines, flux } => {
                self.delete_cluster(ctx, machines, flux.as_ref()).await?
            }
        };
        tracing::info!(
            cluster = ctx.cluster,
            action = step.name(),
            revision = ctx.revision,
            "{result}"
        );
        Ok(result)
    }

    async fn join(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        role: Role,
    ) -> Result<String, ExecuteError> {
        let spec = ctx.spec.ok_or(ExecuteError::NoSpec {
            action: ActionKind::JoinNode,
        })?;
        let target = node_target(machine)?;
        let control_plane = self.join_through(ctx, &target.name)?;
        let kubeadm = self.kubeadm(ctx)?;
        let ticket = kubeadm
            .join_ticket(&control_plane)
            .await
            .map_err(kubeadm_failed(ActionKind::JoinNode.name()))?;
        let key = match role {
            Role::ControlPlane => Some(
                kubeadm
                    .certificate_key(&control_plane)
                    .await
                    .map_err(kubeadm_failed(ActionKind::JoinNode.name()))?,
            ),
            Role::Worker => None,
        };
        let address = self.address(ctx, &target).await?;
        let version = kubelet_version_for(ctx, machine, spec);
        let steps = [
            prepare_unless_done(ctx, machine, version),
            kubeadm::join_node(role, &ticket, key.as_deref(), spec, &target.name, address),
        ]
        .concat();
        run_steps(&kubeadm, ActionKind::JoinNode, &target, &steps).await?;
        let ready = match ctx.access.kubeconfig.as_ref() {
            Some(kubeconfig) => self.await_ready(kubeconfig, &target.name).await,
            None => "",
        };
        Ok(format!(
            "{} joined as {role} (v{version}) through {}{ready}",
            target.name, control_plane.name
        ))
    }

    fn deliverer(&self, flux: &crate::observed::FluxTarget) -> Result<&Pr::Flux, ExecuteError> {
        self.providers
            .flux(&flux.cluster)
            .ok_or_else(|| ExecuteError::NoManagement {
                name: flux.cluster.clone(),
            })
    }

    /// The cluster's Proxmox client, fenced: every change it makes, and every command or
    /// file it sends to a guest, first checks that the step's replica still leads.
    fn proxmox(&self, ctx: StepContext<'_>) -> Result<Fenced<Pr::Proxmox>, ExecuteError> {
        let connection = &ctx.access.connection;
        self.providers
            .proxmox(connection)
            .map(|client| Fenced::new(client.clone(), ctx.fence.clone()))
            .ok_or_else(|| ExecuteError::NoConnection {
                connection: connection.clone(),
            })
    }

    fn kubeadm(
        &self,
        ctx: StepContext<'_>,
    ) -> Result<Kubeadm<GuestAgent<Fenced<Pr::Proxmox>>>, ExecuteError> {
        Ok(Kubeadm::new(GuestAgent::new(self.proxmox(ctx)?)))
    }

    async fn api(
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
    async fn address(
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
        addresses
            .first()
            .map(|a| std::net::IpAddr::V4(*a))
            .ok_or_else(|| ExecuteError::NoAddress {
                machine: target.name.clone(),
            })
    }

    /// A Ready, running control plane other than `excluding`, preferring the one the admin
    /// kubeconfig was read from.
    fn healthy_control_plane(
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
    fn join_through(
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

    fn expected(
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

/// The Kubernetes version a machine is built with: the one its spec hash was made for, which
/// is the desired version once the control plane runs it (the planner joins nothing before).
/// The prepare script, unless `prepare-node` already ran it on the VM (its tag says so).
fn prepare_unless_done(
    ctx: StepContext<'_>,
    machine: &MachineRef,
    version: KubeVersion,
) -> Vec<kubeadm::NodeStep> {
    let observed = ctx.observed.machines.get(&machine.name);
    if observed.is_some_and(|vm| vm.is_prepared()) {
        return Vec::new();
    }
    kubeadm::prepare_node(version)
}

fn kubelet_version_for(
    ctx: StepContext<'_>,
    machine: &MachineRef,
    spec: &ClusterSpec,
) -> KubeVersion {
    let desired = spec.kubernetes.version;
    match ctx.observed.control_plane.as_ref() {
        Some(control_plane) if control_plane.version < desired => {
            tracing::debug!(machine = %machine.name, "control plane older than desired; joining at its version");
            control_plane.version
        }
        _ => desired,
    }
}

async fn run_steps<E: crate::providers::node_exec::NodeExec>(
    kubeadm: &Kubeadm<E>,
    action: ActionKind,
    target: &NodeTarget,
    steps: &[kubeadm::NodeStep],
) -> Result<(), ExecuteError> {
    kubeadm
        .run_steps(action.name(), target, steps)
        .await
        .map_err(kubeadm_failed(action.name()))
}

/// Checks the step's replica still leads before it changes `before`.
fn fenced(ctx: StepContext<'_>, before: impl std::fmt::Display) -> Result<(), ExecuteError> {
    ctx.fence.check(before).map_err(ExecuteError::NotLeading)
}

fn proxmox_failed(action: &'static str) -> impl FnOnce(ProxmoxError) -> ExecuteError {
    move |source| ExecuteError::Proxmox {
        action,
        source: Box::new(source),
    }
}

fn api_failed(action: &'static str) -> impl FnOnce(ClusterError) -> ExecuteError {
    move |source| ExecuteError::Cluster {
        action,
        source: Box::new(source),
    }
}

fn kubeadm_failed(action: &'static str) -> impl FnOnce(KubeadmError) -> ExecuteError {
    move |source| ExecuteError::Kubeadm {
        action,
        source: Box::new(source),
    }
}

/// The Flux provider's target for a cluster's Secret (named by the plan).
fn flux_target(ctx: StepContext<'_>, flux: &crate::observed::FluxTarget) -> flux::FluxTarget {
    flux::FluxTarget {
        cluster: ctx.cluster.to_owned(),
        namespace: flux.namespace.clone(),
        secret_name: flux.secret_name.clone(),
    }
}

fn vm_ref(machine: &MachineRef) -> Result<VmRef, ExecuteError> {
    let vmid = machine.vm_id.ok_or_else(|| ExecuteError::UnknownVm {
        machine: machine.name.clone(),
    })?;
    Ok(VmRef {
        node: PveNode(machine.proxmox_node.to_string()),
        vmid,
    })
}

fn node_target(machine: &MachineRef) -> Result<NodeTarget, ExecuteError> {
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

#[cfg(test)]
mod tests;
