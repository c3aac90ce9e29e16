//! The VM a node is built from ([`Machine`]): its template and sizes, its hardware as Proxmox
//! users declare it (`machine.sockets`, `disks`, `networks`, `pci`) and its place in Proxmox
//! (`tags`, `pool`). Their rules are in `hardware_rules`.
//!
//! - Sockets, disks, network cards and PCI devices are part of what a machine is: they are in
//!   its spec hash ([`MachineHardware`]), so a change replaces the pool's machines, new before
//!   old. Absent, they hash as before they existed: an unchanged file never changes a hash.
//! - Tags and the resource pool say where a VM is filed, not what it is: they are applied in
//!   place (`tag-machines`), never by replacing a machine.
//! - Every value is one Proxmox accepts in the property string capstan writes it into
//!   (`scsi[n]`, `net[n]`, `hostpci[n]`, `tags`): a bridge id, a VLAN of 1–4094, an MTU of
//!   576–65520, a storage id, a mapping id, a `pve-tag`, a `pve-poolid`.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Data disks of one machine: `scsi1` to `scsi30` (`scsi0` is the boot disk).
pub const MAX_DISKS: usize = 30;
/// Network cards of one machine: Proxmox numbers them `net0` to `net31`.
pub const MAX_NETWORKS: usize = 32;
/// PCI devices of one machine: Proxmox numbers them `hostpci0` to `hostpci15`.
pub const MAX_PCI_DEVICES: usize = 16;
/// The operator's tags of one machine (a Proxmox tag list is one config line).
pub const MAX_TAGS: usize = 32;
/// CPU sockets of one VM: more than any Proxmox host has.
pub const MAX_SOCKETS: u32 = 8;
/// A data disk's size, GiB (64 TiB, as the boot disk).
pub const MAX_DATA_DISK_GIB: u32 = 64 * 1024;
/// The smallest MTU IPv4 hosts must accept (RFC 791); Proxmox's own bound is 65520.
pub const MTU_RANGE: (u16, u16) = (576, 65520);
/// Tags that would say who owns a VM: the operator's tags may not start with them, so a commit
/// cannot plant an ownership or address tag.
pub const RESERVED_TAG_PREFIXES: &[&str] =
    &["capstan", "cluster-", "role-", "pool-", "spec-", "created-"];

/// The VM a node is built from. A node whose machine differs from this is replaced, never
/// changed in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Machine {
    /// Name of the Proxmox template to clone (a full clone).
    pub template: String,
    /// vCPUs.
    #[schemars(range(min = 1, max = super::limits::MAX_CORES))]
    pub cores: u32,
    /// Memory in MiB.
    #[serde(rename = "memoryMiB")]
    #[schemars(range(min = 512, max = super::limits::MAX_MEMORY_MIB))]
    pub memory_mib: u32,
    /// Boot disk size in GiB (the template's disk is grown to it).
    #[serde(rename = "diskGiB", default = "default_disk_gib")]
    #[schemars(range(min = 10, max = super::limits::MAX_DISK_GIB))]
    pub disk_gib: u32,
    /// Proxmox nodes to spread the VMs over, least loaded first.
    #[schemars(length(min = 1, max = super::limits::MAX_PLACEMENT))]
    pub placement: Vec<String>,
    /// Proxmox vCPU type. It must offer x86-64-v2: binaries built for it (Calico's among them)
    /// crash without it.
    #[serde(default = "default_cpu_type")]
    pub cpu: String,
    /// Proxmox storage for the full clone (default: the template's storage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// CPU sockets (vCPUs are `sockets × cores`; default 1). A change replaces the machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_SOCKETS))]
    pub sockets: Option<u32>,
    /// Extra disks (`scsi1`, `scsi2`, ... after the template's), raw block devices unless
    /// `mount` says otherwise. A change replaces the machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_DISKS))]
    pub disks: Vec<DataDisk>,
    /// The VM's network cards (`net0`, `net1`, ...); absent, the template's `net0` stays. A
    /// change replaces the machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_NETWORKS))]
    pub networks: Vec<NetworkCard>,
    /// PCI devices by Proxmox resource mapping (`cluster/mapping/pci`): the VMs land where a
    /// mapping has a device. A change replaces the machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_PCI_DEVICES))]
    pub pci: Vec<PciDevice>,
    /// The operator's Proxmox tags, beside capstan's own (none may start with `capstan`). A
    /// change applies in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_TAGS))]
    pub tags: Vec<String>,
    /// The Proxmox resource pool the VMs belong to (permissions, backup jobs). A change applies
    /// in place; a missing pool is created only when the connection allows it (`createPools`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

