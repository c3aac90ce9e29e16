//! The networks of a cluster (`spec.network`): the VMs' subnet, the pod and service networks,
//! the CNI and kube-proxy, the addresses that belong to something else, and the range the
//! VMs take static addresses from (every distribution). Cross-field rules live in `network_rules`,
//! `node_addresses`, `validate` and `talos`.
//!
//! # Why the cluster network is optional in the file
//! `pods`, `services`, `cni` and `kubeProxy` are `Option`s, resolved by [`Network::resolve`]:
//! a field the file sets wins; an unset one keeps what the running cluster was built with
//! (recorded at its bootstrap, [`RecordedNetwork`], which the observer reads back); a new cluster takes
//! its distribution's own defaults ([`crate::spec::Capabilities::network`]). None of these can
//! change on a live cluster, and the defaults differ per distribution (K3s runs
//! 10.42.0.0/16 and 10.43.0.0/16, Talos 10.244.0.0/16 and 10.96.0.0/12, both with flannel built
//! in): a single serde default would move a live K3s or Talos cluster onto kubeadm's ranges
//! the day capstan learnt to render them. The defaults are exactly what capstan rendered
//! before it did, so a file that says nothing keeps every cluster where it is.

use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::limits as bounds;
use super::values::AddressRange;

/// Networks of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Network {
    /// The CNI capstan installs at bootstrap (Flux owns it afterwards), or `none`: capstan
    /// installs none and Flux does. Unset: the distribution's own (kubeadm `calico`, K3s and
    /// Talos `flannel`, built in). Fixed once the cluster runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni: Option<Cni>,
    /// Whether kube-proxy runs; `false` for a CNI that replaces it (Cilium, Calico's eBPF).
    /// Unset: true. Fixed once the cluster runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_proxy: Option<bool>,
    /// Pod network; each node gets a /24 of it. Unset: the distribution's default (kubeadm
    /// 172.16.0.0/16, K3s 10.42.0.0/16, Talos 10.244.0.0/16). Fixed once the cluster runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub pods: Option<IpNet>,
    /// Service network; the API server's Service takes its first address. Unset: the
    /// distribution's default (kubeadm and Talos 10.96.0.0/12, K3s 10.43.0.0/16). Fixed once
    /// the cluster runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub services: Option<IpNet>,
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

    /// The cluster network: each field the file sets, else what `running` (the network the
    /// live cluster was built with, when known) says, else `defaults` (the distribution's).
    pub fn resolve(
        &self,
        defaults: &NetworkDefaults,
        running: Option<&RecordedNetwork>,
    ) -> ClusterNetwork {
        let running = running.cloned().unwrap_or_default();
        ClusterNetwork {
            pods: self.pods.or(running.pods).unwrap_or(defaults.pods()),
            services: self
                .services
                .or(running.services)
                .unwrap_or(defaults.services()),
            cni: self.cni.or(running.cni).unwrap_or(defaults.cni),
            kube_proxy: self.kube_proxy.or(running.kube_proxy).unwrap_or(true),
        }
    }
}

/// The network a cluster runs on, every field resolved ([`Network::resolve`]): what the
/// distributions' configurations are rendered from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterNetwork {
    /// The pod network.
    #[schemars(with = "String")]
    pub pods: IpNet,
    /// The service network.
    #[schemars(with = "String")]
    pub services: IpNet,
    /// The CNI installed at bootstrap (`none`: Flux installs it).
    pub cni: Cni,
    /// Whether kube-proxy runs.
    pub kube_proxy: bool,
}

impl ClusterNetwork {
    /// The API server's Service address (`kubernetes.default`): the first address of the
    /// service network.
    pub fn api_service_address(&self) -> IpAddr {
        nth_address(self.services, 1)
    }

    /// The cluster DNS Service address: the tenth address of the service network, as kubeadm,
    /// K3s and Talos all pick it.
    pub fn dns_service_address(&self) -> IpAddr {
        nth_address(self.services, 10)
    }

    /// Whether capstan installs no CNI, so the nodes stay NotReady until Flux installs one.
    pub fn awaits_flux_cni(&self) -> bool {
        self.cni == Cni::None
    }

    /// What capstan writes into a new cluster at its bootstrap (the data of its bootstrap
    /// marker ConfigMap), read back by [`RecordedNetwork::from_record`].
    pub fn record(&self) -> Vec<(&'static str, String)> {
        vec![
            (RECORD_PODS, self.pods.to_string()),
            (RECORD_SERVICES, self.services.to_string()),
            (RECORD_CNI, self.cni.to_string()),
            (RECORD_KUBE_PROXY, self.kube_proxy.to_string()),
        ]
    }
}

