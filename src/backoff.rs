//! When to try again: capped exponential backoff with "equal jitter" (half the delay fixed,
//! half random), used by the Proxmox client's retries and the daemon's per-cluster retries.
//! The delay is a pure function of its inputs (the jitter comes in as a number), so it is
//! tested exactly; [`random_unit`] supplies real jitter.

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
        exponential_delay(self.base, self.cap, failures - 1, jitter)
    }
}

/// `base × 2^exponent`, capped at `cap`, of which the upper half is scaled by `jitter` in
/// `[0, 1)`.
pub fn exponential_delay(base: Duration, cap: Duration, exponent: u32, jitter: f64) -> Duration {
    let full = base
        .saturating_mul(2u32.saturating_pow(exponent.min(31)))
        .min(cap);
    let half = full / 2;
    half + half.mul_f64(jitter.clamp(0.0, 1.0))
}

/// A uniform number in `[0, 1)` from the OS random source (0.5 if it is unavailable: jitter
/// is a nicety, never a reason to fail).
pub fn random_unit() -> f64 {
    getrandom::u32().map_or(0.5, |value| f64::from(value) / (f64::from(u32::MAX) + 1.0))
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
    fn random_units_stay_in_range() {
        for _ in 0..100 {
            assert!((0.0..1.0).contains(&random_unit()));
        }
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
