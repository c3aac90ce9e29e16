//! A simulated cluster configured as a distribution would be: what its API shows of the
//! network (node ranges, the `kubernetes` Service, pod addresses, kube-proxy) and how its
//! nodes wait for a CNI.

use serde_json::{Value, json};

use super::super::{NewCluster, SimCluster, SimNodeConfig};
use super::*;
use crate::clock::LabClock;

fn start(network: ClusterNetwork) -> SimCluster {
    SimCluster::start_now(
        &NewCluster {
            name: "prod".into(),
            version: "1.36.2".into(),
            endpoint_host: None,
            endpoint_port: 6443,
            authority: None,
            network: Some(network),
        },
        LabClock::new(),
    )
    .expect("the cluster starts")
}

fn declared(plugin: NetworkPlugin, kube_proxy: KubeProxy) -> ClusterNetwork {
    ClusterNetwork {
        pods: "10.60.0.0/16".parse().expect("net"),
        services: "10.70.0.0/16".parse().expect("net"),
        plugin,
        kube_proxy,
    }
}

fn ready_reason(cluster: &SimCluster, node: &str) -> (String, String) {
    let object = cluster.object("nodes", None, node).expect("node");
    let ready = object["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or(Value::Null);
    (
        ready["status"].as_str().unwrap_or_default().to_owned(),
        ready["message"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test]
async fn nodes_get_distinct_ranges_of_the_pod_network_and_the_api_its_first_service_address() {
    let cluster = start(declared(NetworkPlugin::Embedded, KubeProxy::Embedded));
    for name in ["cp", "w1", "w2"] {
        cluster
            .register_node(&SimNodeConfig::worker(name))
            .expect("registered");
    }
    let ranges: Vec<String> = ["cp", "w1", "w2"]
        .iter()
        .map(|n| {
            cluster.object("nodes", None, n).expect("node")["spec"]["podCIDR"]
                .as_str()
                .expect("a range")
                .to_owned()
        })
        .collect();
    assert_eq!(ranges, ["10.60.0.0/24", "10.60.1.0/24", "10.60.2.0/24"]);
    let service = cluster
        .object("services", Some("default"), "kubernetes")
        .expect("the kubernetes Service");
    assert_eq!(service["spec"]["clusterIP"], "10.70.0.1");
    let pod = json!({"metadata": {"name": "web"}, "spec": {"nodeName": "w1",
                     "containers": [{"name": "web", "image": "nginx"}]}});
    cluster
        .create_object("pods", Some("default"), pod)
        .expect("a pod");
    let pod = cluster.object("pods", Some("default"), "web").expect("pod");
    assert_eq!(pod["status"]["podIP"], "10.60.1.2", "from its node's range");
    assert!(
        cluster.objects("daemonsets", None).is_empty(),
        "K3s runs kube-proxy and flannel inside its own process"
    );
}

#[tokio::test]
async fn nodes_report_network_plugin_not_ready_until_a_cni_daemon_set_is_applied() {
    let cluster = start(declared(NetworkPlugin::Applied, KubeProxy::Disabled));
    cluster
        .register_node(&SimNodeConfig::worker("w1"))
        .expect("registered");
    cluster.set_node_ready("w1", true).expect("kubelet runs");
    let (status, message) = ready_reason(&cluster, "w1");
    assert_eq!(status, "False");
    assert!(
        message.contains("reason:NetworkPluginNotReady"),
        "{message}"
    );
    assert!(
        cluster
            .object("daemonsets", Some("kube-system"), "kube-proxy")
            .is_none(),
        "kube-proxy is off"
    );
    // A CNI as Flux would install it: its agent's DaemonSet.
    cluster
        .apply_manifest(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: cilium, namespace: kube-system}\nspec:\n  selector: {matchLabels: {k8s-app: cilium}}\n  template:\n    metadata: {labels: {k8s-app: cilium}}\n    spec:\n      hostNetwork: true\n      containers: [{name: agent, image: quay.io/cilium/cilium}]\n      volumes: [{name: etc-cni-netd, hostPath: {path: /etc/cni/net.d}}]\n",
        )
        .expect("applied");
    assert_eq!(ready_reason(&cluster, "w1").0, "True");
    cluster.set_node_ready("w1", false).expect("kubelet stops");
    assert_eq!(ready_reason(&cluster, "w1").0, "Unknown");
}

#[tokio::test]
async fn the_tigera_operator_defines_its_resources_then_deploys_calico_from_an_installation() {
    let cluster = start(declared(NetworkPlugin::Applied, KubeProxy::DaemonSet));
    assert!(
        cluster
            .object("daemonsets", Some("kube-system"), "kube-proxy")
            .is_some(),
        "kubeadm's kube-proxy addon"
    );
    let installation = "apiVersion: operator.tigera.io/v1\nkind: Installation\nmetadata: {name: default}\nspec: {}\n";
    let refused = cluster
        .apply_manifest(installation)
        .expect_err("no CRD yet");
    assert!(
        capstan_core::errors::error_chain(&refused).contains("ensure CRDs are installed first"),
        "{refused}"
    );
    cluster
        .apply_manifest("apiVersion: v1\nkind: Namespace\nmetadata: {name: tigera-operator}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: tigera-operator, namespace: tigera-operator}\nspec:\n  selector: {matchLabels: {name: tigera-operator}}\n  template:\n    metadata: {labels: {name: tigera-operator}}\n    spec: {hostNetwork: true, containers: [{name: tigera-operator, image: quay.io/tigera/operator:v1.40.2}]}\n")
        .expect("the operator");
    cluster.apply_manifest(installation).expect("defined now");
    assert!(
        cluster
            .object("daemonsets", Some("calico-system"), "calico-node")
            .is_some(),
        "Calico deployed"
    );
}

#[tokio::test]
async fn a_pod_range_smaller_than_a_node_share_keeps_the_cluster_from_starting() {
    let mut network = declared(NetworkPlugin::Embedded, KubeProxy::Embedded);
    network.pods = "10.60.0.0/25".parse().expect("net");
    let refused = SimCluster::start_now(
        &NewCluster {
            name: "small".into(),
            version: "1.36.2".into(),
            endpoint_host: None,
            endpoint_port: 6443,
            authority: None,
            network: Some(network),
        },
        LabClock::new(),
    )
    .expect_err("refused");
    assert!(
        refused.to_string().contains("--node-cidr-mask-size"),
        "{refused}"
    );
}
