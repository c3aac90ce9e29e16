//! The executor's removal of a whole cluster: its VMs destroyed, its Flux Secret withdrawn,
//! its pinned CA forgotten.

use crate::connect::Providers;
use crate::observed::FluxTarget;
use crate::plan::MachineRef;
use crate::providers::proxmox::ProxmoxProvider;

use super::access::{fenced, proxmox_failed};
use super::{ExecuteError, Executor, StepContext};

impl<Pr: Providers> Executor<Pr> {
    pub(super) async fn delete_cluster(
        &self,
        ctx: StepContext<'_>,
        machines: &[MachineRef],
        flux: Option<&FluxTarget>,
    ) -> Result<String, ExecuteError> {
        // A cluster whose VMs are all gone already (a deletion interrupted after the last
        // destroy) may have no Proxmox connection left to name: only its Secret remains.
        if !machines.is_empty() {
            self.destroy_all(ctx, machines).await?;
        }
        if let Some(flux) = flux {
            self.withdraw_kubeconfig(ctx, flux).await?;
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
