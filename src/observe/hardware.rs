//! What the observation holds of machines' hardware: each storage's space and content on each
//! node (from the one inventory call), and, only for a connection whose clusters declare cards,
//! a resource pool or PCI devices, each node's bridges, the pools and the PCI mappings (one
//! call per node and two in all); and, per VM of a pool that declares hardware or carries tags
//! the file does not, what its config holds (one call each).

use std::collections::BTreeMap;

use crate::model::NodeName;
use crate::observed::{Observed, ObservedCluster, ObservedStorage, ProxmoxNode, StorageOnNode};
use crate::providers::proxmox::{Inventory, ProxmoxProvider, PveNode, VmInfo, ownership};
use crate::spec::{ClusterSpec, Desired};

const GIB: u64 = 1 << 30;

/// The resource pools and PCI mappings read from the connections that needed them.
#[derive(Debug, Default)]
pub(super) struct Offered {
    pools: Vec<String>,
    mappings: Option<BTreeMap<String, Vec<String>>>,
    observed: bool,
}

impl Offered {
    /// Puts the pools and mappings into `observed`, when any connection read them.
    pub(super) fn record(mut self, observed: &mut Observed) {
        if self.observed {
            self.pools.sort();
            self.pools.dedup();
            observed.proxmox_pools = Some(self.pools);
            observed.pci_mappings = Some(self.mappings.unwrap_or_default());
        }
    }
}

/// What the observation gathers across connections, as one connection's inventory adds to it.
pub(super) struct Proxmox<'a> {
    /// Each storage.
    pub storages: &'a mut BTreeMap<String, ObservedStorage>,
    /// Each Proxmox node.
    pub nodes: &'a mut BTreeMap<String, ProxmoxNode>,
    /// Each template's copies, by name.
    pub templates: &'a mut BTreeMap<String, Vec<crate::observed::ObservedTemplate>>,
    /// Pools and PCI mappings.
    pub offered: &'a mut Offered,
}

/// Adds one connection's nodes, templates, storages with their space on each node and, when a cluster on it
/// declares cards, a resource pool or PCI devices, its nodes' bridges, its pools and its PCI
/// mappings.
pub(super) async fn add_connection<P: ProxmoxProvider>(
    client: &P,
    desired: &Desired,
    connection: &str,
    inventory: &Inventory,
    into: Proxmox<'_>,
) {
    for host in &inventory.nodes {
        into.nodes.insert(
            host.name.0.clone(),
            super::proxmox_node(host, &inventory.vms),
        );
    }
    for template in &inventory.templates {
        into.templates
            .entry(template.name.clone())
            .or_default()
            .push(super::observed_template(template, &inventory.storages));
    }
    for (storage, shared) in &inventory.storages {
        into.storages.insert(
            storage.clone(),
            ObservedStorage {
                shared: *shared,
                nodes: BTreeMap::new(),
            },
        );
    }
    let mut space = Observed {
        proxmox_storages: Some(std::mem::take(into.storages)),
        proxmox_nodes: Some(std::mem::take(into.nodes)),
        ..Observed::default()
    };
    storage_space(inventory, &mut space);
    if wanted(desired, connection) {
        offer(client, inventory, &mut space).await;
        into.offered
            .pools
            .extend(space.proxmox_pools.take().unwrap_or_default());
        if let Some(mappings) = space.pci_mappings.take() {
            into.offered
                .mappings
                .get_or_insert_with(BTreeMap::new)
                .extend(mappings);
        }
        into.offered.observed = true;
    }
    *into.storages = space.proxmox_storages.unwrap_or_default();
    *into.nodes = space.proxmox_nodes.unwrap_or_default();
}

/// Adds each storage's space and content on each node of `inventory` to `observed`.
fn storage_space(inventory: &Inventory, observed: &mut Observed) {
    let Some(storages) = observed.proxmox_storages.as_mut() else {
        return;
    };
    for space in &inventory.storage_space {
        let Some(storage) = storages.get_mut(&space.storage) else {
            continue;
        };
        storage.nodes.insert(
            space.node.clone(),
            StorageOnNode {
                images: space.available && space.content.iter().any(|c| c == "images"),
                total_gib: space.total_bytes / GIB,
                used_gib: space.used_bytes.div_ceil(GIB),
            },
        );
    }
}

