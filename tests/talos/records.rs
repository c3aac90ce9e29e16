//! What a commit may write in the management cluster, and what a deleted Talos cluster leaves
//! behind (issue 34): a Flux delivery aimed at the Talos bundle or at another cluster's Flux
//! Secret is refused at validation and the Talos cluster goes on scaling; a Talos cluster
//! deleted with `prune: true` and added again under its name comes up with new CAs, and
//! neither the Kubernetes API nor the Proxmox API lists a Secret or an ISO of the old one; a
//! machine on a template of another Talos release is refused with its config ISO deleted.

use std::collections::BTreeSet;

use capstan::providers::kube::{ClusterClient as _, KubeClusterClient};
use capstan::providers::proxmox::{
    ClientOptions, ConnectionConfig, ProxmoxClient, ProxmoxProvider as _, PveNode, StorageContent,
    TokenSecret, Trust,
};
use capstan_testkit::{World, ready};

use crate::reconcile::{CLUSTER, NEXT_TALOS, TALOS, cluster, fleet, talos_lab};

/// A Talos cluster of one control plane and `workers` workers (quicker than three).
fn small(workers: u32) -> String {
    let text = cluster(workers, TALOS);
    assert!(
        text.contains("    replicas: 3\n"),
        "the helper's control planes moved"
    );
    text.replacen("    replicas: 3\n", "    replicas: 1\n", 1)
}

/// Another cluster file, `evil`, delivering as `flux` says (valid otherwise).
fn evil(flux: &str) -> String {
    small(1)
        .replace(&format!("name: {CLUSTER}}}"), "name: evil}")
        .replace(
            "k8s-talos.lab.example, address: 192.168.1.66",
            "k8s-evil.lab.example, address: 192.168.1.67",
        )
        .replace(
            "    flux: {cluster: management}",
            &format!("    flux: {flux}"),
        )
}

