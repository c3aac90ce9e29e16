//! `capstan validate` on broken copies of the example repository: every error class names the
//! file, the line and column where one exists, the field path and what to do, and exits 1.

use capstan_testkit::cli::{ScratchRepo, capstan, examples_repo};

const PROD: &str = "clusters/prod.yaml";
const PLATFORM: &str = "clusters/platform.yaml";

#[test]
fn the_example_repository_is_valid() {
    capstan(&["validate", examples_repo().to_str().expect("path")])
        .assert_code(0)
        .assert_reports("valid (4 cluster file(s)");
}

#[test]
fn yaml_syntax_errors_give_the_line() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "    replicas: 1 ", "    replicas: [1 ");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:31:12: error:");
}

#[test]
fn unknown_fields_are_refused_with_the_closest_name() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "    drainTimeout: 10m", "    drainTimeuot: 10m");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:60:5: error: spec.rollout.drainTimeuot: unknown field `drainTimeuot`")
        .assert_reports("hint: did you mean `drainTimeout`?");
}

#[test]
fn wrong_types_name_the_field() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "      replicas: 3", "      replicas: three");
    repo.validate().assert_code(1).assert_reports(
        "clusters/prod.yaml:34:17: error: spec.workers[0].replicas: expected a whole number",
    );
}

#[test]
fn names_must_be_dns_labels() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "  name: prod", "  name: Prod_1");
    repo.validate().assert_code(1).assert_reports(
        "clusters/prod.yaml:7:3: error: metadata.name: `Prod_1` is not a DNS-1123 label",
    );
    let repo = ScratchRepo::from_examples();
    repo.edit(PLATFORM, "pool: memory", "pool: Memory");
    repo.validate()
        .assert_code(1)
        .assert_reports("spec.workers[1].pool: `Memory` is not a DNS-1123 label");
}

#[test]
fn duplicate_cluster_names_and_endpoints_across_files_are_refused() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PLATFORM, "  name: platform", "  name: prod");
    repo.edit(
        PLATFORM,
        "host: k8s-platform.lab.example",
        "host: k8s-prod.lab.example",
    );
    repo.edit(PLATFORM, "address: 192.168.1.24 ", "address: 192.168.1.23 ");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:7:3: error: metadata.name: cluster `prod` is already defined in clusters/platform.yaml")
        .assert_reports("spec.endpoint.host: endpoint host `k8s-prod.lab.example` is already used by clusters/platform.yaml")
        .assert_reports("spec.endpoint.address: endpoint address 192.168.1.23 is already used by clusters/platform.yaml");
}

#[test]
fn versions_must_be_major_minor_patch() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "version: 1.36.2", "version: 1.36");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:13:14: error: spec.kubernetes.version: `1.36` is not a Kubernetes version: write MAJOR.MINOR.PATCH");
}

#[test]
fn a_minor_that_is_not_approved_is_refused() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "version: 1.36.2", "version: 1.37.0");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:13:5: error: spec.kubernetes.version: 1.37.0: minor 1.37 is not approved")
        .assert_reports("add \"1.37\" to approvedMinors in capstan.yaml");
}

#[test]
fn overlapping_networks_are_refused() {
    let repo = ScratchRepo::from_examples();
    repo.edit(
        PROD,
        "services: 10.96.0.0/12 ",
        "services: 172.16.128.0/17 ",
    );
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:26:5: error: spec.network.services: services 172.16.128.0/17 overlaps pods 172.16.0.0/16");
}

#[test]
fn the_endpoint_must_be_in_the_node_subnet_and_outside_reserved_ranges() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "address: 192.168.1.23", "address: 192.168.2.23");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:21:5: error: spec.endpoint.address: 192.168.2.23 is outside network.nodes 192.168.1.0/24");
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "address: 192.168.1.23", "address: 192.168.1.175");
    repo.validate()
        .assert_code(1)
        .assert_reports("spec.endpoint.address: 192.168.1.175 lies in the reserved range 192.168.1.170-192.168.1.189");
}

#[test]
fn fewer_workers_than_min_workers_says_add_a_worker_first() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "      replicas: 3", "      replicas: 1");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:47:7: error: spec.workers[1].replicas: 1 workers in all, below rollout.minWorkers 2")
        .assert_reports("add a worker first");
}

#[test]
fn labels_and_taints_are_judged_as_kubernetes_judges_them_at_their_place_with_a_fix() {
    let repo = ScratchRepo::from_examples();
    repo.edit(
        PLATFORM,
        "labels: {workload-class: memory}",
        "labels: {_workload: memory, capstan.dev/pool: big, workload-class: -x-}",
    );
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/platform.yaml:47:16: error: spec.workers[1].labels._workload: `_workload` is not a label key")
        .assert_reports("hint: a key is an optional DNS subdomain prefix")
        .assert_reports("spec.workers[1].labels.capstan.dev/pool: capstan sets `capstan.dev/pool` itself")
        .assert_reports("spec.workers[1].labels.workload-class: `-x-` is not a label value");
    let repo = ScratchRepo::from_examples();
    repo.edit(PLATFORM, "effect: NoSchedule}", "effect: NoScheduled}");
    repo.validate().assert_code(1).assert_reports(
        "clusters/platform.yaml:48:56: error: spec.workers[1].taints[0].effect: unknown variant `NoScheduled`, expected one of NoSchedule, PreferNoSchedule, NoExecute",
    );
    let repo = ScratchRepo::from_examples();
    repo.edit(
        PLATFORM,
        "taints: [{key: dedicated, value: memory, effect: NoSchedule}]",
        "taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]",
    );
    repo.validate()
        .assert_code(1)
        .assert_reports("spec.workers[1].taints[0].key: `node-role.kubernetes.io/control-plane` is the control planes' own taint")
        .assert_reports("hint: set `controlPlane.schedulable` instead");
}

