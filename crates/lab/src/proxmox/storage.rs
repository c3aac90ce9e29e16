//! Storages' content in the simulated Proxmox: the volumes uploaded to file-based storages
//! (ISO images, container templates, import images) with their bytes, the listing of a
//! storage's content, and volume deletion, with the checks and texts of `pve-storage`
//! (`PVE/API2/Storage/Content.pm`, `PVE/Storage.pm`, `PVE/Storage/Plugin.pm`).
//!
//! # Invariants
//! - A volume on a local storage belongs to one node; on a shared storage, to all of them
//!   (its key's node is empty).
//! - Uploaded bytes are kept exactly as received, so the lab's VMs can read an attached ISO.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::params::Params;
use super::reply::Reply;
use super::state::{ApiFail, Shared, SimState};
use super::tasks::{TaskEnd, start_task};

/// Storage types that keep volumes as files, which can take uploads (`$scfg->{path}` set).
const FILE_KINDS: &[&str] = &["dir", "nfs", "cifs", "cephfs", "glusterfs", "btrfs"];

impl SimState {
    /// Whose volumes a storage's are on `node`: the node's, or everyone's when shared.
    pub fn volume_scope(&self, storage: &str, node: &str) -> String {
        if self.storages.get(storage).is_some_and(|s| s.shared) {
            String::new()
        } else {
            node.to_owned()
        }
    }

    /// The bytes of volume `volid` as `node` sees it.
    pub fn volume_bytes(&self, node: &str, volid: &str) -> Option<Arc<Vec<u8>>> {
        let storage = volid.split_once(':')?.0;
        let scope = self.volume_scope(storage, node);
        self.store
            .volumes
            .get(&(scope, volid.to_owned()))
            .map(|volume| volume.bytes.clone())
    }

    /// Bytes used on `storage` (on `node` unless shared): VM disks and uploaded volumes.
    pub fn storage_used(&self, storage: &str, node: &str) -> u64 {
        let shared = self.storages.get(storage).is_some_and(|s| s.shared);
        let prefix = format!("{storage}:");
        let disks: u64 = self
            .vms
            .values()
            .filter(|vm| shared || vm.node == node)
            .flat_map(|vm| vm.volumes())
            .filter(|(_, on, _)| on == storage)
            .map(|(_, _, size)| size)
            .sum();
        let scope = self.volume_scope(storage, node);
        let files: u64 = self
            .store
            .volumes
            .iter()
            .filter(|((at, volid), _)| *at == scope && volid.starts_with(&prefix))
            .map(|(_, volume)| volume.bytes.len() as u64)
            .sum();
        disks + files
    }

    /// Whether every volume of a VM config (disks, and CD-ROMs holding a volume such as the
    /// cloud-init drive) is on shared storage, as qemu-server's clone check walks them: a
    /// volume on a storage that does not exist, or a path, counts as local.
    pub fn volumes_shared(&self, config: &BTreeMap<String, String>) -> bool {
        config
            .iter()
            .filter(|(key, _)| is_volume_key(key))
            .filter_map(|(_, value)| value.split(',').next())
            .filter(|volume| !volume.is_empty() && *volume != "none" && *volume != "cdrom")
            .all(|volume| {
                volume
                    .split_once(':')
                    .and_then(|(storage, _)| self.storages.get(storage))
                    .is_some_and(|storage| storage.shared)
            })
    }

    /// The storage `name`, or the error `storage_check_enabled` gives.
    pub fn storage_named(&self, name: &str) -> Result<&super::state::StorageState, ApiFail> {
        self.storages
            .get(name)
            .ok_or_else(|| ApiFail::die(format!("storage '{name}' does not exist")))
    }
}

