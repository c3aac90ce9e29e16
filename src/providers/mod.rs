//! Providers: the only modules that talk to the outside world (Proxmox VE, Kubernetes API
//! servers, nodes, Git, Flux). Each sits behind a trait in domain verbs, so the executor never
//! sees HTTP or wire types and tests can drive it against the lab.

pub mod ca_pins;
pub mod cluster_secrets;
pub mod datastore;
pub mod flux;
pub mod k3s;
pub mod kube;
pub mod kubeadm;
pub mod node_exec;
pub mod proxmox;
pub mod talos;
