//! One simulated cluster as the rest of the lab drives it: its HTTPS API server, its CA and
//! admin credentials (the kubeconfig capstan later re-delivers to Flux), and the hands-on
//! operations a kubeadm/kubelet emulation needs (register a Node, flip it Ready, change the
//! served version, renew certificates), plus reads for test assertions.
//!
//! Certificates: the CA lives ten years; the admin client certificate one year from the lab
//! clock, as `kubeadm` issues them. Renewing issues a new admin certificate; the old one keeps
//! authenticating until it expires, as on a real cluster (the CA did not change).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

mod api_servers;

use super::config::{SimNodeConfig, SimWorkloads};
use super::network::{
    ClusterNetwork, KubeletState, is_network_ready, kubelet_state, node_conditions,
};
use super::resources::by_plural;
use super::state::{ClusterState, Eviction, User};
use super::status::ApiError;
use super::store::{Key, rfc3339};
use super::{SimKubeError, api};
use crate::clock::{Clock as _, LabClock};
use crate::serve::HttpsServer;
use crate::tls::{AuthorityPem, CertificateAuthority, Identity};
use capstan_core::model::Role;

/// How long kubeadm's client and serving certificates last.
const CERTIFICATE_LIFETIME: SignedDuration = SignedDuration::from_hours(24 * 365);
/// How long kubeadm's CA lasts.
const CA_LIFETIME: SignedDuration = SignedDuration::from_hours(24 * 3650);
/// The admin user kubeadm writes into `admin.conf`, and its group.
const ADMIN_USER: &str = "kubernetes-admin";
const ADMIN_GROUP: &str = "kubeadm:cluster-admins";
/// The namespace capstan runs in on the management cluster (deploy/capstan.yaml's).
const CAPSTAN_NAMESPACE: &str = "capstan-system";

/// What a new simulated cluster looks like before any node joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCluster {
    /// The cluster's name (the registry key; also in kubeconfig names).
    pub name: String,
    /// What `/version` reports, e.g. `v1.36.2` (a missing `v` is added).
    pub version: String,
    /// The cluster's API endpoint host (a DNS name), added to the serving certificate so
    /// kubeconfigs with `tls-server-name: <host>` verify.
    pub endpoint_host: Option<String>,
    /// The endpoint's port (with `endpoint_host`, what [`super::KubeLab::api_address`] maps
    /// to this server's own loopback address).
    pub endpoint_port: u16,
    /// The cluster's CA (a Talos cluster's, from its machine config); `None`: a new one, as
    /// `kubeadm init` makes.
    pub authority: Option<AuthorityPem>,
    /// Its network, as its distribution was configured; `None`: the lab's default
    /// ([`ClusterNetwork::lab_default`]), for clusters the lab config declares.
    pub network: Option<ClusterNetwork>,
}

/// A running simulated cluster.
#[derive(Debug)]
pub struct SimCluster {
    state: Arc<ClusterState>,
    ca: CertificateAuthority,
    server: HttpsServer,
    admin: Mutex<Identity>,
    endpoint: Option<(String, u16)>,
}

/// `v1.36.2` from `1.36.2` or `v1.36.2`.
pub(crate) fn git_version(version: &str) -> String {
    if version.starts_with('v') {
        version.to_owned()
    } else {
        format!("v{version}")
    }
}

impl SimCluster {
    /// Creates the cluster's CA and credentials and starts its API server on a free loopback
    /// port, with the default namespaces.
    ///
    /// # Errors
    /// When a certificate cannot be issued or the server cannot start.
    pub async fn start(spec: &NewCluster, clock: LabClock) -> Result<Self, SimKubeError> {
        SimCluster::start_now(spec, clock)
    }