#[test]
fn a_compact_cluster_needs_no_workers_and_no_min_workers() {
    let repo = ScratchRepo::from_examples();
    let prod = std::fs::read_to_string(repo.path().join(PROD)).expect("prod");
    let start = prod.find("  workers:\n").expect("workers");
    let end = prod.find("  rollout:").expect("rollout");
    let compact = format!("{}  workers: []\n{}", &prod[..start], &prod[end..]).replace(
        "  controlPlane:\n",
        "  controlPlane:\n    schedulable: true\n",
    );
    repo.write(PROD, &compact);
    repo.validate().assert_code(0);
    repo.write(PROD, &compact.replace("    schedulable: true\n", ""));
    repo.validate()
        .assert_code(1)
        .assert_reports("0 workers in all, below rollout.minWorkers 2");
}

#[test]
fn counts_and_sizes_past_their_bounds_are_refused_with_their_position_and_a_fix() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "      replicas: 3", "      replicas: 4000000000");
    repo.edit(
        PROD,
        "cores: 4, memoryMiB: 8192, diskGiB: 50",
        "cores: 4000, memoryMiB: 8192, diskGiB: 50",
    );
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:34:7: error: spec.workers[0].replicas: 4000000000 workers: a cluster has at most 5000 machines")
        .assert_reports("hint: split the machines over several clusters")
        .assert_reports("clusters/prod.yaml:36:41: error: spec.workers[0].machine.cores: 4000 vCPUs: at most 128")
        .assert_reports("hint: Proxmox limits a VM to 128 CPUs");
}

#[test]
fn unknown_connections_and_management_clusters_are_refused() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "  proxmox: homelab", "  proxmox: homelabb");
    repo.edit(PROD, "flux: {cluster: management,", "flux: {cluster: mgmt,");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:10:3: error: spec.proxmox: no Proxmox connection named `homelabb` in capstan.yaml")
        .assert_reports("known in `proxmox:`: homelab")
        .assert_reports("spec.delivery.flux.cluster: no management cluster named `mgmt` in capstan.yaml");
}

#[test]
fn an_even_number_of_control_planes_is_refused() {
    let repo = ScratchRepo::from_examples();
    repo.edit(
        PLATFORM,
        "    replicas: 3\n    machine:",
        "    replicas: 2\n    machine:",
    );
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/platform.yaml:25:5: error: spec.controlPlane.replicas: 2 control planes cannot keep etcd quorum")
        .assert_reports("use an odd number: 1, 3 or 5");
}

#[test]
fn a_max_surge_of_zero_is_refused_with_its_position() {
    let repo = ScratchRepo::from_examples();
    repo.edit(
        PROD,
        "    minWorkers: 2 ",
        "    maxSurge: 0\n    minWorkers: 2 ",
    );
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:59:5: error: spec.rollout.maxSurge: 0 extra VMs would leave no room for a replacement")
        .assert_reports("the default is 1");
}

#[test]
fn durations_and_cron_schedules_must_parse() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "drainTimeout: 10m", "drainTimeout: ten minutes");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:60:19: error: spec.rollout.drainTimeout: `ten minutes` is not a duration");
    let repo = ScratchRepo::from_examples();
    repo.edit(
        PROD,
        "schedule: \"0 0 1 * * Sat\"",
        "schedule: \"Saturdays at one\"",
    );
    repo.validate().assert_code(1).assert_reports(
        "spec.rollout.maintenanceWindow.schedule: `Saturdays at one` is not a cron schedule",
    );
}

#[test]
fn every_error_of_the_repository_is_reported_in_one_run() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "address: 192.168.1.23", "address: 192.168.2.23");
    repo.edit(PROD, "      replicas: 3", "      replicas: 1");
    repo.edit(
        PLATFORM,
        "    replicas: 3\n    machine:",
        "    replicas: 4\n    machine:",
    );
    repo.edit("capstan.yaml", "pollInterval: 1m", "pollInterval: soon");
    let run = repo.validate();
    run.assert_code(1)
        .assert_reports("capstan.yaml:55:15: error: pollInterval: `soon` is not a duration");
    // With capstan.yaml broken, cluster files are still checked for syntax, and fixing it
    // reveals their rules; each file's errors all come at once.
    repo.edit("capstan.yaml", "pollInterval: soon", "pollInterval: 1m");
    repo.validate()
        .assert_code(1)
        .assert_reports("spec.endpoint.address: 192.168.2.23 is outside")
        .assert_reports("below rollout.minWorkers 2")
        .assert_reports("4 control planes cannot keep etcd quorum")
        .assert_reports("3 error(s)");
}

