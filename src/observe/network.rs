//! The network a live cluster was built with, as far as it tells: what capstan recorded in the
//! bootstrap marker, kubeadm's `ClusterConfiguration` for the ranges of a cluster bootstrapped
//! before capstan recorded them, and the `default/kubernetes` Service's address (the planner
//! checks the file's service range against it). A cluster capstan bootstrapped before it
//! recorded its network ran its distribution's CNI and kube-proxy: nothing else could be
//! declared then.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::providers::kube::ClusterClient;
use crate::spec::{Cluster, RecordedNetwork};

/// What the marker's `data` records, completed by kubeadm's ranges (`configured`) and, for
/// a cluster bootstrapped before capstan recorded it, its distribution's CNI and kube-proxy.
pub(super) fn running(
    marker: Option<&BTreeMap<String, String>>,
    configured: RecordedNetwork,
    cluster: Option<&Cluster>,
) -> Option<RecordedNetwork> {
    let recorded = marker.map(RecordedNetwork::from_record).unwrap_or_default();
    let mut network = recorded.or(configured);
    if marker.is_some()
        && let Some(cluster) = cluster
    {
        let defaults = cluster.spec.kubernetes.distribution.capabilities().network;
        network = network.or(RecordedNetwork {
            cni: Some(defaults.cni),
            kube_proxy: Some(true),
            ..RecordedNetwork::default()
        });
    }
    (!network.is_empty()).then_some(network)
}

/// The `default/kubernetes` Service's address; `None` when it cannot be read (the planner
/// then judges the service range by the record alone).
pub(super) async fn api_service_address(api: &impl ClusterClient, cluster: &str) -> Option<IpAddr> {
    match api.service_address("default", "kubernetes").await {
        Ok(address) => address,
        Err(err) => {
            tracing::debug!(cluster, error = %crate::errors::error_chain(&err), "the kubernetes Service is not observed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Cni;

    #[test]
    fn a_cluster_bootstrapped_before_the_record_ran_its_distributions_cni_and_kube_proxy() {
        let marker = BTreeMap::from([("cluster".to_owned(), "prod".to_owned())]);
        let configured = RecordedNetwork {
            pods: Some("172.16.0.0/16".parse().expect("net")),
            ..RecordedNetwork::default()
        };
        let cluster = crate::providers::kubeadm::tests::example_cluster("prod");
        let network = running(Some(&marker), configured, Some(&cluster)).expect("known");
        assert_eq!(network.cni, Some(Cni::Calico));
        assert_eq!(network.kube_proxy, Some(true));
        assert_eq!(network.pods, configured.pods);
        assert_eq!(
            running(None, RecordedNetwork::default(), Some(&cluster)),
            None
        );
    }
}
