//! Static node addresses, for every distribution (pure): which address of
//! `network.nodeAddresses` a new machine takes, and how a VM carries the one it took. The
//! address is recorded as a Proxmox tag (`capstan-ip-10.20.0.50`) before anything that carries
//! it is written (a Talos machine config, a kubeadm or K3s VM's cloud-init settings), so a
//! restart or a retry finds it on the VM and writes the same.
//!
//! # Guarantees
//! - [`choose_address`] gives the lowest address of the range no other machine holds, and
//!   looks at no more candidates than there are taken addresses plus one.
//! - [`address_tag`] and [`tagged_address`] round-trip every address; the tag uses only the
//!   characters Proxmox tags allow (an IPv6 address's `:` is written `_`).
//! - [`trusted_address`] keeps a VM's tagged address only inside the declared range and held
//!   by no other VM.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::spec::Network;

/// A node's own address when it does not take one from DHCP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticAddress {
    /// The address with its prefix length (`10.20.0.50/24`).
    pub address: IpNet,
    /// The default gateway, in the same family and network.
    pub gateway: IpAddr,
    /// DNS servers (may be empty).
    pub nameservers: Vec<IpAddr>,
    /// The DNS search domain, when the cluster names one.
    pub search_domain: Option<String>,
}

impl StaticAddress {
    /// Proxmox's cloud-init `ipconfig` value for it (`ip=10.20.0.50/24,gw=10.20.0.1`, or
    /// `ip6=...,gw6=...`).
    pub fn ipconfig(&self) -> String {
        match self.address {
            IpNet::V4(net) => format!("ip={net},gw={}", self.gateway),
            IpNet::V6(net) => format!("ip6={net},gw6={}", self.gateway),
        }
    }
}
use crate::spec::values::AddressRange;

/// The prefix of the tag that records a VM's static address.
pub const ADDRESS_TAG: &str = "capstan-ip-";

/// The tag recording `address` on a VM.
pub fn address_tag(address: IpAddr) -> String {
    format!("{ADDRESS_TAG}{}", address.to_string().replace(':', "_"))
}

/// The static address a VM's tags record, if any (a malformed tag records none).
pub fn tagged_address<S: AsRef<str>>(tags: &[S]) -> Option<IpAddr> {
    tagged_addresses(tags).next()
}

/// Every static address a VM's tags record, in tag order (malformed tags left out).
pub fn tagged_addresses<S: AsRef<str>>(tags: &[S]) -> impl Iterator<Item = IpAddr> + '_ {
    tags.iter()
        .filter_map(|tag| tag.as_ref().strip_prefix(ADDRESS_TAG))
        .filter_map(|value| value.replace('_', ":").parse().ok())
}

/// The address a VM's own `tags` record that it may keep: the first inside `range` that no
/// other VM holds (`taken`). A tag is anyone's to write who may tag VMs in Proxmox, so one
/// outside the declared range, or one naming another VM's address, is no address of this
/// machine's: it would put the machine outside its network or on a neighbour's address.
pub fn trusted_address<S: AsRef<str>>(
    tags: &[S],
    range: AddressRange,
    taken: &BTreeSet<IpAddr>,
) -> Option<IpAddr> {
    tagged_addresses(tags).find(|address| range.contains(*address) && !taken.contains(address))
}

/// The lowest address of `range` not in `taken`; `None` when every one is taken.
pub fn choose_address(range: AddressRange, taken: &BTreeSet<IpAddr>) -> Option<IpAddr> {
    let mut candidate = range.first;
    // Each taken address rules out at most one candidate, so the answer is among the first
    // `taken.len() + 1` addresses of the range, whatever its size.
    for _ in 0..=taken.len() {
        if !range.contains(candidate) {
            return None;
        }
        if !taken.contains(&candidate) {
            return Some(candidate);
        }
        candidate = next(candidate)?;
    }
    None
}

/// The address after `address`, if there is one.
fn next(address: IpAddr) -> Option<IpAddr> {
    match address {
        IpAddr::V4(v4) => u32::from(v4).checked_add(1).map(|n| IpAddr::V4(n.into())),
        IpAddr::V6(v6) => u128::from(v6).checked_add(1).map(|n| IpAddr::V6(n.into())),
    }
}