fn default_disk_gib() -> u32 {
    50
}

fn default_cpu_type() -> String {
    "x86-64-v2-AES".to_owned()
}

/// Whether `tag` is one of capstan's own: an ownership tag (`capstan`, `cluster-…`, …) or a
/// fact capstan records on a VM (`capstan-prepared`, `capstan-ip-…`).
pub fn is_capstan_tag(tag: &str) -> bool {
    RESERVED_TAG_PREFIXES
        .iter()
        .any(|prefix| tag.starts_with(prefix))
}

/// An extra disk, added at clone time before the first start, after the template's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataDisk {
    /// Size in GiB.
    #[serde(rename = "sizeGiB")]
    #[schemars(range(min = 1, max = MAX_DATA_DISK_GIB))]
    pub size_gib: u32,
    /// Proxmox storage for it (default: the machine's `storage`, else the template's); it
    /// must hold disk images (content `images`) on every node of placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// Tell the guest it is a solid-state disk (`ssd=1`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub ssd: bool,
    /// Pass the guest's discards (TRIM) to the storage (`discard=on`): thin storage gives
    /// freed blocks back.
    #[serde(default, skip_serializing_if = "is_false")]
    pub discard: bool,
    /// Its own I/O thread (`iothread=1`, with the `virtio-scsi-single` controller).
    #[serde(default, skip_serializing_if = "is_false")]
    pub iothread: bool,
    /// The host's cache mode (Proxmox's default is `none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<DiskCache>,
    /// Where the guest mounts it, formatted; absent, it stays a raw block device (what
    /// Rook-Ceph, Piraeus and Longhorn's V2 engine want; Longhorn's V1 engine wants a mounted
    /// path). On Talos the path is `/var/mnt/<name>` (a Talos user volume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount: Option<DiskMount>,
}

fn is_false(value: &bool) -> bool {
    !value
}

/// A disk's cache mode, as Proxmox names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DiskCache {
    /// No host cache (`none`, Proxmox's default).
    None,
    /// `writethrough`.
    Writethrough,
    /// `writeback`.
    Writeback,
    /// `directsync`.
    Directsync,
    /// `unsafe` (writes may be lost on a host crash).
    Unsafe,
}

impl DiskCache {
    /// Proxmox's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            DiskCache::None => "none",
            DiskCache::Writethrough => "writethrough",
            DiskCache::Writeback => "writeback",
            DiskCache::Directsync => "directsync",
            DiskCache::Unsafe => "unsafe",
        }
    }
}

/// Where and how the guest mounts a data disk.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiskMount {
    /// An absolute path (`/var/lib/longhorn`; on Talos `/var/mnt/<name>`).
    pub path: String,
    /// The filesystem it is formatted with the first time.
    #[serde(default, skip_serializing_if = "Filesystem::is_default")]
    pub filesystem: Filesystem,
}

/// A data disk's filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Filesystem {
    /// ext4.
    #[default]
    Ext4,
    /// XFS.
    Xfs,
}

impl Filesystem {
    fn is_default(&self) -> bool {
        *self == Filesystem::Ext4
    }

    /// Its name (`ext4`, `xfs`), as `mkfs.<name>` and Talos call it.
    pub fn as_str(self) -> &'static str {
        match self {
            Filesystem::Ext4 => "ext4",
            Filesystem::Xfs => "xfs",
        }
    }
}

