//! Deny windows and time zones in a preview: a freeze covering now holds a template change's
//! disruptive steps, and the preview says which window holds them and until when, on the
//! zone's clock.

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
        .assert_reports("clusters/prod.yaml:44:27")
        .assert_reports(
            "`Europe/Roma` is not a time zone of the IANA database: did you mean `Europe/Rome`?",
        );
}
