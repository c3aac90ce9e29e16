//! `kubernetes.registries` as K3s reads it: `/etc/rancher/k3s/registries.yaml` ([`FILE`],
//! mode 0600: it holds the passwords), which K3s turns into containerd's registry
//! configuration at every start, so it is written before the install starts K3s; each CA in a
//! file of its own that the host's `tls.ca_file` names.

use super::super::kubeadm::{NodeStep, write_file};
use crate::providers::node_exec::FileMode;
use crate::spec::registries::{ResolvedRegistries, variable_word};

/// K3s's private registry configuration.
pub const FILE: &str = "/etc/rancher/k3s/registries.yaml";
/// Where the CAs registries.yaml names are written.
pub const CA_DIR: &str = "/etc/rancher/k3s/registry-ca";

/// The CA file of registry host `host` (one name per host: validation keys hosts uniquely).
fn ca_file(host: &str) -> String {
    format!("{CA_DIR}/{}.crt", variable_word(host).to_ascii_lowercase())
}

/// `registries.yaml` for `registries`: `mirrors.REGISTRY.endpoint`, and under
/// `configs.HOST` the `auth` and `tls.ca_file` of each host.
pub fn registries_yaml(registries: &ResolvedRegistries) -> String {
    use serde_json::{Map, Value, json};
    let mirrors: Map<String, Value> = registries
        .mirrors
        .iter()
        .map(|(registry, endpoints)| (registry.clone(), json!({ "endpoint": endpoints })))
        .collect();
    let mut configs: Map<String, Value> = Map::new();
    for (host, credentials) in &registries.credentials {
        configs.insert(
            host.clone(),
            json!({"auth": {"username": credentials.username, "password": credentials.password}}),
        );
    }
    for host in registries.ca.keys() {
        let config = configs.entry(host.clone()).or_insert_with(|| json!({}));
        config["tls"] = json!({ "ca_file": ca_file(host) });
    }
    let mut file = Map::new();
    if !mirrors.is_empty() {
        file.insert("mirrors".to_owned(), Value::Object(mirrors));
    }
    if !configs.is_empty() {
        file.insert("configs".to_owned(), Value::Object(configs));
    }
    serde_saphyr::to_string(&Value::Object(file)).expect("a JSON value serialises as YAML")
}

/// `steps` (an install) after the files K3s reads `registries` from; unchanged when the
/// cluster declares no registries.
pub fn before(steps: Vec<NodeStep>, registries: &ResolvedRegistries) -> Vec<NodeStep> {
    if registries.is_empty() {
        return steps;
    }
    let mut files: Vec<NodeStep> = registries
        .ca
        .iter()
        .map(|(host, pem)| write_file(&ca_file(host), FileMode::Config, pem.clone()))
        .collect();
    files.push(write_file(
        FILE,
        FileMode::Secret,
        registries_yaml(registries),
    ));
    files.extend(steps);
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::registries::ResolvedCredentials;

    #[test]
    fn mirrors_auth_and_a_ca_file_are_written_before_the_install_in_k3s_s_format() {
        let registries = ResolvedRegistries {
            mirrors: [(
                "docker.io".to_owned(),
                vec!["http://10.0.0.9:5000".to_owned()],
            )]
            .into(),
            credentials: [(
                "10.0.0.9:5000".to_owned(),
                ResolvedCredentials {
                    username: "robot".to_owned(),
                    password: "s3cr3t".to_owned(),
                },
            )]
            .into(),
            ca: [("10.0.0.9:5000".to_owned(), "PEM".to_owned())].into(),
        };
        let yaml: serde_json::Value =
            serde_saphyr::from_str(&registries_yaml(&registries)).expect("YAML");
        assert_eq!(
            yaml,
            serde_json::json!({
                "mirrors": {"docker.io": {"endpoint": ["http://10.0.0.9:5000"]}},
                "configs": {"10.0.0.9:5000": {
                    "auth": {"username": "robot", "password": "s3cr3t"},
                    "tls": {"ca_file": "/etc/rancher/k3s/registry-ca/10_0_0_9_5000.crt"},
                }},
            })
        );
        let install = NodeStep::Run {
            command: crate::providers::node_exec::Command::new(&["true"]),
            unless: None,
        };
        let steps = before(vec![install.clone()], &registries);
        assert_eq!(steps.len(), 3);
        assert!(matches!(
            &steps[1],
            NodeStep::WriteFile { path, mode: FileMode::Secret, .. } if path == FILE
        ));
        assert_eq!(steps[2], install);
        assert_eq!(
            before(vec![install.clone()], &ResolvedRegistries::default()),
            [install]
        );
    }
}
