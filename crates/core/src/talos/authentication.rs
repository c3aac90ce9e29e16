//! `kubernetes.authentication` in a Talos control plane's machine config, the way its Talos
//! release takes it ([`delivery`]): Talos 1.13 has no document for the API server's
//! authentication, so the `AuthenticationConfiguration` file is a `machine.files` entry, mounted
//! into the API server's static pod (`cluster.apiServer.extraVolumes`) and named by
//! `--authentication-config` (`cluster.apiServer.extraArgs`). Talos 1.14 adds a
//! `KubeAuthenticationConfig` document: a release capstan learns of gets its own arm there.

use serde_json::{Value, json};

use super::facts::ClusterFacts;
use super::versions::TalosVersion;
use crate::spec::authentication::configuration;

/// Where a Talos control plane keeps the file (`machine.files` writes under `/var` only); the
/// API server's pod sees it at the same path.
pub const CONFIG_PATH: &str = "/var/lib/capstan/authentication-config.yaml";
/// `0644`: a public configuration (issuer URLs and CA certificates), read by the API server.
const CONFIG_PERMISSIONS: u32 = 0o644;

/// How a Talos release takes the API server's authentication configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// A file of `machine.files`, mounted and named in `cluster.apiServer` (Talos up to 1.13,
    /// every release capstan knows: `spec::talos_versions` refuses later ones).
    ApiServerFile,
}

/// How `talos` takes the configuration.
pub fn delivery(talos: TalosVersion) -> Delivery {
    // Every release capstan accepts (1.13 and earlier) predates the KubeAuthenticationConfig
    // document; a later one is refused at validation until it is taught here.
    debug_assert!(talos.minor_version() <= super::versions::NEWEST_KNOWN_TALOS);
    Delivery::ApiServerFile
}

/// Adds the cluster's authentication to a control plane's `v1alpha1` document, when it has
/// one; a worker's is left as it is (its kubelet never reads it).
pub fn apply(v1alpha1: &mut Value, cluster: &ClusterFacts) {
    let Some(authentication) = &cluster.authentication else {
        return;
    };
    match delivery(cluster.talos_version) {
        Delivery::ApiServerFile => {
            let content = configuration(authentication, cluster.kubernetes_version);
            let files = v1alpha1["machine"]["files"].as_array().cloned();
            let mut files = files.unwrap_or_default();
            files.push(json!({
                "path": CONFIG_PATH,
                "permissions": CONFIG_PERMISSIONS,
                "op": "create",
                "content": content,
            }));
            v1alpha1["machine"]["files"] = Value::Array(files);
            let api_server = &mut v1alpha1["cluster"]["apiServer"];
            api_server["extraArgs"]["authentication-config"] = json!(CONFIG_PATH);
            let volumes = api_server["extraVolumes"].as_array().cloned();
            let mut volumes = volumes.unwrap_or_default();
            volumes.push(json!({
                "hostPath": CONFIG_PATH,
                "mountPath": CONFIG_PATH,
                "readonly": true,
            }));
            api_server["extraVolumes"] = Value::Array(volumes);
        }
    }
}
