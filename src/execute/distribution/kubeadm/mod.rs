//! kubeadm: CRI-O and the Kubernetes packages installed on a prepared machine, `kubeadm
//! init` on the first control plane (then Calico through the new cluster's API, [`calico`],
//! unless the file says `cni: none`) and `kubeadm join` through a Ready one, a stacked etcd
//! whose member leaves with its control plane, `kubeadm reset`, in-place upgrades with
//! `kubeadm upgrade apply` and `kubeadm certs renew`; the admin credentials are
//! `/etc/kubernetes/admin.conf`, and the version is kubeadm's `ClusterConfiguration`.

use crate::connect::Providers;
use crate::execute::{
    ExecuteError, Executor, StepContext, api_failed, fenced, kubeadm_failed, node_target,
    registries, require_spec, run_steps,
};
use crate::model::{NodeName, Role};
use crate::plan::{ActionKind, MachineRef};
use crate::providers::kubeadm::{self, NodeStep};
use crate::scheduling::{NodeScheduling, Registration};
use crate::spec::Cni;
use crate::spec::{ClusterSpec, Endpoint, KubeVersion};

use super::{AdminSource, Distribution, VersionSource};

pub mod calico;

/// kubeadm with CRI-O and a stacked etcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kubeadm;

impl Distribution for Kubeadm {
    /// Nothing: the template boots as it is and the node is configured once it answers.
    async fn prepare<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        version: KubeVersion,
    ) -> Result<String, ExecuteError> {
        let target = node_target(machine)?;
        let settled = ex.settle_hardware(ctx, machine).await?;
        let action = ActionKind::PrepareNode;
        let registries = registries(ex.providers(), ctx, require_spec(ctx, action)?, action)?;
        // Before the packages: CRI-O reads them at its first start.
        let mut steps = kubeadm::registries::files(&registries);
        steps.extend(kubeadm::prepare_node(version));
        run_steps(&ex.nodes(ctx)?, ActionKind::PrepareNode, &target, &steps).await?;
        let settled = if settled.is_empty() {
            String::new()
        } else {
            format!(", {settled}")
        };
        Ok(format!("CRI-O and Kubernetes {version}{settled}"))
    }

    async fn init<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        endpoint: &Endpoint,
        version: KubeVersion,
        scheduling: &NodeScheduling,
    ) -> Result<String, ExecuteError> {
        let action = ActionKind::InitControlPlane;
        let mut spec = require_spec(ctx, action)?.clone();
        spec.endpoint = endpoint.clone();
        spec.kubernetes.version = version;
        let network = ctx.network().ok_or(ExecuteError::NoSpec { action })?;
        let target = node_target(machine)?;
        let address = ex.address(ctx, &target).await?;
        let nodes = ex.nodes(ctx)?;
        let init = kubeadm::init_control_plane(
            ctx.cluster,
            &spec,
            &network,
            &target.name,
            address,
            &registration(&spec, scheduling),
        );
        let init = kubeadm::patches::with_patches(init, &spec, None, target.name.as_str())
            .and_then(|init| {
                let node = target.name.as_str();
                kubeadm::authentication::with_authentication(
                    init,
                    &spec,
                    Role::ControlPlane,
                    version,
                    node,
                )
            })
            .map_err(kubeadm_failed(action.name()))?;
        let steps = [prepare_unless_done(ctx, machine, version), init].concat();
        run_steps(&nodes, action, &target, &steps).await?;
        let read = nodes
            .admin_kubeconfig(&target)
            .await
            .map_err(kubeadm_failed(action.name()))?;
        // The first kubeconfig of the cluster: its CA is pinned here.
        let kubeconfig = ex.admit(ctx, &spec, &target, &read).await?;
        let cni = match network.cni {
            Cni::Calico => {
                let api = ex
                    .providers()
                    .connect_cluster(&kubeconfig)
                    .await
                    .map_err(api_failed(action.name()))?;
                fenced(ctx, "applying Calico")?;
                let applied = calico::install(&api, &network, endpoint)
                    .await
                    .map_err(api_failed("apply Calico"))?;
                format!(", {applied}")
            }
            Cni::Flannel | Cni::None => ", no CNI: Flux installs one".to_owned(),
        };
        ex.mark_bootstrapped(ctx, &kubeconfig).await?;
        let ready = ex.await_ready(ctx, &kubeconfig, &target.name).await;
        let labelled = ex
            .settle_node(ctx, &kubeconfig, &target.name, scheduling)
            .await;
        Ok(format!(
            "kubeadm init on {} (endpoint {}:{}){cni}{ready}{labelled}",
            target.name, endpoint.host, endpoint.port
        ))
    }

    async fn join<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        role: Role,
        scheduling: &NodeScheduling,
    ) -> Result<String, ExecuteError> {
        let spec = require_spec(ctx, ActionKind::JoinNode)?;
        let target = node_target(machine)?;
        let control_plane = ex.join_through(ctx, &target.name)?;
        let nodes = ex.nodes(ctx)?;
        let ticket = nodes
            .join_ticket(&control_plane)
            .await
            .map_err(kubeadm_failed(ActionKind::JoinNode.name()))?;
        let version = kubelet_version_for(ctx, machine, spec);
        if role == Role::ControlPlane {
            let network = ctx.network().ok_or(ExecuteError::NoSpec {
                action: ActionKind::JoinNode,
            })?;
            let name = control_plane.name.as_str();
            let upload = kubeadm::patches::upload_cluster_configuration(
                ctx.cluster,
                spec,
                &network,
                version,
                name,
            )
            .map_err(kubeadm_failed(ActionKind::JoinNode.name()))?;
            run_steps(&nodes, ActionKind::JoinNode, &control_plane, &upload).await?;
        }
        let key = match role {
            Role::ControlPlane => Some(
                nodes
                    .certificate_key(&control_plane)
                    .await
                    .map_err(kubeadm_failed(ActionKind::JoinNode.name()))?,
            ),
            Role::Worker => None,
        };
        let address = ex.address(ctx, &target).await?;
        let join = kubeadm::join_node(
            role,
            &ticket,
            key.as_deref(),
            spec,
            &target.name,
            address,
            &registration(spec, scheduling),
        );
        let pool = scheduling.worker_pool();
        let join = kubeadm::patches::with_patches(join, spec, pool, target.name.as_str())
            .and_then(|join| {
                let node = target.name.as_str();
                kubeadm::authentication::with_authentication(join, spec, role, version, node)
            })
            .map_err(kubeadm_failed(ActionKind::JoinNode.name()))?;
        let steps = [prepare_unless_done(ctx, machine, version), join].concat();
        run_steps(&nodes, ActionKind::JoinNode, &target, &steps).await?;
        let (ready, labelled) = match ctx.access.kubeconfig.as_ref() {
            Some(kubeconfig) => (
                ex.await_ready(ctx, kubeconfig, &target.name).await,
                ex.settle_node(ctx, kubeconfig, &target.name, scheduling)
                    .await,
            ),
            None => ("", ""),
        };
        Ok(format!(
            "{} joined as {role} (v{version}) through {}{ready}{labelled}",
            target.name, control_plane.name
        ))
    }

    async fn leave<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        node: &NodeName,
        role: Role,
    ) -> Result<(), ExecuteError> {
        if role != Role::ControlPlane {
            return Ok(());
        }
        let healthy = ex.healthy_control_plane(ctx, ActionKind::DeleteNode, node)?;
        ex.nodes(ctx)?
            .remove_etcd_member(&healthy, node)
            .await
            .map_err(kubeadm_failed("remove etcd member"))
    }

    async fn reset<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
    ) -> Result<(), ExecuteError> {
        let target = node_target(machine)?;
        let steps = kubeadm::reset_node();
        run_steps(&ex.nodes(ctx)?, ActionKind::ResetNode, &target, &steps).await
    }

    async fn upgrade_in_place<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        to: KubeVersion,
    ) -> Result<String, ExecuteError> {
        let target = node_target(machine)?;
        let action = ActionKind::UpgradeControlPlane;
        let network = ctx.network().ok_or(ExecuteError::NoSpec { action })?;
        let steps = kubeadm::upgrade_control_plane(to, &network);
        run_steps(&ex.nodes(ctx)?, action, &target, &steps).await?;
        Ok(format!("kubeadm upgrade apply v{to} on {}", target.name))
    }

    fn certificate_renewal(&self) -> Vec<NodeStep> {
        kubeadm::renew_certificates()
    }

    fn renewed(&self, count: usize) -> String {
        format!("certificates renewed on {count} control plane(s)")
    }

    fn admin_kubeconfig_source(&self) -> AdminSource {
        AdminSource::Node(kubeadm::read_admin_kubeconfig())
    }

    fn version_source(&self) -> VersionSource {
        VersionSource::ClusterConfiguration
    }

    async fn unreachable_because<Pr: Providers>(
        &self,
        _: &Pr,
        _: &str,
        _: &ClusterSpec,
    ) -> Option<String> {
        None
    }
}

