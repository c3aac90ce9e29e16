//! Drain simulation: the snapshot's pods and PodDisruptionBudgets tell, before merge, which
//! drain will block on which budget and which pods it would evict.

use crate::fixture::{Fleet, json};

const WORKERS_MACHINE: &str = "machine: {template: debian13-k8s, cores: 4, memoryMiB: 8192, diskGiB: 50, placement: [pve1, pve2]}";

#[test]
fn a_budget_with_no_disruption_left_is_named_with_the_pods_each_drain_would_evict() {
    let fleet = Fleet::new();
    fleet.with_web_pods();
    let v2 = WORKERS_MACHINE.replace("debian13-k8s", "debian13-k8s-v2");
    fleet.branch("template", "clusters/prod.yaml", WORKERS_MACHINE, &v2);

    let markdown = fleet.preview("template", "markdown");
    markdown
        .assert_code(0)
        .assert_reports(
            "**prod: 3 workers replaced (new before old) — held for the maintenance window (Sat 2026-05-02 01:00 UTC); drains will block on PodDisruptionBudget default/web; edge: unchanged; platform: unchanged; talos: unchanged**",
        )
        .assert_reports("**Drains** simulated against the observed pods and PodDisruptionBudgets")
        .assert_reports(
            "**this drain will block on `web` (minAvailable 3, 3 healthy)**: `default/web` allows 0 disruption(s) now; guards `default/web-0`",
        );

    let value = json(&fleet.preview("template", "json"));
    let drains = value["clusters"][0]["drains"].as_array().expect("drains");
    assert_eq!(drains.len(), 3, "one per replaced worker: {drains:#?}");
    for (index, drain) in drains.iter().enumerate() {
        // The DaemonSet's pod stays; the web pod is evicted, and its budget refuses.
        assert_eq!(
            drain["evicts"],
            serde_json::json!([format!("default/web-{index}")])
        );
        let block = &drain["blockedBy"][0];
        assert_eq!(block["budget"], "default/web");
        assert_eq!(block["rule"], "minAvailable 3");
        assert_eq!(block["healthy"], 3);
        assert_eq!(block["allowed"], 0);
        assert_eq!(
            block["message"],
            "this drain will block on `web` (minAvailable 3, 3 healthy)"
        );
    }
}

#[test]
fn a_snapshot_without_pods_simulates_no_drain() {
    let fleet = Fleet::new();
    let v2 = WORKERS_MACHINE.replace("debian13-k8s", "debian13-k8s-v2");
    fleet.branch("template", "clusters/prod.yaml", WORKERS_MACHINE, &v2);
    let value = json(&fleet.preview("template", "json"));
    assert_eq!(value["clusters"][0]["drains"], serde_json::json!([]));
    assert!(
        value["summary"]
            .as_str()
            .is_some_and(|s| !s.contains("block")),
        "{value:#}"
    );
}

#[test]
fn with_blocked_drain_fail_a_budget_that_would_block_fails_the_preview_by_name() {
    let fleet = Fleet::new();
    fleet.with_web_pods();
    let v2 = WORKERS_MACHINE.replace("debian13-k8s", "debian13-k8s-v2");
    fleet.branch_with(
        "template-fail",
        "clusters/prod.yaml",
        &[
            (WORKERS_MACHINE, v2.as_str()),
            ("  rollout:\n", "  rollout:\n    blockedDrain: fail\n"),
        ],
    );
    fleet
        .preview("template-fail", "markdown")
        .assert_code(1)
        .assert_reports("rollout.blockedDrain: fail")
        .assert_reports(
            "PodDisruptionBudget default/web (minAvailable 3, 3 healthy) allows no disruption now: the drain of ",
        )
        .assert_reports("set rollout.blockedDrain: wait");
    let value = json(&fleet.preview("template-fail", "json"));
    let refusals = value["refusals"].as_array().expect("refusals");
    assert_eq!(refusals.len(), 1, "one per budget: {refusals:#?}");
    assert_eq!(refusals[0]["field"], "rollout.blockedDrain");

    // Without pods in the snapshot nothing is known to block: the change passes.
    let bare = Fleet::new();
    bare.branch_with(
        "template-fail",
        "clusters/prod.yaml",
        &[
            (WORKERS_MACHINE, v2.as_str()),
            ("  rollout:\n", "  rollout:\n    blockedDrain: fail\n"),
        ],
    );
    bare.preview("template-fail", "json").assert_code(0);
}
