//! capstan's own kubeadm steps (providers::kubeadm) run against the node software: the two must
//! agree, and every refusal reads as kubeadm's.

use std::collections::BTreeMap;
use std::sync::Mutex;

use std::net::IpAddr;
use std::time::Duration;

use capstan::model::{NodeName, Role, VmId};
use capstan::providers::kubeadm::{self as steps, Kubeadm, KubeadmError};
use capstan::providers::node_exec::{Command, ExecError, NodeExec, NodeTarget, Output};
use capstan::scheduling::Registration;
use capstan_lab::clock::LabClock;
use capstan_lab::nodes::{
    BackendError, ClusterAccess, ClusterBackend, NewCluster, NewNode, NodeSoftware, NodeTimings,
};
use capstan_lab::proxmox::{GuestIdentity, PowerEvent};
use capstan_lab::values::KubeVersion;

/// Clones share the clusters (the node software holds one, the test another).
#[derive(Default, Clone)]
struct FakeClusters {
    clusters: std::sync::Arc<Mutex<BTreeMap<String, FakeCluster>>>,
}

#[derive(Default, Clone)]
struct FakeCluster {
    version: Option<KubeVersion>,
    nodes: BTreeMap<String, (bool, KubeVersion, Role)>,
    renewals: u32,
    kube_proxy_deployments: u32,
}

impl FakeClusters {
    fn cluster(&self, name: &str) -> FakeCluster {
        self.clusters
            .lock()
            .expect("lock")
            .get(name)
            .cloned()
            .unwrap_or_default()
    }
}

impl ClusterBackend for FakeClusters {
    fn talos_api(&self, _: std::net::IpAddr, _: Option<std::net::SocketAddr>) {}
    fn api_server(
        &self,
        cluster: &str,
        _: &str,
        running: bool,
        _: Option<&str>,
    ) -> Result<(), BackendError> {
        if !running || self.clusters.lock().expect("lock").contains_key(cluster) {
            return Ok(());
        }
        Err(BackendError::NoCluster {
            cluster: cluster.to_owned(),
        })
    }
    fn remove_cluster(&self, cluster: &str) {
        self.clusters.lock().expect("lock").remove(cluster);
    }
    fn create_cluster(&self, request: &NewCluster) -> Result<ClusterAccess, BackendError> {
        let mut clusters = self.clusters.lock().expect("lock");
        clusters.insert(
            request.name.clone(),
            FakeCluster {
                version: Some(request.version),
                ..Default::default()
            },
        );
        Ok(ClusterAccess {
            admin_kubeconfig: "kubeconfig-0".into(),
            ca_cert_hash: "sha256:cafe".into(),
        })
    }
    fn register_node(&self, cluster: &str, node: &NewNode) -> Result<(), BackendError> {
        let mut clusters = self.clusters.lock().expect("lock");
        let entry = clusters
            .get_mut(cluster)
            .ok_or_else(|| BackendError::NoCluster {
                cluster: cluster.to_owned(),
            })?;
        entry.nodes.insert(
            node.name.clone(),
            (node.ready, node.kubelet_version, node.role),
        );
        Ok(())
    }
    fn set_node_ready(&self, cluster: &str, node: &str, ready: bool) {
        let mut clusters = self.clusters.lock().expect("lock");
        if let Some(entry) = clusters
            .get_mut(cluster)
            .and_then(|c| c.nodes.get_mut(node))
        {
            entry.0 = ready;
        }
    }
    fn set_storage_unavailable(&self, _: &str, _: Option<String>) {
        // kubeadm's etcd runs on the control planes: these tests fault no datastore.
    }
    fn set_version(&self, cluster: &str, version: KubeVersion) {
        if let Some(entry) = self.clusters.lock().expect("lock").get_mut(cluster) {
            entry.version = Some(version);
        }
    }
    fn apply_manifest(&self, cluster: &str, _: &str) -> Result<String, BackendError> {
        // capstan applies nothing through a node's kubectl.
        Err(BackendError::NoCluster {
            cluster: cluster.to_owned(),
        })
    }
    fn deploy_kube_proxy(&self, cluster: &str) -> Result<(), BackendError> {
        let mut clusters = self.clusters.lock().expect("lock");
        let entry = clusters
            .get_mut(cluster)
            .ok_or_else(|| BackendError::NoCluster {
                cluster: cluster.to_owned(),
            })?;
        entry.kube_proxy_deployments += 1;
        Ok(())
    }
    fn renew_certificates(&self, cluster: &str) -> Result<ClusterAccess, BackendError> {
        let mut clusters = self.clusters.lock().expect("lock");
        let entry = clusters
            .get_mut(cluster)
            .ok_or_else(|| BackendError::NoCluster {
                cluster: cluster.to_owned(),
            })?;
        entry.renewals += 1;
        Ok(ClusterAccess {
            admin_kubeconfig: format!("kubeconfig-{}", entry.renewals),
            ca_cert_hash: "sha256:cafe".into(),
        })
    }
}

