//! The lab's world: what the simulated Proxmox VE holds at start (nodes, storages, templates,
//! pools, VMs), how long its tasks take, its DHCP range and the faults to inject. Read from a
//! lab config file (`capstan lab --config LAB.yaml`) or the [`LabConfig::default`] world.
//!
//! The top level is a map of sections: `proxmox:` (the simulated Proxmox VE, with the timings
//! of everything that happens in and around its VMs) and `clusters:` (simulated Kubernetes
//! clusters that exist at start). Every level denies unknown fields, so a typo is an error.

use std::net::Ipv4Addr;
use std::path::Path;

use std::collections::BTreeMap;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::kube::SimClusterConfig;
use crate::values::{Ipv4Range, KubeVersion, LabDuration};

mod hardware;
pub use hardware::{WorldBridge, WorldPciDevice, WorldPciMapping, WorldSegment};

/// Reading a lab config failed.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    /// The file could not be read.
    #[error("cannot read the lab config {path}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not describe a world.
    #[error("invalid lab config {path}")]
    Parse {
        /// The file.
        path: std::path::PathBuf,
        /// What the YAML parser said (boxed: it is large).
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// The world is inconsistent (a template on an unknown node, a duplicate VMID, ...).
    #[error("invalid lab world: {reason}")]
    Invalid {
        /// What is wrong.
        reason: String,
    },
}

/// A lab config file.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabConfig {
    /// The simulated Proxmox VE cluster.
    #[serde(default)]
    pub proxmox: ProxmoxWorld,
    /// Simulated Kubernetes clusters that exist when the lab starts, by name. `management`
    /// (where Flux runs) is added with its default world unless declared here. Clusters that
    /// `kubeadm init` creates inside the lab's VMs come on top.
    #[serde(default)]
    pub clusters: BTreeMap<String, SimClusterConfig>,
}

impl LabConfig {
    /// Reads and checks a lab config file.
    ///
    /// # Errors
    /// When the file cannot be read, is not valid YAML for a world, or is inconsistent.
    pub fn load(path: &Path) -> Result<Self, WorldError> {
        let text = std::fs::read_to_string(path).map_err(|source| WorldError::Read {
            path: path.to_owned(),
            source,
        })?;
        let config = LabConfig::parse(&text).map_err(|source| WorldError::Parse {
            path: path.to_owned(),
            source,
        })?;
        config.check()?;
        Ok(config)
    }

    /// Checks the Proxmox world and the declared clusters.
    ///
    /// # Errors
    /// [`WorldError::Invalid`] naming the first problem.
    pub fn check(&self) -> Result<(), WorldError> {
        self.proxmox.check()?;
        for (name, cluster) in &self.clusters {
            let invalid = |reason: String| WorldError::Invalid {
                reason: format!("clusters.{name}: {reason}"),
            };
            let is_label = !name.is_empty()
                && name.len() <= 63
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !name.starts_with('-')
                && !name.ends_with('-');
            if !is_label {
                return Err(invalid(
                    "a cluster name is a DNS label (lowercase letters, digits, '-')".into(),
                ));
            }
            if let Err(reason) = cluster.version.parse::<KubeVersion>() {
                return Err(invalid(reason));
            }
            let mut names = std::collections::BTreeSet::new();
            for node in &cluster.nodes {
                if !names.insert(node.name.as_str()) {
                    return Err(invalid(format!("node {} is declared twice", node.name)));
                }
            }
        }
        Ok(())
    }

    /// Parses lab config YAML (without the consistency check).
    ///
    /// # Errors
    /// The parser's error.
    pub fn parse(text: &str) -> Result<Self, Box<serde_saphyr::Error>> {
        serde_saphyr::from_str(text).map_err(Box::new)
    }
}

