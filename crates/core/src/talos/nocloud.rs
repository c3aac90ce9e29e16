//! The NoCloud `cidata` volume a Talos VM boots with (pure): `user-data` (the machine config),
//! `meta-data` (hostname and instance id) and `network-config` (the v1 format of Talos's own
//! NoCloud test data, `reference/nocloud/`: DHCP on the node's interface, or its static
//! address), in an ISO 9660 image labelled `cidata`.
//!
//! The image holds the cluster's CA keys (a control plane's `user-data`): the daemon deletes it
//! once the node has joined, and nothing here prints it.

use std::net::IpAddr;

use ipnet::IpNet;

use super::facts::NodeFacts;
use super::iso9660::{self, IsoFile, IsoProblem};

/// The volume label Talos looks for (it also accepts `CIDATA`).
pub const VOLUME_ID: &str = "cidata";

/// The name the interface has in `network-config`; Talos finds the link by its MAC address.
const INTERFACE: &str = "eth0";

/// The three files of a `cidata` volume.
#[derive(Clone, PartialEq, Eq)]
pub struct CidataFiles {
    /// The machine config (secret).
    pub user_data: String,
    /// `instance-id`, `local-hostname`, `hostname`.
    pub meta_data: String,
    /// The network, v1 format.
    pub network_config: String,
}

impl std::fmt::Debug for CidataFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CidataFiles")
            .field("user_data", &format_args!("{} bytes", self.user_data.len()))
            .field("meta_data", &self.meta_data)
            .field("network_config", &self.network_config)
            .finish()
    }
}

/// A `cidata` volume that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidataProblem {
    /// The instance id is not 1 to 64 letters, digits, `-`, `_` or `.`.
    #[error("the instance id `{0}` is not 1 to 64 letters, digits, `-`, `_` or `.`")]
    InstanceId(String),
    /// The image could not be written.
    #[error("cannot write the cidata image")]
    Image(#[source] IsoProblem),
}

/// The files of `node`'s `cidata` volume, `machine_config` as its `user-data`; `instance_id`
/// names this VM (a new VM, a new id, so Talos applies its config afresh).
///
/// # Errors
///
/// [`CidataProblem::InstanceId`] for an id that cannot be written as is.
pub fn cidata_files(
    node: &NodeFacts,
    instance_id: &str,
    machine_config: &str,
) -> Result<CidataFiles, CidataProblem> {
    let id_ok = (1..=64).contains(&instance_id.len())
        && instance_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !id_ok {
        return Err(CidataProblem::InstanceId(instance_id.to_owned()));
    }
    // Every value is quoted: a MAC address of digits only would otherwise read as a YAML 1.1
    // sexagesimal number, and a hostname of digits as an integer.
    let meta_data = format!(
        "instance-id: '{instance_id}'\nlocal-hostname: '{host}'\nhostname: '{host}'\n",
        host = node.hostname
    );
    Ok(CidataFiles {
        user_data: machine_config.to_owned(),
        meta_data,
        network_config: network_config(node, node.static_address.as_ref()),
    })
}

/// `network-config` in the v1 format: on the card that carries the node's address, DHCP or
/// the static address with its gateway and DNS servers; on the node's other cards, DHCP.
fn network_config(node: &NodeFacts, fixed: Option<&super::facts::StaticAddress>) -> String {
    let mac = node.mac_address;
    let primary = node
        .links
        .iter()
        .position(|link| link.mac_address == mac)
        .unwrap_or(0);
    let name = if node.links.is_empty() {
        INTERFACE.to_owned()
    } else {
        format!("eth{primary}")
    };
    let mut out = format!(
        "version: 1\nconfig:\n  - type: physical\n    name: {name}\n    mac_address: '{mac}'\n    subnets:\n"
    );
    let (subnets, nameservers) = primary_subnets(fixed);
    out.push_str(&subnets);
    for (index, link) in node.links.iter().enumerate() {
        if index == primary {
            continue;
        }
        out.push_str(&format!(
            "  - type: physical\n    name: eth{index}\n    mac_address: '{}'\n    subnets:\n      - type: dhcp\n",
            link.mac_address
        ));
    }
    out.push_str(&nameservers);
    out
}

/// The primary card's subnets, and the nameserver entry of a static address.
fn primary_subnets(fixed: Option<&super::facts::StaticAddress>) -> (String, String) {
    let mut out = String::new();
    let mut nameservers = String::new();
    match fixed {
        None => out.push_str("      - type: dhcp\n"),
        Some(fixed) => {
            match fixed.address {
                IpNet::V4(net) => out.push_str(&format!(
                    "      - type: static\n        address: '{}'\n        netmask: '{}'\n",
                    net.addr(),
                    net.netmask()
                )),
                IpNet::V6(net) => out.push_str(&format!(
                    "      - type: static6\n        address: '{net}'\n"
                )),
            }
            out.push_str(&format!("        gateway: '{}'\n", fixed.gateway));
            if !fixed.nameservers.is_empty() {
                nameservers.push_str("  - type: nameserver\n    address:\n");
                for server in &fixed.nameservers {
                    nameservers.push_str(&format!("    - '{}'\n", display_address(server)));
                }
            }
        }
    }
    (out, nameservers)
}

fn display_address(address: &IpAddr) -> String {
    address.to_string()
}

