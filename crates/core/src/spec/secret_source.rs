//! Where a secret named by a repository file is read from, whatever needs it (a Proxmox
//! token, a kubeconfig, a datastore password, a notification provider's address).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::diagnostic::{Diagnostic, SourceFile};

/// Where a secret is read from at run time. Secrets never live in the repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum SecretSource {
    /// An environment variable of the capstan process.
    Env(String),
    /// A file on the machine (or a mounted Kubernetes Secret) that capstan runs on.
    File(PathBuf),
}

impl SecretSource {
    /// Refuses a source no reader could follow (an empty or malformed variable name, an empty
    /// path) at `path`; whether the operator's rules allow it is asked where it is read.
    pub(crate) fn check_form(
        out: &mut Vec<Diagnostic>,
        file: &SourceFile,
        path: &str,
        source: &SecretSource,
    ) {
        match source {
            SecretSource::Env(variable) if variable.is_empty() || variable.contains(['=', ' ']) => {
                out.push(file.error(
                    &format!("{path}.env"),
                    format!("`{variable}` is not an environment variable name"),
                ));
            }
            SecretSource::File(file_path) if file_path.as_os_str().is_empty() => {
                out.push(file.error(&format!("{path}.file"), "the file path is empty"));
            }
            _ => {}
        }
    }
}