/// capstan's transport, straight into the node software (the guest agent sits between them in
/// the full lab).
struct Local(NodeSoftware<FakeClusters>);

fn guest(target: &NodeTarget) -> GuestIdentity {
    GuestIdentity {
        vmid: target.vmid,
        name: target.name.to_string(),
        node: target.proxmox_node.clone(),
        address: Some("192.168.1.100".parse().expect("ip")),
        k3s_airgap: None,
        talos: None,
        talos_extensions: Vec::new(),
        media: Vec::new(),
        cluster: None,
        hardware: Default::default(),
    }
}

impl NodeExec for Local {
    async fn write_file(
        &self,
        target: &NodeTarget,
        path: &str,
        content: &str,
    ) -> Result<(), ExecError> {
        self.0
            .write_file(&guest(target), path, content.as_bytes())
            .map_err(|reason| ExecError::Transport {
                node: target.to_string(),
                command: format!("write {path}"),
                transient: false,
                source: reason.into(),
            })
    }
    async fn run(&self, target: &NodeTarget, command: &Command) -> Result<Output, ExecError> {
        let exit = self.0.exec(&guest(target), &command.argv).await;
        Ok(Output {
            exit_code: exit.exit_code,
            stdout: exit.stdout,
            stderr: exit.stderr,
        })
    }
}

struct Lab {
    clusters: FakeClusters,
    clock: LabClock,
    kubeadm: Kubeadm<Local>,
    spec: capstan::spec::ClusterSpec,
}

fn lab() -> Lab {
    let clusters = FakeClusters::default();
    let clock = LabClock::new();
    let software = NodeSoftware::new(clusters.clone(), clock.clone(), NodeTimings::default());
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples-repo/clusters/platform.yaml"),
    )
    .expect("example");
    let cluster: capstan::spec::Cluster = serde_saphyr::from_str(&text).expect("example parses");
    Lab {
        clusters,
        clock,
        kubeadm: Kubeadm::new(Local(software)),
        spec: cluster.spec,
    }
}

fn node(vmid: u32, name: &str) -> NodeTarget {
    NodeTarget {
        vmid: VmId(vmid),
        proxmox_node: "pve1".into(),
        name: NodeName::from(name),
    }
}

fn address() -> IpAddr {
    "192.168.1.100".parse().expect("ip")
}

impl Lab {
    async fn prepare(&self, target: &NodeTarget) {
        self.kubeadm
            .run_steps(
                "prepare",
                target,
                &steps::prepare_node(self.spec.kubernetes.version),
            )
            .await
            .expect("prepare");
    }

    async fn init(&self, target: &NodeTarget) {
        self.prepare(target).await;
        let init = steps::init_control_plane(
            "platform",
            &self.spec,
            &self.spec.cluster_network(None),
            &target.name,
            address(),
            &Registration::default(),
        );
        self.kubeadm
            .run_steps("init", target, &init)
            .await
            .expect("init");
    }

