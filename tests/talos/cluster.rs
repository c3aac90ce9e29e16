//! A Talos cluster running in the lab, built the way capstan will build it: five VMs cloned
//! from a Talos template, each given capstan's cidata ISO through the Proxmox API and started;
//! `Bootstrap` once through capstan's Talos API client on the first control plane, found
//! through the lab's address map (live and `lab.json`). Judged by the stock kubectl with a
//! client certificate of the bundle's Kubernetes CA, by capstan's Talos API client and by the
//! lab's etcd: five Ready Nodes at the config's version, three etcd members, an API server
//! that refuses without quorum and serves again with it, a second Bootstrap refused, and a
//! destroyed control plane's member listed until it is removed by id.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::{Command, Output};

use base64::Engine as _;
use capstan::model::Role;
use capstan::providers::proxmox::{
    ClientOptions, ConnectionConfig, ExpectedVm, ProxmoxClient, ProxmoxProvider, TokenSecret, Trust,
};
use capstan::providers::talos::api::{BootstrapOutcome, GrpcTalosApi, TalosApi, TalosCredentials};
use capstan::providers::talos::{admin_credentials, generate_bundle};
use capstan_core::talos::secrets::SecretsBundle;
use capstan_core::talos::{
    ClusterFacts, MachineRole, NodeFacts, cidata_files, cidata_image, render_machine_config,
};
use capstan_lab::lab::ApiAddresses;
use capstan_lab::nodes::TalosClusterRef;
use capstan_lab::talos::TALOS_API_PORT;
use capstan_lab::tls::{AuthorityPem, CertificateAuthority};
use capstan_testkit::wait;
use capstan_testkit::world::World;

use capstan_testkit::talos::{TALOS_VERSION, talos_lab};

use crate::vm::{clone_talos, deliver};

const CLUSTER: &str = "talos-prod";
const ENDPOINT_HOST: &str = "k8s-talos-prod.lab.example";
const KUBERNETES: &str = "1.34.2";

fn facts() -> ClusterFacts {
    ClusterFacts {
        cluster_name: CLUSTER.into(),
        endpoint_host: ENDPOINT_HOST.into(),
        endpoint_address: "10.20.0.10".parse().expect("ip"),
        endpoint_port: 6443,
        kubernetes_version: KUBERNETES.parse().expect("version"),
        talos_version: TALOS_VERSION.parse().expect("version"),
        installer_image: None,
        network: capstan::spec::Distribution::Talos
            .capabilities()
            .network
            .cluster_network(),
        authentication: None,
    }
}