/// The prepare script, unless `prepare-node` already ran it on the VM (its tag says so).
fn prepare_unless_done(
    ctx: StepContext<'_>,
    machine: &MachineRef,
    version: KubeVersion,
) -> Vec<NodeStep> {
    let observed = ctx.observed.machines.get(&machine.name);
    if observed.is_some_and(|vm| vm.is_prepared()) {
        return Vec::new();
    }
    // Its data disks first, as `prepare-node` mounts them.
    let hardware = observed
        .zip(ctx.spec)
        .and_then(|(vm, spec)| spec.machine_of(&vm.ownership.pool, vm.ownership.role))
        .map(capstan_core::spec::hardware::MachineHardware::of)
        .unwrap_or_default();
    [
        crate::execute::data_disks::mount_steps(&hardware),
        kubeadm::prepare_node(version),
    ]
    .concat()
}

/// The Kubernetes version a machine is built with: the one its spec hash was made for, which
/// is the desired version once the control plane runs it (the planner joins nothing before).
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

/// What of `scheduling` the node registers with (kubeadm: the labels a kubelet may set on
/// itself, through `node-labels`, and every taint, through `nodeRegistration.taints`).
fn registration(spec: &ClusterSpec, scheduling: &NodeScheduling) -> Registration {
    scheduling.registration(&spec.kubernetes.distribution.capabilities().scheduling)
}
