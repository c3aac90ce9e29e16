//! Providers → [`Observed`]: what really exists, read fresh on every pass.
//!
//! Per Proxmox connection one inventory (one listing, whatever the VM count, plus one config
//! read per template the first time it is seen: where its volumes are); per cluster the
//! admin kubeconfig (kept between passes by [`admin`], read from a control plane through the
//! guest agent only when it is missing, refused or replaced), then its Nodes, its
//! `kubeadm-config` and its version through the API; per Flux target the fingerprint Flux holds,
//! and per management cluster two listings of the Secrets capstan manages: the Flux
//! kubeconfigs and every record by its cluster (how what a cluster whose file is gone left is
//! found, to be deleted with it).
//! Per-VM calls happen only where they matter: a guest-agent ping for a VM whose Node is not
//! Ready (a machine waiting to join, or one that may need fencing).
//! Pods and PodDisruptionBudgets (previews' drain simulation) are read only when
//! [`ObserveSettings::workloads`] asks for them: two list calls per cluster.
//!
//! # Guarantees
//! - A cluster whose observation failed is reported in [`Observation::failed`] and left out of
//!   `observed`, so nothing is planned for it from partial facts. A removed cluster counts as
//!   failed while some management cluster cannot list its Secrets.
//! - Secrets stay out of [`Observed`] (fingerprints only); the admin kubeconfigs the executor
//!   needs travel in [`ClusterAccess`], whose `Debug` hides them.

mod admin;
mod guest;
mod hardware;
mod management;
mod network;
mod nodes;
mod sessions;
mod talos;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;

use futures_util::StreamExt as _;
use jiff::Timestamp;

use crate::connect::Providers;
use crate::execute::distribution::{self, AdminSource, Distribution as _, VersionSource};
use crate::model::NodeName;
use crate::observed::{
    BOOTSTRAP_MARKER, DRAIN_STARTED_ANNOTATION, DrainObserved, FluxSecret, FluxTarget, Observed,
    ObservedCluster, ObservedControlPlane, ObservedMachine, ObservedTemplate, PodRef, PowerState,
    ProxmoxNode, VmConfig,
};
use crate::providers::kube::{AdminKubeconfig, ClusterClient, NodeState};
use crate::providers::proxmox::{self, ProxmoxProvider, VmInfo};
use crate::records::flux::{self, KubeconfigDelivery};
use crate::spec::{Cluster, Desired, Endpoint, KubeVersion, RecordedNetwork};
use guest::{mark_guest_agents, read_admin_kubeconfig, read_built_from};
use nodes::{observed_node, servers_version};
use talos::talos_admin_kubeconfig;

/// How many clusters one pass observes at the same time.
const CLUSTERS_OBSERVED_AT_ONCE: usize = 8;
const GIB: u64 = 1024 * 1024 * 1024;
const MIB: u64 = 1024 * 1024;

/// Why one cluster could not be observed (nothing is planned for it this pass).
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// A control plane's VM offered an admin kubeconfig capstan refuses.
    #[error("the admin kubeconfig read from {} (VM {}) is refused", vm.name, vm.vmid)]
    AdminKubeconfigRefused {
        /// The VM it was read from.
        vm: Box<crate::providers::node_exec::NodeTarget>,
        /// Why it was refused.
        #[source]
        source: crate::connect::AdmitError,
    },
    /// The management cluster holding the cluster's Flux kubeconfig Secret could not be read.
    #[error("management cluster `{cluster}`")]
    FluxDelivery {
        /// The management cluster's name.
        cluster: String,
        /// Why its Secret could not be read.
        #[source]
        source: flux::FluxError,
    },
}

/// What one pass observed.
#[derive(Debug, Default)]
pub struct Observation {
    /// The facts the planner reads.
    pub observed: Observed,
    /// How to act on each cluster (its Proxmox connection, its admin kubeconfig).
    pub access: BTreeMap<String, ClusterAccess>,
    /// Clusters that could not be observed, with why: nothing is planned for them this pass.
    pub failed: BTreeMap<String, String>,
    /// Guest-agent requests made through the Proxmox connections while this pass observed
    /// (a step running meanwhile counts too).
    pub guest_agent_calls: u64,
    /// Guest-agent requests made through the Proxmox connections since they were opened.
    pub guest_agent_calls_total: u64,
}

pub use crate::execute::ClusterAccess;

