//! How each distribution names the operations that steps' reasons mention: a K3s cluster's
//! plan speaks of K3s servers, not of kubeadm.

use crate::spec::{Distribution, KubeVersion};

/// A distribution's names for its operations.
pub(super) struct Words {
    /// What starts the first control plane.
    pub init: &'static str,
    /// What undoes a node before its VM shuts down.
    pub reset: &'static str,
    k3s: bool,
}

impl Words {
    pub(super) fn of(distribution: Distribution) -> Self {
        match distribution {
            Distribution::Kubeadm => Words {
                init: "kubeadm init",
                reset: "kubeadm reset",
                k3s: false,
            },
            Distribution::K3s => Words {
                init: "start the K3s server",
                reset: "K3s uninstall",
                k3s: true,
            },
        }
    }

    /// What preparing a new machine does.
    pub(super) fn prepare(&self, version: KubeVersion) -> String {
        if self.k3s {
            format!("check that K3s {version} is in its template")
        } else {
            format!("install CRI-O and Kubernetes {version}")
        }
    }
}
