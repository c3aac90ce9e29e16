//! Maintenance windows (rule 11): whether a disruptive step may start at `now` and, when not,
//! which window holds it and when it may start. A step may start inside an allow window (or at
//! any time when there is none) and never inside a deny window.
//!
//! A step whose duration the daemon measured ([`Need`]: the 90th percentile of its action's
//! recent steps) must also fit: it starts only if what is left of the open allow window is at
//! least that long, and no deny window opens before it would end; otherwise it waits for the
//! first time it fits (the next window, or the end of the deny window). A step longer than
//! every allow window never fits and is held, saying so: lengthen a window. A step never
//! measured is held by none of this, only by the windows being closed. Two allow windows that
//! overlap are not joined: the step must fit in one of them.
//!
//! Schedules fire at wall-clock times of the cluster's `maintenance.timeZone`, so a window
//! follows the clocks across daylight saving time: a time the clocks skip fires when they
//! resume (as `cron` does), a time they repeat fires once, the first time. Pure: `now` comes in
//! as an argument and zones come from the database bundled into the binary.

use std::time::Duration;

use chrono::{DateTime, Datelike, NaiveDate, Timelike, Utc};
use jiff::civil;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp};
use smol_str::SmolStr;

use super::types::{Resource, Shortfall, WindowFit};
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

/// What a disruptive step needs of the windows: its measured duration, a high percentile of
/// its action's recent steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Need {
    /// How long the step is planned to take.
    pub duration: Duration,
    /// How many steps it was measured over.
    pub samples: u32,
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
    /// A measured step the windows would let start now, but that would not fit.
    pub fit: Option<(Need, Shortfall)>,
}

impl Hold {
    /// The resource a held step waits on; `step` names it (`drain of prod-w-2`) when the
    /// hold is about its duration.
    pub(crate) fn resource(&self, step: &str) -> Resource {
        Resource::MaintenanceWindow {
            opens: self.opens,
            deny: self.deny.as_ref().map(ToString::to_string),
            time_zone: self.time_zone.as_ref().map(ToString::to_string),
            fit: self.fit.as_ref().map(|(need, short)| WindowFit {
                step: step.to_owned(),
                needs_seconds: need.duration.as_secs().max(1),
                samples: need.samples,
                short: short.clone(),
            }),
        }
    }
}

/// The state of `spec`'s maintenance windows at `now`, for a step that needs nothing of them.
#[cfg(test)]
pub(crate) fn state(spec: &ClusterSpec, now: Timestamp) -> WindowState {
    state_for(spec, now, None)
}

/// The state of `spec`'s maintenance windows at `now`, for a step that `needs` this long
/// (`None`: not measured).
pub(crate) fn state_for(spec: &ClusterSpec, now: Timestamp, needs: Option<Need>) -> WindowState {
    let maintenance = &spec.maintenance;
    let windows = Windows {
        spec,
        allow: spec
            .rollout
            .maintenance_window
            .iter()
            .chain(&maintenance.allow)
            .collect(),
        zone: maintenance.time_zone.zone(),
    };
    if windows.allow.is_empty() && maintenance.deny.is_empty() {
        return WindowState::Open;
    }
    let closed = |opens: Option<Timestamp>, deny: Option<SmolStr>, fit| {
        WindowState::Closed(Hold {
            opens,
            deny,
            time_zone: (!maintenance.time_zone.is_utc())
                .then(|| SmolStr::new(maintenance.time_zone.as_str())),
            fit,
        })
    };
    if let Some(too_long) = windows.too_long(needs) {
        return closed(None, None, Some(too_long));
    }
    let mut at = now;
    let mut held_by_deny = None;
    let mut fit = None;
    for _ in 0..MAX_HOPS {
        let next = match windows.at(at, needs) {
            At::Starts if at == now => return WindowState::Open,
            At::Starts => return closed(Some(at), held_by_deny, fit),
            At::Denied { until, schedule } => {
                if at == now {
                    held_by_deny = Some(schedule);
                }
                Some(until)
            }
            At::Short(need, short) => {
                if at == now {
                    fit = Some((need, short.clone()));
                }
                match short {
                    // Its occurrence holds from there: the next hop skips to its end.
                    Shortfall::DenyAhead { starts, .. } => Some(starts),
                    _ => windows.next_allow(at),
                }
            }
            At::Closed => windows.next_allow(at),
        };
        match next {
            Some(next) => at = next,
            None => return closed(None, held_by_deny, fit),
        }
    }
    closed(None, held_by_deny, fit)
}

/// One cluster's windows, read in its zone.
struct Windows<'a> {
    spec: &'a ClusterSpec,
    /// The allow windows, in both spellings.
    allow: Vec<&'a MaintenanceWindow>,
    zone: &'a TimeZone,
}

