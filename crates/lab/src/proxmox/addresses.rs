//! The addresses a lab VM's cards have, derived from its config at each start: a card on a
//! bridge and VLAN reaches one segment of the lab's network; it takes the address the VM
//! configures itself with (a Talos VM's static address from its cidata's `network-config`; a
//! VM whose disk carries cloud-init and that has a cloud-init drive, its `ipconfig<n>`), else a
//! lease from the segment's DHCP range, kept until the VM is destroyed. The node's address
//! (what its kubelet registers, what the guest agent lists first) is the one of its default
//! route: the first card with a static address and a gateway, or a lease from a segment with a
//! router.

use std::net::Ipv4Addr;

use super::guest::GuestSoftware;
use super::state::SimState;

/// One card of a VM, as its config says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Card {
    /// Its index (`net<index>`).
    pub index: usize,
    /// Its MAC address, lowercase.
    pub mac: String,
    /// Its bridge.
    pub bridge: String,
    /// Its VLAN tag.
    pub vlan: Option<u16>,
    /// Its MTU, when set.
    pub mtu: Option<u32>,
    /// Its model (`virtio`, `e1000`, ...).
    pub model: String,
}

/// The cards of a VM config, in index order.
pub(super) fn cards(config: &std::collections::BTreeMap<String, String>) -> Vec<Card> {
    (0..32)
        .filter_map(|index| {
            let value = config.get(&format!("net{index}"))?;
            let option = |key: &str| {
                value
                    .split(',')
                    .find_map(|part| part.strip_prefix(key)?.strip_prefix('='))
            };
            let first = value.split(',').next().unwrap_or_default();
            let (model, mac) = first.split_once('=').unwrap_or((first, ""));
            Some(Card {
                index,
                mac: option("macaddr").unwrap_or(mac).to_lowercase(),
                bridge: option("bridge").unwrap_or_default().to_owned(),
                vlan: option("tag").and_then(|v| v.parse().ok()),
                mtu: option("mtu").and_then(|v| v.parse().ok()),
                model: model.to_owned(),
            })
        })
        .collect()
}

impl SimState {
    /// The address of each card of `vmid` that has one, by card index.
    pub fn card_addresses(&self, vmid: u32) -> Vec<(usize, Ipv4Addr)> {
        self.card_leases
            .range((vmid, 0)..=(vmid, usize::MAX))
            .map(|((_, index), address)| (*index, *address))
            .collect()
    }

    /// The prefix length of the segment `address` is in (24 when none holds it).
    pub fn prefix_of(&self, address: Ipv4Addr) -> u8 {
        self.segments
            .iter()
            .find(|segment| segment.holds(address))
            .map_or(24, |segment| segment.subnet.prefix_len())
    }

    /// Gives each card of `vmid`, starting, its address (see the module's docs) and sets the
    /// node's address; returns it.
    pub fn address_at_start(&mut self, vmid: u32, guest: &dyn GuestSoftware) -> Option<Ipv4Addr> {
        let vm = self.vms.get(&vmid)?;
        let cards = cards(&vm.config);
        let cloud_init = vm.cloud_init && super::storage::has_cloud_init_drive(&vm.config);
        let ipconfigs: Vec<Option<String>> = cards
            .iter()
            .map(|card| vm.config.get(&format!("ipconfig{}", card.index)).cloned())
            .collect();
        let identity = self.identity(vmid);
        let mut routed: Option<Ipv4Addr> = None;
        let mut first: Option<Ipv4Addr> = None;
        for (card, ipconfig) in cards.iter().zip(ipconfigs) {
            let own = identity
                .as_ref()
                .and_then(|identity| guest.static_address(identity, &card.mac));
            let configured = ipconfig
                .filter(|_| cloud_init)
                .and_then(|text| static_of(&text));
            let (address, has_route) = if let Some(address) = own {
                (Some(address), true)
            } else if let Some((address, gateway)) = configured {
                (Some(address), gateway)
            } else {
                let segment = self
                    .segments
                    .iter()
                    .position(|s| s.reached_by(&card.bridge, card.vlan));
                match segment {
                    Some(segment) => {
                        let router = self.segments[segment].router;
                        (self.lease_on(vmid, card.index, segment), router)
                    }
                    None => (None, false),
                }
            };
            match address {
                Some(address) => {
                    self.card_leases.insert((vmid, card.index), address);
                    first.get_or_insert(address);
                    if has_route {
                        routed.get_or_insert(address);
                    }
                }
                None => {
                    self.card_leases.remove(&(vmid, card.index));
                }
            }
        }
        match routed.or(first) {
            Some(address) => {
                self.leases.insert(vmid, address);
                Some(address)
            }
            None => {
                self.leases.remove(&vmid);
                None
            }
        }
    }

    /// A lease for card `index` of `vmid` from segment `segment`'s DHCP range: the one it
    /// holds, or the first free one; `None` without a DHCP server or a free address.
    fn lease_on(&mut self, vmid: u32, index: usize, segment: usize) -> Option<Ipv4Addr> {
        let range = self.segments[segment].dhcp_range?;
        if let Some(address) = self.card_leases.get(&(vmid, index))
            && range.contains(*address)
        {
            return Some(*address);
        }
        let taken: std::collections::BTreeSet<u32> =
            self.card_leases.values().map(|ip| u32::from(*ip)).collect();
        let free =
            (u32::from(range.first)..=u32::from(range.last)).find(|ip| !taken.contains(ip))?;
        Some(Ipv4Addr::from(free))
    }

    /// A lease on the main segment for `vmid`'s first card (a VM the world starts running).
    pub fn lease(&mut self, vmid: u32) -> Option<Ipv4Addr> {
        let address = self.lease_on(vmid, 0, 0)?;
        self.card_leases.insert((vmid, 0), address);
        self.leases.insert(vmid, address);
        Some(address)
    }

    /// Forgets every address of `vmid` (destroyed).
    pub fn release_addresses(&mut self, vmid: u32) {
        self.leases.remove(&vmid);
        self.card_leases.retain(|(id, _), _| *id != vmid);
    }
}

/// The static IPv4 address of an `ipconfig` value (`ip=10.0.0.5/24,gw=10.0.0.1`), and whether
/// it comes with a gateway; `None` for DHCP or none.
fn static_of(ipconfig: &str) -> Option<(Ipv4Addr, bool)> {
    let option = |key: &str| {
        ipconfig
            .split(',')
            .find_map(|part| part.strip_prefix(key)?.strip_prefix('='))
    };
    let (address, _) = option("ip")?.split_once('/')?;
    Some((address.parse().ok()?, option("gw").is_some()))
}
