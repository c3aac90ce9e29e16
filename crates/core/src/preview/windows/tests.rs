use super::*;
use crate::model::NodeName;
use crate::plan::{Action, Step, Target};
use crate::spec::{Cluster, HumanDuration, MaintenanceWindow};

fn drain(machine: &str) -> PreviewStep {
    PreviewStep {
        step: Step {
            action: Action::Drain {
                node: NodeName(machine.into()),
                deadline: Timestamp::UNIX_EPOCH,
            },
            target: Target {
                cluster: "prod".into(),
                machine: Some(NodeName(machine.into())),
                vm_id: None,
                pool: Some("general".into()),
                role: None,
            },
            reason: "test".into(),
            disruptive: true,
            waits_on: None,
        },
        pending_on_base: false,
    }
}

fn drains(count: usize) -> Vec<PreviewStep> {
    (0..count).map(|i| drain(&format!("w{i}"))).collect()
}

/// Drains measured at a 90th percentile of `minutes`.
fn measured(minutes: u64) -> BTreeMap<String, StepDuration> {
    BTreeMap::from([(
        "drain".to_owned(),
        StepDuration {
            median_ms: minutes * 30_000,
            samples: 5,
            p90_ms: Some(minutes * 60_000),
        },
    )])
}

/// A cluster whose allow windows are `(schedule, minutes)`.
fn spec(allow: &[(&str, u64)]) -> ClusterSpec {
    let mut spec = Cluster::test("prod").spec;
    spec.maintenance.allow = allow
        .iter()
        .map(|(schedule, minutes)| MaintenanceWindow {
            schedule: schedule.parse().expect("cron"),
            duration: HumanDuration::minutes(*minutes),
        })
        .collect();
    spec
}

/// [`needed`] for `predicted`, disruptive steps each in a round of its own (as the estimate
/// groups them).
fn needed_by(
    predicted: &[PreviewStep],
    spec: &ClusterSpec,
    durations: &BTreeMap<String, StepDuration>,
    now: Timestamp,
) -> Option<WindowsNeeded> {
    let rounds = predicted.iter().map(|step| vec![step]).collect();
    needed(rounds, spec, durations, now, &WindowSearch::new(None))
}

/// Saturday 2026-05-02, 01:00 UTC.
fn saturday() -> Timestamp {
    "2026-05-02T01:00:00Z".parse().expect("time")
}

#[test]
fn steps_that_fit_in_one_window_say_how_much_of_it_they_use() {
    let spec = spec(&[("0 0 1 * * Sat", 240)]);
    let needed = needed_by(&drains(3), &spec, &measured(60), saturday()).expect("windows");
    assert_eq!(
        needed.text,
        "fits 3h of the 4h window at Sat 2026-05-02 01:00 UTC"
    );
    assert_eq!(needed.opens, [saturday()]);
    assert!(!needed.more && !needed.never);
}

#[test]
fn a_step_that_does_not_fit_what_is_left_goes_to_the_next_window() {
    // Four hour-long drains fill the window to its last minute; the fifth waits a week.
    let spec = spec(&[("0 0 1 * * Sat", 240)]);
    let needed = needed_by(&drains(5), &spec, &measured(60), saturday()).expect("windows");
    assert_eq!(
        needed.text,
        "needs 2 windows: Sat 2026-05-02 01:00, Sat 2026-05-09 01:00 UTC"
    );
    assert_eq!(needed.ends, "2026-05-09T02:00:00Z".parse().expect("time"));
}

#[test]
fn a_window_too_short_for_a_step_is_skipped_for_one_it_fits_in() {
    // Saturdays for 2 minutes, Sundays for 4 hours; a drain needs 3 minutes.
    let spec = spec(&[("0 0 1 * * Sat", 2), ("0 0 1 * * Sun", 240)]);
    let needed = needed_by(&drains(1), &spec, &measured(3), saturday()).expect("windows");
    assert_eq!(
        needed.text,
        "fits 3m of the 4h window at Sun 2026-05-03 01:00 UTC"
    );
}

#[test]
fn counting_stops_after_ten_windows() {
    // Daily hour-long windows; each 50-minute drain takes one.
    let spec = spec(&[("0 0 1 * * *", 60)]);
    let needed = needed_by(&drains(12), &spec, &measured(50), saturday()).expect("windows");
    assert!(needed.more);
    assert_eq!(needed.opens.len(), MAX_WINDOWS);
    assert!(
        needed
            .text
            .starts_with("needs more than 10 windows: Sat 2026-05-02 01:00, Sun 2026-05-03 01:00,"),
        "{}",
        needed.text
    );
}

#[test]
fn a_step_longer_than_every_window_never_starts_and_no_window_means_no_count() {
    let short = spec(&[("0 0 1 * * Sat", 2)]);
    let needed = needed_by(&drains(1), &short, &measured(3), saturday()).expect("windows");
    assert!(needed.never);
    assert_eq!(
        needed.text,
        "a disruptive step fits in no window: it waits for good"
    );
    assert_eq!(
        needed_by(&drains(1), &spec(&[]), &measured(3), saturday()),
        None
    );
}
