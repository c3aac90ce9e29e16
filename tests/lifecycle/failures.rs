//! A step that keeps failing blocks its cluster with the error and what to look at, is retried
//! with backoff, and does not stop the other clusters.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use capstan::connect::{AdmitError, Connections, Providers};
use capstan::plan::ActionKind;
use capstan::providers::kube::{AdminKubeconfig, ClusterError};
use capstan::providers::proxmox::{
    CloneRequest, CommandOutput, ExpectedVm, Inventory, ProxmoxClient, ProxmoxError,
    ProxmoxProvider, PveNode, ResizeOutcome, StorageContent, StoredVolume, VmRef, VmSettings,
    VolumeId,
};
use capstan::status::Phase;
use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_steps_keep_failing_is_blocked_and_the_others_carry_on() {
    // Every machine of it names a storage Proxmox does not have (they are all cloned at once).
    let broken = cluster_yaml("edge", 31, "1.36.2", 2, "debian13-k8s")
        .replace(
            "placement: [pve1]}",
            "placement: [pve1], storage: no-such-storage}",
        )
        .replace(
            "placement: [pve1, pve2, pve3]}",
            "placement: [pve1, pve2, pve3], storage: no-such-storage}",
        );
    // (A missing template is refused by the plan itself; a storage Proxmox does not have is
    // only found out by the clone.)
    assert!(broken.contains("no-such-storage"));
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[
            (
                "prod",
                cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s"),
            ),
            ("edge", broken),
        ],
    )
    .await;
    world.start_daemon().await;
    let status = world
        .wait_for("prod Ready and edge Blocked", |s| {
            ready(s, &["prod"])
                && s.clusters
                    .get("edge")
                    .is_some_and(|c| c.phase == Phase::Blocked)
        })
        .await;
    let edge = &status.clusters["edge"];
    let last = edge
        .last_step
        .as_ref()
        .expect("the failing step is reported");
    assert_eq!(last.action, ActionKind::CreateMachine);
    assert!(!last.succeeded && last.failures >= 5, "{last:?}");
    assert!(
        last.message.contains("no-such-storage"),
        "the error names what to fix: {}",
        last.message
    );
    let blocked = edge
        .conditions
        .iter()
        .find(|c| c.kind == "Blocked")
        .expect("Blocked condition");
    assert_eq!(
        (blocked.status.as_str(), blocked.reason.as_str()),
        ("True", "StepFailing")
    );
    assert!(
        blocked.message.contains("create-machine keeps failing"),
        "{}",
        blocked.message
    );
    assert!(
        world.vms_of("edge").is_empty(),
        "nothing half-made is left for the failing cluster"
    );

    // Fixing the file unblocks it.
    world.write_cluster(
        "edge",
        &cluster_yaml("edge", 31, "1.36.2", 2, "debian13-k8s"),
    );
    world
        .wait_for("edge Ready once fixed", |s| ready(s, &["prod", "edge"]))
        .await;
    world.kill_daemon().await;
}

/// The lab's Proxmox client, except that its first `panics_left` clones panic (a bug in a
/// step, as the daemon sees it).
#[derive(Clone)]
struct PanickingProxmox {
    inner: Arc<ProxmoxClient>,
    panics_left: Arc<AtomicU32>,
}

