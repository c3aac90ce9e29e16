//! `capstan validate` on K3s clusters: the datastore language (a database capstan provisions on a
//! server of `capstan.yaml`, or a kine DSN given whole), server counts without a quorum rule, the
//! `+k3sN` version, and the vCPU preflight, each named by file, line, column and field.

use capstan_testkit::cli::ScratchRepo;

const EDGE: &str = "clusters/edge.yaml";

/// The seed's cluster: three servers on a MariaDB datastore, two agents.
const EDGE_CLUSTER: &str = "\
apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata:
  name: edge
spec:
  proxmox: homelab
  kubernetes:
    distribution: k3s
    version: v1.36.2+k3s1
    datastore: {server: mariadb, database: k3s_edge}
  endpoint: {host: k8s-edge.lab.example, address: 192.168.1.25}
  network: {nodes: 192.168.1.0/24}
  controlPlane:
    replicas: 3
    machine: {template: debian13-k3s, cores: 2, memoryMiB: 4096, cpu: host, placement: [pve1, pve2]}
  workers:
    - pool: agents
      replicas: 2
      machine: {template: debian13-k3s, cores: 4, memoryMiB: 8192, cpu: host, placement: [pve1, pve2]}
";

const DATASTORES: &str = "\
datastores:
  mariadb:
    url: mysql://db.lab.example:3306
    adminUser: root
    adminPasswordFrom: {env: CAPSTAN_DATASTORE_MARIADB_PASSWORD}
";

fn k3s_repo() -> ScratchRepo {
    let repo = ScratchRepo::from_examples();
    repo.edit(
        "capstan.yaml",
        "approvedMinors:",
        &format!("{DATASTORES}approvedMinors:"),
    );
    repo.write(EDGE, EDGE_CLUSTER);
    repo
}

#[test]
fn the_seed_cluster_is_valid() {
    let run = k3s_repo().validate();
    assert_eq!(run.stdout.matches("error:").count(), 0, "{}", run.stdout);
    run.assert_code(0);
}

#[test]
fn more_than_one_server_needs_an_external_datastore() {
    let repo = k3s_repo();
    repo.edit(
        EDGE,
        "    datastore: {server: mariadb, database: k3s_edge}\n",
        "",
    );
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/edge.yaml:13:5: error: spec.controlPlane.replicas: 3 K3s servers need an external datastore: the embedded SQLite serves a single server")
        .assert_reports("add `kubernetes.datastore`");
}

#[test]
fn any_number_of_servers_is_valid_without_a_quorum_rule() {
    let repo = k3s_repo();
    repo.edit(EDGE, "    replicas: 3\n", "    replicas: 2\n");
    let run = repo.validate();
    let about_edge: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.starts_with(EDGE))
        .collect();
    assert!(
        about_edge.is_empty(),
        "two servers are as valid as three: {about_edge:?}"
    );
    run.assert_code(0);
}

#[test]
fn a_datastore_server_must_be_declared_in_the_fleet() {
    let repo = k3s_repo();
    repo.edit(EDGE, "server: mariadb", "server: mysql1");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/edge.yaml:10:17: error: spec.kubernetes.datastore.server: no datastore server named `mysql1` in capstan.yaml")
        .assert_reports("known in `datastores:`: mariadb; or add it there");
}

#[test]
fn a_datastore_is_provisioned_or_given_never_both_nor_half() {
    let repo = k3s_repo();
    repo.edit(
        EDGE,
        "{server: mariadb, database: k3s_edge}",
        "{server: mariadb, endpointFrom: {env: K3S_DSN}}",
    );
    repo.validate().assert_code(1).assert_reports(
        "spec.kubernetes.datastore: set `server` and `database`, or `endpointFrom`, not both",
    );
    let repo = k3s_repo();
    repo.edit(
        EDGE,
        "{server: mariadb, database: k3s_edge}",
        "{server: mariadb}",
    );
    repo.validate()
        .assert_code(1)
        .assert_reports("spec.kubernetes.datastore: `server` needs `database`");
    let repo = k3s_repo();
    repo.edit(EDGE, "database: k3s_edge", "database: k3s-edge; DROP TABLE");
    repo.validate()
        .assert_code(1)
        .assert_reports("spec.kubernetes.datastore.database: `k3s-edge; DROP TABLE` is not a database name capstan creates");
}

