//! Deterministic VM names and the choice of a Proxmox node for each new VM (rule 15).
//!
//! Names are `capstan-<cluster>-<pool>-<suffix>` with a suffix derived from the cluster, the
//! pool, the spec hash and an ordinal: the smallest ordinal whose name is free. A crash right
//! after a clone therefore finds the same name taken and never makes a duplicate.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use sha1::{Digest, Sha1};

use crate::model::NodeName;
use crate::observed::Observed;
use crate::spec::validate::VM_NAME_PREFIX;

const SUFFIX_LEN: u32 = 5;

/// Placement preference, smallest first: VMs of the pool on the node, free memory (most
/// first), position in `placement`.
type PlacementKey = (u32, Reverse<i64>, usize);
const BASE36: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// The name of the `ordinal`-th machine of a pool built from the spec `spec_hash`.
pub fn machine_name(cluster: &str, pool: &str, spec_hash: &str, ordinal: u32) -> NodeName {
    let digest = Sha1::digest(format!("{cluster}\n{pool}\n{spec_hash}\n{ordinal}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    let mut value = u64::from_be_bytes(bytes) % 36u64.pow(SUFFIX_LEN);
    let mut suffix = [b'0'; SUFFIX_LEN as usize];
    for slot in suffix.iter_mut().rev() {
        *slot = BASE36[(value % 36) as usize];
        value /= 36;
    }
    let suffix = String::from_utf8_lossy(&suffix);
    NodeName(format!("{VM_NAME_PREFIX}{cluster}-{pool}-{suffix}"))
}

/// The next free name of a pool; marks it taken.
pub(crate) fn next_name(
    cluster: &str,
    pool: &str,
    spec_hash: &str,
    taken: &mut BTreeSet<NodeName>,
) -> NodeName {
    let mut ordinal = 0;
    loop {
        let name = machine_name(cluster, pool, spec_hash, ordinal);
        if taken.insert(name.clone()) {
            return name;
        }
        ordinal += 1;
    }
}

/// Free memory of each Proxmox node, as the plan reserves and releases it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Capacity {
    /// `None` when the Proxmox nodes were not observed: memory is not checked.
    nodes: Option<BTreeMap<String, Load>>,
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
        Capacity { nodes }
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

    /// Gives back `mib` on `node` (a running VM was destroyed or stopped).
    pub(crate) fn release(&mut self, node: &str, mib: u32) {
        if let Some(load) = self.nodes.as_mut().and_then(|nodes| nodes.get_mut(node)) {
            load.free_mib += i64::from(mib);
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
    pub(crate) fn choose(
        &self,
        placement: &[String],
        memory_mib: u32,
        spread: &BTreeMap<String, u32>,
    ) -> Result<String, String> {
        let mut best: Option<(PlacementKey, &String)> = None;
        let mut why = Vec::new();
        for (index, node) in placement.iter().enumerate() {
            let free = match &self.nodes {
                None => 0,
                Some(nodes) => match nodes.get(node) {
                    None => {
                        why.push(format!("{node} is not a Proxmox node"));
                        continue;
                    }
                    Some(load) if !load.online => {
                        why.push(format!("{node} is offline"));
                        continue;
                    }
                    Some(load) if load.free_mib < i64::from(memory_mib) => {
                        why.push(format!("{node} has {} MiB free", load.free_mib.max(0)));
                        continue;
                    }
                    Some(load) => load.free_mib,
                },
            };
            let key = (spread.get(node).copied().unwrap_or(0), Reverse(free), index);
            if best.as_ref().is_none_or(|(best_key, _)| key < *best_key) {
                best = Some((key, node));
            }
        }
        match best {
            Some((_, node)) => Ok(node.clone()),
            None if why.is_empty() => Err("placement lists no Proxmox node".to_owned()),
            None => Err(why.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::ProxmoxNode;

    #[test]
    fn names_are_deterministic_dns_labels_with_five_base36_chars() {
        let name = machine_name("prod", "general", "0123456789ab", 0);
        assert_eq!(name, machine_name("prod", "general", "0123456789ab", 0));
        assert_ne!(name, machine_name("prod", "general", "0123456789ab", 1));
        let suffix = name
            .as_str()
            .strip_prefix("capstan-prod-general-")
            .expect("prefix");
        assert_eq!(suffix.len(), 5);
        assert!(
            suffix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        );
    }

    #[test]
    fn the_next_name_skips_taken_ones() {
        let mut taken = BTreeSet::from([machine_name("prod", "cp", "h", 0)]);
        assert_eq!(
            next_name("prod", "cp", "h", &mut taken),
            machine_name("prod", "cp", "h", 1)
        );
        assert_eq!(
            next_name("prod", "cp", "h", &mut taken),
            machine_name("prod", "cp", "h", 2)
        );
    }

    #[test]
    fn placement_spreads_then_prefers_free_memory_and_explains_refusals() {
        let node = |online, used| ProxmoxNode {
            online,
            memory_total_mib: 65536,
            memory_used_mib: used,
            vm_count: 0,
        };
        let observed = Observed {
            clusters: BTreeMap::new(),
            proxmox_nodes: Some(BTreeMap::from([
                ("pve1".to_owned(), node(true, 60000)),
                ("pve2".to_owned(), node(true, 10000)),
                ("pve3".to_owned(), node(false, 0)),
            ])),
            ..Observed::default()
        };
        let capacity = Capacity::of(&observed);
        let placement: Vec<String> = ["pve1", "pve2", "pve3"].map(String::from).to_vec();
        assert_eq!(
            capacity.choose(&placement, 4096, &BTreeMap::new()),
            Ok("pve2".into())
        );
        let spread = BTreeMap::from([("pve2".to_owned(), 1)]);
        assert_eq!(
            capacity.choose(&placement, 4096, &spread),
            Ok("pve1".into())
        );
        assert_eq!(
            capacity.choose(&placement, 60000, &BTreeMap::new()),
            Err("pve1 has 5536 MiB free, pve2 has 55536 MiB free, pve3 is offline".into())
        );
    }
}
