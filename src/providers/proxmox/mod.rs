//! The Proxmox VE provider: the [`ProxmoxProvider`] trait the executor drives VMs through, in
//! domain verbs over our types, and [`ProxmoxClient`], its implementation over the REST API.
//!
//! Nothing outside this module sees HTTP or Proxmox wire types. Ownership of VMs (who created
//! them and for what) is encoded by [`ownership`]; errors are classified for retry by
//! [`ProxmoxError::is_transient`].
//!
//! # Guarantees shared by every method
//! - Idempotent: repeating a call after success (or after it was cancelled) is safe; "already
//!   there" and "already gone" are success.
//! - Every asynchronous Proxmox task is awaited (never fire-and-forget); a failed task is an
//!   error carrying its exit status and log tail.
//! - Transient failures are retried a bounded number of times before they are returned.

mod agent;
mod api;
mod client;
mod configure;
pub mod connection;
pub mod error;
mod facts;
mod fenced;
mod hardware;
mod machine_config;
mod options;
pub mod ownership;
#[cfg(test)]
pub(crate) mod recorder;
mod tasks;
mod templates;
pub mod upid;
mod vmids;
mod volumes;
mod wire;

use std::collections::BTreeSet;
use std::future::Future;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use crate::model::{NodeName, Ownership, VmId};
use capstan_core::spec::hardware::MachineHardware;

pub use agent::GUEST_OUTPUT_MAX_BYTES;
pub use client::{ClientOptions, ProxmoxClient};
pub use connection::{ConnectionConfig, TokenSecret, Trust};
pub use error::{ProxmoxError, RetryPolicy, TaskFailure, backoff_delay};
pub use fenced::Fenced;
pub use hardware::VmHardware;
pub use machine_config::disk_serial;
pub use ownership::VmOwner;
pub use volumes::{ISO_UPLOAD_MAX_BYTES, StorageContent, StoredVolume, VolumeId};

/// A Proxmox VE node (a hypervisor host), e.g. `pve1`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PveNode(pub String);

impl PveNode {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for PveNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for PveNode {
    fn from(name: &str) -> Self {
        PveNode(name.to_owned())
    }
}

/// One observation of a whole Proxmox cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Inventory {
    /// Every Proxmox node, sorted by name.
    pub nodes: Vec<HostInfo>,
    /// Every VM and template, sorted by VMID.
    pub vms: Vec<VmInfo>,
    /// Every storage id with its `shared` flag.
    pub storages: std::collections::BTreeMap<String, bool>,
    /// Every template on an online node, with the storages its volumes are on, sorted by
    /// VMID.
    pub templates: Vec<TemplateInfo>,
    /// Each storage as each node sees it: its content types and space (a shared storage once
    /// per node, with the same figures).
    pub storage_space: Vec<StorageSpace>,
}

/// One storage on one node, as `/cluster/resources` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageSpace {
    /// The node.
    pub node: String,
    /// The storage id.
    pub storage: String,
    /// Its content types (`images`, `iso`, ...).
    pub content: Vec<String>,
    /// Its size, bytes (`maxdisk`).
    pub total_bytes: u64,
    /// What it uses, bytes (`disk`): on thin storage what is written, not what is allocated.
    pub used_bytes: u64,
    /// Whether it is available there (`status: available`).
    pub available: bool,
}

/// A template and where its volumes are: Proxmox clones it to another node only when every
/// volume is on shared storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateInfo {
    /// Where it is.
    pub vm: VmRef,
    /// Its name (what `machine.template` names).
    pub name: String,
    /// The storage of each volume (disks, cloud-init drive), deduplicated and sorted; a
    /// volume given as a path has the storage `""`.
    pub storages: Vec<String>,
    /// Its tags (from `/cluster/resources`).
    pub tags: Vec<String>,
    /// Its description, as its config held it when the template was first seen.
    pub description: String,
    /// Whether its `hotplug` option included memory when it was first seen.
    pub memory_hotplug: bool,
    /// Whether it had a cloud-init drive when it was first seen.
    pub cloud_init_drive: bool,
}

