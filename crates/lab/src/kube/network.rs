//! What a cluster's network configuration makes of it, as the real components would: the
//! API server puts the `default/kubernetes` Service on the first address of the service range;
//! kube-controller-manager's node IPAM gives each Node a distinct /24 of the pod range (and
//! refuses a range smaller than that); pods take addresses from their node's range (host
//! network pods the node's own); kubelets report `NetworkPluginNotReady` until a network
//! plugin runs, which is what a CNI's DaemonSet does by mounting the host's `/etc/cni/net.d`
//! (where it writes the configuration the container runtime looks for); kube-proxy runs as a
//! DaemonSet, inside the node's own software, or not at all.
//!
//! The configuration comes from what the distribution was given (kubeadm's
//! `ClusterConfiguration`, K3s's flags and configuration file, Talos's machine config): the
//! node software reads it there and hands it to [`super::SimCluster::configure_network`].

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use jiff::Timestamp;
use serde_json::{Value, json};

use super::resources::by_plural;
use super::store::{Key, Store, rfc3339};

/// kube-controller-manager's `--node-cidr-mask-size` for IPv4: each node's share.
pub const NODE_CIDR_PREFIX: u8 = 24;
/// Where a CNI writes its configuration on the host, and the container runtime reads it.
const CNI_CONFIG_DIR: &str = "/etc/cni/net.d";
/// The kubelet's Ready condition message while the runtime has no network plugin, as the
/// kubelet words it.
pub const NETWORK_NOT_READY_MESSAGE: &str = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized";

/// A cluster's network, as its control plane and kubelets were configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNetwork {
    /// The pod range (`--cluster-cidr`): nodes get /24s of it.
    pub pods: Ipv4Net,
    /// The service range (`--service-cluster-ip-range`).
    pub services: Ipv4Net,
    /// Where the network plugin comes from.
    pub plugin: NetworkPlugin,
    /// How kube-proxy runs.
    pub kube_proxy: KubeProxy,
}

/// Where a cluster's network plugin comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkPlugin {
    /// Inside the node's own software (K3s's flannel): the network is ready as the kubelet
    /// starts.
    Embedded,
    /// flannel as a DaemonSet the distribution deploys at bootstrap (Talos's).
    Flannel,
    /// Whatever is applied to the cluster later (Calico through its operator, a CNI Flux
    /// installs): until a CNI's DaemonSet exists, the nodes report `NetworkPluginNotReady`.
    Applied,
}

/// How kube-proxy runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeProxy {
    /// The `kube-system/kube-proxy` DaemonSet (kubeadm's addon, Talos's).
    DaemonSet,
    /// Inside the node's own software (K3s): no object shows it.
    Embedded,
    /// Not at all (a CNI replaces it).
    Disabled,
}

impl ClusterNetwork {
    /// The network of a cluster the lab config declares (or the management cluster): Talos's
    /// and kubeadm's usual ranges, its network plugin ready from the start.
    pub fn lab_default() -> Self {
        ClusterNetwork {
            pods: Ipv4Net::new_assert(Ipv4Addr::new(10, 244, 0, 0), 16),
            services: Ipv4Net::new_assert(Ipv4Addr::new(10, 96, 0, 0), 12),
            plugin: NetworkPlugin::Embedded,
            kube_proxy: KubeProxy::Embedded,
        }
    }

    /// Refuses what kube-controller-manager and kube-apiserver refuse to start with.
    ///
    /// # Errors
    /// Their words, when a range is unusable.
    pub fn check(&self) -> Result<(), String> {
        if self.pods.prefix_len() > NODE_CIDR_PREFIX {
            return Err(format!(
                "kube-controller-manager: invalid --cluster-cidr {}: mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size ({NODE_CIDR_PREFIX}) configured for CIDR family",
                self.pods
            ));
        }
        if self.services.prefix_len() < 12 {
            return Err(format!(
                "kube-apiserver: specified --service-cluster-ip-range {} is too large; for 32-bit addresses, the mask must be >= 12",
                self.services
            ));
        }
        if self.pods.contains(&self.services.network())
            || self.services.contains(&self.pods.network())
        {
            return Err(format!(
                "kube-apiserver: --service-cluster-ip-range {} overlaps --cluster-cidr {}",
                self.services, self.pods
            ));
        }
        Ok(())
    }

    /// The API server's own Service address: the first of the service range.
    pub fn api_service_address(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.services.network()) + 1)
    }

    /// Parses a range given as text (`10.60.0.0/16`), IPv4 only.
    ///
    /// # Errors
    /// The component's words for `flag`, when it is not an IPv4 range.
    pub fn parse_range(text: &str, flag: &str) -> Result<Ipv4Net, String> {
        text.trim()
            .parse::<Ipv4Net>()
            .map(|net| net.trunc())
            .map_err(|_| {
                format!("invalid {flag} {text:?}: the lab runs IPv4 single-stack clusters")
            })
    }
}

/// What a kubelet reports in its Ready condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KubeletState {
    /// Ready.
    Ready,
    /// Running, but the runtime has no network plugin yet.
    NetworkNotReady,
    /// Not posting status (stopped, or never started): the node controller says Unknown.
    Silent,
}

