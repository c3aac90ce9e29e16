//! examples-repo's Talos cluster, as the demo builds it: on the lab's default world (its `local`
//! ISO storage and `talos-v1.13.9` templates), with the example `capstan.yaml`, it comes up
//! Ready, Flux gets a kubeconfig the stock kubectl uses, and the talosconfig and the secrets
//! bundle are in the management cluster where the file's comments say.

use std::path::Path;

use base64::Engine as _;
use capstan_testkit::{World, kubectl_with};

fn example(path: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples-repo")
            .join(path),
    )
    .expect("example file")
}

/// `key` of the management cluster's Secret `capstan-system/name`, decoded.
fn management_secret(world: &World, name: &str, key: &str) -> Option<String> {
    let management = world.lab.kube().management().expect("management cluster");
    let secret = management.object("secrets", Some("capstan-system"), name)?;
    let encoded = secret["data"][key].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    String::from_utf8(bytes).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_talos_cluster_comes_up_on_the_default_lab_with_its_talosconfig_kept() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::new(
        &example("capstan.yaml"),
        &[("talos", example("clusters/talos.yaml"))],
    )
    .await;
    let status = world.start_until_ready(&["talos"]).await;
    assert_eq!(status.clusters["talos"].nodes.len(), 5);

    let delivered = world.flux_kubeconfig("talos").expect("delivered to Flux");
    let file = world.state.path().join("talos-from-flux.kubeconfig");
    std::fs::write(&file, delivered).expect("write");
    let nodes = kubectl_with(&file, &["get", "nodes", "-o", "name"]);
    assert_eq!(nodes.lines().count(), 5, "{nodes}");

    let talosconfig = management_secret(&world, "talos-talosconfig", "talosconfig")
        .expect("capstan-system/talos-talosconfig holds a talosconfig");
    let parsed: serde_json::Value = serde_saphyr::from_str(&talosconfig).expect("YAML");
    assert_eq!(parsed["context"], "talos", "{parsed}");
    let management = world.lab.kube().management().expect("management cluster");
    assert!(
        management
            .object("secrets", Some("capstan-system"), "capstan-talos-talos")
            .is_some(),
        "the bundle is kept in capstan-system/capstan-talos-talos"
    );
}
