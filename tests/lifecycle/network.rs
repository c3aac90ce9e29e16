//! The cluster network on the lab, kubeadm and K3s (Talos's are in the `talos` tests): the
//! declared pod and service ranges as the stock kubectl sees them; Calico applied through the
//! API while the lab's VMs fetch nothing from outside; kube-proxy absent when the file says so,
//! also after an upgrade; and `cni: none` on K3s, where the kubeconfig reaches Flux before any
//! node is Ready, nothing is fenced while the nodes wait for the CNI, the status names the
//! wait, and the cluster goes Ready once a CNI is applied as Flux would.

use std::time::Duration;

use capstan::plan::ActionKind;
use capstan::providers::node_exec::{Command, GuestAgent, NodeExec as _, NodeTarget};
use capstan::providers::proxmox::{
    ClientOptions, ConnectionConfig, ProxmoxClient, TokenSecret, Trust,
};
use capstan_lab::values::LabDuration;
use capstan_lab::world::LabConfig;
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::network::{
    assert_declared_ranges_shown, assert_waits_for_a_cni_unharmed, install_cni_as_flux,
    with_network,
};
use capstan_testkit::{ClusterYaml, World, fleet_yaml, kubectl_with, ready};

const RANGES: &str = "pods: 10.60.0.0/16, services: 10.70.0.0/16";

/// A K3s cluster of one server (embedded SQLite) and `agents` agents, endpoint .`octet`.
fn k3s_cluster(name: &str, octet: u8, agents: u32, network: &str) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  proxmox: homelab
  kubernetes: {{distribution: k3s, version: {release}}}
  endpoint: {{host: k8s-{name}.lab.example, address: 192.168.1.{octet}}}
  network: {{{network}nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  controlPlane:
    replicas: 1
    machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, cpu: host, placement: [pve1]}}
  workers:
    - pool: agents
      replicas: {agents}
      machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, cpu: host, placement: [pve1, pve2, pve3]}}
  rollout: {{minWorkers: 1, drainTimeout: 4s, joinTimeout: 2m}}
  remediation: {{fence: true, after: 2s}}
  delivery:
    flux: {{cluster: management}}
",
        release = capstan_lab::world::DEFAULT_K3S_RELEASE
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeadm_cluster_runs_the_declared_pod_and_service_ranges_kubectl_shows() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let file = with_network(&ClusterYaml::lab("ranges").address(61).render(), RANGES);
    let mut world = World::with_lab(
        LabConfig::default(),
        &fleet_yaml(&["1.36"], false),
        &[("ranges", file)],
        false,
    )
    .await;
    world.start_until_ready(&["ranges"]).await;
    assert_declared_ranges_shown(&world, "ranges");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeadm_bootstrap_applies_calico_through_the_api_while_the_lab_refuses_every_fetch() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let mut world = World::with_lab(
        LabConfig::default(),
        &fleet_yaml(&["1.36"], false),
        &[("calico", ClusterYaml::lab("calico").address(62).render())],
        false,
    )
    .await;
    world.start_until_ready(&["calico"]).await;
    let kubeconfig = world.flux_kubeconfig_file("calico");
    let calico = kubectl_with(
        &kubeconfig,
        &[
            "get",
            "daemonsets",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}",
        ],
    );
    assert!(calico.contains("calico-system/calico-node"), "{calico}");
    assert!(
        calico.contains("kube-system/kube-proxy"),
        "kube-proxy by default: {calico}"
    );
    let installation = kubectl_with(
        &kubeconfig,
        &[
            "get",
            "installations.operator.tigera.io",
            "default",
            "-o",
            "jsonpath={.spec.calicoNetwork.ipPools[0].cidr}",
        ],
    );
    assert_eq!(
        installation, "172.16.0.0/16",
        "over the cluster's pod network"
    );
    let nodes = world.lab.nodes().expect("the lab's node software");
    assert_eq!(
        nodes.refused_fetches(),
        Vec::<String>::new(),
        "no VM tried to fetch anything"
    );

    // The lab does refuse: the manifest capstan used to fetch on the node, asked for there.
    let client = proxmox_client(&world);
    let vm = world
        .vms_of("calico")
        .into_iter()
        .find(|vm| vm.name.contains("-cp-"))
        .expect("a control plane");
    let target = NodeTarget {
        vmid: capstan::model::VmId(vm.vmid),
        proxmox_node: vm.node.clone(),
        name: capstan::model::NodeName::from(vm.name.as_str()),
    };
    let url = "https://raw.githubusercontent.com/projectcalico/calico/v3.31.2/manifests/tigera-operator.yaml";
    let fetch = Command::new(&[
        "kubectl",
        "--kubeconfig",
        "/etc/kubernetes/admin.conf",
        "apply",
        "--server-side",
        "-f",
        url,
    ]);
    let output = GuestAgent::new(client)
        .run(&target, &fetch)
        .await
        .expect("the agent answers");
    assert_ne!(output.exit_code, 0, "{output:?}");
    assert!(output.stderr.contains("no such host"), "{}", output.stderr);
    assert_eq!(nodes.refused_fetches(), [url]);
}

