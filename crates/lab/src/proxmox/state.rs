//! The simulated Proxmox cluster's state: nodes, storages, pools, VMs with their raw config,
//! tasks with UPIDs, DHCP leases, faults, call counters and the request log.
//!
//! # Invariants
//! - The state mutex is never held across an `.await`.
//! - A VM's config is kept as Proxmox keeps it: a map of raw `key: value` strings (so
//!   `GET config` answers what was written, and the digest changes with every write).
//! - Task durations run on tokio time; UPID start times and creation times come from the lab
//!   clock.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use sha1::{Digest, Sha1};

use super::guest::{GuestIdentity, GuestSoftware, PowerEvent};
pub(super) use super::sizes::{GIB, MIB, format_size, parse_size, property_default};
use crate::clock::{Clock, LabClock};
use crate::world::{CallFault, ProxmoxWorld, TaskFault, Timings};
use capstan_core::model::VmId;

/// An error answer: HTTP status, message, and per-parameter errors for a 400.
#[derive(Debug, Clone)]
pub(super) struct ApiFail {
    pub status: u16,
    pub message: String,
    pub errors: BTreeMap<String, String>,
}

impl ApiFail {
    /// A handler `die`: 500 with the text.
    pub fn die(message: impl Into<String>) -> Self {
        ApiFail {
            status: 500,
            message: message.into(),
            errors: BTreeMap::new(),
        }
    }

    /// A 400 with one parameter error.
    pub fn param(name: &str, why: impl Into<String>) -> Self {
        let mut errors = BTreeMap::new();
        errors.insert(name.to_owned(), why.into());
        ApiFail {
            status: 400,
            message: "Parameter verification failed.".into(),
            errors,
        }
    }
}

/// Durations of a world's tasks, as plain `Duration`s.
#[derive(Debug, Clone)]
pub(super) struct Durations {
    pub clone: Duration,
    pub config: Duration,
    pub resize: Duration,
    pub start: Duration,
    pub boot: Duration,
    pub shutdown: Duration,
    pub stop: Duration,
    pub destroy: Duration,
    pub agent_timeout: Duration,
    pub auth_failure_delay: Duration,
}

impl From<&Timings> for Durations {
    fn from(t: &Timings) -> Self {
        Durations {
            clone: t.clone.0,
            config: t.config.0,
            resize: t.resize.0,
            start: t.start.0,
            boot: t.boot.0,
            shutdown: t.shutdown.0,
            stop: t.stop.0,
            destroy: t.destroy.0,
            agent_timeout: t.agent_timeout.0,
            auth_failure_delay: t.auth_failure_delay.0,
        }
    }
}

/// One recorded request and its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// HTTP method.
    pub method: String,
    /// The endpoint's path template (`/nodes/{node}/qemu/{vmid}/clone`), or the raw path when
    /// no endpoint matched.
    pub template: String,
    /// Parameters as received (query and body; path parameters excluded).
    pub params: BTreeMap<String, Value>,
    /// HTTP status of the answer.
    pub status: u16,
    /// The JSON body of the answer (`null` for an empty body).
    pub body: Value,
}

pub(super) struct Shared {
    pub state: Mutex<SimState>,
    pub guest: Arc<dyn GuestSoftware>,
    pub clock: LabClock,
    pub durations: Durations,
    pub token_id: String,
    pub token_secret: String,
    pub fingerprint: String,
    pub record: bool,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, SimState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn unix_now(&self) -> i64 {
        self.clock.now().as_second()
    }

    pub fn notify(&self, events: Vec<(GuestIdentity, PowerEvent)>) {
        for (guest, event) in events {
            self.guest.power_event(&guest, event);
        }
    }
}

pub(super) struct NodeState {
    pub cores: u32,
    pub memory_bytes: u64,
    pub online: bool,
    pub index: u32,
    /// Its bridges and their MTU.
    pub bridges: BTreeMap<String, u32>,
}

pub(super) struct StorageState {
    pub kind: String,
    pub shared: bool,
    pub size_bytes: u64,
    pub content: Vec<String>,
}

pub(super) enum ExecState {
    Running,
    Done(super::guest::ExecOutcome),
}

