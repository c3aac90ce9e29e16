//! When to try a failing cluster again: capped exponential backoff with jitter, per cluster,
//! reset on success. Pure (the jitter comes in as a number), so it is tested exactly.

use std::time::Duration;

/// Backoff settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay after the first failure.
    pub base: Duration,
    /// Longest delay, whatever the number of failures.
    pub cap: Duration,
}

impl Default for Backoff {
    /// 2s doubling to 5 minutes: quick to retry a hiccup, gentle on a host that is down.
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(2),
            cap: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The delay before retry number `failures` (1 after the first failure). `jitter` in
    /// `[0, 1)` spreads clusters that failed together ("equal jitter": half the delay is fixed,
    /// half is random), so they do not retry in lockstep.
    pub fn delay(&self, failures: u32, jitter: f64) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let exponent = (failures - 1).min(30);
        let full = self.base.saturating_mul(1u32 << exponent).min(self.cap);
        let half = full / 2;
        half + half.mul_f64(jitter.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_then_stop_at_the_cap() {
        let backoff = Backoff::default();
        let full: Vec<u64> = (1..=10).map(|n| backoff.delay(n, 1.0).as_secs()).collect();
        assert_eq!(full, vec![2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(backoff.delay(0, 0.5), Duration::ZERO);
        assert_eq!(backoff.delay(u32::MAX, 1.0), Duration::from_secs(300));
    }

    #[test]
    fn jitter_moves_the_delay_within_its_upper_half() {
        let backoff = Backoff::default();
        assert_eq!(backoff.delay(3, 0.0), Duration::from_secs(4));
        assert_eq!(backoff.delay(3, 0.999_999).as_secs(), 7);
        assert_eq!(
            backoff.delay(3, 7.0),
            Duration::from_secs(8),
            "jitter is clamped"
        );
    }
}
