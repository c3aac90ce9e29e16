//! The executor's steps that take machines and clusters apart: a drain (cordon, evictions
//! under the budgets, each round fenced), a Node's deletion (after its etcd member), a
//! cluster's deletion (its VMs destroyed, its Flux Secret withdrawn, its pinned CA forgotten).

use std::time::Duration;

use jiff::Timestamp;

use crate::connect::Providers;
use crate::model::{NodeName, Role};
use crate::observed::{DRAIN_STARTED_ANNOTATION, RETIRING_TAG};
use crate::plan::{ActionKind, MachineRef};
use crate::providers::flux::KubeconfigDelivery;
use crate::providers::kube::{ClusterClient, DrainOptions};
use crate::providers::proxmox::ProxmoxProvider;

use super::{
    ExecuteError, Executor, StepContext, api_failed, fenced, flux_target, k3s, kubeadm_failed,
    proxmox_failed,
};

impl<Pr: Providers> Executor<Pr> {
    pub(super) async fn drain(
        &self,
        ctx: StepContext<'_>,
        node: &NodeName,
        deadline: Timestamp,
    ) -> Result<String, ExecuteError> {
        let api = self.api(ctx, ActionKind::Drain).await?;
        let already = ctx
            .observed
            .nodes
            .get(node)
            .and_then(|n| n.drain.as_ref())
            .is_some();
        if !already {
            let now = self.clock.now().to_string();
            fenced(ctx, format_args!("marking the drain of {node}"))?;
            api.annotate(node, DRAIN_STARTED_ANNOTATION, Some(&now))
                .await
                .map_err(api_failed("mark drain start"))?;
        }
        let left = self.clock.now().duration_until(deadline);
        let timeout = Duration::try_from(left).unwrap_or(Duration::ZERO);
        let report = api
            .drain(node, &DrainOptions::new(timeout).fenced(ctx.fence.clone()))
            .await
            .map_err(api_failed(ActionKind::Drain.name()))?;
        Ok(format!(
            "{node} drained: {} pod(s) evicted, {} left in place (DaemonSet, mirror)",
            report.evicted.len(),
            report.skipped.len()
        ))
    }

    pub(super) async fn delete_node(
        &self,
        ctx: StepContext<'_>,
        node: &NodeName,
        role: Role,
        machine: Option<&MachineRef>,
    ) -> Result<String, ExecuteError> {
        if let Some(machine) = machine {
            // The tag first: from here on the VM is on its way out, even if we crash now.
            let expected = self.expected(ctx, machine)?;
            self.proxmox(ctx)?
                .add_tag(&expected, RETIRING_TAG)
                .await
                .map_err(proxmox_failed("tag retiring"))?;
        }
        // K3s servers share a datastore: there is no etcd member to remove.
        if role == Role::ControlPlane && !k3s::is_k3s(ctx) {
            let healthy = self.healthy_control_plane(ctx, ActionKind::DeleteNode, node)?;
            self.kubeadm(ctx)?
                .remove_etcd_member(&healthy, node)
                .await
                .map_err(kubeadm_failed("remove etcd member"))?;
        }
        let api = self.api(ctx, ActionKind::DeleteNode).await?;
        fenced(ctx, format_args!("deleting Node {node}"))?;
        api.delete_node(node)
            .await
            .map_err(api_failed(ActionKind::DeleteNode.name()))?;
        Ok(format!("Node {node} deleted"))
    }

    pub(super) async fn delete_cluster(
        &self,
        ctx: StepContext<'_>,
        machines: &[MachineRef],
        flux: Option<&crate::observed::FluxTarget>,
    ) -> Result<String, ExecuteError> {
        // A cluster whose VMs are all gone already (a deletion interrupted after the last
        // destroy) may have no Proxmox connection left to name: only its Secret remains.
        if !machines.is_empty() {
            self.destroy_all(ctx, machines).await?;
        }
        if let Some(flux) = flux {
            let deliverer = self.deliverer(flux)?;
            let target = flux_target(ctx, flux);
            fenced(ctx, "withdrawing the Flux Secret")?;
            deliverer
                .withdraw(&target)
                .await
                .map_err(|err| ExecuteError::Flux(Box::new(err)))?;
        }
        // Last: a new cluster of this name will have a CA of its own.
        fenced(ctx, "forgetting the cluster's pinned CA")?;
        self.providers
            .forget_ca(ctx.cluster, flux.map(|f| f.cluster.as_str()))
            .await
            .map_err(|source| ExecuteError::ForgetCa(Box::new(source)))?;
        Ok(format!(
            "cluster deleted: {} VM(s) destroyed{}",
            machines.len(),
            if flux.is_some() {
                ", Flux Secret withdrawn"
            } else {
                ""
            }
        ))
    }

    /// Destroys every VM of a removed cluster. No reset first: the whole cluster goes, so
    /// there is no membership to leave, and the VM's distribution is no longer known.
    async fn destroy_all(
        &self,
        ctx: StepContext<'_>,
        machines: &[MachineRef],
    ) -> Result<(), ExecuteError> {
        let proxmox = self.proxmox(ctx)?;
        for machine in machines {
            let expected = self.expected(ctx, machine)?;
            proxmox
                .destroy_vm(&expected)
                .await
                .map_err(proxmox_failed("destroy"))?;
        }
        Ok(())
    }
}