/// A node's conditions for `state`, stamped `now`.
pub(crate) fn node_conditions(state: KubeletState, now: Timestamp) -> Value {
    let stamp = rfc3339(now);
    let pressure = |kind: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": "False", "reason": reason, "message": message,
               "lastHeartbeatTime": stamp, "lastTransitionTime": stamp})
    };
    let (status, reason, message) = match state {
        KubeletState::Ready => ("True", "KubeletReady", "kubelet is posting ready status"),
        KubeletState::NetworkNotReady => ("False", "KubeletNotReady", NETWORK_NOT_READY_MESSAGE),
        KubeletState::Silent => (
            "Unknown",
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
        ),
    };
    json!([
        pressure("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        pressure("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        pressure("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        {"type": "Ready", "status": status, "reason": reason, "message": message,
         "lastHeartbeatTime": stamp, "lastTransitionTime": stamp},
    ])
}

/// What a node's Ready condition says of its kubelet.
pub(crate) fn kubelet_state(node: &Value) -> KubeletState {
    let ready = node["status"]["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Ready"));
    match ready {
        Some(c) if c["status"] == "True" => KubeletState::Ready,
        Some(c) if c["status"] == "False" => KubeletState::NetworkNotReady,
        _ => KubeletState::Silent,
    }
}

/// Whether the cluster's nodes have a network plugin: built in, or a CNI's DaemonSet exists
/// (one whose pods mount the host's CNI configuration folder).
pub(crate) fn is_network_ready(store: &Store, network: &ClusterNetwork) -> bool {
    network.plugin == NetworkPlugin::Embedded
        || store.list("daemonsets", None).iter().any(|set| {
            set["spec"]["template"]["spec"]["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|volume| {
                    volume["hostPath"]["path"]
                        .as_str()
                        .is_some_and(|path| path.trim_end_matches('/') == CNI_CONFIG_DIR)
                })
        })
}

/// The objects a configured cluster starts with: the `default/kubernetes` Service, and the
/// kube-proxy and flannel DaemonSets when they run as such.
///
/// # Errors
/// The store's, when an object cannot be written (it should not).
pub(crate) fn create_objects(
    store: &mut Store,
    network: &ClusterNetwork,
    now: Timestamp,
) -> Result<(), super::status::ApiError> {
    let services = by_plural("services").expect("services are served");
    let service = json!({
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": network.api_service_address().to_string(),
            "clusterIPs": [network.api_service_address().to_string()],
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
            "sessionAffinity": "None",
        },
    });
    if store
        .get(&Key::new(services, Some("default"), "kubernetes"))
        .is_none()
    {
        store.create(services, Some("default"), service, now, false)?;
    }
    if network.kube_proxy == KubeProxy::DaemonSet {
        ensure_daemon_set(store, &kube_proxy_daemon_set(), now)?;
    }
    if network.plugin == NetworkPlugin::Flannel {
        ensure_daemon_set(
            store,
            &cni_daemon_set(
                "kube-system",
                "kube-flannel",
                "ghcr.io/flannel-io/flannel:v0.27.4",
            ),
            now,
        )?;
    }
    Ok(())
}

/// Creates `object` (a DaemonSet, with its namespace set) unless one of its name exists.
///
/// # Errors
/// The store's.
pub(crate) fn ensure_daemon_set(
    store: &mut Store,
    object: &Value,
    now: Timestamp,
) -> Result<(), super::status::ApiError> {
    let sets = by_plural("daemonsets").expect("daemonsets are served");
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if store.get(&Key::new(sets, Some(namespace), name)).is_none() {
        store.create(sets, Some(namespace), object.clone(), now, false)?;
    }
    Ok(())
}

/// kubeadm's (and Talos's) kube-proxy DaemonSet.
pub(crate) fn kube_proxy_daemon_set() -> Value {
    let labels = json!({"k8s-app": "kube-proxy"});
    json!({
        "metadata": {"name": "kube-proxy", "namespace": "kube-system", "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "hostNetwork": true,
                    "priorityClassName": "system-node-critical",
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy"}],
                },
            },
        },
    })
}

/// A CNI's node agent: a host-network DaemonSet writing its configuration into the host's
/// CNI folder (flannel's, Calico's `calico-node`, Cilium's agent all do).
pub fn cni_daemon_set(namespace: &str, name: &str, image: &str) -> Value {
    let labels = json!({"k8s-app": name});
    json!({
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "hostNetwork": true,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": name, "image": image}],
                    "volumes": [{"name": "cni-net-dir", "hostPath": {"path": CNI_CONFIG_DIR}}],
                },
            },
        },
    })
}

/// The simulated loops of the network: node IPAM, then the kubelets' view of the network
/// plugin (NetworkPluginNotReady until a CNI runs, Ready once it does).
pub(crate) fn reconcile(store: &mut Store, network: &ClusterNetwork, now: Timestamp) {
    allocate_node_ranges(store, network);
    let ready = is_network_ready(store, network);
    for mut node in store
        .list("nodes", None)
        .into_iter()
        .cloned()
        .collect::<Vec<_>>()
    {
        let next = match kubelet_state(&node) {
            KubeletState::NetworkNotReady if ready => KubeletState::Ready,
            KubeletState::Ready if !ready => KubeletState::NetworkNotReady,
            _ => continue,
        };
        node["status"]["conditions"] = node_conditions(next, now);
        save_node(store, node);
    }
}

