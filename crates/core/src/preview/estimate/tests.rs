use super::*;
use crate::model::NodeName;
use crate::plan::{Action, Step, Target, Wait};

fn step(action: Action, machine: &str, disruptive: bool) -> PreviewStep {
    PreviewStep {
        step: Step {
            action,
            target: Target {
                cluster: "prod".into(),
                machine: Some(NodeName(machine.into())),
                vm_id: None,
                pool: Some("general".into()),
                role: None,
            },
            reason: "test".into(),
            disruptive,
            waits_on: None,
        },
        pending_on_base: false,
    }
}

fn cordon(machine: &str) -> PreviewStep {
    step(
        Action::Cordon {
            node: NodeName(machine.into()),
        },
        machine,
        false,
    )
}

fn drain(machine: &str) -> PreviewStep {
    step(
        Action::Drain {
            node: NodeName(machine.into()),
            deadline: Timestamp::UNIX_EPOCH,
        },
        machine,
        true,
    )
}

fn medians(pairs: &[(&str, u64)]) -> BTreeMap<String, StepDuration> {
    pairs
        .iter()
        .map(|(action, ms)| {
            (
                (*action).to_owned(),
                StepDuration {
                    median_ms: *ms,
                    samples: 5,
                    p90_ms: None,
                },
            )
        })
        .collect()
}

#[test]
fn calm_steps_on_different_machines_overlap_and_disruptive_ones_add_up() {
    // Round 1: both cordons (the slowest, 2 s); rounds 2 and 3: one drain each (60 s).
    let predicted = [cordon("w1"), cordon("w2"), drain("w1"), drain("w2")];
    let durations = medians(&[("cordon", 2_000), ("drain", 60_000)]);
    let estimate = estimate(&predicted, &durations).expect("an estimate");
    assert_eq!(estimate.rounds, 3);
    assert_eq!(estimate.seconds, 122);
    assert_eq!(estimate.measured_steps, 4);
    assert!(estimate.unmeasured.is_empty());
    assert_eq!(estimate.starts, None);
    assert!(
        estimate
            .explanation
            .starts_with("about 3 min for 4 step(s) in 3 round(s), from the medians"),
        "{}",
        estimate.explanation
    );
}

#[test]
fn a_second_step_on_the_same_machine_waits_for_the_first() {
    let predicted = [cordon("w1"), cordon("w1")];
    let estimate = estimate(&predicted, &medians(&[("cordon", 1_500)])).expect("an estimate");
    assert_eq!((estimate.rounds, estimate.seconds), (2, 3));
}

#[test]
fn unmeasured_actions_are_named_and_a_window_says_when_the_steps_start() {
    let opens: Timestamp = "2026-05-02T01:00:00Z".parse().expect("time");
    let mut held = drain("w1");
    held.step.waits_on = Some(Wait {
        resource: Resource::MaintenanceWindow {
            opens: Some(opens),
            deny: None,
            time_zone: None,
            fit: None,
        },
        since: None,
    });
    let predicted = [cordon("w1"), held];
    let estimate = estimate(&predicted, &medians(&[("cordon", 400)])).expect("an estimate");
    assert_eq!(estimate.unmeasured, vec!["drain".to_owned()]);
    assert_eq!(estimate.measured_steps, 1);
    assert_eq!(estimate.seconds, 1, "milliseconds round up");
    assert_eq!(estimate.starts, Some(opens));
    assert!(
        estimate.explanation.ends_with(
            "; never measured, counted as nothing: drain; held for the maintenance window: starts Sat 2026-05-02 01:00 UTC"
        ),
        "{}",
        estimate.explanation
    );
}

#[test]
fn steps_of_actions_never_measured_give_no_figure() {
    let estimate = estimate(&[drain("w1")], &medians(&[("cordon", 1)])).expect("an estimate");
    assert_eq!(estimate.measured_steps, 0);
    assert_eq!(
        estimate.explanation,
        "unknown: the daemon has measured none of these 1 step(s)' actions yet; never measured, counted as nothing: drain"
    );
}

#[test]
fn nothing_is_estimated_without_steps_or_without_measurements() {
    assert_eq!(estimate(&[], &medians(&[("cordon", 1)])), None);
    assert_eq!(estimate(&[cordon("w1")], &BTreeMap::new()), None);
}

#[test]
fn durations_read_in_minutes_and_hours() {
    assert_eq!(roughly(59), "under a minute");
    assert_eq!(roughly(61), "about 2 min");
    assert_eq!(roughly(3 * 3600 + 5 * 60), "about 3 h 05 min");
}

#[test]
fn a_deny_window_says_which_holds_the_steps_and_until_when_on_its_clock() {
    let until: Timestamp = "2027-01-02T23:00:00Z".parse().expect("time");
    let mut held = drain("w1");
    held.step.waits_on = Some(Wait {
        resource: Resource::MaintenanceWindow {
            opens: Some(until),
            deny: Some("0 0 20 12 *".to_owned()),
            time_zone: Some("Europe/Rome".to_owned()),
            fit: None,
        },
        since: None,
    });
    let estimate = estimate(&[held], &medians(&[("drain", 60_000)])).expect("an estimate");
    assert_eq!(estimate.starts, Some(until));
    assert!(
        estimate.explanation.ends_with(
            "; held by deny window `0 0 20 12 *` until Sun 2027-01-03 00:00 Europe/Rome"
        ),
        "{}",
        estimate.explanation
    );
}
