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

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
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

/// The most fire times one search looks at, over every schedule and hop: enough for 32 allow
/// and 32 deny windows through [`MAX_HOPS`] hops, and a bound on what a search costs whatever
/// the schedules are (past it, as past [`MAX_HOPS`], the schedules leave no time).
const FIRES_PER_SEARCH: usize = 200_000;

/// The work one window search may still do: the schedule fire times it looks at (shared by
/// every schedule and hop of the search, see [`FIRES_PER_SEARCH`]) and the caller's stop flag
/// (a preview's deadline), read at every fire time. Once over, it stays over, and nothing
/// found after is trusted: the search says the windows are closed.
#[derive(Debug)]
pub(crate) struct Search<'a> {
    fires_left: Cell<usize>,
    stop: Option<&'a AtomicBool>,
}

impl<'a> Search<'a> {
    /// A search with the whole budget, stopped as soon as `stop` is raised.
    pub(crate) fn new(stop: Option<&'a AtomicBool>) -> Self {
        Search {
            fires_left: Cell::new(FIRES_PER_SEARCH),
            stop,
        }
    }

    /// Counts one more fire time looked at; `false` when the search must end.
    fn spend(&self) -> bool {
        if self.is_over() {
            return false;
        }
        self.fires_left.set(self.fires_left.get() - 1);
        true
    }

    /// Whether the budget is spent or the caller stopped the search.
    pub(crate) fn is_over(&self) -> bool {
        self.fires_left.get() == 0 || self.stop.is_some_and(|stop| stop.load(Ordering::Relaxed))
    }
}

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
    state_for(spec, now, None, &Search::new(None))
}

/// The state of `spec`'s maintenance windows at `now`, for a step that `needs` this long
/// (`None`: not measured), within `search`: once it is over, the windows are closed for good
/// (the answer fails closed).
pub(crate) fn state_for(
    spec: &ClusterSpec,
    now: Timestamp,
    needs: Option<Need>,
    search: &Search<'_>,
) -> WindowState {
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
        search,
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
        let said = windows.at(at, needs);
        if search.is_over() {
            // What a search cut short found is not trusted: a deny window it did not finish
            // looking at may be open.
            break;
        }
        let next = match said {
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
            Some(next) if !search.is_over() => at = next,
            _ => break,
        }
    }
    closed(None, held_by_deny, fit)
}

/// One cluster's windows, read in its zone, within one search.
struct Windows<'a> {
    spec: &'a ClusterSpec,
    /// The allow windows, in both spellings.
    allow: Vec<&'a MaintenanceWindow>,
    zone: &'a TimeZone,
    search: &'a Search<'a>,
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
            .filter_map(|window| Some((window, self.occurrence(window, at)?.1)))
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
                .filter_map(|window| Some(self.occurrence(window, at)?.1))
                .max()
        };
        let Some(until) = open_until else {
            return At::Closed;
        };
        match needs.and_then(|need| Some((need, self.shortfall(at, until, need.duration)?))) {
            Some((need, short)) => At::Short(need, short),
            None => At::Starts,
        }
    }

    /// The first time an allow window opens after `at`.
    fn next_allow(&self, at: Timestamp) -> Option<Timestamp> {
        self.allow
            .iter()
            .filter_map(|window| next_fire(&window.schedule, self.zone, at, self.search))
            .min()
    }

    /// Why a step of `duration` starting at `at`, inside windows open until `until`, does
    /// not fit: the window ends first, or a deny window opens first; `None` when it fits.
    fn shortfall(&self, at: Timestamp, until: Timestamp, duration: Duration) -> Option<Shortfall> {
        let duration = SignedDuration::try_from(duration).unwrap_or(SignedDuration::MAX);
        let ends = at.saturating_add(duration).unwrap_or(Timestamp::MAX);
        let deny_ahead = self
            .spec
            .maintenance
            .deny
            .iter()
            .filter_map(|window| {
                Some((
                    window,
                    next_fire(&window.schedule, self.zone, at, self.search)?,
                ))
            })
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

    /// The occurrence of `window` open at `at`, when one is.
    fn occurrence(
        &self,
        window: &MaintenanceWindow,
        at: Timestamp,
    ) -> Option<(Timestamp, Timestamp)> {
        occurrence(window, self.zone, at, self.search)
    }
}

/// The allow window open at `at` that closes last, as when it opened and when it closes;
/// `None` when none is open (or `spec` has none, or `search` is over).
pub(crate) fn open_allow(
    spec: &ClusterSpec,
    at: Timestamp,
    search: &Search<'_>,
) -> Option<(Timestamp, Timestamp)> {
    let zone = spec.maintenance.time_zone.zone();
    let open = spec
        .rollout
        .maintenance_window
        .iter()
        .chain(&spec.maintenance.allow)
        .filter_map(|window| occurrence(window, zone, at, search))
        .max_by_key(|(_, end)| *end);
    open.filter(|_| !search.is_over())
}

