//! `capstan plan` on the example repository: from nothing (the full bootstrap of every
//! cluster), against the documented example snapshot, in each format; and the snapshot's
//! committed schema stays current.

use capstan_testkit::cli::{capstan, examples_repo};

const NOW: &str = "2026-04-29T12:00:00Z";

fn repo() -> String {
    examples_repo().to_str().expect("utf-8 path").to_owned()
}

/// `capstan plan` of the example repository from nothing, in markdown.
fn plan_from_nothing() -> capstan_testkit::cli::Run {
    capstan(&[
        "plan",
        &repo(),
        "--observed",
        "none",
        "--format",
        "markdown",
        "--now",
        NOW,
    ])
}

fn snapshot() -> String {
    examples_repo()
        .join("observed.example.json")
        .to_str()
        .expect("utf-8 path")
        .to_owned()
}

#[test]
fn planning_from_nothing_prints_the_full_bootstrap_of_every_example_cluster_in_markdown() {
    let run = plan_from_nothing();
    run.assert_code(0)
        .assert_reports("#### `edge` — Pending: 10 step(s) to converge, 3 may run now")
        .assert_reports("#### `platform` — Pending: 25 step(s) to converge, 8 may run now")
        .assert_reports("#### `prod` — Pending: 13 step(s) to converge, 4 may run now")
        .assert_reports("1. `create-machine` **capstan-prod-cp-dffxv** — bootstrap: control plane 1 of 1; on pve1; Proxmox memory not observed — *runs now*")
        .assert_reports("9. `init-control-plane` **capstan-prod-cp-dffxv** — bootstrap: kubeadm init on the first of 1 control plane(s), endpoint k8s-prod.lab.example (192.168.1.23:6443)")
        .assert_reports("13. `deliver-kubeconfig` **cluster prod** — first delivery: the cluster is built; Flux gets its kubeconfig in flux-system/prod-kubeconfig")
        .assert_reports("25. `deliver-kubeconfig` **cluster platform**");
    // Every machine cloned at once, each prepared as it answers, init, then the joins (the
    // workers alongside the control planes, which join one at a time), delivery.
    let platform: Vec<&str> = run
        .stdout
        .lines()
        .skip_while(|l| !l.contains("`platform`"))
        .filter_map(|l| {
            l.split('`')
                .nth(1)
                .filter(|_| l.starts_with(char::is_numeric))
        })
        .take(25)
        .collect();
    let mut expected = vec!["create-machine"; 8];
    expected.extend(["prepare-node"; 8]);
    expected.push("init-control-plane");
    expected.extend(["join-node"; 7]);
    expected.push("deliver-kubeconfig");
    assert_eq!(platform, expected);
}

#[test]
fn the_example_snapshot_plans_an_upgrade_held_for_the_window_and_reports_the_removed_cluster() {
    let run = capstan(&["plan", &repo(), "--observed", &snapshot(), "--now", NOW]);
    run.assert_code(0)
        .assert_reports("prod: Updating — 35 step(s) to converge, none may run now")
        .assert_reports("1. upgrade-control-plane cluster prod: patch upgrade 1.36.1 → 1.36.2")
        .assert_reports("waiting on: upgrade-control-plane waits on maintenance window (opens 2026-05-02T01:00:00Z)")
        .assert_reports("cluster legacy has no file any more; its 1 VM(s) and its kubeconfig are kept because prune is off");
    // Inside the window the upgrade may run.
    capstan(&[
        "plan",
        &repo(),
        "--observed",
        &snapshot(),
        "--now",
        "2026-05-02T01:30:00Z",
    ])
    .assert_code(0)
    .assert_reports("prod: Updating — 35 step(s) to converge, 1 may run now")
    .assert_reports("  may run now:\n    - upgrade-control-plane cluster prod");
}

