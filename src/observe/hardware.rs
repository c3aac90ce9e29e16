//! What the observation holds of machines' hardware: each storage's space and content on each
//! node (from the one inventory call), and, only for a connection whose clusters declare cards,
//! a resource pool or PCI devices, each node's bridges, the pools and the PCI mappings (one
//! call per node and two in all); and, per VM of a pool that declares hardware or carries tags
//! the file does not, what its config holds (one call each).

use std::collections::BTreeMap;

use crate::model::NodeName;
use crate::observed::{Observed, ObservedCluster, StorageOnNode};
use crate::providers::proxmox::{Inventory, ProxmoxProvider, PveNode, VmInfo, ownership};
use crate::spec::{ClusterSpec, Desired};

const GIB: u64 = 1 << 30;

/// Adds each storage's space and content on each node of `inventory` to `observed`.
pub(super) fn storage_space(inventory: &Inventory, observed: &mut Observed) {
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
pub(super) fn wanted(desired: &Desired, connection: &str) -> bool {
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
pub(super) async fn offer<P: ProxmoxProvider>(
    client: &P,
    inventory: &Inventory,
    observed: &mut Observed,
) {
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
