//! Talos VMs in the lab: a VM cloned from a template that carries a Talos version boots
//! Talos. Its guest agent (Talos's `qemu-guest-agent` extension) reports addresses and shuts
//! the VM down, and refuses every command, as on real Talos.

use std::sync::Arc;
use std::time::Duration;

use capstan::model::{NodeName, Ownership, Role};
use capstan::providers::proxmox::{
    ClientOptions, CloneRequest, ConnectionConfig, ExpectedVm, ProxmoxClient, ProxmoxProvider,
    PveNode, TokenSecret, Trust, VmRef,
};
use capstan::providers::talos::generate_bundle;
use capstan_core::talos::secrets::SecretsBundle;
use capstan_core::talos::{
    ClusterFacts, MachineRole, NodeFacts, cidata_files, cidata_image, render_machine_config,
};
use capstan_lab::clock::LabClock;
use capstan_lab::nodes::{
    BackendError, ClusterAccess, ClusterBackend, NewCluster, NewNode, NodeSoftware, NodeTimings,
};
use capstan_lab::proxmox::{DefaultShell, GuestSoftware, SimOptions, SimProxmox};
use capstan_lab::values::KubeVersion;
use capstan_lab::world::ProxmoxWorld;
use capstan_testkit::talos::{TALOS_TEMPLATE, TALOS_VERSION, talos_world};

const TOKEN_ID: &str = "capstan@pve!talos";
const SECRET: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

pub struct Setup {
    pub sim: SimProxmox,
    pub client: ProxmoxClient,
}

pub async fn start(world: &ProxmoxWorld, guest: Arc<dyn GuestSoftware>) -> Setup {
    let sim = SimProxmox::start(
        world,
        SimOptions::loopback(TOKEN_ID, SECRET),
        LabClock::new(),
        guest,
    )
    .await
    .expect("sim starts");
    let config = ConnectionConfig::new(
        &sim.url(),
        TOKEN_ID,
        TokenSecret::new(SECRET),
        Trust::Fingerprint(sim.fingerprint()),
    )
    .expect("connection");
    let client = ProxmoxClient::new(&config, ClientOptions::for_lab()).expect("client");
    Setup { sim, client }
}

/// Clones the Talos template as `name` (a member of cluster `prod` in `role`).
pub async fn clone_talos(client: &ProxmoxClient, name: &str, role: Role) -> ExpectedVm {
    let ownership = Ownership {
        cluster: "prod".into(),
        role,
        pool: if role == Role::ControlPlane {
            "cp"
        } else {
            "workers"
        }
        .into(),
        spec_hash: "0123456789ab".into(),
    };
    let request = CloneRequest {
        template: TALOS_TEMPLATE.into(),
        target: PveNode::from("pve1"),
        name: NodeName(name.to_owned().into()),
        ownership: ownership.clone(),
        created: "2026-12-02T10:00:00Z".parse().expect("timestamp"),
        pool: None,
        storage: None,
        built_from: None,
    };
    let vm = client.clone_vm(&request).await.expect("cloned");
    ExpectedVm {
        vm,
        name: request.name,
        ownership,
    }
}

#[tokio::test]
async fn a_talos_vm_reports_addresses_and_shuts_down_but_runs_no_command() {
    let Setup { sim, client } = start(&talos_world(), Arc::new(DefaultShell::new())).await;
    let expected = clone_talos(&client, "capstan-prod-cp-a1", Role::ControlPlane).await;
    let vm: &VmRef = &expected.vm;
    client.start_vm(vm).await.expect("started");
    assert!(
        client.await_agent(vm).await.expect("agent"),
        "the agent answers"
    );

    let refused = client
        .run_command(vm, &["true".to_owned()], None, Duration::from_secs(5))
        .await
        .expect_err("Talos runs no command");
    let message = format!("{refused:#}");
    assert!(
        message.contains("Command guest-exec has been disabled: the command is not allowed"),
        "{message}"
    );

    let addresses = client.vm_addresses(vm).await.expect("addresses");
    assert!(!addresses.is_empty(), "the VM reports its address");

    client
        .shutdown_vm(&expected, Duration::from_secs(5))
        .await
        .expect("shut down");
    let held = sim.handle().vm(vm.vmid.0).expect("the VM exists");
    assert!(!held.running, "the VM stopped");
}

/// Simulated clusters that hold nothing: the Talos VMs of these tests register no Node.
struct NoClusters;

impl ClusterBackend for NoClusters {
    fn talos_api(&self, _: std::net::IpAddr, _: Option<std::net::SocketAddr>) {}
    fn api_server(
        &self,
        cluster: &str,
        _: &str,
        _: bool,
        _: Option<&str>,
    ) -> Result<(), BackendError> {
        Err(BackendError::NoCluster {
            cluster: cluster.to_owned(),
        })
    }
    fn remove_cluster(&self, _: &str) {}
    fn create_cluster(&self, request: &NewCluster) -> Result<ClusterAccess, BackendError> {
        Err(BackendError::NoCluster {
            cluster: request.name.clone(),
        })
    }
    fn register_node(&self, cluster: &str, _: &NewNode) -> Result<(), BackendError> {
        Err(BackendError::NoCluster {
            cluster: cluster.to_owned(),
        })
    }
    fn set_node_ready(&self, _: &str, _: &str, _: bool) {}
    fn set_version(&self, _: &str, _: KubeVersion) {}
    fn renew_certificates(&self, cluster: &str) -> Result<ClusterAccess, BackendError> {
        Err(BackendError::NoCluster {
            cluster: cluster.to_owned(),
        })
    }
    fn set_storage_unavailable(&self, _: &str, _: Option<String>) {}
    fn apply_manifest(&self, cluster: &str, _: &str) -> Result<String, BackendError> {
        Err(BackendError::NoCluster {
            cluster: cluster.to_owned(),
        })
    }
    fn deploy_kube_proxy(&self, cluster: &str) -> Result<(), BackendError> {
        Err(BackendError::NoCluster {
            cluster: cluster.to_owned(),
        })
    }
}

