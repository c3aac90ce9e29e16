//! Storage volumes through the Proxmox API: the content types of a storage, its volumes,
//! ISO images uploaded (`POST /nodes/{node}/storage/{storage}/upload`, `multipart/form-data`,
//! `content=iso`) and deleted, and a VM's CD-ROM drive `ide2` pointed at one and emptied
//! (`none,media=cdrom`).
//!
//! These are how a per-VM NoCloud seed image reaches a VM without SSH or snippets: snippets
//! cannot be uploaded through the API, ISO images can.
//!
//! # Invariants
//! - Nothing is sent for an image whose file name is not a plain `*.iso` name (Proxmox would
//!   rewrite it, and the volume id capstan expects would not exist) or whose size is past
//!   [`ISO_UPLOAD_MAX_BYTES`].
//! - A CD-ROM drive is emptied only when it holds the volume the caller names.

use std::collections::BTreeSet;

use serde_json::Value;

use super::api::{Method, Params, Retry, segment};
use super::client::ProxmoxClient;
use super::error::ProxmoxError;
use super::wire::{text, uint, vm_path};
use super::{PveNode, VmRef};
use crate::model::VmId;

/// The largest ISO image capstan uploads: a NoCloud seed (machine config, metadata, network
/// config) is tens of kilobytes; anything near this is a bug, not a seed.
pub const ISO_UPLOAD_MAX_BYTES: usize = 8 << 20;
/// The longest file name Proxmox takes (`filename`'s `maxLength`).
const FILE_NAME_MAX: usize = 255;
/// The CD-ROM drive seeds go in.
const CDROM_DRIVE: &str = "ide2";

/// What a storage may hold (Proxmox's content types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StorageContent {
    /// VM disk images.
    Images,
    /// Container root directories.
    Rootdir,
    /// ISO images.
    Iso,
    /// Container templates.
    Vztmpl,
    /// Backups.
    Backup,
    /// Snippets (hook scripts, cloud-init files).
    Snippets,
    /// Images to import.
    Import,
}

impl StorageContent {
    /// The name Proxmox uses.
    pub fn as_str(self) -> &'static str {
        match self {
            StorageContent::Images => "images",
            StorageContent::Rootdir => "rootdir",
            StorageContent::Iso => "iso",
            StorageContent::Vztmpl => "vztmpl",
            StorageContent::Backup => "backup",
            StorageContent::Snippets => "snippets",
            StorageContent::Import => "import",
        }
    }

    /// The content type Proxmox calls `name`, if capstan knows it.
    pub fn parse(name: &str) -> Option<Self> {
        [
            StorageContent::Images,
            StorageContent::Rootdir,
            StorageContent::Iso,
            StorageContent::Vztmpl,
            StorageContent::Backup,
            StorageContent::Snippets,
            StorageContent::Import,
        ]
        .into_iter()
        .find(|content| content.as_str() == name)
    }
}