/// The simulated Proxmox VE cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxmoxWorld {
    /// Cluster name (shown by `/cluster/status`).
    #[serde(default = "default_cluster_name")]
    pub cluster_name: String,
    /// Proxmox nodes.
    #[serde(default = "default_nodes")]
    pub nodes: Vec<WorldNode>,
    /// Storages, present on every node (not shared unless said so).
    #[serde(default = "default_storages")]
    pub storages: Vec<WorldStorage>,
    /// Templates. Absent: `debian13-k8s`, `debian13-k8s-v2`, `debian13-k3s` and
    /// `talos-v1.13.9` on every node.
    #[serde(default)]
    pub templates: Option<Vec<WorldTemplate>>,
    /// Resource pools.
    #[serde(default = "default_pools")]
    pub pools: Vec<String>,
    /// VMs that exist at start (someone else's, or leftovers to recognise).
    #[serde(default)]
    pub vms: Vec<WorldVm>,
    /// The VMs' network.
    #[serde(default)]
    pub network: WorldNetwork,
    /// PCI resource mappings (`cluster/mapping/pci`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pci_mappings: Vec<WorldPciMapping>,
    /// How long tasks take.
    #[serde(default)]
    pub timings: Timings,
    /// Faults active from the start.
    #[serde(default)]
    pub faults: WorldFaults,
}

/// The K3s release the default world's `debian13-k3s` template carries.
pub const DEFAULT_K3S_RELEASE: &str = "v1.36.2+k3s1";

/// The Talos release the default world's `talos-v1.13.9` template boots.
pub const DEFAULT_TALOS_RELEASE: &str = "v1.13.9";

impl Default for ProxmoxWorld {
    fn default() -> Self {
        ProxmoxWorld {
            cluster_name: default_cluster_name(),
            nodes: default_nodes(),
            storages: default_storages(),
            templates: None,
            pools: default_pools(),
            vms: Vec::new(),
            network: WorldNetwork::default(),
            pci_mappings: Vec::new(),
            timings: Timings::default(),
            faults: WorldFaults::default(),
        }
    }
}

impl ProxmoxWorld {
    /// The templates: the configured ones, or the default four on every node
    /// (`debian13-k8s` at 9000+i, `debian13-k8s-v2` at 9100+i, both tagged `kubeadm`,
    /// `debian13-k3s` at 9200+i, tagged `k3s`, which carries the air-gap install of
    /// [`DEFAULT_K3S_RELEASE`] for examples-repo's `edge`, and `talos-v1.13.9` at 9600+i,
    /// tagged `talos`, a Talos image of [`DEFAULT_TALOS_RELEASE`] for examples-repo's `talos`).
    pub fn effective_templates(&self) -> Vec<WorldTemplate> {
        if let Some(templates) = &self.templates {
            return templates.clone();
        }
        let mut templates = Vec::new();
        // Talos at 9600: tests add their own templates at 9300-9599 next to these.
        let talos_name = format!("talos-{DEFAULT_TALOS_RELEASE}");
        for (base, name, k3s, talos, tag) in [
            (9000, "debian13-k8s", None, None, "kubeadm"),
            (9100, "debian13-k8s-v2", None, None, "kubeadm"),
            (9200, "debian13-k3s", Some(DEFAULT_K3S_RELEASE), None, "k3s"),
            (
                9600,
                &talos_name,
                None,
                Some(DEFAULT_TALOS_RELEASE),
                "talos",
            ),
        ] {
            for (index, node) in self.nodes.iter().enumerate() {
                templates.push(WorldTemplate {
                    k3s: k3s.map(str::to_owned),
                    talos: talos.map(str::to_owned),
                    tags: vec![tag.to_owned()],
                    ..WorldTemplate::new(name, base + index as u32, &node.name)
                });
            }
        }
        templates
    }

