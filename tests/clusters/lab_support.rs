//! Shared setup of the whole-lab tests: a lab with a state directory, capstan's real Proxmox
//! client and kubeadm steps over the guest agent, and the stock `kubectl` pointed at the
//! kubeconfig files `lab.json` lists.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use capstan::execute::distribution::kubeadm::calico;
use capstan::model::{NodeName, Ownership, Role};
use capstan::providers::kube::KubeClusterClient;
use capstan::providers::kubeadm::{self, Kubeadm};
use capstan::providers::node_exec::{GuestAgent, NodeTarget};
use capstan::providers::proxmox::{
    ClientOptions, CloneRequest, CloudInit, ConnectionConfig, ExpectedVm, ProxmoxClient,
    ProxmoxProvider, PveNode, TokenSecret, Trust, VmSettings,
};
use capstan::scheduling::{NodeScheduling, Registration};
use capstan::spec::{ClusterSpec, Machine};
use capstan_lab::lab::{LAB_FILE, Lab, LabFile, LabOptions};
use capstan_lab::world::LabConfig;
use capstan_testkit::wait;

/// The example cluster the tests build (its spec comes from `examples-repo/clusters/prod.yaml`).
pub const CLUSTER: &str = "prod";
/// How long any wait in these tests may take before it fails (the lab needs about a second).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A lab with a state directory and a Proxmox client for it.
pub struct Setup {
    pub lab: Lab,
    pub state: tempfile::TempDir,
    pub proxmox: ProxmoxClient,
    pub kubeadm: Kubeadm<GuestAgent<ProxmoxClient>>,
}

/// One VM of the cluster, running, with its address.
#[derive(Debug, Clone)]
pub struct Vm {
    pub target: NodeTarget,
    pub address: Ipv4Addr,
    pub expected: ExpectedVm,
}

impl Vm {
    pub fn ip(&self) -> IpAddr {
        IpAddr::V4(self.address)
    }
}

/// A cluster brought up through capstan's real steps.
pub struct UpCluster {
    pub setup: Setup,
    pub control_plane: Vm,
    pub workers: Vec<Vm>,
}

/// `examples-repo/`'s prod cluster.
pub fn prod_spec() -> ClusterSpec {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples-repo");
    let files = capstan::source::read_repo(&repo).expect("examples-repo reads");
    let desired = capstan::spec::load(&files)
        .desired
        .expect("examples-repo is valid");
    desired.clusters[CLUSTER].spec.clone()
}

/// Starts the default lab (with the lab's node software) writing into a fresh state directory.
pub async fn start_lab() -> Setup {
    let state = tempfile::tempdir().expect("state dir");
    let options = LabOptions {
        state_dir: Some(state.path().to_owned()),
        ..LabOptions::ephemeral()
    };
    let lab = Lab::start(LabConfig::default(), options)
        .await
        .expect("the lab starts");
    let config = ConnectionConfig::new(
        &lab.proxmox_url(),
        lab.token_id(),
        TokenSecret::new(lab.token()),
        Trust::Fingerprint(lab.fingerprint()),
    )
    .expect("connection config");
    let proxmox = ProxmoxClient::new(&config, ClientOptions::for_lab()).expect("client");
    let kubeadm = Kubeadm::new(GuestAgent::new(proxmox.clone()));
    Setup {
        lab,
        state,
        proxmox,
        kubeadm,
    }
}

impl Setup {
    /// Clones, configures, grows, starts a VM as the executor does, and waits for its agent
    /// and address.
    pub async fn create_vm(&self, machine: &Machine, role: Role, pool: &str, suffix: &str) -> Vm {
        let name = NodeName(format!("capstan-{CLUSTER}-{pool}-{suffix}").into());
        let ownership = Ownership {
            cluster: CLUSTER.into(),
            role,
            pool: pool.into(),
            spec_hash: "0123456789ab".into(),
        };
        let created = jiff::Timestamp::now();
        let request = CloneRequest {
            template: machine.template.clone(),
            target: PveNode::from(machine.placement[0].as_str()),
            name: name.clone(),
            ownership: ownership.clone(),
            created,
            pool: Some("capstan".into()),
            storage: machine.storage.clone(),
            built_from: None,
        };
        let client = &self.proxmox;
        let vm = client.clone_vm(&request).await.expect("clone");
        let settings = VmSettings {
            cores: machine.cores,
            memory_mib: machine.memory_mib,
            cpu_type: machine.cpu.clone(),
            ownership: ownership.clone(),
            created,
            cloud_init: Some(CloudInit {
                ipconfigs: vec![(0, "ip=dhcp".into())],
                user: None,
                ssh_keys: None,
                ..CloudInit::default()
            }),
            built_from: None,
            hardware: Default::default(),
            disk_storage: None,
            tags: Vec::new(),
        };
        client
            .configure_vm(&vm, &settings)
            .await
            .expect("configure");
        client
            .resize_disk(&vm, machine.disk_gib)
            .await
            .expect("resize");
        client.start_vm(&vm).await.expect("start");
        wait::agent(client, &vm).await;
        let address = *client
            .vm_addresses(&vm)
            .await
            .expect("addresses")
            .first()
            .expect("a DHCP address");
        Vm {
            target: NodeTarget {
                vmid: vm.vmid,
                proxmox_node: vm.node.as_str().to_owned(),
                name: name.clone(),
            },
            address,
            expected: ExpectedVm {
                vm,
                name,
                ownership,
            },
        }
    }

