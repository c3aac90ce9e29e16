//! `capstan validate` on Talos clusters: `spec.talos` names the Talos release, the pair with the
//! Kubernetes release is checked against Talos's support matrix, and the cluster's Proxmox
//! connection names the ISO storage the machine configs are uploaded to; each refusal names file,
//! line, column and field.

use capstan_testkit::cli::ScratchRepo;

const CLUSTER: &str = "clusters/talos.yaml";

/// Three control planes on Talos's VIP, two workers.
const TALOS_CLUSTER: &str = "\
apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata:
  name: talos
spec:
  proxmox: homelab
  kubernetes:
    distribution: talos
    version: 1.36.2
  talos:
    version: v1.13.9
  endpoint: {host: k8s-talos.lab.example, address: 192.168.1.26}
  network: {nodes: 192.168.1.0/24}
  controlPlane:
    replicas: 3
    machine: {template: talos-v1.13.9, cores: 2, memoryMiB: 4096, placement: [pve1, pve2]}
  workers:
    - pool: workers
      replicas: 2
      machine: {template: talos-v1.13.9, cores: 4, memoryMiB: 8192, placement: [pve1, pve2]}
";

/// The examples (whose connection names the ISO storage `local`) with [`TALOS_CLUSTER`] in
/// place of their Talos cluster.
fn talos_repo() -> ScratchRepo {
    let repo = ScratchRepo::from_examples();
    repo.write(CLUSTER, TALOS_CLUSTER);
    repo
}

#[test]
fn a_talos_cluster_with_its_release_and_an_iso_storage_is_valid() {
    let run = talos_repo().validate();
    assert_eq!(run.stdout.matches("error:").count(), 0, "{}", run.stdout);
    run.assert_code(0);
}

#[test]
fn a_talos_release_that_does_not_run_the_kubernetes_release_is_refused_with_its_window() {
    let repo = talos_repo();
    repo.edit(CLUSTER, "version: v1.13.9", "version: v1.11.3");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/talos.yaml:11:5: error: spec.talos.version: Talos v1.11.3 does not support Kubernetes 1.36.2: it supports Kubernetes 1.29 to 1.34");
    let repo = talos_repo();
    repo.edit(CLUSTER, "version: v1.13.9", "version: v1.14.0");
    repo.validate().assert_code(1).assert_reports(
        "spec.talos.version: Talos v1.14.0 (with Kubernetes 1.36.2) is not a release capstan knows",
    );
}

#[test]
fn a_talos_cluster_without_its_release_or_an_iso_storage_is_refused_with_the_fix() {
    let repo = talos_repo();
    repo.edit(CLUSTER, "  talos:\n    version: v1.13.9\n", "");
    repo.validate()
        .assert_code(1)
        .assert_reports(
            "error: spec.kubernetes.distribution: a Talos cluster names its Talos release",
        )
        .assert_reports("add `talos: {version: v1.13.9}`");
    let repo = talos_repo();
    repo.edit("capstan.yaml", "    isoStorage: local\n", "");
    repo.validate()
        .assert_code(1)
        .assert_reports("error: spec.proxmox: Talos machines get their config from an ISO image, but the Proxmox connection `homelab` names no `isoStorage`")
        .assert_reports("add `isoStorage:");
}

#[test]
fn talos_fields_on_another_distribution_and_k3s_fields_on_talos_are_refused() {
    let repo = talos_repo();
    repo.edit(CLUSTER, "distribution: talos", "distribution: kubeadm");
    repo.validate().assert_code(1).assert_reports(
        "error: spec.talos: `talos` is for Talos clusters, but the distribution is kubeadm",
    );
    let repo = talos_repo();
    repo.edit(CLUSTER, "version: 1.36.2", "version: v1.36.2+k3s1");
    repo.validate()
        .assert_code(1)
        .assert_reports("error: spec.kubernetes.version: 1.36.2+k3s1 is a K3s release but the distribution is talos");
}