#[test]
fn json_lists_clusters_with_phase_steps_and_blocked() {
    let run = capstan(&[
        "plan",
        &repo(),
        "--observed",
        "none",
        "--format",
        "json",
        "--now",
        NOW,
    ]);
    run.assert_code(0);
    let value: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(value["valid"], true);
    assert_eq!(value["now"], NOW);
    let clusters = value["clusters"].as_array().expect("clusters");
    let names: Vec<&str> = clusters.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["edge", "platform", "prod", "talos"]);
    let talos = &clusters[3];
    assert_eq!(talos["phase"], "Pending");
    assert_eq!(talos["steps"][0]["action"], "create-machine");
    assert_eq!(talos["steps"][0]["target"]["role"], "control-plane");
    let prod = &clusters[2];
    assert_eq!(prod["phase"], "Pending");
    assert_eq!(prod["blocked"], serde_json::json!([]));
    let step = &prod["steps"][0];
    assert_eq!(step["action"], "create-machine");
    assert_eq!(step["disruptive"], false);
    assert_eq!(step["target"]["cluster"], "prod");
    assert_eq!(step["target"]["pool"], "cp");
    assert_eq!(step["target"]["role"], "control-plane");
    assert_eq!(step["ownership"]["pool"], "cp");
    assert_eq!(step["proxmoxNode"], "pve1");
    assert_eq!(step["machine"]["kubernetes"], "1.36.2");
    assert_eq!(prod["predicted"].as_array().map(Vec::len), Some(13));
}

#[test]
fn a_changed_endpoint_is_refused_in_plain_words() {
    let repo = capstan_testkit::cli::ScratchRepo::from_examples();
    repo.edit(
        "clusters/prod.yaml",
        "address: 192.168.1.23",
        "address: 192.168.1.33",
    );
    let run = capstan(&[
        "plan",
        repo.path().to_str().expect("path"),
        "--observed",
        &snapshot(),
        "--format",
        "markdown",
        "--now",
        NOW,
    ]);
    run.assert_code(0)
        .assert_reports("#### `prod` — Blocked: nothing to do")
        .assert_reports("> **Refused (rule 8, the endpoint is fixed):** the endpoint cannot change after init-control-plane (address 192.168.1.23 → 192.168.1.33)");
}

#[test]
fn a_missing_or_broken_snapshot_is_an_error_that_names_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broken = dir.path().join("observed.json");
    std::fs::write(&broken, "{\"clusters\": 3}").expect("write");
    let run = capstan(&[
        "plan",
        &repo(),
        "--observed",
        broken.to_str().expect("path"),
    ]);
    run.assert_code(1);
    assert!(
        run.stderr
            .contains("is not an observed-state snapshot (see schemas/observed.schema.json)"),
        "{}",
        run.stderr
    );
    let run = capstan(&["plan", &repo(), "--observed", "/nonexistent/observed.json"]);
    run.assert_code(1);
    assert!(
        run.stderr
            .contains("cannot read the observed-state snapshot /nonexistent/observed.json"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_committed_observed_schema_is_current_and_accepts_the_example_snapshot() {
    let schema = capstan::observed::json_schema();
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/observed.schema.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == capstan::commands::schema::render(&schema),
        "schemas/observed.schema.json is out of date: run `cargo run -- schema --out schemas` and commit it"
    );
    let text = std::fs::read_to_string(snapshot()).expect("example snapshot");
    let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let parsed: capstan::observed::Observed = serde_json::from_str(&text).expect("parses");
    assert_eq!(parsed.clusters.len(), 2);
}

#[test]
fn a_k3s_clusters_plan_speaks_of_k3s_not_kubeadm() {
    let run = plan_from_nothing();
    run.assert_code(0);
    let edge: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains("capstan-edge-"))
        .collect();
    assert!(
        edge.iter()
            .any(|l| l.contains("start the K3s server on the first of 1 control plane(s)")),
        "{}",
        run.stdout
    );
    assert!(
        edge.iter()
            .any(|l| l.contains("check that K3s 1.36.2+k3s1 is in its template")),
        "{}",
        run.stdout
    );
    for line in edge {
        assert!(
            !line.contains("kubeadm") && !line.contains("CRI-O"),
            "{line}"
        );
    }
}
