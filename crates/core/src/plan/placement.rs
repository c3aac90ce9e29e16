//! Deterministic VM names and the choice of a Proxmox node for each new VM (rule 15).
//!
//! Names are `capstan-<cluster>-<pool>-<suffix>` with a suffix derived from the cluster, the
//! pool, the spec hash and an ordinal: the smallest ordinal whose name is free. A crash right
//! after a clone therefore finds the same name taken and never makes a duplicate.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::Arc;

use sha1::{Digest, Sha1};

use crate::model::NodeName;
use crate::observed::{Observed, ObservedStorage, ObservedTemplate};
use crate::spec::Distribution;
use crate::spec::validate::VM_NAME_PREFIX;

use super::hardware_fit::HardwareNeeds;

const SUFFIX_LEN: u32 = 5;

/// Placement preference, smallest first: VMs of the pool on the node, free memory (most
/// first), position in `placement`.
type PlacementKey = (u32, Reverse<i64>, usize);
const BASE36: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// The name of the `ordinal`-th machine of a pool built from the spec `spec_hash`.
pub fn machine_name(cluster: &str, pool: &str, spec_hash: &str, ordinal: u32) -> NodeName {
    // sha1 of "<cluster>\n<pool>\n<spec hash>\n<ordinal>", fed piece by piece (a prediction
    // names every new VM of a cluster).
    let digest = Sha1::new()
        .chain_update(cluster)
        .chain_update("\n")
        .chain_update(pool)
        .chain_update("\n")
        .chain_update(spec_hash)
        .chain_update("\n")
        .chain_update(ordinal.to_string())
        .finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    let mut value = u64::from_be_bytes(bytes) % 36u64.pow(SUFFIX_LEN);
    let mut suffix = [b'0'; SUFFIX_LEN as usize];
    for slot in suffix.iter_mut().rev() {
        *slot = BASE36[(value % 36) as usize];
        value /= 36;
    }
    let suffix = String::from_utf8_lossy(&suffix);
    NodeName(smol_str::format_smolstr!(
        "{VM_NAME_PREFIX}{cluster}-{pool}-{suffix}"
    ))
}

/// Free memory of each Proxmox node, free space of each storage and free devices of each PCI
/// mapping, as the plan reserves and releases them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Capacity {
    /// `None` when the Proxmox nodes were not observed: memory is not checked.
    nodes: Option<BTreeMap<String, Load>>,
    /// Free GiB of each storage as a node sees it: (storage, node), or (storage, "") for a
    /// shared storage. Only what was observed is checked.
    storage_free: BTreeMap<(String, String), i64>,
    /// Free devices of each PCI mapping on each node: (mapping, node). Only what was observed
    /// is checked.
    devices_free: BTreeMap<(String, String), i64>,
    /// Bridges, storages, pools and PCI mappings, as observed (shared: never changes during a
    /// plan).
    offer: Arc<super::hardware_fit::Offer>,
    /// Where templates are, shared (the plan copies `Capacity` per cluster; this never
    /// changes during a plan). `None` when not observed: any node of placement is taken.
    templates: Option<Arc<TemplateSites>>,
}

/// The templates and storages Proxmox has, as observed.
#[derive(Debug, PartialEq, Eq)]
struct TemplateSites {
    templates: BTreeMap<String, Vec<ObservedTemplate>>,
    storages: BTreeMap<String, ObservedStorage>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Load {
    online: bool,
    free_mib: i64,
}

impl Capacity {
    /// The capacity the observation shows.
    pub(crate) fn of(observed: &Observed) -> Self {
        let nodes = observed.proxmox_nodes.as_ref().map(|nodes| {
            nodes
                .iter()
                .map(|(name, node)| {
                    let free = i64::try_from(node.memory_free_mib()).unwrap_or(i64::MAX);
                    (
                        name.clone(),
                        Load {
                            online: node.online,
                            free_mib: free,
                        },
                    )
                })
                .collect()
        });
        let templates = observed.proxmox_templates.as_ref().map(|templates| {
            Arc::new(TemplateSites {
                templates: templates.clone(),
                storages: observed.proxmox_storages.clone().unwrap_or_default(),
            })
        });
        let mut storage_free = BTreeMap::new();
        for (name, storage) in observed.proxmox_storages.iter().flatten() {
            for (node, space) in &storage.nodes {
                let at = if storage.shared { "" } else { node.as_str() };
                let free = i64::try_from(space.free_gib()).unwrap_or(i64::MAX);
                storage_free.insert((name.clone(), at.to_owned()), free);
            }
        }
        let mut devices_free: BTreeMap<(String, String), i64> = BTreeMap::new();
        for (mapping, nodes) in observed.pci_mappings.iter().flatten() {
            for node in nodes {
                *devices_free
                    .entry((mapping.clone(), node.clone()))
                    .or_default() += 1;
            }
        }
        // Devices running machines hold (Proxmox reserves a device for a running VM only).
        let running = observed
            .clusters
            .values()
            .flat_map(|cluster| cluster.machines.values())
            .filter(|machine| machine.is_running());
        for machine in running {
            let held = machine
                .config
                .as_ref()
                .and_then(|c| c.hardware.as_ref())
                .map(|h| h.pci.as_slice())
                .unwrap_or_default();
            for device in held {
                let key = (device.mapping.clone(), machine.proxmox_node.to_string());
                if let Some(free) = devices_free.get_mut(&key) {
                    *free -= 1;
                }
            }
        }
        Capacity {
            nodes,
            templates,
            storage_free,
            devices_free,
            offer: Arc::new(super::hardware_fit::Offer::of(observed)),
        }
    }

