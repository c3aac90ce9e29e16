//! What each action changes of the observed state, said once: the prediction applies a
//! step's effect by it ([`super::simulate`]), and the daemon re-reads what a finished (or
//! failed part-way) step changed by it.

use serde::Serialize;

use super::types::ActionKind;

/// The observed facts an action changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Changes {
    /// VMs: created, started, stopped, tagged or destroyed (and the Proxmox memory they take).
    pub machines: bool,
    /// Nodes: registered, cordoned, drained, tainted or deleted.
    pub nodes: bool,
    /// The Kubernetes version the control plane runs.
    pub version: bool,
    /// The control planes' certificates: renewed for their lifetime.
    pub certificates: bool,
    /// The admin kubeconfig on the control planes: rewritten, to be read again.
    pub admin_credentials: bool,
    /// The kubeconfig delivered to Flux.
    pub delivery: bool,
    /// What every machine of the cluster is judged by: the version machines are built at, or
    /// the cluster as a whole.
    pub every_machine: bool,
}

const NOTHING: Changes = Changes {
    machines: false,
    nodes: false,
    version: false,
    certificates: false,
    admin_credentials: false,
    delivery: false,
    every_machine: false,
};

impl ActionKind {
    /// What this action changes when it runs (wholly or part-way).
    pub const fn changes(self) -> Changes {
        match self {
            ActionKind::CreateMachine
            | ActionKind::PrepareNode
            | ActionKind::ResetNode
            | ActionKind::DestroyMachine
            | ActionKind::TagMachines => Changes {
                machines: true,
                ..NOTHING
            },
            ActionKind::InitControlPlane => Changes {
                nodes: true,
                version: true,
                certificates: true,
                admin_credentials: true,
                every_machine: true,
                ..NOTHING
            },
            ActionKind::JoinNode
            | ActionKind::Cordon
            | ActionKind::Drain
            | ActionKind::LabelNodes => Changes {
                nodes: true,
                ..NOTHING
            },
            // The VM is tagged retiring before its Node goes.
            ActionKind::DeleteNode | ActionKind::FenceMachine => Changes {
                machines: true,
                nodes: true,
                ..NOTHING
            },
            ActionKind::UpgradeControlPlane => Changes {
                version: true,
                certificates: true,
                admin_credentials: true,
                every_machine: true,
                ..NOTHING
            },
            ActionKind::RenewCertificates => Changes {
                certificates: true,
                admin_credentials: true,
                ..NOTHING
            },
            ActionKind::DeliverKubeconfig => Changes {
                delivery: true,
                ..NOTHING
            },
            ActionKind::DeleteCluster => Changes {
                machines: true,
                nodes: true,
                delivery: true,
                every_machine: true,
                ..NOTHING
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_the_steps_that_rewrite_admin_conf_ask_for_it_to_be_read_again() {
        let rewriting: Vec<ActionKind> = ActionKind::ALL
            .into_iter()
            .filter(|kind| kind.changes().admin_credentials)
            .collect();
        assert_eq!(
            rewriting,
            [
                ActionKind::InitControlPlane,
                ActionKind::UpgradeControlPlane,
                ActionKind::RenewCertificates
            ]
        );
    }

    #[test]
    fn every_action_changes_something() {
        for kind in ActionKind::ALL {
            assert_ne!(kind.changes(), NOTHING, "{kind}");
        }
    }
}
