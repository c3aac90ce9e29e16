//! Maintenance windows (rule 11): whether a disruptive step may start at `now` and, when not,
//! which window holds it and when it may start. A step may start inside an allow window (or at
//! any time when there is none) and never inside a deny window.
//!
//! Schedules fire at wall-clock times of the cluster's `maintenance.timeZone`, so a window
//! follows the clocks across daylight saving time: a time the clocks skip fires when they
//! resume (as `cron` does), a time they repeat fires once, the first time. Pure: `now` comes in
//! as an argument and zones come from the database bundled into the binary.

use chrono::{DateTime, Datelike, NaiveDate, Timelike, Utc};
use jiff::civil;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp};
use smol_str::SmolStr;

use super::types::Resource;
use crate::spec::{ClusterSpec, CronSchedule, MaintenanceWindow};

/// The most windows a search for the next allowed time steps over (a deny window ending
/// where another begins, an allow window inside a deny window, ...): past it the schedules are
/// taken to leave no time at all (a deny window as long as its period).
const MAX_HOPS: usize = 256;

/// The most fire times looked at to find one: bounds the cost of a schedule that fires every
/// second (a search starts up to [`LONGEST_SHIFT`] early).
const MAX_SCAN: usize = 100_000;

/// The longest a zone's clocks jump (daylight saving time moves them one hour, some zones two;
/// three leaves room): a wall-clock time this much before a jump may fire after it.
const LONGEST_SHIFT: SignedDuration = SignedDuration::from_hours(3);

/// Whether disruptive steps may start at a given time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WindowState {
    /// No window holds them.
    Open,
    /// A window holds them.
    Closed(Hold),
}

/// Why disruptive steps wait, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hold {
    /// When one may start next (`None`: the schedules leave no time).
    pub opens: Option<Timestamp>,
    /// The schedule of the deny window holding them now; `None` when what holds them is that
    /// no allow window is open.
    pub deny: Option<SmolStr>,
    /// The zone the schedules are read in, when it is not UTC.
    pub time_zone: Option<SmolStr>,
}

impl Hold {
    /// The resource a held step waits on.
    pub(crate) fn resource(&self) -> Resource {
        Resource::MaintenanceWindow {
            opens: self.opens,
            deny: self.deny.as_ref().map(ToString::to_string),
            time_zone: self.time_zone.as_ref().map(ToString::to_string),
        }
    }
}

/// The state of `spec`'s maintenance windows at `now`.
pub(crate) fn state(spec: &ClusterSpec, now: Timestamp) -> WindowState {
    let maintenance = &spec.maintenance;
    let allow: Vec<&MaintenanceWindow> = spec
        .rollout
        .maintenance_window
        .iter()
        .chain(&maintenance.allow)
        .collect();
    if allow.is_empty() && maintenance.deny.is_empty() {
        return WindowState::Open;
    }
    let zone = maintenance.time_zone.zone();
    let closed = |opens: Option<Timestamp>, deny: Option<SmolStr>| {
        WindowState::Closed(Hold {
            opens,
            deny,
            time_zone: (!maintenance.time_zone.is_utc())
                .then(|| SmolStr::new(maintenance.time_zone.as_str())),
        })
    };
    let mut at = now;
    let mut held_by_deny = None;
    let mut held = false;
    for _ in 0..MAX_HOPS {
        let denied = maintenance
            .deny
            .iter()
            .filter_map(|window| Some((window, occurrence_end(window, zone, at)?)))
            .max_by_key(|(_, end)| *end);
        if let Some((window, end)) = denied {
            if at == now {
                held_by_deny = Some(SmolStr::new(window.schedule.to_string()));
            }
            held = true;
            at = end;
            continue;
        }
        let allowed = allow.is_empty()
            || allow
                .iter()
                .any(|window| occurrence_end(window, zone, at).is_some());
        if !allowed {
            held = true;
            match allow
                .iter()
                .filter_map(|window| next_fire(&window.schedule, zone, at))
                .min()
            {
                Some(start) => {
                    at = start;
                    continue;
                }
                None => return closed(None, held_by_deny),
            }
        }
        return if held {
            closed(Some(at), held_by_deny)
        } else {
            WindowState::Open
        };
    }
    closed(None, held_by_deny)
}