/// The ISO 9660 image holding `files`, labelled [`VOLUME_ID`].
///
/// # Errors
///
/// [`CidataProblem::Image`] when a file is past the writer's bounds (4 MiB).
pub fn cidata_image(files: &CidataFiles) -> Result<Vec<u8>, CidataProblem> {
    iso9660::write_image(
        VOLUME_ID,
        &[
            IsoFile {
                name: "user-data",
                contents: files.user_data.as_bytes(),
            },
            IsoFile {
                name: "meta-data",
                contents: files.meta_data.as_bytes(),
            },
            IsoFile {
                name: "network-config",
                contents: files.network_config.as_bytes(),
            },
        ],
    )
    .map_err(CidataProblem::Image)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::talos::facts::{MachineRole, StaticAddress};
    use crate::talos::fixtures::node;

    #[test]
    fn a_dhcp_node_gets_dhcp_on_its_interface_by_mac() {
        let files = cidata_files(&node(MachineRole::Worker), "vm-201", "config").expect("files");
        assert_eq!(
            files.network_config,
            "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    mac_address: 'bc:24:11:00:00:01'\n    subnets:\n      - type: dhcp\n"
        );
        assert_eq!(
            files.meta_data,
            "instance-id: 'vm-201'\nlocal-hostname: 'talos-prod-w-1'\nhostname: 'talos-prod-w-1'\n"
        );
        assert_eq!(files.user_data, "config");
    }

    #[test]
    fn a_static_node_gets_its_address_netmask_gateway_and_dns_as_talos_test_data_writes_them() {
        let mut facts = node(MachineRole::ControlPlane);
        facts.static_address = Some(StaticAddress {
            address: "192.168.1.11/24".parse().expect("net"),
            gateway: "192.168.1.1".parse().expect("ip"),
            nameservers: vec!["192.168.1.1".parse().expect("ip")],
            search_domain: None,
        });
        let files = cidata_files(&facts, "vm-101", "config").expect("files");
        assert_eq!(
            files.network_config,
            "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    mac_address: 'bc:24:11:00:00:01'\n    subnets:\n      - type: static\n        address: '192.168.1.11'\n        netmask: '255.255.255.0'\n        gateway: '192.168.1.1'\n  - type: nameserver\n    address:\n    - '192.168.1.1'\n"
        );
    }

    #[test]
    fn an_ipv6_static_address_is_static6_with_its_prefix() {
        let mut facts = node(MachineRole::Worker);
        facts.static_address = Some(StaticAddress {
            address: "2001:2:3:4:5:6:7:f7/64".parse().expect("net"),
            gateway: "fe80::1".parse().expect("ip"),
            nameservers: vec![],
            search_domain: None,
        });
        let files = cidata_files(&facts, "vm-101", "config").expect("files");
        assert!(files.network_config.ends_with(
            "      - type: static6\n        address: '2001:2:3:4:5:6:7:f7/64'\n        gateway: 'fe80::1'\n"
        ));
    }

    #[test]
    fn the_network_config_parses_as_the_v1_format_of_talos_test_data() {
        // Same shape as reference/nocloud/in-v1.yaml: version 1, a physical interface with its
        // MAC address and subnets.
        let mut facts = node(MachineRole::Worker);
        facts.static_address = Some(StaticAddress {
            address: "10.20.0.50/24".parse().expect("net"),
            gateway: "10.20.0.1".parse().expect("ip"),
            nameservers: vec![
                "10.20.0.2".parse().expect("ip"),
                "fd00::2".parse().expect("ip"),
            ],
            search_domain: None,
        });
        let files = cidata_files(&facts, "vm-1", "c").expect("files");
        let parsed: serde_json::Value =
            serde_saphyr::from_str(&files.network_config).expect("YAML");
        assert_eq!(parsed["version"], 1);
        assert_eq!(parsed["config"][0]["type"], "physical");
        assert_eq!(parsed["config"][0]["mac_address"], "bc:24:11:00:00:01");
        assert_eq!(parsed["config"][0]["subnets"][0]["address"], "10.20.0.50");
        assert_eq!(parsed["config"][1]["address"][1], "fd00::2");
        let meta: serde_json::Value = serde_saphyr::from_str(&files.meta_data).expect("YAML");
        assert_eq!(meta["local-hostname"], "talos-prod-w-1");
    }

    #[test]
    fn an_instance_id_that_cannot_be_written_as_is_is_refused() {
        for bad in ["", "vm 1", "vm'1", &"x".repeat(65)] {
            assert_eq!(
                cidata_files(&node(MachineRole::Worker), bad, "c"),
                Err(CidataProblem::InstanceId(bad.to_owned()))
            );
        }
    }

    #[test]
    fn a_config_past_the_bound_is_refused() {
        let files =
            cidata_files(&node(MachineRole::Worker), "vm-1", &"x".repeat(5 << 20)).expect("files");
        assert!(matches!(
            cidata_image(&files),
            Err(CidataProblem::Image(IsoProblem::FileTooLarge { .. }))
        ));
    }

    #[test]
    fn debug_shows_no_user_data() {
        let files = cidata_files(&node(MachineRole::Worker), "vm-1", "secret-key").expect("files");
        assert!(!format!("{files:?}").contains("secret-key"));
    }
}
