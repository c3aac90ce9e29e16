//! Machine hardware as Proxmox users declare it, built by the daemon on the lab: a worker pool
//! with two data disks and two network cards (VLAN 20 on `vmbr0`, VLAN 30 at MTU 9000 on
//! `vmbr1`) holds exactly those devices, read back through the API by `proxmoxer`; inside the
//! VM the disks are block devices (one mounted where the file says) and the Node's InternalIP
//! is on the declared card; a change of tags is applied in place, a change of disks replaces
//! the pool's machines one at a time; and what Proxmox lacks (a bridge, a PCI mapping, room on
//! a storage) is refused before any clone, naming the field and the node.

use std::collections::BTreeMap;
use std::time::Duration;

use capstan_lab::world::{LabConfig, WorldBridge, WorldSegment};
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::{ClusterYaml, World, fleet_yaml, ready};
use serde_json::Value;

/// The workers' machine line of [`ClusterYaml`], which each test extends.
const WORKERS_MACHINE: &str = "placement: [pve1, pve2, pve3]}\n";

/// Two data disks (a raw one for Longhorn-like storage, one mounted) and two cards.
const HARDWARE: &str = "disks: [{sizeGiB: 20, ssd: true, discard: true}, {sizeGiB: 10, mount: {path: /var/lib/data}}], networks: [{bridge: vmbr0, vlan: 20}, {bridge: vmbr1, vlan: 30, mtu: 9000}], ";

/// `cluster`'s file with its workers' machine given `extra` (flow-style fields).
fn with_workers(cluster: ClusterYaml, extra: &str) -> String {
    let text = cluster.render();
    let changed = text.replacen(
        WORKERS_MACHINE,
        &WORKERS_MACHINE.replacen("placement:", &format!("{extra}placement:"), 1),
        1,
    );
    assert_ne!(changed, text, "the workers' machine line is as expected");
    changed
}

/// The lab with `vmbr1` (MTU 9000) on every node, VLAN 20 on `vmbr0` (10.20.0.0/24, DHCP and
/// a router) and VLAN 30 on `vmbr1` (10.30.0.0/24, DHCP, no router).
fn vlan_lab() -> LabConfig {
    let mut config = LabConfig::default();
    for node in &mut config.proxmox.nodes {
        node.bridges.push(WorldBridge {
            name: "vmbr1".into(),
            mtu: 9000,
        });
    }
    config.proxmox.network.segments = vec![segment("vmbr0", 20, true), segment("vmbr1", 30, false)];
    config
}

fn segment(bridge: &str, vlan: u16, router: bool) -> WorldSegment {
    let subnet = format!("10.{vlan}.0.0/24");
    serde_json::from_value(serde_json::json!({
        "bridge": bridge,
        "vlan": vlan,
        "subnet": subnet,
        "dhcpRange": format!("10.{vlan}.0.100-10.{vlan}.0.150"),
        "router": router,
    }))
    .expect("a segment")
}

/// Each worker VM's config as `proxmoxer` reads it: name → config.
fn configs_by_proxmoxer(world: &World, vmids: &[(String, String, u32)]) -> BTreeMap<String, Value> {
    let dir = tempfile::tempdir().expect("dir");
    let ca = dir.path().join("pve.pem");
    std::fs::write(&ca, world.lab.proxmox_server().certificate_pem()).expect("cert");
    let script = r#"
import json, sys
from proxmoxer import ProxmoxAPI
host, port, user, token_name, token_value, ca = sys.argv[1:7]
px = ProxmoxAPI(host, port=int(port), user=user, token_name=token_name,
                token_value=token_value, verify_ssl=ca, service="PVE")
out = {}
for item in sys.argv[7:]:
    name, node, vmid = item.split(":")
    out[name] = px.nodes(node).qemu(int(vmid)).config.get()
print(json.dumps(out))
"#;
    let addr = world.lab.proxmox_server().local_addr();
    let (user, token_name) = world.lab.token_id().split_once('!').expect("token id");
    let output = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script])
        .args([
            &addr.ip().to_string(),
            &addr.port().to_string(),
            user,
            token_name,
            world.lab.token(),
            ca.to_str().expect("utf-8 path"),
        ])
        .args(
            vmids
                .iter()
                .map(|(name, node, vmid)| format!("{name}:{node}:{vmid}")),
        )
        .output()
        .expect("/usr/bin/python3 runs");
    assert!(
        output.status.success(),
        "proxmoxer failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice::<BTreeMap<String, Value>>(&output.stdout).expect("JSON")
}