/// What an observation reads beyond what the planner needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObserveSettings {
    /// Every pod (by node) and every PodDisruptionBudget of each cluster whose API answers,
    /// for previews' drain simulation: one list of each per cluster. Off by default, so an
    /// ordinary pass pays nothing for it.
    pub workloads: bool,
}

/// Observes the world through `Pr`, remembering across passes only since when an API has
/// been unreachable and what its control plane looked like last (to plan while it is down).
pub struct Observer<Pr: Providers> {
    providers: std::sync::Arc<Pr>,
    memory: Mutex<BTreeMap<String, ObservedControlPlane>>,
    settings: ObserveSettings,
    admins: admin::AdminCache,
    sessions: sessions::Sessions<Pr::Cluster>,
}

impl<Pr: Providers> Observer<Pr> {
    /// An observer over `providers`.
    pub fn new(providers: std::sync::Arc<Pr>) -> Self {
        Observer {
            providers,
            memory: Mutex::new(BTreeMap::new()),
            settings: ObserveSettings::default(),
            admins: admin::AdminCache::default(),
            sessions: sessions::Sessions::default(),
        }
    }

    /// What the next observations read beyond what the planner needs.
    pub fn set_settings(&mut self, settings: ObserveSettings) {
        self.settings = settings;
    }

    /// The settings in force.
    pub fn settings(&self) -> ObserveSettings {
        self.settings
    }

    /// Forgets the admin kubeconfig kept for `cluster`: the next pass reads it again from a
    /// control plane. Called after the steps that change it (init, certificate renewal,
    /// control-plane upgrade).
    pub fn forget_admin(&self, cluster: &str) {
        self.admins.forget(cluster);
        self.sessions.drop_session(cluster);
    }

    /// Guest-agent requests made so far through every Proxmox connection.
    fn guest_agent_calls(&self) -> u64 {
        self.providers
            .proxmox_connections()
            .into_iter()
            .filter_map(|connection| self.providers.proxmox(connection))
            .map(ProxmoxProvider::guest_agent_calls)
            .sum()
    }

