//! The lab's node software meets the lab's simulated API servers: [`LabBackend`] implements
//! [`ClusterBackend`] over a [`KubeLab`], so `kubeadm init` inside a simulated VM starts a real
//! (simulated) API server, joins register Nodes, and so on.
//!
//! # Invariants
//! - Every method is synchronous and returns without waiting: the node software calls it while
//!   it holds its state lock, from inside the Tokio runtime. Servers are bound on loopback and
//!   spawned on the current runtime ([`KubeLab::create_cluster_now`]).
//! - What `kubeadm init` stores, the backend stores as kubeadm does: the `ClusterConfiguration`
//!   in `kube-system/kubeadm-config`, rewritten by `kubeadm upgrade apply`.
//! - The credentials hook runs after every change of a cluster's admin credentials (creation,
//!   renewal), so `lab.json` and the kubeconfig files next to it stay current.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::kube::{self, KubeLab, SimCluster, SimNodeConfig};
use crate::nodes::{BackendError, ClusterAccess, ClusterBackend, NewCluster, NewNode};
use crate::talos::TalosApis;
use crate::values::KubeVersion;
use capstan_core::model::Role;

/// The ConfigMap where kubeadm keeps the cluster's configuration.
pub const KUBEADM_CONFIG: &str = "kubeadm-config";
/// Its key holding the `ClusterConfiguration` document.
pub const CLUSTER_CONFIGURATION_KEY: &str = "ClusterConfiguration";
const KUBE_SYSTEM: &str = "kube-system";

/// Called with a cluster whose admin credentials just changed (it was created, or its
/// certificates were renewed).
pub type CredentialsHook = Arc<dyn Fn(&SimCluster) + Send + Sync>;

/// Called after a Talos API started or stopped serving (what `lab.json` lists changed).
pub type TalosApisHook = Arc<dyn Fn() + Send + Sync>;

/// [`ClusterBackend`] over the lab's simulated API servers.
#[derive(Clone)]
pub struct LabBackend {
    kube: Arc<KubeLab>,
    on_credentials: Option<CredentialsHook>,
    talos_apis: TalosApis,
    on_talos_apis: Option<TalosApisHook>,
}

impl std::fmt::Debug for LabBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabBackend")
            .field("clusters", &self.kube.names())
            .field("hook", &self.on_credentials.is_some())
            .field("talos_apis", &self.talos_apis.listed())
            .finish()
    }
}

impl LabBackend {
    /// A backend creating and changing clusters in `kube`.
    pub fn new(kube: Arc<KubeLab>) -> Self {
        LabBackend {
            kube,
            on_credentials: None,
            talos_apis: TalosApis::default(),
            on_talos_apis: None,
        }
    }

    /// Lists the Talos APIs in `apis` (shared with whoever resolves them).
    #[must_use]
    pub fn with_talos_apis(mut self, apis: TalosApis) -> Self {
        self.talos_apis = apis;
        self
    }

    /// Calls `hook` whenever a Talos API starts or stops serving.
    #[must_use]
    pub fn on_talos_apis_change(mut self, hook: TalosApisHook) -> Self {
        self.on_talos_apis = Some(hook);
        self
    }

    /// Where the Talos APIs of the lab's Talos nodes are served.
    pub fn talos_apis(&self) -> &TalosApis {
        &self.talos_apis
    }

    /// Calls `hook` whenever a cluster's admin credentials change.
    pub fn on_credentials_change(mut self, hook: CredentialsHook) -> Self {
        self.on_credentials = Some(hook);
        self
    }

    /// The simulated API servers.
    pub fn kube(&self) -> &Arc<KubeLab> {
        &self.kube
    }

    fn cluster(&self, name: &str) -> Result<Arc<SimCluster>, BackendError> {
        self.kube
            .cluster(name)
            .ok_or_else(|| BackendError::NoCluster {
                cluster: name.to_owned(),
            })
    }

    fn credentials_changed(&self, cluster: &SimCluster) {
        if let Some(hook) = &self.on_credentials {
            hook(cluster);
        }
    }

    fn access(cluster: &SimCluster) -> ClusterAccess {
        ClusterAccess {
            admin_kubeconfig: cluster.admin_kubeconfig(),
            ca_cert_hash: cluster.ca_cert_hash(),
        }
    }
}

/// The ClusterConfiguration with `kubernetesVersion` moved to `version`, keeping the form
/// (`v1.36.2` or `1.36.2`) the document used. The document is YAML (JSON is YAML too); the
/// result is written as JSON, which every YAML reader takes.
fn with_version(document: &str, version: KubeVersion) -> Result<String, BackendError> {
    let mut config: Value = serde_saphyr::from_str(document)
        .map_err(|source| BackendError::StoredConfiguration { source })?;
    let prefixed = config["kubernetesVersion"]
        .as_str()
        .is_none_or(|old| old.starts_with('v'));
    config["kubernetesVersion"] = if prefixed {
        json!(format!("v{version}"))
    } else {
        json!(version.to_string())
    };
    Ok(config.to_string())
}

