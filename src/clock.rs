//! Where "now" comes from. The daemon reads time only through a [`Clock`], so the lab can move
//! time forward (certificate renewal, maintenance windows) and tests never sleep.
//!
//! The planner never reads a clock: it receives `now` as an argument.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;
}

impl<T: Clock + ?Sized> Clock for Arc<T> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }
}

/// The machine's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// The lab's clock: the machine's clock plus an offset that tests advance. Clones share the
/// offset, so every part of a lab (and a daemon embedding it) sees the same time.
#[derive(Debug, Clone, Default)]
pub struct LabClock {
    offset: Arc<Mutex<SignedDuration>>,
}

impl LabClock {
    /// A clock that starts at the machine's time.
    pub fn new() -> Self {
        LabClock::default()
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX);
        let mut offset = self
            .offset
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *offset = offset.saturating_add(by);
    }

    /// How far the clock is ahead of the machine's.
    pub fn offset(&self) -> SignedDuration {
        *self
            .offset
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Clock for LabClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
            .saturating_add(self.offset())
            .unwrap_or(Timestamp::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_a_lab_clock_moves_every_clone() {
        let clock = LabClock::new();
        let shared = clock.clone();
        let before = shared.now();
        clock.advance(Duration::from_secs(20 * 86_400));
        let moved = shared.now().duration_since(before);
        assert!(moved >= SignedDuration::from_hours(480), "{moved:?}");
    }
}