/// A network card of the VM (`net0`, `net1`, ... in order).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkCard {
    /// The Proxmox bridge (`vmbr0`); it must exist on every node of placement.
    pub bridge: String,
    /// The VLAN tag the bridge puts the card's packets on (1–4094); absent, untagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4094))]
    pub vlan: Option<u16>,
    /// The card's MTU (VirtIO only: the guest's driver takes it from the device); absent,
    /// the bridge's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 576, max = 65520))]
    pub mtu: Option<u16>,
    /// The card model.
    #[serde(default, skip_serializing_if = "NicModel::is_default")]
    pub model: NicModel,
    /// Proxmox's firewall on this card.
    #[serde(default, skip_serializing_if = "is_false")]
    pub firewall: bool,
    /// Whether this card carries the node's address (its InternalIP, and on Talos the
    /// endpoint's VIP); at most one card says so, and without one the first does.
    #[serde(default, skip_serializing_if = "is_false")]
    pub primary: bool,
}

/// A network card model Proxmox offers for Linux guests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NicModel {
    /// VirtIO (paravirtualised; the only model that takes an MTU).
    #[default]
    Virtio,
    /// Intel E1000.
    E1000,
    /// Intel E1000E.
    E1000e,
    /// VMware vmxnet3.
    Vmxnet3,
}

impl NicModel {
    fn is_default(&self) -> bool {
        *self == NicModel::Virtio
    }

    /// Proxmox's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            NicModel::Virtio => "virtio",
            NicModel::E1000 => "e1000",
            NicModel::E1000e => "e1000e",
            NicModel::Vmxnet3 => "vmxnet3",
        }
    }
}

/// A PCI device passed through by Proxmox resource mapping (Datacenter → Resource Mappings).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PciDevice {
    /// The mapping's id (`gpu-a40`): the VM lands on a node where the mapping has a device.
    pub mapping: String,
}

/// What a machine is beyond its template, cores, memory, boot disk and vCPU type: part of its
/// spec hash (see the module's docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineHardware {
    /// CPU sockets (absent: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<u32>,
    /// Data disks, `scsi1` on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<DataDisk>,
    /// Network cards, `net0` on (absent: the template's `net0`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<NetworkCard>,
    /// PCI devices by mapping, `hostpci0` on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pci: Vec<PciDevice>,
}

impl MachineHardware {
    /// The hardware `machine` declares.
    pub fn of(machine: &Machine) -> Self {
        MachineHardware {
            sockets: machine.sockets.filter(|s| *s != 1),
            disks: machine.disks.clone(),
            networks: machine.networks.clone(),
            pci: machine.pci.clone(),
        }
    }

    /// Whether nothing beyond the template's is declared.
    pub fn is_default(&self) -> bool {
        self.sockets.is_none()
            && self.disks.is_empty()
            && self.networks.is_empty()
            && self.pci.is_empty()
    }

    /// CPU sockets (1 when not declared).
    pub fn sockets(&self) -> u32 {
        self.sockets.unwrap_or(1)
    }

    /// One line with no whitespace (compact JSON; every value is a name, a path or a number
    /// without spaces), stable across releases: fields at their defaults are left out.
    pub fn canonical(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads [`MachineHardware::canonical`] back.
    pub fn from_canonical(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    /// The index of the card that carries the node's address: the one marked `primary`, else
    /// the first (0 when the template's `net0` is kept).
    pub fn primary_card(&self) -> usize {
        self.networks.iter().position(|c| c.primary).unwrap_or(0)
    }

    /// The GiB each storage gets from one machine's data disks (`default_storage` for a disk
    /// that names none; `None`: the template's, reported as `template`).
    pub fn disk_gib_by_storage(
        &self,
        default_storage: Option<&str>,
    ) -> std::collections::BTreeMap<String, u64> {
        let mut out = std::collections::BTreeMap::new();
        for disk in &self.disks {
            let storage = disk
                .storage
                .as_deref()
                .or(default_storage)
                .unwrap_or("template");
            *out.entry(storage.to_owned()).or_default() += u64::from(disk.size_gib);
        }
        out
    }
}

impl fmt::Display for DataDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} GiB", self.size_gib)?;
        if let Some(storage) = &self.storage {
            write!(f, " on {storage}")?;
        }
        let mut options: Vec<String> = Vec::new();
        for (set, name) in [
            (self.ssd, "ssd"),
            (self.discard, "discard"),
            (self.iothread, "iothread"),
        ] {
            if set {
                options.push(name.into());
            }
        }
        if let Some(cache) = self.cache {
            options.push(format!("cache {}", cache.as_str()));
        }
        if let Some(mount) = &self.mount {
            options.push(format!("{} at {}", mount.filesystem.as_str(), mount.path));
        }
        if !options.is_empty() {
            write!(f, " ({})", options.join(", "))?;
        }
        Ok(())
    }
}