impl Inventory {
    /// The VMs a cluster owns.
    pub fn owned_by<'a>(&'a self, cluster: &'a str) -> impl Iterator<Item = &'a VmInfo> + 'a {
        self.vms.iter().filter(move |vm| {
            vm.owner
                .as_ref()
                .is_some_and(|owner| owner.ownership.cluster == cluster)
        })
    }
}

/// A Proxmox node's state and capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct HostInfo {
    /// Node name.
    pub name: PveNode,
    /// Whether the node is online (an offline node's VMs cannot be reached).
    pub online: bool,
    /// CPU threads.
    pub cpu_capacity: u32,
    /// CPU use, 0.0..=1.0.
    pub cpu_usage: f64,
    /// Memory, bytes.
    pub memory_capacity_bytes: u64,
    /// Memory in use, bytes.
    pub memory_used_bytes: u64,
}

/// A VM's power state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerState {
    /// Running.
    Running,
    /// Stopped.
    Stopped,
    /// Unknown: its node is offline.
    Unknown,
}

/// A VM (or template) as Proxmox reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct VmInfo {
    /// VMID.
    pub vmid: VmId,
    /// The node it lives on.
    pub node: PveNode,
    /// Its name (empty when unnamed).
    pub name: String,
    /// Power state.
    pub power: PowerState,
    /// Tags.
    pub tags: Vec<String>,
    /// Whether it is a template.
    pub is_template: bool,
    /// vCPUs.
    pub cores: u32,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// Root disk size, bytes.
    pub disk_bytes: u64,
    /// Config lock (`clone`, `backup`, ...), if one is held.
    pub lock: Option<String>,
    /// Ownership, for VMs capstan created (from the tags, or the description of a VM left
    /// untagged).
    pub owner: Option<VmOwner>,
    /// The resource pool it is in, if any.
    pub pool: Option<String>,
}

impl VmInfo {
    /// Where to address calls about this VM.
    pub fn vm_ref(&self) -> VmRef {
        VmRef {
            node: self.node.clone(),
            vmid: self.vmid,
        }
    }
}

/// Where a VM is: its node and VMID.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VmRef {
    /// The Proxmox node.
    pub node: PveNode,
    /// The VMID.
    pub vmid: VmId,
}

/// A VM the caller means to stop or destroy, with what it must still be: the client re-reads
/// the VM and refuses unless name, cluster, role and pool all match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedVm {
    /// Where it is.
    pub vm: VmRef,
    /// Its name.
    pub name: NodeName,
    /// Its owner (the spec hash is not compared: it changes with the spec, not the owner).
    pub ownership: Ownership,
}

/// A full clone of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneRequest {
    /// Template name (looked up among VMs with `template: 1`; a copy on the target node is
    /// preferred).
    pub template: String,
    /// Node the clone goes to.
    pub target: PveNode,
    /// The VM's name: `capstan-<cluster>-<pool>-<suffix>`.
    pub name: NodeName,
    /// Who owns it (written into the description by the clone call, then into tags).
    pub ownership: Ownership,
    /// Creation time recorded in description and tags.
    pub created: Timestamp,
    /// Resource pool to put it in.
    pub pool: Option<String>,
    /// Target storage (default: the template's).
    pub storage: Option<String>,
    /// What the VM is built from, one line, kept in its description.
    pub built_from: Option<String>,
}

/// The hardware and cloud-init settings of a VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmSettings {
    /// vCPUs per socket.
    pub cores: u32,
    /// Memory, MiB.
    pub memory_mib: u32,
    /// vCPU type (`x86-64-v2-AES`, `host`, ...).
    pub cpu_type: String,
    /// Owner, re-written as tags and description.
    pub ownership: Ownership,
    /// Creation time, re-written as tag and description.
    pub created: Timestamp,
    /// Cloud-init settings, when used.
    pub cloud_init: Option<CloudInit>,
    /// What the VM is built from, one line, re-written into its description.
    pub built_from: Option<String>,
    /// Sockets, data disks, network cards and PCI devices (see `machine_config`).
    pub hardware: MachineHardware,
    /// The storage of data disks that name none (`None`: the boot disk's).
    pub disk_storage: Option<String>,
    /// The operator's tags, written beside capstan's (and recorded in the description, so a
    /// later change removes only those).
    pub tags: Vec<String>,
}

