//! How many API calls and how long one full `inventory()` of a Proxmox cluster takes, against
//! the simulated Proxmox with 50 and 500 VMs over 3 nodes. The call count must not grow with
//! the number of VMs. Run: `cargo bench --bench proxmox_observe`.

use std::sync::Arc;
use std::time::Instant;

use capstan::model::{Ownership, Role};
use capstan::providers::proxmox::ownership::{encode_tags, vm_name};
use capstan::providers::proxmox::{
    ClientOptions, ConnectionConfig, ProxmoxClient, ProxmoxProvider, TokenSecret, Trust,
};
use capstan_lab::proxmox::{DefaultShell, SimOptions, SimProxmox};
use capstan_lab::world::{ProxmoxWorld, WorldVm};

const TOKEN_ID: &str = "bench@pve!observe";
const SECRET: &str = "00000000-0000-4000-8000-000000000000";

fn world(vm_count: u32) -> ProxmoxWorld {
    let mut world = ProxmoxWorld::default();
    for node in &mut world.nodes {
        node.memory_gib = 4096;
    }
    let created = jiff::Timestamp::now();
    for index in 0..vm_count {
        let node = format!("pve{}", index % 3 + 1);
        let cluster = format!("c{}", index % 7);
        let ownership = Ownership {
            cluster: cluster.clone().into(),
            role: if index % 5 == 0 {
                Role::ControlPlane
            } else {
                Role::Worker
            },
            pool: "general".into(),
            spec_hash: "0123456789ab".into(),
        };
        let ours = index % 4 != 0;
        world.vms.push(WorldVm {
            vmid: 1000 + index,
            name: if ours {
                vm_name(&cluster, "general", &format!("{index:05}"))
                    .0
                    .to_string()
            } else {
                format!("other-{index}")
            },
            node,
            cores: 2,
            memory_mib: 2048,
            disk_gib: 20,
            tags: ours.then(|| encode_tags(&ownership, created).join(";")),
            description: None,
            running: index % 2 == 0,
        });
    }
    world
}

async fn observe(vm_count: u32) -> (u64, std::time::Duration, usize, usize) {
    let sim = SimProxmox::start(
        &world(vm_count),
        SimOptions::loopback(TOKEN_ID, SECRET),
        capstan_lab::clock::LabClock::new(),
        Arc::new(DefaultShell::new()),
    )
    .await
    .expect("sim starts");
    let config = ConnectionConfig::new(
        &sim.url(),
        TOKEN_ID,
        TokenSecret::new(SECRET),
        Trust::Fingerprint(sim.fingerprint()),
    )
    .expect("config");
    let client = ProxmoxClient::new(&config, ClientOptions::for_lab()).expect("client");
    // Warm the connection so the figure is the observation, not the TLS handshake.
    let _ = client.inventory().await.expect("inventory");
    sim.handle().reset_calls();
    let started = Instant::now();
    let inventory = client.inventory().await.expect("inventory");
    let elapsed = started.elapsed();
    let owned = inventory.vms.iter().filter(|vm| vm.owner.is_some()).count();
    (
        sim.handle().total_calls(),
        elapsed,
        inventory.vms.len(),
        owned,
    )
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!("one full inventory() of a simulated Proxmox cluster (3 nodes)");
    println!(
        "{:>6} {:>10} {:>8} {:>10} {:>12}",
        "VMs", "templates", "owned", "API calls", "time"
    );
    let mut counts = Vec::new();
    for vm_count in [50, 500] {
        let (calls, elapsed, seen, owned) = runtime.block_on(observe(vm_count));
        println!(
            "{:>6} {:>10} {:>8} {:>10} {:>10.1}ms",
            vm_count,
            seen - vm_count as usize,
            owned,
            calls,
            elapsed.as_secs_f64() * 1000.0
        );
        counts.push(calls);
    }
    if counts.windows(2).all(|pair| pair[0] == pair[1]) {
        println!("the call count is the same at 50 and 500 VMs");
    } else {
        println!("WARNING: the call count grows with the VM count: {counts:?}");
    }
}
