//! Where "now" comes from, as an interface: the daemon reads time only through a [`Clock`] so
//! the lab can move time forward (certificate renewal, maintenance windows) and tests never
//! sleep. The machine's clock lives in the daemon and the lab's clock in the lab; this crate
//! only names the contract.
//!
//! The planner never reads a clock: it receives `now` as an argument.

use std::sync::Arc;

use jiff::Timestamp;

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
