//! Patches on kubeadm and K3s clusters the daemon builds: the kubelet's `maxPods` and an
//! audit-log argument of the API server reach the nodes (the Node's pod capacity, the API
//! server's static pod); K3s started with `disable: [traefik, servicelb]` runs no Traefik where
//! another K3s cluster does; and a pool patch changed in Git replaces that pool's workers and
//! no other machine, as its preview says, with the rendered configuration's difference.

use capstan::clock::Clock as _;
use capstan::model::Role;
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::{ClusterYaml, World, fleet_yaml, k3s_lab_cluster, kubectl_with, ready};

/// `text` with `patches` (YAML lines, indented for `spec`) added under `spec`.
fn with_cluster_patches(text: &str, patches: &str) -> String {
    text.replacen(
        "  controlPlane:\n",
        &format!("  patches:\n{patches}  controlPlane:\n"),
        1,
    )
}

const KUBELET_AND_AUDIT: &str = "    - apiVersion: kubelet.config.k8s.io/v1beta1
      kind: KubeletConfiguration
      maxPods: 150
    - apiVersion: kubeadm.k8s.io/v1beta4
      kind: ClusterConfiguration
      apiServer:
        extraArgs:
          - name: audit-log-path
            value: /var/log/kubernetes/audit.log
";

fn flux_kubeconfig(world: &World, cluster: &str) -> std::path::PathBuf {
    let delivered = world.flux_kubeconfig(cluster).expect("delivered to Flux");
    let file = world
        .state
        .path()
        .join(format!("{cluster}-flux.kubeconfig"));
    std::fs::write(&file, delivered).expect("write kubeconfig");
    file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeadm_cluster_s_kubelet_and_api_server_patches_reach_its_nodes() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let file = with_cluster_patches(
        &ClusterYaml::lab("tuned")
            .address(71)
            .workers(1)
            .render()
            .replacen("minWorkers: 2", "minWorkers: 1", 1),
        KUBELET_AND_AUDIT,
    );
    let mut world = World::new(&fleet_yaml(&["1.36"], false), &[("tuned", file)]).await;
    world.start_until_ready(&["tuned"]).await;
    let kubeconfig = flux_kubeconfig(&world, "tuned");
    let capacity = kubectl_with(
        &kubeconfig,
        &[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.status.capacity.pods} {end}",
        ],
    );
    assert_eq!(
        capacity.split_whitespace().collect::<Vec<_>>(),
        ["150", "150"],
        "{capacity}"
    );
    let nodes = world.lab.nodes().expect("the lab's node software");
    let control_plane = world
        .vms_of("tuned")
        .into_iter()
        .find(|vm| vm.name.contains("-cp-"))
        .expect("a control plane");
    let vmid = capstan::model::VmId(control_plane.vmid);
    let manifest = nodes
        .file(vmid, "/etc/kubernetes/manifests/kube-apiserver.yaml")
        .expect("the API server's static pod");
    assert!(
        manifest.contains("--audit-log-path=/var/log/kubernetes/audit.log"),
        "{manifest}"
    );
    let kubelet = nodes
        .file(vmid, "/var/lib/kubelet/config.yaml")
        .expect("the kubelet's config");
    assert!(kubelet.contains("maxPods: 150"), "{kubelet}");
}

/// A K3s cluster of one server and one agent at 192.168.1.`octet`, with `patches`.
fn k3s_cluster(name: &str, octet: u8, patches: &str) -> String {
    let cluster = k3s_lab_cluster(name, octet);
    if patches.is_empty() {
        return cluster;
    }
    cluster.replacen(
        "  controlPlane:\n",
        &format!("  patches:\n{patches}  controlPlane:\n"),
        1,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k3s_started_with_traefik_and_servicelb_disabled_runs_no_traefik() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[
            (
                "lean",
                k3s_cluster("lean", 72, "    - disable: [traefik, servicelb]\n"),
            ),
            ("stock", k3s_cluster("stock", 73, "")),
        ],
    )
    .await;
    world.start_until_ready(&["lean", "stock"]).await;
    let deployments = |cluster: &str| {
        kubectl_with(
            &flux_kubeconfig(&world, cluster),
            &[
                "get",
                "deployments",
                "-n",
                "kube-system",
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ],
        )
    };
    assert!(
        !deployments("lean").contains("traefik"),
        "{}",
        deployments("lean")
    );
    assert!(
        deployments("stock").contains("traefik"),
        "K3s deploys it unless disabled"
    );
    let nodes = world.lab.nodes().expect("the lab's node software");
    let server = world
        .vms_of("lean")
        .into_iter()
        .find(|vm| vm.name.contains("-cp-"))
        .expect("a server");
    let config = nodes
        .file(
            capstan::model::VmId(server.vmid),
            "/etc/rancher/k3s/config.yaml",
        )
        .expect("K3s's configuration");
    assert!(
        config.contains("traefik") && config.contains("servicelb"),
        "the keys are there"
    );
}

