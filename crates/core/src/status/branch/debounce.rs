//! When to write the status branch (pure: the caller passes `now`): a burst of changes within
//! the window becomes one commit, a floor between attempts caps the rate, and a cluster moving
//! into Blocked or Ready is written at once (unless the last attempt failed: then the floor
//! paces the retries, so a remote refusing pushes is not hammered).

use std::time::Duration;

use jiff::Timestamp;

/// What the writer should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing differs from the branch.
    Idle,
    /// Write when this time comes (or when asked again after it).
    WaitUntil(Timestamp),
    /// Write now.
    Write,
}

/// The debounce state.
#[derive(Debug, Clone)]
pub struct Debounce {
    window: Duration,
    floor: Duration,
    pending_since: Option<Timestamp>,
    last_attempt: Option<Timestamp>,
    last_failed: bool,
}

impl Debounce {
    /// Changes wait `window` from the first of a burst; attempts are at least `floor` apart.
    pub fn new(window: Duration, floor: Duration) -> Self {
        Debounce {
            window,
            floor,
            pending_since: None,
            last_attempt: None,
            last_failed: false,
        }
    }

    /// Decides at `now`, the rendered files differing from the branch (`pending`) or not, and
    /// a cluster moving into Blocked or Ready (`urgent`).
    pub fn decide(&mut self, now: Timestamp, pending: bool, urgent: bool) -> Decision {
        if !pending {
            self.pending_since = None;
            return Decision::Idle;
        }
        let since = *self.pending_since.get_or_insert(now);
        if urgent && !self.last_failed {
            return Decision::Write;
        }
        let after_window = since.checked_add(self.window).unwrap_or(Timestamp::MAX);
        let after_floor = self.last_attempt.map_or(Timestamp::MIN, |at| {
            at.checked_add(self.floor).unwrap_or(Timestamp::MAX)
        });
        let due = after_window.max(after_floor);
        if now >= due {
            Decision::Write
        } else {
            Decision::WaitUntil(due)
        }
    }

    /// After a failed attempt, when the next may be made, if that is later than `now`.
    pub fn retry_at(&self, now: Timestamp) -> Option<Timestamp> {
        let at = self
            .last_attempt
            .filter(|_| self.last_failed)?
            .checked_add(self.floor)
            .unwrap_or(Timestamp::MAX);
        (now < at).then_some(at)
    }

    /// Records an attempt at `now` and whether it landed (or there was nothing to write).
    pub fn attempted(&mut self, now: Timestamp, landed: bool) {
        self.last_attempt = Some(now);
        self.last_failed = !landed;
        if landed {
            self.pending_since = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("time")
    }

    fn debounce() -> Debounce {
        Debounce::new(Duration::from_secs(10), Duration::from_secs(60))
    }

    #[test]
    fn a_burst_of_changes_within_the_window_is_written_once_when_it_ends() {
        let mut d = debounce();
        assert_eq!(d.decide(at(0), true, false), Decision::WaitUntil(at(10)));
        assert_eq!(d.decide(at(4), true, false), Decision::WaitUntil(at(10)));
        assert_eq!(d.decide(at(9), true, false), Decision::WaitUntil(at(10)));
        assert_eq!(d.decide(at(10), true, false), Decision::Write);
        d.attempted(at(10), true);
        assert_eq!(d.decide(at(11), false, false), Decision::Idle);
    }

    #[test]
    fn the_floor_spaces_commits_but_ready_and_blocked_go_at_once() {
        let mut d = debounce();
        d.attempted(at(0), true);
        assert_eq!(d.decide(at(5), true, false), Decision::WaitUntil(at(60)));
        assert_eq!(d.decide(at(30), true, true), Decision::Write);
        d.attempted(at(30), true);
        assert_eq!(d.decide(at(31), true, false), Decision::WaitUntil(at(90)));
    }

    #[test]
    fn after_a_failed_push_even_urgent_changes_wait_for_the_floor() {
        let mut d = debounce();
        assert_eq!(d.decide(at(0), true, true), Decision::Write);
        d.attempted(at(0), false);
        assert_eq!(d.decide(at(1), true, true), Decision::WaitUntil(at(60)));
        assert_eq!(d.decide(at(60), true, true), Decision::Write);
        d.attempted(at(60), true);
        assert_eq!(d.decide(at(61), true, true), Decision::Write);
    }

    #[test]
    fn a_failed_attempt_is_retried_after_the_floor_only() {
        let mut d = debounce();
        assert_eq!(d.retry_at(at(0)), None);
        d.attempted(at(0), false);
        assert_eq!(d.retry_at(at(1)), Some(at(60)));
        assert_eq!(d.retry_at(at(60)), None);
        d.attempted(at(60), true);
        assert_eq!(d.retry_at(at(61)), None);
    }

    #[test]
    fn a_change_undone_before_it_is_written_makes_no_commit() {
        let mut d = debounce();
        assert_eq!(d.decide(at(0), true, false), Decision::WaitUntil(at(10)));
        assert_eq!(d.decide(at(5), false, false), Decision::Idle);
        assert_eq!(d.decide(at(12), true, false), Decision::WaitUntil(at(22)));
    }
}