fn save_node(store: &mut Store, mut node: Value) {
    let nodes = by_plural("nodes").expect("nodes are served");
    let name = node["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    node["metadata"]["resourceVersion"] = json!("");
    if let Err(err) = store.update(nodes, &Key::new(nodes, None, &name), node, false) {
        tracing::debug!(?err, "simulated node controller update failed");
    }
}

/// kube-controller-manager's node IPAM: every Node without a `spec.podCIDR` gets the lowest
/// /24 of the pod range no other Node holds; with none left, it gets none (the real allocator
/// records `CIDRNotAvailable`).
fn allocate_node_ranges(store: &mut Store, network: &ClusterNetwork) {
    let nodes: Vec<Value> = store.list("nodes", None).into_iter().cloned().collect();
    let mut taken: BTreeSet<Ipv4Net> = nodes
        .iter()
        .filter_map(|n| n["spec"]["podCIDR"].as_str()?.parse().ok())
        .collect();
    for mut node in nodes.into_iter().filter(|n| n["spec"]["podCIDR"].is_null()) {
        let Ok(mut ranges) = network.pods.subnets(NODE_CIDR_PREFIX) else {
            return;
        };
        let Some(range) = ranges.find(|range| !taken.contains(range)) else {
            return;
        };
        taken.insert(range);
        node["spec"]["podCIDR"] = json!(range.to_string());
        node["spec"]["podCIDRs"] = json!([range.to_string()]);
        save_node(store, node);
    }
}

/// The address a new pod on `node` takes: the node's own for a host-network pod, else the
/// lowest of the node's pod range that no pod on it holds (from `.2`: `.1` is the bridge's);
/// `None` while the node has no range.
pub(crate) fn pod_address(pod: &Value, node: &Value, pods: &[Value]) -> Option<String> {
    if pod["spec"]["hostNetwork"] == true {
        return node["status"]["addresses"]
            .as_array()?
            .iter()
            .find(|a| a["type"] == "InternalIP")
            .and_then(|a| a["address"].as_str())
            .map(str::to_owned);
    }
    let range: Ipv4Net = node["spec"]["podCIDR"].as_str()?.parse().ok()?;
    let node_name = &node["metadata"]["name"];
    let used: BTreeSet<&str> = pods
        .iter()
        .filter(|p| &p["spec"]["nodeName"] == node_name)
        .filter_map(|p| p["status"]["podIP"].as_str())
        .collect();
    range
        .hosts()
        .skip(1)
        .map(|address| address.to_string())
        .find(|address| !used.contains(address.as_str()))
}

#[cfg(test)]
#[path = "network_tests.rs"]
mod cluster_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn network(pods: &str, services: &str) -> ClusterNetwork {
        ClusterNetwork {
            pods: pods.parse().expect("net"),
            services: services.parse().expect("net"),
            plugin: NetworkPlugin::Applied,
            kube_proxy: KubeProxy::DaemonSet,
        }
    }

    #[test]
    fn a_pod_range_smaller_than_a_node_share_is_refused_as_the_controller_manager_does() {
        let refused = network("10.60.0.0/25", "10.70.0.0/16")
            .check()
            .expect_err("too small");
        assert!(
            refused.contains(
                "mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size (24)"
            ),
            "{refused}"
        );
        assert!(network("10.60.0.0/16", "10.0.0.0/8").check().is_err());
        assert!(network("10.60.0.0/16", "10.60.128.0/20").check().is_err());
        assert_eq!(network("10.60.0.0/16", "10.70.0.0/16").check(), Ok(()));
        assert_eq!(
            network("10.60.0.0/16", "10.70.0.0/16")
                .api_service_address()
                .to_string(),
            "10.70.0.1"
        );
    }

    #[test]
    fn host_network_pods_take_the_node_address_and_others_the_lowest_free_one_of_its_range() {
        let node = json!({"metadata": {"name": "n1"}, "spec": {"podCIDR": "10.60.3.0/24"},
                          "status": {"addresses": [{"type": "InternalIP", "address": "192.168.1.50"}]}});
        let taken = json!({"spec": {"nodeName": "n1"}, "status": {"podIP": "10.60.3.2"}});
        let elsewhere = json!({"spec": {"nodeName": "n2"}, "status": {"podIP": "10.60.3.3"}});
        let pod = json!({"spec": {}});
        assert_eq!(
            pod_address(&pod, &node, &[taken, elsewhere]).as_deref(),
            Some("10.60.3.3")
        );
        let host = json!({"spec": {"hostNetwork": true}});
        assert_eq!(
            pod_address(&host, &node, &[]).as_deref(),
            Some("192.168.1.50")
        );
        let unranged = json!({"metadata": {"name": "n3"}, "spec": {}});
        assert_eq!(pod_address(&pod, &unranged, &[]), None);
    }
}
