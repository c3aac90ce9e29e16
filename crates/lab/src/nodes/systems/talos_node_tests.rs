use std::sync::{Arc, Mutex};

use super::super::talos::tests::{Cas, cas, config, iso};
use super::*;
use crate::nodes::{BackendError, ClusterAccess};
use crate::proxmox::MediaImage;
use crate::values::KubeVersion;

/// Simulated clusters that record what the Talos machines asked of them.
#[derive(Default)]
struct Recorded {
    created: Mutex<Vec<NewCluster>>,
    nodes: Mutex<Vec<(String, NewNode)>>,
    ready: Mutex<Vec<(String, bool)>>,
    storage: Mutex<Vec<Option<String>>>,
    apis: Mutex<Vec<(IpAddr, Option<SocketAddr>)>>,
    versions: Mutex<Vec<String>>,
    removed: Mutex<Vec<String>>,
}

impl ClusterBackend for Recorded {
    fn create_cluster(&self, request: &NewCluster) -> Result<ClusterAccess, BackendError> {
        self.created.lock().expect("lock").push(request.clone());
        Ok(ClusterAccess {
            admin_kubeconfig: String::new(),
            ca_cert_hash: String::new(),
        })
    }
    fn register_node(&self, cluster: &str, node: &NewNode) -> Result<(), BackendError> {
        let entry = (cluster.to_owned(), node.clone());
        self.nodes.lock().expect("lock").push(entry);
        Ok(())
    }
    fn set_node_ready(&self, _: &str, node: &str, ready: bool) {
        self.ready
            .lock()
            .expect("lock")
            .push((node.to_owned(), ready));
    }
    fn set_version(&self, _: &str, version: KubeVersion) {
        self.versions
            .lock()
            .expect("lock")
            .push(version.to_string());
    }
    fn renew_certificates(&self, cluster: &str) -> Result<ClusterAccess, BackendError> {
        Err(BackendError::NoCluster {
            cluster: cluster.to_owned(),
        })
    }
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
    fn set_storage_unavailable(&self, _: &str, reason: Option<String>) {
        self.storage.lock().expect("lock").push(reason);
    }
    fn talos_api(&self, node: IpAddr, served: Option<SocketAddr>) {
        self.apis.lock().expect("lock").push((node, served));
    }
    fn remove_cluster(&self, cluster: &str) {
        self.removed.lock().expect("lock").push(cluster.to_owned());
    }
    fn api_server(&self, _: &str, _: &str, _: bool, _: Option<&str>) -> Result<(), BackendError> {
        Ok(())
    }
}

fn vm(vmid: u32, name: &str, media: Vec<MediaImage>) -> GuestIdentity {
    GuestIdentity {
        vmid: VmId(vmid),
        name: name.into(),
        node: "pve1".into(),
        address: Some(std::net::Ipv4Addr::new(
            10,
            20,
            0,
            u8::try_from(vmid % 200).expect("small"),
        )),
        k3s_airgap: None,
        talos: Some("v1.11.5".into()),
        talos_extensions: vec!["qemu-guest-agent".into()],
        media,
        cluster: None,
        hardware: Default::default(),
    }
}

/// A cidata CD-ROM for `hostname` in `kind`.
fn cdrom(cas: &Cas, kind: &str, hostname: &str) -> Vec<MediaImage> {
    let text = config(cas, kind, "aaaaaa.0123456789abcdef")
        .replace("hostname: prod-1", &format!("hostname: {hostname}"));
    vec![MediaImage(Arc::new(iso("cidata", &text)))]
}

