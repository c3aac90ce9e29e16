//! The cluster network of Talos clusters the daemon builds on the lab: the declared pod and
//! service ranges (the machine config's `cluster.network`) as the stock kubectl sees them,
//! and `cni: none` (`cluster.network.cni.name: none`): the kubeconfig reaches Flux before any
//! node is Ready, the control planes all come up without a CNI, nothing is fenced while the
//! nodes wait for one, the status names the wait, and a CNI applied as Flux would makes the
//! cluster Ready.

use std::time::Duration;

use capstan_lab::values::LabDuration;
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::network::{
    assert_declared_ranges_shown, assert_waits_for_a_cni_unharmed, install_cni_as_flux,
};
use capstan_testkit::{World, kubectl_with};

use crate::reconcile::{TALOS, fleet, talos_lab};

/// A Talos cluster `name` of `control_planes` and `workers`, endpoint .`octet`, with
/// `network` fields (ending `, `) and fencing after 2 s.
fn cluster(name: &str, octet: u8, control_planes: u32, workers: u32, network: &str) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  proxmox: homelab
  kubernetes: {{distribution: talos, version: 1.36.2}}
  talos: {{version: {TALOS}}}
  endpoint: {{host: k8s-{name}.lab.example, address: 192.168.1.{octet}}}
  network: {{{network}nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  controlPlane:
    replicas: {control_planes}
    machine: {{template: talos-{TALOS}, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}}
  workers:
    - pool: general
      replicas: {workers}
      machine: {{template: talos-{TALOS}, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}}
  rollout: {{minWorkers: 1, drainTimeout: 4s, joinTimeout: 2m}}
  remediation: {{fence: true, after: 2s}}
  delivery:
    flux: {{cluster: management}}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_talos_cluster_runs_the_declared_pod_and_service_ranges_kubectl_shows() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let file = cluster(
        "tranges",
        67,
        1,
        2,
        "pods: 10.60.0.0/16, services: 10.70.0.0/16, ",
    );
    let mut world = World::with_lab(talos_lab(), &fleet(), &[("tranges", file)], false).await;
    world.start_until_ready(&["tranges"]).await;
    let kubeconfig = assert_declared_ranges_shown(&world, "tranges");
    let daemon_sets = kubectl_with(
        &kubeconfig,
        &["get", "daemonsets", "-n", "kube-system", "-o", "name"],
    );
    assert!(
        daemon_sets.contains("kube-flannel") && daemon_sets.contains("kube-proxy"),
        "Talos's flannel and kube-proxy: {daemon_sets}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_talos_cluster_without_a_cni_reaches_flux_first_is_not_fenced_and_goes_ready_with_one() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    const NAME: &str = "tbare";
    let mut lab = talos_lab();
    // A silent agent's ping gives up after 200 ms, not a real host's 3 s.
    lab.proxmox.timings.agent_timeout = LabDuration(Duration::from_millis(200));
    let file = cluster(NAME, 68, 3, 1, "cni: none, kubeProxy: false, ");
    let mut world = World::with_lab(lab, &fleet(), &[(NAME, file)], false).await;
    world.start_daemon().await;
    // The three control planes and the worker come up without a CNI.
    let kubeconfig = assert_waits_for_a_cni_unharmed(&world, NAME, 4).await;
    let daemon_sets = kubectl_with(
        &kubeconfig,
        &["get", "daemonsets", "-n", "kube-system", "-o", "name"],
    );
    assert!(
        !daemon_sets.contains("kube-proxy") && !daemon_sets.contains("flannel"),
        "no CNI and no kube-proxy from Talos: {daemon_sets}"
    );
    install_cni_as_flux(&world, NAME, &kubeconfig).await;
}
