//! Providers: the only modules that talk to the outside world (Proxmox VE, Kubernetes API
//! servers, nodes, datastores, the Talos API). Each sits behind a trait in domain verbs, so the
//! executor never sees HTTP or wire types and tests can drive it against the lab. What capstan
//! keeps in the management cluster (Flux kubeconfigs, CA pins, cluster secrets) is
//! the records module (`src/records/`), built on the Kubernetes client here.

pub mod datastore;
pub mod k3s;
pub mod kube;
pub mod kubeadm;
pub mod node_exec;
pub mod proxmox;
pub mod talos;
