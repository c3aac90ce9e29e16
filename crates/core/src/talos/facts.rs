//! What a Talos machine config is rendered from, besides the secrets: the cluster's facts and
//! one node's (pure). Each is checked before rendering, so a config is only ever made from
//! facts Talos would accept.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

use super::versions::{self, TalosVersion, VersionSupport};
use crate::spec::ClusterNetwork;
use crate::spec::values::KubeVersion;

/// The Kubernetes API port on the endpoint when none is given (Talos's default).
pub const DEFAULT_API_PORT: u16 = 6443;

/// The cluster-wide facts of a Talos cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterFacts {
    /// The cluster's name (`cluster.clusterName`): a DNS label.
    pub cluster_name: String,
    /// The name (or address) clients reach the Kubernetes API at (`endpoint.host`).
    pub endpoint_host: String,
    /// The shared virtual IP the control planes announce with Talos's own VIP
    /// (`endpoint.address`); `endpoint_host` resolves to it.
    pub endpoint_address: IpAddr,
    /// The Kubernetes API's port on the endpoint.
    pub endpoint_port: u16,
    /// The Kubernetes release the cluster runs.
    pub kubernetes_version: KubeVersion,
    /// The Talos release its machines run.
    pub talos_version: TalosVersion,
    /// The installer image for `machine.install.image` (an Image Factory image with the guest
    /// agent extension); `None` is Talos's own, `ghcr.io/siderolabs/installer:<talos>`.
    pub installer_image: Option<String>,
    /// The cluster's network: pod and service subnets, flannel or no CNI, kube-proxy or not.
    pub network: ClusterNetwork,
    /// The API server's single sign-on (`kubernetes.authentication`), on control planes.
    pub authentication: Option<crate::spec::authentication::Authentication>,
}

/// What a machine is in its cluster. Talos 1.13 has no `init` type (its schema's
/// `machine.type` is `controlplane` or `worker`): the first control plane's config is any
/// control plane's, and it becomes the first by the one `Bootstrap` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MachineRole {
    /// Runs etcd and the Kubernetes control plane, and announces the VIP.
    ControlPlane,
    /// Runs workloads only.
    Worker,
}

impl MachineRole {
    /// Talos's name for the role (`machine.type`).
    pub fn as_talos(&self) -> &'static str {
        match self {
            MachineRole::ControlPlane => "controlplane",
            MachineRole::Worker => "worker",
        }
    }
}

pub use crate::addresses::StaticAddress;

/// A network interface's hardware address, `bc:24:11:00:00:01` (Proxmox VE sets it at clone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MacAddress(pub [u8; 6]);

impl fmt::Display for MacAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl FromStr for MacAddress {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bytes: Vec<u8> = text
            .split(':')
            .filter(|part| part.len() == 2)
            .filter_map(|part| u8::from_str_radix(part, 16).ok())
            .collect();
        match <[u8; 6]>::try_from(bytes) {
            Ok(bytes) if text.len() == 17 => Ok(MacAddress(bytes)),
            _ => Err(format!(
                "`{text}` is not a MAC address: write six hex pairs, e.g. bc:24:11:00:00:01"
            )),
        }
    }
}

/// One machine's facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    /// Control plane or worker.
    pub role: MachineRole,
    /// Its hostname (the Kubernetes Node's name): a DNS name.
    pub hostname: String,
    /// The disk Talos installs to (`/dev/sda`, `/dev/vda`).
    pub install_disk: String,
    /// Its network interface, as Proxmox VE gave it at clone: the VIP is announced on the link
    /// with this address, whatever Linux names it.
    pub mac_address: MacAddress,
    /// Its static address; `None` takes one from DHCP.
    pub static_address: Option<StaticAddress>,
    /// The taints its Node registers with (the kubelet's `registerWithTaints`), so no pod
    /// lands on it before them.
    pub register_with_taints: Vec<crate::spec::NodeTaint>,
    /// The patches of its level, in the order they apply (`spec.patches`, then its control
    /// plane's or pool's): merged onto the rendered documents by Talos's rules.
    pub patches: Vec<crate::spec::Patch>,
    /// Its network cards in order (`net0`, `net1`, ...), when the file declares them: each
    /// gets a link alias (`net<i>`, by MAC) and its MTU; `mac_address` is the one that carries
    /// the node's address (and on control planes the VIP). Empty: the template's one card.
    pub links: Vec<Link>,
    /// Data disks Talos formats and mounts (at `/var/mnt/<name>`), as user volumes.
    pub volumes: Vec<UserVolume>,
}

/// One network card of a Talos machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Its hardware address.
    pub mac_address: MacAddress,
    /// Its MTU, when the file sets one.
    pub mtu: Option<u16>,
}

/// A data disk Talos mounts at `/var/mnt/<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserVolume {
    /// The volume's name (1 to 34 letters, digits and `-`).
    pub name: String,
    /// The disk's serial, as Proxmox sets it (`capstan-disk1`): how Talos finds the disk.
    pub serial: String,
    /// `ext4` or `xfs`.
    pub filesystem: &'static str,
}