    /// [`SimCluster::start`] for synchronous code inside a Tokio runtime (nothing in it waits:
    /// the server binds a loopback port and is spawned on the current runtime).
    ///
    /// # Errors
    /// When a certificate cannot be issued or the server cannot start (also outside a runtime).
    pub fn start_now(spec: &NewCluster, clock: LabClock) -> Result<Self, SimKubeError> {
        let now = whole_seconds(clock.now());
        let tls = |source| SimKubeError::Certificates {
            cluster: spec.name.clone(),
            source,
        };
        let ca = match &spec.authority {
            Some(authority) => CertificateAuthority::from_pem(authority),
            None => CertificateAuthority::new("kubernetes", now + CA_LIFETIME),
        }
        .map_err(tls)?;
        let mut names: Vec<String> = ["localhost", "kubernetes", "kubernetes.default"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let mut addresses = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
        // An endpoint that is an address (a Talos VIP) is an IP name, not a DNS one.
        match spec.endpoint_host.as_deref().map(str::parse::<IpAddr>) {
            Some(Ok(address)) => addresses.push(address),
            Some(Err(_)) => names.extend(spec.endpoint_host.iter().cloned()),
            None => {}
        }
        let serving = ca
            .issue_server(
                "kube-apiserver",
                &names,
                &addresses,
                now + CERTIFICATE_LIFETIME,
            )
            .map_err(tls)?;
        let admin = ca
            .issue_client(ADMIN_USER, &[ADMIN_GROUP], now + CERTIFICATE_LIFETIME)
            .map_err(tls)?;
        let state = Arc::new(ClusterState::new(
            &spec.name,
            &git_version(&spec.version),
            clock,
        ));
        let server = HttpsServer::start_now(
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            &serving,
            Some(ca.identity()),
            api::router(state.clone()),
        )
        .map_err(|source| SimKubeError::Serve {
            cluster: spec.name.clone(),
            source,
        })?;
        state
            .address
            .get_or_init(|| server.local_addr().to_string());
        let cluster = SimCluster {
            state,
            ca,
            server,
            admin: Mutex::new(admin),
            endpoint: spec
                .endpoint_host
                .clone()
                .map(|host| (host, spec.endpoint_port)),
        };
        for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            cluster.ensure_namespace(namespace)?;
        }
        cluster.configure_network(
            spec.network
                .clone()
                .unwrap_or_else(ClusterNetwork::lab_default),
        )?;
        if cluster.name() == super::MANAGEMENT {
            // Where capstan itself runs (deploy/ makes it on a real management cluster), so
            // `run --lab --leader-elect` finds its Lease's namespace.
            cluster.ensure_namespace(CAPSTAN_NAMESPACE)?;
        }
        Ok(cluster)
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// `127.0.0.1:PORT`, where the API server listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The API endpoint (host and port) this server stands for, when it has one.
    pub fn endpoint(&self) -> Option<(&str, u16)> {
        self.endpoint
            .as_ref()
            .map(|(host, port)| (host.as_str(), *port))
    }

    /// The cluster CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.ca.identity().cert_pem.clone()
    }

    /// `sha256:<hex>` over the CA certificate's SubjectPublicKeyInfo (DER), exactly what
    /// `kubeadm join --discovery-token-ca-cert-hash` takes and `kubeadm init` prints.
    pub fn ca_cert_hash(&self) -> String {
        use sha2::Digest as _;
        let (_, certificate) = x509_parser::parse_x509_certificate(&self.ca.identity().cert_der)
            .expect("the cluster's own CA certificate is valid DER");
        let digest = sha2::Sha256::digest(certificate.tbs_certificate.subject_pki.raw);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }

    fn admin(&self) -> Identity {
        self.admin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The admin kubeconfig (`admin.conf`): server URL, CA, and the admin client certificate.
    pub fn admin_kubeconfig(&self) -> String {
        let admin = self.admin();
        let user = format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            base64_of(&admin.cert_pem),
            base64_of(&admin.key_pem)
        );
        self.kubeconfig(ADMIN_USER, &user)
    }

    /// A kubeconfig that authenticates with a bearer token (see [`SimCluster::issue_token`]).
    pub fn token_kubeconfig(&self, user: &str, token: &str) -> String {
        self.kubeconfig(user, &format!("    token: {token}\n"))
    }