/// What a machine holding `address` is configured with: the address with the prefix of
/// `network.nodes`, the gateway and the nameservers (their defaults when unset).
pub fn static_address(network: &Network, address: IpAddr) -> StaticAddress {
    let prefix = network.nodes.prefix_len();
    let address = IpNet::new(address, prefix).unwrap_or_else(|_| IpNet::from(address));
    StaticAddress {
        address,
        gateway: network.gateway_or_default(),
        nameservers: network.nameservers_or_default(),
        search_domain: network.search_domain.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(text: &str) -> AddressRange {
        text.parse().expect("range")
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    #[test]
    fn the_lowest_address_no_machine_holds_is_chosen() {
        let range = range("10.20.0.50-10.20.0.53");
        let taken: BTreeSet<IpAddr> = [ip("10.20.0.50"), ip("10.20.0.52"), ip("10.20.0.9")].into();
        assert_eq!(choose_address(range, &taken), Some(ip("10.20.0.51")));
        assert_eq!(
            choose_address(range, &BTreeSet::new()),
            Some(ip("10.20.0.50"))
        );
    }

    #[test]
    fn a_full_range_gives_no_address() {
        let full = range("10.20.0.50-10.20.0.51");
        let taken: BTreeSet<IpAddr> = [ip("10.20.0.50"), ip("10.20.0.51")].into();
        assert_eq!(choose_address(full, &taken), None);
        let last = range("255.255.255.255");
        assert_eq!(choose_address(last, &[ip("255.255.255.255")].into()), None);
    }

    #[test]
    fn address_tags_round_trip_and_are_valid_proxmox_tags() {
        for address in [ip("10.20.0.50"), ip("fd00:20::32")] {
            let tag = address_tag(address);
            assert!(
                tag.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
                "{tag}"
            );
            let tags = vec!["capstan".to_owned(), tag];
            assert_eq!(tagged_address(&tags), Some(address));
        }
        assert_eq!(tagged_address(&["capstan-ip-nonsense"]), None);
        assert_eq!(tagged_address::<&str>(&[]), None);
    }

    #[test]
    fn a_static_address_takes_the_prefix_of_the_nodes_network_and_default_gateway() {
        let mut network: Network = serde_json::from_value(serde_json::json!({
            "nodes": "192.168.1.0/24",
            "nodeAddresses": "192.168.1.50-192.168.1.59",
        }))
        .expect("network");
        let fixed = static_address(&network, ip("192.168.1.50"));
        assert_eq!(
            fixed.address,
            "192.168.1.50/24".parse::<IpNet>().expect("net")
        );
        assert_eq!(fixed.gateway, ip("192.168.1.1"));
        assert_eq!(fixed.nameservers, vec![ip("192.168.1.1")]);
        network.gateway = Some(ip("192.168.1.254"));
        network.nameservers = vec![ip("1.1.1.1")];
        let fixed = static_address(&network, ip("192.168.1.51"));
        assert_eq!(fixed.gateway, ip("192.168.1.254"));
        assert_eq!(fixed.nameservers, vec![ip("1.1.1.1")]);
    }

    #[test]
    fn a_tagged_address_outside_the_range_or_held_by_another_vm_is_not_trusted() {
        let range: AddressRange = "10.20.0.50-10.20.0.59".parse().expect("range");
        let taken = BTreeSet::from(["10.20.0.51".parse().expect("ip")]);
        let trusted = |tags: &[&str]| trusted_address(tags, range, &taken);
        assert_eq!(
            trusted(&["capstan-ip-10.20.0.50"]),
            "10.20.0.50".parse().ok()
        );
        assert_eq!(trusted(&["capstan-ip-10.9.9.9"]), None, "outside the range");
        assert_eq!(trusted(&["capstan-ip-10.20.0.51"]), None, "another VM's");
        assert_eq!(
            trusted(&["capstan-ip-10.9.9.9", "capstan-ip-10.20.0.52"]),
            "10.20.0.52".parse().ok(),
            "the first tag that may be kept"
        );
    }
}
