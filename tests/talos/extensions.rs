//! `talos.extensions`: every new machine's extensions are read through Talos's resource API
//! (`cosi.resource.State/List` of `ExtensionStatuses`, served by the lab's nodes from their
//! template's image); a template lacking one is refused at `prepare-node`, naming what is
//! missing and how to build the template, and a template that has them comes up Ready.

use capstan_lab::world::{LabConfig, ProxmoxWorld, WorldTemplate};
use capstan_testkit::{World, ready};

use crate::reconcile::{TALOS, fleet};

const CLUSTER: &str = "stor";

/// The default lab plus `talos-storage` on each node: Talos [`TALOS`] with iscsi-tools and
/// util-linux-tools beside the guest agent, as Longhorn needs.
fn lab() -> LabConfig {
    let mut proxmox = ProxmoxWorld::default();
    let mut templates = proxmox.effective_templates();
    for (index, node) in proxmox.nodes.iter().enumerate() {
        templates.push(WorldTemplate {
            talos: Some(TALOS.into()),
            talos_extensions: Some(
                ["qemu-guest-agent", "iscsi-tools", "util-linux-tools"]
                    .map(str::to_owned)
                    .to_vec(),
            ),
            tags: vec!["talos".into()],
            ..WorldTemplate::new("talos-storage", 9700 + index as u32, &node.name)
        });
    }
    proxmox.templates = Some(templates);
    LabConfig {
        proxmox,
        ..LabConfig::default()
    }
}

/// One control plane and one worker on `template`, asking for Longhorn's extensions.
fn cluster(template: &str) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {CLUSTER}}}
spec:
  proxmox: homelab
  kubernetes: {{distribution: talos, version: 1.36.2}}
  talos:
    version: {TALOS}
    extensions: [siderolabs/iscsi-tools, siderolabs/util-linux-tools]
  endpoint: {{host: k8s-{CLUSTER}.lab.example, address: 192.168.1.67}}
  network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.190-192.168.1.199\"]}}
  controlPlane:
    replicas: 1
    machine: {{template: {template}, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}}
  workers:
    - pool: general
      replicas: 1
      machine: {{template: {template}, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}}
  rollout: {{minWorkers: 1, drainTimeout: 4s, joinTimeout: 2m}}
  delivery:
    flux: {{cluster: management}}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_without_a_declared_extension_is_refused_naming_it_and_one_with_them_comes_up() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let default_template = format!("talos-{TALOS}");
    let mut world = World::with_lab(
        lab(),
        &fleet(),
        &[(CLUSTER, cluster(&default_template))],
        false,
    )
    .await;
    world.start_daemon().await;
    let words = format!(
        "template `{default_template}` lacks the Talos extension(s) siderolabs/iscsi-tools, siderolabs/util-linux-tools that talos.extensions declares (it runs qemu-guest-agent {TALOS})"
    );
    let status = world
        .wait_for("the missing extensions refused", |s| {
            serde_json::to_string(&s.clusters.get(CLUSTER))
                .unwrap_or_default()
                .contains(&words)
        })
        .await;
    let text = serde_json::to_string(&status.clusters.get(CLUSTER)).unwrap_or_default();
    assert!(text.contains("Image Factory schematic"), "says how: {text}");
    assert!(!ready(&status, &[CLUSTER]), "never counted: {text}");

    // The template that carries them: the machines are built again from it and come up.
    world.write_cluster(CLUSTER, &cluster("talos-storage"));
    world
        .wait_for("Ready on the template with the extensions", |s| {
            ready(s, &[CLUSTER])
        })
        .await;
    let vms = world.vms_of(CLUSTER);
    assert_eq!(
        vms.len(),
        2,
        "{:?}",
        vms.iter().map(|v| &v.name).collect::<Vec<_>>()
    );
    world.kill_daemon().await;
}
