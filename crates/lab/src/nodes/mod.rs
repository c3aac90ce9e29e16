//! The lab's nodes: the software inside each simulated VM, reached through the simulated guest
//! agent. It interprets the commands capstan sends (the prepare script, `kubeadm` with its real
//! flags and configuration files, `kubectl apply`, `etcdctl` in the etcd pod, `cat`, `test`) and
//! effects them on the simulated clusters: `kubeadm init` creates an API server at the cluster's
//! endpoint, joins register Nodes that turn Ready after a delay, `reset` stops the kubelet,
//! `upgrade apply` moves the control plane's version, certificate renewal moves the expiry.
//!
//! A malformed or out-of-order command fails as the real tool would: kubeadm before the packages
//! are installed is "command not found", a join with an expired token or a stale certificate key
//! is refused with kubeadm's message, an upgrade that skips a minor is refused.

pub mod cli;
pub mod iso9660;
pub mod paths;
mod registration;
mod systems;

pub use registration::Registration;

pub use systems::talos::{TalosBootError, TalosMachine};
pub use systems::talos_node::TalosClusterRef;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::proxmox::{
    ExecFuture, ExecOutcome, FileOpenError, GuestIdentity, GuestSoftware, PowerEvent,
};
use crate::clock::{Clock as _, LabClock};
use crate::values::KubeVersion;
use crate::world::Timings;
use capstan_core::model::{Role, VmId};

/// A cluster `kubeadm init` asks the simulated API servers for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCluster {
    /// `clusterName`.
    pub name: String,
    /// Host of `controlPlaneEndpoint`.
    pub endpoint_host: String,
    /// Port of `controlPlaneEndpoint`.
    pub endpoint_port: u16,
    /// `kubernetesVersion`.
    pub version: KubeVersion,
    /// The `ClusterConfiguration` document as `kubeadm init` read it: real kubeadm stores it
    /// in the `kube-system/kubeadm-config` ConfigMap (key `ClusterConfiguration`), where
    /// capstan reads the endpoint and version back. Empty: none to store (K3s, Talos).
    pub cluster_configuration: String,
    /// The cluster's CA, when the node software brings its own (Talos's machine config holds
    /// it); `None`: the API server makes one, as `kubeadm init` does.
    pub authority: Option<crate::tls::AuthorityPem>,
    /// Its network, as the distribution's configuration says.
    pub network: crate::kube::network::ClusterNetwork,
}

/// What a simulated cluster hands its control planes.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterAccess {
    /// The cluster-admin kubeconfig (`/etc/kubernetes/admin.conf`).
    pub admin_kubeconfig: String,
    /// `sha256:<hex>` of the CA's public key, as `--discovery-token-ca-cert-hash` takes it.
    pub ca_cert_hash: String,
}

impl std::fmt::Debug for ClusterAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterAccess")
            .field("ca_cert_hash", &self.ca_cert_hash)
            .finish_non_exhaustive()
    }
}

/// A Node a kubelet registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNode {
    /// Node name.
    pub name: String,
    /// kubelet version.
    pub kubelet_version: KubeVersion,
    /// Control plane or worker (the control-plane role label and taint).
    pub role: Role,
    /// InternalIP.
    pub address: Option<IpAddr>,
    /// Whether it starts Ready.
    pub ready: bool,
    /// The labels and taints its configuration registers it with.
    pub registration: Registration,
}

impl NewNode {
    /// The same Node, registering with `registration`.
    pub fn registering(self, registration: Registration) -> Self {
        NewNode {
            registration,
            ..self
        }
    }
}

