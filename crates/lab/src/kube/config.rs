//! The lab configuration of simulated clusters that exist before capstan runs (embedded in the
//! lab config under `clusters:`): their versions, nodes and workloads, and the default world
//! of the `management` cluster where Flux runs.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use capstan_core::model::Role;

/// The name of the management cluster, always present in a lab.
pub const MANAGEMENT: &str = "management";

/// One simulated cluster that exists when the lab starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimClusterConfig {
    /// Kubernetes version the API server reports (`1.36.2` or `v1.36.2`).
    #[serde(default = "default_version")]
    pub version: String,
    /// The cluster's API endpoint host, added to the serving certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_host: Option<String>,
    /// The endpoint's port: the lab serves `endpointHost:endpointPort` on a loopback port of its
    /// own and tells capstan where (`ApiAddresses` in the `lab` module).
    #[serde(default = "default_endpoint_port")]
    pub endpoint_port: u16,
    /// Registered nodes.
    #[serde(default)]
    pub nodes: Vec<SimNodeConfig>,
    /// Workloads placed on the nodes.
    #[serde(default)]
    pub workloads: SimWorkloads,
}

fn default_version() -> String {
    "v1.36.2".to_owned()
}

fn default_endpoint_port() -> u16 {
    6443
}

fn default_true() -> bool {
    true
}

fn default_namespace() -> String {
    "default".to_owned()
}

fn default_replicas() -> u32 {
    1
}

/// A node as its kubelet registers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimNodeConfig {
    /// Node name.
    pub name: String,
    /// Control plane (labelled and tainted as kubeadm does) or worker.
    #[serde(default = "default_role")]
    pub role: Role,
    /// Kubelet version (default: the cluster's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_version: Option<String>,
    /// Whether the Ready condition is True.
    #[serde(default = "default_true")]
    pub ready: bool,
    /// Whether the node is cordoned.
    #[serde(default)]
    pub unschedulable: bool,
    /// InternalIP address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Extra labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The taints it registers with, exactly; unset: as kubeadm registers it (the
    /// control-plane taint on a control plane, none on a worker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<SimTaint>>,
    /// Extra annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Its kubelet's `maxPods`: the Node's pod capacity (default 110).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<u32>,
}

/// A Node taint, as the API writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimTaint {
    /// Key.
    pub key: String,
    /// Value, when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

impl SimTaint {
    /// The taint kubeadm and Talos give control planes that take no workloads.
    pub fn control_plane() -> Self {
        SimTaint {
            key: "node-role.kubernetes.io/control-plane".to_owned(),
            value: None,
            effect: "NoSchedule".to_owned(),
        }
    }
}

fn default_role() -> Role {
    Role::Worker
}

impl SimNodeConfig {
    /// A Ready worker named `name` with the cluster's version.
    pub fn worker(name: &str) -> Self {
        SimNodeConfig {
            name: name.to_owned(),
            role: Role::Worker,
            kubelet_version: None,
            ready: true,
            unschedulable: false,
            address: None,
            labels: BTreeMap::new(),
            taints: None,
            annotations: BTreeMap::new(),
            max_pods: None,
        }
    }

    /// A Ready control-plane node named `name`.
    pub fn control_plane(name: &str) -> Self {
        SimNodeConfig {
            role: Role::ControlPlane,
            ..SimNodeConfig::worker(name)
        }
    }
}

/// Workloads on a simulated cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimWorkloads {
    /// Deployments (each gets a ReplicaSet and pods; optionally a PodDisruptionBudget).
    #[serde(default)]
    pub deployments: Vec<SimDeployment>,
    /// DaemonSets (one pod per node).
    #[serde(default)]
    pub daemon_sets: Vec<SimDaemonSet>,
    /// Bare pods (no controller).
    #[serde(default)]
    pub pods: Vec<SimPod>,
}

/// A Deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimDeployment {
    /// Name (also the `app` label).
    pub name: String,
    /// Namespace (created when missing).
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// Replicas.
    #[serde(default = "default_replicas")]
    pub replicas: u32,
    /// A PodDisruptionBudget named after the Deployment with this `minAvailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdb_min_available: Option<u32>,
    /// Pods mount an emptyDir volume (drains must allow deleting its data).
    #[serde(default)]
    pub empty_dir: bool,
}

/// A DaemonSet. Its pods tolerate every taint (as kube-proxy and CNI agents do), so it runs
/// on control planes and cordoned nodes alike.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimDaemonSet {
    /// Name (also the `app` label).
    pub name: String,
    /// Namespace (created when missing).
    #[serde(default = "default_namespace")]
    pub namespace: String,
}

/// A pod without a controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimPod {
    /// Name.
    pub name: String,
    /// Namespace (created when missing).
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// Node to run on (default: the scheduler picks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Mounts an emptyDir volume.
    #[serde(default)]
    pub empty_dir: bool,
    /// A static pod's mirror (annotation `kubernetes.io/config.mirror`), which drains skip.
    #[serde(default)]
    pub mirror: bool,
}