/// Whether any cluster of `desired` on `connection` declares cards, a resource pool or PCI
/// devices: only then are the bridges, pools and mappings read.
fn wanted(desired: &Desired, connection: &str) -> bool {
    desired
        .clusters
        .values()
        .filter(|cluster| cluster.spec.proxmox == connection)
        .flat_map(|cluster| machines(&cluster.spec))
        .any(|machine| {
            !machine.networks.is_empty() || machine.pool.is_some() || !machine.pci.is_empty()
        })
}

fn machines(spec: &ClusterSpec) -> impl Iterator<Item = &crate::spec::Machine> {
    std::iter::once(&spec.control_plane.machine).chain(spec.workers.iter().map(|p| &p.machine))
}

/// Reads the bridges of `inventory`'s online nodes, the pools and the PCI mappings into
/// `observed`; a failure leaves them unobserved (placement then does not judge them) and is
/// logged.
async fn offer<P: ProxmoxProvider>(client: &P, inventory: &Inventory, observed: &mut Observed) {
    let nodes: Vec<PveNode> = inventory
        .nodes
        .iter()
        .filter(|n| n.online)
        .map(|n| n.name.clone())
        .collect();
    match client.hardware_facts(&nodes).await {
        Ok(facts) => {
            if let Some(observed_nodes) = observed.proxmox_nodes.as_mut() {
                for (node, bridges) in facts.bridges {
                    if let Some(entry) = observed_nodes.get_mut(&node) {
                        entry.bridges = Some(bridges.into_iter().map(|(name, _)| name).collect());
                    }
                }
            }
            observed
                .proxmox_pools
                .get_or_insert_with(Vec::new)
                .extend(facts.pools);
            observed
                .pci_mappings
                .get_or_insert_with(BTreeMap::new)
                .extend(facts.pci_mappings);
        }
        Err(err) => {
            tracing::warn!(error = %crate::errors::error_chain(&err), "bridges, pools and PCI mappings not observed: placement does not judge them this pass");
        }
    }
}

/// For each VM of `spec`'s pools that declare sockets, disks, cards or PCI devices, what its
/// config holds (drift, rule 14); and, for each VM carrying tags that are neither capstan's nor
/// declared, the tags capstan recorded as set (so a tag the file dropped is told from one
/// someone else added).
pub(super) async fn machine_configs<P: ProxmoxProvider>(
    client: &P,
    spec: &ClusterSpec,
    vms: &[VmInfo],
    observed: &mut ObservedCluster,
) {
    for vm in vms {
        let name = NodeName(vm.name.as_str().into());
        let Some(machine) = observed.machines.get_mut(&name) else {
            continue;
        };
        let Some(declared) = spec.machine_of(&machine.ownership.pool, machine.ownership.role)
        else {
            continue;
        };
        let hardware = !declared.disks.is_empty()
            || !declared.networks.is_empty()
            || !declared.pci.is_empty()
            || declared.sockets.is_some_and(|s| s != 1);
        let foreign_tags = vm
            .tags
            .iter()
            .any(|tag| !ownership::is_capstan_tag(tag) && !declared.tags.contains(tag));
        if !hardware && !foreign_tags {
            continue;
        }
        match client.vm_hardware(&vm.vm_ref()).await {
            Ok(read) => {
                if hardware && let Some(config) = machine.config.as_mut() {
                    config.hardware = Some(read.declared);
                }
                machine.recorded_tags = Some(
                    read.recorded_tags
                        .iter()
                        .map(|t| t.as_str().into())
                        .collect(),
                );
            }
            Err(err) => {
                tracing::debug!(vm = %vm.vmid, error = %crate::errors::error_chain(&err), "VM config not read: its hardware is not judged this pass");
            }
        }
    }
}