/// Why the simulated API servers refused the node software.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The cluster has no API server (it was never created, or it was removed).
    #[error("the cluster {cluster} has no API server in the lab")]
    NoCluster {
        /// Cluster name.
        cluster: String,
    },
    /// The simulated API server refused the change.
    #[error(transparent)]
    Kube(#[from] crate::kube::SimKubeError),
    /// An admission plugin refused the request, in the API server's words.
    #[error("{0}")]
    Forbidden(String),
    /// The `ClusterConfiguration` kubeadm stored is no YAML.
    #[error("the stored ClusterConfiguration does not parse")]
    StoredConfiguration {
        /// The YAML reader's error.
        #[source]
        source: serde_saphyr::Error,
    },
}

/// What the node software needs of the simulated API servers.
pub trait ClusterBackend: Send + Sync + 'static {
    /// Creates a cluster (its API server starts serving).
    ///
    /// # Errors
    /// Why the cluster cannot be created; `kubeadm init` prints its chain.
    fn create_cluster(&self, request: &NewCluster) -> Result<ClusterAccess, BackendError>;
    /// Registers (or re-registers) a Node.
    ///
    /// # Errors
    /// Why the Node cannot be registered; `kubeadm join` prints its chain.
    fn register_node(&self, cluster: &str, node: &NewNode) -> Result<(), BackendError>;
    /// Sets a Node's Ready condition (a kubelet started or stopped).
    fn set_node_ready(&self, cluster: &str, node: &str, ready: bool);
    /// Applies every document of `manifest` (YAML) to the cluster, creating or replacing
    /// each object; returns kubectl's lines (`namespace/x created`).
    ///
    /// # Errors
    /// Why an object was refused.
    fn apply_manifest(&self, cluster: &str, manifest: &str) -> Result<String, BackendError>;
    /// Deploys the kube-proxy DaemonSet (kubeadm's `addon/kube-proxy` phase).
    ///
    /// # Errors
    /// Why it cannot be written.
    fn deploy_kube_proxy(&self, cluster: &str) -> Result<(), BackendError>;
    /// Moves the control plane's version (`/version`).
    fn set_version(&self, cluster: &str, version: KubeVersion);
    /// Issues fresh certificates (a year from the lab clock) and returns the new admin access.
    ///
    /// # Errors
    /// Why the certificates cannot be renewed; the renewal prints its chain.
    fn renew_certificates(&self, cluster: &str) -> Result<ClusterAccess, BackendError>;
    /// The cluster's storage stopped answering (`Some(reason)`: its API answers 503 with it)
    /// or answers again (`None`), as a K3s server's kine sees its datastore.
    fn set_storage_unavailable(&self, cluster: &str, reason: Option<String>);
    /// The Talos API of the node at `node` (its address, as its guest agent reports it) is
    /// served at `served`, a loopback address, from now on; `None`: no longer served.
    fn talos_api(&self, node: IpAddr, served: Option<std::net::SocketAddr>);
    /// The API server of control plane `node` started with `authentication` (the
    /// `AuthenticationConfiguration` file its `--authentication-config` names, read from the
    /// node; `None` without the flag), or stopped (`running: false`).
    ///
    /// # Errors
    /// Why the API server does not start with it, in kube-apiserver's words.
    fn api_server(
        &self,
        cluster: &str,
        node: &str,
        running: bool,
        authentication: Option<&str>,
    ) -> Result<(), BackendError>;
    /// The last machine of `cluster` was destroyed: the API server that ran on its machines
    /// stops and the cluster is forgotten, so a new cluster of that name starts its own.
    fn remove_cluster(&self, cluster: &str);
}

/// How long node operations take in the lab (short defaults: a cluster comes up in seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeTimings {
    /// Installing CRI-O and the Kubernetes packages.
    pub prepare: Duration,
    /// `kubeadm init`.
    pub init: Duration,
    /// `kubeadm join`.
    pub join: Duration,
    /// From a join (or the CNI's arrival) until the Node is Ready.
    pub node_ready_after: Duration,
    /// `kubeadm upgrade apply` and certificate renewal.
    pub upgrade: Duration,
}

