//! Rules of a cluster's `maintenance` block (allow and deny windows, the time zone) and of the
//! older `rollout.maintenanceWindow`. The zone's name is checked as it is read (an unknown one
//! never parses); here: one way to write the allow windows, windows that open, at most once a
//! minute (a schedule firing every second made each plan walk thousands of fire times), and at
//! most [`MAX_WINDOWS`] of each kind.

use super::diagnostic::{Diagnostic, SourceFile};
use super::limits::MAX_WINDOWS;
use super::types::{ClusterSpec, MaintenanceWindow};

/// Appends the findings about `spec`'s maintenance windows to `out`.
pub(super) fn check(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let maintenance = &spec.maintenance;
    if let Some(window) = &spec.rollout.maintenance_window {
        if !maintenance.allow.is_empty() {
            out.push(
                file.error(
                    "spec.rollout.maintenanceWindow",
                    "both rollout.maintenanceWindow and maintenance.allow name allow windows: which wins would be a guess",
                )
                .with_hint("move this window into maintenance.allow"),
            );
        }
        opens(out, window, "spec.rollout.maintenanceWindow", file);
    }
    for (kind, windows) in [("allow", &maintenance.allow), ("deny", &maintenance.deny)] {
        if windows.len() > MAX_WINDOWS {
            out.push(
                file.error(
                    &format!("spec.maintenance.{kind}"),
                    format!("{} windows: at most {MAX_WINDOWS}", windows.len()),
                )
                .with_hint("one cron schedule can name many days (`0 0 1 * * Sat,Sun`)"),
            );
            continue;
        }
        for (index, window) in windows.iter().enumerate() {
            opens(
                out,
                window,
                &format!("spec.maintenance.{kind}[{index}]"),
                file,
            );
        }
    }
}

fn opens(out: &mut Vec<Diagnostic>, window: &MaintenanceWindow, path: &str, file: &SourceFile) {
    if window.duration.0.is_zero() {
        out.push(file.error(&format!("{path}.duration"), "a window of 0 never opens"));
    }
    let fires = window.schedule.fires_per_minute();
    if fires > 1 {
        out.push(
            file.error(
                &format!("{path}.schedule"),
                format!("`{}` opens a window {fires} times a minute: a window opens at most once a minute", window.schedule),
            )
            .with_hint("give the seconds field one value (`0 */5 * * * *` opens one every five minutes), or write five fields"),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::{RepoFiles, SourceText, load};

    const WINDOW: &str = "maintenanceWindow: {schedule: \"0 0 1 * * Sat\", duration: 4h}";

    /// The findings of the example repository with prod's allow window replaced by `with`.
    fn findings(with: &str) -> String {
        let source = |path: &str, text: &str| SourceText {
            path: path.to_owned(),
            text: text.to_owned(),
        };
        let prod = include_str!("../../../../examples-repo/clusters/prod.yaml");
        assert!(prod.contains(WINDOW));
        let files = RepoFiles {
            fleet: source(
                "capstan.yaml",
                include_str!("../../../../examples-repo/capstan.yaml"),
            ),
            clusters: vec![source("clusters/prod.yaml", &prod.replace(WINDOW, with))],
        };
        load(&files).diagnostics.to_string()
    }

    #[test]
    fn deny_windows_and_a_zone_are_accepted() {
        let with = format!(
            "{WINDOW}\n  maintenance:\n    timeZone: Europe/Rome\n    deny: [{{schedule: \"0 0 20 12 *\", duration: 336h}}]"
        );
        assert_eq!(findings(&with), findings(WINDOW));
    }

    #[test]
    fn an_unknown_zone_is_refused_at_its_position_with_the_closest_name() {
        let with = format!("{WINDOW}\n  maintenance: {{timeZone: Europe/Roma}}");
        let text = findings(&with);
        assert!(
            text.contains("clusters/prod.yaml:65:27: error: spec.maintenance.timeZone: `Europe/Roma` is not a time zone of the IANA database: did you mean `Europe/Rome`?"),
            "{text}"
        );
    }

    #[test]
    fn a_window_opening_more_than_once_a_minute_is_refused_naming_how_often() {
        let with = "maintenance:\n    allow: [{schedule: \"* * * * * *\", duration: 4h}, {schedule: \"*/5 * * * *\", duration: 1m}]\n    deny: [{schedule: \"0,30 * * * * *\", duration: 1m}]";
        let text = findings(
            &format!("{WINDOW}\n  {with}").replace("maintenanceWindow", "# maintenanceWindow"),
        );
        assert!(
            text.contains("error: spec.maintenance.allow[0].schedule: `* * * * * *` opens a window 60 times a minute: a window opens at most once a minute\n  hint: give the seconds field one value"),
            "{text}"
        );
        assert!(
            text.contains("error: spec.maintenance.deny[0].schedule: `0,30 * * * * *` opens a window 2 times a minute"),
            "{text}"
        );
        assert!(
            !text.contains("allow[1]"),
            "five fields open once a minute at most: {text}"
        );
    }

    #[test]
    fn a_megabyte_zone_is_refused_quoted_short_and_compared_with_no_zone() {
        let zone = format!("Europe/{}", "R".repeat(1 << 20));
        let text = findings(&format!("{WINDOW}\n  maintenance: {{timeZone: {zone}}}"));
        let line = text
            .lines()
            .find(|line| line.contains("spec.maintenance.timeZone"))
            .expect("a finding about the zone");
        assert!(
            line.ends_with(&format!(
                "`{}…` (1048583 characters) is not a time zone of the IANA database: write an Area/City name such as `Europe/Rome`, or `UTC`",
                &zone[..crate::spec::diagnostic::MAX_QUOTED]
            )),
            "{line}"
        );
        assert!(text.len() < 4096, "{} bytes of findings", text.len());
    }

    #[test]
    fn allow_windows_in_two_places_and_empty_windows_are_refused() {
        let with = "maintenance:\n      allow: [{schedule: \"0 0 2 * * Sun\", duration: 4h}]\n      deny: [{schedule: \"0 0 20 12 *\", duration: 0s}]";
        let text = findings(&format!(
            "{WINDOW}\n  {}",
            with.replace("\n      ", "\n    ")
        ));
        assert!(
            text.contains("error: spec.rollout.maintenanceWindow: both rollout.maintenanceWindow and maintenance.allow name allow windows"),
            "{text}"
        );
        assert!(
            text.contains("hint: move this window into maintenance.allow"),
            "{text}"
        );
        assert!(
            text.contains("error: spec.maintenance.deny[0].duration: a window of 0 never opens"),
            "{text}"
        );
    }
}
