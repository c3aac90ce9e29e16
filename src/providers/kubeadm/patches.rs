//! The cluster's kubeadm patches on a node's configuration (the rules are
//! `capstan_core::spec::patches::kubeadm`'s): the documents of the node's level merged by kind
//! onto capstan's in the file `kubeadm init` or `kubeadm join` reads, and the kubelet's
//! configuration patched through kubeadm's own patches directory (target
//! `kubeletconfiguration`, a JSON merge patch), so each node's kubelet takes its level's
//! settings whatever the cluster-wide `kubelet-config` ConfigMap holds.

use serde_json::Value;

use super::{INIT_CONFIG, JOIN_CONFIG, KubeadmError, NodeStep, write_file};
use crate::providers::node_exec::FileMode;
use crate::spec::ClusterSpec;
use crate::spec::patches::kubeadm::{merge_onto, merged};

/// kubeadm's patches directory on a node (`patches.directory` of its init or join
/// configuration).
pub const PATCHES_DIR: &str = "/etc/capstan/kubeadm-patches";
/// The kubelet's patch: kubeadm applies `kubeletconfiguration+merge.json` to the
/// configuration it writes for the kubelet.
pub const KUBELET_PATCH: &str = "/etc/capstan/kubeadm-patches/kubeletconfiguration+merge.json";

/// The ClusterConfiguration capstan uploads before a control plane joins.
pub const CLUSTER_CONFIG: &str = "/etc/capstan/kubeadm-cluster.yaml";

/// Before a control plane joins, on a control plane of the cluster: kubeadm's
/// `ClusterConfiguration` as capstan renders it now (the cluster's patches merged, the API
/// server's authentication flag and volume added, at the `version` the control plane runs), uploaded with `kubeadm init phase upload-config kubeadm`,
/// and kube-proxy's addon written again with its `KubeProxyConfiguration` (`addon kube-proxy`,
/// when the cluster runs it). A joining control plane renders its static pods from the
/// configuration kubeadm keeps in the cluster, so a changed patch reaches the control planes
/// that replace the old ones, and kube-proxy.
///
/// # Errors
/// [`KubeadmError::Patches`] when capstan's own configuration does not read back as YAML.
pub fn upload_cluster_configuration(
    cluster_name: &str,
    spec: &ClusterSpec,
    network: &crate::spec::ClusterNetwork,
    version: crate::spec::KubeVersion,
    node: &str,
) -> Result<Vec<NodeStep>, KubeadmError> {
    let mut spec = spec.clone();
    spec.kubernetes.version = version;
    let rendered = super::render(
        super::INIT_TEMPLATE,
        &super::cluster_values(cluster_name, &spec, network),
    );
    let failed = |reason: &str| KubeadmError::Patches {
        node: node.to_owned(),
        reason: reason.to_owned(),
    };
    let kinds = ["ClusterConfiguration", "KubeProxyConfiguration"];
    let text = patched(&rendered, &spec.patches_of(None), &kinds, false)
        .map_err(|reason| failed(&reason))?;
    let mut documents: Vec<Value> = serde_saphyr::from_multiple(&text)
        .map_err(|_| failed("capstan's configuration does not read back as YAML"))?;
    for document in &mut documents {
        if document["kind"] == "ClusterConfiguration" {
            super::authentication::onto_cluster_configuration(document, &spec);
        }
    }
    let mut content = String::new();
    for document in documents
        .iter()
        .filter(|d| kinds.iter().any(|k| d["kind"] == *k))
    {
        content.push_str("---\n");
        content.push_str(
            &serde_saphyr::to_string(document)
                .map_err(|_| failed("the configuration cannot be written as YAML"))?,
        );
    }
    let phase = |args: &[&str]| NodeStep::Run {
        command: crate::providers::node_exec::Command::new(
            &[
                &["kubeadm", "init", "phase"],
                args,
                &["--config", CLUSTER_CONFIG],
            ]
            .concat(),
        ),
        unless: None,
    };
    let mut steps = vec![
        write_file(CLUSTER_CONFIG, FileMode::Config, content),
        phase(&["upload-config", "kubeadm"]),
    ];
    // kube-proxy's configuration (a KubeProxyConfiguration patch) lives in its ConfigMap.
    if network.kube_proxy {
        steps.push(phase(&["addon", "kube-proxy"]));
    }
    Ok(steps)
}

/// The kinds merged into each file kubeadm reads.
const INIT_KINDS: &[&str] = &[
    "InitConfiguration",
    "ClusterConfiguration",
    "KubeProxyConfiguration",
];
const JOIN_KINDS: &[&str] = &["JoinConfiguration"];