impl From<&Timings> for NodeTimings {
    fn from(timings: &Timings) -> Self {
        NodeTimings {
            prepare: timings.prepare.0,
            init: timings.kubeadm_init.0,
            join: timings.kubeadm_join.0,
            node_ready_after: timings.node_ready.0,
            upgrade: timings.kubeadm_upgrade.0,
        }
    }
}

impl Default for NodeTimings {
    /// The lab config's default timings.
    fn default() -> Self {
        NodeTimings::from(&Timings::default())
    }
}

/// The software of every simulated VM, sharing the simulated clusters behind `backend`.
pub struct NodeSoftware<B> {
    shared: Arc<Shared<B>>,
}

impl<B> Clone for NodeSoftware<B> {
    fn clone(&self) -> Self {
        NodeSoftware {
            shared: Arc::clone(&self.shared),
        }
    }
}

struct Shared<B> {
    backend: B,
    clock: LabClock,
    timings: NodeTimings,
    world: Mutex<systems::GuestSystems>,
    /// VM selectors (a name, or `prefix*`) whose slow commands take this many times longer.
    slowed: Mutex<Vec<(String, u32)>>,
}

impl<B: ClusterBackend> NodeSoftware<B> {
    /// Node software over `backend`, on the lab's `clock`.
    pub fn new(backend: B, clock: LabClock, timings: NodeTimings) -> Self {
        let shared = Arc::new_cyclic(|weak: &std::sync::Weak<Shared<B>>| {
            let weak = weak.clone();
            // A Talos API changed its cluster's etcd (outside our lock): the cluster reacts.
            let hook = systems::talos_node::TalosHook(Arc::new(move |cluster_id: &str| {
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                let mut later = Vec::new();
                lock(&shared.world).talos_reconcile(&shared.backend, cluster_id, &mut later);
                later
                    .into_iter()
                    .for_each(|effect| schedule(&shared, effect));
            }));
            let mut world = systems::GuestSystems::default();
            world.talos_hook = Some(hook);
            Shared {
                backend,
                clock,
                timings,
                world: Mutex::new(world),
                slowed: Mutex::default(),
            }
        });
        NodeSoftware { shared }
    }

    /// From now on, the slow commands (prepare script, kubeadm init/join/upgrade) of the VMs
    /// `selector` names (a VM name, or `prefix*`) take `factor` times as long: one slow
    /// machine among fast ones.
    pub fn slow_down(&self, selector: &str, factor: u32) {
        self.shared
            .slowed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((selector.to_owned(), factor));
    }

    /// How many times longer `vm`'s slow commands take (1: as the timings say).
    fn slowdown_of(&self, vm: &GuestIdentity) -> u32 {
        let slowed = self
            .shared
            .slowed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slowed
            .iter()
            .filter(|(selector, _)| {
                *selector == vm.name
                    || selector
                        .strip_suffix('*')
                        .is_some_and(|prefix| vm.name.starts_with(prefix))
            })
            .map(|(_, factor)| *factor)
            .max()
            .unwrap_or(1)
    }

    /// Runs `argv` inside `vm`, taking as long as the real operation would in the lab. A
    /// command line that carries a secret the lab's nodes hold or issued is refused: QEMU's
    /// guest agent logs every command line to the guest's syslog, and `/proc/*/cmdline` shows
    /// it to every user of the node.
    pub async fn exec(&self, vm: &GuestIdentity, argv: &[String]) -> ExecOutcome {
        let (config, pull) = {
            let mut world = self.world();
            if let Some(refused) = secret_on_command_line(&world, argv) {
                return refused;
            }
            (world.k3s_config(vm.vmid), world.image_pull(vm, argv))
        };
        match pull {
            Some(Ok(pull)) => return pull.run().await,
            Some(Err(refused)) => return refused,
            None => {}
        }
        if let Some(install) = systems::k3s::parse_install(vm, argv, config.as_ref()) {
            return match install {
                Ok(install) => self.k3s_install(vm, install).await,
                Err(refused) => refused,
            };
        }
        let shared = &self.shared;
        if let Some(delay) = systems::duration_of(argv, &shared.timings) {
            tokio::time::sleep(delay * self.slowdown_of(vm)).await;
        }
        let now = shared.clock.now();
        let (exit, effects) = {
            let mut world = shared
                .world
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            world.exec(&shared.backend, vm, argv, now)
        };
        for effect in effects {
            self.schedule(effect);
        }
        exit
    }