    /// A kubeconfig that trusts the cluster but carries no credentials (the server answers
    /// 401 to it).
    pub fn anonymous_kubeconfig(&self) -> String {
        self.kubeconfig("anonymous", "    {}\n")
    }

    fn kubeconfig(&self, user: &str, credentials: &str) -> String {
        let name = self.name();
        let credentials = if credentials.trim() == "{}" {
            "  user: {}\n".to_owned()
        } else {
            format!("  user:\n{credentials}")
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {url}\n  name: {name}\ncontexts:\n- context:\n    cluster: {name}\n    user: {user}\n  name: {user}@{name}\ncurrent-context: {user}@{name}\npreferences: {{}}\nusers:\n- name: {user}\n{credentials}",
            ca = base64_of(&self.ca.identity().cert_pem),
            url = self.url(),
        )
    }

    /// When the admin client certificate expires.
    pub fn admin_certificate_expiry(&self) -> Timestamp {
        self.admin().not_after
    }

    /// Renews the certificates (`kubeadm certs renew all`): a new admin client certificate
    /// valid one year from the lab's now. Returns the new expiry; [`Self::admin_kubeconfig`]
    /// returns the new kubeconfig from now on (a file written by [`Self::write_kubeconfig`]
    /// keeps the old one until written again). The old certificate keeps authenticating until
    /// it expires, as on a real cluster.
    ///
    /// # Errors
    /// When the certificate cannot be issued.
    pub fn renew_certificates(&self) -> Result<Timestamp, SimKubeError> {
        let not_after = whole_seconds(self.state.now()) + CERTIFICATE_LIFETIME;
        let admin = self
            .ca
            .issue_client(ADMIN_USER, &[ADMIN_GROUP], not_after)
            .map_err(|source| SimKubeError::Certificates {
                cluster: self.name().to_owned(),
                source,
            })?;
        *self
            .admin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = admin;
        Ok(not_after)
    }

    /// Issues a bearer token for `user` in `groups` (admins: `system:masters` or
    /// `kubeadm:cluster-admins`; other users may only read, and not Secrets).
    pub fn issue_token(&self, user: &str, groups: &[&str]) -> String {
        let mut bytes = [0u8; 16];
        let random = rustls::crypto::ring::default_provider().secure_random;
        if random.fill(&mut bytes).is_err() {
            // ring's system RNG does not fail on Linux; fall back to the clock rather than
            // panic, a lab token needs uniqueness more than secrecy.
            bytes[..8].copy_from_slice(&self.state.now().as_nanosecond().to_le_bytes()[..8]);
        }
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let token = format!("{}.{}", &token[..6], &token[6..]);
        let mut groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        groups.push("system:authenticated".to_owned());
        self.state.lock().tokens.insert(
            token.clone(),
            User {
                name: user.to_owned(),
                groups,
            },
        );
        token
    }

    /// Fault: from now on (`cut`) or no longer, requests carrying bearer `token` get no
    /// answer, as if the network between that one client and the API server dropped them;
    /// other clients are served as usual.
    pub fn partition_token(&self, token: &str, cut: bool) {
        let mut inner = self.state.lock();
        if cut {
            inner.partitioned.insert(token.to_owned());
        } else {
            inner.partitioned.remove(token);
        }
    }

    /// Fault (or its end, with `None`): the cluster's storage does not answer, so every
    /// request gets a 503 naming `reason`, as a K3s server's does while its datastore is gone.
    pub fn set_storage_unavailable(&self, reason: Option<String>) {
        self.state.lock().storage_unavailable = reason;
    }

    /// What `/version` reports.
    pub fn version(&self) -> String {
        self.state.lock().git_version.clone()
    }

    /// Sets what `/version` reports (`kubeadm upgrade apply`).
    pub fn set_version(&self, version: &str) {
        self.state.lock().git_version = git_version(version);
    }