fn proxmox_client(world: &World) -> ProxmoxClient {
    let lab = &world.lab;
    let config = ConnectionConfig::new(
        &lab.proxmox_url(),
        lab.token_id(),
        TokenSecret::new(lab.token()),
        Trust::Fingerprint(lab.fingerprint()),
    )
    .expect("connection config");
    ProxmoxClient::new(&config, ClientOptions::for_lab()).expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeadm_cluster_without_kube_proxy_runs_none_also_after_an_upgrade() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let file = |version: &str| {
        with_network(
            &ClusterYaml::lab("noproxy")
                .address(63)
                .version(version)
                .render(),
            "kubeProxy: false",
        )
    };
    let mut world = World::with_lab(
        LabConfig::default(),
        &fleet_yaml(&["1.36"], false),
        &[("noproxy", file("1.36.2"))],
        false,
    )
    .await;
    world.start_until_ready(&["noproxy"]).await;
    let kubeconfig = world.flux_kubeconfig_file("noproxy");
    let daemon_sets = |kubeconfig: &std::path::Path| {
        kubectl_with(
            kubeconfig,
            &["get", "daemonsets", "-n", "kube-system", "-o", "name"],
        )
    };
    assert!(
        !daemon_sets(&kubeconfig).contains("kube-proxy"),
        "{}",
        daemon_sets(&kubeconfig)
    );
    let dataplane = kubectl_with(
        &kubeconfig,
        &[
            "get",
            "installations.operator.tigera.io",
            "default",
            "-o",
            "jsonpath={.spec.calicoNetwork.linuxDataplane}",
        ],
    );
    assert_eq!(
        dataplane, "BPF",
        "Calico's eBPF dataplane in kube-proxy's place"
    );

    world.write_cluster("noproxy", &file("1.36.3"));
    world
        .wait_for("the upgrade done", |s| {
            ready(s, &["noproxy"])
                && s.clusters["noproxy"]
                    .version
                    .map(|v| v.to_string())
                    .as_deref()
                    == Some("1.36.3")
        })
        .await;
    assert!(
        world.steps_ok(ActionKind::UpgradeControlPlane.name()) >= 1,
        "kubeadm upgrade apply ran"
    );
    let kubeconfig = world.flux_kubeconfig_file("noproxy");
    assert!(
        !daemon_sets(&kubeconfig).contains("kube-proxy"),
        "kubeadm upgrade apply skipped its kube-proxy addon: {}",
        daemon_sets(&kubeconfig)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_k3s_cluster_runs_the_declared_pod_and_service_ranges_kubectl_shows() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let file = k3s_cluster("k3ranges", 64, 2, &format!("{RANGES}, "));
    let mut world = World::with_lab(
        LabConfig::default(),
        &fleet_yaml(&["1.36"], false),
        &[("k3ranges", file)],
        false,
    )
    .await;
    world.start_until_ready(&["k3ranges"]).await;
    assert_declared_ranges_shown(&world, "k3ranges");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_k3s_cluster_without_a_cni_reaches_flux_first_is_not_fenced_and_goes_ready_with_one() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    const CLUSTER: &str = "bare";
    let mut config = LabConfig::default();
    // A silent agent's ping gives up after 200 ms, not a real host's 3 s.
    config.proxmox.timings.agent_timeout = LabDuration(Duration::from_millis(200));
    let mut world = World::with_lab(
        config,
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, k3s_cluster(CLUSTER, 65, 2, "cni: none, "))],
        false,
    )
    .await;
    world.start_daemon().await;
    // The kubeconfig reaches Flux's Secret while no node can be Ready (there is no CNI), and
    // an agent gone silent meanwhile is not fenced.
    let kubeconfig = assert_waits_for_a_cni_unharmed(&world, CLUSTER, 3).await;
    let status = world.status();
    assert!(
        status.clusters[CLUSTER]
            .conditions
            .iter()
            .all(|c| c.kind != "RemediationHeld"),
        "nodes waiting for a CNI count against no maxUnhealthy: {:?}",
        status.clusters[CLUSTER].conditions
    );
    install_cni_as_flux(&world, CLUSTER, &kubeconfig).await;
}
