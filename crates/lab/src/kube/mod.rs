//! Simulated Kubernetes API servers: one HTTPS server per cluster on loopback, each with its
//! own CA, serving certificate and admin credentials, speaking enough of the real API
//! (discovery, core/apps/policy/coordination resources, RBAC Roles stored but not enforced, selectors, resourceVersion conflicts,
//! merge and strategic merge patch, server-side apply with managedFields, watch, eviction with PodDisruptionBudgets, `Table`
//! printing, `Status` errors) that the stock `kubectl` and the kube crate work against it.
//!
//! A small set of simulated controllers (see `controllers`) gives Deployments and DaemonSets
//! their pods and re-creates evicted pods elsewhere, so drains meet real obstacles.
//!
//! [`KubeLab`] is the registry of a lab's clusters by name; `management` (where Flux runs) is
//! always there. [`SimCluster`] is one cluster's handle for the rest of the lab.

mod api;
mod api_servers;
mod apply;
mod cluster;
mod config;
mod controllers;
pub(crate) mod jwt;
pub mod network;
pub mod node_restriction;
mod patch;
mod protobuf;
mod resources;
mod selectors;
mod state;
mod status;
mod store;
mod subresources;
mod table;
mod tigera;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use cluster::{NewCluster, SimCluster};
pub use config::{
    MANAGEMENT, SimClusterConfig, SimDaemonSet, SimDeployment, SimNodeConfig, SimPod, SimTaint,
    SimWorkloads,
};
pub use state::Eviction;

use crate::clock::LabClock;
use crate::serve::ServeError;
use crate::tls::TlsError;

/// A simulated cluster could not be created or changed.
#[derive(Debug, thiserror::Error)]
pub enum SimKubeError {
    /// The cluster's certificates could not be issued.
    #[error("cannot issue certificates for simulated cluster {cluster}")]
    Certificates {
        /// Cluster name.
        cluster: String,
        /// The TLS setting that could not be loaded.
        #[source]
        source: TlsError,
    },
    /// The API server could not start.
    #[error("cannot start the API server of simulated cluster {cluster}")]
    Serve {
        /// Cluster name.
        cluster: String,
        /// Why the listener could not serve.
        #[source]
        source: ServeError,
    },
    /// The simulated API refused a change.
    #[error("simulated cluster {cluster} refused a change: {message}")]
    Write {
        /// Cluster name.
        cluster: String,
        /// The API's message.
        message: String,
    },
    /// No node of that name is registered.
    #[error("simulated cluster {cluster} has no node {node}")]
    UnknownNode {
        /// Cluster name.
        cluster: String,
        /// Node name.
        node: String,
    },
    /// A cluster of that name exists already.
    #[error("a simulated cluster named {cluster} exists already")]
    ClusterExists {
        /// Cluster name.
        cluster: String,
    },
    /// The kubeconfig file could not be written.
    #[error("cannot write kubeconfig {}", path.display())]
    WriteKubeconfig {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
}

/// The simulated clusters of one lab, by name.
#[derive(Debug)]
pub struct KubeLab {
    clock: LabClock,
    clusters: Mutex<BTreeMap<String, Arc<SimCluster>>>,
}

impl KubeLab {
    /// Starts the clusters `configs` declares, plus `management` with its default world when
    /// `configs` does not declare it.
    ///
    /// # Errors
    /// When a cluster cannot start or its nodes or workloads cannot be created.
    pub async fn start(
        clock: LabClock,
        configs: &BTreeMap<String, SimClusterConfig>,
    ) -> Result<Self, SimKubeError> {
        let lab = KubeLab {
            clock,
            clusters: Mutex::new(BTreeMap::new()),
        };
        if !configs.contains_key(MANAGEMENT) {
            lab.start_configured(MANAGEMENT, &SimClusterConfig::management_default())
                .await?;
        }
        for (name, config) in configs {
            lab.start_configured(name, config).await?;
        }
        Ok(lab)
    }

