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
                proxmox_node: "pve1".to_owned(),
            },
        },
    };
    Step {
        action,
        target: Target {
            cluster: "prod".to_owned(),
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