fn cluster_facts() -> ClusterFacts {
    ClusterFacts {
        cluster_name: "prod".into(),
        endpoint_host: "k8s-prod.lab.example".into(),
        endpoint_address: "10.20.0.10".parse().expect("ip"),
        endpoint_port: 6443,
        kubernetes_version: "1.34.2".parse().expect("version"),
        talos_version: TALOS_VERSION.parse().expect("version"),
        installer_image: None,
        network: capstan::spec::Distribution::Talos
            .capabilities()
            .network
            .cluster_network(),
        authentication: None,
    }
}

/// capstan's cidata image for `name` in `role`, its machine config rendered from `bundle`.
fn cidata_for(name: &str, role: MachineRole, bundle: &SecretsBundle) -> Vec<u8> {
    let facts = NodeFacts {
        role,
        hostname: name.into(),
        install_disk: "/dev/sda".into(),
        mac_address: "bc:24:11:00:00:07".parse().expect("MAC"),
        static_address: None,
        register_with_taints: Vec::new(),
        patches: Vec::new(),
        links: Vec::new(),
        volumes: Vec::new(),
    };
    let config = render_machine_config(&cluster_facts(), &facts, bundle).expect("renders");
    let files = cidata_files(&facts, name, &config).expect("files");
    cidata_image(&files).expect("image")
}

/// Uploads `image` as `<name>-cidata.iso` to `local` and puts it in the VM's CD-ROM drive.
pub async fn deliver(client: &ProxmoxClient, vm: &VmRef, name: &str, image: &[u8]) {
    let volume = client
        .upload_iso(&vm.node, "local", &format!("{name}-cidata.iso"), image)
        .await
        .expect("uploaded");
    client.attach_cdrom(vm, &volume).await.expect("attached");
}

#[tokio::test]
async fn talos_vms_take_capstans_config_from_the_cdrom_and_refuse_a_foreign_or_missing_one() {
    let nodes = NodeSoftware::new(NoClusters, LabClock::new(), NodeTimings::default());
    let Setup { sim: _sim, client } = start(&talos_world(), Arc::new(nodes.clone())).await;
    let now = time::OffsetDateTime::now_utc();
    let bundle = generate_bundle("prod", now).expect("generates");
    // The same cluster id with another bootstrap token: not a member of this cluster.
    let foreign = SecretsBundle {
        bootstrap_token: generate_bundle("prod", now)
            .expect("generates")
            .bootstrap_token,
        ..bundle.clone()
    };

    let cp = clone_talos(&client, "capstan-prod-cp-a1", Role::ControlPlane).await;
    let worker = clone_talos(&client, "capstan-prod-workers-b1", Role::Worker).await;
    let stranger = clone_talos(&client, "capstan-prod-workers-c1", Role::Worker).await;
    let bare = clone_talos(&client, "capstan-prod-workers-d1", Role::Worker).await;
    for (vm, role, bundle) in [
        (&cp, MachineRole::ControlPlane, &bundle),
        (&worker, MachineRole::Worker, &bundle),
        (&stranger, MachineRole::Worker, &foreign),
    ] {
        let name = vm.name.0.to_string();
        deliver(&client, &vm.vm, &name, &cidata_for(&name, role, bundle)).await;
    }
    for vm in [&cp, &worker, &stranger, &bare] {
        client.start_vm(&vm.vm).await.expect("started");
    }

    let taken = nodes
        .talos_machine(cp.vm.vmid)
        .expect("the control plane runs its config");
    assert_eq!(taken.role, Role::ControlPlane);
    assert_eq!(taken.endpoint, "https://k8s-prod.lab.example:6443");
    assert_eq!(
        taken.kubernetes_ca_pem.trim(),
        bundle.kubernetes_ca.certificate_pem.trim()
    );
    assert!(
        nodes.talos_machine(worker.vm.vmid).is_some(),
        "{:?}",
        nodes.talos_console(worker.vm.vmid)
    );

    assert!(nodes.talos_machine(stranger.vm.vmid).is_none());
    let console = nodes.talos_console(stranger.vm.vmid).join("\n");
    assert!(
        console.contains(
            "cluster.token, cluster.secret or machine.token differs from the one of the cluster's other members"
        ),
        "{console}"
    );
    assert!(nodes.talos_machine(bare.vm.vmid).is_none());
    let console = nodes.talos_console(bare.vm.vmid).join("\n");
    assert!(console.contains("no volume labelled cidata"), "{console}");
    for secret in [
        &bundle.bootstrap_token,
        &bundle.cluster_secret,
        &bundle.trustd_token,
    ] {
        for vm in [&cp, &worker, &stranger, &bare] {
            let console = nodes.talos_console(vm.vm.vmid).join("\n");
            assert!(!console.contains(secret.as_str()), "a secret on a console");
        }
    }
}
