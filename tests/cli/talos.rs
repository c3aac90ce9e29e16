//! `capstan validate` on Talos clusters: `spec.talos` names the Talos release, the pair with the
//! Kubernetes release is checked against Talos's support matrix, and the cluster's Proxmox
//! connection names the ISO storage the machine configs are uploaded to; static node addresses
//! come from a range that holds a rollout's machines and no other cluster's; each refusal names
//! file, line, column and field.

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

/// `TALOS_CLUSTER`'s network with static node addresses from `range` and the rest of `extra`.
fn with_node_addresses(repo: &ScratchRepo, range: &str, extra: &str) {
    repo.edit(
        CLUSTER,
        "  network: {nodes: 192.168.1.0/24}\n",
        &format!("  network:\n    nodes: 192.168.1.0/24\n    nodeAddresses: {range}\n{extra}"),
    );
}

#[test]
fn static_node_addresses_from_a_free_range_of_the_nodes_network_are_valid() {
    let repo = talos_repo();
    with_node_addresses(
        &repo,
        "192.168.1.50-192.168.1.59",
        "    gateway: 192.168.1.254\n    nameservers: [192.168.1.2, 1.1.1.1]\n",
    );
    let run = repo.validate();
    assert_eq!(run.stdout.matches("error:").count(), 0, "{}", run.stdout);
    run.assert_code(0);
    // The gateway and nameservers default (the first host address of network.nodes).
    let repo = talos_repo();
    with_node_addresses(&repo, "192.168.1.50-192.168.1.55", "");
    repo.validate().assert_code(0);
}

#[test]
fn a_node_address_range_outside_the_network_on_reserved_or_the_endpoint_is_refused() {
    let repo = talos_repo();
    with_node_addresses(&repo, "10.20.0.50-10.20.0.59", "");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/talos.yaml:15:5: error: spec.network.nodeAddresses: 10.20.0.50-10.20.0.59 is not within the host addresses of network.nodes 192.168.1.0/24");
    let repo = talos_repo();
    with_node_addresses(
        &repo,
        "192.168.1.160-192.168.1.179",
        "    reserved: [192.168.1.170-192.168.1.189]\n",
    );
    repo.validate().assert_code(1).assert_reports(
        "error: spec.network.nodeAddresses: 192.168.1.160-192.168.1.179 overlaps the reserved range 192.168.1.170-192.168.1.189",
    );
    let repo = talos_repo();
    with_node_addresses(&repo, "192.168.1.20-192.168.1.29", "");
    repo.validate().assert_code(1).assert_reports(
        "error: spec.network.nodeAddresses: 192.168.1.20-192.168.1.29 contains the endpoint address 192.168.1.26",
    );
}

#[test]
fn a_node_address_range_smaller_than_a_rollout_needs_is_refused_with_the_count() {
    let repo = talos_repo();
    with_node_addresses(&repo, "192.168.1.50-192.168.1.54", "");
    repo.validate()
        .assert_code(1)
        .assert_reports("error: spec.network.nodeAddresses: 192.168.1.50-192.168.1.54 holds 5 addresses, but 6 machines can run at once (3 control planes, 2 workers, maxSurge 1)")
        .assert_reports("widen the range to at least 6 addresses");
}

#[test]
fn a_gateway_inside_the_range_or_without_a_range_is_refused() {
    let repo = talos_repo();
    with_node_addresses(
        &repo,
        "192.168.1.50-192.168.1.59",
        "    gateway: 192.168.1.55\n",
    );
    repo.validate().assert_code(1).assert_reports(
        "error: spec.network.gateway: the gateway 192.168.1.55 must be a host address of network.nodes 192.168.1.0/24 outside nodeAddresses 192.168.1.50-192.168.1.59",
    );
    let repo = talos_repo();
    repo.edit(
        CLUSTER,
        "  network: {nodes: 192.168.1.0/24}\n",
        "  network: {nodes: 192.168.1.0/24, gateway: 192.168.1.1}\n",
    );
    repo.validate().assert_code(1).assert_reports(
        "error: spec.network.gateway: a gateway and nameservers are for static node addresses, but `network.nodeAddresses` is not set",
    );
}

#[test]
fn static_node_addresses_on_kubeadm_follow_the_same_rules_as_on_talos() {
    let repo = talos_repo();
    repo.edit(CLUSTER, "distribution: talos", "distribution: kubeadm");
    repo.edit(CLUSTER, "  talos:\n    version: v1.13.9\n", "");
    with_node_addresses(&repo, "192.168.1.50-192.168.1.59", "");
    let run = repo.validate();
    assert_eq!(run.stdout.matches("error:").count(), 0, "{}", run.stdout);
    let repo = talos_repo();
    repo.edit(CLUSTER, "distribution: talos", "distribution: kubeadm");
    repo.edit(CLUSTER, "  talos:\n    version: v1.13.9\n", "");
    with_node_addresses(&repo, "192.168.1.50-192.168.1.51", "");
    repo.validate()
        .assert_code(1)
        .assert_reports("spec.network.nodeAddresses: 192.168.1.50-192.168.1.51 holds 2 addresses");
}

#[test]
fn two_clusters_whose_node_address_ranges_overlap_are_refused() {
    let repo = talos_repo();
    with_node_addresses(&repo, "192.168.1.50-192.168.1.59", "");
    let other = TALOS_CLUSTER
        .replace("name: talos", "name: talos-b")
        .replace(
            "k8s-talos.lab.example, address: 192.168.1.26",
            "k8s-talos-b.lab.example, address: 192.168.1.27",
        )
        .replace(
            "  network: {nodes: 192.168.1.0/24}\n",
            "  network:\n    nodes: 192.168.1.0/24\n    nodeAddresses: 192.168.1.59-192.168.1.69\n",
        );
    repo.write("clusters/talos-b.yaml", &other);
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/talos.yaml:15:5: error: spec.network.nodeAddresses: 192.168.1.50-192.168.1.59 overlaps 192.168.1.59-192.168.1.69, the node addresses of clusters/talos-b.yaml")
        .assert_reports("pick ranges that do not overlap");
    // Ranges side by side are fine.
    let repo = talos_repo();
    with_node_addresses(&repo, "192.168.1.50-192.168.1.59", "");
    repo.write(
        "clusters/talos-b.yaml",
        &other.replace("192.168.1.59-", "192.168.1.60-"),
    );
    let run = repo.validate();
    assert_eq!(run.stdout.matches("error:").count(), 0, "{}", run.stdout);
}
