//! Talos machines running in the lab. A Talos VM that took its machine config (see `talos`)
//! serves its Talos API on a loopback port, and its cluster (by `cluster.id`) has one
//! simulated etcd. `Bootstrap` on a control plane starts etcd there and the cluster's API
//! server, with the Kubernetes CA of the machine config, at the endpoint and name the config
//! gives, at the version of its kubelet image. Then every running control plane joins etcd and
//! every running machine registers its Node, Ready a little later.
//!
//! # Invariants
//! - A control plane joins etcd at most once per boot: when the cluster is bootstrapped and
//!   etcd has quorum (tried again at every change, as Talos retries its join). One that left or
//!   was removed joins again only after it boots again.
//! - An etcd member is healthy exactly while its machine runs as a member; a destroyed
//!   machine's member stays (unhealthy) until removed by id.
//! - While etcd has no quorum the cluster's API server answers 503; it serves again when
//!   quorum returns.
//! - The API server reports the oldest kubelet version among the running etcd members (each
//!   control plane runs its own behind the endpoint).
//! - A machine keeps its config across restarts (Talos installs it to its disk): the CD-ROM
//!   is read only until a config was taken.
//! - A worker's Talos API serves once the OS CA's key is known from a control plane of its
//!   cluster (Talos's trustd hands workers their certificates).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use super::talos::{TalosMachine, boot};
use super::{GuestSystems, Later};
use crate::nodes::{ClusterBackend, NewCluster, NewNode, Registration};
use crate::proxmox::{GuestIdentity, PowerEvent};
use crate::talos::{EtcdChanged, EtcdCluster, OsCa, TALOS_API_PORT, TalosNode, TalosNodeApi};
use crate::values::KubeVersion;
use capstan_core::model::{Role, VmId};

/// The most console lines kept per VM (each start adds a few).
const MAX_CONSOLE_LINES: usize = 64;

/// Called with a cluster id after a node's Talos API changed that cluster's etcd; it takes the
/// node software's state lock and reconciles the cluster.
#[derive(Clone)]
pub(in crate::nodes) struct TalosHook(pub(in crate::nodes) Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for TalosHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TalosHook")
    }
}

/// A Talos VM's state in the lab: its console, the machine it runs and what runs of it.
#[derive(Debug, Default)]
pub(in crate::nodes) struct TalosGuest {
    console: Vec<String>,
    machine: Option<TalosMachine>,
    running: bool,
    /// The config's hostname, or the VM's name.
    hostname: String,
    /// Its address (the DHCP lease its guest agent reports).
    address: Option<IpAddr>,
    /// The Talos version it boots (its template's).
    talos_tag: String,
    /// The system extensions its image carries (its template's).
    extensions: Vec<String>,
    api: Option<TalosNodeApi>,
    etcd: Membership,
    /// Its Node is registered with the cluster's API server.
    registered: bool,
}

impl TalosGuest {
    fn say(&mut self, line: String) {
        self.console.push(line);
        let excess = self.console.len().saturating_sub(MAX_CONSOLE_LINES);
        self.console.drain(..excess);
    }

    fn of_cluster(&self, cluster_id: &str) -> bool {
        self.machine
            .as_ref()
            .is_some_and(|m| m.cluster_id == cluster_id)
    }

    fn is_control_plane(&self) -> bool {
        self.machine
            .as_ref()
            .is_some_and(|m| m.role == Role::ControlPlane)
    }
}

/// A control plane's place in etcd during one boot.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Membership {
    /// Not a member yet: joins once the cluster is bootstrapped.
    #[default]
    NotYet,
    /// A member (it bootstrapped, joined, or was one before it restarted).
    Member,
    /// It left, or was removed: no longer a member until it boots again.
    Gone,
}

