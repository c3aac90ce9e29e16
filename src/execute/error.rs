//! Why a step failed, and whether retrying may help.

use crate::model::NodeName;
use crate::plan::ActionKind;
use crate::providers::kube::ClusterError;
use crate::providers::kubeadm::KubeadmError;
use crate::providers::proxmox::ProxmoxError;
use crate::records::flux::FluxError;

/// A step failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    /// The cluster's Proxmox connection is not configured.
    #[error("no Proxmox connection `{connection}`")]
    NoConnection {
        /// Its name.
        connection: String,
    },
    /// A Proxmox call failed.
    #[error("{action}: Proxmox")]
    Proxmox {
        /// What was being done.
        action: &'static str,
        /// The Proxmox call that failed, and its cause.
        #[source]
        source: Box<ProxmoxError>,
    },
    /// A kubeadm operation on a node failed.
    #[error("{action}")]
    Kubeadm {
        /// What was being done.
        action: &'static str,
        /// The node operation that failed, and its cause.
        #[source]
        source: Box<KubeadmError>,
    },
    /// The cluster's API refused or failed.
    #[error("{action}: the cluster's API")]
    Cluster {
        /// What was being done.
        action: &'static str,
        /// The cluster operation that failed, and its cause.
        #[source]
        source: Box<ClusterError>,
    },
    /// Flux delivery failed.
    #[error("{}", ActionKind::DeliverKubeconfig)]
    Flux(#[source] Box<FluxError>),
    /// No admin kubeconfig could be read from a control plane.
    #[error(
        "{action}: no admin kubeconfig (no running control plane answered through its guest agent)"
    )]
    NoKubeconfig {
        /// The step.
        action: ActionKind,
    },
    /// The admin kubeconfig a control plane gave was not admitted (a field capstan does not
    /// honour, another server, another CA than the pinned one).
    #[error("{action}: the admin kubeconfig read from {machine} is refused")]
    KubeconfigRefused {
        /// The step.
        action: ActionKind,
        /// The control plane it was read from.
        machine: NodeName,
        /// Why the kubeconfig was not admitted.
        #[source]
        source: Box<crate::connect::AdmitError>,
    },
    /// A deleted cluster's pinned CA could not be forgotten.
    #[error("{}: forget the pinned CA", ActionKind::DeleteCluster)]
    ForgetCa(#[source] Box<crate::records::ca_pins::PinError>),
    /// No healthy control plane to act through.
    #[error("{action}: no Ready control plane other than {excluding} to act through")]
    NoControlPlane {
        /// The step.
        action: ActionKind,
        /// The machine that does not count.
        excluding: NodeName,
    },
    /// The management cluster the step names is not configured.
    #[error("no management cluster `{name}` to deliver to")]
    NoManagement {
        /// Its name.
        name: String,
    },
    /// The VM has no IPv4 address yet.
    #[error("{machine}: its guest agent reports no IPv4 address yet")]
    NoAddress {
        /// The VM.
        machine: NodeName,
    },
    /// A K3s cluster's datastore refused or did not answer.
    #[error("{action}: datastore `{server}`")]
    Datastore {
        /// The step.
        action: ActionKind,
        /// The datastore server's name in `capstan.yaml`.
        server: String,
        /// Why, with the server's own error text.
        #[source]
        source: Box<crate::providers::datastore::DatastoreError>,
    },
    /// A K3s cluster's datastore cannot be used by this daemon.
    #[error("{action}: {reason}")]
    NoDatastore {
        /// The step.
        action: ActionKind,
        /// Why, and how to fix it.
        reason: String,
    },
    /// A password `kubernetes.registries` names could not be read (the error names the
    /// field and the source, never a value).
    #[error("{action}: cannot read a registry password")]
    RegistryPassword {
        /// The step.
        action: ActionKind,
        /// Why, under the operator's rules.
        #[source]
        source: Box<crate::secrets::SecretError>,
    },
    /// A K3s cluster's token and datastore password could not be read or kept.
    #[error("{action}")]
    Secrets {
        /// The step.
        action: ActionKind,
        /// Why the cluster's secrets could not be read or kept.
        #[source]
        source: Box<crate::records::k3s::SecretsError>,
    },
    /// The step names a VM that was not observed.
    #[error("{machine} has no known VM id (was it observed?)")]
    UnknownVm {
        /// The VM.
        machine: NodeName,
    },
    /// The replica lost the Lease: the step stopped before its next change.
    #[error("step stopped")]
    NotLeading(#[source] crate::fence::NotLeading),
    /// An in-place upgrade asked of a distribution that upgrades by replacing machines (the
    /// planner never plans one).
    #[error("{action}: {tool} upgrades by replacing machines, not in place")]
    NotInPlace {
        /// The step.
        action: ActionKind,
        /// The distribution's software.
        tool: &'static str,
    },
    /// A Talos step failed.
    #[error("{action}")]
    Talos {
        /// The step.
        action: ActionKind,
        /// Why.
        #[source]
        source: Box<super::distribution::talos::TalosError>,
    },
    /// A record capstan keeps in the management cluster could not be read, written or
    /// deleted, or is not the record expected (a refusal: reason `RecordRefused`).
    #[error("{action}")]
    Record {
        /// The step.
        action: ActionKind,
        /// Why.
        #[source]
        source: Box<crate::records::RecordError>,
    },
    /// A step that needs the cluster's spec on a removed cluster.
    #[error("{action} needs the cluster file, which is gone")]
    NoSpec {
        /// The step.
        action: ActionKind,
    },
    /// Every address of the range is held by another VM.
    #[error(
        "{action}: {machine}: every address of nodeAddresses {range} is held by another machine: widen the range (it must hold every machine a rollout runs at once)"
    )]
    NoFreeAddress {
        /// The step.
        action: ActionKind,
        /// The machine.
        machine: NodeName,
        /// The range.
        range: String,
    },
    /// The VM just cloned is not among the cluster's VMs Proxmox lists (yet).
    #[error(
        "{action}: {machine}: its VM is not among the cluster's VMs Proxmox lists, so its static address cannot be recorded on it"
    )]
    VmNotListed {
        /// The step.
        action: ActionKind,
        /// The machine.
        machine: NodeName,
    },
    /// The template cannot give a machine what the file declares (static addresses through
    /// cloud-init need a cloud-init drive and cloud-init).
    #[error("{action}: {reason}")]
    Template {
        /// The step.
        action: ActionKind,
        /// What is missing and how to fix the template.
        reason: String,
    },
    /// A data disk could not be formatted or mounted in the guest.
    #[error("{action}: {machine}: {reason}")]
    Volumes {
        /// The step.
        action: ActionKind,
        /// The machine.
        machine: NodeName,
        /// What the guest said (bounded, redacted by the caller's chain).
        reason: String,
    },
}