    async fn join(
        &self,
        control_plane: &NodeTarget,
        target: &NodeTarget,
        role: Role,
    ) -> Result<(), KubeadmError> {
        let ticket = self.kubeadm.join_ticket(control_plane).await?;
        let key = match role {
            Role::ControlPlane => Some(self.kubeadm.certificate_key(control_plane).await?),
            Role::Worker => None,
        };
        let join = steps::join_node(
            role,
            &ticket,
            key.as_deref(),
            &self.spec,
            &target.name,
            address(),
            &Registration::default(),
        );
        self.kubeadm.run_steps("join", target, &join).await
    }
}

async fn settle() {
    tokio::time::sleep(Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn a_cluster_comes_up_through_capstans_own_steps() {
    let lab = lab();
    let (cp, worker) = (
        node(100, "capstan-platform-cp-aaaaa"),
        node(101, "capstan-platform-general-bbbbb"),
    );
    lab.init(&cp).await;
    lab.prepare(&worker).await;
    lab.join(&cp, &worker, Role::Worker).await.expect("join");
    settle().await;

    let cluster = lab.clusters.cluster("platform");
    let version = as_lab_version(lab.spec.kubernetes.version);
    assert_eq!(cluster.version, Some(version));
    assert_eq!(
        cluster.nodes[cp.name.as_str()],
        (true, version, Role::ControlPlane)
    );
    assert_eq!(
        cluster.nodes[worker.name.as_str()],
        (true, version, Role::Worker)
    );
    assert_eq!(
        lab.kubeadm.admin_kubeconfig(&cp).await.expect("admin.conf"),
        "kubeconfig-0"
    );

    // Repeating init on the initialised node is a no-op (its guard sees admin.conf).
    let again = steps::init_control_plane(
        "platform",
        &lab.spec,
        &lab.spec.cluster_network(None),
        &cp.name,
        address(),
        &Registration::default(),
    );
    lab.kubeadm
        .run_steps("init", &cp, &again)
        .await
        .expect("init again");
}

#[tokio::test(start_paused = true)]
async fn kubeadm_is_missing_until_the_node_is_prepared() {
    let lab = lab();
    let cp = node(100, "cp");
    let init = steps::init_control_plane(
        "platform",
        &lab.spec,
        &lab.spec.cluster_network(None),
        &cp.name,
        address(),
        &Registration::default(),
    );
    let err = lab
        .kubeadm
        .run_steps("init", &cp, &init)
        .await
        .expect_err("no packages");
    let text = err.to_string();
    assert!(
        text.contains("exited 127") && text.contains("kubeadm: command not found"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_join_with_an_expired_token_fails_as_kubeadm_does() {
    let lab = lab();
    let (cp, worker) = (node(100, "cp"), node(101, "w"));
    lab.init(&cp).await;
    lab.prepare(&worker).await;
    let ticket = lab.kubeadm.join_ticket(&cp).await.expect("ticket");
    lab.clock.advance(Duration::from_secs(31 * 60));
    let join = steps::join_node(
        Role::Worker,
        &ticket,
        None,
        &lab.spec,
        &worker.name,
        address(),
        &Registration::default(),
    );
    let err = lab
        .kubeadm
        .run_steps("join", &worker, &join)
        .await
        .expect_err("expired");
    assert!(
        err.to_string()
            .contains("could not find a JWS signature in the cluster-info ConfigMap for token ID"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_join_token_and_certificate_key_reach_the_node_in_a_file_only_root_reads() {
    let lab = lab();
    let (first, second) = (node(100, "cp-a"), node(101, "cp-b"));
    lab.init(&first).await;
    lab.prepare(&second).await;
    let software = lab_software(&lab);
    assert_eq!(
        software.file_mode(second.vmid, steps::PREPARE_SCRIPT),
        Some(0o700),
        "a script root runs: no one else reads or swaps it"
    );
    // A file the guest agent writes anew is 0666: an older file there keeps that mode.
    software
        .write_file(&guest(&second), steps::JOIN_CONFIG, b"stale")
        .expect("written");
    assert_eq!(
        software.file_mode(second.vmid, steps::JOIN_CONFIG),
        Some(0o666)
    );
    let ticket = lab.kubeadm.join_ticket(&first).await.expect("ticket");
    let key = lab.kubeadm.certificate_key(&first).await.expect("key");
    let join = steps::join_node(
        Role::ControlPlane,
        &ticket,
        Some(&key),
        &lab.spec,
        &second.name,
        address(),
        &Registration::default(),
    );
    // Up to the join: the file holds the token and the key, and only root reads it.
    let (written, _) = join.split_at(1);
    assert!(
        matches!(&written[0], steps::NodeStep::WriteFile { path, .. } if path == steps::JOIN_CONFIG)
    );
    lab.kubeadm
        .run_steps("join", &second, written)
        .await
        .expect("written");
    let config = software
        .file(second.vmid, steps::JOIN_CONFIG)
        .expect("the join configuration");
    assert!(config.contains(&ticket.token) && config.contains(&key));
    assert_eq!(
        software.file_mode(second.vmid, steps::JOIN_CONFIG),
        Some(0o600),
        "root's only"
    );
    lab.kubeadm
        .run_steps("join", &second, &join)
        .await
        .expect("control-plane join");
    assert_eq!(
        software.file(second.vmid, steps::JOIN_CONFIG),
        None,
        "the token and key leave the node with the file once it has joined"
    );

    // The lab refuses a command line carrying what it issued (the guest agent logs it).
    for secret in [&ticket.token, &key] {
        let refused = software
            .exec(&guest(&second), &["echo".to_owned(), secret.clone()])
            .await;
        assert_eq!(refused.exit_code, 1);
        assert!(
            refused
                .stderr
                .starts_with("lab: the command line carries a kubeadm"),
            "{}",
            refused.stderr
        );
        assert!(!refused.stderr.contains(secret.as_str()));
    }
}

#[tokio::test(start_paused = true)]
async fn a_control_plane_join_needs_a_fresh_certificate_key() {
    let lab = lab();
    let (first, second) = (node(100, "cp-a"), node(101, "cp-b"));
    lab.init(&first).await;
    lab.prepare(&second).await;
    lab.join(&first, &second, Role::ControlPlane)
        .await
        .expect("control-plane join");
    settle().await;
    assert_eq!(
        lab.clusters.cluster("platform").nodes["cp-b"].2,
        Role::ControlPlane
    );

    let third = node(102, "cp-c");
    lab.prepare(&third).await;
    let ticket = lab.kubeadm.join_ticket(&first).await.expect("ticket");
    let key = lab.kubeadm.certificate_key(&first).await.expect("key");
    lab.clock.advance(Duration::from_secs(3 * 3600));
    let join = steps::join_node(
        Role::ControlPlane,
        &ticket,
        Some(&key),
        &lab.spec,
        &third.name,
        address(),
        &Registration::default(),
    );
    let err = lab
        .kubeadm
        .run_steps("join", &third, &join)
        .await
        .expect_err("stale key");
    assert!(err.to_string().contains("exited 1"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn etcd_members_leave_with_reset_or_through_a_healthy_control_plane() {
    let lab = lab();
    let (first, second, third) = (node(100, "cp-a"), node(101, "cp-b"), node(102, "cp-c"));
    lab.init(&first).await;
    for joining in [&second, &third] {
        lab.prepare(joining).await;
        lab.join(&first, joining, Role::ControlPlane)
            .await
            .expect("join");
    }
    assert_eq!(etcd_members(&lab).await, ["cp-a", "cp-b", "cp-c"]);

    lab.kubeadm
        .run_steps("reset", &second, &steps::reset_node())
        .await
        .expect("reset");
    assert_eq!(etcd_members(&lab).await, ["cp-a", "cp-c"]);

    // cp-c's VM dies without a reset: its member is removed through cp-a.
    lab.kubeadm
        .remove_etcd_member(&first, &NodeName::from("cp-c"))
        .await
        .expect("remove");
    assert_eq!(etcd_members(&lab).await, ["cp-a"]);
    lab.kubeadm
        .remove_etcd_member(&first, &NodeName::from("cp-c"))
        .await
        .expect("already gone is fine");
}

async fn etcd_members(lab: &Lab) -> Vec<String> {
    let list = steps::etcd_member_list(&NodeName::from("cp-a"));
    let output = lab
        .kubeadm
        .checked("list", &node(100, "cp-a"), &list)
        .await
        .expect("list");
    let members = steps::parse_etcd_members(&output.stdout).expect("json");
    let mut names: Vec<String> = members.into_iter().map(|m| m.name).collect();
    names.sort();
    names
}

#[tokio::test(start_paused = true)]
async fn upgrades_move_one_minor_at_a_time_with_a_matching_kubeadm() {
    let lab = lab();
    let cp = node(100, "cp");
    lab.init(&cp).await;
    let current = lab.spec.kubernetes.version;
    let skip = capstan::spec::KubeVersion {
        minor: current.minor + 2,
        patch: 0,
        ..current
    };
    let err = lab
        .kubeadm
        .run_steps(
            "upgrade",
            &cp,
            &steps::upgrade_control_plane(skip, &lab.spec.cluster_network(None)),
        )
        .await
        .expect_err("skips a minor");
    assert!(err.to_string().contains("exited 1"), "{err}");

    let patch = capstan::spec::KubeVersion {
        patch: current.patch + 1,
        ..current
    };
    lab.kubeadm
        .run_steps(
            "upgrade",
            &cp,
            &steps::upgrade_control_plane(patch, &lab.spec.cluster_network(None)),
        )
        .await
        .expect("patch upgrade");
    let cluster = lab.clusters.cluster("platform");
    assert_eq!(cluster.version, Some(as_lab_version(patch)));
    assert_eq!(
        cluster.renewals, 1,
        "kubeadm upgrade apply renews certificates"
    );
    assert_eq!(
        cluster.kube_proxy_deployments, 1,
        "and deploys kube-proxy again (its addon phase)"
    );
    let mut without = lab.spec.cluster_network(None);
    without.kube_proxy = false;
    let next = capstan::spec::KubeVersion {
        patch: patch.patch + 1,
        ..patch
    };
    lab.kubeadm
        .run_steps(
            "upgrade",
            &cp,
            &steps::upgrade_control_plane(next, &without),
        )
        .await
        .expect("patch upgrade without kube-proxy");
    assert_eq!(
        lab.clusters.cluster("platform").kube_proxy_deployments,
        1,
        "a cluster without kube-proxy skips the phase"
    );
    assert_eq!(
        lab.kubeadm.admin_kubeconfig(&cp).await.expect("admin.conf"),
        "kubeconfig-2"
    );

    lab.kubeadm
        .run_steps("renew", &cp, &steps::renew_certificates())
        .await
        .expect("renew");
    assert_eq!(
        lab.kubeadm.admin_kubeconfig(&cp).await.expect("admin.conf"),
        "kubeconfig-3"
    );
}

#[tokio::test(start_paused = true)]
async fn kubelets_stop_with_their_vm() {
    let lab = lab();
    let cp = node(100, "cp");
    lab.init(&cp).await;
    settle().await;
    assert!(lab.clusters.cluster("platform").nodes["cp"].0);
    // Power events come from the Proxmox simulation.
    let local = lab_software(&lab);
    local.power(&guest(&cp), PowerEvent::ShutDown);
    assert!(!lab.clusters.cluster("platform").nodes["cp"].0);
    local.power(&guest(&cp), PowerEvent::Started);
    settle().await;
    assert!(lab.clusters.cluster("platform").nodes["cp"].0);
}

fn lab_software(lab: &Lab) -> NodeSoftware<FakeClusters> {
    lab.kubeadm.transport().0.clone()
}

/// capstan's version as the lab reads it: through its text, the only thing the two share.
fn as_lab_version(version: capstan::spec::KubeVersion) -> KubeVersion {
    version
        .to_string()
        .parse()
        .expect("capstan writes versions kubeadm reads")
}
