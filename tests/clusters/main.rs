//! Belongs here: one cluster's side without the daemon: the lab's simulated API servers judged
//! by the stock kubectl and raw HTTP, capstan's node operations, drain and Flux delivery, its
//! kubeadm and K3s steps against the lab's node software, K3s datastores on a real MariaDB.
//!
//! The shared helpers are the test kit's (`capstan_testkit`, crates/testkit).

mod kube_support;
mod lab_support;

mod ca_pins;
mod flux_delivery;
mod k3s_datastore;
mod k3s_nodes;
mod kube_api;
mod kubeadm_nodes;
mod kubectl;
mod lab_cluster;
mod measure;
mod provider;
mod server_side_apply;