/// One Talos cluster of the lab, by `cluster.id`.
#[derive(Debug, Default)]
pub(in crate::nodes) struct TalosCluster {
    etcd: EtcdCluster,
    /// The Kubernetes cluster's name, once Bootstrap started its API server.
    kubernetes: Option<String>,
    /// The version its API server reports.
    version: Option<KubeVersion>,
    /// Whether the API server was last told its storage is down (etcd without quorum).
    storage_down: bool,
    /// The OS CA with its key, from the first control plane that took its config.
    os_ca: Option<OsCa>,
}

impl GuestSystems {
    /// A Talos VM's power changed: it boots its machine, or stops (or is destroyed) and its
    /// cluster notices.
    pub(super) fn talos_power(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestIdentity,
        event: PowerEvent,
    ) -> Vec<Later> {
        let mut later = Vec::new();
        match event {
            PowerEvent::Started => self.talos_start(backend, vm, &mut later),
            PowerEvent::ShutDown | PowerEvent::HardStopped | PowerEvent::HostLost => {
                self.talos_stop(backend, vm.vmid, false, &mut later);
            }
            PowerEvent::Destroyed => self.talos_stop(backend, vm.vmid, true, &mut later),
        }
        later
    }

    /// A Talos VM starts: it runs the machine config it took before, or reads one from the
    /// CD-ROM, or says on its console why it runs none.
    fn talos_start(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestIdentity,
        later: &mut Vec<Later>,
    ) {
        let kept = self.talos.get(&vm.vmid).and_then(|g| g.machine.clone());
        let outcome = match kept {
            Some(machine) => Ok((machine, "its disk")),
            None => {
                let members = self
                    .talos
                    .iter()
                    .filter(|(vmid, guest)| **vmid != vm.vmid && guest.running)
                    .filter_map(|(_, guest)| guest.machine.as_ref());
                boot(vm.media.iter().map(|m| m.0.as_slice()), members).map(|m| (m, "cidata"))
            }
        };
        let guest = self.talos.entry(vm.vmid).or_default();
        guest.running = true;
        guest.address = vm.address.map(IpAddr::V4);
        guest.talos_tag = vm.talos.clone().unwrap_or_default();
        guest.extensions = vm.talos_extensions.clone();
        guest.etcd = Membership::NotYet;
        guest.say(format!("[talos] Talos {} booting", guest.talos_tag));
        let (machine, source) = match outcome {
            Ok(taken) => taken,
            Err(err) => {
                guest.say(format!("[talos] {}", chain(&err)));
                guest.machine = None;
                return;
            }
        };
        guest.say(format!(
            "[talos] machine config loaded from {source}: {} of cluster {}",
            if machine.role == Role::ControlPlane {
                "controlplane"
            } else {
                "worker"
            },
            machine
                .cluster_name
                .as_deref()
                .unwrap_or(&machine.cluster_id),
        ));
        guest.hostname = machine.hostname.clone().unwrap_or_else(|| vm.name.clone());
        let restarted = guest.registered;
        let cluster = self
            .talos_clusters
            .entry(machine.cluster_id.clone())
            .or_default();
        if cluster.os_ca.is_none() {
            cluster.os_ca = machine.os_ca();
        }
        if let (true, Some(kubernetes)) = (restarted, &cluster.kubernetes) {
            // Its Node exists: the kubelet posts Ready again.
            later.push(Later::TalosNodeReady {
                cluster: kubernetes.clone(),
                node: guest.hostname.clone(),
                vmid: vm.vmid,
            });
        }
        let cluster_id = machine.cluster_id.clone();
        guest.machine = Some(machine);
        self.talos_reconcile(backend, &cluster_id, later);
    }

