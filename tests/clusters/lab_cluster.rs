//! The whole lab through capstan's real clients over the real wire protocols: VMs cloned and
//! started with the Proxmox client, a kubeadm cluster built with `providers::kubeadm` over the
//! guest agent, and the result judged by the stock `kubectl` (through the kubeconfig `lab.json`
//! lists) and by capstan's own `KubeClusterClient`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::lab_support::{
    CLUSTER, PATIENCE, UpCluster, bring_up, eventually, kubectl, ready_status,
};
use capstan::clock::Clock as _;
use capstan::providers::kube::{ClusterClient, KubeClusterClient, client_certificate_expiry};
use capstan::providers::kubeadm;
use capstan::providers::proxmox::ProxmoxProvider;
use capstan_testkit::judge::{self, Judge};

const VERSION: &str = "v1.36.2";
const ENDPOINT: &str = "k8s-prod.lab.example:6443";

fn node_names(up: &UpCluster) -> BTreeSet<String> {
    std::iter::once(&up.control_plane)
        .chain(&up.workers)
        .map(|vm| vm.target.name.to_string())
        .collect()
}

/// capstan's client on the kubeconfig file `lab.json` lists for the cluster.
async fn client(up: &UpCluster) -> KubeClusterClient {
    let text = std::fs::read_to_string(up.setup.kubeconfig_file(CLUSTER)).expect("kubeconfig");
    KubeClusterClient::connect(&text)
        .await
        .expect("capstan's client connects")
}