    /// Observes every cluster `desired` declares and every cluster that still owns VMs.
    pub async fn observe(&self, desired: &Desired, now: Timestamp) -> Observation {
        let agent_calls_before = self.guest_agent_calls();
        let mut observation = Observation::default();
        let mut proxmox_nodes = BTreeMap::new();
        let mut templates: BTreeMap<String, Vec<ObservedTemplate>> = BTreeMap::new();
        let mut storages = BTreeMap::new();
        let mut machines: BTreeMap<String, (String, Vec<VmInfo>)> = BTreeMap::new();
        let mut unreachable_connections = BTreeMap::new();
        let mut offered = hardware::Offered::default();
        for connection in self.providers.proxmox_connections() {
            let Some(client) = self.providers.proxmox(connection) else {
                continue;
            };
            match client.inventory().await {
                Ok(inventory) => {
                    let proxmox = hardware::Proxmox {
                        storages: &mut storages,
                        nodes: &mut proxmox_nodes,
                        templates: &mut templates,
                        offered: &mut offered,
                    };
                    hardware::add_connection(client, desired, connection, &inventory, proxmox)
                        .await;
                    for vm in inventory.vms.into_iter().filter(|vm| !vm.is_template) {
                        if let Some(owner) = &vm.owner {
                            let cluster = owner.ownership.cluster.clone();
                            let entry = machines
                                .entry(cluster.to_string())
                                .or_insert_with(|| (connection.to_owned(), Vec::new()));
                            entry.1.push(vm);
                        }
                    }
                }
                Err(err) => {
                    unreachable_connections
                        .insert(connection.to_owned(), crate::errors::error_chain(&err));
                }
            }
        }
        observation.observed.proxmox_nodes = Some(proxmox_nodes);
        observation.observed.proxmox_templates = Some(templates);
        observation.observed.proxmox_storages = Some(storages);
        offered.record(&mut observation.observed);
        let (held, unlisted) = self.held_secrets(desired).await;
        let (mut records, unlisted_records) = self.records(desired).await;
        let unlisted = unlisted.or(unlisted_records);

        let mut names: Vec<String> = desired.clusters.keys().cloned().collect();
        let removed: std::collections::BTreeSet<&String> = machines
            .keys()
            .chain(held.keys())
            .chain(records.keys())
            .filter(|n| !desired.clusters.contains_key(*n))
            .collect();
        names.extend(removed.into_iter().cloned());
        let mut pending = Vec::new();
        for name in names {
            let cluster = desired.clusters.get(&name);
            let (connection, vms) = machines.remove(&name).unwrap_or_else(|| {
                (
                    cluster.map(|c| c.spec.proxmox.clone()).unwrap_or_default(),
                    Vec::new(),
                )
            });
            if let Some(reason) = unreachable_connections.get(&connection) {
                let reason = format!("Proxmox connection `{connection}` did not answer: {reason}");
                observation.failed.insert(name, reason);
                continue;
            }
            if cluster.is_none()
                && let Some(reason) = &unlisted
            {
                // Where its kubeconfig went is unknown: deleting it now could leave the Secret.
                observation.failed.insert(name, reason.clone());
                continue;
            }
            let held = held.get(&name).and_then(|secrets| secrets.first()).cloned();
            let kept = records.remove(&name).unwrap_or_default();
            pending.push((name, cluster, connection, vms, (held, kept)));
        }
        // Clusters are independent: observe a few at once (each waits mostly on guest agents
        // and API servers), in a bounded number so a large fleet does not flood Proxmox.
        let observations = pending.into_iter().map(
            |(name, cluster, connection, vms, (held, kept))| async move {
                let result = self
                    .observe_cluster(&name, cluster, &connection, &vms, held, now)
                    .await
                    .map(|(mut observed, access)| {
                        observed.records = kept;
                        (observed, access)
                    });
                (name, result)
            },
        );
        let results: Vec<_> = futures_util::stream::iter(observations.collect::<Vec<_>>())
            .buffer_unordered(CLUSTERS_OBSERVED_AT_ONCE)
            .collect()
            .await;
        for (name, result) in results {
            match result {
                Ok((observed, mut access)) => {
                    if !observed.is_empty() {
                        observation.observed.clusters.insert(name.clone(), observed);
                    }
                    let connection = desired.fleet.proxmox.get(&access.connection);
                    access.iso_storage =
                        connection.and_then(|connection| connection.iso_storage.clone());
                    access.create_pools = connection.is_some_and(|c| c.create_pools);
                    observation.access.insert(name, access);
                }
                Err(err) => {
                    observation
                        .failed
                        .insert(name, crate::errors::error_chain(&err));
                }
            }
        }
        self.sessions
            .retain(|cluster| observation.observed.clusters.contains_key(cluster));
        observation.guest_agent_calls_total = self.guest_agent_calls();
        observation.guest_agent_calls = observation
            .guest_agent_calls_total
            .saturating_sub(agent_calls_before);
        observation
    }

    /// One cluster; `held` is the Flux Secret found for it by listing, which is how a
    /// cluster whose file is gone has its Secret found.
    async fn observe_cluster(
        &self,
        name: &str,
        cluster: Option<&Cluster>,
        connection: &str,
        vms: &[VmInfo],
        held: Option<FluxSecret>,
        now: Timestamp,
    ) -> Result<(ObservedCluster, ClusterAccess), ObserveError> {
        let mut observed = ObservedCluster::default();
        for vm in vms {
            if let Some(machine) = observed_machine(vm, now) {
                observed
                    .machines
                    .insert(NodeName(vm.name.as_str().into()), machine);
            }
        }
        let mut access = ClusterAccess {
            connection: connection.to_owned(),
            ..ClusterAccess::default()
        };
        let client = self.providers.proxmox(connection);
        let mut admin = self.admins.get(name, vms);
        let cached = admin.is_some();
        // A removed cluster's API is not needed to delete it, and without its file there is
        // no declared endpoint to hold a kubeconfig from its VMs to.
        let readable = client.zip(cluster);
        if admin.is_none()
            && let Some((client, cluster)) = readable
        {
            admin = self.read_admin(name, cluster, client, vms).await?;
        }
        if let Some(found) = &admin {
            let refused = self
                .observe_api(name, cluster, &found.kubeconfig, &mut observed, now)
                .await;
            // A kept kubeconfig the server refuses was replaced on the nodes: read it again.
            if refused && cached {
                self.admins.forget(name);
                admin = match readable {
                    Some((client, cluster)) => self.read_admin(name, cluster, client, vms).await?,
                    None => None,
                };
                if let Some(fresh) = &admin {
                    self.observe_api(name, cluster, &fresh.kubeconfig, &mut observed, now)
                        .await;
                }
            }
        }
        if let Some(admin) = admin {
            access.read_from = Some(admin.read_from);
            access.kubeconfig = Some(admin.kubeconfig);
        }
        let api_down = observed
            .control_plane
            .as_ref()
            .is_some_and(|cp| cp.unreachable_since.is_some());
        if api_down && let Some(cluster) = cluster {
            access.api_down_because = distribution::of(Some(&cluster.spec))
                .unreachable_because(&*self.providers, name, &cluster.spec)
                .await;
        }
        if let Some(client) = client {
            mark_guest_agents(client, vms, &mut observed).await;
            if let Some(cluster) = cluster {
                read_built_from(client, &cluster.spec, vms, &mut observed).await;
                hardware::machine_configs(client, &cluster.spec, vms, &mut observed).await;
            }
        }
        observed.flux = match cluster {
            Some(cluster) => self.observe_flux(name, cluster).await?,
            None => held,
        };
        Ok((observed, access))
    }