    /// What `lab.json` on disk says now.
    pub fn lab_json(&self) -> LabFile {
        let text = std::fs::read_to_string(self.state.path().join(LAB_FILE)).expect("lab.json");
        serde_json::from_str(&text).expect("lab.json parses")
    }

    /// The kubeconfig file `lab.json` lists for `cluster`.
    pub fn kubeconfig_file(&self, cluster: &str) -> PathBuf {
        self.lab_json()
            .clusters
            .get(cluster)
            .unwrap_or_else(|| panic!("lab.json lists {cluster}"))
            .kubeconfig
            .clone()
    }
}

/// Brings up the prod cluster: one control plane and two workers, prepared, initialised and
/// joined through `providers::kubeadm`'s steps over the guest agent.
pub async fn bring_up() -> UpCluster {
    let started = Instant::now();
    let setup = start_lab().await;
    let spec = prod_spec();
    let worker_machine = &spec.workers[0].machine;
    let (control_plane, first, second) = tokio::join!(
        setup.create_vm(
            &spec.control_plane.machine,
            Role::ControlPlane,
            "cp",
            "aaaaa"
        ),
        setup.create_vm(worker_machine, Role::Worker, "general", "bbbbb"),
        setup.create_vm(worker_machine, Role::Worker, "general", "ccccc"),
    );
    let workers = vec![first, second];
    let vms_running = started.elapsed();
    let prepare = kubeadm::prepare_node(spec.kubernetes.version);
    let kubeadm = &setup.kubeadm;
    let prepared = futures_util::future::join_all(
        std::iter::once(&control_plane)
            .chain(&workers)
            .map(|vm| kubeadm.run_steps("prepare", &vm.target, &prepare)),
    )
    .await;
    for result in prepared {
        result.expect("prepared");
    }
    kubeadm
        .run_steps(
            "init",
            &control_plane.target,
            &kubeadm::init_control_plane(
                CLUSTER,
                &spec,
                &spec.cluster_network(None),
                &control_plane.target.name,
                control_plane.ip(),
                &registration(&spec, "cp", Role::ControlPlane, &control_plane.target),
            ),
        )
        .await
        .expect("kubeadm init");
    // Calico through the new cluster's API, as the executor applies it after init.
    let admin = kubeadm
        .admin_kubeconfig(&control_plane.target)
        .await
        .expect("admin.conf");
    let api = KubeClusterClient::connect(&admin).await.expect("a client");
    calico::install(&api, &spec.cluster_network(None), &spec.endpoint)
        .await
        .expect("Calico applied");
    for worker in &workers {
        let ticket = kubeadm
            .join_ticket(&control_plane.target)
            .await
            .expect("join ticket");
        let steps = kubeadm::join_node(
            Role::Worker,
            &ticket,
            None,
            &spec,
            &worker.target.name,
            worker.ip(),
            &registration(&spec, "general", Role::Worker, &worker.target),
        );
        kubeadm
            .run_steps("join", &worker.target, &steps)
            .await
            .expect("kubeadm join");
    }
    // A figure, not an assertion: how long the lab takes (see the README's claim).
    eprintln!(
        "lab: 3 VMs running after {vms_running:?}, kubeadm init and 2 joins done after {:?}",
        started.elapsed()
    );
    UpCluster {
        setup,
        control_plane,
        workers,
    }
}

/// What a kubectl run printed.
#[derive(Debug)]
pub struct KubectlOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl KubectlOutput {
    /// Asserts success and parses stdout as JSON.
    pub fn json(&self) -> serde_json::Value {
        assert_eq!(
            self.code, 0,
            "kubectl failed:\n{}\n{}",
            self.stdout, self.stderr
        );
        serde_json::from_str(&self.stdout).expect("kubectl printed JSON")
    }
}

/// The stock kubectl with `--kubeconfig file`, its own HOME (a fresh discovery cache), run off
/// the async runtime so the lab keeps serving.
pub async fn kubectl(kubeconfig: &Path, args: &[&str]) -> KubectlOutput {
    let home = tempfile::tempdir().expect("home");
    let mut argv = vec!["--kubeconfig".to_owned(), kubeconfig.display().to_string()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let home_path = home.path().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("kubectl")
            .args(&argv)
            .env("HOME", &home_path)
            .env_remove("KUBECONFIG")
            .output()
            .expect("kubectl on PATH")
    })
    .await
    .expect("kubectl ran");
    KubectlOutput {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A node's Ready condition status (`True`, `False`, `Unknown`) in a kubectl Node object.
pub fn ready_status(node: &serde_json::Value) -> String {
    node["status"]["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("missing")
        .to_owned()
}

/// Polls `check` until it returns `Some`, failing after [`PATIENCE`] with `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    wait::on(what)
        .within(PATIENCE)
        .until(async || check().await.ok_or_else(|| "not yet".to_owned()))
        .await
}

/// What a node of `pool` registers with, its VM on `target`'s Proxmox node, as capstan's
/// kubeadm join step gives it.
fn registration(spec: &ClusterSpec, pool: &str, role: Role, target: &NodeTarget) -> Registration {
    NodeScheduling::of(spec, pool, role, &target.proxmox_node)
        .registration(&spec.kubernetes.distribution.capabilities().scheduling)
}