impl ProxmoxProvider for PanickingProxmox {
    fn inventory(&self) -> impl Future<Output = Result<Inventory, ProxmoxError>> + Send {
        self.inner.inventory()
    }
    fn clone_vm(
        &self,
        request: &CloneRequest,
    ) -> impl Future<Output = Result<VmRef, ProxmoxError>> + Send {
        let panics_left = &self.panics_left;
        let inner = &self.inner;
        async move {
            let armed = panics_left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                    left.checked_sub(1)
                })
                .is_ok();
            assert!(!armed, "clone of {} hit a bug", request.name);
            inner.clone_vm(request).await
        }
    }
    fn configure_vm(
        &self,
        vm: &VmRef,
        settings: &VmSettings,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.configure_vm(vm, settings)
    }
    fn resize_disk(
        &self,
        vm: &VmRef,
        size_gib: u32,
    ) -> impl Future<Output = Result<ResizeOutcome, ProxmoxError>> + Send {
        self.inner.resize_disk(vm, size_gib)
    }
    fn start_vm(&self, vm: &VmRef) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.start_vm(vm)
    }
    fn shutdown_vm(
        &self,
        vm: &ExpectedVm,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.shutdown_vm(vm, timeout)
    }
    fn stop_vm(&self, vm: &ExpectedVm) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.stop_vm(vm)
    }
    fn destroy_vm(&self, vm: &ExpectedVm) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.destroy_vm(vm)
    }
    fn add_tag(
        &self,
        vm: &ExpectedVm,
        tag: &str,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.add_tag(vm, tag)
    }
    fn vm_description(
        &self,
        vm: &VmRef,
    ) -> impl Future<Output = Result<String, ProxmoxError>> + Send {
        self.inner.vm_description(vm)
    }
    fn agent_ping(&self, vm: &VmRef) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.agent_ping(vm)
    }
    fn await_agent(&self, vm: &VmRef) -> impl Future<Output = Result<bool, ProxmoxError>> + Send {
        self.inner.await_agent(vm)
    }
    fn run_command(
        &self,
        vm: &VmRef,
        command: &[String],
        input: Option<&str>,
        timeout: Duration,
    ) -> impl Future<Output = Result<CommandOutput, ProxmoxError>> + Send {
        self.inner.run_command(vm, command, input, timeout)
    }
    fn vm_addresses(
        &self,
        vm: &VmRef,
    ) -> impl Future<Output = Result<Vec<Ipv4Addr>, ProxmoxError>> + Send {
        self.inner.vm_addresses(vm)
    }
    fn vm_hardware(
        &self,
        vm: &VmRef,
    ) -> impl Future<Output = Result<capstan::providers::proxmox::VmHardware, ProxmoxError>> + Send
    {
        self.inner.vm_hardware(vm)
    }
    fn hardware_facts(
        &self,
        nodes: &[PveNode],
    ) -> impl Future<Output = Result<capstan::providers::proxmox::HardwareFacts, ProxmoxError>> + Send
    {
        self.inner.hardware_facts(nodes)
    }
    fn ensure_pool(
        &self,
        pool: &str,
        create: bool,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.ensure_pool(pool, create)
    }
    fn place_vm(
        &self,
        vm: &ExpectedVm,
        filing: &capstan::providers::proxmox::VmFiling,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.place_vm(vm, filing)
    }
    fn write_file(
        &self,
        vm: &VmRef,
        path: &str,
        content: &[u8],
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.write_file(vm, path, content)
    }
    fn storage_content(
        &self,
        node: &PveNode,
        storage: &str,
    ) -> impl Future<Output = Result<BTreeSet<StorageContent>, ProxmoxError>> + Send {
        self.inner.storage_content(node, storage)
    }
    fn storage_volumes(
        &self,
        node: &PveNode,
        storage: &str,
        content: StorageContent,
    ) -> impl Future<Output = Result<Vec<StoredVolume>, ProxmoxError>> + Send {
        self.inner.storage_volumes(node, storage, content)
    }
    fn upload_iso(
        &self,
        node: &PveNode,
        storage: &str,
        file_name: &str,
        image: &[u8],
    ) -> impl Future<Output = Result<VolumeId, ProxmoxError>> + Send {
        self.inner.upload_iso(node, storage, file_name, image)
    }
    fn delete_volume(
        &self,
        node: &PveNode,
        volume: &VolumeId,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.delete_volume(node, volume)
    }
    fn attach_cdrom(
        &self,
        vm: &VmRef,
        volume: &VolumeId,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.attach_cdrom(vm, volume)
    }
    fn detach_cdrom(
        &self,
        vm: &VmRef,
        volume: &VolumeId,
    ) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.detach_cdrom(vm, volume)
    }
}