    /// Reads the admin kubeconfig from a control plane through its guest agent, admits it
    /// and keeps it. `Ok(None)` when no control plane gave one; a refused one fails the
    /// cluster's observation with why: nothing is planned on a cluster whose VM offered a
    /// hostile kubeconfig until an operator looks.
    async fn read_admin(
        &self,
        name: &str,
        cluster: &Cluster,
        client: &Pr::Proxmox,
        vms: &[VmInfo],
    ) -> Result<Option<admin::CachedAdmin>, ObserveError> {
        let found = match distribution::of(Some(&cluster.spec)).admin_kubeconfig_source() {
            AdminSource::Node(read) => read_admin_kubeconfig(client, vms, &read).await,
            AdminSource::Bundle => {
                talos_admin_kubeconfig(&*self.providers, name, cluster, vms).await
            }
        };
        let Some((read_from, text)) = found else {
            return Ok(None);
        };
        let kubeconfig = self
            .providers
            .admit_kubeconfig(name, &cluster.spec, &text)
            .await
            .map_err(|source| {
                let err = ObserveError::AdminKubeconfigRefused {
                    vm: Box::new(read_from.clone()),
                    source,
                };
                let reason = crate::errors::error_chain(&err);
                tracing::warn!(cluster = name, vm = %read_from.vmid, reason = %reason, "admin kubeconfig refused");
                err
            })?;
        let admin = admin::CachedAdmin {
            kubeconfig,
            read_from,
        };
        self.admins.put(name, admin.clone());
        Ok(Some(admin))
    }

