//! The networks of a cluster (`spec.network`): the VMs' subnet, the pod and service networks,
//! the addresses that belong to something else, and the range the VMs take static addresses
//! from. Cross-field rules live in `validate` and `addresses`.

use std::net::IpAddr;

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::limits as bounds;
use super::values::AddressRange;

/// Networks of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Network {
    /// The CNI installed at bootstrap (Flux owns it afterwards).
    #[serde(default)]
    pub cni: Cni,
    /// Pod network (Calico IPIP).
    #[serde(default = "default_pods")]
    #[schemars(with = "String")]
    pub pods: IpNet,
    /// Service network.
    #[serde(default = "default_services")]
    #[schemars(with = "String")]
    pub services: IpNet,
    /// The subnet the VMs live in.
    #[schemars(with = "String")]
    pub nodes: IpNet,
    /// Addresses in `nodes` that belong to something else (e.g. the MetalLB pool).
    #[serde(default)]
    #[schemars(length(max = bounds::MAX_RESERVED_RANGES))]
    pub reserved: Vec<AddressRange>,
    /// The addresses the VMs take as static addresses, one each, lowest free first
    /// (`192.168.1.50-192.168.1.99`), on the card that carries the node's address; unset, they
    /// take DHCP leases. Inside `nodes`, outside `reserved`, without the endpoint address, and
    /// no other cluster's. Talos writes it into its machine config; kubeadm and K3s get it
    /// through Proxmox's cloud-init (the template needs a cloud-init drive and cloud-init).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_addresses: Option<AddressRange>,
    /// With `nodeAddresses`: the default gateway; unset, the first host address of `nodes`
    /// (`192.168.1.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// With `nodeAddresses`: DNS servers; unset, the gateway.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = bounds::MAX_NAMESERVERS))]
    pub nameservers: Vec<IpAddr>,
    /// With `nodeAddresses`: the DNS search domain (`lab.example`); unset, none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_domain: Option<String>,
}

impl Network {
    /// The default gateway of static node addresses: `gateway`, else the first host address
    /// of `nodes`.
    pub fn gateway_or_default(&self) -> IpAddr {
        self.gateway
            .unwrap_or_else(|| self.nodes.hosts().next().unwrap_or(self.nodes.network()))
    }

    /// The DNS servers of static node addresses: `nameservers`, else the gateway.
    pub fn nameservers_or_default(&self) -> Vec<IpAddr> {
        if self.nameservers.is_empty() {
            vec![self.gateway_or_default()]
        } else {
            self.nameservers.clone()
        }
    }
}

fn default_pods() -> IpNet {
    IpNet::V4(ipnet::Ipv4Net::new_assert([172, 16, 0, 0].into(), 16))
}

fn default_services() -> IpNet {
    IpNet::V4(ipnet::Ipv4Net::new_assert([10, 96, 0, 0].into(), 12))
}

/// Container network interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Cni {
    /// Calico in IPIP mode.
    #[default]
    Calico,
}