    /// Whether every copy of `template` observed lacks a cloud-init drive (`false` when the
    /// templates were not observed or it has no copy: other rules speak then).
    pub(crate) fn lacks_cloud_init_drive(&self, template: &str) -> bool {
        self.templates
            .as_ref()
            .and_then(|sites| sites.templates.get(template))
            .is_some_and(|copies| {
                !copies.is_empty() && copies.iter().all(|c| c.without_cloud_init_drive)
            })
    }

    /// What Proxmox offers machines' hardware.
    pub(crate) fn offer(&self) -> &super::hardware_fit::Offer {
        &self.offer
    }

    /// The nodes of `placement` (in its order) where Proxmox can make a full clone of
    /// `template` written to `storage` (the template's own storage when `None`): a node holding
    /// a copy of the template, or any node when a copy is on shared storage and the clone is
    /// written to shared storage too. A copy that says it is built for other distributions
    /// than `distribution` (its tags or description) is no source. The error names the
    /// template, where it is, the nodes refused and the fix.
    pub(crate) fn clone_targets(
        &self,
        template: &str,
        storage: Option<&str>,
        placement: &[String],
        distribution: Distribution,
    ) -> Result<Vec<String>, Unclonable> {
        let Some(sites) = &self.templates else {
            return Ok(placement.to_vec());
        };
        let all = sites.templates.get(template).map_or(&[][..], Vec::as_slice);
        if all.is_empty() {
            return Err(Unclonable::Nowhere {
                template: template.to_owned(),
                placement: placement.join(", "),
            });
        }
        let fits = |copy: &&ObservedTemplate| {
            copy.distributions.is_empty() || copy.distributions.contains(&distribution)
        };
        let copies: Vec<&ObservedTemplate> = all.iter().filter(fits).collect();
        let refuses_hotplug = distribution.capabilities().refuses_memory_hotplug;
        if refuses_hotplug && !copies.is_empty() && copies.iter().all(|copy| copy.memory_hotplug) {
            return Err(Unclonable::MemoryHotplug {
                template: template.to_owned(),
                wanted: distribution.capabilities().tool,
            });
        }
        let copies: Vec<&ObservedTemplate> = copies
            .into_iter()
            .filter(|copy| !(refuses_hotplug && copy.memory_hotplug))
            .collect();
        if copies.is_empty() {
            let declared: Vec<&str> = all
                .iter()
                .flat_map(|copy| copy.distributions.iter().map(|d| d.name()))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            return Err(Unclonable::OtherDistribution {
                template: template.to_owned(),
                declared: declared.join(" and "),
                wanted: distribution.name(),
            });
        }
        // An unknown storage is not judged here: the clone reports it.
        let local_target = storage
            .and_then(|s| sites.storages.get(s))
            .is_some_and(|s| !s.shared);
        let anywhere = !local_target && copies.iter().any(|copy| copy.shared_storage);
        let targets: Vec<String> = placement
            .iter()
            .filter(|node| anywhere || copies.iter().any(|copy| &copy.proxmox_node == *node))
            .cloned()
            .collect();
        if !targets.is_empty() {
            return Ok(targets);
        }
        let found: Vec<String> = copies
            .iter()
            .map(|copy| {
                let kind = if copy.shared_storage {
                    "shared"
                } else {
                    "local"
                };
                format!("{} (VM {}, {kind} storage)", copy.proxmox_node, copy.vm_id)
            })
            .collect();
        let homes: Vec<&str> = copies.iter().map(|c| c.proxmox_node.as_str()).collect();
        let why = match storage {
            Some(storage) if local_target && copies.iter().any(|c| c.shared_storage) => format!(
                "machine.storage {storage} is not shared, so a clone stays on a node that holds the template"
            ),
            _ => "a template on local storage can only be cloned on its own node".to_owned(),
        };
        Err(Unclonable::OffPlacement {
            template: template.to_owned(),
            found: found.join(", "),
            placement: placement.join(", "),
            why,
            homes: homes.join(" or "),
        })
    }

