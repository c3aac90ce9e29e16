//! Shared setup of the Proxmox tests: a simulated Proxmox with fast tasks and a real client
//! pinned to its certificate.

use std::sync::Arc;

use capstan::model::{NodeName, Ownership, Role};
use capstan::providers::proxmox::{
    ClientOptions, CloneRequest, ConnectionConfig, ExpectedVm, ProxmoxClient, PveNode, TokenSecret,
    Trust, VmRef,
};
use capstan_lab::clock::LabClock;
use capstan_lab::proxmox::{DefaultShell, GuestSoftware, SimOptions, SimProxmox};
use capstan_lab::values::LabDuration;
use capstan_lab::world::{ProxmoxWorld, Timings};

pub const TOKEN_ID: &str = "capstan@pve!test";
pub const SECRET: &str = "5f0c2a8e-1b3d-4c5e-8f70-0a1b2c3d4e5f";

fn ms(n: u64) -> LabDuration {
    LabDuration::millis(n)
}

/// The default world with tasks that take milliseconds.
pub fn fast_world() -> ProxmoxWorld {
    ProxmoxWorld {
        timings: Timings {
            clone: ms(40),
            config: ms(5),
            resize: ms(5),
            start: ms(20),
            boot: ms(60),
            shutdown: ms(20),
            stop: ms(10),
            destroy: ms(10),
            agent_timeout: ms(100),
            auth_failure_delay: ms(20),
            ..Timings::default()
        },
        ..ProxmoxWorld::default()
    }
}

/// A running sim and a client for it.
pub struct Setup {
    pub sim: SimProxmox,
    pub client: ProxmoxClient,
}

pub async fn start(world: ProxmoxWorld) -> Setup {
    start_with(world, Arc::new(DefaultShell::new()), false).await
}

pub async fn start_with(world: ProxmoxWorld, guest: Arc<dyn GuestSoftware>, record: bool) -> Setup {
    let options = SimOptions {
        record,
        ..SimOptions::loopback(TOKEN_ID, SECRET)
    };
    let sim = SimProxmox::start(&world, options, LabClock::new(), guest)
        .await
        .expect("sim starts");
    let client = client(&sim, SECRET, Trust::Fingerprint(sim.fingerprint()));
    Setup { sim, client }
}

pub fn client(sim: &SimProxmox, secret: &str, trust: Trust) -> ProxmoxClient {
    let config = ConnectionConfig::new(&sim.url(), TOKEN_ID, TokenSecret::new(secret), trust)
        .expect("connection config");
    ProxmoxClient::new(&config, ClientOptions::for_lab()).expect("client")
}

pub fn ownership(cluster: &str, role: Role, pool: &str) -> Ownership {
    Ownership {
        cluster: cluster.into(),
        role,
        pool: pool.into(),
        spec_hash: "0123456789ab".into(),
    }
}

pub fn created() -> jiff::Timestamp {
    "2026-11-30T10:00:00Z".parse().expect("timestamp")
}

pub fn clone_request(cluster: &str, pool: &str, suffix: &str, target: &str) -> CloneRequest {
    CloneRequest {
        template: "debian13-k8s".into(),
        target: PveNode::from(target),
        name: NodeName(format!("capstan-{cluster}-{pool}-{suffix}").into()),
        ownership: ownership(cluster, Role::Worker, pool),
        created: created(),
        pool: Some("capstan".into()),
        storage: None,
        built_from: Some("template=debian13-k8s cores=2".into()),
    }
}

pub fn expected(vm: &VmRef, request: &CloneRequest) -> ExpectedVm {
    ExpectedVm {
        vm: vm.clone(),
        name: request.name.clone(),
        ownership: request.ownership.clone(),
    }
}

/// The `debian13-k8s` template (VMID 9000) on pve1, its disk on `storage` (the first of the
/// world's storages when `None`).
pub fn template_on_pve1(storage: Option<&str>) -> capstan_lab::world::WorldTemplate {
    capstan_lab::world::WorldTemplate {
        storage: storage.map(str::to_owned),
        ..capstan_lab::world::WorldTemplate::new("debian13-k8s", 9000, "pve1")
    }
}

/// [`fast_world`] with the storages of a real install and more: `local-lvm` (disks), `local`
/// (a directory holding ISO images, container templates and backups), `backups` (a directory
/// holding only backups) and `isos` (NFS, shared, ISO images only).
pub fn iso_world() -> capstan_lab::world::ProxmoxWorld {
    use capstan_lab::world::WorldStorage;
    let storage = |name: &str, kind: &str, shared, content: &[&str]| WorldStorage {
        name: name.into(),
        kind: kind.into(),
        shared,
        size_gib: 2048,
        content: content.iter().map(|c| (*c).to_owned()).collect(),
    };
    let mut world = fast_world();
    world.storages = vec![
        storage("local-lvm", "lvmthin", false, &["images", "rootdir"]),
        storage("local", "dir", false, &["iso", "vztmpl", "backup"]),
        storage("backups", "dir", false, &["backup"]),
        storage("isos", "nfs", true, &["iso"]),
    ];
    world
}