    /// A Talos VM stops (its API stops serving, its Node turns NotReady, its etcd member
    /// unhealthy) or is destroyed (its member stays until removed; the cluster's API server
    /// goes with its last machine).
    fn talos_stop(
        &mut self,
        backend: &impl ClusterBackend,
        vmid: VmId,
        destroyed: bool,
        later: &mut Vec<Later>,
    ) {
        let Some(guest) = self.talos.get_mut(&vmid) else {
            return;
        };
        guest.running = false;
        if let (Some(_), Some(address)) = (guest.api.take(), guest.address) {
            backend.talos_api(address, None);
        }
        let cluster_id = guest.machine.as_ref().map(|m| m.cluster_id.clone());
        let kubernetes = cluster_id
            .as_ref()
            .and_then(|id| self.talos_clusters.get(id))
            .and_then(|c| c.kubernetes.clone());
        if let (true, Some(kubernetes)) = (guest.registered, kubernetes) {
            backend.set_node_ready(&kubernetes, &guest.hostname, false);
        }
        if destroyed {
            self.talos.remove(&vmid);
        }
        let Some(cluster_id) = cluster_id else {
            return;
        };
        if destroyed && !self.talos.values().any(|g| g.of_cluster(&cluster_id)) {
            // Its last machine is gone, and with it the API server and etcd they ran.
            if let Some(gone) = self.talos_clusters.remove(&cluster_id)
                && let Some(kubernetes) = gone.kubernetes
            {
                backend.remove_cluster(&kubernetes);
            }
            return;
        }
        self.talos_reconcile(backend, &cluster_id, later);
    }

    /// Brings cluster `cluster_id` in line with its machines: Talos APIs served, the API
    /// server started after Bootstrap, etcd membership and health, quorum, Nodes registered.
    pub(in crate::nodes) fn talos_reconcile(
        &mut self,
        backend: &impl ClusterBackend,
        cluster_id: &str,
        later: &mut Vec<Later>,
    ) {
        self.serve_talos_apis(backend, cluster_id);
        let GuestSystems {
            talos,
            talos_clusters,
            ..
        } = self;
        let Some(cluster) = talos_clusters.get_mut(cluster_id) else {
            return;
        };
        let mut guests: Vec<(VmId, &mut TalosGuest)> = talos
            .iter_mut()
            .filter(|(_, g)| g.of_cluster(cluster_id))
            .map(|(vmid, g)| (*vmid, g))
            .collect();
        if cluster.etcd.members_unchecked().is_empty() {
            return;
        }
        update_membership(&cluster.etcd, &mut guests);
        if cluster.kubernetes.is_none() {
            start_api_server(backend, cluster, &mut guests);
        }
        let Some(kubernetes) = cluster.kubernetes.clone() else {
            return;
        };
        serve_oldest_version(backend, &kubernetes, cluster, &guests);
        serve_authentication(backend, &kubernetes, &mut guests);
        let down = !cluster.etcd.has_quorum();
        if down != cluster.storage_down {
            cluster.storage_down = down;
            let reason = down.then(|| {
                format!("storage is unavailable: the etcd of cluster {kubernetes} has no quorum")
            });
            backend.set_storage_unavailable(&kubernetes, reason);
        }
        if !down {
            register_nodes(backend, &kubernetes, &mut guests, later);
        }
    }

    /// Starts the Talos API of every running machine of the cluster that has none yet and
    /// whose certificate can be signed (the OS CA's key is known).
    fn serve_talos_apis(&mut self, backend: &impl ClusterBackend, cluster_id: &str) {
        let Some(cluster) = self.talos_clusters.get(cluster_id) else {
            return;
        };
        let hook: Option<EtcdChanged> = self.talos_hook.clone().map(|hook| {
            let id = cluster_id.to_owned();
            Arc::new(move || (hook.0)(&id)) as EtcdChanged
        });
        for guest in self.talos.values_mut() {
            if !guest.running || guest.api.is_some() || !guest.of_cluster(cluster_id) {
                continue;
            }
            let own = guest.machine.as_ref().and_then(TalosMachine::os_ca);
            let (Some(os_ca), Some(address)) =
                (own.or_else(|| cluster.os_ca.clone()), guest.address)
            else {
                continue;
            };
            let node = TalosNode {
                hostname: guest.hostname.clone(),
                address,
                talos_tag: guest.talos_tag.clone(),
                extensions: guest.extensions.clone(),
                control_plane: guest.is_control_plane(),
                registries: guest
                    .machine
                    .as_ref()
                    .map(|m| m.registries.clone())
                    .unwrap_or_default(),
            };
            match TalosNodeApi::start_now(&os_ca, node, cluster.etcd.clone(), hook.clone()) {
                Ok(api) => {
                    backend.talos_api(address, Some(api.address()));
                    guest.say(format!(
                        "[talos] apid serving on {address}:{TALOS_API_PORT}"
                    ));
                    guest.api = Some(api);
                }
                Err(err) => guest.say(format!("[talos] apid: {}", chain(&err))),
            }
        }
    }

