//! Where a pool's machines can go for their hardware (rule 15, judged before anything is
//! cloned): every bridge their cards name must exist on the node, every storage their data
//! disks name must exist and hold disk images there, every PCI mapping must exist and have a
//! device on the node, and their resource pool must exist or be one capstan may create. Each
//! refusal names the pool, the field, the node and what exists instead.
//!
//! What was not observed is not judged (a snapshot without bridges, a connection whose clusters
//! declare no cards): Proxmox then refuses at clone or start, in its own words.

use std::collections::BTreeMap;

use crate::observed::{Observed, ObservedStorage};
use crate::spec::Machine;

/// What Proxmox offers a machine's hardware, as observed (shared by the plan's capacities).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Offer {
    /// Resource pools; `None`: not observed.
    pools: Option<Vec<String>>,
    /// PCI mappings with the node of each device; `None`: not observed.
    mappings: Option<BTreeMap<String, Vec<String>>>,
    /// Storages; `None`: not observed.
    storages: Option<BTreeMap<String, ObservedStorage>>,
    /// Each node's bridges, where observed.
    bridges: BTreeMap<String, Vec<String>>,
}

impl Offer {
    /// What `observed` shows.
    pub(crate) fn of(observed: &Observed) -> Self {
        Offer {
            pools: observed.proxmox_pools.clone(),
            mappings: observed.pci_mappings.clone(),
            storages: observed.proxmox_storages.clone(),
            bridges: observed
                .proxmox_nodes
                .iter()
                .flatten()
                .filter_map(|(name, node)| Some((name.clone(), node.bridges.clone()?)))
                .collect(),
        }
    }
}

/// The nodes of `placement` (in its order) where a machine built from `machine` can go; the
/// error says, for each field and node, why none can. `create_pools`: the connection lets
/// capstan create a missing resource pool.
pub(crate) fn fitting(
    observed: &Offer,
    machine: &Machine,
    placement: &[String],
    create_pools: bool,
) -> Result<Vec<String>, String> {
    let mut refused: Vec<String> = Vec::new();
    if let (Some(pool), Some(pools)) = (&machine.pool, &observed.pools)
        && !create_pools
        && !pools.contains(pool)
    {
        return Err(format!(
            "machine.pool: resource pool {pool} does not exist (Proxmox has {}); create it, name an existing one, or set `createPools: true` on the connection",
            listed(pools)
        ));
    }
    if let Some(mappings) = &observed.mappings {
        for (index, device) in machine.pci.iter().enumerate() {
            if !mappings.contains_key(&device.mapping) {
                let known: Vec<String> = mappings.keys().cloned().collect();
                return Err(format!(
                    "machine.pci[{index}].mapping: PCI mapping {} does not exist (Proxmox has {}); create it (Datacenter → Resource Mappings) or name an existing one",
                    device.mapping,
                    listed(&known)
                ));
            }
        }
    }
    if let Some(storages) = &observed.storages {
        for (index, disk) in machine.disks.iter().enumerate() {
            let Some(storage) = disk.storage.as_deref().or(machine.storage.as_deref()) else {
                continue;
            };
            if !storages.contains_key(storage) {
                let known: Vec<String> = storages.keys().cloned().collect();
                return Err(format!(
                    "machine.disks[{index}].storage: storage {storage} does not exist (Proxmox has {})",
                    listed(&known)
                ));
            }
        }
    }
    let mut fits = Vec::new();
    for node in placement {
        let before = refused.len();
        node_fit(observed, machine, node, &mut refused);
        if refused.len() == before {
            fits.push(node.clone());
        }
    }
    if fits.is_empty() && !refused.is_empty() {
        return Err(refused.join("; "));
    }
    Ok(fits)
}

/// Why `node` cannot take a machine of `machine`, pushed to `refused` (nothing when it can).
fn node_fit(observed: &Offer, machine: &Machine, node: &str, refused: &mut Vec<String>) {
    if let Some(bridges) = observed.bridges.get(node) {
        for (index, card) in machine.networks.iter().enumerate() {
            if !bridges.contains(&card.bridge) {
                refused.push(format!(
                    "machine.networks[{index}].bridge: bridge {} does not exist on {node} (it has {})",
                    card.bridge,
                    listed(bridges)
                ));
            }
        }
    }
    if let Some(storages) = &observed.storages {
        for (index, disk) in machine.disks.iter().enumerate() {
            let Some(name) = disk.storage.as_deref().or(machine.storage.as_deref()) else {
                continue;
            };
            let Some(on_node) = storages.get(name).and_then(|s| s.nodes.get(node)) else {
                continue;
            };
            if !on_node.images {
                let holding: Vec<String> = storages
                    .iter()
                    .filter(|(_, s)| s.nodes.get(node).is_some_and(|n| n.images))
                    .map(|(id, _)| id.clone())
                    .collect();
                refused.push(format!(
                    "machine.disks[{index}].storage: storage {name} holds no disk images on {node} (storages holding images there: {})",
                    listed(&holding)
                ));
            }
        }
    }
    if let Some(mappings) = &observed.mappings {
        for (index, device) in machine.pci.iter().enumerate() {
            let Some(nodes) = mappings.get(&device.mapping) else {
                continue;
            };
            if !nodes.iter().any(|n| n == node) {
                let mut holders = nodes.clone();
                holders.sort();
                holders.dedup();
                refused.push(format!(
                    "machine.pci[{index}].mapping: PCI mapping {} has no device on {node} (it has devices on {})",
                    device.mapping,
                    listed(&holders)
                ));
            }
        }
    }
}

/// `a, b, c`, or `none`.
fn listed(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

/// How many devices of each PCI mapping `pci` needs, by mapping.
pub(crate) fn devices_needed(pci: &[crate::spec::hardware::PciDevice]) -> BTreeMap<&str, u32> {
    let mut needed = BTreeMap::new();
    for device in pci {
        *needed.entry(device.mapping.as_str()).or_default() += 1;
    }
    needed
}

/// What a new VM takes beyond memory: GiB per storage of its data disks (storage named or the
/// machine's; disks on the template's storage are not counted) and devices per PCI mapping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HardwareNeeds<'a> {
    pub disks: Vec<(String, u64)>,
    pub devices: Vec<(&'a str, u32)>,
}

impl<'a> HardwareNeeds<'a> {
    /// What a machine of `machine` takes.
    pub(crate) fn of(machine: &'a crate::spec::Machine) -> Self {
        let mut needs = HardwareNeeds::default();
        needs.add_disks(&machine.disks, machine.storage.as_deref());
        needs.devices = devices_needed(&machine.pci).into_iter().collect();
        needs
    }

    /// What a machine of `hardware` takes, its disks without a storage on `storage`.
    pub(crate) fn of_parts(
        hardware: &'a crate::spec::hardware::MachineHardware,
        storage: Option<&str>,
    ) -> Self {
        let mut needs = HardwareNeeds::default();
        needs.add_disks(&hardware.disks, storage);
        needs.devices = devices_needed(&hardware.pci).into_iter().collect();
        needs
    }

    fn add_disks(&mut self, disks: &[crate::spec::hardware::DataDisk], storage: Option<&str>) {
        let mut by_storage: BTreeMap<String, u64> = BTreeMap::new();
        for disk in disks {
            if let Some(storage) = disk.storage.as_deref().or(storage) {
                *by_storage.entry(storage.to_owned()).or_default() += u64::from(disk.size_gib);
            }
        }
        self.disks = by_storage.into_iter().collect();
    }
}