/// `steps` (from `init_control_plane` or `join_node`) with the patches of `pool`'s machines
/// (`None`: a control plane): the configuration file merged, and the kubelet's patch written
/// before it. Unchanged when no patch reaches the node.
///
/// # Errors
/// [`KubeadmError::Patches`] when capstan's own configuration does not read back as YAML.
pub fn with_patches(
    steps: Vec<NodeStep>,
    spec: &ClusterSpec,
    pool: Option<&str>,
    node: &str,
) -> Result<Vec<NodeStep>, KubeadmError> {
    let patches = spec.patches_of(pool);
    if patches.is_empty() {
        return Ok(steps);
    }
    let kubelet = merged(&patches, "KubeletConfiguration");
    let mut out = Vec::with_capacity(steps.len() + 1);
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
        let kinds = match path.as_str() {
            INIT_CONFIG => INIT_KINDS,
            JOIN_CONFIG => JOIN_KINDS,
            _ => {
                out.push(NodeStep::WriteFile {
                    path,
                    mode,
                    content,
                });
                continue;
            }
        };
        if let Some(kubelet) = &kubelet {
            out.push(write_file(
                KUBELET_PATCH,
                FileMode::Config,
                Value::Object(kubelet.clone()).to_string(),
            ));
        }
        let content = patched(&content, &patches, kinds, kubelet.is_some()).map_err(|reason| {
            KubeadmError::Patches {
                node: node.to_owned(),
                reason,
            }
        })?;
        out.push(NodeStep::WriteFile {
            path,
            mode,
            content,
        });
    }
    Ok(out)
}

/// A kubeadm configuration (YAML documents) with the patches' documents of `kinds` merged onto
/// capstan's (a kind capstan does not write is added), and, with a kubelet patch, kubeadm's
/// patches directory named in the init or join document.
fn patched(
    content: &str,
    patches: &[crate::spec::patches::Located<'_>],
    kinds: &[&str],
    kubelet_patch: bool,
) -> Result<String, String> {
    // The file may hold a token: an error says what failed, never what the file says.
    let unreadable = |_| "capstan's configuration does not read back as YAML".to_owned();
    let mut documents: Vec<Value> = serde_saphyr::from_multiple(content).map_err(unreadable)?;
    for kind in kinds {
        let Some(patch) = merged(patches, kind) else {
            continue;
        };
        match documents.iter_mut().find(|d| d["kind"] == *kind) {
            Some(document) => merge_onto(document, &patch),
            None => {
                let api = crate::spec::patches::kubeadm::KINDS
                    .iter()
                    .find(|(k, _, _)| k == kind)
                    .map_or("", |(_, api, _)| api);
                let mut document = serde_json::json!({"apiVersion": api, "kind": kind});
                merge_onto(&mut document, &patch);
                documents.push(document);
            }
        }
    }
    if kubelet_patch
        && let Some(document) = documents.iter_mut().find(|d| {
            matches!(
                d["kind"].as_str(),
                Some("InitConfiguration" | "JoinConfiguration")
            )
        })
    {
        document["patches"] = serde_json::json!({"directory": PATCHES_DIR});
    }
    let mut out = String::new();
    for document in &documents {
        out.push_str("---\n");
        let text = serde_saphyr::to_string(document)
            .map_err(|_| "the patched configuration cannot be written as YAML".to_owned())?;
        out.push_str(&text);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with(patches: &str) -> ClusterSpec {
        let text = include_str!("../../../examples-repo/clusters/prod.yaml").replacen(
            "\n  workers:\n",
            &format!("\n  patches:\n{patches}  workers:\n"),
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

    #[test]
    fn documents_merge_by_kind_onto_capstan_s_and_the_kubelet_s_go_to_the_patches_directory() {
        let spec = spec_with(
            "    - apiVersion: kubelet.config.k8s.io/v1beta1\n      kind: KubeletConfiguration\n      maxPods: 150\n    - apiVersion: kubeadm.k8s.io/v1beta4\n      kind: ClusterConfiguration\n      apiServer:\n        extraArgs:\n          - name: audit-log-path\n            value: /var/log/audit.log\n",
        );
        let rendered = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nskipPhases: []\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.2\napiServer:\n  certSANs: [k8s-prod.lab.example]\n";
        let steps = vec![write_file(
            INIT_CONFIG,
            FileMode::Config,
            rendered.to_owned(),
        )];
        let steps = with_patches(steps, &spec, None, "cp-1").expect("patched");
        let [kubelet, init] = &steps[..] else {
            panic!("{steps:?}")
        };
        let NodeStep::WriteFile { path, content, .. } = kubelet else {
            panic!("{kubelet:?}")
        };
        assert_eq!(
            (path.as_str(), content.as_str()),
            (KUBELET_PATCH, r#"{"maxPods":150}"#)
        );
        let NodeStep::WriteFile { content, .. } = init else {
            panic!("{init:?}")
        };
        let documents: Vec<Value> = serde_saphyr::from_multiple(content).expect("YAML");
        assert_eq!(documents[0]["patches"]["directory"], PATCHES_DIR);
        let cluster = &documents[1];
        assert_eq!(
            cluster["kubernetesVersion"], "v1.36.2",
            "capstan's fields stay"
        );
        assert_eq!(cluster["apiServer"]["certSANs"][0], "k8s-prod.lab.example");
        assert_eq!(
            cluster["apiServer"]["extraArgs"][0]["name"],
            "audit-log-path"
        );
    }
}
