//! A NoCloud `cidata` image delivered the way capstan delivers it to a Talos VM, through the
//! Proxmox API of the lab: uploaded to an ISO storage, put in the VM's CD-ROM drive; what the
//! lab then holds for that drive is byte for byte the image capstan's writer produced, and GNU
//! xorriso reads it as the `cidata` volume with the files as generated.

use std::sync::Arc;

use capstan::model::VmId;
use capstan::providers::proxmox::{
    ClientOptions, ConnectionConfig, ProxmoxClient, ProxmoxProvider, PveNode, TokenSecret, Trust,
    VmRef,
};
use capstan_core::talos::{cidata_files, cidata_image};
use capstan_lab::clock::LabClock;
use capstan_lab::proxmox::{DefaultShell, SimOptions, SimProxmox};
use capstan_lab::values::LabDuration;
use capstan_lab::world::{ProxmoxWorld, Timings, WorldVm};
use capstan_testkit::judge::{self, Judge};

use crate::cidata::{node, xorriso};

const TOKEN_ID: &str = "capstan@pve!talos";
const SECRET: &str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

/// The default world (its `local` directory storage holds ISO images) with fast tasks and a VM.
fn world() -> ProxmoxWorld {
    let ms = LabDuration::millis;
    let mut world = ProxmoxWorld {
        timings: Timings {
            config: ms(5),
            ..Timings::default()
        },
        ..ProxmoxWorld::default()
    };
    world.vms.push(WorldVm {
        vmid: 701,
        name: "talos-prod-cp-1".into(),
        node: "pve1".into(),
        cores: 2,
        memory_mib: 4096,
        disk_gib: 20,
        tags: None,
        description: None,
        running: false,
    });
    world
}

#[tokio::test]
async fn the_lab_holds_in_the_vms_cdrom_the_very_cidata_image_capstan_wrote() {
    if !judge::present(&[Judge::Xorriso]) {
        return;
    }
    let sim = SimProxmox::start(
        &world(),
        SimOptions::loopback(TOKEN_ID, SECRET),
        LabClock::new(),
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
    .expect("connection");
    let client = ProxmoxClient::new(&config, ClientOptions::for_lab()).expect("client");

    let facts = node(None);
    let machine_config = format!("---\nversion: v1alpha1\n# {}\n", "x".repeat(20_000));
    let files = cidata_files(&facts, "vm-701", &machine_config).expect("files");
    let image = cidata_image(&files).expect("image");
    let vm = VmRef {
        node: PveNode::from("pve1"),
        vmid: VmId(701),
    };
    let volume = client
        .upload_iso(&vm.node, "local", "talos-prod-cp-1-cidata.iso", &image)
        .await
        .expect("uploaded");
    client.attach_cdrom(&vm, &volume).await.expect("attached");

    let held = sim
        .handle()
        .cdrom_image(701, "ide2")
        .expect("the drive holds an image");
    assert!(held == image, "the lab holds other bytes than were written");

    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("held.iso");
    std::fs::write(&path, &held).expect("write");
    let pvd = xorriso(&path, &["-pvd_info"]);
    assert!(pvd.contains("Volume Id    : cidata"), "{pvd}");
    let out = dir.path().join("out");
    xorriso(
        &path,
        &[
            "-osirrox",
            "on",
            "-extract",
            "/",
            out.to_str().expect("UTF-8 path"),
        ],
    );
    let read = |name: &str| std::fs::read_to_string(out.join(name)).expect("extracted file");
    assert_eq!(read("user-data"), files.user_data);
    assert_eq!(read("meta-data"), files.meta_data);
    assert_eq!(read("network-config"), files.network_config);
}
