//! The machine's clock, behind capstan-core's [`Clock`] contract (which the lab's clock
//! implements too, so a daemon embedding a lab sees the lab's time).

use jiff::Timestamp;

pub use capstan_core::clock::Clock;

/// The machine's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}
