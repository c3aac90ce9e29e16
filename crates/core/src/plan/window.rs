//! Maintenance windows (rule 11): whether one is open at `now`, or when the next opens. Pure:
//! `now` comes in as an argument.

use chrono::{DateTime, Utc};
use jiff::{SignedDuration, Timestamp};

use crate::spec::MaintenanceWindow;

/// Whether disruptive steps may start at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WindowState {
    /// No window is set, or one is open.
    Open,
    /// Closed; the next window opens then (`None`: the schedule never fires again).
    Closed { opens: Option<Timestamp> },
}

/// The state of `window` at `now`. A window opens at each time its schedule fires and stays
/// open for its duration.
pub(crate) fn state(window: Option<&MaintenanceWindow>, now: Timestamp) -> WindowState {
    let Some(window) = window else {
        return WindowState::Open;
    };
    let duration = SignedDuration::try_from(window.duration.0).unwrap_or(SignedDuration::MAX);
    let earliest_start = now.saturating_sub(duration).unwrap_or(Timestamp::MIN);
    // `after` yields fire times strictly after its argument: a fire time in
    // (now - duration, now] means a window is open now.
    let next = to_chrono(earliest_start)
        .and_then(|start| window.schedule.schedule().after(&start).next())
        .and_then(from_chrono);
    match next {
        Some(start) if start <= now => WindowState::Open,
        opens => WindowState::Closed { opens },
    }
}

fn to_chrono(at: Timestamp) -> Option<DateTime<Utc>> {
    let nanos = u32::try_from(at.subsec_nanosecond()).unwrap_or(0);
    DateTime::<Utc>::from_timestamp(at.as_second(), nanos)
}

fn from_chrono(at: DateTime<Utc>) -> Option<Timestamp> {
    Timestamp::new(
        at.timestamp(),
        i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
    )
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::HumanDuration;

    fn saturday_window() -> MaintenanceWindow {
        MaintenanceWindow {
            schedule: "0 0 1 * * Sat".parse().expect("cron"),
            duration: HumanDuration(std::time::Duration::from_secs(4 * 3600)),
        }
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    #[test]
    fn a_window_is_open_from_its_start_for_its_duration() {
        let window = saturday_window();
        // 2026-05-02 is a Saturday.
        assert_eq!(
            state(Some(&window), at("2026-05-02T01:00:00Z")),
            WindowState::Open
        );
        assert_eq!(
            state(Some(&window), at("2026-05-02T04:59:59Z")),
            WindowState::Open
        );
        assert_eq!(
            state(Some(&window), at("2026-05-02T05:00:00Z")),
            WindowState::Closed {
                opens: Some(at("2026-05-09T01:00:00Z"))
            }
        );
        assert_eq!(
            state(Some(&window), at("2026-04-29T12:00:00Z")),
            WindowState::Closed {
                opens: Some(at("2026-05-02T01:00:00Z"))
            }
        );
    }

    #[test]
    fn without_a_window_everything_may_run() {
        assert_eq!(state(None, at("2026-04-29T12:00:00Z")), WindowState::Open);
    }
}
