//! The executor's steps on cluster membership, each through the cluster's distribution
//! ([`crate::execute::distribution`]): the first control plane, a join, a Node's deletion (after what
//! its member takes with it), an in-place upgrade, certificate renewal.

use crate::connect::Providers;
use crate::execute::distribution::Distribution as _;
use crate::model::{NodeName, Role};
use crate::observed::RETIRING_TAG;
use crate::plan::{ActionKind, MachineRef};
use crate::providers::kube::ClusterClient;
use crate::providers::proxmox::ProxmoxProvider;
use crate::scheduling::NodeScheduling;
use crate::spec::{Endpoint, KubeVersion};

use super::access::{api_failed, fenced, node_target, proxmox_failed, run_steps};
use super::{ExecuteError, Executor, StepContext};

impl<Pr: Providers> Executor<Pr> {
    pub(super) async fn init_control_plane(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        endpoint: &Endpoint,
        version: KubeVersion,
        scheduling: &NodeScheduling,
    ) -> Result<String, ExecuteError> {
        let distribution = ctx.distribution();
        distribution
            .init(self, ctx, machine, endpoint, version, scheduling)
            .await
    }

    pub(super) async fn join_node(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        role: Role,
        scheduling: &NodeScheduling,
    ) -> Result<String, ExecuteError> {
        ctx.distribution()
            .join(self, ctx, machine, role, scheduling)
            .await
    }

    /// Tags the VM retiring, lets the member leave (kubeadm: its etcd member), deletes the
    /// Node.
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
        ctx.distribution().leave(self, ctx, node, role).await?;
        let api = self.api(ctx, ActionKind::DeleteNode).await?;
        fenced(ctx, format_args!("deleting Node {node}"))?;
        api.delete_node(node)
            .await
            .map_err(api_failed(ActionKind::DeleteNode.name()))?;
        Ok(format!("Node {node} deleted"))
    }

    pub(super) async fn upgrade_control_plane(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        to: KubeVersion,
    ) -> Result<String, ExecuteError> {
        let distribution = ctx.distribution();
        distribution.upgrade_in_place(self, ctx, machine, to).await
    }

    pub(super) async fn renew_certificates(
        &self,
        ctx: StepContext<'_>,
        machines: &[MachineRef],
    ) -> Result<String, ExecuteError> {
        let distribution = ctx.distribution();
        let nodes = self.nodes(ctx)?;
        for machine in machines {
            let target = node_target(machine)?;
            let steps = distribution.certificate_renewal();
            run_steps(&nodes, ActionKind::RenewCertificates, &target, &steps).await?;
        }
        Ok(distribution.renewed(machines.len()))
    }
}