impl std::fmt::Display for StorageContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A volume id, `<storage>:<name>` (`local:iso/seed.iso`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VolumeId(String);

impl VolumeId {
    /// Parses `<storage>:<name>`; `None` when either part is empty.
    pub fn parse(text: &str) -> Option<Self> {
        let (storage, name) = text.split_once(':')?;
        (!storage.is_empty() && !name.is_empty()).then(|| VolumeId(text.to_owned()))
    }

    /// The ISO image `file_name` on `storage`.
    pub fn iso(storage: &str, file_name: &str) -> Self {
        VolumeId(format!("{storage}:iso/{file_name}"))
    }

    /// The storage it is on.
    pub fn storage(&self) -> &str {
        self.0
            .split_once(':')
            .map(|(storage, _)| storage)
            .unwrap_or_default()
    }

    /// The whole id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for VolumeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A volume as a storage's content list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredVolume {
    /// Its id.
    pub volid: VolumeId,
    /// Its format (`iso`, `raw`, `qcow2`, ...).
    pub format: String,
    /// Its size, bytes.
    pub size_bytes: u64,
    /// The VM it belongs to, for disks.
    pub vmid: Option<VmId>,
}

/// Why `name` cannot be uploaded as an ISO image under that exact name, if it cannot.
fn iso_name_problem(name: &str) -> Option<String> {
    if name.len() > FILE_NAME_MAX {
        return Some(format!(
            "the name is longer than {FILE_NAME_MAX} characters"
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Some(format!(
            "the name holds `{}`; use only letters, digits, `_`, `.` and `-` (no path)",
            bad.escape_default()
        ));
    }
    match name.strip_suffix(".iso") {
        Some(stem) if !stem.is_empty() => None,
        _ => Some("the name must end in `.iso` after at least one character".into()),
    }
}

/// Whether an error says the storage does not exist on the node.
fn is_missing_storage(err: &ProxmoxError) -> bool {
    match err {
        ProxmoxError::Api {
            status, message, ..
        } => {
            (*status == 500 && message.contains("does not exist"))
                || message.contains("No such storage")
        }
        _ => false,
    }
}

impl ProxmoxClient {
    pub(super) async fn read_storage_content(
        &self,
        node: &PveNode,
        storage: &str,
    ) -> Result<BTreeSet<StorageContent>, ProxmoxError> {
        let path = format!("/nodes/{}/storage", segment(&node.0));
        let params: Params = vec![("storage".into(), storage.into())];
        let entries: Vec<Value> = self
            .api
            .call(Method::Get, &path, &params, Retry::Transient)
            .await
            .map_err(|err| storage_error("read the content types of", node, storage, err))?;
        let entry = entries
            .iter()
            .find(|entry| text(entry, "storage").as_deref() == Some(storage))
            .ok_or_else(|| ProxmoxError::StorageNotFound {
                node: node.0.clone(),
                storage: storage.to_owned(),
            })?;
        Ok(text(entry, "content")
            .unwrap_or_default()
            .split(',')
            .filter_map(|name| StorageContent::parse(name.trim()))
            .collect())
    }

    pub(super) async fn list_volumes(
        &self,
        node: &PveNode,
        storage: &str,
        content: StorageContent,
    ) -> Result<Vec<StoredVolume>, ProxmoxError> {
        let path = format!(
            "/nodes/{}/storage/{}/content",
            segment(&node.0),
            segment(storage)
        );
        let params: Params = vec![("content".into(), content.as_str().into())];
        let entries: Vec<Value> = self
            .api
            .call(Method::Get, &path, &params, Retry::Transient)
            .await
            .map_err(|err| storage_error("list the volumes of", node, storage, err))?;
        let mut volumes: Vec<StoredVolume> = entries
            .iter()
            .filter_map(|entry| {
                Some(StoredVolume {
                    volid: VolumeId::parse(&text(entry, "volid")?)?,
                    format: text(entry, "format").unwrap_or_default(),
                    size_bytes: uint(entry, "size").unwrap_or(0),
                    vmid: uint(entry, "vmid")
                        .and_then(|v| u32::try_from(v).ok())
                        .map(VmId),
                })
            })
            .collect();
        volumes.sort_by(|a, b| a.volid.cmp(&b.volid));
        Ok(volumes)
    }

    pub(super) async fn send_iso(
        &self,
        node: &PveNode,
        storage: &str,
        file_name: &str,
        image: &[u8],
    ) -> Result<VolumeId, ProxmoxError> {
        let refuse = |reason: String| ProxmoxError::IsoRefused {
            node: node.0.clone(),
            storage: storage.to_owned(),
            name: file_name.escape_default().to_string(),
            reason,
        };
        if let Some(problem) = iso_name_problem(file_name) {
            return Err(refuse(problem));
        }
        if image.len() > ISO_UPLOAD_MAX_BYTES {
            return Err(refuse(format!(
                "it is {} bytes, more than the {ISO_UPLOAD_MAX_BYTES} capstan uploads",
                image.len()
            )));
        }
        let volume = VolumeId::iso(storage, file_name);
        let path = format!(
            "/nodes/{}/storage/{}/upload",
            segment(&node.0),
            segment(storage)
        );
        let fields: Params = vec![("content".into(), "iso".into())];
        let sent = async {
            let data = self
                .api
                .upload_value(&path, &fields, file_name, image)
                .await?;
            self.await_data(data).await
        };
        sent.await
            .map_err(|err| volume_error("upload", node, &volume, err))?;
        Ok(volume)
    }

    pub(super) async fn remove_volume(
        &self,
        node: &PveNode,
        volume: &VolumeId,
    ) -> Result<(), ProxmoxError> {
        let path = format!(
            "/nodes/{}/storage/{}/content/{}",
            segment(&node.0),
            segment(volume.storage()),
            segment(volume.as_str())
        );
        // A volume already gone ends the task with a warning, which is success.
        let removed = async {
            let data = self
                .api
                .call_value(Method::Delete, &path, &Vec::new(), Retry::Transient)
                .await?;
            self.await_data(data).await
        };
        removed
            .await
            .map_err(|err| volume_error("delete", node, volume, err))
    }

    pub(super) async fn insert_cdrom(
        &self,
        vm: &VmRef,
        volume: &VolumeId,
    ) -> Result<(), ProxmoxError> {
        let fail = |err| volume_error("attach", &vm.node, volume, err);
        let config = self.vm_config(vm).await.map_err(fail)?;
        if cdrom_holds(&config, volume) {
            return Ok(());
        }
        let params: Params = vec![(CDROM_DRIVE.into(), format!("{volume},media=cdrom"))];
        self.post_config(vm, params).await.map_err(fail)
    }

    pub(super) async fn eject_cdrom(
        &self,
        vm: &VmRef,
        volume: &VolumeId,
    ) -> Result<(), ProxmoxError> {
        let fail = |err| volume_error("detach", &vm.node, volume, err);
        let config = match self.vm_config(vm).await {
            Ok(config) => config,
            // A VM gone holds nothing.
            Err(err) if err.is_not_found() => return Ok(()),
            Err(err) => return Err(fail(err)),
        };
        if !cdrom_holds(&config, volume) {
            return Ok(());
        }
        // Ejected rather than removed: qemu-server applies a CD-ROM's new medium to a running
        // VM at once, while removing an IDE drive from a running VM stays a pending change
        // (`vmconfig_hotplug_pending` skips ide and sata deletions).
        let mut params: Params = vec![(CDROM_DRIVE.into(), "none,media=cdrom".into())];
        if let Some(digest) = text(&config, "digest") {
            // Only the config read above: a concurrent change is not overwritten.
            params.push(("digest".into(), digest));
        }
        self.post_config(vm, params).await.map_err(fail)
    }

    async fn post_config(&self, vm: &VmRef, params: Params) -> Result<(), ProxmoxError> {
        let data = self
            .api
            .call_value(
                Method::Post,
                &vm_path(vm, "/config"),
                &params,
                Retry::Transient,
            )
            .await?;
        self.await_data(data).await
    }
}

/// Whether the VM config's CD-ROM drive holds `volume`.
fn cdrom_holds(config: &Value, volume: &VolumeId) -> bool {
    text(config, CDROM_DRIVE).is_some_and(|drive| {
        let mut parts = drive.split(',');
        parts.next() == Some(volume.as_str()) && parts.any(|part| part == "media=cdrom")
    })
}

/// A storage call that failed: [`ProxmoxError::StorageNotFound`] when the answer says the
/// storage does not exist on the node, else what `action` met.
fn storage_error(
    action: &'static str,
    node: &PveNode,
    storage: &str,
    source: ProxmoxError,
) -> ProxmoxError {
    if is_missing_storage(&source) {
        ProxmoxError::StorageNotFound {
            node: node.0.clone(),
            storage: storage.to_owned(),
        }
    } else {
        ProxmoxError::Storage {
            action,
            node: node.0.clone(),
            storage: storage.to_owned(),
            source: Box::new(source),
        }
    }
}

fn volume_error(
    action: &'static str,
    node: &PveNode,
    volume: &VolumeId,
    source: ProxmoxError,
) -> ProxmoxError {
    ProxmoxError::Volume {
        action,
        node: node.0.clone(),
        storage: volume.storage().to_owned(),
        volume: volume.to_string(),
        source: Box::new(source),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_plain_iso_names_are_uploaded() {
        assert_eq!(iso_name_problem("capstan-prod-cp-a1b2.iso"), None);
        assert!(iso_name_problem("../etc/seed.iso").is_some_and(|p| p.contains("no path")));
        assert!(iso_name_problem("seed.img").is_some_and(|p| p.contains(".iso")));
        assert!(iso_name_problem(".iso").is_some());
        assert!(iso_name_problem("seed\n.iso").is_some_and(|p| p.contains("\\n")));
        assert!(iso_name_problem(&format!("{}.iso", "a".repeat(252))).is_some());
    }

    #[test]
    fn volume_ids_name_their_storage() {
        let volume = VolumeId::iso("local", "seed.iso");
        assert_eq!(volume.as_str(), "local:iso/seed.iso");
        assert_eq!(volume.storage(), "local");
        assert_eq!(VolumeId::parse("local:iso/seed.iso"), Some(volume));
        assert_eq!(VolumeId::parse(":iso/x.iso"), None);
        assert_eq!(VolumeId::parse("local"), None);
    }

    #[test]
    fn the_drive_must_hold_that_very_volume() {
        let volume = VolumeId::iso("local", "seed.iso");
        let held = json!({"ide2": "local:iso/seed.iso,media=cdrom,size=44K"});
        assert!(cdrom_holds(&held, &volume));
        let other = json!({"ide2": "local-lvm:vm-101-cloudinit,media=cdrom"});
        assert!(!cdrom_holds(&other, &volume));
        assert!(!cdrom_holds(&json!({}), &volume));
        assert_eq!(StorageContent::parse("iso"), Some(StorageContent::Iso));
        assert_eq!(StorageContent::parse("nonsense"), None);
    }
}