/// capstan's cidata image for `name`, its machine config rendered from `bundle`.
fn cidata(name: &str, role: MachineRole, bundle: &SecretsBundle) -> Vec<u8> {
    let node = NodeFacts {
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
    let config = render_machine_config(&facts(), &node, bundle).expect("renders");
    cidata_image(&cidata_files(&node, name, &config).expect("files")).expect("image")
}

/// A client of the lab's Proxmox, as capstan connects.
fn proxmox(world: &World) -> ProxmoxClient {
    let lab = &world.lab;
    let config = ConnectionConfig::new(
        &lab.proxmox_url(),
        lab.token_id(),
        TokenSecret::new(lab.token()),
        Trust::Fingerprint(lab.fingerprint()),
    )
    .expect("connection");
    ProxmoxClient::new(&config, ClientOptions::for_lab()).expect("client")
}

/// Where `vm`'s Talos API is served: its address as the guest agent reports it, resolved
/// with Talos's port through the lab's address map, live and from `lab.json` alike.
async fn talos_api_of(world: &World, client: &ProxmoxClient, vm: &ExpectedVm) -> SocketAddr {
    let addresses = client.vm_addresses(&vm.vm).await.expect("addresses");
    let address = addresses.first().expect("an address").to_string();
    // The VM runs once its start task ended; it boots a moment later.
    let live = wait::on(format!("the Talos API of {}", vm.name.0))
        .until(async || {
            world
                .lab
                .api_addresses()
                .resolve(&address, TALOS_API_PORT)
                .ok_or_else(|| "not served".to_owned())
        })
        .await;
    let from_file = ApiAddresses::from_state_dir(world.state.path())
        .resolve(&address, TALOS_API_PORT)
        .expect("lab.json lists the node's Talos API");
    assert_eq!(live, from_file);
    assert_eq!(world.lab.talos_api_address(vm.vm.vmid), Some(live));
    live
}

/// A kubeconfig for the cluster's endpoint, served at `server`, trusting the bundle's
/// Kubernetes CA, with a `system:masters` client certificate that CA signed.
fn admin_kubeconfig(dir: &Path, bundle: &SecretsBundle, server: SocketAddr) -> std::path::PathBuf {
    let ca = CertificateAuthority::from_pem(&AuthorityPem {
        certificate_pem: bundle.kubernetes_ca.certificate_pem.clone(),
        key_pem: bundle.kubernetes_ca.key_pem.clone(),
    })
    .expect("the bundle's Kubernetes CA");
    let not_after = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24);
    let admin = ca
        .issue_client("admin", &["system:masters"], not_after)
        .expect("issues");
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {CLUSTER}\n  cluster:\n    server: https://{server}\n    tls-server-name: {ENDPOINT_HOST}\n    certificate-authority-data: {ca}\nusers:\n- name: admin\n  user:\n    client-certificate-data: {crt}\n    client-key-data: {key}\ncontexts:\n- name: admin\n  context: {{cluster: {CLUSTER}, user: admin}}\ncurrent-context: admin\n",
        ca = b64(&bundle.kubernetes_ca.certificate_pem),
        crt = b64(&admin.cert_pem),
        key = b64(&admin.key_pem),
    );
    let path = dir.join("talos-admin.kubeconfig");
    std::fs::write(&path, text).expect("kubeconfig");
    path
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--request-timeout", "10s"])
        .args(args)
        .output()
        .expect("kubectl runs")
}

/// `name version` of every Ready Node kubectl lists, sorted.
fn ready_nodes(kubeconfig: &Path) -> Result<Vec<String>, String> {
    let output = kubectl(kubeconfig, &["get", "nodes", "-o", "json"]);
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let list: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let mut ready: Vec<String> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|node| {
            node["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .map(|node| {
            format!(
                "{} {}",
                node["metadata"]["name"].as_str().unwrap_or_default(),
                node["status"]["nodeInfo"]["kubeletVersion"]
                    .as_str()
                    .unwrap_or_default()
            )
        })
        .collect();
    ready.sort();
    Ok(ready)
}

