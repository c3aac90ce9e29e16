//! What the lab's kubeadm makes of the configuration it is given beyond the cluster's shape:
//! the kubelet's configuration (the cluster's `KubeletConfiguration`, as kubeadm uploads it to
//! the `kubelet-config` ConfigMap, with the node's own patch from `patches.directory` applied,
//! target `kubeletconfiguration`), written where kubeadm writes it and reported by the Node
//! (its `maxPods` is the Node's pod capacity); and the API server's static pod, whose command
//! carries `ClusterConfiguration.apiServer.extraArgs` (`kubeadm init phase upload-config kubeadm`
//! replaces it for the control planes that join later); and the network `kubeadm init` sets up.

use serde_json::Value;

use crate::kube::network::{ClusterNetwork, KubeProxy, NetworkPlugin};
use crate::values::KubeVersion;

use super::{Exit, GuestVm};

/// Where kubeadm writes the kubelet's configuration on a node.
pub(super) const KUBELET_CONFIG: &str = "/var/lib/kubelet/config.yaml";

/// The cluster-wide configuration kubeadm keeps in the cluster (`kubeadm-config` and
/// `kubelet-config` ConfigMaps).
#[derive(Debug, Clone, Default)]
pub(super) struct Stored {
    /// The `KubeletConfiguration` document `kubeadm init` was given.
    pub kubelet: Value,
    /// The `ClusterConfiguration` document.
    pub cluster: Value,
}

/// The node's kubelet configuration: `base` with the node's patch from the directory its init
/// or join document names (`kubeletconfiguration[suffix][+patchtype].json|yaml`, merge patches
/// applied in name order), or kubeadm's words when a patch does not read.
pub(super) fn node_kubelet(
    base: &Value,
    document: &Value,
    files: &std::collections::BTreeMap<String, String>,
) -> Result<Value, String> {
    let mut config = base.clone();
    let Some(directory) = document["patches"]["directory"].as_str() else {
        return Ok(config);
    };
    let prefix = format!("{}/kubeletconfiguration", directory.trim_end_matches('/'));
    for (path, text) in files.range(prefix.clone()..) {
        if !path.starts_with(&prefix) {
            break;
        }
        let patch: Value = serde_saphyr::from_str(text).map_err(|err| {
            format!(
                "error execution phase kubelet-start: could not apply patch \"{path}\": {}",
                err.without_snippet()
            )
        })?;
        merge_patch(&mut config, &patch);
    }
    Ok(config)
}

/// Settles the node's kubelet configuration (see [`node_kubelet`]): written where kubeadm
/// writes it, its `maxPods` registered with the Node; kubeadm's failure otherwise.
pub(super) fn take(
    guest: &mut super::Guest,
    base: &Value,
    document: &Value,
    registration: &mut crate::nodes::Registration,
) -> Result<(), super::Exit> {
    let kubelet = node_kubelet(base, document, &guest.files)
        .map_err(|message| super::Exit::failure(1, format!("{message}\n")))?;
    registration.max_pods = max_pods(&kubelet);
    let text = serde_saphyr::to_string(&kubelet).unwrap_or_default();
    guest.put_file(KUBELET_CONFIG.to_owned(), text);
    Ok(())
}

impl super::GuestSystems {
    /// `kubeadm init phase upload-config kubeadm`: the ClusterConfiguration new control planes
    /// take (their API server's arguments among it) is the file's from now on.
    /// `kubeadm init phase addon kube-proxy`: kube-proxy's DaemonSet (and its configuration,
    /// which the lab does not model) written again.
    pub(super) fn addon(
        &mut self,
        backend: &impl crate::nodes::ClusterBackend,
        vm: &GuestVm,
        which: &str,
        config: Option<&str>,
    ) -> Exit {
        let cluster = match self.control_plane_of(vm.vmid) {
            Ok(cluster) => cluster,
            Err(exit) => return exit,
        };
        if which != "kube-proxy" {
            return Exit::failure(
                1,
                format!("the lab deploys the kube-proxy addon only, not {which}\n"),
            );
        }
        if let Err(exit) = self.read_config(vm.vmid, config) {
            return exit;
        }
        match backend.deploy_kube_proxy(&cluster) {
            Ok(()) => Exit::success("[addons] Applied essential addon: kube-proxy\n"),
            Err(err) => Exit::failure(
                1,
                format!(
                    "error execution phase addon/kube-proxy: {}\n",
                    capstan_core::errors::error_chain(&err)
                ),
            ),
        }
    }