    /// Checks references and uniqueness.
    ///
    /// # Errors
    /// [`WorldError::Invalid`] naming the first problem.
    pub fn check(&self) -> Result<(), WorldError> {
        let invalid = |reason: String| Err(WorldError::Invalid { reason });
        if self.nodes.is_empty() {
            return invalid("proxmox.nodes is empty".into());
        }
        if self.storages.is_empty() {
            return invalid("proxmox.storages is empty".into());
        }
        for storage in &self.storages {
            if let Some(unknown) = storage
                .content
                .iter()
                .find(|c| !STORAGE_CONTENT_TYPES.contains(&c.as_str()))
            {
                return invalid(format!(
                    "storage {} holds unknown content type {unknown}",
                    storage.name
                ));
            }
        }
        let has_node = |name: &str| self.nodes.iter().any(|n| n.name == name);
        let has_storage = |name: &str| self.storages.iter().any(|s| s.name == name);
        let mut vmids = std::collections::BTreeSet::new();
        for template in self.effective_templates() {
            if !has_node(&template.node) {
                return invalid(format!(
                    "template {} is on unknown node {}",
                    template.name, template.node
                ));
            }
            if let Some(storage) = &template.storage
                && !has_storage(storage)
            {
                return invalid(format!(
                    "template {} is on unknown storage {storage}",
                    template.name
                ));
            }
            if !vmids.insert(template.vmid) {
                return invalid(format!("VMID {} is used twice", template.vmid));
            }
        }
        for vm in &self.vms {
            if !has_node(&vm.node) {
                return invalid(format!("VM {} is on unknown node {}", vm.vmid, vm.node));
            }
            if !vmids.insert(vm.vmid) {
                return invalid(format!("VMID {} is used twice", vm.vmid));
            }
        }
        for segment in self.network.all_segments() {
            let Some(range) = segment.dhcp_range else {
                continue;
            };
            if !segment.holds(range.first) || !segment.holds(range.last) {
                return invalid(format!(
                    "the DHCP range {}-{} is not inside {}",
                    range.first, range.last, segment.subnet
                ));
            }
        }
        for mapping in &self.pci_mappings {
            if let Some(device) = mapping.devices.iter().find(|d| !has_node(&d.node)) {
                return invalid(format!(
                    "PCI mapping {} has a device on unknown node {}",
                    mapping.id, device.node
                ));
            }
        }
        Ok(())
    }
}

fn default_cluster_name() -> String {
    "lab".into()
}

fn default_nodes() -> Vec<WorldNode> {
    ["pve1", "pve2", "pve3"]
        .into_iter()
        .map(|name| WorldNode {
            name: name.into(),
            cores: 16,
            memory_gib: 64,
            online: true,
            bridges: hardware::default_bridges(),
        })
        .collect()
}

/// `local-lvm` for VM disks (first: templates without a storage are on it) and, as on every
/// Proxmox VE host, the directory storage `local`, which holds ISO images (where capstan
/// uploads Talos machine configs).
fn default_storages() -> Vec<WorldStorage> {
    vec![
        WorldStorage {
            name: "local-lvm".into(),
            kind: "lvmthin".into(),
            shared: false,
            size_gib: 2048,
            content: Vec::new(),
        },
        WorldStorage::local_directory(&["iso", "vztmpl", "backup"]),
    ]
}

fn default_pools() -> Vec<String> {
    vec!["capstan".into()]
}

/// A Proxmox node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldNode {
    /// Node name.
    pub name: String,
    /// CPU threads.
    #[serde(default = "default_node_cores")]
    pub cores: u32,
    /// Memory, GiB.
    #[serde(default = "default_node_memory", rename = "memoryGiB")]
    pub memory_gib: u64,
    /// Whether the node is up at start.
    #[serde(default = "default_true")]
    pub online: bool,
    /// Its bridges (default: `vmbr0`).
    #[serde(default = "hardware::default_bridges")]
    pub bridges: Vec<WorldBridge>,
}

fn default_node_cores() -> u32 {
    16
}

fn default_node_memory() -> u64 {
    64
}

fn default_true() -> bool {
    true
}

/// A storage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldStorage {
    /// Storage id.
    pub name: String,
    /// Storage type (`lvmthin`, `dir`, `rbd`, ...).
    #[serde(default = "default_storage_kind", rename = "type")]
    pub kind: String,
    /// Shared between nodes (clones may then target another node).
    #[serde(default)]
    pub shared: bool,
    /// Size per node (or in all, when shared), GiB.
    #[serde(default = "default_storage_size", rename = "sizeGiB")]
    pub size_gib: u64,
    /// Content types it holds (`images`, `rootdir`, `iso`, `vztmpl`, `backup`, `snippets`,
    /// `import`). Empty: `images,rootdir`, Proxmox's default. Uploads (`iso`, `vztmpl`,
    /// `import`) need a file-based storage (`dir`, `nfs`, `cifs`, `cephfs`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<String>,
}

