//! One client per cluster, kept between passes while its admin kubeconfig stays the same: a
//! converged pass then reuses its TLS connection instead of building a client and handshaking
//! anew for every cluster. What a pass parses
//! from the cluster (kubeadm's `ClusterConfiguration`) is kept too, parsed again only when its
//! text changes.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::providers::kube::AdminKubeconfig;
use crate::spec::{KubeVersion, RecordedNetwork};

/// A connected client of one cluster and what was derived from its kubeconfig.
pub(super) struct Session<C> {
    kubeconfig: AdminKubeconfig,
    /// The client, with its pooled connection.
    pub client: C,
    /// The last `ClusterConfiguration` text and what it says.
    configuration: Mutex<Option<(String, Option<ClusterConfiguration>)>>,
}

impl<C> Session<C> {
    /// A session over a client just built from `kubeconfig`.
    pub fn new(kubeconfig: &AdminKubeconfig, client: C) -> Self {
        Session {
            kubeconfig: kubeconfig.clone(),
            client,
            configuration: Mutex::new(None),
        }
    }

    /// What a `ClusterConfiguration` says, parsed once per distinct text.
    pub fn cluster_configuration(&self, text: &str) -> Option<ClusterConfiguration> {
        let mut last = self
            .configuration
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((seen, parsed)) = last.as_ref()
            && seen == text
        {
            return parsed.clone();
        }
        let parsed = parse_cluster_configuration(text);
        *last = Some((text.to_owned(), parsed.clone()));
        parsed
    }
}

/// The sessions, by cluster.
pub(super) struct Sessions<C> {
    by_cluster: Mutex<BTreeMap<String, Arc<Session<C>>>>,
}

impl<C> Default for Sessions<C> {
    fn default() -> Self {
        Sessions {
            by_cluster: Mutex::new(BTreeMap::new()),
        }
    }
}

impl<C> Sessions<C> {
    /// The session of `cluster`, if it was made from this very kubeconfig.
    pub fn get(&self, cluster: &str, kubeconfig: &AdminKubeconfig) -> Option<Arc<Session<C>>> {
        self.lock()
            .get(cluster)
            .filter(|session| session.kubeconfig == *kubeconfig)
            .cloned()
    }

    /// Keeps `session` for `cluster`.
    pub fn keep(&self, cluster: &str, session: Session<C>) -> Arc<Session<C>> {
        let session = Arc::new(session);
        self.lock().insert(cluster.to_owned(), Arc::clone(&session));
        session
    }

    /// Drops the session of `cluster` (its API failed, or its kubeconfig changes).
    pub fn drop_session(&self, cluster: &str) {
        self.lock().remove(cluster);
    }

    /// Drops the sessions of clusters `keep` says no to (clusters gone from the fleet).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.lock().retain(|cluster, _| keep(cluster));
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Arc<Session<C>>>> {
        self.by_cluster
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// What kubeadm's `ClusterConfiguration` says: the endpoint, the version and the ranges
/// (`networking.podSubnet`, `serviceSubnet`).
pub(super) type ClusterConfiguration = (ConfiguredEndpoint, KubeVersion, RecordedNetwork);

/// Endpoint parts read from kubeadm's `ClusterConfiguration`.
#[derive(Debug, Clone)]
pub(super) struct ConfiguredEndpoint {
    pub host: String,
    pub port: u16,
    pub address: Option<IpAddr>,
}

/// The endpoint, version and ranges in kubeadm's `ClusterConfiguration` (YAML):
/// `controlPlaneEndpoint`, the address among `apiServer.certSANs`, `kubernetesVersion` and
/// `networking`.
fn parse_cluster_configuration(text: &str) -> Option<ClusterConfiguration> {
    let value: serde_json::Value = serde_saphyr::from_str(text).ok()?;
    let endpoint = value["controlPlaneEndpoint"].as_str()?;
    let (host, port) = endpoint
        .rsplit_once(':')
        .map_or((endpoint, 6443), |(h, p)| (h, p.parse().unwrap_or(6443)));
    let address = value["apiServer"]["certSANs"].as_array().and_then(|sans| {
        sans.iter()
            .find_map(|san| san.as_str()?.parse::<IpAddr>().ok())
    });
    let version = value["kubernetesVersion"].as_str()?.parse().ok()?;
    let range = |field: &str| value["networking"][field].as_str()?.parse().ok();
    let network = RecordedNetwork {
        pods: range("podSubnet"),
        services: range("serviceSubnet"),
        ..RecordedNetwork::default()
    };
    Some((
        ConfiguredEndpoint {
            host: host.to_owned(),
            port,
            address,
        },
        version,
        network,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_and_version_are_read_from_kubeadm_config() {
        let text = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ncontrolPlaneEndpoint: k8s-prod.lab.example:6443\nkubernetesVersion: v1.36.2\napiServer:\n  certSANs: [k8s-prod.lab.example, 192.168.1.23]\n";
        let (endpoint, version, network) = parse_cluster_configuration(text).expect("parses");
        assert_eq!(network, RecordedNetwork::default(), "no networking section");
        assert_eq!(endpoint.host, "k8s-prod.lab.example");
        assert_eq!(endpoint.port, 6443);
        assert_eq!(endpoint.address, Some("192.168.1.23".parse().expect("ip")));
        assert_eq!(version.to_string(), "1.36.2");
        assert!(parse_cluster_configuration("kind: ClusterConfiguration\n").is_none());
    }
}
