//! From nothing to every example cluster Ready: nodes Ready with the declared version, kube-vip
//! and Calico applied, the endpoint answering, and Flux's Secret holding a kubeconfig that
//! works with the stock kubectl.

use std::path::Path;

use capstan::connect::{Connections, Providers};
use capstan::model::{NodeName, VmId};
use capstan::providers::node_exec::{Command, GuestAgent, NodeExec, NodeTarget};
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::{World, kubectl_with, ready};

fn example(path: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples-repo")
            .join(path),
    )
    .expect("example file")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_clusters_come_up_from_nothing_and_flux_gets_working_kubeconfigs() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let mut world = World::new(
        &example("capstan.yaml"),
        &[
            ("prod", example("clusters/prod.yaml")),
            ("platform", example("clusters/platform.yaml")),
        ],
    )
    .await;
    world.start_daemon().await;
    let status = world
        .wait_for("both example clusters Ready", |s| {
            ready(s, &["prod", "platform"])
        })
        .await;

    for (cluster, nodes, version) in [("prod", 4, "v1.36.2"), ("platform", 8, "v1.36.4")] {
        let listed: serde_json::Value =
            serde_json::from_str(&world.kubectl(cluster, &["get", "nodes", "-o", "json"]))
                .expect("json");
        let items = listed["items"].as_array().expect("items");
        assert_eq!(items.len(), nodes, "{cluster} has every declared node");
        for node in items {
            assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], version);
            let ready = node["status"]["conditions"]
                .as_array()
                .expect("conditions")
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            assert!(ready, "{cluster}: {} Ready", node["metadata"]["name"]);
        }
        let config: serde_json::Value = serde_json::from_str(&world.kubectl(
            cluster,
            &[
                "-n",
                "kube-system",
                "get",
                "configmap",
                "kubeadm-config",
                "-o",
                "json",
            ],
        ))
        .expect("json");
        let configuration = config["data"]["ClusterConfiguration"]
            .as_str()
            .expect("ClusterConfiguration");
        assert!(
            configuration.contains(&format!("k8s-{cluster}.lab.example:6443")),
            "the endpoint kubeadm init used: {configuration}"
        );
        assert_eq!(
            status.clusters[cluster]
                .version
                .map(|v| format!("v{v}"))
                .as_deref(),
            Some(version)
        );

        // Flux's Secret holds a kubeconfig that works.
        let delivered = world
            .flux_kubeconfig(cluster)
            .expect("Flux Secret holds a kubeconfig");
        let file = world
            .state
            .path()
            .join(format!("{cluster}-from-flux.kubeconfig"));
        std::fs::write(&file, delivered).expect("write");
        let nodes_seen = kubectl_with(&file, &["get", "nodes", "-o", "name"]);
        assert_eq!(nodes_seen.lines().count(), nodes);
    }

    // kube-vip holds each endpoint's address on the control planes.
    let files = capstan::source::read_repo(world.repo.path()).expect("repo");
    let fleet = capstan::spec::load(&files).desired.expect("valid").fleet;
    let connections = Connections::for_lab(
        &fleet,
        &world.lab.lab_file(),
        &world.lab.management_kubeconfig(),
        world.lab.api_addresses(),
    )
    .await
    .expect("connections");
    let agent = GuestAgent::new(connections.proxmox("homelab").expect("homelab").clone());
    for vm in world.vms().iter().filter(|vm| vm.name.contains("-cp-")) {
        let target = NodeTarget {
            vmid: VmId(vm.vmid),
            proxmox_node: vm.node.clone(),
            name: NodeName(vm.name.as_str().into()),
        };
        let manifest = agent
            .run(
                &target,
                &Command::new(&["cat", "/etc/kubernetes/manifests/kube-vip.yaml"]),
            )
            .await
            .expect("agent");
        let address = if vm.name.contains("prod") {
            "192.168.1.23"
        } else {
            "192.168.1.24"
        };
        assert!(
            manifest.stdout.contains(&format!("value: \"{address}\"")),
            "{}: kube-vip holds {address}",
            vm.name
        );
        assert!(
            manifest.stdout.contains("/etc/kubernetes/admin.conf"),
            "{}: kube-vip runs with admin.conf after init",
            vm.name
        );
        // Calico goes through the cluster's API (tests/lifecycle/network.rs): no node holds
        // a manifest to apply.
        let calico = agent
            .run(
                &target,
                &Command::new(&["test", "-f", "/etc/capstan/calico-installation.yaml"]),
            )
            .await
            .expect("agent");
        assert!(
            !calico.success(),
            "{}: no Calico manifest on the node",
            vm.name
        );
    }
    world.kill_daemon().await;
}
