//! Static node addresses (pure): which address of `network.nodeAddresses` a new machine takes,
//! and how a VM carries the one it took. The address is recorded as a Proxmox tag
//! (`capstan-ip-10.20.0.50`) before the machine's config is rendered, so a restart or a retry
//! finds it on the VM and renders the same config.
//!
//! # Guarantees
//! - [`choose_address`] gives the lowest address of the range no other machine holds, and
//!   looks at no more candidates than there are taken addresses plus one.
//! - [`address_tag`] and [`tagged_address`] round-trip every address; the tag uses only the
//!   characters Proxmox tags allow (an IPv6 address's `:` is written `_`).

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;

use super::facts::StaticAddress;
use crate::spec::Network;
use crate::spec::values::AddressRange;

/// The prefix of the tag that records a VM's static address.
pub const ADDRESS_TAG: &str = "capstan-ip-";

/// The tag recording `address` on a VM.
pub fn address_tag(address: IpAddr) -> String {
    format!("{ADDRESS_TAG}{}", address.to_string().replace(':', "_"))
}

/// The static address a VM's tags record, if any (a malformed tag records none).
pub fn tagged_address<S: AsRef<str>>(tags: &[S]) -> Option<IpAddr> {
    tags.iter()
        .filter_map(|tag| tag.as_ref().strip_prefix(ADDRESS_TAG))
        .find_map(|value| value.replace('_', ":").parse().ok())
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
}
