//! The config ISOs capstan uploads (a NoCloud `cidata` image per VM,
//! `capstan-config-<vm>-<vmid>.iso` on the connection's `isoStorage`): they hold a cluster's
//! CA keys, so none may outlive its use. The machine's prepare step deletes its own as soon
//! as the machine took it; deleting a cluster deletes those of its VMs; and a sweep every pass
//! ([`Executor::sweep_config_isos`]) deletes any left behind (a step that failed in between,
//! a VM destroyed by hand).
//!
//! # Guarantees
//! - The sweep deletes an ISO only when no VM of that id and name exists, or that VM is
//!   prepared (it took its config): the volumes are listed before the VMs, and a VM is cloned
//!   before its ISO is uploaded, so an ISO whose VM is being made right now is never taken for
//!   a leftover.
//! - Deleting what is gone succeeds.

use std::collections::BTreeMap;

use crate::connect::Providers;
use crate::fence::Fence;
use crate::model::{NodeName, VmId};
use crate::observed::PREPARED_TAG;
use crate::plan::MachineRef;
use crate::providers::proxmox::{
    Fenced, ProxmoxError, ProxmoxProvider, PveNode, StorageContent, VmInfo, VolumeId,
};
use crate::spec::Fleet;

use super::access::{fenced, proxmox_failed};
use super::{ExecuteError, Executor, StepContext};

/// How every config ISO's file name starts.
const PREFIX: &str = "capstan-config-";

/// The config ISO of machine `name` on VM `vmid`: one per VM, so a replacement never reuses
/// one.
pub(crate) fn file_name(name: &NodeName, vmid: VmId) -> String {
    format!("{PREFIX}{name}-{}.iso", vmid.0)
}

/// The machine name and VM id a config ISO's volume names, if it is one.
fn parse(volume: &VolumeId) -> Option<(String, VmId)> {
    let file = volume.as_str().rsplit('/').next()?;
    let stem = file.strip_prefix(PREFIX)?.strip_suffix(".iso")?;
    let (name, vmid) = stem.rsplit_once('-')?;
    Some((name.to_owned(), VmId(vmid.parse().ok()?)))
}

impl<Pr: Providers> Executor<Pr> {
    /// Deletes the config ISO of every machine of a deleted cluster (their VMs are gone; one
    /// already deleted is success).
    pub(super) async fn delete_config_isos(
        &self,
        ctx: StepContext<'_>,
        machines: &[MachineRef],
    ) -> Result<(), ExecuteError> {
        let Some(storage) = ctx.access.iso_storage.as_deref() else {
            return Ok(());
        };
        let proxmox = self.proxmox(ctx)?;
        fenced(ctx, "deleting the cluster's config ISOs")?;
        for machine in machines {
            let Some(vmid) = machine.vm_id else { continue };
            let node = PveNode(machine.proxmox_node.to_string());
            let volume = VolumeId::iso(storage, &file_name(&machine.name, vmid));
            proxmox
                .delete_volume(&node, &volume)
                .await
                .map_err(proxmox_failed("delete a config ISO"))?;
        }
        Ok(())
    }

    /// Deletes every config ISO on a connection's `isoStorage` whose VM is gone or already
    /// prepared, emptying a prepared VM's CD-ROM drive first; returns the volumes deleted.
    /// A connection that cannot be read is skipped (said at warn level): the next pass tries
    /// again.
    pub async fn sweep_config_isos(&self, fleet: &Fleet, fence: &Fence) -> Vec<VolumeId> {
        let mut deleted = Vec::new();
        for (connection, settings) in &fleet.proxmox {
            let (Some(storage), Some(client)) = (
                settings.iso_storage.as_deref(),
                self.providers.proxmox(connection),
            ) else {
                continue;
            };
            let client = Fenced::new(client.clone(), fence.clone());
            match sweep(&client, storage).await {
                Ok(swept) => deleted.extend(swept),
                Err(err) => tracing::warn!(
                    connection = %connection,
                    storage,
                    error = %crate::errors::error_chain(&err),
                    "config ISOs not swept"
                ),
            }
        }
        deleted
    }
}

/// The sweep of one connection's ISO storage.
async fn sweep<P: ProxmoxProvider>(
    client: &P,
    storage: &str,
) -> Result<Vec<VolumeId>, ProxmoxError> {
    let inventory = client.inventory().await?;
    // Listed before the VMs are read again: an ISO seen here had its VM cloned before.
    let mut isos: BTreeMap<VolumeId, PveNode> = BTreeMap::new();
    for host in inventory.nodes.iter().filter(|host| host.online) {
        let volumes = match client
            .storage_volumes(&host.name, storage, StorageContent::Iso)
            .await
        {
            Ok(volumes) => volumes,
            // A node without that storage holds none of its ISOs.
            Err(ProxmoxError::StorageNotFound { .. }) => continue,
            Err(err) => return Err(err),
        };
        for volume in volumes.into_iter().filter(|v| parse(&v.volid).is_some()) {
            isos.entry(volume.volid)
                .or_insert_with(|| host.name.clone());
        }
    }
    if isos.is_empty() {
        return Ok(Vec::new());
    }
    let vms: BTreeMap<VmId, VmInfo> = client
        .inventory()
        .await?
        .vms
        .into_iter()
        .map(|vm| (vm.vmid, vm))
        .collect();
    let mut deleted = Vec::new();
    for (volume, node) in isos {
        let Some((name, vmid)) = parse(&volume) else {
            continue;
        };
        match vms.get(&vmid).filter(|vm| vm.name == name) {
            Some(vm) if !is_prepared(vm) => continue,
            Some(vm) => client.detach_cdrom(&vm.vm_ref(), &volume).await?,
            None => {}
        }
        client.delete_volume(&node, &volume).await?;
        tracing::info!(%volume, vm = vmid.0, "deleted a config ISO left behind");
        deleted.push(volume);
    }
    Ok(deleted)
}

fn is_prepared(vm: &VmInfo) -> bool {
    vm.tags.iter().any(|tag| tag == PREPARED_TAG)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_iso_names_its_machine_and_vm() {
        let name = NodeName::from("capstan-talos-cp-x7k2q");
        let file = file_name(&name, VmId(4312));
        assert_eq!(file, "capstan-config-capstan-talos-cp-x7k2q-4312.iso");
        let volume = VolumeId::iso("local", &file);
        assert_eq!(
            parse(&volume),
            Some(("capstan-talos-cp-x7k2q".to_owned(), VmId(4312)))
        );
        for other in [
            "local:iso/talos.iso",
            "local:iso/capstan-config-x.iso",
            "local:iso/capstan-config-a-b.img",
        ] {
            let volume = VolumeId::parse(other).expect("volume");
            assert_eq!(parse(&volume), None, "{other}");
        }
    }
}