    /// Starts one cluster with its nodes and workloads, and registers it.
    ///
    /// # Errors
    /// When the name is taken, or the cluster cannot start.
    pub async fn start_configured(
        &self,
        name: &str,
        config: &SimClusterConfig,
    ) -> Result<Arc<SimCluster>, SimKubeError> {
        let cluster = self
            .create_cluster(&NewCluster {
                name: name.to_owned(),
                version: config.version.clone(),
                endpoint_host: config.endpoint_host.clone(),
                endpoint_port: config.endpoint_port,
                authority: None,
                network: None,
            })
            .await?;
        for node in &config.nodes {
            cluster.register_node(node)?;
        }
        cluster.add_workloads(&config.workloads)?;
        Ok(cluster)
    }

    /// Creates an empty cluster (no nodes yet: `kubeadm init` has just run) and registers it.
    ///
    /// # Errors
    /// When the name is taken, or the cluster cannot start.
    pub async fn create_cluster(&self, spec: &NewCluster) -> Result<Arc<SimCluster>, SimKubeError> {
        self.create_cluster_now(spec)
    }

    /// [`KubeLab::create_cluster`] for synchronous code inside a Tokio runtime (the lab's node
    /// software runs `kubeadm init` while it holds a lock): nothing in it waits.
    ///
    /// # Errors
    /// When the name is taken, or the cluster cannot start (also outside a runtime).
    pub fn create_cluster_now(&self, spec: &NewCluster) -> Result<Arc<SimCluster>, SimKubeError> {
        if self.cluster(&spec.name).is_some() {
            return Err(SimKubeError::ClusterExists {
                cluster: spec.name.clone(),
            });
        }
        let cluster = Arc::new(SimCluster::start_now(spec, self.clock.clone())?);
        let mut clusters = self.lock();
        if clusters.contains_key(&spec.name) {
            return Err(SimKubeError::ClusterExists {
                cluster: spec.name.clone(),
            });
        }
        clusters.insert(spec.name.clone(), cluster.clone());
        Ok(cluster)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<SimCluster>>> {
        self.clusters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The lab clock the clusters share (advance it to age certificates).
    pub fn clock(&self) -> &LabClock {
        &self.clock
    }

    /// A cluster by name.
    pub fn cluster(&self, name: &str) -> Option<Arc<SimCluster>> {
        self.lock().get(name).cloned()
    }

    /// The management cluster.
    pub fn management(&self) -> Option<Arc<SimCluster>> {
        self.cluster(MANAGEMENT)
    }

    /// The loopback address serving the cluster whose API endpoint is `host:port` (host
    /// compared without regard to case, as DNS does), if the lab has one.
    pub fn api_address(&self, host: &str, port: u16) -> Option<SocketAddr> {
        self.lock()
            .values()
            .find(|cluster| {
                cluster
                    .endpoint()
                    .is_some_and(|(h, p)| h.eq_ignore_ascii_case(host) && p == port)
            })
            .map(|cluster| cluster.local_addr())
    }

    /// Cluster names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// Stops a cluster's API server and forgets it. Returns whether it existed.
    pub fn remove_cluster(&self, name: &str) -> bool {
        let removed = self.lock().remove(name);
        if let Some(cluster) = &removed {
            cluster.stop();
        }
        removed.is_some()
    }

    /// Writes every cluster's admin kubeconfig into `dir` and returns the paths by cluster
    /// name (what lab.json lists as `clusters.<name>.kubeconfig`).
    ///
    /// # Errors
    /// When a file cannot be written.
    pub fn write_kubeconfigs(&self, dir: &Path) -> Result<BTreeMap<String, PathBuf>, SimKubeError> {
        let clusters: Vec<Arc<SimCluster>> = self.lock().values().cloned().collect();
        clusters
            .iter()
            .map(|c| Ok((c.name().to_owned(), c.write_kubeconfig(dir)?)))
            .collect()
    }
}