    /// Writes a file inside `vm` (the guest agent's `file-write`), as QEMU's guest agent
    /// does: a new file is created mode 0666 whatever the umask (`guest-file-open` sets it with
    /// `fchmod`), a file that exists keeps its mode, and no folder is created.
    ///
    /// # Errors
    /// The agent's message when the file's folder does not exist (or the path is a folder).
    pub fn write_file(
        &self,
        vm: &GuestIdentity,
        path: &str,
        content: &[u8],
    ) -> Result<(), FileOpenError> {
        let text = String::from_utf8_lossy(content).into_owned();
        self.world().guest(vm.vmid).agent_write(path, text)
    }

    /// The content of `path` inside VM `vmid`, if it exists.
    pub fn file(&self, vmid: VmId, path: &str) -> Option<String> {
        self.world().guest(vmid).files.get(path).cloned()
    }

    /// The permission bits of `path` inside VM `vmid`, when it exists and was written through
    /// the guest agent or `install`.
    pub fn file_mode(&self, vmid: VmId, path: &str) -> Option<u32> {
        let mut world = self.world();
        let guest = world.guest(vmid);
        guest
            .files
            .contains_key(path)
            .then(|| guest.modes.get(path).copied())
            .flatten()
    }

    /// Every URL a VM was asked to fetch (`kubectl apply -f https://...`), refused: the
    /// lab's VMs reach nothing outside the lab.
    pub fn refused_fetches(&self) -> Vec<String> {
        self.world().refused_fetches()
    }

    /// The console of Talos VM `vmid`: each start says whether it took its machine config
    /// from the CD-ROM, and why not.
    pub fn talos_console(&self, vmid: VmId) -> Vec<String> {
        self.world().talos_console(vmid)
    }

    /// The machine Talos VM `vmid` runs, once it took a valid machine config.
    pub fn talos_machine(&self, vmid: VmId) -> Option<TalosMachine> {
        self.world().talos_machine(vmid)
    }

    /// Stops serving every Talos API (the lab stops); what the machines hold stays readable.
    pub fn stop_talos_apis(&self) {
        self.world().stop_talos_apis(&self.shared.backend);
    }

    /// Where the Talos API of Talos VM `vmid` is served (a loopback address), while it runs a
    /// machine and the API serves.
    pub fn talos_api_address(&self, vmid: VmId) -> Option<std::net::SocketAddr> {
        self.world().talos_api_address(vmid)
    }

    /// The simulated etcd of a Talos cluster (a handle: read its members as often as needed),
    /// once a machine of it runs.
    pub fn talos_etcd(&self, cluster: TalosClusterRef<'_>) -> Option<crate::talos::EtcdCluster> {
        self.world().talos_etcd(cluster)
    }

    /// Reacts to a power change: kubelets stop with their VM and come back with it; a Talos
    /// VM reads its machine config at start.
    pub fn power(&self, vm: &GuestIdentity, event: PowerEvent) {
        let effects = {
            let mut world = self
                .shared
                .world
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            world.power(&self.shared.backend, vm, event)
        };
        for effect in effects {
            self.schedule(effect);
        }
    }

