//! Rule 11 with measured step durations: a disruptive step starts in the open window only if
//! its action's measured 90th percentile fits in what is left of it.

use super::*;
use crate::observed::StepDuration;

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