#[test]
fn a_given_kine_endpoint_is_read_from_the_environment_or_a_file() {
    let repo = k3s_repo();
    repo.edit(
        EDGE,
        "{server: mariadb, database: k3s_edge}",
        "{endpointFrom: {env: K3S_DATASTORE_ENDPOINT}}",
    );
    repo.validate().assert_code(0);
    repo.edit(
        EDGE,
        "{env: K3S_DATASTORE_ENDPOINT}",
        "{file: /run/secrets/k3s-dsn}",
    );
    repo.validate().assert_code(0);
    repo.edit(
        EDGE,
        "{file: /run/secrets/k3s-dsn}",
        "{env: K3S_DATASTORE_ENDPOINT}",
    );
    repo.edit(EDGE, "{env: K3S_DATASTORE_ENDPOINT}", "{env: \"\"}");
    repo.validate().assert_code(1).assert_reports(
        "spec.kubernetes.datastore.endpointFrom.env: `` is not an environment variable name",
    );
}

#[test]
fn a_k3s_version_names_its_build_and_kubeadm_refuses_one() {
    let repo = k3s_repo();
    repo.edit(EDGE, "version: v1.36.2+k3s1", "version: 1.36.2");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/edge.yaml:9:5: error: spec.kubernetes.version: 1.36.2: a K3s version names K3s's build")
        .assert_reports("write the K3s release, e.g. `v1.36.2+k3s1`");
    let repo = k3s_repo();
    repo.edit(EDGE, "distribution: k3s", "distribution: kubeadm");
    repo.validate()
        .assert_code(1)
        .assert_reports("spec.kubernetes.version: 1.36.2+k3s1 is a K3s release but the distribution is kubeadm")
        .assert_reports("spec.kubernetes.datastore: kubeadm keeps its state in the control planes' etcd: a datastore is for K3s");
}

#[test]
fn a_vcpu_type_without_x86_64_v2_is_refused_for_k3s_servers() {
    let repo = k3s_repo();
    repo.edit(
        EDGE,
        "memoryMiB: 4096, cpu: host",
        "memoryMiB: 4096, cpu: kvm64",
    );
    repo.validate()
        .assert_code(1)
        .assert_reports("spec.controlPlane.machine.cpu: vCPU type `kvm64` lacks x86-64-v2: binaries built for it stop with `Fatal glibc error: CPU does not support x86-64-v2`")
        .assert_reports("use `x86-64-v2-AES` (the default) or `host`");
}

#[test]
fn datastore_servers_in_the_fleet_are_checked() {
    let repo = k3s_repo();
    repo.edit(
        "capstan.yaml",
        "url: mysql://db.lab.example:3306",
        "url: mysql://root:secret@db.lab.example:3306/k3s",
    );
    repo.edit("capstan.yaml", "adminUser: root", "adminUser: \"\"");
    repo.validate()
        .assert_code(1)
        .assert_reports("capstan.yaml:")
        .assert_reports("datastores.mariadb.url: `mysql://***@db.lab.example:3306/k3s` carries a user, database or options: write only mysql://HOST[:PORT]")
        .assert_reports("datastores.mariadb.adminUser: the admin user is empty");
}

#[test]
fn two_clusters_may_not_share_a_database() {
    let repo = k3s_repo();
    let other = EDGE_CLUSTER
        .replace("name: edge", "name: edge2")
        .replace("k8s-edge.", "k8s-edge2.")
        .replace("192.168.1.25", "192.168.1.26");
    repo.write("clusters/edge2.yaml", &other);
    repo.validate().assert_code(1).assert_reports(
        "spec.kubernetes.datastore.database: database `k3s_edge` on `mariadb` is already used by clusters/edge.yaml",
    );
}

/// examples-repo's `edge` runs on the embedded datastore (the demo needs no MariaDB); its
/// comments say how to move it to the seed's form. Doing exactly what they say gives a valid
/// three-server cluster on a MariaDB.
#[test]
fn the_example_edge_cluster_becomes_the_seed_cluster_as_its_comments_say() {
    let repo = ScratchRepo::from_examples();
    let example = std::fs::read_to_string(repo.path().join(EDGE)).expect("the example");
    let datastore = "datastore: {server: mariadb, database: k3s_edge}";
    for said in [
        "url: mysql://192.168.1.108:3306",
        "adminPasswordFrom: {env: CAPSTAN_DATASTORE_MARIADB_PASSWORD}",
        datastore,
        "`controlPlane.replicas: 3`",
    ] {
        assert!(example.contains(said), "the comments say {said}");
    }
    repo.edit(
        "capstan.yaml",
        "approvedMinors:",
        "datastores:\n  mariadb:\n    url: mysql://192.168.1.108:3306\n    adminUser: root\n    adminPasswordFrom: {env: CAPSTAN_DATASTORE_MARIADB_PASSWORD}\napprovedMinors:",
    );
    repo.edit(
        EDGE,
        "  kubernetes:\n",
        &format!("  kubernetes:\n    {datastore}\n"),
    );
    repo.edit(EDGE, "    replicas: 1 ", "    replicas: 3 ");
    let run = repo.validate();
    let about_edge: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.starts_with(EDGE))
        .collect();
    assert!(about_edge.is_empty(), "{about_edge:?}");
    run.assert_code(0);
}