#[test]
fn a_started_talos_vm_records_on_its_console_why_it_runs_no_machine() {
    let cas = cas();
    let backend = Recorded::default();
    let mut systems = GuestSystems::default();
    let mut vm = vm(701, "prod-1", Vec::new());
    vm.address = None;
    systems.talos_power(&backend, &vm, PowerEvent::Started);
    assert_eq!(
        systems.talos_console(vm.vmid),
        [
            "[talos] Talos v1.11.5 booting",
            "[talos] no volume labelled cidata: waiting for a machine config"
        ]
    );
    assert!(systems.talos_machine(vm.vmid).is_none());
    systems.talos_power(&backend, &vm, PowerEvent::ShutDown);
    vm.media = cdrom(&cas, "worker", "prod-1");
    systems.talos_power(&backend, &vm, PowerEvent::Started);
    assert_eq!(
        systems.talos_console(vm.vmid).last().map(String::as_str),
        Some("[talos] machine config loaded from cidata: worker of cluster prod")
    );
    assert!(systems.talos_machine(vm.vmid).is_some());
    // Talos installed its config: the next boot runs it without the CD-ROM.
    systems.talos_power(&backend, &vm, PowerEvent::ShutDown);
    vm.media = Vec::new();
    systems.talos_power(&backend, &vm, PowerEvent::Started);
    assert_eq!(
        systems.talos_console(vm.vmid).last().map(String::as_str),
        Some("[talos] machine config loaded from its disk: worker of cluster prod")
    );
    systems.talos_power(&backend, &vm, PowerEvent::Destroyed);
    assert!(systems.talos_console(vm.vmid).is_empty());
    assert!(backend.created.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn bootstrap_starts_the_api_server_members_join_and_quorum_gates_it() {
    let cas = cas();
    let backend = Recorded::default();
    let mut systems = GuestSystems::default();
    let cps: Vec<GuestIdentity> = (1..=3)
        .map(|i| {
            vm(
                700 + i,
                &format!("vm-cp-{i}"),
                cdrom(&cas, "controlplane", &format!("cp-{i}")),
            )
        })
        .collect();
    let worker = vm(710, "vm-w-1", cdrom(&cas, "worker", "w-1"));
    for vm in cps.iter().chain([&worker]) {
        systems.talos_power(&backend, vm, PowerEvent::Started);
    }
    for vm in cps.iter().chain([&worker]) {
        assert!(
            systems.talos_api_address(vm.vmid).is_some(),
            "{vm:?} serves its Talos API"
        );
    }
    assert_eq!(backend.apis.lock().expect("lock").len(), 4);
    assert!(
        backend.created.lock().expect("lock").is_empty(),
        "not before Bootstrap"
    );

    let etcd = systems
        .talos_etcd(TalosClusterRef::Named("prod"))
        .expect("the cluster's etcd");
    etcd.bootstrap("cp-1", "10.20.0.101").expect("bootstraps");
    let mut later = Vec::new();
    systems.talos_reconcile(&backend, "cluster-id-1", &mut later);
    let created = backend.created.lock().expect("lock").clone();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].name, "prod");
    assert_eq!(created[0].endpoint_host, "10.20.0.10");
    assert_eq!(created[0].endpoint_port, 6443);
    assert_eq!(created[0].version.to_string(), "1.36.2");
    let authority = created[0].authority.clone().expect("the config's CA");
    assert_eq!(authority.certificate_pem, cas.kubernetes.crt);
    let names: Vec<String> = etcd
        .members()
        .expect("serves")
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(names, ["cp-1", "cp-2", "cp-3"]);
    let registered: Vec<String> = backend
        .nodes
        .lock()
        .expect("lock")
        .iter()
        .map(|(_, n)| n.name.clone())
        .collect();
    assert_eq!(registered, ["cp-1", "cp-2", "cp-3", "w-1"]);
    assert_eq!(later.len(), 4, "each Node turns Ready later");

    // Two of three control planes stop: no quorum, the API server refuses.
    systems.talos_power(&backend, &cps[1], PowerEvent::ShutDown);
    systems.talos_power(&backend, &cps[2], PowerEvent::HardStopped);
    assert!(!etcd.has_quorum());
    assert!(systems.talos_api_address(cps[1].vmid).is_none());
    let storage = backend.storage.lock().expect("lock").clone();
    assert_eq!(storage.len(), 1);
    assert!(
        storage[0]
            .as_deref()
            .is_some_and(|r| r.contains("no quorum"))
    );
    systems.talos_power(&backend, &cps[1], PowerEvent::Started);
    assert!(etcd.has_quorum());
    assert_eq!(backend.storage.lock().expect("lock").last(), Some(&None));

    // A destroyed control plane's member stays, unhealthy, until removed.
    systems.talos_power(&backend, &cps[2], PowerEvent::Destroyed);
    let members = etcd.members().expect("serves");
    assert_eq!(members.len(), 3);
    assert!(!members[2].healthy);
    etcd.remove_by_id(members[2].id).expect("removed");
    systems.talos_reconcile(&backend, "cluster-id-1", &mut later);
    assert_eq!(etcd.members().expect("serves").len(), 2);
    // A member that left does not join again until it boots again.
    etcd.leave("cp-2").expect("leaves");
    systems.talos_reconcile(&backend, "cluster-id-1", &mut later);
    assert_eq!(etcd.members().expect("serves").len(), 1);
    assert!(
        systems
            .talos_console(cps[1].vmid)
            .contains(&"[talos] etcd: this member left the cluster".to_owned())
    );

    // Machines booting after Bootstrap: a control plane joins, both register their Nodes.
    let mut late_cp = vm(720, "vm-cp-4", cdrom(&cas, "controlplane", "cp-4"));
    let newer = config(&cas, "controlplane", "aaaaaa.0123456789abcdef")
        .replace("hostname: prod-1", "hostname: cp-4")
        .replace("kubelet:v1.36.2", "kubelet:v1.37.0");
    late_cp.media = vec![MediaImage(Arc::new(iso("cidata", &newer)))];
    let late_worker = vm(721, "vm-w-2", cdrom(&cas, "worker", "w-2"));
    systems.talos_power(&backend, &late_cp, PowerEvent::Started);
    systems.talos_power(&backend, &late_worker, PowerEvent::Started);
    let names: Vec<String> = etcd
        .members()
        .expect("serves")
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(names, ["cp-1", "cp-4"]);
    let registered = backend.nodes.lock().expect("lock").len();
    assert_eq!(registered, 6, "cp-4 and w-2 registered too");
    // The API server reports the oldest member's version until the old one is gone.
    assert!(backend.versions.lock().expect("lock").is_empty());
    etcd.leave("cp-1").expect("leaves");
    systems.talos_reconcile(&backend, "cluster-id-1", &mut later);
    assert_eq!(*backend.versions.lock().expect("lock"), ["1.37.0"]);
}

#[test]
fn an_endpoint_gives_its_host_and_port() {
    assert_eq!(
        endpoint_host_port("https://k8s.lab.example:6443"),
        Some(("k8s.lab.example".into(), 6443))
    );
    assert_eq!(
        endpoint_host_port("https://10.20.0.10/"),
        Some(("10.20.0.10".into(), 443))
    );
    assert_eq!(
        endpoint_host_port("https://[fd00::10]:6443"),
        Some(("fd00::10".into(), 6443))
    );
    assert_eq!(endpoint_host_port("https://:6443"), None);
    assert_eq!(endpoint_host_port("http://k8s:6443"), None);
}