    /// Stops every Talos API (the lab stops serving); the machines' state stays readable.
    pub(in crate::nodes) fn stop_talos_apis(&mut self, backend: &impl ClusterBackend) {
        for guest in self.talos.values_mut() {
            if let (Some(_), Some(address)) = (guest.api.take(), guest.address) {
                backend.talos_api(address, None);
            }
        }
    }

    /// The console lines of Talos VM `vmid`.
    pub(in crate::nodes) fn talos_console(&self, vmid: VmId) -> Vec<String> {
        self.talos
            .get(&vmid)
            .map(|g| g.console.clone())
            .unwrap_or_default()
    }

    /// The machine Talos VM `vmid` runs, if it took a config.
    pub(in crate::nodes) fn talos_machine(&self, vmid: VmId) -> Option<TalosMachine> {
        self.talos.get(&vmid).and_then(|g| g.machine.clone())
    }

    /// Where Talos VM `vmid`'s Talos API is served, while it is.
    pub(in crate::nodes) fn talos_api_address(&self, vmid: VmId) -> Option<SocketAddr> {
        self.talos
            .get(&vmid)
            .and_then(|g| g.api.as_ref())
            .map(TalosNodeApi::address)
    }

    /// The etcd of the Talos cluster whose machines name it `name` (`cluster.clusterName`),
    /// or of the cluster VM `vmid` runs a machine of.
    pub(in crate::nodes) fn talos_etcd(&self, cluster: TalosClusterRef<'_>) -> Option<EtcdCluster> {
        let cluster_id = self.talos.iter().find_map(|(vmid, guest)| {
            let machine = guest.machine.as_ref()?;
            let found = match cluster {
                TalosClusterRef::Named(name) => machine.cluster_name.as_deref() == Some(name),
                TalosClusterRef::OfVm(of) => *vmid == of,
            };
            found.then(|| machine.cluster_id.clone())
        })?;
        self.talos_clusters.get(&cluster_id).map(|c| c.etcd.clone())
    }

    /// Whether Talos VM `vmid` still runs as the registered Node `node` (its kubelet may
    /// post Ready).
    pub(super) fn talos_node_runs(&self, vmid: VmId, node: &str) -> bool {
        self.talos
            .get(&vmid)
            .is_some_and(|g| g.running && g.registered && g.hostname == node)
    }
}

/// A Talos cluster, by what a test knows of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TalosClusterRef<'a> {
    /// By `cluster.clusterName`.
    Named(&'a str),
    /// The cluster VM `vmid` runs a machine of.
    OfVm(VmId),
}

