//! Where templates keep their volumes, and what their descriptions say: read once per template
//! from its config and kept for as long as the template is seen at the same node and VMID, so
//! a pass reads no config for templates it already knows.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use super::error::ProxmoxError;
use super::wire::{flag, text, uint};
use super::{PveNode, TemplateInfo, VmRef};
use crate::model::VmId;

/// What a template's config said when it was first read.
#[derive(Debug, Clone)]
struct KnownTemplate {
    /// The storages of its volumes.
    storages: Vec<String>,
    /// Its description (Proxmox's notes).
    description: String,
    /// Whether its `hotplug` option includes memory.
    memory_hotplug: bool,
    /// Whether it has a cloud-init drive.
    cloud_init_drive: bool,
}

/// What each known template's config said, by (node, VMID).
type KnownVolumes = BTreeMap<(String, u32), KnownTemplate>;

/// The storages each known template's volumes are on; shared by the clones of a client.
#[derive(Debug, Clone, Default)]
pub(super) struct TemplateCache {
    volumes: Arc<Mutex<KnownVolumes>>,
    /// The `shared` flag of each storage, as last listed.
    shared: Arc<Mutex<BTreeMap<String, bool>>>,
}

impl TemplateCache {
    /// The templates among `/cluster/resources` `vm_entries` on an online node, with their
    /// volumes' storages (read through `read_config` the first time each is seen);
    /// `storages` are the listed storages' `shared` flags.
    pub(super) async fn templates<F, Fut>(
        &self,
        vm_entries: &[&Value],
        storages: &BTreeMap<String, bool>,
        online: impl Fn(&str) -> bool,
        read_config: F,
    ) -> Result<Vec<TemplateInfo>, ProxmoxError>
    where
        F: Fn(VmRef) -> Fut,
        Fut: Future<Output = Result<Value, ProxmoxError>>,
    {
        storages.clone_into(&mut self.shared.lock().unwrap_or_else(PoisonError::into_inner));
        let mut templates = Vec::new();
        let mut seen = BTreeSet::new();
        for entry in vm_entries.iter().filter(|entry| flag(entry, "template")) {
            let (Some(vmid), Some(node)) = (uint(entry, "vmid"), text(entry, "node")) else {
                continue;
            };
            let Ok(vmid) = u32::try_from(vmid) else {
                continue;
            };
            if !online(&node) {
                continue;
            }
            let vm = VmRef {
                node: PveNode(node.clone()),
                vmid: VmId(vmid),
            };
            let key = (node, vmid);
            let known = self.known().get(&key).cloned();
            let known = match known {
                Some(known) => known,
                None => {
                    let known = match read_config(vm.clone()).await {
                        Ok(config) => {
                            let hardware = super::VmHardware::from_config(&config);
                            KnownTemplate {
                                storages: volume_storages(&config),
                                description: text(&config, "description").unwrap_or_default(),
                                memory_hotplug: hardware.memory_hotplug,
                                cloud_init_drive: hardware.cloud_init_drive,
                            }
                        }
                        Err(err) if err.is_not_found() => continue,
                        Err(err) => return Err(err),
                    };
                    self.known().insert(key.clone(), known.clone());
                    known
                }
            };
            seen.insert(key);
            templates.push(TemplateInfo {
                vm,
                name: text(entry, "name").unwrap_or_default(),
                storages: known.storages,
                tags: text(entry, "tags")
                    .map(|tags| super::ownership::split_tags(&tags))
                    .unwrap_or_default(),
                description: known.description,
                memory_hotplug: known.memory_hotplug,
                cloud_init_drive: known.cloud_init_drive,
            });
        }
        // A template gone (or moved) is read again if it comes back.
        self.known().retain(|key, _| seen.contains(key));
        templates.sort_by_key(|template| template.vm.vmid);
        Ok(templates)
    }

    fn known(&self) -> MutexGuard<'_, KnownVolumes> {
        self.volumes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The copy of `template` a clone to `target` starts from: the one on `target` (a local
    /// clone always works), else one whose volumes are all on shared storage (as last
    /// observed), else the one with the lowest VMID.
    pub(super) fn clone_source(
        &self,
        listing: &[Value],
        template: &str,
        target: &PveNode,
    ) -> Option<VmRef> {
        let known = self.known();
        let shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        let on_shared_storage = |node: &str, vmid: u32| {
            known
                .get(&(node.to_owned(), vmid))
                .is_some_and(|known| known.storages.iter().all(|s| shared.get(s) == Some(&true)))
        };
        listing
            .iter()
            .filter(|entry| {
                flag(entry, "template") && text(entry, "name").as_deref() == Some(template)
            })
            .filter_map(|entry| {
                let node = text(entry, "node")?;
                let vmid = u32::try_from(uint(entry, "vmid")?).ok()?;
                Some((
                    node != target.0,
                    !on_shared_storage(&node, vmid),
                    vmid,
                    node,
                ))
            })
            .min()
            .map(|(_, _, vmid, node)| VmRef {
                node: PveNode(node),
                vmid: VmId(vmid),
            })
    }
}

/// The storage of every volume of a VM config, as Proxmox's clone checks them: each disk and
/// each CD-ROM that holds a volume (the cloud-init drive), not an empty drive nor the host's
/// drive (`none`, `cdrom`).
pub(super) fn volume_storages(config: &Value) -> Vec<String> {
    let Some(config) = config.as_object() else {
        return Vec::new();
    };
    let storages: BTreeSet<String> = config
        .iter()
        .filter(|(key, _)| is_volume_key(key))
        .filter_map(|(_, value)| value.as_str())
        .filter_map(|value| {
            let first = value.split(',').next()?;
            let volume = first.strip_prefix("file=").unwrap_or(first);
            if volume.is_empty() || volume == "none" || volume == "cdrom" {
                return None;
            }
            // `storage:volume`; a path (`/dev/sdb`) is on no storage: local to its node.
            Some(match volume.split_once(':') {
                Some((storage, _)) if !volume.starts_with('/') => storage.to_owned(),
                _ => String::new(),
            })
        })
        .collect();
    storages.into_iter().collect()
}

/// `ide0`, `sata1`, `scsi0`, `virtio3`, `efidisk0`, `tpmstate0`: the keys Proxmox walks for a
/// VM's volumes.
fn is_volume_key(key: &str) -> bool {
    if key == "efidisk0" || key == "tpmstate0" {
        return true;
    }
    ["ide", "sata", "scsi", "virtio"].iter().any(|bus| {
        key.strip_prefix(bus)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_volume_counts_but_empty_and_host_drives() {
        let config = serde_json::json!({
            "scsi0": "local-lvm:base-9000-disk-0,size=20G",
            "ide2": "cephfs:vm-9000-cloudinit,media=cdrom",
            "ide0": "none,media=cdrom",
            "sata0": "cdrom,media=cdrom",
            "virtio1": "/dev/disk/by-id/ata-x,size=1T",
            "efidisk0": "file=ceph:vm-9000-disk-1,efitype=4m",
            "scsihw": "virtio-scsi-single",
            "unused0": "nfs:vm-9000-disk-9",
        });
        assert_eq!(
            volume_storages(&config),
            vec![
                String::new(),
                "ceph".to_owned(),
                "cephfs".to_owned(),
                "local-lvm".to_owned()
            ]
        );
    }
}
