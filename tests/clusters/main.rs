//! The clusters' side: the lab's simulated API servers judged by the stock kubectl and raw
//! HTTP, capstan's node operations and drain, Flux delivery, and capstan's kubeadm steps run
//! against the lab's node software, and K3s datastores on a real MariaDB.

#[path = "../support/judges.rs"]
mod judges;
mod kube_support;
mod lab_support;
#[path = "../support/mariadb.rs"]
mod mariadb;

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