const RECORD_PODS: &str = "pods";
const RECORD_SERVICES: &str = "services";
const RECORD_CNI: &str = "cni";
const RECORD_KUBE_PROXY: &str = "kubeProxy";

impl RecordedNetwork {
    /// The network a bootstrap marker's data records ([`ClusterNetwork::record`]); a field
    /// missing or unreadable (a cluster bootstrapped before capstan recorded it, or an edit)
    /// is unknown.
    pub fn from_record(data: &std::collections::BTreeMap<String, String>) -> RecordedNetwork {
        let field = |key: &str| data.get(key).map(|value| value.trim());
        RecordedNetwork {
            pods: field(RECORD_PODS).and_then(|v| v.parse().ok()),
            services: field(RECORD_SERVICES).and_then(|v| v.parse().ok()),
            cni: field(RECORD_CNI).and_then(Cni::from_name),
            kube_proxy: field(RECORD_KUBE_PROXY).and_then(|v| v.parse().ok()),
        }
    }

    /// Whether it knows nothing.
    pub fn is_empty(&self) -> bool {
        *self == RecordedNetwork::default()
    }

    /// Each field known here, else `other`'s.
    #[must_use]
    pub fn or(self, other: RecordedNetwork) -> RecordedNetwork {
        RecordedNetwork {
            pods: self.pods.or(other.pods),
            services: self.services.or(other.services),
            cni: self.cni.or(other.cni),
            kube_proxy: self.kube_proxy.or(other.kube_proxy),
        }
    }
}

/// The `n`th address of `net` (its network address plus `n`), within the network.
fn nth_address(net: IpNet, n: u8) -> IpAddr {
    match net {
        IpNet::V4(v4) => {
            let base = u32::from(v4.network());
            IpAddr::from(std::net::Ipv4Addr::from(base.saturating_add(u32::from(n))))
        }
        IpNet::V6(v6) => {
            let base = u128::from(v6.network());
            IpAddr::from(std::net::Ipv6Addr::from(base.saturating_add(u128::from(n))))
        }
    }
}

/// What a live cluster says of the network it was built with, each field when known: capstan
/// records the whole network at bootstrap; for older clusters, kubeadm's `ClusterConfiguration`
/// gives the ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordedNetwork {
    /// The pod network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub pods: Option<IpNet>,
    /// The service network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub services: Option<IpNet>,
    /// The CNI installed at bootstrap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni: Option<Cni>,
    /// Whether kube-proxy runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_proxy: Option<bool>,
}

/// Container network interface capstan installs at bootstrap.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Cni {
    /// Calico in IPIP mode, through the Tigera operator (kubeadm).
    Calico,
    /// flannel, built into K3s and Talos.
    Flannel,
    /// No CNI: the nodes stay NotReady (`NetworkPluginNotReady`) until Flux installs one.
    None,
}

impl Cni {
    /// Its name in cluster files.
    pub fn name(self) -> &'static str {
        match self {
            Cni::Calico => "calico",
            Cni::Flannel => "flannel",
            Cni::None => "none",
        }
    }

    /// The CNI a cluster file names (`calico`), if any.
    pub fn from_name(name: &str) -> Option<Cni> {
        [Cni::Calico, Cni::Flannel, Cni::None]
            .into_iter()
            .find(|cni| cni.name() == name)
    }
}

impl std::fmt::Display for Cni {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A distribution's network when the file says nothing, and the CNIs it can install.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkDefaults {
    /// The pod network (address, prefix length).
    pub pods: ([u8; 4], u8),
    /// The service network (address, prefix length).
    pub services: ([u8; 4], u8),
    /// The CNI it installs unless told otherwise.
    pub cni: Cni,
    /// Every CNI it can install, the default first, each with what it means there.
    pub cnis: &'static [(Cni, &'static str)],
}

impl NetworkDefaults {
    /// The default pod network.
    pub fn pods(&self) -> IpNet {
        v4(self.pods)
    }

    /// The default service network.
    pub fn services(&self) -> IpNet {
        v4(self.services)
    }

    /// A new cluster's network when its file says nothing.
    pub fn cluster_network(&self) -> ClusterNetwork {
        ClusterNetwork {
            pods: self.pods(),
            services: self.services(),
            cni: self.cni,
            kube_proxy: true,
        }
    }

    /// Whether the distribution can install `cni`.
    pub fn supports(&self, cni: Cni) -> bool {
        self.cnis.iter().any(|(supported, _)| *supported == cni)
    }