    /// K3s's install: a server first opens its datastore (a real MySQL connection, outside
    /// the state lock) and keeps its bootstrap and registration there, then joins or creates
    /// the cluster; an agent joins a server's endpoint.
    async fn k3s_install(
        &self,
        vm: &GuestIdentity,
        install: systems::k3s::K3sInstall,
    ) -> ExecOutcome {
        use systems::k3s::{K3sInstall, fatal};
        tokio::time::sleep(self.shared.timings.join).await;
        let server = match install {
            K3sInstall::Agent(agent) => {
                let (exit, effects) = {
                    let mut world = self.world();
                    let mut later = Vec::new();
                    let exit = world.k3s_agent(&self.shared.backend, vm, &agent, &mut later);
                    (exit, later)
                };
                effects.into_iter().for_each(|effect| self.schedule(effect));
                return exit;
            }
            K3sInstall::Server(server) => server,
        };
        let kine = match &server.datastore {
            Some(dsn) => match open_datastore(dsn, &server).await {
                Ok(kine) => Some(kine),
                Err(message) => return fatal(&message),
            },
            None => None,
        };
        let mut later = Vec::new();
        let started = self
            .world()
            .k3s_server(&self.shared.backend, vm, &server, &mut later);
        later.into_iter().for_each(|effect| self.schedule(effect));
        match started {
            Ok((cluster, created)) => {
                if let (Some(kine), true) = (kine, created) {
                    self.watch_datastore(cluster, kine);
                }
                ExecOutcome::success(
                    "[INFO]  Skipping k3s download and verify\n[INFO]  systemd: Starting k3s\n",
                )
            }
            Err(refused) => refused,
        }
    }

    /// While the cluster exists, asks its datastore every [`DATASTORE_CHECK`] whether it
    /// answers, and makes the API answer 503 while it does not.
    fn watch_datastore(&self, cluster: String, kine: crate::kine::Kine) {
        let shared = Arc::downgrade(&self.shared);
        tokio::spawn(async move {
            let mut down = false;
            loop {
                tokio::time::sleep(DATASTORE_CHECK).await;
                let Some(alive) = shared.upgrade() else {
                    return;
                };
                let exists = alive
                    .world
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .has_cluster(&cluster);
                if !exists {
                    return;
                }
                match kine.ping().await {
                    Ok(()) if down => {
                        down = false;
                        alive.backend.set_storage_unavailable(&cluster, None);
                    }
                    Err(err) if !down => {
                        down = true;
                        let reason =
                            format!("storage is unavailable: datastore {:?}: {err}", kine.dsn());
                        alive
                            .backend
                            .set_storage_unavailable(&cluster, Some(reason));
                    }
                    _ => {}
                }
            }
        });
    }

    fn world(&self) -> std::sync::MutexGuard<'_, systems::GuestSystems> {
        lock(&self.shared.world)
    }

    fn schedule(&self, effect: systems::Later) {
        schedule(&self.shared, effect);
    }

    /// The clusters `kubeadm init` created, by name, with their endpoint (`HOST:PORT`).
    pub fn clusters(&self) -> BTreeMap<String, String> {
        let world = self
            .shared
            .world
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        world.cluster_endpoints()
    }
}

impl<B: ClusterBackend> GuestSoftware for NodeSoftware<B> {
    fn exec(&self, guest: &GuestIdentity, command: &[String], _input: Option<&str>) -> ExecFuture {
        let (software, guest, command) = (self.clone(), guest.clone(), command.to_vec());
        Box::pin(async move { software.exec(&guest, &command).await })
    }

    fn file_written(
        &self,
        guest: &GuestIdentity,
        path: &str,
        content: &[u8],
    ) -> Result<(), FileOpenError> {
        self.write_file(guest, path, content)
    }

    fn power_event(&self, guest: &GuestIdentity, event: PowerEvent) {
        self.power(guest, event);
    }

    fn static_address(&self, guest: &GuestIdentity, mac: &str) -> Option<std::net::Ipv4Addr> {
        guest.talos.as_ref()?;
        systems::talos_network::static_address(guest.media.iter().map(|m| m.0.as_slice()), mac)
    }
}

