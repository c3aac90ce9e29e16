//! One branch per pull request: scale a pool, change a template, bump a minor without approval,
//! break a file. Each preview carries its summary, steps and refusals in Markdown and JSON.

use crate::fixture::{Fleet, json, position};

const PROD: &str = "clusters/prod.yaml";
const WORKERS_MACHINE: &str = "machine: {template: debian13-k8s, cores: 4, memoryMiB: 8192, diskGiB: 50, placement: [pve1, pve2]}";

#[test]
fn scaling_a_pool_adds_one_worker_and_touches_nothing_else() {
    let fleet = Fleet::new();
    fleet.branch("scale", PROD, "replicas: 3", "replicas: 4");

    let markdown = fleet.preview("scale", "markdown");
    markdown
        .assert_code(0)
        .assert_reports(
            "**prod: +1 worker; edge: unchanged; platform: unchanged; talos: unchanged**",
        )
        .assert_reports("- workers.general.replicas 3 → 4")
        .assert_reports("-      replicas: 3\n+      replicas: 4")
        .assert_reports("<details><summary><b>prod</b>: +1 worker</summary>");
    assert!(
        !markdown.stdout.contains("Refused"),
        "nothing is refused:\n{}",
        markdown.stdout
    );
    assert!(
        !markdown.stdout.contains("<b>platform</b>"),
        "an unchanged cluster has no section:\n{}",
        markdown.stdout
    );

    let value = json(&fleet.preview("scale", "json"));
    assert_eq!(
        value["summary"],
        "prod: +1 worker; edge: unchanged; platform: unchanged; talos: unchanged"
    );
    let clusters = value["clusters"].as_array().expect("clusters");
    assert_eq!(clusters.len(), 1);
    let prod = &clusters[0];
    assert_eq!(prod["name"], "prod");
    assert_eq!(prod["refused"], serde_json::json!([]));
    assert!(
        prod["diff"]
            .as_str()
            .is_some_and(|d| d.contains("+      replicas: 4")),
        "{prod:#}"
    );
    let actions: Vec<&str> = prod["predicted"]
        .as_array()
        .expect("predicted")
        .iter()
        .map(|s| s["action"].as_str().expect("action"))
        .collect();
    assert_eq!(actions, ["create-machine", "prepare-node", "join-node"]);
    let create = &prod["predicted"][0];
    assert_eq!(create["pendingOnBase"], false);
    assert!(
        create["proxmoxNode"]
            .as_str()
            .is_some_and(|n| n.starts_with("pve")),
        "the new VM's Proxmox node is named: {create:#}"
    );
}

#[test]
fn changing_a_template_replaces_every_worker_new_before_old_in_the_window() {
    let fleet = Fleet::new();
    let v2 = WORKERS_MACHINE.replace("debian13-k8s", "debian13-k8s-v2");
    fleet.branch("template", PROD, WORKERS_MACHINE, &v2);

    let markdown = fleet.preview("template", "markdown");
    markdown
        .assert_code(0)
        .assert_reports(
            "**prod: 3 workers replaced (new before old) — held for the maintenance window (Sat 2026-05-02 01:00 UTC); edge: unchanged; platform: unchanged; talos: unchanged**",
        )
        .assert_reports(
            "- workers.general.machine.template debian13-k8s → debian13-k8s-v2: replaces 3 workers",
        )
        .assert_reports("waits on maintenance window");

    let value = json(&fleet.preview("template", "json"));
    let prod = &value["clusters"][0];
    assert_eq!(prod["name"], "prod");
    let steps = prod["predicted"].as_array().expect("predicted");
    let position_of = |action: &str| {
        steps
            .iter()
            .position(|s| s["action"] == action)
            .unwrap_or_else(|| panic!("no {action} in {prod:#}"))
    };
    // New before old: the first new worker joins before the first old one is drained.
    assert!(position_of("join-node") < position_of("drain"), "{prod:#}");
    for action in ["create-machine", "join-node", "drain", "destroy-machine"] {
        let count = steps.iter().filter(|s| s["action"] == action).count();
        assert_eq!(count, 3, "{action} × 3 in {prod:#}");
    }
    assert!(steps.iter().all(|s| s["pendingOnBase"] == false));
}