/// The lab's connections with [`PanickingProxmox`] clients.
struct PanickingProviders {
    inner: Connections,
    proxmox: BTreeMap<String, PanickingProxmox>,
}

impl PanickingProviders {
    fn new(inner: Connections, panics: u32) -> Self {
        let panics_left = Arc::new(AtomicU32::new(panics));
        let proxmox = inner
            .proxmox_connections()
            .into_iter()
            .map(|name| {
                let client = PanickingProxmox {
                    inner: Arc::clone(inner.proxmox(name).expect("listed connection")),
                    panics_left: Arc::clone(&panics_left),
                };
                (name.to_owned(), client)
            })
            .collect();
        PanickingProviders { inner, proxmox }
    }
}

impl Providers for PanickingProviders {
    type Proxmox = PanickingProxmox;
    type Cluster = <Connections as Providers>::Cluster;
    type Flux = <Connections as Providers>::Flux;

    fn proxmox(&self, connection: &str) -> Option<&Self::Proxmox> {
        self.proxmox.get(connection)
    }

    fn proxmox_connections(&self) -> Vec<&str> {
        self.inner.proxmox_connections()
    }

    fn flux(&self, management_cluster: &str) -> Option<&Self::Flux> {
        self.inner.flux(management_cluster)
    }

    fn management(&self, preferred: Option<&str>) -> Option<&Self::Cluster> {
        self.inner.management(preferred)
    }

    fn datastore(&self, server: &str) -> Option<&capstan::providers::datastore::AdminAccess> {
        self.inner.datastore(server)
    }

    fn kine_dsn(
        &self,
        cluster: &str,
        source: &capstan::spec::SecretSource,
    ) -> Result<String, capstan::secrets::SecretError> {
        self.inner.kine_dsn(cluster, source)
    }

    fn registry_password(
        &self,
        cluster: &str,
        registry: &str,
        source: &capstan::spec::SecretSource,
    ) -> Result<String, capstan::secrets::SecretError> {
        self.inner.registry_password(cluster, registry, source)
    }

    fn admit_kubeconfig(
        &self,
        cluster: &str,
        spec: &capstan::spec::ClusterSpec,
        read: &str,
    ) -> impl Future<Output = Result<AdminKubeconfig, AdmitError>> + Send {
        self.inner.admit_kubeconfig(cluster, spec, read)
    }

    fn forget_ca(
        &self,
        cluster: &str,
        management: Option<&str>,
    ) -> impl Future<Output = Result<(), capstan::records::ca_pins::PinError>> + Send {
        self.inner.forget_ca(cluster, management)
    }

    fn connect_cluster(
        &self,
        kubeconfig: &AdminKubeconfig,
    ) -> impl Future<Output = Result<Self::Cluster, ClusterError>> + Send {
        self.inner.connect_cluster(kubeconfig)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_panics_is_reported_as_failed_and_retried_after_backoff() {
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(
            "prod",
            cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s"),
        )],
    )
    .await;
    world
        .start_daemon_with(|connections| PanickingProviders::new(connections, 2))
        .await;
    let status = world
        .wait_for_within(
            "the panic reported as a failed step",
            Duration::from_secs(20),
            |s| {
                s.clusters
                    .get("prod")
                    .and_then(|c| c.last_step.as_ref())
                    .is_some_and(|step| !step.succeeded)
            },
        )
        .await;
    let last = status.clusters["prod"]
        .last_step
        .as_ref()
        .expect("the failing step is reported");
    assert_eq!(last.action, ActionKind::CreateMachine);
    assert!(
        last.message
            .contains("step panicked: clone of capstan-prod-")
            && last.message.contains("hit a bug"),
        "the status carries the panic message: {}",
        last.message
    );
    world
        .wait_for("prod Ready once the clones stop panicking", |s| {
            ready(s, &["prod"])
        })
        .await;
    assert!(
        world
            .counters()
            .steps
            .get(&(ActionKind::CreateMachine, "error"))
            .is_some_and(|&errors| errors >= 2),
        "each panic counts as a failed step: {:?}",
        world.counters().steps
    );
    world.kill_daemon().await;
}
