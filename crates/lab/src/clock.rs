//! The lab's clock: the machine's clock plus an offset that tests advance, shared by every part
//! of a lab (and by a daemon embedding it, through capstan-core's [`Clock`] contract).

use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use capstan_core::clock::Clock;
use jiff::{SignedDuration, Timestamp};

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
