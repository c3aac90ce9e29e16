//! Deny windows and time zones in a preview: a freeze covering now holds a template change's
//! disruptive steps, and the preview says which window holds them and until when, on the
//! zone's clock; windows a pull request makes costly to search (many, frequent, at a change of
//! the clocks) cost no more than `--preview-timeout`.

use std::time::{Duration, Instant};

use crate::fixture::{Fleet, json};

const PROD: &str = "clusters/prod.yaml";
const WORKERS_MACHINE: &str = "machine: {template: debian13-k8s, cores: 4, memoryMiB: 8192, diskGiB: 50, placement: [pve1, pve2]}";
const WINDOW: &str = "maintenanceWindow: {schedule: \"0 0 1 * * Sat\", duration: 4h}";

#[test]
fn a_deny_window_covering_now_holds_a_template_change_and_the_preview_says_until_when() {
    let fleet = Fleet::new();
    let v2 = WORKERS_MACHINE.replace("debian13-k8s", "debian13-k8s-v2");
    // A week's freeze from Monday 27 April, midnight in Rome: it covers the preview's now
    // (Wednesday 29 April) and ends Monday 4 May 00:00 Rome time; the next Saturday window
    // then opens 9 May 01:00 Rome time.
    let freeze = format!(
        "{WINDOW}\n  maintenance:\n    timeZone: Europe/Rome\n    deny: [{{schedule: \"0 0 27 4 *\", duration: 168h}}]"
    );
    fleet.branch_with(
        "freeze",
        PROD,
        &[(WORKERS_MACHINE, v2.as_str()), (WINDOW, freeze.as_str())],
    );

    // Markdown escapes the schedule's backticks and star.
    fleet.preview("freeze", "markdown").assert_code(0).assert_reports(
        "**prod: 3 workers replaced (new before old) — held by deny window \\`0 0 27 4 \\*\\` until Sat 2026-05-09 01:00 Europe/Rome; edge: unchanged; platform: unchanged; talos: unchanged**",
    );
    fleet
        .preview("freeze", "text")
        .assert_code(0)
        .assert_reports(
            "prod: 3 workers replaced (new before old) — held by deny window `0 0 27 4 *` until Sat 2026-05-09 01:00 Europe/Rome",
        )
        .assert_reports("[waits on deny window `0 0 27 4 *` (until 2026-05-09 01:00 Europe/Rome)]");

    let value = json(&fleet.preview("freeze", "json"));
    let prod = &value["clusters"][0];
    assert_eq!(prod["name"], "prod");
    let steps = prod["predicted"].as_array().expect("predicted");
    let held: Vec<_> = steps.iter().filter(|s| s["disruptive"] == true).collect();
    assert!(!held.is_empty(), "the change drains: {prod:#}");
    for step in held {
        assert_eq!(
            step["waitsOn"]["resource"],
            serde_json::json!({
                "kind": "maintenance-window",
                "opens": "2026-05-08T23:00:00Z",
                "deny": "0 0 27 4 *",
                "timeZone": "Europe/Rome",
            }),
            "{step:#}"
        );
    }
}

#[test]
fn an_unknown_time_zone_is_refused_with_its_position_and_the_closest_name() {
    let fleet = Fleet::new();
    let zone = format!("{WINDOW}\n  maintenance: {{timeZone: Europe/Roma}}");
    fleet.branch_with("zone", PROD, &[(WINDOW, zone.as_str())]);
    fleet
        .preview("zone", "text")
        .assert_code(1)
        .assert_reports("clusters/prod.yaml:65:27")
        .assert_reports(
            "`Europe/Roma` is not a time zone of the IANA database: did you mean `Europe/Rome`?",
        );
}

/// Just after Rome's clocks jump forward (2026-03-29, 02:00 → 03:00 local, 01:00 UTC).
const SPRING_FORWARD: &str = "2026-03-29T01:30:00Z";

/// A branch `branch` whose prod has 32 allow and 32 deny windows opening on `schedule` in
/// Rome, and whose workers move to a new template (every drain is held by the windows).
fn many_windows(fleet: &Fleet, branch: &str, schedule: &str) {
    let windows = |kind: &str| {
        let one = format!("{{schedule: \"{schedule}\", duration: 1m}}");
        format!("    {kind}: [{}]\n", vec![one; 32].join(", "))
    };
    let maintenance = format!(
        "# {WINDOW}\n  maintenance:\n    timeZone: Europe/Rome\n{}{}",
        windows("allow"),
        windows("deny")
    );
    let v2 = WORKERS_MACHINE.replace("debian13-k8s", "debian13-k8s-v2");
    fleet.branch_with(
        branch,
        PROD,
        &[
            (WORKERS_MACHINE, v2.as_str()),
            (WINDOW, maintenance.as_str()),
        ],
    );
}

#[test]
fn windows_opening_every_second_are_refused_and_their_preview_ends_within_its_timeout() {
    let fleet = Fleet::new();
    many_windows(&fleet, "every-second", "* * * * * *");
    let started = Instant::now();
    let run = fleet.preview_with(
        "every-second",
        "text",
        &["--now", SPRING_FORWARD, "--preview-timeout", "2s"],
    );
    let took = started.elapsed();
    run.assert_code(1).assert_reports(
        "spec.maintenance.allow[0].schedule: `* * * * * *` opens a window 60 times a minute: a window opens at most once a minute",
    );
    // Minutes before windows were refused (and the search stepped over the skipped hour);
    // the bound leaves room for a loaded machine starting the binary.
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_preview_stopped_at_its_deadline_inside_a_window_search_is_refused_at_the_deadline() {
    let fleet = Fleet::new();
    many_windows(&fleet, "every-minute", "0 * * * * *");
    let at_spring_forward = ["--now", SPRING_FORWARD];
    let full = fleet.preview_with("every-minute", "text", &at_spring_forward);
    full.assert_code(0)
        .assert_reports("prod: 3 workers replaced (new before old) — held by deny window `0 * * * * *`, which leaves no time to start");
    let started = Instant::now();
    let run = fleet.preview_with(
        "every-minute",
        "text",
        &["--now", SPRING_FORWARD, "--preview-timeout", "50ms"],
    );
    let took = started.elapsed();
    // Unlimited, planning both revisions and counting the windows takes about twice the
    // deadline in a debug build here (`cargo bench --bench hostile_inputs` prints it): the
    // preview is refused at the deadline; a machine fast enough to finish first gives the
    // full preview. Either way it ends soon after the deadline (loose bound: a loaded
    // machine starts the binary too).
    if run.code == 1 {
        run.assert_reports(" revision exceeded 50ms: refused");
    } else {
        run.assert_code(0)
            .assert_reports("held by deny window `0 * * * * *`");
    }
    assert!(took < Duration::from_secs(5), "took {took:?}");
}