/// The keys of `config` that are disks (`scsi<n>`, not the cloud-init drive) or cards.
fn devices(config: &Value) -> BTreeMap<String, String> {
    config
        .as_object()
        .expect("a config")
        .iter()
        .filter(|(key, _)| {
            let family = key.trim_end_matches(|c: char| c.is_ascii_digit());
            family.len() < key.len()
                && ["scsi", "net", "hostpci", "virtio", "sata"].contains(&family)
        })
        .map(|(key, value)| (key.clone(), value.as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// An option of a property string (`tag` in `virtio=..,bridge=vmbr0,tag=20`).
fn option<'a>(value: &'a str, key: &str) -> Option<&'a str> {
    value
        .split(',')
        .find_map(|part| part.strip_prefix(key)?.strip_prefix('='))
}

/// What `lsblk` in the guest of `vmid` lists: (name, serial, bytes, mount point).
async fn block_devices(world: &World, vmid: u32) -> Vec<(String, String, u64, String)> {
    let guest = world.lab.proxmox().guest(vmid).expect("the VM exists");
    let argv: Vec<String> = ["lsblk", "-b", "-dn", "-o", "NAME,SERIAL,SIZE,MOUNTPOINT"]
        .map(String::from)
        .to_vec();
    let out = world
        .lab
        .nodes()
        .expect("lab nodes")
        .exec(&guest, &argv)
        .await;
    assert_eq!(out.exit_code, 0, "{out:?}");
    out.stdout
        .lines()
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            (
                words[0].to_owned(),
                words[1].to_owned(),
                words[2].parse().unwrap_or(0),
                words[3].to_owned(),
            )
        })
        .collect()
}

/// Every VM of `cluster`'s pool `pool` holds exactly the devices of [`HARDWARE`] (its
/// config read back by `proxmoxer`), its guest sees the data disks as block devices (the second
/// mounted), and its Node's InternalIP is on the first card (VLAN 20).
async fn assert_declared_hardware(world: &World, cluster: &str, pool: &str) {
    let workers: Vec<(String, String, u32)> = world
        .vms_of(cluster)
        .into_iter()
        .filter(|vm| vm.name.contains(&format!("-{pool}-")))
        .map(|vm| (vm.name, vm.node, vm.vmid))
        .collect();
    assert_eq!(workers.len(), 2, "{workers:?}");
    let configs = configs_by_proxmoxer(world, &workers);
    let ips = capstan_testkit::network::internal_ips(world, cluster);
    for (name, _, vmid) in &workers {
        let devices = devices(&configs[name]);
        let keys: Vec<&str> = devices.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["net0", "net1", "scsi0", "scsi1", "scsi2"],
            "{name}: exactly the template's boot disk, two data disks and two cards: {devices:?}"
        );
        let scsi1 = &devices["scsi1"];
        assert_eq!(option(scsi1, "size"), Some("20G"), "{scsi1}");
        assert_eq!(option(scsi1, "ssd"), Some("1"), "{scsi1}");
        assert_eq!(option(scsi1, "discard"), Some("on"), "{scsi1}");
        assert_eq!(option(scsi1, "serial"), Some("capstan-disk1"), "{scsi1}");
        let scsi2 = &devices["scsi2"];
        assert_eq!(option(scsi2, "size"), Some("10G"), "{scsi2}");
        assert_eq!(option(scsi2, "serial"), Some("capstan-disk2"), "{scsi2}");
        let (net0, net1) = (&devices["net0"], &devices["net1"]);
        assert_eq!(option(net0, "bridge"), Some("vmbr0"), "{net0}");
        assert_eq!(option(net0, "tag"), Some("20"), "{net0}");
        assert_eq!(option(net0, "mtu"), None, "{net0}");
        assert_eq!(option(net1, "bridge"), Some("vmbr1"), "{net1}");
        assert_eq!(option(net1, "tag"), Some("30"), "{net1}");
        assert_eq!(option(net1, "mtu"), Some("9000"), "{net1}");
        assert!(
            net0.starts_with("virtio=") && net1.starts_with("virtio="),
            "MACs given"
        );

        let disks = block_devices(world, *vmid).await;
        let data: Vec<(&str, u64, &str)> = disks
            .iter()
            .filter(|(_, serial, _, _)| serial.starts_with("capstan-disk"))
            .map(|(_, serial, bytes, mount)| (serial.as_str(), *bytes, mount.as_str()))
            .collect();
        assert_eq!(
            data,
            [
                ("capstan-disk1", 20 << 30, "-"),
                ("capstan-disk2", 10 << 30, "/var/lib/data")
            ],
            "{name}: the raw disk stays raw, the other is mounted: {disks:?}"
        );
        let ip = &ips[name];
        assert!(
            ip.starts_with("10.20.0."),
            "{name}: its InternalIP {ip} is on the first card (VLAN 20)"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeadm_pool_with_two_data_disks_and_two_vlan_cards_gets_exactly_those_devices() {
    if !judge::present(&[Judge::Kubectl, Judge::Proxmoxer]) {
        return;
    }
    const CLUSTER: &str = "storage";
    let mut world = World::with_lab(
        vlan_lab(),
        &fleet_yaml(&["1.36"], false),
        &[(
            CLUSTER,
            with_workers(ClusterYaml::lab(CLUSTER).address(44), HARDWARE),
        )],
        false,
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    assert_declared_hardware(&world, CLUSTER, "general").await;
    world.kill_daemon().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_k3s_pool_with_two_data_disks_and_two_vlan_cards_gets_exactly_those_devices() {
    if !judge::present(&[Judge::Kubectl, Judge::Proxmoxer]) {
        return;
    }
    const CLUSTER: &str = "storagek3s";
    let release = capstan_lab::world::DEFAULT_K3S_RELEASE;
    let file = format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {CLUSTER}}}
spec:
  proxmox: homelab
  kubernetes: {{distribution: k3s, version: {release}}}
  endpoint: {{host: k8s-{CLUSTER}.lab.example, address: 192.168.1.43}}
  network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  controlPlane:
    machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, placement: [pve1]}}
  workers:
    - pool: agents
      replicas: 2
      machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, {HARDWARE}placement: [pve1, pve2, pve3]}}
  rollout: {{minWorkers: 1, drainTimeout: 4s, joinTimeout: 2m}}
  delivery:
    flux: {{cluster: management}}