/// When the occurrence of `window` that is open at `at` ends, when one is: it opened at a fire
/// time in `(at - duration, at]`.
fn occurrence_end(window: &MaintenanceWindow, zone: &TimeZone, at: Timestamp) -> Option<Timestamp> {
    let duration = SignedDuration::try_from(window.duration.0).unwrap_or(SignedDuration::MAX);
    let earliest = at.saturating_sub(duration).unwrap_or(Timestamp::MIN);
    let start = next_fire(&window.schedule, zone, earliest)?;
    (start <= at).then(|| start.saturating_add(duration).unwrap_or(Timestamp::MAX))
}

/// The first time `schedule` fires strictly after `after`, its wall-clock times read in
/// `zone`.
fn next_fire(schedule: &CronSchedule, zone: &TimeZone, after: Timestamp) -> Option<Timestamp> {
    // Cron walks wall-clock times; in chrono's UTC they have no transitions, so each is placed
    // in the zone afterwards. The walk starts at the earlier of the wall-clock readings of
    // `after` now and before a recent jump forward: a skipped time just before the jump
    // fires after it.
    let before_a_jump = after.checked_sub(LONGEST_SHIFT).unwrap_or(after);
    let start = zone
        .to_datetime(after)
        .min(zone.to_offset(before_a_jump).to_datetime(after));
    let mut best: Option<Timestamp> = None;
    let mut scan_until: Option<civil::DateTime> = None;
    for fire in schedule.schedule().after(&to_chrono(start)?).take(MAX_SCAN) {
        let wall = from_chrono(fire)?;
        if scan_until.is_some_and(|until| wall > until) {
            break;
        }
        let ambiguous = zone.to_ambiguous_timestamp(wall);
        let skipped = matches!(ambiguous.offset(), AmbiguousOffset::Gap { .. });
        // Compatible: a skipped time moves forward by the jump, a repeated one is the first.
        let Ok(at) = ambiguous.compatible() else {
            continue;
        };
        if at <= after {
            continue;
        }
        best = Some(best.map_or(at, |best| best.min(at)));
        if !skipped {
            // Later wall-clock times fall later, except skipped ones already counted.
            break;
        }
        // A skipped time lands after the jump, later than wall-clock times just after it:
        // look on for one of those.
        scan_until.get_or_insert(wall.checked_add(LONGEST_SHIFT).unwrap_or(wall));
    }
    best
}

/// A wall-clock time as chrono's UTC, which cron walks.
fn to_chrono(wall: civil::DateTime) -> Option<DateTime<Utc>> {
    let date = NaiveDate::from_ymd_opt(
        i32::from(wall.year()),
        u32::try_from(wall.month()).ok()?,
        u32::try_from(wall.day()).ok()?,
    )?;
    let time = date.and_hms_nano_opt(
        u32::try_from(wall.hour()).ok()?,
        u32::try_from(wall.minute()).ok()?,
        u32::try_from(wall.second()).ok()?,
        u32::try_from(wall.subsec_nanosecond()).ok()?,
    )?;
    Some(time.and_utc())
}

fn from_chrono(at: DateTime<Utc>) -> Option<civil::DateTime> {
    civil::DateTime::new(
        i16::try_from(at.year()).ok()?,
        i8::try_from(at.month()).ok()?,
        i8::try_from(at.day()).ok()?,
        i8::try_from(at.hour()).ok()?,
        i8::try_from(at.minute()).ok()?,
        i8::try_from(at.second()).ok()?,
        0,
    )
    .ok()
}

#[cfg(test)]
mod tests;
