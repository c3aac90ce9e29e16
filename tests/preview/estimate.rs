//! Estimated durations: from the step durations a snapshot carries (the daemon's medians per
//! action), per changed cluster, with when the maintenance window lets the change start.

use crate::fixture::{Fleet, json};

const WORKERS_MACHINE: &str = "machine: {template: debian13-k8s, cores: 4, memoryMiB: 8192, diskGiB: 50, placement: [pve1, pve2]}";

const REPLACEMENT_ACTIONS: &[&str] = &[
    "create-machine",
    "prepare-node",
    "join-node",
    "cordon",
    "drain",
    "delete-node",
    "reset-node",
    "destroy-machine",
];

#[test]
fn each_round_of_a_replacement_counts_its_median_and_the_window_says_when_it_starts() {
    let fleet = Fleet::new();
    fleet.with_step_durations(REPLACEMENT_ACTIONS, 60_000);
    let v2 = WORKERS_MACHINE.replace("debian13-k8s", "debian13-k8s-v2");
    fleet.branch("template", "clusters/prod.yaml", WORKERS_MACHINE, &v2);

    let value = json(&fleet.preview("template", "json"));
    let prod = &value["clusters"][0];
    let estimate = &prod["estimate"];
    let steps = prod["predicted"].as_array().expect("steps").len() as u64;
    let rounds = estimate["rounds"].as_u64().expect("rounds");
    // Every action takes a minute: the estimate is a minute per round (a replacement's steps
    // follow one another, worker after worker).
    assert_eq!(estimate["seconds"].as_u64(), Some(rounds * 60));
    assert_eq!(estimate["measuredSteps"].as_u64(), Some(steps));
    assert_eq!(estimate["unmeasured"], serde_json::json!([]));
    assert_eq!(estimate["starts"], "2026-05-02T01:00:00Z");

    let markdown = fleet.preview("template", "markdown");
    markdown.assert_code(0).assert_reports(&format!(
        "**Estimated duration**: about {rounds} min for {steps} step(s) in {rounds} round(s), from the medians the daemon measured"
    ));
    markdown.assert_reports("; held for the maintenance window: starts Sat 2026-05-02 01:00 UTC");
    fleet
        .preview("template", "text")
        .assert_reports("  estimated duration: about ");
}

#[test]
fn new_workers_are_created_and_joined_together() {
    let fleet = Fleet::new();
    fleet.with_step_durations(&["create-machine", "prepare-node", "join-node"], 90_000);
    fleet.branch("scale", "clusters/prod.yaml", "replicas: 3", "replicas: 5");
    let value = json(&fleet.preview("scale", "json"));
    let estimate = &value["clusters"][0]["estimate"];
    // Two creations in one round, their two prepares in the next, two joins in the third.
    assert_eq!(estimate["rounds"], 3, "{value:#}");
    assert_eq!(estimate["seconds"], 270);
    assert!(estimate.get("starts").is_none(), "not held: {estimate:#}");
}

#[test]
fn a_snapshot_without_measurements_estimates_nothing() {
    let fleet = Fleet::new();
    fleet.branch("scale", "clusters/prod.yaml", "replicas: 3", "replicas: 4");
    let value = json(&fleet.preview("scale", "json"));
    assert_eq!(value["clusters"][0]["estimate"], serde_json::Value::Null);
    assert!(
        !fleet
            .preview("scale", "markdown")
            .stdout
            .contains("Estimated duration")
    );
}
