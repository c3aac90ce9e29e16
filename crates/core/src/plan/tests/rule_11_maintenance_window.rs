//! Rule 11: disruptive steps wait for the maintenance window. With measured step durations, a
//! disruptive step starts in the open window only if its action's measured 90th percentile
//! fits in what is left of it.

use super::*;
use crate::observed::StepDuration;

#[test]
fn rule_11_disruptive_steps_wait_for_the_window_and_the_rest_proceeds() {
    let before = Cluster::test("prod")
        .with_workers("general", 2)
        .with_window();
    let mut observed = built(&desired(vec![before.clone()]));
    let after = before.with_template("general", "debian13-k8s-v2");
    let desired = desired(vec![after.clone()]);
    // The replacement exists and is Ready: the next step is a cordon, outside the window.
    let first = plan_at(&desired, &observed, now());
    for step in &first.clusters[0].predicted[..3] {
        expected_effect(&mut observed, step, now());
    }
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let old = machines_of(&observed, "prod", "general");
    let old_first = old
        .iter()
        .find(|n| {
            observed.clusters["prod"].machines[*n].ownership.spec_hash != after.hash("general")
        })
        .expect("old");
    assert_eq!(cluster.steps, vec![]);
    let opens: jiff::Timestamp = "2026-05-02T01:00:00Z".parse().expect("time");
    assert_eq!(
        cluster.waiting_on,
        vec![Waiting {
            step: Some(ActionKind::Cordon),
            machine: Some(old_first.clone()),
            resource: Resource::MaintenanceWindow {
                opens: Some(opens),
                deny: None,
                time_zone: None,
                fit: None,
            },
            since: None,
        }]
    );
    assert_eq!(
        cluster.predicted[0].waits_on,
        Some(Wait {
            resource: Resource::MaintenanceWindow {
                opens: Some(opens),
                deny: None,
                time_zone: None,
                fit: None,
            },
            since: None
        })
    );
    // Inside the window it runs.
    let plan = plan_at(&desired, &observed, opens);
    assert_eq!(shape(&plan.clusters[0].steps), vec![s("cordon", old_first)]);
}

// Rule 11: a deny window holds disruptive steps whatever the allow windows say, and says
// until when, on the zone's clock.
#[test]
fn rule_11_a_deny_window_holds_a_template_change_and_says_until_when() {
    // A week's freeze from Monday 27 April, midnight in Rome (UTC+2 then).
    let before = Cluster::test("prod").with_workers("general", 2).with_deny(
        "0 0 27 4 *",
        7 * 24,
        "Europe/Rome",
    );
    let mut observed = built(&desired(vec![before.clone()]));
    let after = before.with_template("general", "debian13-k8s-v2");
    let desired = desired(vec![after]);
    let first = plan_at(&desired, &observed, now());
    for step in &first.clusters[0].predicted[..3] {
        expected_effect(&mut observed, step, now());
    }
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.steps, vec![], "the cordon waits");
    let until: jiff::Timestamp = "2026-05-03T22:00:00Z".parse().expect("time");
    let held = Resource::MaintenanceWindow {
        opens: Some(until),
        deny: Some("0 0 27 4 *".to_owned()),
        time_zone: Some("Europe/Rome".to_owned()),
        fit: None,
    };
    assert_eq!(cluster.waiting_on.len(), 1);
    assert_eq!(cluster.waiting_on[0].step, Some(ActionKind::Cordon));
    assert_eq!(cluster.waiting_on[0].resource, held);
    assert_eq!(
        held.to_string(),
        "deny window `0 0 27 4 *` (until 2026-05-04 00:00 Europe/Rome)"
    );
    assert_eq!(
        held.hold_phrase().as_deref(),
        Some("held by deny window `0 0 27 4 *` until Mon 2026-05-04 00:00 Europe/Rome")
    );
    assert!(
        cluster
            .predicted
            .iter()
            .filter(|s| s.disruptive)
            .all(|s| s.waits_on
                == Some(Wait {
                    resource: held.clone(),
                    since: None
                })),
        "every disruptive step of the prediction is held: {:?}",
        cluster.predicted
    );
    // Once it ends the cordon starts.
    let plan = plan_at(&desired, &observed, until);
    assert_eq!(plan.clusters[0].steps[0].name(), "cordon");
}

/// A template change whose replacement is Ready: the next step is a cordon of an old worker.
fn at_the_cordon() -> (Desired, Observed) {
    let before = Cluster::test("prod")
        .with_workers("general", 2)
        .with_window();
    let mut observed = built(&desired(vec![before.clone()]));
    let desired = desired(vec![before.with_template("general", "debian13-k8s-v2")]);
    let first = plan_at(&desired, &observed, now());
    for step in &first.clusters[0].predicted[..3] {
        expected_effect(&mut observed, step, now());
    }
    (desired, observed)
}

fn cordons_measured(observed: &mut Observed, p90_ms: Option<u64>) {
    observed.step_durations.insert(
        "cordon".to_owned(),
        StepDuration {
            median_ms: 60_000,
            samples: 5,
            p90_ms,
        },
    );
}

#[test]
fn rule_11_a_measured_step_that_does_not_fit_what_is_left_waits_for_the_next_window() {
    let (desired, mut observed) = at_the_cordon();
    // Saturday 2026-05-02: the window is 01:00–05:00; at 04:58, 2 minutes are left.
    let late = "2026-05-02T04:58:00Z".parse().expect("time");
    cordons_measured(&mut observed, Some(180_000));
    let plan = plan_at(&desired, &observed, late);
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.steps, vec![], "the cordon does not start");
    let [waiting] = cluster.waiting_on.as_slice() else {
        panic!("one wait: {:#?}", cluster.waiting_on);
    };
    let machine = waiting.machine.as_ref().expect("a machine");
    assert_eq!(
        waiting.resource.to_string(),
        format!(
            "maintenance window: cordon of {machine} needs 3m (p90 of 5 run(s)); 2m of the window left: waits until Sat 2026-05-09 01:00 UTC"
        )
    );
    assert!(
        cluster.predicted[0]
            .waits_on
            .as_ref()
            .is_some_and(|w| w.resource == waiting.resource),
        "the prediction says so too: {:#?}",
        cluster.predicted[0]
    );
    // With 3 minutes left it fits; unmeasured (an older snapshot: no p90), it is not held.
    let fits = "2026-05-02T04:57:00Z".parse().expect("time");
    let plan = plan_at(&desired, &observed, fits);
    assert_eq!(shape(&plan.clusters[0].steps), vec![s("cordon", machine)]);
    cordons_measured(&mut observed, None);
    let plan = plan_at(&desired, &observed, late);
    assert_eq!(shape(&plan.clusters[0].steps), vec![s("cordon", machine)]);
}
