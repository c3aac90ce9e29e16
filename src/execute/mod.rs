//! Runs one planned [`Step`] through the providers, one file per step family: machines.rs
//! (VMs: clone, prepare, reset, destroy, fence), membership.rs (the first control plane,
//! joins, a Node's deletion, upgrades, certificates: through the cluster's
//! [`distribution`]), drains.rs (cordon and drain), deliveries.rs (the kubeconfig to
//! Flux), removal.rs (a whole cluster), config_isos.rs (the config ISOs' names, their
//! deletion and the sweep of those left behind); access.rs reaches the cluster's VMs and API,
//! and bootstrap.rs admits the first admin kubeconfig.
//!
//! # Guarantees
//! Every step is idempotent and tolerates being repeated after a crash or a cancellation:
//! a clone whose VM exists adopts it, init and join are skipped on a node that already has
//! their result, deleting or destroying what is gone succeeds, a delivery of an unchanged
//! kubeconfig writes nothing. Nothing is journalled: the next pass re-observes and re-plans.
//!
//! - Leadership is checked before each change a step makes: each command or file sent to a
//!   node and each Proxmox change go through [`crate::providers::proxmox::Fenced`], each
//!   Kubernetes change and each drain round through the step's [`Fence`]; a step whose
//!   replica no longer leads ends with [`ExecuteError::NotLeading`] and sends nothing more.
//!
//! # Assumptions
//! The step comes from a plan made on the observation passed with it ([`StepContext`]), so the
//! machines it names were observed (a step that names a VM only a prediction knows is refused).

use std::sync::Arc;

use crate::clock::Clock;
use crate::connect::Providers;
use crate::fence::Fence;
use crate::observed::ObservedCluster;
use crate::plan::{Action, Step};
use crate::spec::ClusterSpec;
use distribution::Chosen;

mod access;
mod addresses;
mod bootstrap;
pub(crate) mod config_isos;
pub(crate) mod data_disks;
mod deliveries;
pub mod distribution;
mod drains;
mod error;
mod filing;
mod labels;
pub(crate) mod machines;
mod membership;
mod removal;

pub use crate::plan::StepReport;
pub use access::ClusterAccess;
pub(crate) use access::{
    api_failed, fenced, kubeadm_failed, node_target, registries, require_spec, run_steps,
};
pub use error::ExecuteError;

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

impl StepContext<'_> {
    /// The cluster's distribution, chosen from its spec.
    pub fn distribution(&self) -> Chosen {
        distribution::of(self.spec)
    }

    /// The network the cluster runs on (`None` for a removed cluster): the file's fields, else
    /// what the live cluster was built with, else the distribution's defaults. Every
    /// configuration a distribution renders takes its ranges, CNI and kube-proxy from here.
    pub fn network(&self) -> Option<capstan_core::spec::ClusterNetwork> {
        let running = self.observed.control_plane.as_ref();
        self.spec
            .map(|spec| spec.cluster_network(running.and_then(|cp| cp.network.as_ref())))
    }
}

/// Runs steps through `Pr`.
pub struct Executor<Pr> {
    providers: Arc<Pr>,
    clock: Arc<dyn Clock>,
    /// Pinged when a step changed the world and goes on waiting (kubeadm is done, the Node
    /// is not Ready yet): what was waiting on that change may be planned now.
    changed: Arc<tokio::sync::Notify>,
    /// Held while a machine chooses its static address and tags its VM with it, so two
    /// machines created at once never choose the same one.
    address_choice: tokio::sync::Mutex<()>,
}

impl<Pr: Providers> Executor<Pr> {
    /// An executor over `providers`, reading time from `clock`.
    pub fn new(providers: Arc<Pr>, clock: Arc<dyn Clock>) -> Self {
        Executor {
            providers,
            clock,
            changed: Arc::default(),
            address_choice: tokio::sync::Mutex::default(),
        }
    }

    /// Completes when a step in flight has changed the world and keeps running (see
    /// [`Executor::run`]'s steps that wait for their Node to be Ready).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Held while a static node address is chosen and recorded (see the field).
    pub(crate) async fn address_choice(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.address_choice.lock().await
    }

    /// The connections steps go through.
    pub(crate) fn providers(&self) -> &Pr {
        &self.providers
    }

    /// Performs `step`; returns what it did, for the progress line and the status.
    ///
    /// # Errors
    /// [`ExecuteError`], naming the operation; see [`ExecuteError::is_transient`].
    #[tracing::instrument(skip_all, fields(cluster = ctx.cluster, action = step.name(), machine = ?step.target.machine))]
    pub async fn run(&self, ctx: StepContext<'_>, step: &Step) -> Result<StepReport, ExecuteError> {
        let summary = match &step.action {
            Action::CreateMachine {
                name,
                ownership,
                machine,
                proxmox_node,
                storage,
                tags,
                pool,
            } => {
                let placed = machines::Placed {
                    node: proxmox_node.as_str(),
                    storage,
                    tags,
                    pool,
                };
                self.create_machine(ctx, name, ownership, machine, &placed)
                    .await?
            }
            Action::PrepareNode { machine, version } => {
                self.prepare_node(ctx, machine, *version).await?
            }
            Action::ResetNode { machine } => self.reset_node(ctx, machine).await?,
            Action::DestroyMachine { machine, ownership } => {
                self.destroy_machine(ctx, machine, ownership).await?
            }
            Action::FenceMachine { machine, node } => {
                self.fence_machine(ctx, machine, node).await?
            }
            Action::InitControlPlane {
                machine,
                endpoint,
                version,
                scheduling,
                ..
            } => {
                self.init_control_plane(ctx, machine, endpoint, *version, scheduling)
                    .await?
            }
            Action::JoinNode {
                machine,
                role,
                scheduling,
                ..
            } => self.join_node(ctx, machine, *role, scheduling).await?,
            Action::LabelNodes { nodes } => self.label_nodes(ctx, nodes).await?,
            Action::TagMachines { machines } => self.tag_machines(ctx, machines).await?,
            Action::DeleteNode {
                node,
                role,
                machine,
            } => self.delete_node(ctx, node, *role, machine.as_ref()).await?,
            Action::UpgradeControlPlane { machine, to, .. } => {
                self.upgrade_control_plane(ctx, machine, *to).await?
            }
            Action::RenewCertificates { machines } => {
                self.renew_certificates(ctx, machines).await?
            }
            Action::Cordon { node } => self.cordon(ctx, node).await?,
            Action::Drain { node, deadline } => self.drain(ctx, node, *deadline).await?,
            Action::DeliverKubeconfig { flux } => self.deliver_kubeconfig(ctx, flux).await?,
            Action::DeleteCluster {
                machines,
                flux,
                records,
            } => {
                self.delete_cluster(ctx, machines, flux.as_ref(), records)
                    .await?
            }
        };
        let report = StepReport::new(step.kind(), summary);
        tracing::info!(
            cluster = ctx.cluster,
            action = step.name(),
            revision = ctx.revision,
            changes = ?report.changes(),
            "{report}"
        );
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
