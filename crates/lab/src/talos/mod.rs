//! Talos nodes' network side in the lab: each node's Talos API (`api`, gRPC over mutual TLS,
//! as apid serves it) and each cluster's simulated etcd (`etcd`) that the control planes'
//! APIs share. Other lab code (Talos VMs) starts one [`TalosNodeApi`] per node and lists where
//! it serves in [`TalosApis`].

pub mod api;
pub mod etcd;
mod resources;
mod roles;

pub use api::{EtcdChanged, OsCa, TalosApiError, TalosNode, TalosNodeApi};
pub use etcd::{EtcdCluster, EtcdError, EtcdMember};
pub use roles::{ADMIN_ROLE, PeerRoles};

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

/// The port Talos serves its API on (what capstan dials a node's address with).
pub const TALOS_API_PORT: u16 = 50000;

/// Where the lab serves each Talos node's API: `<node address>:50000`, the address capstan
/// dials on a real network (its guest agent reports the node's address), to a loopback
/// address of the lab's. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct TalosApis(Arc<Mutex<BTreeMap<String, SocketAddr>>>);

impl TalosApis {
    /// The Talos API of the node at `node` is served at `served` (`None`: no longer).
    pub fn set(&self, node: IpAddr, served: Option<SocketAddr>) {
        let key = SocketAddr::new(node, TALOS_API_PORT).to_string();
        let mut apis = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match served {
            Some(served) => apis.insert(key, served),
            None => apis.remove(&key),
        };
    }

    /// Where the lab serves `host:port`, if it is a Talos API it serves.
    pub fn resolve(&self, host: &str, port: u16) -> Option<SocketAddr> {
        let host: IpAddr = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .ok()?;
        let key = SocketAddr::new(host, port).to_string();
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .copied()
    }

    /// Every served Talos API: `<node address>:50000` → its loopback address.
    pub fn listed(&self) -> BTreeMap<String, SocketAddr> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