    /// Nodes, version, endpoint and certificate facts through the cluster's API. Returns
    /// whether the server refused the kubeconfig's credentials.
    async fn observe_api(
        &self,
        name: &str,
        cluster: Option<&Cluster>,
        kubeconfig: &AdminKubeconfig,
        observed: &mut ObservedCluster,
        now: Timestamp,
    ) -> bool {
        let remembered = self.remembered(name);
        let mut control_plane = ObservedControlPlane {
            endpoint: remembered
                .as_ref()
                .map(|cp| cp.endpoint.clone())
                .or_else(|| cluster.map(|c| c.spec.endpoint.clone()))
                .unwrap_or_else(|| Endpoint {
                    host: String::new(),
                    address: IpAddr::from([0, 0, 0, 0]),
                    port: 6443,
                }),
            version: remembered
                .as_ref()
                .map(|cp| cp.version)
                .or_else(|| cluster.map(|c| c.spec.kubernetes.version))
                .unwrap_or(KubeVersion {
                    major: 1,
                    minor: 0,
                    patch: 0,
                    k3s_release: None,
                }),
            unreachable_since: None,
            certificates_expire: None,
            admin_kubeconfig: None,
            bootstrap_incomplete: remembered
                .as_ref()
                .is_some_and(|cp| cp.bootstrap_incomplete),
            network: remembered.as_ref().and_then(|cp| cp.network),
            api_service_address: remembered.as_ref().and_then(|cp| cp.api_service_address),
        };
        let mut refused = false;
        let session = match self.sessions.get(name, kubeconfig) {
            Some(session) => Some(session),
            None => match self.providers.connect_cluster(kubeconfig).await {
                Ok(client) => Some(
                    self.sessions
                        .keep(name, sessions::Session::new(kubeconfig, client)),
                ),
                Err(err) => {
                    tracing::debug!(cluster = name, error = %err, "cannot build a client from the admin kubeconfig");
                    refused = err.is_credentials_refused();
                    None
                }
            },
        };
        control_plane.certificates_expire = kubeconfig.client_certificate_expiry();
        control_plane.admin_kubeconfig = Some(kubeconfig.fingerprint().to_owned());
        let nodes = match &session {
            Some(session) => match session.client.nodes().await {
                Ok(nodes) => Some(nodes),
                Err(err) => {
                    // A fresh client next time: the connection may be what failed.
                    self.sessions.drop_session(name);
                    refused = err.is_credentials_refused();
                    None
                }
            },
            None => None,
        };
        match (session, nodes) {
            (Some(session), Some(nodes)) => {
                let api = &session.client;
                let mut configured = RecordedNetwork::default();
                match distribution::of(cluster.map(|c| &c.spec)).version_source() {
                    VersionSource::ClusterConfiguration => {
                        if let Ok(Some(config)) =
                            api.config_map("kube-system", "kubeadm-config").await
                            && let Some((endpoint, version, networking)) = config
                                .get("ClusterConfiguration")
                                .and_then(|text| session.cluster_configuration(text))
                        {
                            configured = networking;
                            control_plane.endpoint = Endpoint {
                                address: endpoint
                                    .address
                                    .or(cluster.map(|c| c.spec.endpoint.address))
                                    .unwrap_or(control_plane.endpoint.address),
                                host: endpoint.host,
                                port: endpoint.port,
                            };
                            control_plane.version = version;
                        }
                    }
                    VersionSource::ServerKubelets => {
                        if let Some(version) = servers_version(&nodes, observed) {
                            control_plane.version = version;
                        }
                    }
                }
                let (namespace, marker) = BOOTSTRAP_MARKER;
                let marker = api.config_map(namespace, marker).await;
                control_plane.bootstrap_incomplete = matches!(marker, Ok(None));
                let marker = marker.ok().flatten();
                control_plane.network = network::running(marker.as_ref(), configured, cluster);
                control_plane.api_service_address = network::api_service_address(api, name).await;
                for node in nodes {
                    let drain = self.observe_drain(api, &node).await;
                    observed
                        .nodes
                        .insert(node.name.clone(), observed_node(&node, drain, now));
                }
                if self.settings.workloads {
                    observe_workloads(name, api, observed).await;
                }
            }
            _ => {
                control_plane.unreachable_since = Some(
                    remembered
                        .and_then(|cp| cp.unreachable_since)
                        .unwrap_or(now),
                );
            }
        }
        self.remember(name, &control_plane);
        observed.control_plane = Some(control_plane);
        refused
    }

    async fn observe_drain(&self, api: &Pr::Cluster, node: &NodeState) -> Option<DrainObserved> {
        let started = node
            .annotations
            .get(DRAIN_STARTED_ANNOTATION)?
            .parse::<Timestamp>()
            .ok()?;
        let reasons: BTreeMap<String, String> = api
            .drain_blockers(&node.name)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|blocker| (blocker.pod.to_string(), blocker.reason))
            .collect();
        let remaining_pods = api
            .pods_to_move(&node.name)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|pod| PodRef {
                reason: reasons.get(&pod.to_string()).cloned(),
                namespace: pod.namespace,
                name: pod.name,
            })
            .collect();
        Some(DrainObserved {
            started,
            remaining_pods,
        })
    }

    async fn observe_flux(
        &self,
        name: &str,
        cluster: &Cluster,
    ) -> Result<Option<FluxSecret>, ObserveError> {
        let Some(delivery) = &cluster.spec.delivery.flux else {
            return Ok(None);
        };
        let Some(deliverer) = self.providers.flux(&delivery.cluster) else {
            return Ok(None);
        };
        let target = flux::FluxTarget::new(name, delivery);
        let delivered =
            deliverer
                .delivered(&target)
                .await
                .map_err(|source| ObserveError::FluxDelivery {
                    cluster: delivery.cluster.clone(),
                    source,
                })?;
        Ok(delivered.map(|held| FluxSecret {
            target: FluxTarget {
                cluster: delivery.cluster.clone(),
                namespace: target.namespace,
                secret_name: target.secret_name,
            },
            kubeconfig: held.fingerprint,
        }))
    }

    fn remembered(&self, name: &str) -> Option<ObservedControlPlane> {
        self.memory
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    fn remember(&self, name: &str, control_plane: &ObservedControlPlane) {
        let mut memory = self
            .memory
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        memory.insert(name.to_owned(), control_plane.clone());
    }
}