#[test]
fn warnings_do_not_fail_validation() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PLATFORM, "placement: [pve2, pve3]", "placement: [pve2]");
    repo.validate()
        .assert_code(0)
        .assert_reports("warning: spec.workers[1].machine.placement: all 2 replicas on `pve2`");
}

#[test]
fn a_missing_fleet_file_and_misplaced_kinds_are_explained() {
    let repo = ScratchRepo::from_examples();
    repo.remove("capstan.yaml");
    let run = repo.validate();
    run.assert_code(1);
    assert!(run.stderr.contains("has no capstan.yaml"), "{}", run.stderr);

    let repo = ScratchRepo::from_examples();
    repo.write(
        "clusters/fleet.yaml",
        "apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n",
    );
    repo.validate().assert_code(1).assert_reports(
        "clusters/fleet.yaml:2:1: error: kind: this file must be `kind: Cluster`, not `Fleet`",
    );
}

#[test]
fn json_output_lists_findings_for_programs() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "version: 1.36.2", "version: 1.37.0");
    let run = capstan(&[
        "validate",
        "--format",
        "json",
        repo.path().to_str().expect("path"),
    ]);
    run.assert_code(1);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("json report");
    assert_eq!(report["valid"], false);
    let finding = report["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .find(|d| d["file"] == "clusters/prod.yaml")
        .expect("a finding in prod.yaml");
    assert_eq!(finding["line"], 13);
    assert_eq!(finding["field"], "spec.kubernetes.version");
    assert_eq!(
        report["clusters"],
        serde_json::json!(["edge", "platform", "talos"])
    );
}

#[test]
fn usage_errors_exit_2() {
    capstan(&["validate", "--format", "yaml"]).assert_code(2);
    capstan(&["frobnicate"]).assert_code(2);
}

#[test]
fn a_lease_duration_with_a_fraction_of_a_second_is_a_usage_error() {
    // The Lease holds whole seconds: with 1500ms a standby would take over at 1 s while
    // this replica went on starting steps until 1.3 s.
    let repo = examples_repo();
    let repo = repo.to_str().expect("path");
    for refused in ["1500ms", "500ms"] {
        let run = capstan(&[
            "run",
            "--repo",
            repo,
            "--leader-elect",
            "--lease-duration",
            refused,
        ]);
        run.assert_code(2);
        assert!(
            run.stderr.contains("--lease-duration")
                && run.stderr.contains("whole number of seconds"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn a_k3s_or_talos_pod_range_overlapping_the_node_subnet_is_refused_at_its_line() {
    // The pod range goes right under `nodes:` (line 31 of edge.yaml, 55 of talos.yaml).
    for (file, line) in [("clusters/edge.yaml", 32), ("clusters/talos.yaml", 56)] {
        let repo = ScratchRepo::from_examples();
        repo.edit(
            file,
            "    nodes: 192.168.1.0/24\n",
            "    nodes: 192.168.1.0/24\n    pods: 192.168.0.0/16\n",
        );
        repo.validate()
            .assert_code(1)
            .assert_reports(&format!("{file}:{line}:5: error: spec.network.pods: nodes 192.168.1.0/24 overlaps pods 192.168.0.0/16"));
    }
}

#[test]
fn a_cni_the_distribution_cannot_install_is_refused_with_those_it_can() {
    let repo = ScratchRepo::from_examples();
    repo.edit(PROD, "cni: calico ", "cni: flannel ");
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:24:5: error: spec.network.cni: kubeadm cannot install the CNI `flannel`")
        .assert_reports("kubeadm installs `calico` (IPIP, applied through the new cluster's API at bootstrap) or `none` (no CNI: Flux installs one)");
}

#[test]
fn a_talos_patch_is_refused_at_its_line_in_talos_s_words_or_naming_the_field_capstan_owns() {
    let repo = ScratchRepo::from_examples();
    repo.edit(
        "clusters/talos.yaml",
        "  controlPlane:\n",
        "  patches:\n    - machine:\n        files:\n          - {path: /var/etc/a.conf, content: x, permissions: 420, op: move}\n    - cluster:\n        network:\n          cni: {name: custom}\n  controlPlane:\n",
    );
    repo.validate()
        .assert_code(1)
        .assert_reports("clusters/talos.yaml:63:11: error: spec.patches[1].cluster.network.cni: `cni` is capstan's to set, not a patch's")
        .assert_reports("hint: use `spec.network.cni`");
    let repo = ScratchRepo::from_examples();
    repo.edit(
        "clusters/talos.yaml",
        "  controlPlane:\n",
        "  patches:\n    - machine:\n        files:\n          - {path: /var/etc/a.conf, content: x, permissions: 420, op: move}\n  controlPlane:\n",
    );
    repo.validate()
        .assert_code(1)
        .assert_reports("error: spec.patches[0].machine.files[0].op: \"move\" is not one of \"create\", \"append\" or \"overwrite\"");
}