/// Every content type a Proxmox storage can hold (`pve-storage-content`).
pub const STORAGE_CONTENT_TYPES: &[&str] = &[
    "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import",
];

impl WorldStorage {
    /// A node's own directory storage `local` (`/var/lib/vz`, 100 GiB) holding `content`:
    /// where a Proxmox VE host keeps uploaded ISO images.
    pub fn local_directory(content: &[&str]) -> Self {
        WorldStorage {
            name: "local".into(),
            kind: "dir".into(),
            shared: false,
            size_gib: 100,
            content: content.iter().map(|c| (*c).to_owned()).collect(),
        }
    }

    /// The content types it holds, defaults applied.
    pub fn content_types(&self) -> Vec<String> {
        if self.content.is_empty() {
            vec!["images".into(), "rootdir".into()]
        } else {
            self.content.clone()
        }
    }
}

fn default_storage_kind() -> String {
    "lvmthin".into()
}

fn default_storage_size() -> u64 {
    2048
}

/// A template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldTemplate {
    /// Template name (what `machine.template` names).
    pub name: String,
    /// Its VMID.
    pub vmid: u32,
    /// The node it is on.
    pub node: String,
    /// vCPUs.
    #[serde(default = "default_template_cores")]
    pub cores: u32,
    /// Memory, MiB.
    #[serde(default = "default_template_memory", rename = "memoryMiB")]
    pub memory_mib: u32,
    /// Disk, GiB.
    #[serde(default = "default_template_disk", rename = "diskGiB")]
    pub disk_gib: u32,
    /// vCPU type.
    #[serde(default = "default_template_cpu")]
    pub cpu: String,
    /// Storage of its disk (default: the first storage).
    #[serde(default)]
    pub storage: Option<String>,
    /// A K3s release (`v1.36.2+k3s1`) whose air-gap install the disk carries: the `k3s`
    /// binary, its images and the install script, as K3s's air-gap install asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k3s: Option<String>,
    /// A Talos version (`v1.11.5`): the template is a Talos image (nocloud, with the
    /// `qemu-guest-agent` extension), and a VM cloned from it boots Talos from its disk and
    /// takes its machine config from a `cidata` CD-ROM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub talos: Option<String>,
    /// The system extensions a Talos image carries, by the names their metadata give
    /// (`iscsi-tools`); absent: `qemu-guest-agent` alone, as capstan's templates need.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub talos_extensions: Option<Vec<String>>,
    /// Its Proxmox tags (a template may say which distribution it is built for: `kubeadm`,
    /// `k3s`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Whether its disk carries cloud-init, which applies the VM's cloud-init settings
    /// (`ipconfig<n>`, `nameserver`) at boot (default: yes, except on a Talos image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init: Option<bool>,
    /// Whether it has a cloud-init drive (`ide2: <storage>:cloudinit`; default yes).
    #[serde(default = "default_true")]
    pub cloud_init_drive: bool,
}

impl WorldTemplate {
    /// A template as a lab config would declare it with only its name, VMID and node: every
    /// other field at its default.
    pub fn new(name: &str, vmid: u32, node: &str) -> Self {
        WorldTemplate {
            name: name.to_owned(),
            vmid,
            node: node.to_owned(),
            cores: default_template_cores(),
            memory_mib: default_template_memory(),
            disk_gib: default_template_disk(),
            cpu: default_template_cpu(),
            storage: None,
            k3s: None,
            talos: None,
            talos_extensions: None,
            tags: Vec::new(),
            cloud_init: None,
            cloud_init_drive: true,
        }
    }

    /// The extensions its Talos image carries ([`WorldTemplate::talos_extensions`] with its
    /// default); none on another image.
    pub fn extensions(&self) -> Vec<String> {
        match (&self.talos, &self.talos_extensions) {
            (None, _) => Vec::new(),
            (Some(_), Some(listed)) => listed.clone(),
            (Some(_), None) => vec!["qemu-guest-agent".to_owned()],
        }
    }