pub(super) struct VmState {
    pub node: String,
    pub config: BTreeMap<String, String>,
    pub running: bool,
    pub pool: Option<String>,
    /// When the agent answers (tokio time); `None` while stopped.
    pub agent_ready_at: Option<tokio::time::Instant>,
    /// Lab-clock start time, for uptime.
    pub started_unix: Option<i64>,
    pub execs: BTreeMap<u64, ExecState>,
    pub next_exec_pid: u64,
    /// What was written into the VM through the agent's `file-write` while a hostile agent
    /// fault selected it (see [`super::FaultHandle::hostile_agent`]).
    pub received: Vec<String>,
    /// The K3s release whose air-gap install (binary, images, install script) the disk
    /// carries: set on a template by the world, inherited by its clones.
    pub k3s_airgap: Option<String>,
    /// The Talos version the disk boots (a Talos template's and its clones'): the guest
    /// agent is Talos's extension, which runs no commands.
    pub talos: Option<String>,
    /// The system extensions its Talos image carries (a template's, inherited by its clones).
    pub talos_extensions: Vec<String>,
    /// Whether the disk carries cloud-init (a template's, inherited by its clones).
    pub cloud_init: bool,
}

impl VmState {
    pub fn name(&self) -> String {
        self.config.get("name").cloned().unwrap_or_default()
    }

    pub fn is_template(&self) -> bool {
        self.config.get("template").is_some_and(|v| v == "1")
    }

    pub fn lock(&self) -> Option<&String> {
        self.config.get("lock")
    }

    pub fn cores(&self) -> u64 {
        let cores: u64 = self
            .config
            .get("cores")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let sockets: u64 = self
            .config
            .get("sockets")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        cores * sockets
    }

    pub fn memory_bytes(&self) -> u64 {
        let mib = self
            .config
            .get("memory")
            .and_then(|v| property_default(v, "current"))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(512);
        mib * MIB
    }

    /// The boot disk's key and size in bytes.
    pub fn disk(&self) -> Option<(String, u64)> {
        ["scsi0", "virtio0", "sata0", "ide0"]
            .iter()
            .find_map(|key| {
                let value = self.config.get(*key)?;
                if value.contains("media=cdrom") {
                    return None;
                }
                let size = value
                    .split(',')
                    .find_map(|part| part.strip_prefix("size="))
                    .and_then(parse_size)?;
                Some(((*key).to_owned(), size))
            })
    }

    pub fn agent_enabled(&self) -> bool {
        self.config
            .get("agent")
            .and_then(|v| property_default(v, "enabled"))
            .is_some_and(|v| v == "1")
    }