    /// Whether memory is checked at all.
    pub(crate) fn is_known(&self) -> bool {
        self.nodes.is_some()
    }

    /// Takes `mib` on `node` for a new VM.
    pub(crate) fn reserve(&mut self, node: &str, mib: u32) {
        if let Some(load) = self.nodes.as_mut().and_then(|nodes| nodes.get_mut(node)) {
            load.free_mib -= i64::from(mib);
        }
    }

    /// The key of `storage`'s space as `node` sees it, when observed.
    fn storage_key(&self, storage: &str, node: &str) -> Option<(String, String)> {
        let shared = (storage.to_owned(), String::new());
        let local = (storage.to_owned(), node.to_owned());
        if self.storage_free.contains_key(&shared) {
            Some(shared)
        } else {
            self.storage_free.contains_key(&local).then_some(local)
        }
    }

    /// Takes a new VM's data disks (`(storage, GiB)`) and PCI devices (`(mapping, count)`) on
    /// `node`.
    pub(crate) fn reserve_hardware(&mut self, node: &str, needs: &HardwareNeeds<'_>) {
        for (storage, gib) in &needs.disks {
            if let Some(key) = self.storage_key(storage, node)
                && let Some(free) = self.storage_free.get_mut(&key)
            {
                *free -= i64::try_from(*gib).unwrap_or(i64::MAX);
            }
        }
        for (mapping, count) in &needs.devices {
            if let Some(free) = self
                .devices_free
                .get_mut(&((*mapping).to_owned(), node.to_owned()))
            {
                *free -= i64::from(*count);
            }
        }
    }

    /// Why `node` cannot hold `needs` now (storage space, free devices), if it cannot.
    fn hardware_refusal(&self, node: &str, needs: &HardwareNeeds<'_>) -> Option<NodeRefused> {
        for (storage, gib) in &needs.disks {
            let free = self
                .storage_key(storage, node)
                .and_then(|key| self.storage_free.get(&key));
            if let Some(free) = free
                && *free < i64::try_from(*gib).unwrap_or(i64::MAX)
            {
                return Some(NodeRefused::Storage {
                    node: node.to_owned(),
                    storage: storage.clone(),
                    free_gib: (*free).max(0),
                    needed_gib: *gib,
                });
            }
        }
        for (mapping, count) in &needs.devices {
            if let Some(free) = self
                .devices_free
                .get(&((*mapping).to_owned(), node.to_owned()))
                && *free < i64::from(*count)
            {
                return Some(NodeRefused::Device {
                    node: node.to_owned(),
                    mapping: (*mapping).to_owned(),
                });
            }
        }
        None
    }

    /// Gives back `mib` on `node` (a running VM was destroyed or stopped).
    pub(crate) fn release(&mut self, node: &str, mib: u32) {
        if let Some(load) = self.nodes.as_mut().and_then(|nodes| nodes.get_mut(node)) {
            load.free_mib += i64::from(mib);
        }
    }

    /// Gives back one device of PCI mapping `mapping` on `node` (the VM holding it stopped).
    pub(crate) fn release_device(&mut self, node: &str, mapping: &str) {
        if let Some(free) = self
            .devices_free
            .get_mut(&(mapping.to_owned(), node.to_owned()))
        {
            *free += 1;
        }
    }

    /// Writes the memory in use back into `observed`'s Proxmox nodes.
    pub(crate) fn write_back(&self, observed: &mut Observed) {
        let (Some(loads), Some(nodes)) = (&self.nodes, observed.proxmox_nodes.as_mut()) else {
            return;
        };
        for (name, node) in nodes.iter_mut() {
            if let Some(load) = loads.get(name) {
                let free = u64::try_from(load.free_mib.max(0)).unwrap_or(0);
                node.memory_used_mib = node.memory_total_mib.saturating_sub(free);
            }
        }
    }

