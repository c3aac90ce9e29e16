//! The shared state of one simulated cluster: its store, served version, issued tokens and
//! clock. The HTTP handlers and the lab's Rust API both go through it.
//!
//! Invariant: every change to the store is followed by [`controllers::reconcile`] under the
//! same lock, so readers always see a settled cluster.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use jiff::Timestamp;

use super::controllers;
use super::network::ClusterNetwork;
use super::store::Store;
use crate::clock::{Clock as _, LabClock};

/// Who a request authenticated as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    /// User name.
    pub name: String,
    /// Groups.
    pub groups: Vec<String>,
}

impl User {
    /// Members of these groups may do everything (kubeadm's admin groups).
    pub fn is_admin(&self) -> bool {
        self.groups
            .iter()
            .any(|g| g == "system:masters" || g == "kubeadm:cluster-admins")
    }
}

/// Mutable parts of a cluster, behind one lock.
pub(crate) struct Inner {
    /// The objects.
    pub store: Store,
    /// What `/version` reports as `gitVersion`.
    pub git_version: String,
    /// Bearer tokens issued by the lab, and whom they name.
    pub tokens: BTreeMap<String, User>,
    /// Bearer tokens whose requests are never answered (a network partition between that
    /// client and the server; see `SimCluster::partition_token`).
    pub partitioned: std::collections::BTreeSet<String>,
    /// Every eviction request, in the order answered (the part of an API server's audit log
    /// that tests read to prove drains never overlap).
    pub evictions: Vec<Eviction>,
    /// Why the cluster's storage does not answer (K3s whose datastore went away): every
    /// request gets a 503 with this message until it is cleared.
    pub storage_unavailable: Option<String>,
    /// How the control plane and the kubelets were configured to network.
    pub network: ClusterNetwork,
    /// The API servers running on the control planes, each with the JWT issuers of the
    /// `AuthenticationConfiguration` it started with.
    pub api_servers: super::api_servers::ApiServers,
}

/// One audited `POST pods/<name>/eviction`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction {
    /// When the server answered (lab clock).
    pub at: Timestamp,
    /// `namespace/name` of the pod.
    pub pod: String,
    /// The node the pod ran on (empty when the pod was unknown or unscheduled).
    pub node: String,
    /// The HTTP status answered: 201 evicted, 429 refused by a PodDisruptionBudget, 404 gone.
    pub status: u16,
    /// Whether it was a dry run (nothing deleted).
    pub dry_run: bool,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Tokens are credentials: only their number shows.
        f.debug_struct("Inner")
            .field("store", &self.store)
            .field("git_version", &self.git_version)
            .field("tokens", &self.tokens.len())
            .field("partitioned", &self.partitioned.len())
            .field("evictions", &self.evictions.len())
            .field("storage_unavailable", &self.storage_unavailable)
            .field("network", &self.network)
            .field("api_servers", &self.api_servers)
            .finish()
    }
}

/// One simulated cluster's state.
#[derive(Debug)]
pub(crate) struct ClusterState {
    /// The cluster's name.
    pub name: String,
    /// The lab clock.
    pub clock: LabClock,
    inner: Mutex<Inner>,
    /// `127.0.0.1:PORT`, once the server listens.
    pub address: OnceLock<String>,
}

impl ClusterState {
    /// A cluster with an empty store.
    pub fn new(name: &str, git_version: &str, clock: LabClock) -> Self {
        ClusterState {
            name: name.to_owned(),
            clock,
            inner: Mutex::new(Inner {
                store: Store::default(),
                git_version: git_version.to_owned(),
                tokens: BTreeMap::new(),
                partitioned: std::collections::BTreeSet::new(),
                evictions: Vec::new(),
                storage_unavailable: None,
                network: ClusterNetwork::lab_default(),
                api_servers: super::api_servers::ApiServers::default(),
            }),
            address: OnceLock::new(),
        }
    }

    /// The lab's now.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Locks the state. A panic while holding the lock leaves the data usable (each write is
    /// one map operation), so poisoning is ignored.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The CustomResourceDefinitions that exist: the custom resources served now.
    pub fn defined(&self) -> super::resources::Defined {
        self.lock()
            .store
            .list("customresourcedefinitions", None)
            .iter()
            .filter_map(|crd| crd["metadata"]["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// Runs `change` on the store, then the controllers.
    pub fn change<T>(&self, change: impl FnOnce(&mut Store, Timestamp) -> T) -> T {
        let now = self.now();
        let mut inner = self.lock();
        let result = change(&mut inner.store, now);
        let Inner { store, network, .. } = &mut *inner;
        controllers::reconcile(store, network, now);
        result
    }
}