    pub(super) fn upload_config(&mut self, vm: &GuestVm, what: &str, config: Option<&str>) -> Exit {
        let cluster = match self.control_plane_of(vm.vmid) {
            Ok(cluster) => cluster,
            Err(exit) => return exit,
        };
        if what != "kubeadm" {
            return Exit::failure(1, format!("the lab uploads `kubeadm` only, not {what}\n"));
        }
        let documents = match self.read_config(vm.vmid, config) {
            Ok(documents) => documents,
            Err(exit) => return exit,
        };
        let Some(uploaded) = documents
            .into_iter()
            .find(|d| d["kind"] == "ClusterConfiguration")
        else {
            return Exit::failure(1, "no ClusterConfiguration in the file\n");
        };
        if let Some(state) = self.clusters.get_mut(&cluster) {
            state.kubeadm.cluster = uploaded;
        }
        Exit::success(
            "[upload-config] Storing the configuration used in ConfigMap \"kubeadm-config\" in the \"kube-system\" Namespace\n",
        )
    }
}

/// RFC 7386: maps merge, `null` removes, anything else replaces.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(map) = target {
        for (key, value) in patch {
            if value.is_null() {
                map.remove(key);
            } else {
                merge_patch(map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// The kubelet's `maxPods`, when set.
pub(super) fn max_pods(kubelet: &Value) -> Option<u32> {
    kubelet["maxPods"]
        .as_u64()
        .and_then(|pods| u32::try_from(pods).ok())
}

/// The API server's static pod manifest, its command with the cluster's extra arguments.
pub(super) fn apiserver_manifest(cluster: &Value) -> String {
    let mut out = String::from("# static pod kube-apiserver\ncommand:\n  - kube-apiserver\n");
    let args = cluster["apiServer"]["extraArgs"].as_array();
    for arg in args.into_iter().flatten() {
        let (Some(name), Some(value)) = (arg["name"].as_str(), arg["value"].as_str()) else {
            continue;
        };
        out.push_str(&format!("  - --{name}={value}\n"));
    }
    let volumes = cluster["apiServer"]["extraVolumes"].as_array();
    for volume in volumes.into_iter().flatten() {
        let (Some(host), Some(mount)) = (volume["hostPath"].as_str(), volume["mountPath"].as_str())
        else {
            continue;
        };
        out.push_str(&format!("# volume {host} mounted at {mount}\n"));
    }
    out
}

/// The `AuthenticationConfiguration` the API server of `cluster` (a ClusterConfiguration)
/// reads on a node holding `files`: the file its `authentication-config` argument names,
/// through the `extraVolumes` entry that mounts it into the static pod; `None` without the
/// argument. Without the mount or the file the API server does not start, in its words.
pub(super) fn authentication_file(
    cluster: &Value,
    files: &std::collections::BTreeMap<String, String>,
) -> Result<Option<String>, String> {
    let api_server = &cluster["apiServer"];
    let Some(path) = api_server["extraArgs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|arg| arg["name"] == "authentication-config")
        .and_then(|arg| arg["value"].as_str())
    else {
        return Ok(None);
    };
    let host_path = api_server["extraVolumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|volume| volume["mountPath"].as_str() == Some(path))
        .and_then(|volume| volume["hostPath"].as_str());
    let missing = || {
        format!(
            "kube-apiserver: failed to load AuthenticationConfiguration: open {path}: no such file or directory"
        )
    };
    let host_path = host_path.ok_or_else(missing)?;
    files.get(host_path).cloned().map(Some).ok_or_else(missing)
}

/// Starts the API server of control plane `node` of `cluster` with the authentication its
/// static pod reads (see [`authentication_file`]), or says why it does not start.
pub(super) fn api_server(
    backend: &impl crate::nodes::ClusterBackend,
    (cluster, node): (&str, &str),
    configuration: &Value,
    files: &std::collections::BTreeMap<String, String>,
) -> Result<(), String> {
    let authentication = authentication_file(configuration, files)?;
    backend
        .api_server(cluster, node, true, authentication.as_deref())
        .map_err(|err| capstan_core::errors::error_chain(&err))
}

/// The API server of control plane `node` stopped (`kubeadm reset`).
pub(super) fn api_server_stopped(
    backend: &impl crate::nodes::ClusterBackend,
    cluster: &str,
    node: &str,
) {
    if let Err(err) = backend.api_server(cluster, node, false, None) {
        let error = capstan_core::errors::error_chain(&err);
        tracing::debug!(%error, "the API server was already gone");
    }
}

/// Whether a `skipPhases` list names `phase` (or its parent, `addon`).
pub(super) fn skips(phases: &Value, phase: &str) -> bool {
    let parent = phase.split('/').next().unwrap_or(phase);
    phases
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|skipped| skipped == phase || skipped == parent)
}

/// The network `kubeadm init` configures: `networking.podSubnet` (kube-controller-manager's
/// `--cluster-cidr`, with node IPAM) and `serviceSubnet` (kubeadm's default 10.96.0.0/12),
/// the CNI left to whoever applies one, and kube-proxy's DaemonSet unless the
/// `addon/kube-proxy` phase is skipped.
pub(super) fn kubeadm_network(init: &Value, cluster: &Value) -> Result<ClusterNetwork, String> {
    let networking = &cluster["networking"];
    let pods = networking["podSubnet"]
        .as_str()
        .ok_or("the lab needs ClusterConfiguration.networking.podSubnet (node IPAM): capstan always sets it")?;
    let services = networking["serviceSubnet"]
        .as_str()
        .unwrap_or("10.96.0.0/12");
    let network = ClusterNetwork {
        pods: ClusterNetwork::parse_range(pods, "--cluster-cidr")?,
        services: ClusterNetwork::parse_range(services, "--service-cluster-ip-range")?,
        plugin: NetworkPlugin::Applied,
        kube_proxy: if skips(&init["skipPhases"], "addon/kube-proxy") {
            KubeProxy::Disabled
        } else {
            KubeProxy::DaemonSet
        },
    };
    network.check()?;
    Ok(network)
}

/// The control plane's version `kubeadm init` deploys (`ClusterConfiguration.kubernetesVersion`),
/// refused as kubeadm refuses it: newer than kubeadm, or older than the kubelet.
pub(super) fn init_version(
    cluster: &Value,
    kubelet: KubeVersion,
    kubeadm: KubeVersion,
) -> Result<KubeVersion, Exit> {
    let version = match cluster["kubernetesVersion"]
        .as_str()
        .map(str::parse::<KubeVersion>)
    {
        Some(Ok(version)) => version,
        _ => {
            return Err(Exit::failure(
                1,
                "ClusterConfiguration.kubernetesVersion: invalid or missing version\n",
            ));
        }
    };
    if version > kubeadm {
        return Err(Exit::failure(
            1,
            format!(
                "this version of kubeadm only supports deploying clusters with the control plane version <= v{kubeadm}. Current version: v{version}\n"
            ),
        ));
    }
    if kubelet.minor_version() > version.minor_version() {
        return Err(preflight_error(
            "KubeletVersion",
            &format!(
                "the kubelet version is higher than the control plane version. This is not a supported version skew and may lead to a malfunctional cluster. Kubelet version: \"{kubelet}\" Control plane version: \"{version}\""
            ),
        ));
    }
    Ok(version)
}

/// A failed preflight check, in kubeadm's words.
pub(super) fn preflight_error(check: &str, detail: &str) -> Exit {
    Exit::failure(
        1,
        format!(
            "error execution phase preflight: [preflight] Some fatal errors occurred:\n\t[ERROR {check}]: {detail}\n[preflight] If you know what you are doing, you can make a check non-fatal with `--ignore-preflight-errors=...`\n"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_node_s_patch_from_the_named_directory_is_merged_onto_the_cluster_s() {
        let base = json!({"kind": "KubeletConfiguration", "cgroupDriver": "systemd"});
        let document = json!({"patches": {"directory": "/etc/capstan/kubeadm-patches"}});
        let files = [(
            "/etc/capstan/kubeadm-patches/kubeletconfiguration+merge.json".to_owned(),
            r#"{"maxPods": 150}"#.to_owned(),
        )]
        .into();
        let kubelet = node_kubelet(&base, &document, &files).expect("merged");
        assert_eq!(kubelet["cgroupDriver"], "systemd");
        assert_eq!(max_pods(&kubelet), Some(150));
        assert_eq!(max_pods(&base), None);
    }

    #[test]
    fn the_api_server_runs_with_the_cluster_s_extra_arguments() {
        let cluster = json!({"apiServer": {"extraArgs": [{"name": "audit-log-path", "value": "/var/log/audit.log"}]}});
        assert!(apiserver_manifest(&cluster).contains("  - --audit-log-path=/var/log/audit.log\n"));
    }
}