impl ClusterBackend for LabBackend {
    fn create_cluster(&self, request: &NewCluster) -> Result<ClusterAccess, BackendError> {
        let cluster = self.kube.create_cluster_now(&kube::NewCluster {
            name: request.name.clone(),
            version: request.version.to_string(),
            endpoint_host: Some(request.endpoint_host.clone()),
            endpoint_port: request.endpoint_port,
            authority: request.authority.clone(),
            network: Some(request.network.clone()),
        })?;
        if request.cluster_configuration.is_empty() {
            // K3s and Talos have no kubeadm configuration to upload.
            tracing::info!(cluster = %request.name, url = %cluster.url(), "simulated cluster created");
            self.credentials_changed(&cluster);
            return Ok(LabBackend::access(&cluster));
        }
        // kubeadm's upload-config phase: later kubeadm runs (and capstan) read it back.
        let config_map = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": KUBEADM_CONFIG, "namespace": KUBE_SYSTEM},
            "data": {CLUSTER_CONFIGURATION_KEY: request.cluster_configuration},
        });
        if let Err(err) = cluster.create_object("configmaps", Some(KUBE_SYSTEM), config_map) {
            self.kube.remove_cluster(&request.name);
            return Err(err.into());
        }
        tracing::info!(cluster = %request.name, url = %cluster.url(), "simulated cluster created");
        self.credentials_changed(&cluster);
        Ok(LabBackend::access(&cluster))
    }

    fn remove_cluster(&self, cluster: &str) {
        if self.kube.remove_cluster(cluster) {
            tracing::info!(cluster, "simulated cluster gone with its last machine");
        }
    }

    fn register_node(&self, cluster: &str, node: &NewNode) -> Result<(), BackendError> {
        let registration = &node.registration;
        crate::kube::node_restriction::admit_registration(&node.name, &registration.labels)
            .map_err(BackendError::Forbidden)?;
        let config = SimNodeConfig {
            kubelet_version: Some(node.kubelet_version.to_string()),
            ready: node.ready,
            address: node.address.map(|ip| ip.to_string()),
            labels: registration
                .labels
                .iter()
                .chain(&registration.privileged_labels)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            taints: Some(registration.taints.clone()),
            annotations: registration.annotations.clone(),
            max_pods: registration.max_pods,
            ..match node.role {
                Role::ControlPlane => SimNodeConfig::control_plane(&node.name),
                Role::Worker => SimNodeConfig::worker(&node.name),
            }
        };
        Ok(self.cluster(cluster)?.register_node(&config)?)
    }

    fn set_node_ready(&self, cluster: &str, node: &str, ready: bool) {
        let result = self
            .cluster(cluster)
            .and_then(|c| Ok(c.set_node_ready(node, ready)?));
        if let Err(err) = result {
            let reason = capstan_core::errors::error_chain(&err);
            // A kubelet whose Node was deleted (or whose cluster is gone) has nobody to tell;
            // the real kubelet's status update fails the same way.
            tracing::debug!(cluster, node, ready, reason = %reason, "node status not posted");
        }
    }

    fn apply_manifest(&self, cluster: &str, manifest: &str) -> Result<String, BackendError> {
        Ok(self.cluster(cluster)?.apply_manifest(manifest)?)
    }

    fn deploy_kube_proxy(&self, cluster: &str) -> Result<(), BackendError> {
        Ok(self.cluster(cluster)?.deploy_kube_proxy()?)
    }

    fn set_version(&self, cluster: &str, version: KubeVersion) {
        let Ok(sim) = self.cluster(cluster) else {
            tracing::debug!(cluster, "version change for a cluster that is gone");
            return;
        };
        sim.set_version(&version.to_string());
        let Some(mut config_map) = sim.object("configmaps", Some(KUBE_SYSTEM), KUBEADM_CONFIG)
        else {
            // K3s and Talos clusters have none; only `/version` moves.
            tracing::info!(
                cluster,
                "no kube-system/kubeadm-config: only /version moved"
            );
            return;
        };
        let document = config_map["data"][CLUSTER_CONFIGURATION_KEY]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let updated = with_version(&document, version).and_then(|text| {
            config_map["data"][CLUSTER_CONFIGURATION_KEY] = json!(text);
            Ok(sim.replace_object("configmaps", Some(KUBE_SYSTEM), config_map)?)
        });
        if let Err(err) = updated {
            let reason = capstan_core::errors::error_chain(&err);
            tracing::warn!(cluster, reason = %reason, "kubeadm-config not updated");
        }
    }

    fn set_storage_unavailable(&self, cluster: &str, reason: Option<String>) {
        match self.cluster(cluster) {
            Ok(sim) => {
                tracing::info!(cluster, unavailable = ?reason, "simulated cluster storage");
                sim.set_storage_unavailable(reason);
            }
            Err(_) => tracing::debug!(cluster, "storage change for a cluster that is gone"),
        }
    }

    fn api_server(
        &self,
        cluster: &str,
        node: &str,
        running: bool,
        authentication: Option<&str>,
    ) -> Result<(), BackendError> {
        let sim = match self.cluster(cluster) {
            Ok(sim) => sim,
            // A stopped API server of a cluster already gone: nothing is left to stop.
            Err(_) if !running => return Ok(()),
            Err(err) => return Err(err),
        };
        tracing::debug!(
            cluster,
            node,
            running,
            authentication = authentication.is_some(),
            "lab API server"
        );
        sim.api_server(node, running, authentication)
            .map_err(|message| BackendError::Forbidden(format!("kube-apiserver: {message}")))
    }

    fn talos_api(&self, node: IpAddr, served: Option<SocketAddr>) {
        tracing::info!(%node, served = ?served, "lab Talos API");
        self.talos_apis.set(node, served);
        if let Some(hook) = &self.on_talos_apis {
            hook();
        }
    }

    fn renew_certificates(&self, cluster: &str) -> Result<ClusterAccess, BackendError> {
        let sim = self.cluster(cluster)?;
        let expiry = sim.renew_certificates()?;
        tracing::info!(cluster, expires = %expiry, "simulated cluster certificates renewed");
        self.credentials_changed(&sim);
        Ok(LabBackend::access(&sim))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock as _, LabClock};
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    async fn backend() -> (LabBackend, Arc<Mutex<Vec<String>>>) {
        let kube = KubeLab::start(LabClock::new(), &BTreeMap::new())
            .await
            .expect("lab");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        let backend = LabBackend::new(Arc::new(kube)).on_credentials_change(Arc::new(
            move |cluster: &SimCluster| {
                record.lock().expect("lock").push(cluster.name().to_owned());
            },
        ));
        (backend, seen)
    }

    fn request() -> NewCluster {
        NewCluster {
            name: "prod".into(),
            endpoint_host: "k8s-prod.lab.example".into(),
            endpoint_port: 6443,
            version: "1.36.2".parse().expect("version"),
            cluster_configuration: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.2\ncontrolPlaneEndpoint: k8s-prod.lab.example:6443\n".into(),
            authority: None,
            network: crate::kube::network::ClusterNetwork::lab_default(),
        }
    }

    #[tokio::test]
    async fn init_starts_an_api_server_with_kubeadm_config_and_tells_the_hook() {
        let (backend, seen) = backend().await;
        let access = backend.create_cluster(&request()).expect("created");
        let cluster = backend.kube().cluster("prod").expect("registered");
        assert_eq!(cluster.version(), "v1.36.2");
        assert_eq!(access.admin_kubeconfig, cluster.admin_kubeconfig());
        assert_eq!(access.ca_cert_hash, cluster.ca_cert_hash());
        let config = cluster
            .object("configmaps", Some(KUBE_SYSTEM), KUBEADM_CONFIG)
            .expect("kubeadm-config");
        assert_eq!(
            config["data"][CLUSTER_CONFIGURATION_KEY],
            request().cluster_configuration
        );
        assert_eq!(*seen.lock().expect("lock"), ["prod"]);
        let again = backend.create_cluster(&request()).expect_err("exists");
        let again = capstan_core::errors::error_chain(&again);
        assert!(again.contains("exists already"), "{again}");
    }

    #[tokio::test]
    async fn nodes_register_with_role_address_and_version_then_turn_ready() {
        let (backend, _) = backend().await;
        backend.create_cluster(&request()).expect("created");
        let node = NewNode {
            name: "capstan-prod-cp-aaaaa".into(),
            kubelet_version: "1.36.2".parse().expect("version"),
            role: Role::ControlPlane,
            address: Some("192.168.1.100".parse().expect("ip")),
            ready: false,
            registration: crate::nodes::Registration {
                labels: [("workload-class".to_owned(), "memory".to_owned())].into(),
                taints: vec![crate::kube::SimTaint::control_plane()],
                ..Default::default()
            },
        };
        backend.register_node("prod", &node).expect("registered");
        let cluster = backend.kube().cluster("prod").expect("cluster");
        let stored = cluster
            .object("nodes", None, &node.name)
            .expect("node object");
        assert_eq!(stored["status"]["nodeInfo"]["kubeletVersion"], "v1.36.2");
        assert_eq!(stored["status"]["addresses"][0]["address"], "192.168.1.100");
        assert_eq!(stored["spec"]["taints"][0]["effect"], "NoSchedule");
        assert!(
            stored["metadata"]["labels"]
                .get("node-role.kubernetes.io/control-plane")
                .is_some()
        );
        assert_eq!(stored["metadata"]["labels"]["workload-class"], "memory");
        let ready = |object: &Value| {
            object["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .map(|c| c["status"].clone())
        };
        assert_eq!(ready(&stored), Some(json!("Unknown")));
        backend.set_node_ready("prod", &node.name, true);
        let stored = cluster.object("nodes", None, &node.name).expect("node");
        assert_eq!(ready(&stored), Some(json!("True")));
        // Unknown clusters and nodes are no panic, only nothing to tell.
        backend.set_node_ready("prod", "nobody", true);
        backend.set_node_ready("gone", &node.name, true);
        let gone = backend
            .register_node("gone", &node)
            .expect_err("no cluster");
        assert!(
            matches!(&gone, BackendError::NoCluster { cluster } if cluster == "gone"),
            "{gone:?}"
        );
        assert_eq!(
            gone.to_string(),
            "the cluster gone has no API server in the lab"
        );
    }

    #[tokio::test]
    async fn a_kubelet_registering_a_label_node_restriction_forbids_is_refused() {
        let (backend, _) = backend().await;
        backend.create_cluster(&request()).expect("created");
        let node = NewNode {
            name: "capstan-prod-general-aaaaa".into(),
            kubelet_version: "1.36.2".parse().expect("version"),
            role: Role::Worker,
            address: None,
            ready: false,
            registration: crate::nodes::Registration {
                labels: [("node-role.kubernetes.io/worker".to_owned(), String::new())].into(),
                ..Default::default()
            },
        };
        let refused = backend.register_node("prod", &node).expect_err("forbidden");
        assert_eq!(
            refused.to_string(),
            "nodes \"capstan-prod-general-aaaaa\" is forbidden: node \"capstan-prod-general-aaaaa\" is not allowed to set the following labels: node-role.kubernetes.io/worker"
        );
        let cluster = backend.kube().cluster("prod").expect("cluster");
        assert!(cluster.object("nodes", None, &node.name).is_none());
    }

    #[tokio::test]
    async fn an_upgrade_moves_the_served_version_and_kubeadm_config() {
        let (backend, _) = backend().await;
        backend.create_cluster(&request()).expect("created");
        backend.set_version("prod", "1.37.0".parse().expect("version"));
        let cluster = backend.kube().cluster("prod").expect("cluster");
        assert_eq!(cluster.version(), "v1.37.0");
        let config = cluster
            .object("configmaps", Some(KUBE_SYSTEM), KUBEADM_CONFIG)
            .expect("kubeadm-config");
        let text = config["data"][CLUSTER_CONFIGURATION_KEY]
            .as_str()
            .expect("text");
        let document: Value = serde_saphyr::from_str(text).expect("still YAML");
        assert_eq!(document["kubernetesVersion"], "v1.37.0");
        assert_eq!(
            document["controlPlaneEndpoint"],
            "k8s-prod.lab.example:6443"
        );
    }

    #[test]
    fn the_version_keeps_the_documents_form() {
        let version = "1.37.1".parse().expect("version");
        let bare = with_version("{\"kubernetesVersion\": \"1.36.2\"}", version).expect("json");
        assert!(bare.contains("\"kubernetesVersion\":\"1.37.1\""), "{bare}");
        let refused = with_version(": : not yaml [", version).expect_err("not yaml");
        assert!(
            matches!(refused, BackendError::StoredConfiguration { .. }),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn renewal_issues_a_new_admin_certificate_a_year_from_the_lab_clock() {
        let (backend, seen) = backend().await;
        backend.create_cluster(&request()).expect("created");
        let cluster = backend.kube().cluster("prod").expect("cluster");
        let before = cluster.admin_certificate_expiry();
        let clock = backend.kube().clock().clone();
        clock.advance(std::time::Duration::from_secs(300 * 24 * 3600));
        let access = backend.renew_certificates("prod").expect("renewed");
        let after = cluster.admin_certificate_expiry();
        assert!(after > before);
        let year = jiff::SignedDuration::from_hours(24 * 365);
        let expected = clock.now() + year;
        assert!(after.duration_since(expected).abs() < jiff::SignedDuration::from_secs(5));
        assert_eq!(access.admin_kubeconfig, cluster.admin_kubeconfig());
        assert_eq!(*seen.lock().expect("lock"), ["prod", "prod"]);
        assert!(matches!(
            backend.renew_certificates("gone"),
            Err(BackendError::NoCluster { .. })
        ));
    }
}