/// Marks who is a member after a change, joins the running control planes that are not yet
/// (the join fails without quorum and is tried again at the next change), and makes each
/// member's health that of its machine.
fn update_membership(etcd: &EtcdCluster, guests: &mut [(VmId, &mut TalosGuest)]) {
    let names: Vec<String> = etcd
        .members_unchecked()
        .into_iter()
        .map(|m| m.name)
        .collect();
    for (_, guest) in guests.iter_mut() {
        let listed = names.contains(&guest.hostname);
        guest.etcd = match guest.etcd {
            Membership::NotYet if listed => Membership::Member,
            Membership::Member if !listed => {
                guest.say("[talos] etcd: this member left the cluster".to_owned());
                Membership::Gone
            }
            unchanged => unchanged,
        };
    }
    set_health(etcd, guests);
    for (_, guest) in guests.iter_mut() {
        if !guest.running || !guest.is_control_plane() || guest.etcd != Membership::NotYet {
            continue;
        }
        let Some(address) = guest.address else {
            continue;
        };
        if etcd.join(&guest.hostname, &address.to_string()).is_ok() {
            guest.etcd = Membership::Member;
            guest.say("[talos] etcd: joined the cluster".to_owned());
        }
    }
    set_health(etcd, guests);
}

fn set_health(etcd: &EtcdCluster, guests: &[(VmId, &mut TalosGuest)]) {
    for member in etcd.members_unchecked() {
        let healthy = guests
            .iter()
            .any(|(_, g)| g.running && g.etcd == Membership::Member && g.hostname == member.name);
        if member.healthy != healthy {
            etcd.set_healthy(&member.name, healthy);
        }
    }
}

/// Starts the cluster's API server from the config of the control plane that bootstrapped
/// (or any control plane: they share the CA), and says so on its console.
fn start_api_server(
    backend: &impl ClusterBackend,
    cluster: &mut TalosCluster,
    guests: &mut [(VmId, &mut TalosGuest)],
) {
    let leader = cluster
        .etcd
        .members_unchecked()
        .first()
        .map(|m| m.name.clone());
    let Some((_, guest)) = guests
        .iter_mut()
        .filter(|(_, g)| g.is_control_plane())
        .max_by_key(|(_, g)| Some(&g.hostname) == leader.as_ref())
    else {
        return;
    };
    let Some(machine) = guest.machine.as_ref() else {
        return;
    };
    let version = machine.kubernetes_version;
    match api_server(backend, machine) {
        Ok(name) => {
            guest.say(format!(
                "[talos] kube-apiserver of cluster {name} serving {}",
                machine.endpoint
            ));
            cluster.kubernetes = Some(name);
            cluster.version = version;
        }
        Err(why) => guest.say(format!("[talos] kube-apiserver: {why}")),
    }
}

/// Each control plane runs the API server of its own kubelet's version behind the endpoint:
/// while they differ the lab serves the oldest, so a client sees a new version once every
/// running member runs it.
fn serve_oldest_version(
    backend: &impl ClusterBackend,
    kubernetes: &str,
    cluster: &mut TalosCluster,
    guests: &[(VmId, &mut TalosGuest)],
) {
    let oldest = guests
        .iter()
        .filter(|(_, g)| g.running && g.etcd == Membership::Member)
        .filter_map(|(_, g)| g.machine.as_ref()?.kubernetes_version)
        .min();
    if let Some(oldest) = oldest
        && cluster.version != Some(oldest)
    {
        cluster.version = Some(oldest);
        backend.set_version(kubernetes, oldest);
    }
}

/// Each running control plane's API server runs with the authentication its machine config
/// gives it (see `api_server_authentication`); a stopped or departed one runs no more.
fn serve_authentication(
    backend: &impl ClusterBackend,
    kubernetes: &str,
    guests: &mut [(VmId, &mut TalosGuest)],
) {
    for (_, guest) in guests.iter_mut() {
        let Some(machine) = guest.machine.as_ref().filter(|_| guest.is_control_plane()) else {
            continue;
        };
        let node = guest.hostname.clone();
        let running = guest.running && guest.etcd == Membership::Member;
        let started = match (&machine.authentication, running) {
            (_, false) => backend.api_server(kubernetes, &node, false, None),
            (Ok(authentication), true) => {
                backend.api_server(kubernetes, &node, true, authentication.as_deref())
            }
            (Err(why), true) => {
                let why = format!("[talos] kube-apiserver: {why}");
                if guest.console.last() != Some(&why) {
                    guest.say(why);
                }
                continue;
            }
        };
        if let Err(err) = started {
            let why = format!("[talos] kube-apiserver: {}", chain(&err));
            if guest.console.last() != Some(&why) {
                guest.say(why);
            }
        }
    }
}