fn pod_spec(name: &str, empty_dir: bool) -> Value {
    let mut spec = json!({
        "containers": [{"name": name, "image": format!("registry.lab.example/{name}:1.0"),
                        "imagePullPolicy": "IfNotPresent"}],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
    });
    if empty_dir {
        spec["volumes"] = json!([{"name": "scratch", "emptyDir": {}}]);
        spec["containers"][0]["volumeMounts"] =
            json!([{"name": "scratch", "mountPath": "/scratch"}]);
    }
    spec
}

impl SimWorkloads {
    /// The objects to create, in order: `(namespace, object, plural)`.
    pub(crate) fn objects(&self) -> Vec<(String, Value, &'static str)> {
        let mut objects = Vec::new();
        for d in &self.deployments {
            let labels = json!({"app": d.name});
            objects.push((
                d.namespace.clone(),
                json!({
                    "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": d.name, "labels": labels},
                    "spec": {
                        "replicas": d.replicas,
                        "selector": {"matchLabels": labels},
                        "template": {"metadata": {"labels": labels}, "spec": pod_spec(&d.name, d.empty_dir)},
                    },
                }),
                "deployments",
            ));
            if let Some(min) = d.pdb_min_available {
                objects.push((
                    d.namespace.clone(),
                    json!({
                        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                        "metadata": {"name": d.name},
                        "spec": {"minAvailable": min, "selector": {"matchLabels": labels}},
                    }),
                    "poddisruptionbudgets",
                ));
            }
        }
        for ds in &self.daemon_sets {
            let labels = json!({"app": ds.name});
            let mut daemon_spec = pod_spec(&ds.name, false);
            daemon_spec["tolerations"] = json!([{"operator": "Exists"}]);
            objects.push((
                ds.namespace.clone(),
                json!({
                    "apiVersion": "apps/v1", "kind": "DaemonSet",
                    "metadata": {"name": ds.name, "labels": labels},
                    "spec": {
                        "selector": {"matchLabels": labels},
                        "template": {"metadata": {"labels": labels}, "spec": daemon_spec},
                    },
                }),
                "daemonsets",
            ));
        }
        for pod in &self.pods {
            let mut spec = pod_spec(&pod.name, pod.empty_dir);
            if let Some(node) = &pod.node {
                spec["nodeName"] = json!(node);
            }
            let mut object = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod.name, "labels": {"app": pod.name}},
                "spec": spec,
                "status": {"phase": "Pending"},
            });
            if pod.mirror {
                object["metadata"]["annotations"] =
                    json!({"kubernetes.io/config.mirror": format!("{:016x}", pod.name.len())});
            }
            objects.push((pod.namespace.clone(), object, "pods"));
        }
        objects
    }
}

impl SimClusterConfig {
    /// The default management cluster: a control plane and two workers, all Ready, running
    /// Flux's four controllers as Deployments in `flux-system` and kube-proxy as a DaemonSet.
    pub fn management_default() -> Self {
        let flux = |name: &str| SimDeployment {
            name: name.to_owned(),
            namespace: "flux-system".to_owned(),
            replicas: 1,
            pdb_min_available: None,
            empty_dir: name == "source-controller",
        };
        SimClusterConfig {
            version: default_version(),
            endpoint_host: None,
            endpoint_port: default_endpoint_port(),
            nodes: [
                SimNodeConfig::control_plane("management-cp-1"),
                SimNodeConfig::worker("management-worker-1"),
                SimNodeConfig::worker("management-worker-2"),
            ]
            .into_iter()
            .zip(10..)
            .map(|(node, host)| SimNodeConfig {
                address: Some(format!("10.20.0.{host}")),
                ..node
            })
            .collect(),
            workloads: SimWorkloads {
                deployments: [
                    "source-controller",
                    "kustomize-controller",
                    "helm-controller",
                    "notification-controller",
                ]
                .into_iter()
                .map(flux)
                .collect(),
                daemon_sets: vec![SimDaemonSet {
                    name: "kube-proxy".to_owned(),
                    namespace: "kube-system".to_owned(),
                }],
                pods: Vec::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_configs_read_from_yaml_and_refuse_unknown_fields() {
        let yaml = "version: 1.35.4\nnodes:\n  - {name: cp, role: control-plane}\n  - {name: w1, ready: false}\nworkloads:\n  deployments:\n    - {name: web, replicas: 2, pdbMinAvailable: 2, emptyDir: true}\n  daemonSets: [{name: agent, namespace: kube-system}]\n  pods: [{name: static, node: cp, mirror: true}]\n";
        let config: SimClusterConfig = serde_saphyr::from_str(yaml).expect("config");
        assert_eq!(config.nodes[0].role, Role::ControlPlane);
        assert!(!config.nodes[1].ready);
        assert_eq!(config.workloads.deployments[0].pdb_min_available, Some(2));
        assert_eq!(config.workloads.objects().len(), 4);
        let wrong = serde_saphyr::from_str::<SimClusterConfig>("versoin: 1.35.4\n");
        assert!(wrong.is_err());
    }
}