// kubectl runs on this thread while the lab serves it: the lab needs threads of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrapped_talos_cluster_serves_kubernetes_and_etcd_with_quorum() {
    let world = World::with_lab(talos_lab(), "", &[], false).await;
    let client = proxmox(&world);
    let now = time::OffsetDateTime::now_utc();
    let bundle = generate_bundle(CLUSTER, now).expect("generates");
    let credentials = TalosCredentials {
        os_ca_pem: bundle.os_ca.certificate_pem.clone(),
        admin: admin_credentials(&bundle, now).expect("issues"),
    };

    let mut machines = Vec::new();
    for (name, role) in [
        ("talos-prod-cp-1", MachineRole::ControlPlane),
        ("talos-prod-cp-2", MachineRole::ControlPlane),
        ("talos-prod-cp-3", MachineRole::ControlPlane),
        ("talos-prod-w-1", MachineRole::Worker),
        ("talos-prod-w-2", MachineRole::Worker),
    ] {
        let vm_role = match role {
            MachineRole::ControlPlane => Role::ControlPlane,
            MachineRole::Worker => Role::Worker,
        };
        let vm = clone_talos(&client, name, vm_role).await;
        deliver(&client, &vm.vm, name, &cidata(name, role, &bundle)).await;
        machines.push(vm);
    }
    for vm in &machines {
        client.start_vm(&vm.vm).await.expect("started");
    }
    let (cp1, cp2, cp3) = (&machines[0], &machines[1], &machines[2]);

    let first = GrpcTalosApi::connect(talos_api_of(&world, &client, cp1).await, &credentials)
        .await
        .expect("connects");
    assert_eq!(
        first.version().await.expect("Version").talos_tag,
        TALOS_VERSION
    );
    assert!(
        world.lab.kube().cluster(CLUSTER).is_none(),
        "no API server before Bootstrap"
    );
    assert_eq!(
        first.bootstrap().await.expect("Bootstrap"),
        BootstrapOutcome::Bootstrapped
    );

    // The API server uses the bundle's CA at the declared endpoint; 5 Ready Nodes.
    wait::on("the cluster's API server")
        .until_true(|| world.lab.kube().cluster(CLUSTER).is_some())
        .await;
    let served = world
        .lab
        .api_addresses()
        .resolve(ENDPOINT_HOST, 6443)
        .expect("the endpoint resolves");
    let kubeconfig = admin_kubeconfig(world.state.path(), &bundle, served);
    let expected: Vec<String> = machines
        .iter()
        .map(|vm| format!("{} v{KUBERNETES}", vm.name.0))
        .collect();
    wait::on("5 Ready Nodes at the config's version")
        .until(async || {
            let ready = ready_nodes(&kubeconfig)?;
            if ready == expected {
                Ok(())
            } else {
                Err(format!("{ready:?}"))
            }
        })
        .await;

    // Every control plane joined etcd at Bootstrap: the lab's etcd and the Talos API agree.
    let etcd = world
        .lab
        .talos_etcd(TalosClusterRef::Named(CLUSTER))
        .expect("the cluster's etcd");
    let members = first.etcd_member_list().await.expect("EtcdMemberList");
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        ["talos-prod-cp-1", "talos-prod-cp-2", "talos-prod-cp-3"]
    );
    assert_eq!(
        world
            .lab
            .talos_etcd(TalosClusterRef::OfVm(cp3.vm.vmid))
            .map(|e| e.members_unchecked().len()),
        Some(3)
    );

    // Two of three control planes stop: etcd loses quorum and the API server refuses.
    client.stop_vm(cp2).await.expect("stopped");
    client.stop_vm(cp3).await.expect("stopped");
    wait::on("etcd without quorum")
        .until_true(|| !etcd.has_quorum())
        .await;
    let refused = kubectl(&kubeconfig, &["get", "nodes"]);
    assert!(!refused.status.success(), "served without quorum");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("no quorum"), "{stderr}");
    assert!(world.lab.talos_api_address(cp2.vm.vmid).is_none());

    // One comes back: quorum, and the API server serves again.
    client.start_vm(&cp2.vm).await.expect("started");
    wait::on("etcd with quorum")
        .until_true(|| etcd.has_quorum())
        .await;
    wait::on("the API server serving again")
        .until(async || ready_nodes(&kubeconfig).map(drop))
        .await;

    // Bootstrap happens once.
    assert_eq!(
        first.bootstrap().await.expect("answers"),
        BootstrapOutcome::AlreadyBootstrapped
    );

    // A destroyed control plane stays an (unhealthy) member until it is removed by id.
    client.destroy_vm(cp3).await.expect("destroyed");
    wait::on("the destroyed VM's Talos API gone from lab.json")
        .until_true(|| world.lab.lab_file().talos_apis.len() == 4)
        .await;
    let members = first.etcd_member_list().await.expect("EtcdMemberList");
    let stale = members
        .iter()
        .find(|m| m.name == "talos-prod-cp-3")
        .expect("the destroyed control plane is still a member");
    assert_eq!(members.len(), 3);
    first
        .etcd_remove_member_by_id(stale.id)
        .await
        .expect("EtcdRemoveMemberByID");
    let members = first.etcd_member_list().await.expect("EtcdMemberList");
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["talos-prod-cp-1", "talos-prod-cp-2"]);
    let listed: Vec<IpAddr> = world
        .lab
        .lab_file()
        .talos_apis
        .keys()
        .map(|key| key.parse::<SocketAddr>().expect("address").ip())
        .collect();
    assert_eq!(
        listed.len(),
        4,
        "the destroyed VM's Talos API is gone: {listed:?}"
    );
    world.lab.stop();
    assert!(world.lab.lab_file().talos_apis.is_empty());
    assert!(world.lab.talos_api_address(cp1.vm.vmid).is_none());
}