/// `ide0`, `sata1`, `scsi0`, `virtio3`, `efidisk0`, `tpmstate0`: a VM's volume keys.
pub(super) fn is_volume_key(key: &str) -> bool {
    if key == "efidisk0" || key == "tpmstate0" {
        return true;
    }
    ["ide", "sata", "scsi", "virtio"].iter().any(|bus| {
        key.strip_prefix(bus)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Whether uploads can go to a storage of this type.
pub(super) fn is_file_based(kind: &str) -> bool {
    FILE_KINDS.contains(&kind)
}

/// Where a file-based storage keeps its files (`local` is `/var/lib/vz`, others are mounted
/// below `/mnt/pve`).
pub(super) fn storage_path(storage: &str) -> String {
    if storage == "local" {
        "/var/lib/vz".into()
    } else {
        format!("/mnt/pve/{storage}")
    }
}

/// The directory of a content type below a storage's path.
pub(super) fn content_dir(content: &str) -> &'static str {
    match content {
        "iso" => "template/iso",
        "vztmpl" => "template/cache",
        _ => "import",
    }
}

/// `GET /nodes/{node}/storage/{storage}/content`: uploaded volumes and VM disks, filtered by
/// content type and owner VMID.
pub(super) fn content_list(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let storage = p.text("storage").unwrap_or_default();
    state.storage_named(storage)?;
    let wanted = p.text("content");
    let vmid = p.int("vmid");
    let prefix = format!("{storage}:");
    let scope = state.volume_scope(storage, p.node());
    let mut list = Vec::new();
    if vmid.is_none() {
        for ((at, volid), volume) in &state.store.volumes {
            if *at != scope
                || !volid.starts_with(&prefix)
                || wanted.is_some_and(|c| c != volume.content)
            {
                continue;
            }
            list.push(json!({
                "volid": volid,
                "format": volume_format(volid, &volume.content),
                "size": volume.bytes.len(),
                "ctime": volume.ctime,
            }));
        }
    }
    if wanted.is_none_or(|c| c == "images") {
        list.extend(disk_entries(&state, storage, p.node(), vmid));
    }
    Reply::data(Value::Array(list))
}

/// The VM disks on `storage` as its content list shows them.
fn disk_entries(state: &SimState, storage: &str, node: &str, vmid: Option<i64>) -> Vec<Value> {
    let shared = state.storages.get(storage).is_some_and(|s| s.shared);
    let prefix = format!("{storage}:");
    let mut entries = Vec::new();
    for (id, vm) in &state.vms {
        if !(shared || vm.node == node) || vmid.is_some_and(|v| v != i64::from(*id)) {
            continue;
        }
        for (key, value) in &vm.config {
            if !is_volume_key(key) || value.contains("media=cdrom") {
                continue;
            }
            let volid = value.split(',').next().unwrap_or_default();
            if !volid.starts_with(&prefix) {
                continue;
            }
            let size = value
                .split(',')
                .find_map(|part| part.strip_prefix("size="))
                .and_then(super::state::parse_size)
                .unwrap_or(0);
            entries.push(json!({"volid": volid, "format": "raw", "size": size, "vmid": id}));
        }
    }
    entries
}

/// The format `pve-storage` gives a file volume: `iso`, `t<compression>` for container
/// templates, the extension for import images.
fn volume_format(volid: &str, content: &str) -> String {
    let extension = volid.rsplit('.').next().unwrap_or_default().to_lowercase();
    match content {
        "iso" => "iso".into(),
        "vztmpl" => format!("t{extension}"),
        _ => extension,
    }
}

/// `DELETE /nodes/{node}/storage/{storage}/content/{volume}`: an `imgdel` task that removes an
/// uploaded volume; a volume already gone is a warning, as `Plugin::free_image` gives.
pub(super) fn delete_volume(
    shared: &Arc<Shared>,
    p: &Params,
    user: &str,
) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let node = p.node().to_owned();
    let volume = p.text("volume").unwrap_or_default();
    let (storage, volid) = real_volume_id(p.text("storage"), volume)?;
    state.storage_named(&storage)?;
    let volname = volid.split_once(':').map(|(_, v)| v).unwrap_or_default();
    let Some((content, file)) = volname.split_once('/') else {
        if state.vms.values().any(|vm| {
            vm.config
                .values()
                .any(|value| value.split(',').next() == Some(volid.as_str()))
        }) {
            return Err(ApiFail {
                status: 501,
                message: "the lab does not delete VM disks through the storage API".into(),
                errors: BTreeMap::new(),
            });
        }
        return Err(ApiFail::die(format!(
            "unable to parse directory volume name '{volname}'"
        )));
    };
    if !matches!(content, "iso" | "vztmpl" | "import") || file.is_empty() || file.contains('/') {
        return Err(ApiFail::die(format!(
            "unable to parse directory volume name '{volname}'"
        )));
    }
    let scope = state.volume_scope(&storage, &node);
    let path = format!("{}/{}/{file}", storage_path(&storage), content_dir(content));
    let upid = start_task(
        shared,
        &mut state,
        &node,
        "imgdel",
        &storage,
        user,
        shared.durations.config,
        Vec::new(),
        Box::new(move |state, injected| {
            if let Some(message) = injected {
                return TaskEnd::failed(message);
            }
            let mut end = TaskEnd::default();
            if state
                .store
                .volumes
                .remove(&(scope, volid.clone()))
                .is_none()
            {
                end.log.push(format!("disk image '{path}' does not exist"));
                end.warnings = 1;
            }
            end.log.push(format!("Removed volume '{volid}'"));
            end
        }),
    );
    Reply::data(Value::from(upid))
}

/// A volume given as a full id (`local:iso/x.iso`) or as a name with the storage apart, as
/// `Content.pm`'s `real_volume_id` takes it: (storage, volume id).
fn real_volume_id(storage: Option<&str>, volume: &str) -> Result<(String, String), ApiFail> {
    match volume.split_once(':') {
        Some((sid, name)) => {
            if sid.is_empty() || name.is_empty() {
                return Err(ApiFail::param(
                    "volume",
                    format!("unable to parse volume ID '{volume}'"),
                ));
            }
            if let Some(storage) = storage
                && storage != sid
            {
                return Err(ApiFail::param(
                    "volume",
                    format!("storage ID mismatch ({sid} != {storage})"),
                ));
            }
            Ok((sid.to_owned(), volume.to_owned()))
        }
        None => {
            let storage = storage.ok_or_else(|| {
                ApiFail::param("volume", "no storage specified - incomplete volume ID")
            })?;
            Ok((storage.to_owned(), format!("{storage}:{volume}")))
        }
    }
}

/// A storage's `content` as its listing shows it: the types, comma-separated and sorted.
pub(super) fn content_text(content: &[String]) -> String {
    let mut sorted = content.to_vec();
    sorted.sort();
    sorted.join(",")
}

/// Whether a config has a cloud-init drive (`<storage>:vm-<id>-cloudinit` on a CD-ROM slot).
pub(super) fn has_cloud_init_drive(config: &BTreeMap<String, String>) -> bool {
    config
        .iter()
        .filter(|(key, _)| is_volume_key(key))
        .any(|(_, value)| {
            value
                .split(',')
                .next()
                .is_some_and(|volume| volume.ends_with("cloudinit"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_are_named_fully_or_with_the_storage_apart() {
        assert_eq!(
            real_volume_id(Some("local"), "iso/a.iso").expect("name"),
            ("local".into(), "local:iso/a.iso".into())
        );
        assert_eq!(
            real_volume_id(None, "local:iso/a.iso").expect("id"),
            ("local".into(), "local:iso/a.iso".into())
        );
        let mismatch = real_volume_id(Some("nfs"), "local:iso/a.iso").expect_err("mismatch");
        assert!(mismatch.errors["volume"].contains("mismatch"));
        assert!(real_volume_id(None, "iso/a.iso").is_err());
    }

    #[test]
    fn formats_follow_the_content_type() {
        assert_eq!(volume_format("local:iso/a.iso", "iso"), "iso");
        assert_eq!(
            volume_format("local:vztmpl/debian.tar.zst", "vztmpl"),
            "tzst"
        );
        assert_eq!(content_text(&["iso".into(), "backup".into()]), "backup,iso");
    }
}