/// The node software's state, whatever a panic left in it (plain data).
fn lock(world: &Mutex<systems::GuestSystems>) -> std::sync::MutexGuard<'_, systems::GuestSystems> {
    world
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Applies `effect` after the lab's delay for a kubelet to turn Ready.
fn schedule<B: ClusterBackend>(shared: &Arc<Shared<B>>, effect: systems::Later) {
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        tokio::time::sleep(shared.timings.node_ready_after).await;
        lock(&shared.world).apply_later(&shared.backend, &effect);
    });
}

/// The mode QEMU's guest agent gives a file `guest-file-open` creates (qga's
/// `DEFAULT_NEW_FILE_MODE`, applied with `fchmod`, so the umask does not narrow it).
pub(super) const GUEST_AGENT_NEW_FILE_MODE: u32 = 0o666;

/// The lab's refusal of a command line carrying a secret its nodes hold or issued.
fn secret_on_command_line(world: &systems::GuestSystems, argv: &[String]) -> Option<ExecOutcome> {
    // Shorter values are not secrets the lab issues; searching for them would find words.
    const SHORTEST_SECRET: usize = 8;
    let (what, _) = world.secrets().into_iter().find(|(_, secret)| {
        secret.len() >= SHORTEST_SECRET && argv.iter().any(|word| word.contains(secret))
    })?;
    Some(ExecOutcome::failure(
        1,
        format!(
            "lab: the command line carries {what}, which QEMU's guest agent logs to the guest's syslog and /proc/*/cmdline shows to every user of the node: pass it in a file of mode 0600 or on standard input\n"
        ),
    ))
}

/// How often a K3s server's kine asks its datastore whether it answers.
const DATASTORE_CHECK: Duration = Duration::from_millis(200);

/// Opens a K3s server's datastore as kine does and keeps the cluster's bootstrap (under the
/// token's hash: another token finds it and is refused, as K3s refuses it) and the server's
/// registration there. Errors are K3s's fatal message.
async fn open_datastore(
    dsn: &crate::kine::Dsn,
    server: &systems::k3s::ServerRequest,
) -> Result<crate::kine::Kine, String> {
    use sha2::Digest as _;
    let storage = |err: crate::kine::KineError| {
        format!(
            "starting kubernetes: preparing server: creating storage endpoint: building kine: {err}"
        )
    };
    let kine = crate::kine::Kine::open(dsn).await.map_err(storage)?;
    let hash: String = sha2::Sha256::digest(server.token.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    let bootstrap = format!("/bootstrap/{hash}");
    let existing = kine.names("/bootstrap/").await.map_err(storage)?;
    if existing.iter().any(|key| *key != bootstrap) {
        return Err("starting kubernetes: preparing server: bootstrap data already found and encrypted with different token".to_owned());
    }
    if existing.is_empty() {
        kine.put(&bootstrap, b"{\"ServerCA\":\"...\"}")
            .await
            .map_err(storage)?;
    }
    kine.put(
        &format!("/registry/minions/{}", server.node),
        server.node.as_bytes(),
    )
    .await
    .map_err(storage)?;
    Ok(kine)
}

/// Random lowercase hex from the TLS library's secure generator (tokens, keys).
fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    let random = rustls::crypto::ring::default_provider().secure_random;
    if random.fill(&mut buffer).is_err() {
        // Only predictability for a simulated token is lost; never an outage of the lab.
        buffer
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8);
    }
    buffer.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::LabConfig;

    #[test]
    fn node_timings_come_from_the_lab_config() {
        let config = LabConfig::parse("proxmox:\n  timings: {kubeadmInit: 2s, nodeReady: 10ms}\n")
            .expect("valid");
        let nodes = NodeTimings::from(&config.proxmox.timings);
        assert_eq!(nodes.init, Duration::from_secs(2));
        assert_eq!(nodes.node_ready_after, Duration::from_millis(10));
        assert_eq!(nodes.join, NodeTimings::default().join);
    }
}
