//! A Talos VM's own address: Talos's NoCloud platform configures the interface as the cidata
//! volume's `network-config` (version 1) says. A `static` subnet on the interface with the
//! VM's MAC address gives the VM that address instead of a DHCP lease; anything else (no
//! cidata, `dhcp`, a file the lab cannot read) leaves it to DHCP.

use std::net::Ipv4Addr;

use serde::Deserialize;

use super::talos::CIDATA_VOLUME;
use crate::nodes::iso9660::read_image;

/// The largest `network-config` read (a v1 file is a few hundred bytes).
const MAX_NETWORK_CONFIG_BYTES: usize = 64 * 1024;
/// The most interfaces and subnets looked at.
const MAX_ENTRIES: usize = 32;

/// `network-config`, version 1: the parts the lab reads.
#[derive(Deserialize)]
struct NetworkConfig {
    version: u32,
    #[serde(default)]
    config: Vec<Entry>,
}

/// One entry of `config`: a `physical` interface, a `nameserver`, ...
#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    mac_address: Option<String>,
    #[serde(default)]
    subnets: Vec<Subnet>,
}

/// One subnet of an interface.
#[derive(Deserialize)]
struct Subnet {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    address: Option<String>,
}

/// The static IPv4 address the cidata volume among `media` gives the interface with `mac`
/// (lowercase `bc:24:11:..`), if any.
pub fn static_address<'a>(
    media: impl IntoIterator<Item = &'a [u8]>,
    mac: &str,
) -> Option<Ipv4Addr> {
    let cidata = media
        .into_iter()
        .filter_map(|image| read_image(image).ok())
        .find(|read| read.volume_id.eq_ignore_ascii_case(CIDATA_VOLUME))?;
    let text = cidata
        .file("network-config")
        .filter(|bytes| bytes.len() <= MAX_NETWORK_CONFIG_BYTES)?;
    let config: NetworkConfig = serde_saphyr::from_slice(text).ok()?;
    if config.version != 1 {
        return None;
    }
    config
        .config
        .iter()
        .take(MAX_ENTRIES)
        .filter(|entry| entry.kind == "physical")
        .filter(|entry| {
            entry
                .mac_address
                .as_deref()
                .is_some_and(|own| own.eq_ignore_ascii_case(mac))
        })
        .flat_map(|entry| entry.subnets.iter().take(MAX_ENTRIES))
        .filter(|subnet| subnet.kind == "static")
        .find_map(|subnet| {
            let address = subnet.address.as_deref()?;
            // Talos takes `address/prefix` as well as `address` with a `netmask`.
            let host = address.split('/').next().unwrap_or(address);
            host.parse().ok()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use capstan_core::talos::iso9660::{IsoFile, write_image};

    const MAC: &str = "bc:24:11:00:00:01";

    fn cidata(network_config: &str) -> Vec<u8> {
        write_image(
            "cidata",
            &[
                IsoFile {
                    name: "network-config",
                    contents: network_config.as_bytes(),
                },
                IsoFile {
                    name: "user-data",
                    contents: b"config",
                },
            ],
        )
        .expect("image")
    }

    #[test]
    fn a_static_subnet_on_the_vms_interface_gives_its_address() {
        let image = cidata(
            "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    mac_address: 'bc:24:11:00:00:01'\n    subnets:\n      - type: static\n        address: '192.168.1.50'\n        netmask: '255.255.255.0'\n        gateway: '192.168.1.1'\n  - type: nameserver\n    address:\n    - '192.168.1.1'\n",
        );
        assert_eq!(
            static_address([image.as_slice()], MAC),
            Some(Ipv4Addr::new(192, 168, 1, 50))
        );
        // Another VM's interface is not this one's.
        assert_eq!(
            static_address([image.as_slice()], "bc:24:11:00:00:02"),
            None
        );
    }

    #[test]
    fn dhcp_no_cidata_or_an_unreadable_file_leave_the_address_to_dhcp() {
        let dhcp = cidata(
            "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    mac_address: 'bc:24:11:00:00:01'\n    subnets:\n      - type: dhcp\n",
        );
        assert_eq!(static_address([dhcp.as_slice()], MAC), None);
        let version_two = cidata("version: 2\nethernets: {}\n");
        assert_eq!(static_address([version_two.as_slice()], MAC), None);
        assert_eq!(static_address([b"not an iso".as_slice()], MAC), None);
        assert_eq!(static_address(std::iter::empty(), MAC), None);
    }
}
