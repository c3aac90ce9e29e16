//! The admin kubeconfig of each cluster, kept between passes so a converged pass reads none
//! through a guest agent. It is read again when the kubeconfig is refused (401, a TLS
//! certificate failure), when the control plane it was read from is no longer a running,
//! non-retiring control plane (a replaced control plane), and after the steps that change it
//! (`forget`, which the daemon calls after init, certificate renewal and control-plane
//! upgrades). Only admitted kubeconfigs are kept (reduced, server and CA pinned). Kept in
//! memory only; its `Debug` shows keyed fingerprints, never the kubeconfig.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::model::Role;
use crate::observed::RETIRING_TAG;
use crate::providers::kube::AdminKubeconfig;
use crate::providers::node_exec::NodeTarget;
use crate::providers::proxmox::{PowerState, VmInfo};

/// One cluster's admitted admin kubeconfig and the control plane it was read from.
#[derive(Debug, Clone)]
pub(super) struct CachedAdmin {
    pub kubeconfig: AdminKubeconfig,
    pub read_from: NodeTarget,
}

/// The cached admin kubeconfigs, by cluster.
#[derive(Debug, Default)]
pub(super) struct AdminCache {
    clusters: Mutex<BTreeMap<String, CachedAdmin>>,
}

impl AdminCache {
    /// The cached kubeconfig of `cluster`, while the VM it was read from is still one of the
    /// cluster's running, non-retiring control planes among `vms`.
    pub fn get(&self, cluster: &str, vms: &[VmInfo]) -> Option<CachedAdmin> {
        let mut clusters = self.lock();
        let cached = clusters.get(cluster)?;
        let still_there = vms.iter().any(|vm| {
            vm.vmid == cached.read_from.vmid
                && vm.node.0 == cached.read_from.proxmox_node
                && vm.power == PowerState::Running
                && !vm.tags.iter().any(|tag| tag == RETIRING_TAG)
                && vm
                    .owner
                    .as_ref()
                    .is_some_and(|o| o.ownership.role == Role::ControlPlane)
        });
        if still_there {
            return Some(cached.clone());
        }
        tracing::debug!(
            cluster,
            "the control plane the admin kubeconfig came from is gone; reading it again"
        );
        clusters.remove(cluster);
        None
    }

    /// Keeps what was just read.
    pub fn put(&self, cluster: &str, admin: CachedAdmin) {
        self.lock().insert(cluster.to_owned(), admin);
    }

    /// Drops the cached kubeconfig of `cluster`: the next pass reads it again.
    pub fn forget(&self, cluster: &str) {
        if let Some(admin) = self.lock().remove(cluster) {
            tracing::debug!(
                cluster,
                kubeconfig = %admin.kubeconfig.fingerprint(),
                "admin kubeconfig forgotten"
            );
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, CachedAdmin>> {
        self.clusters.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