impl fmt::Display for NetworkCard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bridge)?;
        if let Some(vlan) = self.vlan {
            write!(f, " VLAN {vlan}")?;
        }
        let mut options: Vec<String> = Vec::new();
        if let Some(mtu) = self.mtu {
            options.push(format!("MTU {mtu}"));
        }
        if self.model != NicModel::Virtio {
            options.push(self.model.as_str().into());
        }
        if self.firewall {
            options.push("firewall".into());
        }
        if self.primary {
            options.push("primary".into());
        }
        if !options.is_empty() {
            write!(f, " ({})", options.join(", "))?;
        }
        Ok(())
    }
}

impl MachineHardware {
    /// How a VM's config (`observed`, as [`MachineHardware`] reads back from one) differs from
    /// what `self` declares, as `field declared → found` (drift, rule 14). What a config does
    /// not hold is not compared: mounts, which card is primary, and a disk's storage when the
    /// file names none.
    pub fn drift_from(&self, observed: &MachineHardware) -> Vec<String> {
        let mut out = Vec::new();
        if self.sockets() != observed.sockets() {
            out.push(format!(
                "sockets {} → {}",
                self.sockets(),
                observed.sockets()
            ));
        }
        let disks: Vec<DataDisk> = self
            .disks
            .iter()
            .zip(
                observed
                    .disks
                    .iter()
                    .map(Some)
                    .chain(std::iter::repeat(None)),
            )
            .map(|(declared, found)| DataDisk {
                mount: None,
                storage: declared
                    .storage
                    .clone()
                    .or_else(|| found.and_then(|f| f.storage.clone())),
                ..declared.clone()
            })
            .collect();
        if disks != observed.disks {
            out.push(format!(
                "disks {} → {}",
                listed(&disks),
                listed(&observed.disks)
            ));
        }
        if !self.networks.is_empty() {
            let cards: Vec<NetworkCard> = self
                .networks
                .iter()
                .map(|c| NetworkCard {
                    primary: false,
                    ..c.clone()
                })
                .collect();
            if cards != observed.networks {
                out.push(format!(
                    "networks {} → {}",
                    listed(&cards),
                    listed(&observed.networks)
                ));
            }
        }
        if self.pci != observed.pci {
            let names = |pci: &[PciDevice]| {
                let names: Vec<&str> = pci.iter().map(|d| d.mapping.as_str()).collect();
                format!("[{}]", names.join(", "))
            };
            out.push(format!(
                "pci {} → {}",
                names(&self.pci),
                names(&observed.pci)
            ));
        }
        out
    }
}

/// `[a, b]` of each item's `Display`.
pub fn listed<T: fmt::Display>(items: &[T]) -> String {
    let shown: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", shown.join(", "))
}

/// Whether `tag` is a Proxmox `pve-tag` capstan writes (lowercase: Proxmox compares tags as
/// written).
pub fn is_pve_tag(tag: &str) -> bool {
    let mut bytes = tag.bytes();
    (1..=128).contains(&tag.len())
        && bytes
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-+.".contains(&b))
}

/// `pve-poolid`: letters, digits, `.`, `-`, `_`, up to three levels joined by `/`.
pub fn is_pool_id(pool: &str) -> bool {
    let levels: Vec<&str> = pool.split('/').collect();
    (1..=3).contains(&levels.len())
        && pool.len() <= 128
        && levels.iter().all(|level| {
            !level.is_empty()
                && level
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        })
}

/// `pve-configid`: a letter, then letters, digits, `_` and `-` (at least two characters).
pub fn is_config_id(id: &str) -> bool {
    let mut bytes = id.bytes();
    (2..=64).contains(&id.len())
        && bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests;