/// Asks the lab's API servers for the cluster `machine`'s config describes.
fn api_server(backend: &impl ClusterBackend, machine: &TalosMachine) -> Result<String, String> {
    let name = machine
        .cluster_name
        .clone()
        .ok_or("the machine config has no cluster.clusterName")?;
    let version = machine
        .kubernetes_version
        .ok_or("the machine config has no machine.kubelet.image")?;
    let authority = machine
        .kubernetes_ca()
        .ok_or("the machine config has no cluster.ca.key")?;
    let (host, port) =
        endpoint_host_port(&machine.endpoint).ok_or("cluster.controlPlane.endpoint has no host")?;
    backend
        .create_cluster(&NewCluster {
            name: name.clone(),
            endpoint_host: host,
            endpoint_port: port,
            version,
            cluster_configuration: String::new(),
            authority: Some(authority),
            network: machine.network.clone(),
        })
        .map_err(|err| capstan_core::errors::error_chain(&err))?;
    Ok(name)
}

/// The host and port of an `https://host[:port][/path]` endpoint (443 without a port).
fn endpoint_host_port(endpoint: &str) -> Option<(String, u16)> {
    let authority = endpoint
        .strip_prefix("https://")?
        .split(['/', '?', '#'])
        .next()?;
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (host, port.parse().ok()?),
        _ => (authority, 443),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

/// Registers the Node of every running machine that has none yet (NotReady, Ready after the
/// lab's delay).
fn register_nodes(
    backend: &impl ClusterBackend,
    kubernetes: &str,
    guests: &mut [(VmId, &mut TalosGuest)],
    later: &mut Vec<Later>,
) {
    for (vmid, guest) in guests.iter_mut() {
        if !guest.running || guest.registered {
            continue;
        }
        let Some(machine) = guest.machine.as_ref() else {
            continue;
        };
        let Some(version) = machine.kubernetes_version else {
            guest.say("[talos] kubelet: the machine config has no machine.kubelet.image".into());
            continue;
        };
        let (registration, refusal) =
            worker_labels_admitted(&guest.hostname, &machine.registration);
        let node = NewNode {
            name: guest.hostname.clone(),
            kubelet_version: version,
            role: machine.role,
            address: guest.address,
            ready: false,
            registration,
        };
        if let Some(refusal) = refusal {
            guest.say(refusal);
        }
        match backend.register_node(kubernetes, &node) {
            Ok(()) => {
                guest.registered = true;
                later.push(Later::TalosNodeReady {
                    cluster: kubernetes.to_owned(),
                    node: guest.hostname.clone(),
                    vmid: *vmid,
                });
            }
            Err(err) => guest.say(format!(
                "[talos] kubelet: {}",
                capstan_core::errors::error_chain(&err)
            )),
        }
    }
}

/// `registration` without the `machine.nodeLabels` of a worker when NodeRestriction forbids
/// one of them, and the console line that says so: Talos applies them in one update once the
/// Node exists, with the kubelet's credentials, and only logs the API server's refusal (the
/// Node registers all the same).
fn worker_labels_admitted(
    hostname: &str,
    registration: &Registration,
) -> (Registration, Option<String>) {
    let mut admitted = registration.clone();
    match crate::kube::node_restriction::admit_registration(hostname, &admitted.labels) {
        Ok(()) => (admitted, None),
        Err(refusal) => {
            admitted.labels = BTreeMap::new();
            (
                admitted,
                Some(format!("[talos] k8s.NodeApplyController: {refusal}")),
            )
        }
    }
}

/// `err` and its sources, `: `-joined.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
#[path = "talos_node_tests.rs"]
mod tests;