    fn ensure_namespace(&self, namespace: &str) -> Result<(), SimKubeError> {
        let namespaces = by_plural("namespaces").expect("namespaces are served");
        if self.object("namespaces", None, namespace).is_some() {
            return Ok(());
        }
        let object = json!({"metadata": {"name": namespace}, "spec": {"finalizers": ["kubernetes"]},
                            "status": {"phase": "Active"}});
        self.write(|store, now| store.create(namespaces, None, object, now, false).map(drop))
    }

    fn write(
        &self,
        change: impl FnOnce(&mut super::store::Store, Timestamp) -> Result<(), ApiError>,
    ) -> Result<(), SimKubeError> {
        self.state
            .change(change)
            .map_err(|err| SimKubeError::Write {
                cluster: self.name().to_owned(),
                message: err.message,
            })
    }

    /// Registers a Node as a kubelet does when it joins (replacing one of the same name).
    ///
    /// # Errors
    /// When the store refuses the object (it should not).
    pub fn register_node(&self, node: &SimNodeConfig) -> Result<(), SimKubeError> {
        let nodes = by_plural("nodes").expect("nodes are served");
        let kubelet = git_version(node.kubelet_version.as_deref().unwrap_or(&self.version()));
        let mut labels: BTreeMap<String, String> = [
            ("kubernetes.io/hostname", node.name.as_str()),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("beta.kubernetes.io/os", "linux"),
            ("beta.kubernetes.io/arch", "amd64"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let mut taints = Vec::new();
        if node.role == Role::ControlPlane {
            labels.insert(
                "node-role.kubernetes.io/control-plane".into(),
                String::new(),
            );
            labels.insert(
                "node.kubernetes.io/exclude-from-external-load-balancers".into(),
                String::new(),
            );
            taints.push(super::SimTaint::control_plane());
        }
        if let Some(registered) = &node.taints {
            taints.clone_from(registered);
        }
        let taints: Vec<serde_json::Value> = taints
            .iter()
            .map(|taint| serde_json::to_value(taint).unwrap_or_default())
            .collect();
        labels.extend(node.labels.clone());
        let mut annotations: BTreeMap<String, String> = [
            ("node.alpha.kubernetes.io/ttl", "0"),
            (
                "volumes.kubernetes.io/controller-managed-attach-detach",
                "true",
            ),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        annotations.extend(node.annotations.clone());
        let mut object = json!({
            "metadata": {
                "name": node.name,
                "labels": labels,
                "annotations": annotations,
            },
            // spec.podCIDR comes from the simulated node IPAM (`network`).
            "spec": {},
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": node.address.clone().unwrap_or_else(|| "127.0.0.1".into())},
                    {"type": "Hostname", "address": node.name},
                ],
                "capacity": {"cpu": "4", "memory": "8131264Ki", "pods": node.max_pods.unwrap_or(110).to_string(), "ephemeral-storage": "51343840Ki"},
                "allocatable": {"cpu": "4", "memory": "8028864Ki", "pods": node.max_pods.unwrap_or(110).to_string(), "ephemeral-storage": "47318999Ki"},
                "nodeInfo": {
                    "kubeletVersion": kubelet,
                    "kubeProxyVersion": kubelet,
                    "osImage": "Debian GNU/Linux 13 (trixie)",
                    "kernelVersion": "6.12.38+deb13-amd64",
                    "containerRuntimeVersion": "cri-o://1.36.0",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "machineID": machine_id(&node.name, "machine"),
                    "systemUUID": machine_id(&node.name, "uuid"),
                    "bootID": machine_id(&node.name, "boot"),
                },
            },
        });
        if !taints.is_empty() {
            object["spec"]["taints"] = json!(taints);
        }
        if node.unschedulable {
            object["spec"]["unschedulable"] = json!(true);
        }
        let network = self.state.lock().network.clone();
        let leases = by_plural("leases").expect("leases are served");
        self.write(|store, now| {
            // A kubelet that posts status reports the network plugin missing; one that does
            // not post yet is Unknown, as before it registered.
            let state = match (node.ready, is_network_ready(store, &network)) {
                (true, true) => KubeletState::Ready,
                (_, false) => KubeletState::NetworkNotReady,
                (false, true) => KubeletState::Silent,
            };
            object["status"]["conditions"] = node_conditions(state, now);
            let key = Key::new(nodes, None, &node.name);
            if store.get(&key).is_some() {
                store.delete(nodes, &key, false)?;
            }
            let node_object = store.create(nodes, None, object, now, false)?;
            // The kubelet's heartbeat Lease, owned by its Node (`kubectl describe node` shows it).
            let lease_key = Key::new(leases, Some("kube-node-lease"), &node.name);
            if store.get(&lease_key).is_some() {
                store.delete(leases, &lease_key, false)?;
            }
            let lease = json!({
                "metadata": {"name": node.name, "ownerReferences": [{
                    "apiVersion": "v1", "kind": "Node", "name": node.name,
                    "uid": node_object["metadata"]["uid"],
                }]},
                "spec": {"holderIdentity": node.name, "leaseDurationSeconds": 40,
                         "renewTime": format!("{}.000000Z", rfc3339(now).trim_end_matches('Z'))},
            });
            store
                .create(leases, Some("kube-node-lease"), lease, now, false)
                .map(drop)
        })
    }

    /// Marks a Node's kubelet as posting Ready (it started: Ready once a network plugin runs,
    /// NotReady with `NetworkPluginNotReady` until then) or as silent (it stopped).
    ///
    /// # Errors
    /// When no such node is registered.
    pub fn set_node_ready(&self, node: &str, ready: bool) -> Result<(), SimKubeError> {
        let network = self.state.lock().network.clone();
        let nodes = by_plural("nodes").expect("nodes are served");
        let key = Key::new(nodes, None, node);
        let unknown = || SimKubeError::UnknownNode {
            cluster: self.name().to_owned(),
            node: node.to_owned(),
        };
        let found = self.state.change(|store, now| {
            let mut object = store.get(&key)?.clone();
            let wanted = match (ready, is_network_ready(store, &network)) {
                (true, true) => KubeletState::Ready,
                (true, false) => KubeletState::NetworkNotReady,
                (false, _) => KubeletState::Silent,
            };
            if kubelet_state(&object) != wanted {
                object["status"]["conditions"] = node_conditions(wanted, now);
                object["metadata"]["resourceVersion"] = json!("");
                let updated = store.update(nodes, &key, object, false);
                return Some(updated.map(drop));
            }
            Some(Ok(()))
        });
        match found {
            None => Err(unknown()),
            Some(result) => result.map_err(|err| SimKubeError::Write {
                cluster: self.name().to_owned(),
                message: err.message,
            }),
        }
    }

    /// Configures the cluster's network as its distribution was (see [`super::network`]):
    /// its Service range, node IPAM, network plugin and kube-proxy, with the objects that
    /// come with them.
    ///
    /// # Errors
    /// The component's refusal of an unusable range, or the store's.
    pub fn configure_network(&self, network: ClusterNetwork) -> Result<(), SimKubeError> {
        network.check().map_err(|message| SimKubeError::Write {
            cluster: self.name().to_owned(),
            message,
        })?;
        self.state.lock().network = network.clone();
        self.write(|store, now| super::network::create_objects(store, &network, now))
    }

    /// The network the cluster was configured with.
    pub fn network(&self) -> ClusterNetwork {
        self.state.lock().network.clone()
    }

    /// Deploys kube-proxy as a DaemonSet (kubeadm's `addon/kube-proxy` phase: `kubeadm
    /// upgrade apply` runs it again unless told to skip it).
    ///
    /// # Errors
    /// The store's.
    pub fn deploy_kube_proxy(&self) -> Result<(), SimKubeError> {
        self.state.lock().network.kube_proxy = super::network::KubeProxy::DaemonSet;
        let set = super::network::kube_proxy_daemon_set();
        self.write(|store, now| super::network::ensure_daemon_set(store, &set, now))
    }

    /// Changes a Node's kubelet version (an in-place kubelet upgrade).
    ///
    /// # Errors
    /// When no such node is registered.
    pub fn set_kubelet_version(&self, node: &str, version: &str) -> Result<(), SimKubeError> {
        let version = git_version(version);
        self.edit_node(node, |object, _| {
            object["status"]["nodeInfo"]["kubeletVersion"] = json!(version);
            object["status"]["nodeInfo"]["kubeProxyVersion"] = json!(version);
        })
    }

    fn edit_node(
        &self,
        node: &str,
        edit: impl FnOnce(&mut Value, Timestamp),
    ) -> Result<(), SimKubeError> {
        let nodes = by_plural("nodes").expect("nodes are served");
        let key = Key::new(nodes, None, node);
        let unknown = || SimKubeError::UnknownNode {
            cluster: self.name().to_owned(),
            node: node.to_owned(),
        };
        let mut object = self.object("nodes", None, node).ok_or_else(unknown)?;
        self.write(|store, now| {
            edit(&mut object, now);
            object["metadata"]["resourceVersion"] = json!("");
            store.update(nodes, &key, object, false).map(drop)
        })
    }

    /// Removes a Node object (and, through the simulated pod GC, its pods). Returns whether it
    /// existed.
    pub fn remove_node(&self, node: &str) -> bool {
        let nodes = by_plural("nodes").expect("nodes are served");
        let key = Key::new(nodes, None, node);
        self.state
            .change(|store, _| store.delete(nodes, &key, false).is_ok())
    }

    /// Creates the workloads (namespaces as needed): Deployments with their PDBs, DaemonSets,
    /// bare pods.
    ///
    /// # Errors
    /// When an object exists already.
    pub fn add_workloads(&self, workloads: &SimWorkloads) -> Result<(), SimKubeError> {
        for (namespace, object, plural) in workloads.objects() {
            self.ensure_namespace(&namespace)?;
            self.create_object(plural, Some(&namespace), object)?;
        }
        Ok(())
    }

    /// Creates any object, as a client would (`plural` names the resource, e.g. `pods`).
    ///
    /// # Errors
    /// When the resource is not served or the object is refused (e.g. it exists).
    pub fn create_object(
        &self,
        plural: &str,
        namespace: Option<&str>,
        object: Value,
    ) -> Result<Value, SimKubeError> {
        let resource = by_plural(plural).ok_or_else(|| SimKubeError::Write {
            cluster: self.name().to_owned(),
            message: format!("resource {plural} is not served"),
        })?;
        let mut created = Value::Null;
        self.write(|store, now| {
            created = store.create(resource, namespace, object, now, false)?;
            Ok(())
        })?;
        Ok(created)
    }

    /// Replaces an object unconditionally (whatever its resourceVersion), as a controller
    /// would; status changes are kept. Returns the stored object.
    ///
    /// # Errors
    /// When the resource is not served or the object does not exist.
    pub fn replace_object(
        &self,
        plural: &str,
        namespace: Option<&str>,
        mut object: Value,
    ) -> Result<Value, SimKubeError> {
        let resource = by_plural(plural).ok_or_else(|| SimKubeError::Write {
            cluster: self.name().to_owned(),
            message: format!("resource {plural} is not served"),
        })?;
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let key = Key::new(resource, namespace, &name);
        object["metadata"]["resourceVersion"] = json!("");
        let mut stored = Value::Null;
        self.write(|store, _| {
            stored = store.update(resource, &key, object, false)?;
            Ok(())
        })?;
        Ok(stored)
    }

    /// Applies every document of `manifest` (a YAML stream), as `kubectl apply` does: each
    /// object created, or replaced when it exists (its status kept). Returns kubectl's lines.
    ///
    /// # Errors
    /// kubectl's words for a kind the server does not serve (a custom resource before its
    /// definition), or the API's refusal.
    pub fn apply_manifest(&self, manifest: &str) -> Result<String, SimKubeError> {
        let refused = |message: String| SimKubeError::Write {
            cluster: self.name().to_owned(),
            message,
        };
        let documents: Vec<Value> = serde_saphyr::from_multiple(manifest).map_err(|err| {
            refused(format!(
                "error parsing the manifest: {}",
                err.without_snippet()
            ))
        })?;
        let defined = self.state.defined();
        let mut out = String::new();
        for document in documents.into_iter().filter(|d| d.is_object()) {
            let api_version = document["apiVersion"].as_str().unwrap_or_default();
            let kind = document["kind"].as_str().unwrap_or_default();
            let name = document["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let resource = super::resources::by_kind(api_version, kind)
                .filter(|r| r.is_served(&defined))
                .ok_or_else(|| refused(format!(
                    "resource mapping not found for name: \"{name}\": no matches for kind \"{kind}\" in version \"{api_version}\"\nensure CRDs are installed first"
                )))?;
            let namespace = resource.namespaced.then(|| {
                document["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default")
                    .to_owned()
            });
            let exists = self
                .object(resource.plural, namespace.as_deref(), &name)
                .is_some();
            let verb = if exists {
                self.replace_object(resource.plural, namespace.as_deref(), document)?;
                "configured"
            } else {
                self.create_object(resource.plural, namespace.as_deref(), document)?;
                "created"
            };
            let qualified = if resource.group.is_empty() {
                resource.singular.to_owned()
            } else {
                format!("{}.{}", resource.singular, resource.group)
            };
            out.push_str(&format!("{qualified}/{name} {verb}\n"));
        }
        Ok(out)
    }

    /// One object as stored (`plural` e.g. `pods`), or `None`.
    pub fn object(&self, plural: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let resource = by_plural(plural)?;
        self.state
            .lock()
            .store
            .get(&Key::new(resource, namespace, name))
            .cloned()
    }

    /// Objects of a resource, in one namespace or all.
    pub fn objects(&self, plural: &str, namespace: Option<&str>) -> Vec<Value> {
        self.state
            .lock()
            .store
            .list(plural, namespace)
            .into_iter()
            .cloned()
            .collect()
    }

    /// Every eviction the API server answered, in order (its audit log of evictions).
    pub fn evictions(&self) -> Vec<Eviction> {
        self.state.lock().evictions.clone()
    }

    /// `namespace/name` of every pod on `node`, sorted.
    pub fn pods_on(&self, node: &str) -> Vec<String> {
        let mut pods: Vec<String> = self
            .objects("pods", None)
            .iter()
            .filter(|p| p["spec"]["nodeName"] == node)
            .map(|p| {
                format!(
                    "{}/{}",
                    p["metadata"]["namespace"].as_str().unwrap_or_default(),
                    p["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
            .collect();
        pods.sort();
        pods
    }

    /// Writes the admin kubeconfig to `<dir>/<cluster>.kubeconfig` (mode 0600) and returns
    /// the path.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write_kubeconfig(&self, dir: &Path) -> Result<PathBuf, SimKubeError> {
        let path = dir.join(format!("{}.kubeconfig", self.name()));
        let write = || -> std::io::Result<()> {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&path)?;
            file.write_all(self.admin_kubeconfig().as_bytes())
        };
        write().map_err(|source| SimKubeError::WriteKubeconfig {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Stops serving (the cluster's API endpoint goes away; the state stays readable).
    pub fn stop(&self) {
        self.server.stop();
    }
}

/// `time` without its fraction of a second: certificates hold whole seconds, and the expiry
/// the lab reports must equal the one in the certificate.
fn whole_seconds(time: Timestamp) -> Timestamp {
    Timestamp::from_second(time.as_second()).unwrap_or(time)
}

/// A stable 32-hex-digit id per node, as `/etc/machine-id` looks.
fn machine_id(node: &str, purpose: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("{purpose}/{node}").as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

fn base64_of(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}
