use super::*;
use crate::plan::Target;

fn step(action: &str, machine: &str) -> Step {
    let node = crate::model::NodeName::from(machine);
    let action = match action {
        "cordon" => plan::Action::Cordon { node },
        _ => plan::Action::ResetNode {
            machine: plan::MachineRef {
                name: node,
                vm_id: None,
                proxmox_node: "pve1".into(),
            },
        },
    };
    Step {
        action,
        target: Target {
            cluster: "prod".into(),
            machine: Some(crate::model::NodeName::from(machine)),
            ..Target::default()
        },
        reason: String::new(),
        disruptive: false,
        waits_on: None,
    }
}

#[test]
fn head_steps_the_base_holds_are_pending_and_the_others_added() {
    let base = [step("cordon", "capstan-prod-general-1")];
    let head = [
        step("cordon", "capstan-prod-general-1"),
        step("cordon", "capstan-prod-general-2"),
        step("reset", "capstan-prod-general-1"),
    ];
    let marked: Vec<bool> = mark_pending(&head, &base)
        .iter()
        .map(|s| s.pending_on_base)
        .collect();
    assert_eq!(marked, [true, false, false]);
}

#[test]
fn a_base_step_matches_one_head_step_only() {
    let base = [step("cordon", "capstan-prod-general-1")];
    let head = [
        step("cordon", "capstan-prod-general-1"),
        step("cordon", "capstan-prod-general-1"),
    ];
    let marked: Vec<bool> = mark_pending(&head, &base)
        .iter()
        .map(|s| s.pending_on_base)
        .collect();
    assert_eq!(marked, [true, false]);
}

fn huge_cluster(name: &str, lines: usize) -> ClusterPreview {
    let diff: String = (0..lines)
        .map(|i| format!("+  line {i} of a very long cluster file\n"))
        .collect();
    ClusterPreview {
        name: name.to_owned(),
        file: Some(format!("clusters/{name}.yaml")),
        summary: "+1 worker".to_owned(),
        diff,
        changes: Vec::new(),
        predicted: Vec::new(),
        refused: Vec::new(),
        drains: Vec::new(),
        estimate: None,
    }
}

#[test]
fn a_comment_too_long_collapses_the_largest_clusters_and_keeps_summary_and_refusals() {
    let refusal = Refusal {
        cluster: Some("prod".to_owned()),
        rule: "rule 4: upgrades".to_owned(),
        location: None,
        field: None,
        message: "1.38 skips 1.37".to_owned(),
        fix: None,
        on_base: false,
    };
    let preview = Preview {
        base: "main@sha1:1".to_owned(),
        head: "change@sha1:2".to_owned(),
        now: jiff::Timestamp::UNIX_EPOCH,
        summary: "prod: +1 worker; edge: +1 worker; small: +1 worker".to_owned(),
        refusals: vec![refusal],
        fleet_diff: String::new(),
        clusters: vec![
            huge_cluster("prod", 2000),
            huge_cluster("edge", 1500),
            huge_cluster("small", 3),
        ],
    };
    let full = comment::comment(&preview, usize::MAX);
    assert!(full.chars().count() > comment::GITHUB_COMMENT_LIMIT);
    let short = comment::comment(&preview, comment::GITHUB_COMMENT_LIMIT);
    assert!(short.chars().count() <= comment::GITHUB_COMMENT_LIMIT);
    assert!(short.starts_with(comment::MARKER));
    assert!(short.contains("prod: +1 worker; edge: +1 worker; small: +1 worker"));
    assert!(short.contains("1.38 skips 1.37"));
    assert!(short.contains("`capstan preview --format json` prints the full plan"));
    // The largest section went first; the small one keeps its diff.
    assert!(short.contains("<b>prod</b>: +1 worker (collapsed to fit this comment)"));
    assert!(short.contains("+  line 2 of a very long cluster file"));
    assert!(!short.contains("+  line 1999 of"));
}
