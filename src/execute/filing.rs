//! Filing VMs in place (`tag-machines`): the operator's tags and the resource pool, through
//! the Proxmox API, with no machine created or destroyed.

use crate::connect::Providers;
use crate::plan::Filing;
use crate::providers::proxmox::{ExpectedVm, ProxmoxProvider, VmFiling};

use super::access::{proxmox_failed, vm_ref};
use super::{ExecuteError, Executor, StepContext};

impl<Pr: Providers> Executor<Pr> {
    /// Files each VM of `machines` as the file declares: its operator tags and its resource
    /// pool (made first when missing and the connection allows it). Ownership is checked on
    /// each VM before anything changes; a VM already gone is skipped.
    pub(super) async fn tag_machines(
        &self,
        ctx: StepContext<'_>,
        machines: &[Filing],
    ) -> Result<String, ExecuteError> {
        let proxmox = self.proxmox(ctx)?;
        let mut pools: Vec<&str> = Vec::new();
        for filing in machines {
            if let Some(pool) = filing.pool.as_deref()
                && !pools.contains(&pool)
            {
                proxmox
                    .ensure_pool(pool, ctx.access.create_pools)
                    .await
                    .map_err(proxmox_failed("resource pool"))?;
                pools.push(pool);
            }
        }
        let mut done = Vec::new();
        for filing in machines {
            let expected = ExpectedVm {
                vm: vm_ref(&filing.machine)?,
                name: filing.machine.name.clone(),
                ownership: filing.ownership.clone(),
            };
            let change = VmFiling {
                tags: filing.tags.clone(),
                pool: filing.pool.clone(),
                remove_foreign: filing.remove_foreign,
            };
            proxmox
                .place_vm(&expected, &change)
                .await
                .map_err(proxmox_failed("file in place (tags, pool)"))?;
            done.push(format!(
                "VM {} ({}): {}",
                expected.vm.vmid, filing.machine.name, filing.changes
            ));
        }
        Ok(format!(
            "filed in place, no machine replaced: {}",
            done.join("; ")
        ))
    }
}