/// Cloud-init settings (Proxmox writes them onto the VM's cloud-init drive at start).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CloudInit {
    /// `ipconfig<n>` by card index: `ip=dhcp` or `ip=192.168.1.50/24,gw=192.168.1.1`.
    pub ipconfigs: Vec<(usize, String)>,
    /// DNS servers (`nameserver`).
    pub nameservers: Vec<std::net::IpAddr>,
    /// DNS search domain (`searchdomain`).
    pub search_domain: Option<String>,
    /// Default user.
    pub user: Option<String>,
    /// SSH public keys, one per line.
    pub ssh_keys: Option<String>,
}

/// What Proxmox offers a machine's hardware, beyond the inventory: the bridges of each
/// node, the resource pools, and the PCI resource mappings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HardwareFacts {
    /// Each online node's bridges (Linux bridges and OVS bridges), with their MTU when known.
    pub bridges: std::collections::BTreeMap<String, Vec<(String, Option<u32>)>>,
    /// Every resource pool id.
    pub pools: Vec<String>,
    /// Each PCI mapping's devices: the nodes it has a device on (one entry per device).
    pub pci_mappings: std::collections::BTreeMap<String, Vec<String>>,
}

/// How a VM is filed in place ([`ProxmoxProvider::place_vm`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VmFiling {
    /// The operator's tags it must carry (beside capstan's own).
    pub tags: Vec<String>,
    /// The resource pool it must be in (`None`: it stays where it is).
    pub pool: Option<String>,
    /// Also remove the tags that are neither capstan's nor in `tags` (`onDrift: replace`).
    pub remove_foreign: bool,
}

/// Whether a resize changed anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeOutcome {
    /// The disk was grown.
    Grown,
    /// The disk already had that size.
    Unchanged,
}

/// A process started by the guest agent (within [`ProxmoxClient::run_command`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExecPid(pub u64);

/// What `agent/exec-status` says about a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExecStatus {
    /// Still running.
    Running,
    /// Finished.
    Exited(CommandOutput),
}

/// How a command in a VM ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// Exit code (`None` when killed by a signal).
    pub exit_code: Option<i32>,
    /// Signal number, when killed by one.
    pub signal: Option<i32>,
    /// Standard output (as the agent returns it: text).
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// What the executor needs from Proxmox VE, in domain verbs.
///
/// # Errors
/// Every method returns [`ProxmoxError`]; `is_transient()` says whether a later retry can
/// succeed. Permanent errors say what to fix.
///
/// # Guarantees
/// Every method is idempotent and may be repeated after a crash or cancellation; asynchronous
/// Proxmox tasks are awaited before a method returns.
pub trait ProxmoxProvider: Send + Sync {
    /// Observes every Proxmox node and VM in O(1) API calls (plus one per VM named like ours
    /// but not yet tagged).
    fn inventory(&self) -> impl Future<Output = Result<Inventory, ProxmoxError>> + Send;

    /// Full-clones a template and tags the clone as owned; returns where it is. A VMID taken by
    /// a concurrent clone is retried with a fresh one; a VM of that name already owned by the
    /// same cluster, role and pool (an earlier, interrupted attempt) is adopted instead.
    ///
    /// # Errors
    /// `TemplateNotFound`; `VmidExhausted` after `clone_attempts` lost races; `TaskFailed`
    /// (no memory on the node, no space on the storage); `NotOurs` when the name is taken by a
    /// VM that is not this owner's.
    fn clone_vm(
        &self,
        request: &CloneRequest,
    ) -> impl Future<Output = Result<VmRef, ProxmoxError>> + Send;