const STORAGE_POOL: &str = "    - pool: storage
      replicas: 1
      machine: {template: debian13-k8s, cores: 2, memoryMiB: 4096, placement: [pve3]}
      patches:
        - apiVersion: kubelet.config.k8s.io/v1beta1
          kind: KubeletConfiguration
          maxPods: MAX
";

fn two_pools(max_pods: u32) -> String {
    ClusterYaml::lab("pools")
        .address(74)
        .workers(1)
        .render()
        .replacen(
            "  rollout:",
            &format!(
                "{}  rollout:",
                STORAGE_POOL.replace("MAX", &max_pods.to_string())
            ),
            1,
        )
        .replacen("minWorkers: 2", "minWorkers: 1", 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_patch_changed_in_git_replaces_that_pool_s_workers_and_no_other_machine() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let mut world = World::new(&fleet_yaml(&["1.36"], false), &[("pools", two_pools(150))]).await;
    world.start_until_ready(&["pools"]).await;
    let names = |world: &World| -> Vec<String> {
        world
            .vm_views("pools")
            .into_iter()
            .map(|vm| vm.name)
            .collect()
    };
    let before = names(&world);
    assert_eq!(before.len(), 3, "{before:?}");
    let storage: Vec<&String> = before.iter().filter(|n| n.contains("-storage-")).collect();
    assert_eq!(storage.len(), 1);

    // The preview of the change names the pool's patches as the cause of the replacement and
    // shows the rendered difference.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let address = capstan::daemon::http::serve("127.0.0.1:0".parse().expect("addr"), world.board())
        .await
        .expect("serve");
    let server = format!("http://{address}");
    let repo = capstan_testkit::git::preview_repo(
        world.repo.path(),
        "pools",
        &two_pools(150),
        "pods",
        &two_pools(200),
    );
    let now = world.lab.clock().now().to_string();
    let run = capstan_testkit::cli::preview(repo.path(), "pods", &server, &now, "json").await;
    run.assert_code(0);
    let preview: serde_json::Value = serde_json::from_str(&run.stdout).expect("json");
    let cluster = &preview["clusters"][0];
    assert_eq!(
        cluster["changes"],
        serde_json::json!(["replaces 1 worker: workers.storage.patches changed"]),
        "{cluster:#}"
    );
    let diffs = cluster["configDiffs"].as_array().expect("config diffs");
    assert_eq!(diffs.len(), 1, "the storage pool's only: {diffs:#?}");
    let diff = diffs[0].as_str().expect("a diff");
    assert!(
        diff.contains("workers.storage (rendered configuration)"),
        "{diff}"
    );
    assert!(diff.contains("-maxPods: 150\n+maxPods: 200"), "{diff}");

    world.write_cluster("pools", &two_pools(200));
    world
        .wait_for("the storage worker replaced", |s| {
            ready(s, &["pools"])
                && s.clusters["pools"]
                    .nodes
                    .iter()
                    .filter(|n| n.role == Role::Worker && n.name.as_str().contains("-storage-"))
                    .all(|n| n.name.as_str() != storage[0].as_str())
        })
        .await;
    let after = names(&world);
    for kept in before.iter().filter(|n| !n.contains("-storage-")) {
        assert!(after.contains(kept), "{kept} untouched: {after:?}");
    }
    assert!(!after.contains(storage[0]), "{after:?}");
    let capacity = kubectl_with(
        &flux_kubeconfig(&world, "pools"),
        &[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.status.capacity.pods} {end}",
        ],
    );
    for entry in capacity.split_whitespace() {
        let (name, pods) = entry.split_once('=').expect("name=pods");
        let expected = if name.contains("-storage-") {
            "200"
        } else {
            "110"
        };
        assert_eq!(pods, expected, "{capacity}");
    }
}