"
    );
    let mut lab = vlan_lab();
    lab.proxmox.templates = Some(lab.proxmox.effective_templates());
    let mut world = World::with_lab(
        lab,
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, file)],
        false,
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    assert_declared_hardware(&world, CLUSTER, "agents").await;
    world.kill_daemon().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bridge_a_missing_mapping_and_a_full_storage_are_refused_before_any_clone() {
    const CLUSTER: &str = "refused";
    let cases = [
        (
            "networks: [{bridge: vmbr7, vlan: 20}], ",
            "machine.networks[0].bridge: bridge vmbr7 does not exist on pve1 (it has vmbr0, vmbr1)",
        ),
        (
            "pci: [{mapping: gpu-a40}], ",
            "machine.pci[0].mapping: PCI mapping gpu-a40 does not exist (Proxmox has none)",
        ),
        (
            "disks: [{sizeGiB: 60000, storage: local-lvm}], ",
            "machine.disks: storage local-lvm on pve1 has",
        ),
    ];
    for (extra, words) in cases {
        let mut world = World::with_lab(
            vlan_lab(),
            &fleet_yaml(&["1.36"], false),
            &[(
                CLUSTER,
                with_workers(ClusterYaml::lab(CLUSTER).address(45), extra),
            )],
            false,
        )
        .await;
        world.start_daemon().await;
        let status = world
            .wait_for_within("the refusal in the status", Duration::from_secs(30), |s| {
                serde_json::to_string(&s.clusters.get(CLUSTER))
                    .unwrap_or_default()
                    .contains(words)
            })
            .await;
        let text = serde_json::to_string(&status.clusters.get(CLUSTER)).unwrap_or_default();
        assert!(text.contains("pool general"), "names the pool: {text}");
        assert!(
            world.vms_of(CLUSTER).is_empty(),
            "{extra}: no VM is cloned, not even the control plane's"
        );
        let clones = world
            .lab
            .proxmox()
            .tasks()
            .iter()
            .filter(|t| t.kind == "qmclone")
            .count();
        assert_eq!(clones, 0, "{extra}");
        world.kill_daemon().await;
    }
}

/// `qmclone` tasks the simulated Proxmox ran so far.
fn clones(world: &World) -> usize {
    world
        .lab
        .proxmox()
        .tasks()
        .iter()
        .filter(|t| t.kind == "qmclone")
        .count()
}