/// The occurrence of `window` that is open at `at`, when one is, as when it opened (a fire
/// time in `(at - duration, at]`) and when it ends.
fn occurrence(
    window: &MaintenanceWindow,
    zone: &TimeZone,
    at: Timestamp,
    search: &Search<'_>,
) -> Option<(Timestamp, Timestamp)> {
    let duration = SignedDuration::try_from(window.duration.0).unwrap_or(SignedDuration::MAX);
    let earliest = at.saturating_sub(duration).unwrap_or(Timestamp::MIN);
    let start = next_fire(&window.schedule, zone, earliest, search)?;
    (start <= at).then(|| {
        (
            start,
            start.saturating_add(duration).unwrap_or(Timestamp::MAX),
        )
    })
}

/// The first time `schedule` fires strictly after `after`, its wall-clock times read in
/// `zone`: the earlier of the first fire from the clocks' reading now, and of a time the
/// clocks skipped in a jump just before `after` (it fires when they resume, as `cron` does).
///
/// Each costs a few fire times whatever the schedule: a skipped stretch of the clocks is
/// stepped over, never walked.
fn next_fire(
    schedule: &CronSchedule,
    zone: &TimeZone,
    after: Timestamp,
    search: &Search<'_>,
) -> Option<Timestamp> {
    let ahead = fire_from_reading(schedule, zone, after, search);
    let skipped = fire_in_recent_jump(schedule, zone, after, search);
    match (ahead, skipped) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (one, other) => one.or(other),
    }
}

/// The first fire after `after` among the wall-clock times from the clocks' reading at
/// `after` on: a repeated time fires the first time only, a skipped one when the clocks
/// resume (unless a time just after the jump comes first).
fn fire_from_reading(
    schedule: &CronSchedule,
    zone: &TimeZone,
    after: Timestamp,
    search: &Search<'_>,
) -> Option<Timestamp> {
    let mut fires = schedule
        .schedule()
        .after(&to_chrono(zone.to_datetime(after))?);
    loop {
        if !search.spend() {
            return None;
        }
        let wall = from_chrono(fires.next()?)?;
        let ambiguous = zone.to_ambiguous_timestamp(wall);
        // Compatible: a skipped time moves forward by the jump, a repeated one is the first.
        let at = ambiguous.compatible().ok()?;
        match ambiguous.offset() {
            AmbiguousOffset::Gap { after: resumed, .. } => {
                // Later skipped times land later still; a time just after the jump (when the
                // clocks resume, read at the jump's instant) may land before this one.
                let just_after = at.checked_add(SignedDuration::from_nanos(1)).ok()?;
                let jump = zone.preceding(just_after).next()?;
                let resumes = resumed.to_datetime(jump.timestamp());
                let after_jump = first_fire_from(schedule, zone, resumes, search);
                return Some(after_jump.map_or(at, |other| other.min(at)));
            }
            // A time repeated after it first fired (the clocks went back past it): look on.
            _ if at <= after => {}
            _ => return Some(at),
        }
    }
}

/// The first fire at `from` or later, read in `zone` as it is not skipped.
fn first_fire_from(
    schedule: &CronSchedule,
    zone: &TimeZone,
    from: civil::DateTime,
    search: &Search<'_>,
) -> Option<Timestamp> {
    let before = from.checked_sub(SignedDuration::from_secs(1)).ok()?;
    if !search.spend() {
        return None;
    }
    let fire = schedule.schedule().after(&to_chrono(before)?).next()?;
    zone.to_ambiguous_timestamp(from_chrono(fire)?)
        .compatible()
        .ok()
}

/// A time the clocks skipped in a jump forward at most one jump before `after` that fires
/// when they resume, after `after`: the first fire among the skipped wall-clock times that
/// land after `after` (each lands one jump later than it reads).
fn fire_in_recent_jump(
    schedule: &CronSchedule,
    zone: &TimeZone,
    after: Timestamp,
    search: &Search<'_>,
) -> Option<Timestamp> {
    let just_after = after.checked_add(SignedDuration::from_nanos(1)).ok()?;
    let jump = zone.preceding(just_after).next()?;
    let before = zone.to_offset(
        jump.timestamp()
            .checked_sub(SignedDuration::from_nanos(1))
            .ok()?,
    );
    let length = jump.offset().duration_since(before);
    let lands_until = jump.timestamp().checked_add(length).ok()?;
    if !length.is_positive() || after >= lands_until {
        return None;
    }
    // Skipped times read from the jump's start; one lands after `after` when it reads later
    // than `after` on the clocks before the jump.
    let skipped_from = before.to_datetime(jump.timestamp());
    let lands_after = before.to_datetime(after);
    let from = skipped_from.max(lands_after.checked_add(SignedDuration::from_secs(1)).ok()?);
    let before_from = from.checked_sub(SignedDuration::from_secs(1)).ok()?;
    if !search.spend() {
        return None;
    }
    let wall = from_chrono(schedule.schedule().after(&to_chrono(before_from)?).next()?)?;
    let skipped_until = jump.offset().to_datetime(jump.timestamp());
    if wall >= skipped_until {
        return None;
    }
    let at = zone.to_ambiguous_timestamp(wall).compatible().ok()?;
    (at > after).then_some(at)
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
