//! Providers: how capstan reaches the world. One trait per provider, in domain verbs over our
//! types; the executor is generic over them, and the lab implements the same wire protocols so
//! the real providers are tested against it.

pub mod kubeadm;
pub mod node_exec;