/// The operator's tags of a VM (capstan's own left out), sorted.
fn operator_tags(config: &BTreeMap<String, String>) -> Vec<String> {
    let mut tags: Vec<String> = config
        .get("tags")
        .map(String::as_str)
        .unwrap_or_default()
        .split([';', ',', ' '])
        .filter(|t| !t.is_empty() && !capstan::spec::hardware::is_capstan_tag(t))
        .map(str::to_owned)
        .collect();
    tags.sort();
    tags
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_and_pool_change_in_place_and_a_disk_change_replaces_the_pool_one_at_a_time() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    const CLUSTER: &str = "filed";
    let fleet = fleet_yaml(&["1.36"], false).replacen(
        "tokenFrom: {env: CAPSTAN_PROXMOX_HOMELAB_TOKEN}\n",
        "tokenFrom: {env: CAPSTAN_PROXMOX_HOMELAB_TOKEN}\n    createPools: true\n",
        1,
    );
    let cluster = |extra: &str| with_workers(ClusterYaml::lab(CLUSTER).address(46), extra);
    let mut world = World::with_lab(
        LabConfig::default(),
        &fleet,
        &[(CLUSTER, cluster("tags: [team-a, backup], pool: capstan, "))],
        false,
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    let workers = |world: &World| -> Vec<capstan_lab::proxmox::SimVm> {
        world
            .vms_of(CLUSTER)
            .into_iter()
            .filter(|vm| vm.name.contains("-general-"))
            .collect()
    };
    let before: Vec<String> = workers(&world).into_iter().map(|vm| vm.name).collect();
    assert_eq!(before.len(), 2);
    for vm in workers(&world) {
        assert_eq!(
            operator_tags(&vm.config),
            ["backup", "team-a"],
            "{}",
            vm.name
        );
    }
    let cloned = clones(&world);

    // Tags and pool: in place, on every worker, with no clone.
    world.write_cluster(CLUSTER, &cluster("tags: [team-b, backup], pool: k8s, "));
    world
        .wait_for_within("the tags changed in place", Duration::from_secs(60), |_| {
            // The step counts once it has ended, which may be a moment after the VMs show it.
            world.steps_ok("tag-machines") >= 1
                && workers(&world)
                    .iter()
                    .all(|vm| operator_tags(&vm.config) == ["backup", "team-b"])
        })
        .await;
    assert!(world.steps_ok("tag-machines") >= 1);
    let after: Vec<String> = workers(&world).into_iter().map(|vm| vm.name).collect();
    assert_eq!(after, before, "the same machines");
    assert_eq!(clones(&world), cloned, "no clone for tags and pool");
    let pool_of = |vmid: u32| world.lab.proxmox().pool_of(vmid);
    for vm in workers(&world) {
        assert_eq!(
            pool_of(vm.vmid).as_deref(),
            Some("k8s"),
            "{} moved",
            vm.name
        );
    }

    // A data disk: the pool's machines are replaced, new before old, one at a time.
    world.write_cluster(
        CLUSTER,
        &cluster("tags: [team-b, backup], pool: k8s, disks: [{sizeGiB: 30}], "),
    );
    let mut most = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let now = workers(&world);
        most = most.max(now.len());
        let replaced = now.len() == 2
            && now.iter().all(|vm| {
                !before.contains(&vm.name)
                    && vm
                        .config
                        .values()
                        .any(|v| v.contains("serial=capstan-disk1"))
            });
        if replaced && ready(&world.status(), &[CLUSTER]) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "replaced in time");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        most, 3,
        "one machine more than the pool at most (maxSurge 1)"
    );
    for vm in workers(&world) {
        assert_eq!(
            operator_tags(&vm.config),
            ["backup", "team-b"],
            "{}",
            vm.name
        );
        assert_eq!(pool_of(vm.vmid).as_deref(), Some("k8s"), "{}", vm.name);
    }
    world.kill_daemon().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_or_a_tag_changed_outside_capstan_is_reported_as_drift() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    const CLUSTER: &str = "drifted";
    let mut world = World::with_lab(
        vlan_lab(),
        &fleet_yaml(&["1.36"], false),
        &[(
            CLUSTER,
            with_workers(
                ClusterYaml::lab(CLUSTER).address(42),
                &format!("{HARDWARE}tags: [storage], "),
            ),
        )],
        false,
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    let worker = world
        .vms_of(CLUSTER)
        .into_iter()
        .find(|vm| vm.name.contains("-general-"))
        .expect("a worker");
    // Someone moves the storage card to VLAN 31 and tags the VM by hand.
    let net1 = worker.config["net1"].replace("tag=30", "tag=31");
    let tags = format!("{};handmade", worker.config["tags"]);
    let sim = world.lab.proxmox();
    sim.edit_config(worker.vmid, "net1", &net1).expect("edit");
    sim.edit_config(worker.vmid, "tags", &tags).expect("edit");
    let status = world
        .wait_for_within("the drift reported", Duration::from_secs(30), |s| {
            let text = s.findings.join("\n");
            text.contains("VLAN 31") && text.contains("handmade")
        })
        .await;
    let text = status.findings.join("\n");
    assert!(
        text.contains(&format!(
            "{} drifted (changed outside capstan): networks",
            worker.name
        )),
        "{text}"
    );
    assert!(
        text.contains("vmbr1 VLAN 30 (MTU 9000)]") && text.contains("vmbr1 VLAN 31 (MTU 9000)]"),
        "declared and found: {text}"
    );
    assert!(
        text.contains("carries tags the file does not declare and capstan did not set: handmade"),
        "{text}"
    );
    // onDrift is report: nothing is replaced and the hand-made tag stays.
    assert!(world.vm_views(CLUSTER).len() >= 3);
    assert!(world.lab.proxmox().vm(worker.vmid).expect("kept").config["tags"].contains("handmade"));
    world.kill_daemon().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_pool_lands_where_its_mapping_is_and_a_replacement_gets_the_device_back() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    const CLUSTER: &str = "accel";
    let mut lab = LabConfig::default();
    lab.proxmox.pci_mappings = vec![
        serde_json::from_value(serde_json::json!({
            "id": "gpu-a40",
            "devices": [{"node": "pve2", "path": "0000:01:00.0"}],
        }))
        .expect("a mapping"),
    ];
    lab.proxmox.timings.agent_timeout =
        capstan_lab::values::LabDuration(Duration::from_millis(200));
    let text = ClusterYaml::lab(CLUSTER).address(41).render();
    let gpu_pool = "    - pool: gpu\n      replicas: 1\n      machine: {template: debian13-k8s, cores: 2, memoryMiB: 4096, pci: [{mapping: gpu-a40}], placement: [pve1, pve2, pve3]}\n  rollout:";
    let text = text.replacen("  rollout:", gpu_pool, 1).replacen(
        "  delivery:\n",
        "  remediation: {fence: true, after: 2s}\n  delivery:\n",
        1,
    );
    let mut world = World::with_lab(
        lab,
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, text.clone())],
        false,
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    let gpu = |world: &World| -> Vec<capstan_lab::proxmox::SimVm> {
        world
            .vms_of(CLUSTER)
            .into_iter()
            .filter(|vm| vm.name.contains("-gpu-"))
            .collect()
    };
    let first = gpu(&world);
    assert_eq!(first.len(), 1);
    let first = &first[0];
    assert_eq!(first.node, "pve2", "the only node with the mapping");
    assert_eq!(
        first.config.get("hostpci0").map(String::as_str),
        Some("mapping=gpu-a40")
    );
    assert_eq!(first.config.get("balloon").map(String::as_str), Some("0"));
    assert!(first.running, "it started with the device");

    // The VM dies: it is fenced and replaced, and the new VM starts with the device again.
    world.lab.faults().crash_vm(first.vmid).expect("crashed");
    world
        .wait_for_within("the GPU machine replaced", Duration::from_secs(90), |s| {
            let now = gpu(&world);
            ready(s, &[CLUSTER]) && now.len() == 1 && now[0].name != first.name && now[0].running
        })
        .await;
    let second = &gpu(&world)[0];
    assert_eq!(second.node, "pve2");
    assert_eq!(
        second.config.get("hostpci0").map(String::as_str),
        Some("mapping=gpu-a40")
    );
    assert!(
        world.lab.proxmox().vm(first.vmid).is_none(),
        "the dead VM is gone"
    );

    // A new template with the only device held: the pool is replaced old before new (a new
    // VM could not start beside the old one), never two GPU VMs running at once.
    let v2 = text.replace(
        "template: debian13-k8s, cores: 2, memoryMiB: 4096, pci",
        "template: debian13-k8s-v2, cores: 2, memoryMiB: 4096, pci",
    );
    world.write_cluster(CLUSTER, &v2);
    let most_running = std::cell::Cell::new(0);
    world
        .wait_for_within(
            "the GPU pool on its new template",
            Duration::from_secs(90),
            |s| {
                let now = gpu(&world);
                let running = now.iter().filter(|vm| vm.running).count();
                most_running.set(most_running.get().max(running));
                ready(s, &[CLUSTER])
                    && now.len() == 1
                    && now[0].name != second.name
                    && now[0].running
                    && now[0].config.get("hostpci0").map(String::as_str) == Some("mapping=gpu-a40")
            },
        )
        .await;
    assert_eq!(
        most_running.get(),
        1,
        "old before new: one GPU VM ran at a time"
    );
    world.kill_daemon().await;
}
