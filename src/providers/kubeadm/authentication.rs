//! `kubernetes.authentication` on a kubeadm control plane: the `AuthenticationConfiguration`
//! file written on the node before its API server starts (`kubeadm init`, a control plane's
//! `kubeadm join`), named by `ClusterConfiguration.apiServer.extraArgs`
//! (`authentication-config`) and mounted into the static pod by `apiServer.extraVolumes`. The
//! ClusterConfiguration kubeadm keeps in the cluster (uploaded before each control-plane join)
//! carries the same, so every control plane that joins later renders its API server with it.
//! Workers never get it: their kubelets do not read it.

use serde_json::{Value, json};

use super::{INIT_CONFIG, KubeadmError, NodeStep, write_file};
use crate::model::Role;
use crate::providers::node_exec::FileMode;
use crate::spec::{ClusterSpec, KubeVersion};

/// Where a control plane keeps the file, and where its API server's pod sees it.
pub const CONFIG_PATH: &str = "/etc/kubernetes/authentication-config.yaml";
/// The name of the static pod's volume that mounts it.
const VOLUME: &str = "authentication-config";

/// Adds the API server's flag and volume to a `ClusterConfiguration` document, when the
/// cluster has single sign-on: after the patches, replacing an entry of the same name.
pub fn onto_cluster_configuration(document: &mut Value, spec: &ClusterSpec) {
    if spec.kubernetes.authentication.is_none() {
        return;
    }
    let api_server = &mut document["apiServer"];
    set_named(
        &mut api_server["extraArgs"],
        json!({"name": "authentication-config", "value": CONFIG_PATH}),
    );
    set_named(
        &mut api_server["extraVolumes"],
        json!({
            "name": VOLUME,
            "hostPath": CONFIG_PATH,
            "mountPath": CONFIG_PATH,
            "readOnly": true,
            "pathType": "File",
        }),
    );
}

/// `list` (a kubeadm v1beta4 list of `{name, ...}`) with `entry` in place of the entry of its
/// name, or added.
fn set_named(list: &mut Value, entry: Value) {
    let mut items = list.as_array().cloned().unwrap_or_default();
    items.retain(|item| item["name"] != entry["name"]);
    items.push(entry);
    *list = Value::Array(items);
}

/// `steps` (from `init_control_plane` or `join_node`, patched) with the cluster's
/// authentication on a control plane: the file written first, at `version`'s API, and, in
/// the init file, the ClusterConfiguration's flag and volume. A worker's steps and a cluster
/// without single sign-on are unchanged.
///
/// # Errors
/// [`KubeadmError::Patches`] when capstan's own configuration does not read back as YAML.
pub fn with_authentication(
    steps: Vec<NodeStep>,
    spec: &ClusterSpec,
    role: Role,
    version: KubeVersion,
    node: &str,
) -> Result<Vec<NodeStep>, KubeadmError> {
    let Some(authentication) = &spec.kubernetes.authentication else {
        return Ok(steps);
    };
    if role != Role::ControlPlane {
        return Ok(steps);
    }
    let file = crate::spec::authentication::configuration(authentication, version);
    let mut out = vec![write_file(CONFIG_PATH, FileMode::Config, file)];
    for step in steps {
        match step {
            NodeStep::WriteFile {
                path,
                mode,
                content,
            } if path == INIT_CONFIG => {
                let content =
                    in_init_file(&content, spec).map_err(|reason| KubeadmError::Patches {
                        node: node.to_owned(),
                        reason: reason.to_owned(),
                    })?;
                out.push(NodeStep::WriteFile {
                    path,
                    mode,
                    content,
                });
            }
            // A joining control plane takes the ClusterConfiguration from the cluster.
            other => out.push(other),
        }
    }
    Ok(out)
}

/// The init file with the flag and volume in its ClusterConfiguration.
fn in_init_file(content: &str, spec: &ClusterSpec) -> Result<String, &'static str> {
    // The file may hold a token: an error never quotes it.
    let mut documents: Vec<Value> = serde_saphyr::from_multiple(content)
        .map_err(|_| "capstan's configuration does not read back as YAML")?;
    for document in &mut documents {
        if document["kind"] == "ClusterConfiguration" {
            onto_cluster_configuration(document, spec);
        }
    }
    let mut out = String::new();
    for document in &documents {
        out.push_str("---\n");
        let text = serde_saphyr::to_string(document)
            .map_err(|_| "the configuration cannot be written as YAML")?;
        out.push_str(&text);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::JOIN_CONFIG;
    use super::*;

    fn spec() -> ClusterSpec {
        let text = include_str!("../../../examples-repo/clusters/prod.yaml").replacen(
            "    distribution: kubeadm          # the default\n",
            "    distribution: kubeadm          # the default\n    authentication:\n      jwt:\n        - url: https://sso.example.com\n          audiences: [kubernetes]\n          claimMappings:\n            username: {claim: email, prefix: \"oidc:\"}\n",
            1,
        );
        let files = crate::spec::RepoFiles {
            fleet: crate::spec::SourceText {
                path: "capstan.yaml".into(),
                text: include_str!("../../../examples-repo/capstan.yaml").into(),
            },
            clusters: vec![crate::spec::SourceText {
                path: "clusters/prod.yaml".into(),
                text,
            }],
        };
        let loaded = crate::spec::load(&files);
        assert!(!loaded.diagnostics.has_errors(), "{}", loaded.diagnostics);
        loaded.desired.expect("valid").clusters["prod"].spec.clone()
    }

    const INIT: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n    - name: audit-log-path\n      value: /var/log/audit.log\n";

    #[test]
    fn a_control_plane_writes_the_file_first_and_its_api_server_names_and_mounts_it() {
        let spec = spec();
        let steps = vec![write_file(INIT_CONFIG, FileMode::Config, INIT.to_owned())];
        let version = spec.kubernetes.version;
        let steps = with_authentication(steps, &spec, Role::ControlPlane, version, "cp-1")
            .expect("rendered");
        let [
            NodeStep::WriteFile {
                path: file,
                content: configuration,
                ..
            },
            NodeStep::WriteFile { content: init, .. },
        ] = &steps[..]
        else {
            panic!("{steps:?}")
        };
        assert_eq!(file, CONFIG_PATH);
        assert!(configuration.contains("kind: AuthenticationConfiguration"));
        let documents: Vec<Value> = serde_saphyr::from_multiple(init).expect("YAML");
        let api_server = &documents[1]["apiServer"];
        assert_eq!(
            api_server["extraArgs"],
            json!([
                {"name": "audit-log-path", "value": "/var/log/audit.log"},
                {"name": "authentication-config", "value": CONFIG_PATH},
            ]),
            "the patches' arguments stay"
        );
        assert_eq!(api_server["extraVolumes"][0]["hostPath"], CONFIG_PATH);
        assert_eq!(api_server["extraVolumes"][0]["readOnly"], true);
    }

    #[test]
    fn a_worker_or_a_cluster_without_single_sign_on_is_unchanged() {
        let spec = spec();
        let steps = vec![write_file(JOIN_CONFIG, FileMode::Secret, "x".to_owned())];
        let version = spec.kubernetes.version;
        let worker = with_authentication(steps.clone(), &spec, Role::Worker, version, "w-1");
        assert_eq!(worker.expect("unchanged"), steps);
        let mut plain = spec.clone();
        plain.kubernetes.authentication = None;
        let control_plane =
            with_authentication(steps.clone(), &plain, Role::ControlPlane, version, "cp-2");
        assert_eq!(control_plane.expect("unchanged"), steps);
    }
}
