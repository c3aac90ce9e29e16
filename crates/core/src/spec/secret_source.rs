//! Where a secret named by a repository file is read from, whatever needs it (a Proxmox
//! token, a kubeconfig, a datastore password, a notification provider's address).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a secret is read from at run time. Secrets never live in the repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum SecretSource {
    /// An environment variable of the capstan process.
    Env(String),
    /// A file on the machine (or a mounted Kubernetes Secret) that capstan runs on.
    File(PathBuf),
}
