//! What the lab's Proxmox VE offers a VM's hardware: each node's bridges (with their MTU), the
//! cluster's PCI resource mappings (the devices each node has under a mapping id), and the
//! network segments the VMs' cards reach (a bridge, untagged or on a VLAN, with a subnet, maybe
//! a DHCP range, maybe a router). A VM's cards and disks, and so what its guest sees, come from
//! its config alone; these say what the config may name.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use crate::values::Ipv4Range;

/// A Linux bridge on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldBridge {
    /// Its name (`vmbr0`).
    pub name: String,
    /// Its MTU: a card's `mtu` may not be larger.
    #[serde(default = "default_mtu")]
    pub mtu: u32,
}

fn default_mtu() -> u32 {
    1500
}

impl WorldBridge {
    /// A bridge of MTU 1500.
    pub fn named(name: &str) -> Self {
        WorldBridge {
            name: name.to_owned(),
            mtu: default_mtu(),
        }
    }
}

/// The bridges a node has by default: `vmbr0`, as every Proxmox VE installation.
pub(crate) fn default_bridges() -> Vec<WorldBridge> {
    vec![WorldBridge::named("vmbr0")]
}

/// A PCI resource mapping (Datacenter → Resource Mappings → PCI): a name for devices, each on
/// one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldPciMapping {
    /// The mapping's id (`gpu-a40`).
    pub id: String,
    /// Its devices.
    pub devices: Vec<WorldPciDevice>,
}

/// One device of a PCI mapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldPciDevice {
    /// The node it is in.
    pub node: String,
    /// Its PCI address (`0000:01:00.0`).
    pub path: String,
}

/// A network segment beyond the lab's main one: what a card on `bridge` (and `vlan`) reaches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldSegment {
    /// The bridge.
    pub bridge: String,
    /// The VLAN tag of the card (absent: untagged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// Its subnet.
    pub subnet: Ipv4Net,
    /// Addresses its DHCP server hands out; absent: no DHCP there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp_range: Option<Ipv4Range>,
    /// Whether its DHCP server gives a default route (a node's address is the one of its
    /// default route, as a kubelet picks it).
    #[serde(default)]
    pub router: bool,
}

impl WorldSegment {
    /// Whether a card on `bridge` with `vlan` reaches it.
    pub fn reached_by(&self, bridge: &str, vlan: Option<u16>) -> bool {
        self.bridge == bridge && self.vlan == vlan
    }

    /// Whether `address` is inside its subnet.
    pub fn holds(&self, address: Ipv4Addr) -> bool {
        self.subnet.contains(&address)
    }
}
