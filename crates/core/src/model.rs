//! Domain identifiers shared by the planner, the providers and the lab: what a VM, a node and a
//! role are, independent of the Proxmox or Kubernetes wire types.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

/// A Proxmox VM id (100..999999999).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct VmId(pub u32);

impl fmt::Display for VmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A node's name: the VM's name, its hostname and its Kubernetes Node name are one and the same
/// (`capstan-<cluster>-<pool>-<suffix>`).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct NodeName(pub SmolStr);

impl NodeName {
    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for NodeName {
    fn from(name: &str) -> Self {
        NodeName(name.into())
    }
}

/// What a node does in its cluster.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Runs the API server, etcd, the scheduler and the controller manager.
    ControlPlane,
    /// Runs workloads.
    Worker,
}

impl Role {
    /// The stable text form: `control-plane` or `worker`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Role::ControlPlane => "control-plane",
            Role::Worker => "worker",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What marks a VM as capstan's: which cluster, role and pool it serves and the spec it was
/// built from. Written at the first API call that creates the VM and checked before any stop or
/// destroy, so a VM someone else owns is never touched.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Ownership {
    /// The cluster's `metadata.name`.
    pub cluster: SmolStr,
    /// Control plane or worker.
    pub role: Role,
    /// Worker pool name, or `cp` for the control plane.
    pub pool: SmolStr,
    /// Spec hash of the machine (see the planner): 12 hex digits of a sha1.
    pub spec_hash: SmolStr,
}