/// What the windows say of a step at one time.
enum At {
    /// It may start.
    Starts,
    /// A deny window is open.
    Denied { until: Timestamp, schedule: SmolStr },
    /// The windows are open, but the step would not fit.
    Short(Need, Shortfall),
    /// No allow window is open.
    Closed,
}

impl Windows<'_> {
    /// A step that `needs` more than the longest allow window: it never fits.
    fn too_long(&self, needs: Option<Need>) -> Option<(Need, Shortfall)> {
        let need = needs?;
        let longest = self.allow.iter().map(|window| window.duration.0).max()?;
        (longest < need.duration).then_some((
            need,
            Shortfall::NoWindowLongEnough {
                longest_seconds: longest.as_secs(),
            },
        ))
    }

    /// What the windows say at `at` of a step that `needs` this long.
    fn at(&self, at: Timestamp, needs: Option<Need>) -> At {
        let denied = self
            .spec
            .maintenance
            .deny
            .iter()
            .filter_map(|window| Some((window, occurrence_end(window, self.zone, at)?)))
            .max_by_key(|(_, end)| *end);
        if let Some((window, until)) = denied {
            return At::Denied {
                until,
                schedule: SmolStr::new(window.schedule.to_string()),
            };
        }
        let open_until = if self.allow.is_empty() {
            Some(Timestamp::MAX)
        } else {
            self.allow
                .iter()
                .filter_map(|window| occurrence_end(window, self.zone, at))
                .max()
        };
        let Some(until) = open_until else {
            return At::Closed;
        };
        match needs.and_then(|need| {
            Some((
                need,
                shortfall(self.spec, self.zone, at, until, need.duration)?,
            ))
        }) {
            Some((need, short)) => At::Short(need, short),
            None => At::Starts,
        }
    }

    /// The first time an allow window opens after `at`.
    fn next_allow(&self, at: Timestamp) -> Option<Timestamp> {
        self.allow
            .iter()
            .filter_map(|window| next_fire(&window.schedule, self.zone, at))
            .min()
    }
}

/// Why a step of `duration` starting at `at`, inside windows open until `until`, does not
/// fit: the window ends first, or a deny window opens first; `None` when it fits.
fn shortfall(
    spec: &ClusterSpec,
    zone: &TimeZone,
    at: Timestamp,
    until: Timestamp,
    duration: Duration,
) -> Option<Shortfall> {
    let duration = SignedDuration::try_from(duration).unwrap_or(SignedDuration::MAX);
    let ends = at.saturating_add(duration).unwrap_or(Timestamp::MAX);
    let deny_ahead = spec
        .maintenance
        .deny
        .iter()
        .filter_map(|window| Some((window, next_fire(&window.schedule, zone, at)?)))
        .filter(|(_, starts)| *starts < ends)
        .min_by_key(|(_, starts)| *starts);
    if let Some((window, starts)) = deny_ahead {
        return Some(Shortfall::DenyAhead {
            schedule: window.schedule.to_string(),
            starts,
        });
    }
    (until < ends).then(|| Shortfall::WindowLeft {
        left_seconds: until.duration_since(at).as_secs().unsigned_abs(),
    })
}

/// The allow window open at `at` that closes last, as when it opened and when it closes;
/// `None` when none is open (or `spec` has none).
pub(crate) fn open_allow(spec: &ClusterSpec, at: Timestamp) -> Option<(Timestamp, Timestamp)> {
    let zone = spec.maintenance.time_zone.zone();
    spec.rollout
        .maintenance_window
        .iter()
        .chain(&spec.maintenance.allow)
        .filter_map(|window| occurrence(window, zone, at))
        .max_by_key(|(_, end)| *end)
}

/// When the occurrence of `window` that is open at `at` ends, when one is.
fn occurrence_end(window: &MaintenanceWindow, zone: &TimeZone, at: Timestamp) -> Option<Timestamp> {
    occurrence(window, zone, at).map(|(_, end)| end)
}

/// The occurrence of `window` that is open at `at`, when one is, as when it opened (a fire
/// time in `(at - duration, at]`) and when it ends.
fn occurrence(
    window: &MaintenanceWindow,
    zone: &TimeZone,
    at: Timestamp,
) -> Option<(Timestamp, Timestamp)> {
    let duration = SignedDuration::try_from(window.duration.0).unwrap_or(SignedDuration::MAX);
    let earliest = at.saturating_sub(duration).unwrap_or(Timestamp::MIN);
    let start = next_fire(&window.schedule, zone, earliest)?;
    (start <= at).then(|| {
        (
            start,
            start.saturating_add(duration).unwrap_or(Timestamp::MAX),
        )
    })
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
