//! Why a Talos step failed, naming the machine, storage or release and how to fix it; never a
//! secret (the config and the bundle stay out of every message).

use capstan_core::talos::{CidataProblem, RenderProblem};

use crate::model::NodeName;
use crate::providers::proxmox::ProxmoxError;
use crate::providers::talos::TalosSecretsError;
use crate::providers::talos::api::TalosApiError;
use crate::records::talos::TalosStoreError;

/// A Talos step failed.
#[derive(Debug, thiserror::Error)]
pub enum TalosError {
    /// The cluster's Proxmox connection names no ISO storage.
    #[error(
        "the Proxmox connection `{connection}` names no isoStorage: add `isoStorage: <a storage with content type iso>` under `proxmox.{connection}` in capstan.yaml"
    )]
    NoIsoStorage {
        /// The connection.
        connection: String,
    },
    /// The ISO storage cannot hold ISO images on a placement node.
    #[error(
        "storage `{storage}` on {node} holds no ISO images: enable content type `ISO image` for it (Datacenter → Storage), or name another isoStorage"
    )]
    StorageHoldsNoIso {
        /// The storage.
        storage: String,
        /// The Proxmox node.
        node: String,
    },
    /// The VM's memory is hot-pluggable: Talos would see only its boot memory.
    #[error(
        "{machine}: its template has memory hotplug enabled, and Talos then sees only part of its memory: remove `memory` from the template's Hotplug option"
    )]
    MemoryHotplug {
        /// The machine.
        machine: NodeName,
    },
    /// The VM's first network interface has no MAC address to select the link by.
    #[error("{machine}: its net0 has no MAC address: give the template a network device")]
    NoMacAddress {
        /// The machine.
        machine: NodeName,
    },
    /// The cluster file names no Talos release.
    #[error("the cluster file names no Talos release (`talos.version`)")]
    NoRelease,
    /// The template runs another Talos release than the cluster file's.
    #[error(
        "{machine}: template `{template}` runs Talos {runs}, the cluster file asks for {wants}: build the template from Talos {wants}'s NoCloud image (Image Factory, with the siderolabs/qemu-guest-agent extension), or set talos.version to {runs}"
    )]
    TemplateRelease {
        /// The machine.
        machine: NodeName,
        /// Its template.
        template: String,
        /// The release it runs (bounded).
        runs: String,
        /// The release the file names.
        wants: String,
    },
    /// The machine lacks system extensions `spec.talos.extensions` declares.
    #[error(
        "{machine}: template `{template}` lacks the Talos extension(s) {missing} that talos.extensions declares (it runs {runs}): build the template from an Image Factory schematic that lists them (https://factory.talos.dev: pick the extensions, then use the schematic's NoCloud image and installer image), or drop them from talos.extensions"
    )]
    MissingExtensions {
        /// The machine.
        machine: NodeName,
        /// Its template.
        template: String,
        /// The declared extensions it lacks, comma-separated.
        missing: String,
        /// What it runs, comma-separated (`none` when nothing).
        runs: String,
    },
    /// No member of etcd could remove a dead control plane.
    #[error("no healthy control plane answers to remove {machine}'s etcd member")]
    NoHealthyMember {
        /// The machine leaving.
        machine: NodeName,
    },
    /// The machine config cannot be rendered.
    #[error("cannot render the Talos machine config")]
    Render(#[source] RenderProblem),
    /// The cidata image cannot be written.
    #[error("cannot write the cidata image")]
    Cidata(#[source] CidataProblem),
    /// Proxmox refused an ISO or CD-ROM change, or a read.
    #[error("Proxmox")]
    Proxmox(#[source] ProxmoxError),
    /// The bundle cannot be used.
    #[error(transparent)]
    Secrets(TalosSecretsError),
    /// The bundle or talosconfig Secret cannot be read or written.
    #[error(transparent)]
    Store(#[from] TalosStoreError),
    /// A Talos API call failed.
    #[error(transparent)]
    Api(#[from] TalosApiError),
}

impl TalosError {
    /// From a Proxmox failure.
    pub fn from_proxmox(source: ProxmoxError) -> Self {
        TalosError::Proxmox(source)
    }

    /// Whether retrying later may succeed without anyone changing anything.
    pub fn is_transient(&self) -> bool {
        match self {
            TalosError::Proxmox(source) => source.is_transient(),
            TalosError::Store(source) => source.is_transient(),
            // A node that does not answer yet (booting) or a member that cannot leave now.
            TalosError::Api(_) | TalosError::NoHealthyMember { .. } => true,
            TalosError::NoIsoStorage { .. }
            | TalosError::StorageHoldsNoIso { .. }
            | TalosError::MemoryHotplug { .. }
            | TalosError::NoMacAddress { .. }
            | TalosError::NoRelease
            | TalosError::TemplateRelease { .. }
            | TalosError::MissingExtensions { .. }
            | TalosError::Render(_)
            | TalosError::Cidata(_)
            | TalosError::Secrets(_) => false,
        }
    }
}
