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
use capstan_lab::clock::LabClock;
use capstan_lab::proxmox::{DefaultShell, GuestSoftware, SimOptions, SimProxmox};
use capstan_lab::values::LabDuration;
use capstan_lab::world::{ProxmoxWorld, Timings, WorldStorage, WorldTemplate};

const TOKEN_ID: &str = "capstan@pve!talos";
const SECRET: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
pub const TALOS_VERSION: &str = "v1.11.5";

/// Fast tasks, a `local` ISO storage and a `talos-1.11` template (VMID 9400) on pve1.
pub fn talos_world() -> ProxmoxWorld {
    let ms = LabDuration::millis;
    let mut world = ProxmoxWorld {
        timings: Timings {
            clone: ms(20),
            config: ms(5),
            start: ms(10),
            boot: ms(30),
            shutdown: ms(10),
            stop: ms(10),
            ..Timings::default()
        },
        ..ProxmoxWorld::default()
    };
    world.storages.push(WorldStorage {
        name: "local".into(),
        kind: "dir".into(),
        shared: false,
        size_gib: 100,
        content: vec!["iso".into()],
    });
    let mut templates = world.effective_templates();
    templates.push(WorldTemplate {
        talos: Some(TALOS_VERSION.into()),
        tags: vec!["talos".into()],
        ..WorldTemplate::new("talos-1.11", 9400, "pve1")
    });
    world.templates = Some(templates);
    world
}

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

/// Clones `talos-1.11` as `name` (a member of cluster `prod` in `role`).
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
        template: "talos-1.11".into(),
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