impl ExecuteError {
    /// Whether the step stopped because its replica no longer leads (anywhere in the chain):
    /// not a failure, the new leader plans the step again.
    pub fn not_leading(&self) -> Option<&crate::fence::NotLeading> {
        crate::fence::not_leading(self)
    }

    /// The refusal of a record anywhere in the chain ([`crate::records::RecordRefusal`]): a
    /// failure no retry lifts, reported at once as `Blocked` with reason `RecordRefused`.
    pub fn record_refusal(&self) -> Option<&crate::records::RecordRefusal> {
        crate::records::refusal_in(self)
    }

    /// Whether retrying later may succeed without anyone changing anything.
    pub fn is_transient(&self) -> bool {
        match self {
            ExecuteError::Proxmox { source, .. } => source.is_transient(),
            ExecuteError::Kubeadm { .. }
            | ExecuteError::NoKubeconfig { .. }
            | ExecuteError::NoControlPlane { .. }
            | ExecuteError::NoAddress { .. } => true,
            // A machine on its way out gives its address back when it is destroyed; Proxmox's
            // resource listing lags a clone by moments.
            ExecuteError::NoFreeAddress { .. } | ExecuteError::VmNotListed { .. } => true,
            ExecuteError::Template { .. } | ExecuteError::Volumes { .. } => false,
            ExecuteError::Cluster { source, .. } => source.is_transient(),
            ExecuteError::Flux(source) => source.is_transient(),
            ExecuteError::KubeconfigRefused { source, .. } => source.is_transient(),
            ExecuteError::ForgetCa(source) => source.is_transient(),
            ExecuteError::Datastore { source, .. } => source.is_transient(),
            ExecuteError::Secrets { source, .. } => source.is_transient(),
            ExecuteError::Record { source, .. } => source.is_transient(),
            ExecuteError::NoConnection { .. }
            | ExecuteError::NoManagement { .. }
            | ExecuteError::UnknownVm { .. }
            | ExecuteError::NoSpec { .. }
            | ExecuteError::NotInPlace { .. }
            | ExecuteError::NoDatastore { .. }
            | ExecuteError::RegistryPassword { .. } => false,
            ExecuteError::NotLeading(_) => true,
            ExecuteError::Talos { source, .. } => source.is_transient(),
        }
    }
}
