//! Talos nodes' network side in the lab: each node's Talos API (`api`, gRPC over mutual TLS,
//! as apid serves it) and each cluster's simulated etcd (`etcd`) that the control planes'
//! APIs share. Other lab code (Talos VMs) starts one [`TalosNodeApi`] per node.

pub mod api;
pub mod etcd;

pub use api::{ADMIN_ROLE, OsCa, PeerRoles, TalosApiError, TalosNode, TalosNodeApi};
pub use etcd::{EtcdCluster, EtcdError, EtcdMember};