#[test]
fn a_label_change_applies_in_place_on_the_pools_nodes_and_replaces_no_machine() {
    let fleet = Fleet::new();
    fleet.branch(
        "labels",
        "clusters/platform.yaml",
        "labels: {workload-class: memory}",
        "labels: {workload-class: cpu}",
    );

    let markdown = fleet.preview("labels", "markdown");
    markdown
        .assert_code(0)
        .assert_reports("**platform: labels change in place on 2 nodes; edge: unchanged; prod: unchanged; talos: unchanged**")
        .assert_reports("- workers.memory.labels.workload-class memory → cpu: applies in place on 2 nodes (label-nodes), replaces no machine");

    let value = json(&fleet.preview("labels", "json"));
    let platform = &value["clusters"][0];
    assert_eq!(platform["name"], "platform");
    let actions: Vec<&str> = platform["predicted"]
        .as_array()
        .expect("predicted")
        .iter()
        .map(|s| s["action"].as_str().expect("action"))
        .collect();
    assert_eq!(actions, ["label-nodes"], "{platform:#}");
    let nodes = platform["predicted"][0]["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 2);
    assert!(
        nodes
            .iter()
            .all(|n| n["setLabels"]["workload-class"] == "cpu"),
        "{platform:#}"
    );
}

#[test]
fn an_unapproved_minor_is_refused_with_its_place_in_the_file() {
    let fleet = Fleet::new();
    fleet.branch("minor", PROD, "version: 1.36.2", "version: 1.37.0");
    let (line, column) = position(&fleet, PROD, "version: 1.36.2");

    let markdown = fleet.preview("minor", "markdown");
    markdown
        .assert_code(1)
        .assert_reports("#### Refused")
        .assert_reports(&format!(
            "**validation** `clusters/prod.yaml:{line}:{column}` `spec.kubernetes.version`"
        ))
        .assert_reports("approvedMinors");
    let refused_at = markdown.stdout.find("#### Refused").expect("refusals");
    let first_cluster = markdown.stdout.find("<details>").expect("cluster section");
    assert!(refused_at < first_cluster, "refusals come first");

    let value = json(&fleet.preview("minor", "json"));
    let refusal = &value["refusals"][0];
    assert_eq!(refusal["rule"], "validation");
    assert_eq!(refusal["cluster"], "prod");
    assert_eq!(refusal["field"], "spec.kubernetes.version");
    assert_eq!(
        refusal["location"],
        format!("clusters/prod.yaml:{line}:{column}")
    );
    assert!(refusal["fix"].is_string(), "{refusal:#}");
    assert_eq!(value["clusters"][0]["refused"][0], *refusal);
    assert_eq!(
        value["summary"],
        "prod: REFUSED (1), its file has errors: the cluster is left as it is; edge: unchanged; platform: unchanged; talos: unchanged"
    );
}

#[test]
fn a_broken_file_is_refused_with_file_line_and_column() {
    let fleet = Fleet::new();
    fleet.branch("broken", PROD, "replicas: 3", "replicas: [3");
    let (edited, _) = position(&fleet, PROD, "replicas: 3");

    let value = json(&fleet.preview("broken", "json"));
    assert!(
        value["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with("prod: REFUSED (1), its file has errors")),
        "{value:#}"
    );
    let refusal = &value["refusals"][0];
    assert_eq!(refusal["rule"], "validation");
    assert_eq!(refusal["cluster"], "prod");
    // The parser stops where the flow sequence cannot go on: at or after the edited line.
    let location = refusal["location"].as_str().expect("location");
    let numbers: Vec<usize> = location
        .strip_prefix("clusters/prod.yaml:")
        .expect("file")
        .split(':')
        .map(|n| n.parse().expect("line and column"))
        .collect();
    assert!(
        numbers.len() == 2 && numbers[0] >= edited && numbers[1] >= 1,
        "{location}"
    );

    let text = fleet.preview("broken", "text");
    text.assert_code(1)
        .assert_reports("REFUSED:")
        .assert_reports(&format!("validation {location} "));

    let prod = &value["clusters"][0];
    assert_eq!(prod["name"], "prod");
    assert!(
        prod["diff"]
            .as_str()
            .is_some_and(|d| d.contains("+      replicas: [3")),
        "{prod:#}"
    );
}

#[test]
fn a_remote_branch_is_previewed_like_a_local_one() {
    let fleet = Fleet::new();
    fleet.branch("scale", PROD, "replicas: 3", "replicas: 4");
    let mirrors = tempfile::tempdir().expect("temp dir");
    let url = format!("file://{}", fleet.path().display());
    let snapshot = fleet.snapshot().display().to_string();
    let run = capstan_testkit::cli::capstan(&[
        "preview",
        "--repo",
        &url,
        "--base",
        "main",
        "--head",
        "scale",
        "--observed",
        &snapshot,
        "--now",
        crate::fixture::NOW,
        "--git-mirror-dir",
        &mirrors.path().display().to_string(),
        "--format",
        "json",
    ]);
    run.assert_code(0);
    let value = json(&run);
    assert_eq!(
        value["summary"],
        "prod: +1 worker; edge: unchanged; platform: unchanged; talos: unchanged"
    );
    assert!(
        value["head"]
            .as_str()
            .is_some_and(|h| h.starts_with("scale@sha1:")),
        "{value:#}"
    );
}

#[test]
fn steps_the_base_would_take_anyway_are_marked_pending_and_only_the_new_ones_added() {
    let fleet = Fleet::new();
    fleet.branch("scale", PROD, "replicas: 3", "replicas: 4");
    // In the example snapshot prod runs 1.36.1: the base already upgrades it to 1.36.2 and
    // replaces its three workers.
    let snapshot = capstan_testkit::cli::examples_repo().join("observed.example.json");
    let run = capstan_testkit::cli::capstan(&[
        "preview",
        "--repo",
        &fleet.path().display().to_string(),
        "--head",
        "scale",
        "--observed",
        &snapshot.display().to_string(),
        "--now",
        crate::fixture::NOW,
        "--format",
        "json",
    ]);
    run.assert_code(0);
    let value = json(&run);
    let prod = &value["clusters"][0];
    assert_eq!(prod["summary"], "+1 worker");
    let steps = prod["predicted"].as_array().expect("predicted");
    let added: Vec<&str> = steps
        .iter()
        .filter(|s| s["pendingOnBase"] == false)
        .map(|s| s["action"].as_str().expect("action"))
        .collect();
    assert_eq!(
        added,
        ["create-machine", "prepare-node", "join-node"],
        "{prod:#}"
    );
    let upgrade = steps
        .iter()
        .find(|s| s["action"] == "upgrade-control-plane")
        .expect("the base's upgrade");
    assert_eq!(upgrade["pendingOnBase"], true);
}

#[test]
fn an_approved_minor_upgrades_and_the_fleet_file_diff_shows_token_references() {
    let fleet = Fleet::new();
    git_edit_two(&fleet);
    let markdown = fleet.preview("minor-approved", "markdown");
    markdown
        .assert_code(0)
        .assert_reports("**prod: ")
        .assert_reports("upgrade 1.36.2 → 1.37.0")
        .assert_reports("<details><summary><b>capstan.yaml</b> changes</summary>")
        .assert_reports("+approvedMinors: [\"1.36\", \"1.37\"]")
        .assert_reports("+    tokenFrom: {env: CAPSTAN_PROXMOX_LAB_TOKEN}");
    let value = json(&fleet.preview("minor-approved", "json"));
    assert!(
        value["fleetDiff"]
            .as_str()
            .is_some_and(|d| d.contains("+approvedMinors")),
        "{value:#}"
    );
    assert_eq!(value["refusals"], serde_json::json!([]));
}

/// A branch that approves 1.37, moves prod to it and points the Proxmox token at another
/// variable, in one commit.
fn git_edit_two(fleet: &Fleet) {
    use crate::fixture::git;
    git(
        fleet.path(),
        &["checkout", "--quiet", "-b", "minor-approved", "main"],
    );
    let edit = |file: &str, from: &str, to: &str| {
        let path = fleet.path().join(file);
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.matches(from).count(), 1, "{from} once in {file}");
        std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
    };
    edit(
        "capstan.yaml",
        "approvedMinors: [\"1.36\"]",
        "approvedMinors: [\"1.36\", \"1.37\"]",
    );
    edit(
        "capstan.yaml",
        "tokenFrom: {env: CAPSTAN_PROXMOX_HOMELAB_TOKEN}",
        "tokenFrom: {env: CAPSTAN_PROXMOX_LAB_TOKEN}",
    );
    edit(PROD, "version: 1.36.2", "version: 1.37.0");
    git(fleet.path(), &["commit", "--quiet", "-am", "prod: 1.37"]);
    git(fleet.path(), &["checkout", "--quiet", "main"]);
}

#[test]
fn scaling_a_pool_down_removes_one_worker_in_the_window() {
    let fleet = Fleet::new();
    fleet.branch("fewer", PROD, "replicas: 3", "replicas: 2");
    let run = fleet.preview("fewer", "json");
    run.assert_code(0);
    let value = json(&run);
    assert_eq!(
        value["summary"],
        "prod: −1 worker — held for the maintenance window (Sat 2026-05-02 01:00 UTC); edge: unchanged; platform: unchanged; talos: unchanged"
    );
    let actions: Vec<&str> = value["clusters"][0]["predicted"]
        .as_array()
        .expect("predicted")
        .iter()
        .map(|s| s["action"].as_str().expect("action"))
        .collect();
    assert_eq!(
        actions,
        [
            "cordon",
            "drain",
            "delete-node",
            "reset-node",
            "destroy-machine"
        ]
    );
}

#[test]
fn fewer_workers_than_min_workers_is_refused_with_its_rule_and_fix() {
    let fleet = Fleet::new();
    fleet.branch("one", PROD, "replicas: 3", "replicas: 1");
    let run = fleet.preview("one", "markdown");
    run.assert_code(1).assert_reports("#### Refused");
    let value = json(&fleet.preview("one", "json"));
    let refusals = value["refusals"].as_array().expect("refusals");
    assert!(
        refusals.iter().any(|r| r["cluster"] == "prod"
            && r["location"]
                .as_str()
                .is_some_and(|l| l.starts_with("clusters/prod.yaml:"))
            && r["message"]
                .as_str()
                .is_some_and(|m| m.contains("minWorkers"))
            && r["fix"].is_string()),
        "{value:#}"
    );
}

/// A pull request pointing `prod` at a new Proxmox server and adding a datastore server (each
/// a listener that records connections): the preview refuses both, naming the field, the
/// value and the `--pin` the daemon's operator would have to give, and capstan connects to
/// neither (the preview only plans).
#[test]
fn a_preview_of_a_new_connection_refuses_it_and_connects_to_nothing() {
    use crate::fixture::git;
    let listen = || {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("non-blocking");
        listener
    };
    let (proxmox, datastore) = (listen(), listen());
    let port = |l: &std::net::TcpListener| l.local_addr().expect("addr").port();
    let proxmox_url = format!("https://127.0.0.1:{}", port(&proxmox));
    let datastore_url = format!("mysql://127.0.0.1:{}", port(&datastore));
    let fleet = Fleet::new();
    git(
        fleet.path(),
        &["checkout", "--quiet", "-b", "new-connection", "main"],
    );
    let edit = |file: &str, from: &str, to: &str| {
        let path = fleet.path().join(file);
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.matches(from).count(), 1, "{from} once in {file}");
        std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
    };
    edit(
        "capstan.yaml",
        "\nmanagementClusters:",
        &format!(
            "\n  elsewhere:\n    url: {proxmox_url}\n    tokenId: capstan@pve!reconciler\n    tokenFrom: {{env: CAPSTAN_PROXMOX_ELSEWHERE_TOKEN}}\n\nmanagementClusters:"
        ),
    );
    edit(
        "capstan.yaml",
        "\napprovedMinors:",
        &format!(
            "\ndatastores:\n  rogue:\n    url: {datastore_url}\n    adminUser: root\n    adminPasswordFrom: {{env: CAPSTAN_DATASTORE_ROGUE_PASSWORD}}\napprovedMinors:"
        ),
    );
    edit(PROD, "proxmox: homelab", "proxmox: elsewhere");
    git(
        fleet.path(),
        &["commit", "--quiet", "-am", "prod elsewhere"],
    );
    git(fleet.path(), &["checkout", "--quiet", "main"]);

    let run = fleet.preview("new-connection", "json");
    run.assert_code(1);
    let value = json(&run);
    let refusals = value["refusals"].as_array().expect("refusals");
    let refused = |field: &str, value: &str| {
        refusals.iter().any(|r| {
            r["field"] == field
                && r["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&format!("`{value}` is new in this change")))
                && r["fix"]
                    .as_str()
                    .is_some_and(|f| f.contains(&format!("--pin {field}={value}")))
        })
    };
    assert!(refused("proxmox.elsewhere.url", &proxmox_url), "{value:#}");
    assert!(refused("datastores.rogue.url", &datastore_url), "{value:#}");
    assert!(
        value["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with("capstan.yaml: refused")),
        "{value:#}"
    );
    let contacted = |l: &std::net::TcpListener| match l.accept() {
        Ok(_) => true,
        Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(err) => panic!("accept: {err}"),
    };
    assert!(
        !contacted(&proxmox),
        "the preview connected to the new Proxmox"
    );
    assert!(
        !contacted(&datastore),
        "the preview connected to the new datastore"
    );
}
