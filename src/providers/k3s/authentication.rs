//! `kubernetes.authentication` on a K3s server: the `AuthenticationConfiguration` file written
//! before K3s starts, and `authentication-config=<file>` added to `kube-apiserver-arg` in
//! [`super::CONFIG`] (K3s runs the API server in its own process, with those arguments).
//! Agents never get it: they run no API server.

use serde_json::{Map, Value};

use super::CONFIG;
use crate::providers::kubeadm::{KubeadmError, NodeStep, write_file};
use crate::providers::node_exec::FileMode;
use crate::spec::ClusterSpec;

/// Where a K3s server keeps the file.
pub const CONFIG_PATH: &str = "/etc/rancher/k3s/authentication-config.yaml";

/// A server's install `steps` (from [`super::install_server`], patched) with the cluster's
/// authentication: the file first, then the argument in K3s's configuration file, beside the
/// patches' own `kube-apiserver-arg`s. Unchanged without single sign-on.
///
/// # Errors
/// [`KubeadmError::Patches`] when capstan's own file does not read back as YAML.
pub fn with_authentication(
    steps: Vec<NodeStep>,
    spec: &ClusterSpec,
    node: &str,
) -> Result<Vec<NodeStep>, KubeadmError> {
    let Some(authentication) = &spec.kubernetes.authentication else {
        return Ok(steps);
    };
    let failed = |reason: &str| KubeadmError::Patches {
        node: node.to_owned(),
        reason: reason.to_owned(),
    };
    let file = crate::spec::authentication::configuration(authentication, spec.kubernetes.version);
    let mut out = vec![write_file(CONFIG_PATH, FileMode::Config, file)];
    for step in steps {
        let NodeStep::WriteFile {
            path,
            mode,
            content,
        } = step
        else {
            out.push(step);
            continue;
        };
        if path != CONFIG {
            out.push(NodeStep::WriteFile {
                path,
                mode,
                content,
            });
            continue;
        }
        // The file holds the token: an error never quotes it.
        let mut config: Map<String, Value> = serde_saphyr::from_str(&content)
            .map_err(|_| failed("config.yaml does not read back as YAML"))?;
        let mut args = match config.remove("kube-apiserver-arg") {
            Some(Value::Array(items)) => items,
            Some(Value::String(arg)) => vec![Value::String(arg)],
            _ => Vec::new(),
        };
        args.push(Value::String(format!(
            "authentication-config={CONFIG_PATH}"
        )));
        config.insert("kube-apiserver-arg".to_owned(), Value::Array(args));
        let content = serde_saphyr::to_string(&config)
            .map_err(|_| failed("config.yaml cannot be written as YAML"))?;
        out.push(NodeStep::WriteFile {
            path,
            mode,
            content,
        });
    }
    Ok(out)
}
