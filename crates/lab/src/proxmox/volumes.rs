//! What the simulated Proxmox's storages hold beyond VM disks: plain data, kept in the state
//! and read by the storage and upload handlers (a leaf module, so the state needs none of the
//! handlers).

use std::collections::BTreeMap;
use std::sync::Arc;

/// One uploaded volume.
pub(super) struct StoredVolume {
    /// `iso`, `vztmpl` or `import`.
    pub content: String,
    pub bytes: Arc<Vec<u8>>,
    pub ctime: i64,
}

/// What the storages hold beyond VM disks, and the uploads received but not yet imported.
#[derive(Default)]
pub(super) struct Store {
    /// By (node, volume id); the node is empty for a shared storage.
    pub volumes: BTreeMap<(String, String), StoredVolume>,
    /// Received upload files by temporary file name, until their upload call takes them.
    pub uploads: BTreeMap<String, Vec<u8>>,
    pub next_upload: u64,
}