/// Facts a config cannot be rendered from, naming what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FactsProblem {
    /// The Talos and Kubernetes releases do not go together.
    #[error(transparent)]
    Versions(#[from] VersionSupport),
    /// A name that must be a DNS name is not.
    #[error(
        "the {what} `{value}` is not a DNS name (lowercase letters, digits and `-`, labels of 1 to 63 characters, 253 in all)"
    )]
    NotDnsName {
        /// Which name.
        what: &'static str,
        /// The name given (not secret).
        value: String,
    },
    /// The cluster name is not a single DNS label.
    #[error(
        "the cluster name `{0}` is not a DNS label (lowercase letters, digits and `-`, 1 to 63 characters)"
    )]
    ClusterName(String),
    /// The endpoint port is 0.
    #[error("the endpoint port must be between 1 and 65535")]
    EndpointPort,
    /// The install disk is not a device path.
    #[error("the install disk `{0}` is not a device path such as /dev/sda")]
    InstallDisk(String),
    /// The installer image is not an image reference.
    #[error(
        "the installer image `{0}` is not an image reference (no spaces or control characters)"
    )]
    InstallerImage(String),
    /// The static address's gateway is of another family or outside its network.
    #[error("the gateway {gateway} is not in the network of the static address {address}")]
    Gateway {
        /// The address.
        address: IpNet,
        /// The gateway.
        gateway: IpAddr,
    },
    /// The static address is its network's own address (or broadcast), not a host's.
    #[error("the static address {0} is not a host address")]
    HostAddress(IpNet),
}

/// Whether `name` is a DNS name (RFC 1123 labels, lowercase).
pub fn is_dns_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// Whether `label` is one DNS label (RFC 1123, lowercase).
pub fn is_dns_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

impl ClusterFacts {
    /// Whether a config can be rendered from these facts.
    ///
    /// # Errors
    ///
    /// The first problem found.
    pub fn check(&self) -> Result<(), FactsProblem> {
        if !is_dns_label(&self.cluster_name) {
            return Err(FactsProblem::ClusterName(self.cluster_name.clone()));
        }
        let host_is_address = self.endpoint_host.parse::<IpAddr>().is_ok();
        if !host_is_address && !is_dns_name(&self.endpoint_host) {
            return Err(FactsProblem::NotDnsName {
                what: "endpoint host",
                value: self.endpoint_host.clone(),
            });
        }
        if self.endpoint_port == 0 {
            return Err(FactsProblem::EndpointPort);
        }
        if let Some(image) = &self.installer_image
            && (image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(FactsProblem::InstallerImage(image.clone()));
        }
        versions::check_support(self.talos_version, self.kubernetes_version)?;
        Ok(())
    }

    /// `https://<host>:<port>`, the endpoint every node and client uses.
    pub fn endpoint_url(&self) -> String {
        match self.endpoint_host.parse::<IpAddr>() {
            Ok(IpAddr::V6(address)) => format!("https://[{address}]:{}", self.endpoint_port),
            _ => format!("https://{}:{}", self.endpoint_host, self.endpoint_port),
        }
    }
}

impl NodeFacts {
    /// Whether a config can be rendered from these facts.
    ///
    /// # Errors
    ///
    /// The first problem found.
    pub fn check(&self) -> Result<(), FactsProblem> {
        if !is_dns_name(&self.hostname) {
            return Err(FactsProblem::NotDnsName {
                what: "hostname",
                value: self.hostname.clone(),
            });
        }
        let disk_name = self.install_disk.strip_prefix("/dev/").unwrap_or_default();
        let disk_ok = !disk_name.is_empty()
            && disk_name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/-_.:".contains(&b))
            && !disk_name
                .split('/')
                .any(|part| part.is_empty() || part == "..");
        if !disk_ok {
            return Err(FactsProblem::InstallDisk(self.install_disk.clone()));
        }
        if let Some(fixed) = &self.static_address {
            // An IPv6 router is commonly reached at its link-local address (fe80::1), as in
            // Talos's own NoCloud test data.
            let link_local_v6 = matches!((fixed.address, fixed.gateway), (IpNet::V6(_), IpAddr::V6(gateway)) if gateway.is_unicast_link_local());
            let in_network = fixed.address.contains(&fixed.gateway) || link_local_v6;
            if !in_network || fixed.gateway == fixed.address.addr() {
                return Err(FactsProblem::Gateway {
                    address: fixed.address,
                    gateway: fixed.gateway,
                });
            }
            let is_ipv4_with_room =
                matches!(fixed.address, IpNet::V4(net) if net.prefix_len() < 31);
            let is_edge = fixed.address.addr() == fixed.address.network()
                || (is_ipv4_with_room && fixed.address.addr() == fixed.address.broadcast());
            if is_edge {
                return Err(FactsProblem::HostAddress(fixed.address));
            }
        }
        Ok(())
    }
}
