//! The clusters' side: the lab's simulated API servers judged by the stock kubectl and raw
//! HTTP, capstan's node operations and drain, Flux delivery, and capstan's kubeadm steps run
//! against the lab's node software.

#[path = "../support/judges.rs"]
mod judges;
mod kube_support;
mod lab_support;

mod flux_delivery;
mod kube_api;
mod kubeadm_nodes;
mod kubectl;
mod lab_cluster;
mod measure;
mod provider;
mod server_side_apply;