    /// Whether its disk carries cloud-init ([`WorldTemplate::cloud_init`] with its default).
    pub fn has_cloud_init(&self) -> bool {
        self.cloud_init.unwrap_or(self.talos.is_none())
    }
}

fn default_template_cores() -> u32 {
    2
}

fn default_template_memory() -> u32 {
    2048
}

fn default_template_disk() -> u32 {
    20
}

fn default_template_cpu() -> String {
    "x86-64-v2-AES".into()
}

/// A VM present at start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldVm {
    /// VMID.
    pub vmid: u32,
    /// Name.
    pub name: String,
    /// Node.
    pub node: String,
    /// vCPUs.
    #[serde(default = "default_template_cores")]
    pub cores: u32,
    /// Memory, MiB.
    #[serde(default = "default_template_memory", rename = "memoryMiB")]
    pub memory_mib: u32,
    /// Disk, GiB.
    #[serde(default = "default_template_disk", rename = "diskGiB")]
    pub disk_gib: u32,
    /// Tags, `;`-separated.
    #[serde(default)]
    pub tags: Option<String>,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether it runs at start.
    #[serde(default)]
    pub running: bool,
}

/// The network the VMs live in: the main segment (untagged on `vmbr0`, with a router), and
/// others the cards may reach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldNetwork {
    /// The subnet.
    pub subnet: Ipv4Net,
    /// Addresses handed to running VMs, in order; absent (`null`): no DHCP server, so VMs
    /// need static addresses.
    pub dhcp_range: Option<Ipv4Range>,
    /// Other segments (VLANs, other bridges).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<WorldSegment>,
}

impl Default for WorldNetwork {
    fn default() -> Self {
        WorldNetwork {
            subnet: Ipv4Net::new_assert(Ipv4Addr::new(192, 168, 1, 0), 24),
            dhcp_range: Some(Ipv4Range {
                first: Ipv4Addr::new(192, 168, 1, 100),
                last: Ipv4Addr::new(192, 168, 1, 169),
            }),
            segments: Vec::new(),
        }
    }
}

impl WorldNetwork {
    /// Every segment: the main one (untagged on `vmbr0`, with a router) first.
    pub fn all_segments(&self) -> Vec<WorldSegment> {
        let main = WorldSegment {
            bridge: "vmbr0".into(),
            vlan: None,
            subnet: self.subnet,
            dhcp_range: self.dhcp_range,
            router: true,
        };
        std::iter::once(main)
            .chain(self.segments.iter().cloned())
            .collect()
    }
}

/// How long each kind of task takes. Defaults are small so a whole cluster comes up in
/// seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timings {
    /// Full clone (`qmclone`).
    #[serde(default = "ms::<300>")]
    pub clone: LabDuration,
    /// Config change (`qmconfig`).
    #[serde(default = "ms::<20>")]
    pub config: LabDuration,
    /// Disk resize (`resize`).
    #[serde(default = "ms::<50>")]
    pub resize: LabDuration,
    /// Start (`qmstart`).
    #[serde(default = "ms::<150>")]
    pub start: LabDuration,
    /// From start until the guest agent answers.
    #[serde(default = "ms::<400>")]
    pub boot: LabDuration,
    /// Clean shutdown (`qmshutdown`).
    #[serde(default = "ms::<150>")]
    pub shutdown: LabDuration,
    /// Hard stop (`qmstop`).
    #[serde(default = "ms::<50>")]
    pub stop: LabDuration,
    /// Destroy (`qmdestroy`).
    #[serde(default = "ms::<100>")]
    pub destroy: LabDuration,
    /// How long a hung VM's agent takes to time out (a real host waits 3 s on guest-ping).
    #[serde(default = "ms::<3000>")]
    pub agent_timeout: LabDuration,
    /// How long a 401 waits (a real host waits 3 s to slow down guessing).
    #[serde(default = "ms::<3000>")]
    pub auth_failure_delay: LabDuration,
    /// Inside the VMs: installing CRI-O and the Kubernetes packages (the prepare script).
    #[serde(default = "ms::<200>")]
    pub prepare: LabDuration,
    /// Inside the VMs: `kubeadm init`.
    #[serde(default = "ms::<300>")]
    pub kubeadm_init: LabDuration,
    /// Inside the VMs: `kubeadm join`.
    #[serde(default = "ms::<200>")]
    pub kubeadm_join: LabDuration,
    /// From a join (or Calico's arrival, or a VM's restart) until the Node is Ready.
    #[serde(default = "ms::<300>")]
    pub node_ready: LabDuration,
    /// Inside the VMs: `kubeadm upgrade apply` and certificate renewal.
    #[serde(default = "ms::<200>")]
    pub kubeadm_upgrade: LabDuration,
}