/// Pods and budgets for drain simulation. A failure leaves them out (no drain is simulated
/// for the cluster) without failing its observation: the planner does not read them.
async fn observe_workloads(name: &str, api: &impl ClusterClient, observed: &mut ObservedCluster) {
    match api.workloads().await {
        Ok(workloads) => {
            observed.pods = workloads.pods;
            observed.disruption_budgets = workloads.budgets;
        }
        Err(err) => {
            tracing::debug!(cluster = name, error = %crate::errors::error_chain(&err), "pods and PodDisruptionBudgets not observed: no drain simulation for this cluster");
        }
    }
}

pub(super) fn proxmox_node(host: &proxmox::HostInfo, vms: &[VmInfo]) -> ProxmoxNode {
    ProxmoxNode {
        online: host.online,
        memory_total_mib: host.memory_capacity_bytes / MIB,
        memory_used_mib: host.memory_used_bytes / MIB,
        vm_count: u32::try_from(
            vms.iter()
                .filter(|vm| vm.node == host.name && !vm.is_template)
                .count(),
        )
        .unwrap_or(u32::MAX),
        bridges: None,
    }
}

/// A template copy; it is on shared storage when every volume is on a storage flagged shared,
/// and built for the distributions its tags or description name.
pub(super) fn observed_template(
    template: &proxmox::TemplateInfo,
    storages: &BTreeMap<String, bool>,
) -> ObservedTemplate {
    ObservedTemplate {
        proxmox_node: template.vm.node.0.clone(),
        vm_id: template.vm.vmid,
        shared_storage: template
            .storages
            .iter()
            .all(|storage| storages.get(storage).copied().unwrap_or(false)),
        distributions: ObservedTemplate::declared_distributions(
            template.tags.iter().map(String::as_str),
            &template.description,
        ),
        memory_hotplug: template.memory_hotplug,
        without_cloud_init_drive: !template.cloud_init_drive,
    }
}

fn observed_machine(vm: &VmInfo, now: Timestamp) -> Option<ObservedMachine> {
    let owner = vm.owner.as_ref()?;
    Some(ObservedMachine {
        vm_id: vm.vmid,
        proxmox_node: vm.node.0.as_str().into(),
        ownership: owner.ownership.clone(),
        tags: vm.tags.iter().map(|t| t.as_str().into()).collect(),
        power: match vm.power {
            proxmox::PowerState::Running => PowerState::Running,
            proxmox::PowerState::Stopped | proxmox::PowerState::Unknown => PowerState::Stopped,
        },
        // A VM untagged by a crash and without a description date is treated as just made,
        // so it gets its full join timeout rather than being destroyed at once.
        created: owner.created.unwrap_or(now),
        guest_agent: false,
        built_from: None,
        config: Some(VmConfig {
            cores: vm.cores,
            memory_mib: u32::try_from(vm.memory_mib).unwrap_or(u32::MAX),
            disk_gib: u32::try_from(vm.disk_bytes / GIB).unwrap_or(u32::MAX),
            hardware: None,
        }),
        task: None,
        pool: vm.pool.as_deref().map(Into::into),
        recorded_tags: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::kube::KubeconfigRefused;
    use crate::providers::node_exec::NodeTarget;

    #[test]
    fn a_refused_admin_kubeconfig_names_the_vm_and_then_why_once() {
        let err = ObserveError::AdminKubeconfigRefused {
            vm: Box::new(NodeTarget {
                vmid: crate::model::VmId(201),
                proxmox_node: "pve1".into(),
                name: NodeName("prod-cp-1".into()),
            }),
            source: KubeconfigRefused::TooLarge { bytes: 1 << 30 }.into(),
        };
        let chain = crate::errors::error_chain(&err);
        assert!(
            chain.starts_with("the admin kubeconfig read from prod-cp-1 (VM 201) is refused: it is 1073741824 bytes"),
            "{chain}"
        );
        assert_eq!(chain.matches("1073741824").count(), 1, "{chain}");
    }
}