    /// Chooses a node of `placement` for a VM of `memory_mib`: the one with the fewest VMs of
    /// the pool (`spread`), then the most free memory, then the first listed. The error says,
    /// node by node, why none fits.
    pub(crate) fn choose<'p>(
        &self,
        placement: &'p [String],
        memory_mib: u32,
        spread: &BTreeMap<&str, u32>,
        needs: &HardwareNeeds<'_>,
    ) -> Result<&'p str, NoNodeFits> {
        let mut best: Option<(PlacementKey, &String)> = None;
        let mut why = Vec::new();
        for (index, node) in placement.iter().enumerate() {
            if let Some(refused) = self.hardware_refusal(node, needs) {
                why.push(refused);
                continue;
            }
            let free = match &self.nodes {
                None => 0,
                Some(nodes) => match nodes.get(node) {
                    None => {
                        why.push(NodeRefused::NotProxmox { node: node.clone() });
                        continue;
                    }
                    Some(load) if !load.online => {
                        why.push(NodeRefused::Offline { node: node.clone() });
                        continue;
                    }
                    Some(load) if load.free_mib < i64::from(memory_mib) => {
                        why.push(NodeRefused::Memory {
                            node: node.clone(),
                            free_mib: load.free_mib.max(0),
                        });
                        continue;
                    }
                    Some(load) => load.free_mib,
                },
            };
            let key = (
                spread.get(node.as_str()).copied().unwrap_or(0),
                Reverse(free),
                index,
            );
            if best.as_ref().is_none_or(|(best_key, _)| key < *best_key) {
                best = Some((key, node));
            }
        }
        match best {
            Some((_, node)) => Ok(node),
            None if why.is_empty() => Err(NoNodeFits::EmptyPlacement),
            None => Err(NoNodeFits::Refused(why)),
        }
    }
}

/// Why Proxmox cannot make a full clone of a template on any node of a placement. Each
/// message names the template, where it is, and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unclonable {
    /// No Proxmox node holds the template.
    #[error(
        "template {template} exists on no Proxmox node; create it (on shared storage, or on each node of placement {placement}) or name an existing template in machine.template"
    )]
    Nowhere { template: String, placement: String },
    /// Every copy says it is built for other distributions.
    #[error(
        "template {template} is built for {declared} (its tags or description say so), not {wanted}: its clones could not run {wanted}; name a {wanted} template in machine.template, or tag this one {wanted} once it carries {wanted}"
    )]
    OtherDistribution {
        template: String,
        declared: String,
        wanted: &'static str,
    },
    /// Every copy has memory hotplug, which the distribution's machines cannot use.
    #[error(
        "template {template} has memory hotplug enabled: {wanted} sees only the memory present at boot; remove `memory` from the template's Hotplug option (Hardware → Hotplug)"
    )]
    MemoryHotplug {
        template: String,
        wanted: &'static str,
    },
    /// The copies are on nodes outside the placement, on storage a clone cannot leave.
    #[error(
        "template {template} is on {found} and cannot be cloned to placement {placement} ({why}); add {homes} to placement, copy the template to a node of placement, or put it on shared storage"
    )]
    OffPlacement {
        template: String,
        found: String,
        placement: String,
        why: String,
        homes: String,
    },
}

/// Why no node of a placement can take a new VM.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoNodeFits {
    /// The placement names no node at all.
    #[error("placement lists no Proxmox node")]
    EmptyPlacement,
    /// Each node of the placement, in its order, with why it cannot.
    #[error("{}", refusals(.0))]
    Refused(Vec<NodeRefused>),
}

/// Why one node of a placement cannot take a new VM.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NodeRefused {
    /// Proxmox does not know the node.
    #[error("{node} is not a Proxmox node")]
    NotProxmox { node: String },
    /// The node is offline.
    #[error("{node} is offline")]
    Offline { node: String },
    /// The node has less free memory than the VM asks.
    #[error("{node} has {free_mib} MiB free")]
    Memory { node: String, free_mib: i64 },
    /// A storage has less room than the VM's data disks on it.
    #[error(
        "machine.disks: storage {storage} on {node} has {free_gib} GiB free, the data disks need {needed_gib} GiB"
    )]
    Storage {
        node: String,
        storage: String,
        free_gib: i64,
        needed_gib: u64,
    },
    /// Every device of a PCI mapping on the node is held by a running VM.
    #[error("every device of PCI mapping {mapping} on {node} is held by a running VM")]
    Device { node: String, mapping: String },
}

impl NoNodeFits {
    /// Whether a node was refused for storage space or devices (not only memory).
    pub(crate) fn is_hardware(&self) -> bool {
        matches!(self, NoNodeFits::Refused(why) if why.iter().any(|r| matches!(r, NodeRefused::Storage { .. } | NodeRefused::Device { .. })))
    }
}

fn refusals(refused: &[NodeRefused]) -> String {
    refused
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