    /// The config digest (changes with every write).
    pub fn digest(&self) -> String {
        let mut hasher = Sha1::new();
        for (key, value) in &self.config {
            hasher.update(key.as_bytes());
            hasher.update(b": ");
            hasher.update(value.as_bytes());
            hasher.update(b"\n");
        }
        hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

pub(super) struct TaskState {
    pub node: String,
    pub pid: u32,
    pub pstart: u64,
    pub starttime: i64,
    pub kind: String,
    pub id: String,
    pub user: String,
    pub log: Vec<String>,
    pub exitstatus: Option<String>,
}

/// Faults waiting to happen.
#[derive(Default)]
pub(super) struct Faults {
    pub tasks: Vec<TaskFault>,
    pub calls: Vec<CallFault>,
    pub latency: Duration,
    pub agent_never_starts: Vec<String>,
    pub hung: Vec<String>,
    pub steal_next_vmid: u32,
    /// (selector, program): the agents of these VMs answer an exec of that program with an
    /// error that echoes everything they were sent.
    pub hostile: Vec<(String, String)>,
    /// (selector, program, bytes): the agents of these VMs answer an exec of that program
    /// with that many bytes of output.
    pub flooding: Vec<(String, String, usize)>,
}

impl Faults {
    /// Takes one failure for a task of `kind`, if one is armed.
    pub fn take_task_failure(&mut self, kind: &str) -> Option<String> {
        let fault = self
            .tasks
            .iter_mut()
            .find(|fault| fault.kind == kind && fault.count > 0)?;
        fault.count -= 1;
        let message = fault.message.clone();
        self.tasks.retain(|fault| fault.count > 0);
        Some(message)
    }

    /// Takes one call failure matching `path`, if one is armed.
    pub fn take_call_failure(&mut self, path: &str) -> Option<CallFault> {
        let fault = self.calls.iter_mut().find(|fault| {
            fault.count > 0 && fault.path.as_deref().is_none_or(|p| path.contains(p))
        })?;
        fault.count -= 1;
        let taken = fault.clone();
        self.calls.retain(|fault| fault.count > 0);
        Some(taken)
    }
}

/// Whether a VM matches a fault selector: its VMID, its name, or a `prefix*` pattern.
pub(super) fn selects(selectors: &[String], vmid: u32, name: &str) -> bool {
    selectors.iter().any(|selector| {
        selector == &vmid.to_string()
            || selector == name
            || selector
                .strip_suffix('*')
                .is_some_and(|prefix| name.starts_with(prefix))
    })
}

pub(super) struct SimState {
    pub cluster_name: String,
    pub nodes: BTreeMap<String, NodeState>,
    pub storages: BTreeMap<String, StorageState>,
    pub pools: BTreeMap<String, String>,
    pub vms: BTreeMap<u32, VmState>,
    pub tasks: HashMap<String, TaskState>,
    pub next_pid: u32,
    pub pstart: u64,
    /// Each VM's node address (its default route's).
    pub leases: BTreeMap<u32, Ipv4Addr>,
    /// Each card's address, by (VMID, card index).
    pub card_leases: BTreeMap<(u32, usize), Ipv4Addr>,
    /// The network segments, the main one first.
    pub segments: Vec<crate::world::WorldSegment>,
    /// PCI mappings: id → (node, device path).
    pub pci_mappings: BTreeMap<String, Vec<(String, String)>>,
    /// The mapped devices each running VM holds: (mapping, device path).
    pub held_devices: BTreeMap<u32, Vec<(String, String)>>,
    pub faults: Faults,
    pub calls: BTreeMap<String, u64>,
    pub exchanges: Vec<Exchange>,
    /// Every scalar parameter received, as (method, template, name, value), deduplicated:
    /// what judges of the published schema read ([`super::SimHandle::sent_parameters`]).
    pub sent: std::collections::BTreeSet<SentParameter>,
    pub next_mac: u32,
    pub store: super::volumes::Store,
}

/// One parameter a client sent: (method, path template, name, value as text).
pub type SentParameter = (String, String, String, String);

/// Distinct parameters remembered at most (a lab runs for minutes; values repeat).
const MAX_SENT: usize = 50_000;

impl SimState {
    /// Remembers the scalar parameters of one call (arrays and objects are no property
    /// strings; path parameters are not in `raw`).
    pub fn remember_sent(&mut self, method: &str, template: &str, raw: &BTreeMap<String, Value>) {
        for (name, value) in raw {
            let text = match value {
                Value::String(text) => text.clone(),
                Value::Number(number) => number.to_string(),
                Value::Bool(flag) => u8::from(*flag).to_string(),
                _ => continue,
            };
            if name == "_dc" {
                continue;
            }
            if self.sent.len() >= MAX_SENT {
                return;
            }
            self.sent
                .insert((method.to_owned(), template.to_owned(), name.clone(), text));
        }
    }

    /// Counts one call of an endpoint.
    pub fn count(&mut self, key: &str) {
        *self.calls.entry(key.to_owned()).or_default() += 1;
    }

    /// Builds the state a world describes.
    pub fn from_world(world: &ProxmoxWorld, now_unix: i64) -> Self {
        let mut state = SimState {
            cluster_name: world.cluster_name.clone(),
            nodes: world
                .nodes
                .iter()
                .enumerate()
                .map(|(index, node)| {
                    (
                        node.name.clone(),
                        NodeState {
                            cores: node.cores,
                            memory_bytes: node.memory_gib * GIB,
                            online: node.online && !world.faults.offline_nodes.contains(&node.name),
                            index: index as u32 + 1,
                            bridges: node
                                .bridges
                                .iter()
                                .map(|b| (b.name.clone(), b.mtu))
                                .collect(),
                        },
                    )
                })
                .collect(),
            storages: world
                .storages
                .iter()
                .map(|s| {
                    (
                        s.name.clone(),
                        StorageState {
                            kind: s.kind.clone(),
                            shared: s.shared,
                            size_bytes: s.size_gib * GIB,
                            content: s.content_types(),
                        },
                    )
                })
                .collect(),
            pools: world
                .pools
                .iter()
                .map(|p| (p.clone(), String::new()))
                .collect(),
            held_devices: BTreeMap::new(),
            vms: BTreeMap::new(),
            tasks: HashMap::new(),
            next_pid: 0x1000,
            pstart: 0x10_0000,
            leases: BTreeMap::new(),
            card_leases: BTreeMap::new(),
            segments: world.network.all_segments(),
            pci_mappings: pci_mappings(world),
            faults: Faults {
                tasks: world.faults.fail_tasks.clone(),
                calls: world.faults.fail_calls.clone(),
                latency: world.faults.latency.map(|d| d.0).unwrap_or_default(),
                agent_never_starts: world.faults.agent_never_starts.clone(),
                hung: world.faults.hung_vms.clone(),
                steal_next_vmid: 0,
                hostile: Vec::new(),
                flooding: Vec::new(),
            },
            calls: BTreeMap::new(),
            exchanges: Vec::new(),
            sent: std::collections::BTreeSet::new(),
            next_mac: 1,
            store: super::volumes::Store::default(),
        };
        let first_storage = world
            .storages
            .first()
            .map(|s| s.name.clone())
            .unwrap_or_else(|| "local-lvm".into());
        for template in world.effective_templates() {
            state.add_template(&template, &first_storage, now_unix);
        }
        for vm in &world.vms {
            let mut config = state.base_config(
                vm.vmid,
                &vm.name,
                vm.cores,
                vm.memory_mib,
                &first_storage,
                u64::from(vm.disk_gib) * GIB,
                now_unix,
            );
            if let Some(tags) = &vm.tags {
                config.insert("tags".into(), tags.clone());
            }
            if let Some(description) = &vm.description {
                config.insert("description".into(), description.clone());
            }
            state.insert_vm(vm.vmid, &vm.node, config, vm.running, None);
            if vm.running {
                state.lease(vm.vmid);
                if let Some(seeded) = state.vms.get_mut(&vm.vmid) {
                    seeded.agent_ready_at = Some(tokio::time::Instant::now());
                    seeded.started_unix = Some(now_unix);
                }
            }
        }
        state
    }

    /// Adds `template` as the world declares it (its disk on its storage, else `first_storage`).
    fn add_template(
        &mut self,
        template: &crate::world::WorldTemplate,
        first_storage: &str,
        now_unix: i64,
    ) {
        let storage = template.storage.clone().unwrap_or(first_storage.to_owned());
        let mut config = self.base_config(
            template.vmid,
            &template.name,
            template.cores,
            template.memory_mib,
            &storage,
            u64::from(template.disk_gib) * GIB,
            now_unix,
        );
        config.insert("cpu".into(), template.cpu.clone());
        config.insert("template".into(), "1".into());
        if !template.tags.is_empty() {
            config.insert("tags".into(), template.tags.join(";"));
        }
        if !template.cloud_init_drive {
            config.retain(|key, _| key != "ide2" && key != "ipconfig0");
        }
        config.insert(
            "scsi0".into(),
            format!(
                "{storage}:base-{}-disk-0,size={}G",
                template.vmid, template.disk_gib
            ),
        );
        self.insert_vm(template.vmid, &template.node, config, false, None);
        if let Some(vm) = self.vms.get_mut(&template.vmid) {
            (vm.k3s_airgap, vm.talos) = (template.k3s.clone(), template.talos.clone());
            vm.talos_extensions = template.extensions();
            vm.cloud_init = template.has_cloud_init();
        }
    }

    /// The config a fresh VM (or template) of this size has.
    #[allow(clippy::too_many_arguments)]
    pub fn base_config(
        &mut self,
        vmid: u32,
        name: &str,
        cores: u32,
        memory_mib: u32,
        storage: &str,
        disk_bytes: u64,
        now_unix: i64,
    ) -> BTreeMap<String, String> {
        let mut config = BTreeMap::new();
        config.insert("name".into(), name.to_owned());
        config.insert("cores".into(), cores.to_string());
        config.insert("sockets".into(), "1".into());
        config.insert("memory".into(), memory_mib.to_string());
        config.insert("ostype".into(), "l26".into());
        config.insert("scsihw".into(), "virtio-scsi-single".into());
        config.insert("boot".into(), "order=scsi0;net0".into());
        config.insert("agent".into(), "1".into());
        config.insert(
            "scsi0".into(),
            format!(
                "{storage}:vm-{vmid}-disk-0,iothread=1,size={}",
                format_size(disk_bytes)
            ),
        );
        config.insert(
            "net0".into(),
            format!("virtio={},bridge=vmbr0", self.new_mac()),
        );
        config.insert(
            "ide2".into(),
            format!("{storage}:vm-{vmid}-cloudinit,media=cdrom"),
        );
        config.insert("ipconfig0".into(), "ip=dhcp".into());
        config.insert(
            "meta".into(),
            format!("creation-qemu=9.2.0,ctime={now_unix}"),
        );
        config.insert(
            "smbios1".into(),
            format!("uuid={}", fake_uuid(vmid, now_unix)),
        );
        config.insert("vmgenid".into(), fake_uuid(vmid ^ 0x5a5a, now_unix));
        config
    }

    pub fn new_mac(&mut self) -> String {
        let n = self.next_mac;
        self.next_mac += 1;
        format!(
            "BC:24:11:{:02X}:{:02X}:{:02X}",
            (n >> 16) & 0xff,
            (n >> 8) & 0xff,
            n & 0xff
        )
    }

    pub fn insert_vm(
        &mut self,
        vmid: u32,
        node: &str,
        config: BTreeMap<String, String>,
        running: bool,
        pool: Option<String>,
    ) {
        self.vms.insert(
            vmid,
            VmState {
                node: node.to_owned(),
                config,
                running,
                pool,
                agent_ready_at: None,
                started_unix: None,
                execs: BTreeMap::new(),
                next_exec_pid: 1000 + u64::from(vmid % 97) * 10,
                received: Vec::new(),
                k3s_airgap: None,
                talos: None,
                talos_extensions: Vec::new(),
                cloud_init: true,
            },
        );
    }

    /// The VM `vmid` on `node`, or the error a real host gives.
    pub fn vm_on(&self, node: &str, vmid: u32) -> Result<&VmState, ApiFail> {
        match self.vms.get(&vmid) {
            Some(vm) if vm.node == node => Ok(vm),
            _ => Err(missing_config(node, vmid)),
        }
    }

    pub fn vm_on_mut(&mut self, node: &str, vmid: u32) -> Result<&mut VmState, ApiFail> {
        match self.vms.get_mut(&vmid) {
            Some(vm) if vm.node == node => Ok(vm),
            _ => Err(missing_config(node, vmid)),
        }
    }

    pub fn identity(&self, vmid: u32) -> Option<GuestIdentity> {
        let vm = self.vms.get(&vmid)?;
        Some(GuestIdentity {
            vmid: VmId(vmid),
            name: vm.name(),
            node: vm.node.clone(),
            address: self.leases.get(&vmid).copied(),
            k3s_airgap: vm.k3s_airgap.clone(),
            talos: vm.talos.clone(),
            talos_extensions: vm.talos_extensions.clone(),
            media: if vm.talos.is_some() {
                self.cdrom_media(vmid)
            } else {
                Vec::new()
            },
            cluster: vm.config.get("tags").and_then(|tags| {
                tags.split([';', ',', ' '])
                    .find_map(|tag| tag.strip_prefix("cluster-"))
                    .map(str::to_owned)
            }),
            hardware: self.guest_hardware(vmid),
        })
    }

    /// The uploaded images in `vmid`'s CD-ROM drives, in drive order.
    fn cdrom_media(&self, vmid: u32) -> Vec<super::guest::MediaImage> {
        let Some(vm) = self.vms.get(&vmid) else {
            return Vec::new();
        };
        vm.config
            .iter()
            .filter(|(key, _)| key.starts_with("ide") || key.starts_with("sata"))
            .filter(|(_, value)| value.split(',').any(|part| part == "media=cdrom"))
            .filter_map(|(_, value)| self.volume_bytes(&vm.node, value.split(',').next()?))
            .map(super::guest::MediaImage)
            .collect()
    }

    /// The next free VMID (100 and up).
    pub fn next_free_vmid(&self) -> u32 {
        (100u32..)
            .find(|id| !self.vms.contains_key(id))
            .unwrap_or(u32::MAX)
    }

    /// Memory all non-template VMs on `node` are configured with.
    pub fn committed_memory(&self, node: &str, skip: Option<u32>) -> u64 {
        self.vms
            .iter()
            .filter(|(id, vm)| vm.node == node && !vm.is_template() && Some(**id) != skip)
            .map(|(_, vm)| vm.memory_bytes())
            .sum()
    }

    /// Memory running VMs on `node` use.
    pub fn running_memory(&self, node: &str) -> u64 {
        self.vms
            .values()
            .filter(|vm| vm.node == node && vm.running)
            .map(VmState::memory_bytes)
            .sum()
    }

    /// Whether the VM's agent answers now; the error text a real host gives otherwise.
    pub fn agent_check(&self, node: &str, vmid: u32) -> Result<AgentState, ApiFail> {
        let vm = self.vm_on(node, vmid)?;
        if !vm.agent_enabled() {
            return Err(ApiFail::die("No QEMU guest agent configured"));
        }
        if !vm.running {
            return Err(ApiFail::die(format!("VM {vmid} is not running")));
        }
        let name = vm.name();
        if selects(&self.faults.hung, vmid, &name) {
            return Ok(AgentState::Hung);
        }
        if selects(&self.faults.agent_never_starts, vmid, &name) {
            return Err(ApiFail::die("QEMU guest agent is not running"));
        }
        match vm.agent_ready_at {
            Some(at) if tokio::time::Instant::now() >= at => Ok(AgentState::Ready),
            _ => Err(ApiFail::die("QEMU guest agent is not running")),
        }
    }

    /// Whether a hostile agent fault selects VM `vmid` for `program` (any program: `None`).
    pub fn is_hostile(&self, vmid: u32, program: Option<&str>) -> bool {
        let Some(vm) = self.vms.get(&vmid) else {
            return false;
        };
        let name = vm.name();
        self.faults.hostile.iter().any(|(selector, target)| {
            program.is_none_or(|p| p == target)
                && selects(std::slice::from_ref(selector), vmid, &name)
        })
    }

    /// How many bytes of output a flooding agent fault makes VM `vmid` answer `program` with.
    pub fn flood_of(&self, vmid: u32, program: &str) -> Option<usize> {
        let vm = self.vms.get(&vmid)?;
        let name = vm.name();
        self.faults
            .flooding
            .iter()
            .find(|(selector, target, _)| {
                target == program && selects(std::slice::from_ref(selector), vmid, &name)
            })
            .map(|(_, _, bytes)| *bytes)
    }
}

/// How a running VM's agent behaves.
pub(super) enum AgentState {
    Ready,
    Hung,
}

pub(super) fn missing_config(node: &str, vmid: u32) -> ApiFail {
    ApiFail::die(format!(
        "Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist"
    ))
}

fn fake_uuid(seed: u32, now: i64) -> String {
    let a = seed.wrapping_mul(2_654_435_761);
    let b = now as u64;
    format!(
        "{a:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (b >> 16) & 0xffff,
        b & 0xfff,
        (a >> 4) & 0xfff,
        (b.wrapping_mul(0x9E37_79B9)) & 0xffff_ffff_ffff
    )
}

/// The world's PCI mappings: id → (node, device path) of each device.
fn pci_mappings(world: &ProxmoxWorld) -> BTreeMap<String, Vec<(String, String)>> {
    world
        .pci_mappings
        .iter()
        .map(|m| {
            let devices = m
                .devices
                .iter()
                .map(|d| (d.node.clone(), d.path.clone()))
                .collect();
            (m.id.clone(), devices)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_ids_names_and_prefixes() {
        let selectors = vec![
            "105".to_owned(),
            "capstan-prod-*".to_owned(),
            "web".to_owned(),
        ];
        assert!(selects(&selectors, 105, "x"));
        assert!(selects(&selectors, 1, "capstan-prod-general-a"));
        assert!(selects(&selectors, 1, "web"));
        assert!(!selects(&selectors, 1, "capstan-dev-general-a"));
    }
}