    /// Sets cores, memory, vCPU type, tags, description, `agent: 1` and cloud-init settings.
    fn configure_vm(
        &self,
        vm: &VmRef,
        settings: &VmSettings,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// Grows the boot disk to `size_gib`; a no-op when it already has that size.
    ///
    /// # Errors
    /// `ShrinkDisk` when the disk is larger (Proxmox cannot shrink); `NoDisk`.
    fn resize_disk(
        &self,
        vm: &VmRef,
        size_gib: u32,
    ) -> impl Future<Output = Result<ResizeOutcome, ProxmoxError>> + Send;

    /// Starts the VM; a no-op when it runs.
    fn start_vm(&self, vm: &VmRef) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// Shuts the VM down cleanly, then stops it if it is still running after `timeout`.
    /// Verifies ownership first; a VM already gone is success.
    ///
    /// # Errors
    /// `NotOurs` when the VM at that VMID has another name or owner (nothing is done to it).
    fn shutdown_vm(
        &self,
        vm: &ExpectedVm,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// Stops the VM at once (fencing). Verifies ownership first; a VM already gone is success.
    ///
    /// # Errors
    /// `NotOurs` when the VM at that VMID has another name or owner (nothing is done to it).
    fn stop_vm(&self, vm: &ExpectedVm) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// Stops and destroys the VM with its disks (`purge`). Verifies ownership first; a VM
    /// already gone is success.
    ///
    /// # Errors
    /// `NotOurs` when the VM at that VMID has another name or owner (nothing is done to it).
    fn destroy_vm(&self, vm: &ExpectedVm) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// Adds `tag` to the VM's tags (a fact the planner reads back, e.g. that the VM is on its
    /// way out). Verifies ownership first; a tag already there, or a VM already gone, is
    /// success.
    ///
    /// # Errors
    /// `NotOurs` when the VM at that VMID has another name or owner (nothing is done to it).
    fn add_tag(
        &self,
        vm: &ExpectedVm,
        tag: &str,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// The VM's description (where capstan keeps what the VM was built from): one per-VM call,
    /// for the few VMs whose spec changed.
    ///
    /// # Errors
    /// When the VM cannot be read.
    fn vm_description(
        &self,
        vm: &VmRef,
    ) -> impl Future<Output = Result<String, ProxmoxError>> + Send;

    /// Pings the guest agent once.
    ///
    /// # Errors
    /// An error whose `is_agent_unavailable()` is true while the VM boots, or hangs.
    fn agent_ping(&self, vm: &VmRef) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// Waits for a booting VM's guest agent: pings it until it answers, at most the client's
    /// `agent_wait`; returns whether it answered.
    ///
    /// # Errors
    /// A failure other than the agent not answering yet.
    fn await_agent(&self, vm: &VmRef) -> impl Future<Output = Result<bool, ProxmoxError>> + Send;

    /// Runs a command in the guest to completion, up to `timeout`. A non-zero exit is not an
    /// error: it is in the output.
    ///
    /// # Errors
    /// `CommandTimeout` when it did not finish in time (it may still be running).
    fn run_command(
        &self,
        vm: &VmRef,
        command: &[String],
        input: Option<&str>,
        timeout: Duration,
    ) -> impl Future<Output = Result<CommandOutput, ProxmoxError>> + Send;

    /// The VM's IPv4 addresses (loopback excluded), from the guest agent.
    fn vm_addresses(
        &self,
        vm: &VmRef,
    ) -> impl Future<Output = Result<Vec<Ipv4Addr>, ProxmoxError>> + Send;

    /// What the VM's configuration says of its hardware (`net0`'s MAC address, memory
    /// hotplug).
    fn vm_hardware(
        &self,
        vm: &VmRef,
    ) -> impl Future<Output = Result<VmHardware, ProxmoxError>> + Send;

    /// Writes a file in the guest through the agent (at most 46080 bytes per call).
    ///
    /// # Errors
    /// `FileTooLarge` past that size.
    fn write_file(
        &self,
        vm: &VmRef,
        path: &str,
        content: &[u8],
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// The content types `storage` holds on `node`.
    ///
    /// # Errors
    /// `StorageNotFound` when the node has no such storage.
    fn storage_content(
        &self,
        node: &PveNode,
        storage: &str,
    ) -> impl Future<Output = Result<BTreeSet<StorageContent>, ProxmoxError>> + Send;

    /// The volumes of one content type on `storage`, as `node` sees it, sorted by id.
    fn storage_volumes(
        &self,
        node: &PveNode,
        storage: &str,
        content: StorageContent,
    ) -> impl Future<Output = Result<Vec<StoredVolume>, ProxmoxError>> + Send;

    /// Uploads an ISO image as `<storage>:iso/<file_name>` on `node` (replacing one of that
    /// name, as Proxmox does) and waits for the copy; returns its volume id.
    ///
    /// # Errors
    /// `IsoRefused` (nothing sent) when `file_name` is not a plain `*.iso` name or the image
    /// is larger than [`ISO_UPLOAD_MAX_BYTES`]; `Volume` naming node, storage and volume
    /// otherwise (no such storage, a storage that holds no ISO images, a failed copy).
    fn upload_iso(
        &self,
        node: &PveNode,
        storage: &str,
        file_name: &str,
        image: &[u8],
    ) -> impl Future<Output = Result<VolumeId, ProxmoxError>> + Send;

    /// Deletes a volume from its storage on `node`; a volume already gone is success.
    ///
    /// # Errors
    /// `Volume` naming node, storage and volume.
    fn delete_volume(
        &self,
        node: &PveNode,
        volume: &VolumeId,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// Puts ISO volume `volume` in the VM's CD-ROM drive `ide2` (replacing what it held);
    /// a no-op when it is there already. Meant for a VM not yet started: Proxmox adds a
    /// drive a running VM lacks only at its next start.
    ///
    /// # Errors
    /// `Volume` naming node, storage and volume.
    fn attach_cdrom(
        &self,
        vm: &VmRef,
        volume: &VolumeId,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// Empties the VM's CD-ROM drive `ide2` (`none,media=cdrom`, applied at once even to a
    /// running VM) when it holds `volume`; a no-op when it holds anything else or nothing
    /// (the drive is not capstan's to empty then), or the VM is gone.
    ///
    /// # Errors
    /// `Volume` naming node, storage and volume.
    fn detach_cdrom(
        &self,
        vm: &VmRef,
        volume: &VolumeId,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// The bridges of each of `nodes` (those online), the resource pools and the PCI
    /// mappings: one call per node and two in all.
    fn hardware_facts(
        &self,
        nodes: &[PveNode],
    ) -> impl Future<Output = Result<HardwareFacts, ProxmoxError>> + Send;

    /// Makes sure resource pool `pool` exists: creates it when `create` and it is missing.
    ///
    /// # Errors
    /// `PoolMissing` (naming the pools there are) when it is missing and may not be created.
    fn ensure_pool(
        &self,
        pool: &str,
        create: bool,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// Files the VM in place: its tags become capstan's own and `filing.tags` (tags capstan
    /// set before and `filing.tags` no longer names are removed; anyone else's stay, unless
    /// `filing.remove_foreign`), and it moves into `filing.pool` when given. Verifies ownership first; a VM already gone is success.
    ///
    /// # Errors
    /// `NotOurs` when the VM at that VMID has another name or owner (nothing is done to it).
    fn place_vm(
        &self,
        vm: &ExpectedVm,
        filing: &VmFiling,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send;

    /// Guest-agent requests made through this provider so far (for `/metrics`); 0 when it
    /// does not count them.
    fn guest_agent_calls(&self) -> u64 {
        0
    }
}

impl<T: ProxmoxProvider> ProxmoxProvider for Arc<T> {
    fn guest_agent_calls(&self) -> u64 {
        (**self).guest_agent_calls()
    }
    fn hardware_facts(
        &self,
        nodes: &[PveNode],
    ) -> impl Future<Output = Result<HardwareFacts, ProxmoxError>> + Send {
        (**self).hardware_facts(nodes)
    }
    fn ensure_pool(
        &self,
        pool: &str,
        create: bool,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).ensure_pool(pool, create)
    }
    fn place_vm(
        &self,
        vm: &ExpectedVm,
        filing: &VmFiling,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).place_vm(vm, filing)
    }
    fn storage_content(
        &self,
        node: &PveNode,
        storage: &str,
    ) -> impl Future<Output = Result<BTreeSet<StorageContent>, ProxmoxError>> + Send {
        (**self).storage_content(node, storage)
    }
    fn storage_volumes(
        &self,
        node: &PveNode,
        storage: &str,
        content: StorageContent,
    ) -> impl Future<Output = Result<Vec<StoredVolume>, ProxmoxError>> + Send {
        (**self).storage_volumes(node, storage, content)
    }
    fn upload_iso(
        &self,
        node: &PveNode,
        storage: &str,
        file_name: &str,
        image: &[u8],
    ) -> impl Future<Output = Result<VolumeId, ProxmoxError>> + Send {
        (**self).upload_iso(node, storage, file_name, image)
    }
    fn delete_volume(
        &self,
        node: &PveNode,
        volume: &VolumeId,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).delete_volume(node, volume)
    }
    fn attach_cdrom(
        &self,
        vm: &VmRef,
        volume: &VolumeId,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).attach_cdrom(vm, volume)
    }
    fn detach_cdrom(
        &self,
        vm: &VmRef,
        volume: &VolumeId,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).detach_cdrom(vm, volume)
    }
    fn inventory(&self) -> impl Future<Output = Result<Inventory, ProxmoxError>> + Send {
        (**self).inventory()
    }
    fn clone_vm(
        &self,
        request: &CloneRequest,
    ) -> impl Future<Output = Result<VmRef, ProxmoxError>> + Send {
        (**self).clone_vm(request)
    }
    fn configure_vm(
        &self,
        vm: &VmRef,
        settings: &VmSettings,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).configure_vm(vm, settings)
    }
    fn resize_disk(
        &self,
        vm: &VmRef,
        size_gib: u32,
    ) -> impl Future<Output = Result<ResizeOutcome, ProxmoxError>> + Send {
        (**self).resize_disk(vm, size_gib)
    }
    fn start_vm(&self, vm: &VmRef) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).start_vm(vm)
    }
    fn shutdown_vm(
        &self,
        vm: &ExpectedVm,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).shutdown_vm(vm, timeout)
    }
    fn stop_vm(&self, vm: &ExpectedVm) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).stop_vm(vm)
    }
    fn destroy_vm(&self, vm: &ExpectedVm) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).destroy_vm(vm)
    }
    fn add_tag(
        &self,
        vm: &ExpectedVm,
        tag: &str,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).add_tag(vm, tag)
    }
    fn vm_description(
        &self,
        vm: &VmRef,
    ) -> impl Future<Output = Result<String, ProxmoxError>> + Send {
        (**self).vm_description(vm)
    }
    fn agent_ping(&self, vm: &VmRef) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).agent_ping(vm)
    }
    fn await_agent(&self, vm: &VmRef) -> impl Future<Output = Result<bool, ProxmoxError>> + Send {
        (**self).await_agent(vm)
    }
    fn run_command(
        &self,
        vm: &VmRef,
        command: &[String],
        input: Option<&str>,
        timeout: Duration,
    ) -> impl Future<Output = Result<CommandOutput, ProxmoxError>> + Send {
        (**self).run_command(vm, command, input, timeout)
    }
    fn vm_addresses(
        &self,
        vm: &VmRef,
    ) -> impl Future<Output = Result<Vec<Ipv4Addr>, ProxmoxError>> + Send {
        (**self).vm_addresses(vm)
    }
    fn vm_hardware(
        &self,
        vm: &VmRef,
    ) -> impl Future<Output = Result<VmHardware, ProxmoxError>> + Send {
        (**self).vm_hardware(vm)
    }
    fn write_file(
        &self,
        vm: &VmRef,
        path: &str,
        content: &[u8],
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        (**self).write_file(vm, path, content)
    }
}