fn ms<const N: u64>() -> LabDuration {
    LabDuration(std::time::Duration::from_millis(N))
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            clone: ms::<300>(),
            config: ms::<20>(),
            resize: ms::<50>(),
            start: ms::<150>(),
            boot: ms::<400>(),
            shutdown: ms::<150>(),
            stop: ms::<50>(),
            destroy: ms::<100>(),
            agent_timeout: ms::<3000>(),
            auth_failure_delay: ms::<3000>(),
            prepare: ms::<200>(),
            kubeadm_init: ms::<300>(),
            kubeadm_join: ms::<200>(),
            node_ready: ms::<300>(),
            kubeadm_upgrade: ms::<200>(),
        }
    }
}

/// Faults active from the start (tests can add more at run time through the fault handle).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldFaults {
    /// VMs (names, `prefix*` patterns) whose guest agent never starts.
    #[serde(default)]
    pub agent_never_starts: Vec<String>,
    /// VMs (names, `prefix*` patterns) that hang once running: the agent never answers and a
    /// clean shutdown times out.
    #[serde(default)]
    pub hung_vms: Vec<String>,
    /// Nodes that are offline (gone) at start.
    #[serde(default)]
    pub offline_nodes: Vec<String>,
    /// Latency added to every API call.
    #[serde(default)]
    pub latency: Option<LabDuration>,
    /// Tasks to fail.
    #[serde(default)]
    pub fail_tasks: Vec<TaskFault>,
    /// Calls to fail.
    #[serde(default)]
    pub fail_calls: Vec<CallFault>,
}

/// Fail the next `count` tasks of a type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskFault {
    /// Task type: `qmclone`, `qmconfig`, `qmstart`, `qmshutdown`, `qmstop`, `qmdestroy`,
    /// `resize`.
    pub kind: String,
    /// How many.
    #[serde(default = "default_one")]
    pub count: u32,
    /// The task's error text (its exit status).
    pub message: String,
}

/// Answer the next `count` calls (optionally only those whose path contains `path`) with an
/// error status and message instead of serving them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallFault {
    /// How many calls.
    #[serde(default = "default_one")]
    pub count: u32,
    /// HTTP status (500 for a lock timeout, 503, 595, ...).
    pub status: u16,
    /// Message (reason phrase and body `message`).
    pub message: String,
    /// Only calls whose API path contains this text.
    #[serde(default)]
    pub path: Option<String>,
}

impl CallFault {
    /// A 503 for the next `count` calls.
    pub fn unavailable(count: u32) -> Self {
        CallFault {
            count,
            status: 503,
            message: "Service Unavailable".into(),
            path: None,
        }
    }

    /// The lock timeout a real host answers when another process holds a VM's config lock.
    pub fn lock_timeout(count: u32, vmid: u32) -> Self {
        CallFault {
            count,
            status: 500,
            message: format!(
                "can't lock file '/var/lock/qemu-server/lock-{vmid}.conf' - got timeout"
            ),
            path: None,
        }
    }

    /// Only for calls whose path contains `path`.
    pub fn on_path(mut self, path: &str) -> Self {
        self.path = Some(path.to_owned());
        self
    }
}

fn default_one() -> u32 {
    1
}

#[cfg(test)]
mod tests;