/// Waits (through capstan's client) until every node is Ready with the declared version.
async fn wait_all_ready(up: &UpCluster) {
    let client = client(up).await;
    let names = node_names(up);
    let started = std::time::Instant::now();
    loop {
        let nodes = client.nodes().await.expect("nodes");
        let ready = names.iter().all(|name| {
            nodes.iter().any(|n| {
                n.name.as_str() == name.as_str() && n.ready && n.kubelet_version == VERSION
            })
        });
        if ready {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "nodes not all Ready with {VERSION}: {nodes:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// `sha256:<hex>` of the CA's public key, computed by openssl the way kubeadm's documentation
/// shows (`openssl x509 -pubkey | openssl rsa/pkey -pubin -outform der | sha256sum`).
fn openssl_ca_hash(kubeconfig: &str) -> String {
    use base64::Engine as _;
    let config: serde_json::Value = serde_saphyr::from_str(kubeconfig).expect("kubeconfig YAML");
    let ca = config["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .expect("embedded CA");
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca)
        .expect("base64");
    let dir = tempfile::tempdir().expect("dir");
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, pem).expect("write CA");
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl x509 -pubkey -noout -in '{}' | openssl pkey -pubin -outform der | sha256sum",
            ca_file.display()
        ))
        .output()
        .expect("sh and openssl");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let hex = stdout.split_whitespace().next().expect("a digest");
    assert_eq!(hex.len(), 64, "{stdout}");
    format!("sha256:{hex}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_built_over_the_guest_agent_is_ready_for_kubectl_and_capstan() {
    if !judge::present(&[Judge::Kubectl, Judge::Openssl]) {
        return;
    }
    let up = bring_up().await;
    let setup = &up.setup;

    // lab.json lists the cluster kubeadm init created, next to management.
    let listed: Vec<String> = setup.lab_json().clusters.into_keys().collect();
    assert_eq!(listed, ["management", CLUSTER]);
    let kubeconfig = setup.kubeconfig_file(CLUSTER);

    // The stock kubectl: three Ready nodes with the declared version, roles and addresses.
    let nodes = eventually("three Ready nodes in kubectl", || async {
        let list = kubectl(&kubeconfig, &["get", "nodes", "-o", "json"])
            .await
            .json();
        let items = list["items"].as_array().cloned().unwrap_or_default();
        (items.len() == 3 && items.iter().all(|n| ready_status(n) == "True")).then_some(items)
    })
    .await;
    eprintln!("lab: all three nodes Ready in kubectl");
    let by_name: BTreeMap<String, serde_json::Value> = nodes
        .into_iter()
        .map(|n| (n["metadata"]["name"].as_str().expect("name").to_owned(), n))
        .collect();
    assert_eq!(
        by_name.keys().cloned().collect::<BTreeSet<_>>(),
        node_names(&up)
    );
    for vm in std::iter::once(&up.control_plane).chain(&up.workers) {
        let node = &by_name[vm.target.name.as_str()];
        assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], VERSION);
        let internal = node["status"]["addresses"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
            .expect("InternalIP");
        assert_eq!(internal["address"], vm.address.to_string());
    }
    let control_plane = &by_name[up.control_plane.target.name.as_str()];
    assert!(
        control_plane["metadata"]["labels"]
            .get("node-role.kubernetes.io/control-plane")
            .is_some()
    );
    assert_eq!(
        control_plane["spec"]["taints"],
        serde_json::json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
    );
    for worker in &up.workers {
        let node = &by_name[worker.target.name.as_str()];
        assert!(node["spec"].get("taints").is_none(), "{node}");
    }

    // kubeadm-config holds the configuration kubeadm init read: the endpoint and the version.
    let config_map = kubectl(
        &kubeconfig,
        &[
            "-n",
            "kube-system",
            "get",
            "configmap",
            "kubeadm-config",
            "-o",
            "json",
        ],
    )
    .await
    .json();
    let text = config_map["data"]["ClusterConfiguration"]
        .as_str()
        .expect("ClusterConfiguration");
    let cluster_configuration: serde_json::Value =
        serde_saphyr::from_str(text).expect("ClusterConfiguration is YAML");
    assert_eq!(cluster_configuration["controlPlaneEndpoint"], ENDPOINT);
    assert_eq!(cluster_configuration["kubernetesVersion"], VERSION);
    assert_eq!(cluster_configuration["clusterName"], CLUSTER);
    assert_eq!(
        cluster_configuration["networking"]["podSubnet"],
        "172.16.0.0/16"
    );

    // capstan's own client sees the same.
    let capstan = client(&up).await;
    let seen = capstan.nodes().await.expect("nodes");
    assert_eq!(
        seen.iter()
            .map(|n| n.name.to_string())
            .collect::<BTreeSet<_>>(),
        node_names(&up)
    );
    assert!(seen.iter().all(|n| n.ready && n.kubelet_version == VERSION));
    let seen_cp = seen
        .iter()
        .find(|n| n.name == up.control_plane.target.name)
        .expect("control plane");
    assert_eq!(seen_cp.roles, ["control-plane"]);
    let data = capstan
        .config_map("kube-system", "kubeadm-config")
        .await
        .expect("read")
        .expect("kubeadm-config exists");
    assert_eq!(data["ClusterConfiguration"], text);
    assert_eq!(
        capstan.authenticated_user().await.expect("authenticates"),
        "kubernetes-admin"
    );

    // admin.conf read through the guest agent is the kubeconfig lab.json points at, and the
    // join hash is kubeadm's: sha256 over the CA's SubjectPublicKeyInfo.
    let admin = setup
        .kubeadm
        .admin_kubeconfig(&up.control_plane.target)
        .await
        .expect("admin.conf");
    assert_eq!(admin, std::fs::read_to_string(&kubeconfig).expect("file"));
    let ticket = setup
        .kubeadm
        .join_ticket(&up.control_plane.target)
        .await
        .expect("ticket");
    assert_eq!(ticket.api_server_endpoint, ENDPOINT);
    assert_eq!(ticket.ca_cert_hash, openssl_ca_hash(&admin));
    setup.lab.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_renewal_moves_the_expiry_and_lab_json_keeps_working() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let up = bring_up().await;
    wait_all_ready(&up).await;
    let setup = &up.setup;
    let kubeconfig = setup.kubeconfig_file(CLUSTER);
    let read = || std::fs::read_to_string(&kubeconfig).expect("kubeconfig");
    let expiry = |text: &str| {
        client_certificate_expiry(text)
            .expect("readable")
            .expect("a client certificate")
    };
    let before = expiry(&read());

    // 340 days on: within capstan's renewal window (30 days before expiry by default).
    let clock = setup.lab.clock();
    clock.advance(Duration::from_secs(340 * 24 * 3600));
    setup
        .kubeadm
        .run_steps(
            "renew certificates",
            &up.control_plane.target,
            &kubeadm::renew_certificates(),
        )
        .await
        .expect("renewal");

    let admin = setup
        .kubeadm
        .admin_kubeconfig(&up.control_plane.target)
        .await
        .expect("admin.conf");
    let after = expiry(&admin);
    let year = jiff::SignedDuration::from_hours(24 * 365);
    assert!(
        after.duration_since(before) >= jiff::SignedDuration::from_hours(24 * 339),
        "{before} -> {after}"
    );
    assert!(
        after.duration_since(clock.now() + year).abs() < jiff::SignedDuration::from_secs(60),
        "a year from the lab clock: {after}"
    );

    // lab.json's file holds the renewed kubeconfig, and it works for kubectl and capstan.
    let file = read();
    assert_eq!(file, admin);
    assert_eq!(expiry(&file), after);
    let nodes = kubectl(&kubeconfig, &["get", "nodes", "-o", "json"])
        .await
        .json();
    assert_eq!(nodes["items"].as_array().map(Vec::len), Some(3));
    let capstan = KubeClusterClient::connect(&file).await.expect("connects");
    assert_eq!(
        capstan.authenticated_user().await.expect("authenticates"),
        "kubernetes-admin"
    );
    setup.lab.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroying_a_vm_makes_its_node_not_ready() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let up = bring_up().await;
    wait_all_ready(&up).await;
    let setup = &up.setup;
    let gone = &up.workers[0];
    setup
        .proxmox
        .destroy_vm(&gone.expected)
        .await
        .expect("destroyed");
    assert!(setup.lab.proxmox().vm(gone.target.vmid.0).is_none());

    let kubeconfig = setup.kubeconfig_file(CLUSTER);
    let nodes = eventually("the destroyed VM's node is NotReady", || async {
        let list = kubectl(&kubeconfig, &["get", "nodes", "-o", "json"])
            .await
            .json();
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let status = |name: &str| {
            items
                .iter()
                .find(|n| n["metadata"]["name"] == name)
                .map(ready_status)
        };
        (status(gone.target.name.as_str()).as_deref() != Some("True")).then(|| {
            items
                .iter()
                .map(|n| {
                    (
                        n["metadata"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        ready_status(n),
                    )
                })
                .collect::<BTreeMap<_, _>>()
        })
    })
    .await;
    // The kubelet stopped posting status: Unknown, as the node lifecycle controller marks it.
    assert_eq!(nodes[gone.target.name.as_str()], "Unknown");
    assert_eq!(nodes[up.workers[1].target.name.as_str()], "True");
    assert_eq!(nodes[up.control_plane.target.name.as_str()], "True");
    setup.lab.stop();
}