/// The data of Secret `capstan-system/name` on the management cluster, through its API.
async fn record(world: &World, name: &str) -> Option<capstan::providers::kube::SecretRecord> {
    let client = KubeClusterClient::connect(&world.lab.management_kubeconfig())
        .await
        .expect("management client");
    client
        .secret("capstan-system", name)
        .await
        .expect("the management cluster answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_aimed_at_the_talos_bundle_or_another_clusters_secret_is_refused_and_talos_still_scales()
 {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut world = World::with_lab(talos_lab(), &fleet(), &[(CLUSTER, small(1))], false).await;
    world.start_until_ready(&[CLUSTER]).await;
    let bundle = record(&world, "capstan-talos-talos")
        .await
        .expect("the bundle");

    // At the Talos bundle: refused at validation, with its line.
    world.write_cluster(
        "evil",
        &evil("{cluster: management, namespace: capstan-system, secretName: capstan-talos-talos}"),
    );
    world
        .wait_for("the delivery into capstan-system refused", |s| {
            s.repository_errors.iter().any(|e| {
                e.starts_with("clusters/evil.yaml:")
                    && e.contains("spec.delivery.flux.namespace: `capstan-system` holds the records capstan keeps")
            })
        })
        .await;
    // At the Talos cluster's own Flux Secret: refused too, and talos keeps it.
    world.write_cluster(
        "evil",
        &evil("{cluster: management, secretName: talos-kubeconfig}"),
    );
    let status = world
        .wait_for("the delivery into talos's Secret refused", |s| {
            s.repository_errors.iter().any(|e| {
                e.starts_with("clusters/evil.yaml:")
                    && e.contains("Secret flux-system/talos-kubeconfig on management cluster `management` is where cluster `talos`")
            })
        })
        .await;
    assert!(
        !status
            .repository_errors
            .iter()
            .any(|e| e.starts_with("clusters/talos.yaml")),
        "{:?}",
        status.repository_errors
    );
    assert!(world.vms_of("evil").is_empty(), "nothing of evil is built");

    // The Talos cluster still scales, from the same bundle.
    world.write_cluster(CLUSTER, &small(2));
    world
        .wait_for("talos scaled to 3 nodes", |s| {
            ready(s, &[CLUSTER]) && s.clusters[CLUSTER].nodes.len() == 3
        })
        .await;
    let after = record(&world, "capstan-talos-talos")
        .await
        .expect("the bundle");
    assert_eq!(after.data, bundle.data, "the bundle was never replaced");
    world.kill_daemon().await;
}

/// Every Secret on the management cluster (any namespace, any label), through its API:
/// `namespace/name` with its annotations.
async fn all_secrets(world: &World) -> Vec<(String, std::collections::BTreeMap<String, String>)> {
    let client = KubeClusterClient::connect(&world.lab.management_kubeconfig())
        .await
        .expect("management client");
    client
        .secrets_labelled("")
        .await
        .expect("listed")
        .into_iter()
        .map(|s| (format!("{}/{}", s.namespace, s.name), s.record.annotations))
        .collect()
}

/// The ISO volumes of `local` on every node, through the Proxmox API.
async fn isos(world: &World) -> BTreeSet<String> {
    let lab = world.lab.lab_file();
    let config = ConnectionConfig::new(
        &lab.proxmox.url,
        &lab.proxmox.token_id,
        TokenSecret::new(lab.proxmox.token.clone()),
        Trust::Fingerprint(lab.proxmox.fingerprint.clone()),
    );
    let client = ProxmoxClient::new(&config.expect("config"), ClientOptions::for_lab())
        .expect("Proxmox client");
    let mut found = BTreeSet::new();
    for node in ["pve1", "pve2", "pve3"] {
        let volumes = client
            .storage_volumes(&PveNode(node.to_owned()), "local", StorageContent::Iso)
            .await
            .expect("listed");
        found.extend(volumes.into_iter().map(|v| v.volid.to_string()));
    }
    found
}

/// A certificate of the bundle, PEM.
fn ca(bundle: &capstan::providers::kube::SecretRecord, which: &str) -> String {
    let json: serde_json::Value =
        serde_json::from_slice(&bundle.data["bundle.json"]).expect("bundle JSON");
    json[which]["certificatePem"]
        .as_str()
        .unwrap_or_else(|| panic!("{which} in the bundle"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_talos_cluster_deleted_and_added_again_gets_new_cas_and_nothing_of_the_old_one_remains() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pruning = format!("{}prune: true\n", fleet());
    let mut world = World::with_lab(talos_lab(), &pruning, &[(CLUSTER, small(1))], false).await;
    world.start_until_ready(&[CLUSTER]).await;
    let old = record(&world, "capstan-talos-talos")
        .await
        .expect("the bundle");
    let old_identity = record(&world, "capstan-cluster-talos")
        .await
        .expect("the cluster's identity");

    world.remove_cluster(CLUSTER);
    world
        .wait_for("the cluster deleted", |s| {
            !s.clusters.contains_key(CLUSTER) && s.findings.is_empty()
        })
        .await;
    world.wait_passes(2).await;
    assert!(world.vms_of(CLUSTER).is_empty());
    let left: Vec<String> = all_secrets(&world)
        .await
        .into_iter()
        .filter(|(name, annotations)| {
            name.contains("talos") || annotations.values().any(|value| value == CLUSTER)
        })
        .map(|(name, _)| name)
        .collect();
    assert!(
        left.is_empty(),
        "Secrets of the deleted cluster remain: {left:?}"
    );
    let isos = isos(&world).await;
    assert!(
        !isos.iter().any(|iso| iso.contains("capstan-config-")),
        "config ISOs remain: {isos:?}"
    );

    // Added again under its name: new CAs, a new identity.
    world.write_cluster(CLUSTER, &small(1));
    world
        .wait_for("the new cluster Ready", |s| ready(s, &[CLUSTER]))
        .await;
    let new = record(&world, "capstan-talos-talos")
        .await
        .expect("a new bundle");
    for which in ["osCa", "kubernetesCa"] {
        assert_ne!(ca(&new, which), ca(&old, which), "{which} is new");
    }
    let new_identity = record(&world, "capstan-cluster-talos")
        .await
        .expect("identity");
    assert_ne!(new_identity.data, old_identity.data, "a new identity");
    world.kill_daemon().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_of_another_release_is_refused_with_no_config_iso_left() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The file asks for the next release; the template it names runs this one.
    let mismatch = small(1).replace(
        &format!("talos: {{version: {TALOS}}}"),
        &format!("talos: {{version: {NEXT_TALOS}}}"),
    );
    let mut world = World::with_lab(talos_lab(), &fleet(), &[(CLUSTER, mismatch)], false).await;
    world.start_daemon().await;
    world
        .wait_for("the template's release refused", |s| {
            serde_json::to_string(&s.clusters.get(CLUSTER))
                .unwrap_or_default()
                .contains(&format!(
                    "runs Talos {TALOS}, the cluster file asks for {NEXT_TALOS}"
                ))
        })
        .await;
    // Each machine took its config (its Talos API answered) and was refused: its ISO, every
    // CA key, is gone. Machines are made together and prepared one by one, so a worker's ISO
    // may still wait for its prepare when the first refusal is reported: wait for every one.
    capstan_testkit::wait::on("no config ISO left by the refused machines")
        .until(async || {
            let left: Vec<String> = isos(&world)
                .await
                .into_iter()
                .filter(|iso| iso.contains("capstan-config-"))
                .collect();
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("{left:?}"))
            }
        })
        .await;
    // Still refused at its next try (the status shows the last step, so another machine's step
    // may stand there in between), and never prepared.
    world
        .wait_for("the refusal at the next try", |s| {
            serde_json::to_string(&s.clusters.get(CLUSTER))
                .unwrap_or_default()
                .contains(&format!(
                    "runs Talos {TALOS}, the cluster file asks for {NEXT_TALOS}"
                ))
        })
        .await;
    let vms = world.vms_of(CLUSTER);
    assert!(!vms.is_empty(), "the machines were made");
    for vm in &vms {
        let tags = vm.config.get("tags").cloned().unwrap_or_default();
        assert!(
            !tags.contains("capstan-prepared"),
            "{} never prepared: {tags}",
            vm.name
        );
    }
    world.kill_daemon().await;
}