    /// The CNIs it can install, as a hint lists them: "`calico` (...) or `none` (...)".
    pub fn choices(&self) -> String {
        let words: Vec<String> = self
            .cnis
            .iter()
            .map(|(cni, meaning)| format!("`{cni}` ({meaning})"))
            .collect();
        words.join(" or ")
    }
}

fn v4((address, prefix): ([u8; 4], u8)) -> IpNet {
    IpNet::V4(Ipv4Net::new_assert(address.into(), prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Distribution;

    fn network(yaml: &str) -> Network {
        serde_saphyr::from_str(yaml).expect("a network")
    }

    #[test]
    fn an_unset_field_keeps_what_the_cluster_runs_else_the_distribution_default() {
        let k3s = Distribution::K3s.capabilities().network;
        let file = network("nodes: 192.168.1.0/24\n");
        let new = file.resolve(&k3s, None);
        assert_eq!(new.pods.to_string(), "10.42.0.0/16");
        assert_eq!(new.services.to_string(), "10.43.0.0/16");
        assert_eq!(new.cni, Cni::Flannel);
        assert!(new.kube_proxy);
        let running = RecordedNetwork {
            pods: Some("10.60.0.0/16".parse().expect("net")),
            cni: Some(Cni::None),
            ..RecordedNetwork::default()
        };
        let kept = file.resolve(&k3s, Some(&running));
        assert_eq!(kept.pods.to_string(), "10.60.0.0/16");
        assert_eq!(kept.services.to_string(), "10.43.0.0/16");
        assert_eq!(kept.cni, Cni::None);
        let declared = network("nodes: 192.168.1.0/24\npods: 10.50.0.0/16\ncni: flannel\n")
            .resolve(&k3s, Some(&running));
        assert_eq!(declared.pods.to_string(), "10.50.0.0/16", "the file wins");
        assert_eq!(declared.cni, Cni::Flannel);
    }

    #[test]
    fn the_api_and_dns_services_take_the_first_and_tenth_addresses() {
        let net = network("nodes: 192.168.1.0/24\nservices: 10.70.0.0/16\n")
            .resolve(&Distribution::Talos.capabilities().network, None);
        assert_eq!(net.api_service_address().to_string(), "10.70.0.1");
        assert_eq!(net.dns_service_address().to_string(), "10.70.0.10");
    }

    #[test]
    fn each_distribution_defaults_to_what_capstan_always_rendered_for_it() {
        let defaults = |d: Distribution| {
            let n = d.capabilities().network;
            (n.pods().to_string(), n.services().to_string(), n.cni)
        };
        assert_eq!(
            defaults(Distribution::Kubeadm),
            ("172.16.0.0/16".into(), "10.96.0.0/12".into(), Cni::Calico)
        );
        assert_eq!(
            defaults(Distribution::K3s),
            ("10.42.0.0/16".into(), "10.43.0.0/16".into(), Cni::Flannel)
        );
        assert_eq!(
            defaults(Distribution::Talos),
            ("10.244.0.0/16".into(), "10.96.0.0/12".into(), Cni::Flannel)
        );
        for distribution in Distribution::ALL {
            let network = distribution.capabilities().network;
            assert_eq!(
                network.cnis[0].0, network.cni,
                "the default is listed first"
            );
            assert!(network.supports(Cni::None), "Flux may install any CNI");
        }
    }

    #[test]
    fn the_bootstrap_record_reads_back_as_the_network_it_recorded() {
        let network = network("nodes: 192.168.1.0/24\ncni: none\nkubeProxy: false\n")
            .resolve(&Distribution::K3s.capabilities().network, None);
        let data: std::collections::BTreeMap<String, String> = network
            .record()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let read = RecordedNetwork::from_record(&data);
        assert_eq!(network_of(&read), Some(network));
        let old = std::collections::BTreeMap::from([("cluster".to_owned(), "edge".to_owned())]);
        assert!(RecordedNetwork::from_record(&old).is_empty());
    }

    fn network_of(recorded: &RecordedNetwork) -> Option<ClusterNetwork> {
        Some(ClusterNetwork {
            pods: recorded.pods?,
            services: recorded.services?,
            cni: recorded.cni?,
            kube_proxy: recorded.kube_proxy?,
        })
    }

    #[test]
    fn cnis_read_and_print_as_the_file_spells_them() {
        for cni in [Cni::Calico, Cni::Flannel, Cni::None] {
            assert_eq!(Cni::from_name(cni.name()), Some(cni));
            assert_eq!(
                serde_json::to_value(cni).expect("serialises"),
                cni.name(),
                "serde agrees"
            );
        }
        assert_eq!(Cni::from_name("cilium"), None);
    }
}
