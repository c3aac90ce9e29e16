//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several replicas exactly
//! one starts steps.
//!
//! The loop is client-go's leader election, written here rather than taken from a crate:
//! `kube-leader-election` renews but has no fencing deadline nor release on shutdown, and
//! `kube-lease-manager` brings kube's `runtime` feature back and hides the moment a renewal
//! deadline passes; both would have to be wrapped to give the guarantees below anyway.
//!
//! # Guarantees
//! - Acquiring and renewing replace the Lease only at the `resourceVersion` read, so two
//!   replicas never both believe they acquired it.
//! - A standby takes a Lease over only when its holder has not renewed it for its whole
//!   `leaseDurationSeconds`, measured on the standby's own monotonic clock from the moment it
//!   last saw the Lease change (never comparing clocks of two machines), or at once when the
//!   holder released it.
//! - Fencing in time: the leader counts as leading only until `duration − retry` after it
//!   *sent* its last successful renewal ([`Leadership::is_leading`] reads the monotonic clock,
//!   so it turns false at that instant even while a request hangs). A standby cannot take over
//!   before `duration` after it saw that renewal, which is later; hence the two never both
//!   start steps.
//! - On shutdown a leader releases the Lease (holder cleared), so a standby takes over at its
//!   next poll instead of after the Lease expires.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tokio::sync::watch;

use crate::fence::Licence;
use crate::providers::kube::{LeaseClient, LeaseError, LeaseRecord, Written};
use crate::status::LeadershipStatus;

/// The timings of the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimings {
    /// `leaseDurationSeconds`: how long a Lease not renewed stays its holder's.
    pub duration: Duration,
    /// How often the leader renews.
    pub renew: Duration,
    /// How often a standby looks at the Lease, and a leader retries a failed renewal.
    pub retry: Duration,
}

impl LeaseTimings {
    /// `leaseDurationSeconds` as written: the Lease holds whole seconds only.
    pub fn duration_seconds(&self) -> i32 {
        i32::try_from(self.duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    /// How long after sending a successful renewal the leader may still start steps: one
    /// retry before the duration *written* in the Lease (which a standby goes by), never the
    /// duration asked for, so a fraction of a second cannot outlive the Lease.
    pub fn fence(&self) -> Duration {
        let written = Duration::from_secs(self.duration_seconds().unsigned_abs().into());
        written.saturating_sub(self.retry)
    }
}

/// Reads `--lease-duration`: whole seconds, since `leaseDurationSeconds` holds nothing finer
/// (a standby goes by what is written, so `1500ms` would let it take over at 1 s).
///
/// # Errors
/// A message for the usage error: not a duration, a fraction of a second, or out of range.
pub fn parse_lease_duration(text: &str) -> Result<crate::spec::HumanDuration, String> {
    let duration: crate::spec::HumanDuration = text.parse()?;
    let whole = duration.0.subsec_nanos() == 0 && duration.0.as_secs() >= 1;
    if !whole || i32::try_from(duration.0.as_secs()).is_err() {
        return Err(format!(
            "`{text}` is not a whole number of seconds (at least 1s): a Lease's \
             leaseDurationSeconds holds whole seconds, so write e.g. `2s` or `15s`"
        ));
    }
    Ok(duration)
}

#[derive(Debug, Default)]
struct State {
    /// Until when this replica may start steps.
    leading_until: Option<Instant>,
    /// The holder as last read.
    holder: Option<String>,
}

/// Whether this replica leads, shared by the election loop and the daemon.
#[derive(Debug)]
pub struct Leadership {
    /// No election: always leading.
    unconditional: bool,
    identity: String,
    lease: String,
    state: Mutex<State>,
    changed: watch::Sender<bool>,
}

impl Leadership {
    /// A replica named `identity`, standby until the loop acquires `lease`.
    pub fn new(identity: String, lease: String) -> Self {
        Leadership {
            unconditional: false,
            identity,
            lease,
            state: Mutex::default(),
            changed: watch::Sender::new(false),
        }
    }

    /// A replica that always leads (no election: a single replica).
    pub fn always(identity: String) -> Self {
        Leadership {
            unconditional: true,
            ..Leadership::new(identity, String::new())
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether this replica may start a step now.
    pub fn is_leading(&self) -> bool {
        self.unconditional
            || self
                .lock()
                .leading_until
                .is_some_and(|until| Instant::now() < until)
    }

    /// Completes when this replica becomes leader (or stops being one).
    pub async fn changed(&self) {
        let mut receiver = self.changed.subscribe();
        // The sender lives as long as `self`, so this never ends in an error.
        let _ = receiver.changed().await;
    }

    /// Whether a Lease is elected on (false for [`Leadership::always`]).
    pub fn is_elected(&self) -> bool {
        !self.unconditional
    }

    /// The role, for `/status`.
    pub fn status(&self) -> LeadershipStatus {
        let leading = self.is_leading();
        let state = self.lock();
        LeadershipStatus {
            role: if leading { "leader" } else { "standby" }.to_owned(),
            identity: self.identity.clone(),
            leader: state.holder.clone(),
            lease: self.lease.clone(),
        }
    }

    pub(crate) fn lead_until(&self, until: Instant) {
        let was = self.is_leading();
        let mut state = self.lock();
        state.leading_until = Some(until);
        state.holder = Some(self.identity.clone());
        drop(state);
        if !was {
            tracing::info!(identity = %self.identity, lease = %self.lease, "leading");
            self.changed.send_replace(true);
        }
    }

    pub(crate) fn follow(&self, holder: Option<String>) {
        let was = self.is_leading();
        let mut state = self.lock();
        state.leading_until = None;
        if state.holder != holder {
            tracing::info!(leader = holder.as_deref().unwrap_or("none"), lease = %self.lease, "standby");
        }
        state.holder = holder;
        drop(state);
        if was {
            self.changed.send_replace(false);
        }
    }
}

impl Licence for Leadership {
    fn is_leading(&self) -> bool {
        Leadership::is_leading(self)
    }

    fn leading_until(&self) -> Option<Instant> {
        if self.unconditional {
            return None;
        }
        self.lock().leading_until
    }

    fn subscribe(&self) -> watch::Receiver<bool> {
        self.changed.subscribe()
    }
}

/// What to do with the Lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Write it with us as holder (acquire or renew).
    Take,
    /// Someone else holds it: wait.
    Wait,
}

/// Whether to take `record` (`None`: no Lease yet): ours, released, or not seen to change for
/// its whole duration (`unchanged_for`, on our clock).
pub fn decide(record: Option<&LeaseRecord>, identity: &str, unchanged_for: Duration) -> Decision {
    let Some(record) = record else {
        return Decision::Take;
    };
    match &record.holder {
        None => Decision::Take,
        Some(holder) if holder == identity => Decision::Take,
        Some(_) => {
            let duration =
                Duration::from_secs(u64::try_from(record.duration_seconds.max(0)).unwrap_or(0));
            if unchanged_for >= duration {
                Decision::Take
            } else {
                Decision::Wait
            }
        }
    }
}

/// The record to write to take `current` now.
fn taken(
    current: Option<&LeaseRecord>,
    identity: &str,
    timings: &LeaseTimings,
    now: Timestamp,
) -> LeaseRecord {
    let duration_seconds = timings.duration_seconds();
    match current {
        Some(record) if record.holder.as_deref() == Some(identity) => LeaseRecord {
            renewed: Some(now),
            duration_seconds,
            ..record.clone()
        },
        Some(record) => LeaseRecord {
            holder: Some(identity.to_owned()),
            duration_seconds,
            acquired: Some(now),
            renewed: Some(now),
            transitions: record.transitions + 1,
            version: record.version.clone(),
        },
        None => LeaseRecord {
            holder: Some(identity.to_owned()),
            duration_seconds,
            acquired: Some(now),
            renewed: Some(now),
            transitions: 0,
            version: String::new(),
        },
    }
}

/// Runs the election until `stop` completes, then releases the Lease if this replica holds it.
///
/// Each attempt (read, then maybe write) is bounded by `timings.renew`, so a request that
/// hangs (a partition) does not stall the loop once the network is back; `stop` interrupts an
/// attempt. After a failed attempt the next comes after `timings.retry`.
pub async fn elect(
    lease: LeaseClient,
    leadership: &Leadership,
    timings: LeaseTimings,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    let identity = leadership.identity.clone();
    // The Lease as last seen, and when (on our clock) it last changed.
    let mut seen: Option<(LeaseRecord, Instant)> = None;
    let mut last_error: Option<String> = None;
    loop {
        let bounded = tokio::time::timeout(
            timings.renew,
            attempt(&lease, leadership, &identity, &timings, &mut seen),
        );
        let outcome = tokio::select! {
            () = &mut stop => break,
            outcome = bounded => outcome,
        };
        let error = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(err)) => Some(crate::errors::error_chain(&err)),
            Err(_) => Some(format!("no answer within {:?}", timings.renew)),
        };
        // Said once per new error (and once when it clears), not at every retry.
        if error != last_error {
            match &error {
                Some(error) => {
                    tracing::warn!(lease = %lease.describe(), error = %error, "lease not read or written");
                }
                None => tracing::info!(lease = %lease.describe(), "lease reachable again"),
            }
        }
        let failed = error.is_some();
        last_error = error;
        let delay = if leadership.is_leading() && !failed {
            timings.renew
        } else {
            timings.retry
        };
        tokio::select! {
            () = &mut stop => break,
            () = tokio::time::sleep(delay) => {}
        }
    }
    let release = release(&lease, leadership, &identity);
    if tokio::time::timeout(timings.renew, release).await.is_err() {
        tracing::warn!(lease = %lease.describe(), "lease not released in time; the standby waits for it to expire");
    }
}

async fn attempt(
    lease: &LeaseClient,
    leadership: &Leadership,
    identity: &str,
    timings: &LeaseTimings,
    seen: &mut Option<(LeaseRecord, Instant)>,
) -> Result<(), LeaseError> {
    let sent = Instant::now();
    let current = lease.get().await?;
    let now = Instant::now();
    let unchanged_since = match (&seen, &current) {
        (Some((before, since)), Some(record)) if before == record => *since,
        _ => now,
    };
    *seen = current.clone().map(|record| (record, unchanged_since));
    match decide(current.as_ref(), identity, now - unchanged_since) {
        Decision::Wait => {
            leadership.follow(current.and_then(|r| r.holder));
            Ok(())
        }
        Decision::Take => {
            let record = taken(current.as_ref(), identity, timings, Timestamp::now());
            match lease.write(&record).await? {
                Written::Stored(stored) => {
                    *seen = Some((stored, Instant::now()));
                    leadership.lead_until(sent + timings.fence());
                }
                Written::Lost => {
                    // Someone wrote first: read again at the next attempt.
                    leadership.follow(None);
                }
            }
            Ok(())
        }
    }
}

/// Clears the holder if it is us, so a standby takes over without waiting for expiry.
async fn release(lease: &LeaseClient, leadership: &Leadership, identity: &str) {
    // Stop leading first; then clear the Lease if it names us (even when the write that made
    // it ours was interrupted before we knew).
    leadership.follow(None);
    let result = async {
        let Some(current) = lease.get().await? else {
            return Ok(false);
        };
        if current.holder.as_deref() != Some(identity) {
            return Ok(false);
        }
        let released = LeaseRecord {
            holder: None,
            duration_seconds: 1,
            renewed: Some(Timestamp::now()),
            ..current
        };
        Ok::<_, LeaseError>(matches!(lease.write(&released).await?, Written::Stored(_)))
    }
    .await;
    match result {
        Ok(true) => tracing::info!(lease = %lease.describe(), "lease released"),
        Ok(false) => {}
        Err(err) => {
            tracing::warn!(lease = %lease.describe(), error = %crate::errors::error_chain(&err), "lease not released; the standby waits for it to expire")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: Option<&str>) -> LeaseRecord {
        LeaseRecord {
            holder: holder.map(str::to_owned),
            duration_seconds: 15,
            version: "7".to_owned(),
            ..LeaseRecord::default()
        }
    }

    #[test]
    fn a_missing_or_released_lease_is_taken_at_once() {
        assert_eq!(decide(None, "a", Duration::ZERO), Decision::Take);
        assert_eq!(
            decide(Some(&held_by(None)), "a", Duration::ZERO),
            Decision::Take
        );
    }

    #[test]
    fn another_holders_lease_is_taken_only_after_its_whole_duration_unchanged() {
        let lease = held_by(Some("b"));
        assert_eq!(
            decide(Some(&lease), "a", Duration::from_secs(14)),
            Decision::Wait
        );
        assert_eq!(
            decide(Some(&lease), "a", Duration::from_secs(15)),
            Decision::Take
        );
    }

    #[test]
    fn our_own_lease_is_renewed_keeping_its_acquire_time() {
        let timings = LeaseTimings {
            duration: Duration::from_secs(15),
            renew: Duration::from_secs(5),
            retry: Duration::from_secs(1),
        };
        let mine = LeaseRecord {
            acquired: Some(Timestamp::UNIX_EPOCH),
            transitions: 3,
            ..held_by(Some("a"))
        };
        let now = Timestamp::from_second(100).expect("time");
        let renewed = taken(Some(&mine), "a", &timings, now);
        assert_eq!(renewed.acquired, Some(Timestamp::UNIX_EPOCH));
        assert_eq!(renewed.renewed, Some(now));
        assert_eq!(renewed.transitions, 3);
        let taken_over = taken(Some(&held_by(Some("b"))), "a", &timings, now);
        assert_eq!(taken_over.holder.as_deref(), Some("a"));
        assert_eq!(taken_over.transitions, 1);
        assert_eq!(taken_over.version, "7", "replaced only at the version read");
    }

    #[test]
    fn the_leader_stops_one_retry_before_a_standby_may_take_over() {
        let timings = LeaseTimings {
            duration: Duration::from_secs(15),
            renew: Duration::from_secs(5),
            retry: Duration::from_secs(1),
        };
        assert_eq!(timings.fence(), Duration::from_secs(14));
    }

    #[test]
    fn the_fence_ends_before_the_duration_written_in_the_lease() {
        let timings = LeaseTimings {
            duration: Duration::from_millis(1500),
            renew: Duration::from_millis(500),
            retry: Duration::from_millis(200),
        };
        let written = taken(None, "a", &timings, Timestamp::UNIX_EPOCH);
        let standby_may_take_over =
            Duration::from_secs(written.duration_seconds.unsigned_abs().into());
        assert!(
            timings.fence() + timings.retry <= standby_may_take_over,
            "the leader may start steps until {:?}, a standby takes over at {standby_may_take_over:?}",
            timings.fence()
        );
    }

    #[test]
    fn lease_durations_are_whole_seconds() {
        assert_eq!(
            parse_lease_duration("15s").map(|d| d.0),
            Ok(Duration::from_secs(15))
        );
        assert_eq!(
            parse_lease_duration("2m").map(|d| d.0),
            Ok(Duration::from_secs(120))
        );
        for refused in ["1500ms", "500ms", "0s", "2s 1ms", "100000000000s"] {
            let message = parse_lease_duration(refused).expect_err(refused);
            assert!(message.contains("whole number of seconds"), "{message}");
        }
        assert!(parse_lease_duration("soon").is_err());
    }

    #[tokio::test]
    async fn a_fence_is_lost_at_the_fencing_deadline_or_when_the_election_says_so() {
        use crate::fence::Fence;
        use std::sync::Arc;

        let patience = Duration::from_secs(30);
        let leadership = Arc::new(Leadership::new("a".to_owned(), "ns/l".to_owned()));
        let fence = Fence::new(leadership.clone());
        // No renewal answered: the deadline alone ends it.
        leadership.lead_until(Instant::now() + Duration::from_millis(50));
        assert!(fence.check("x").is_ok());
        tokio::time::timeout(patience, fence.lost())
            .await
            .expect("lost at the deadline");
        assert_eq!(
            fence.check("destroying VM 7").map_err(|e| e.to_string()),
            Err("stopped before destroying VM 7: this replica no longer leads".to_owned())
        );
        // A standby seen by the election ends it at once.
        leadership.lead_until(Instant::now() + Duration::from_secs(3600));
        let waiting = tokio::spawn({
            let fence = fence.clone();
            async move { fence.lost().await }
        });
        tokio::task::yield_now().await;
        leadership.follow(Some("b".to_owned()));
        tokio::time::timeout(patience, waiting)
            .await
            .expect("lost when the election follows another holder")
            .expect("joined");
        // Without an election, never.
        let open = Fence::open();
        assert!(
            tokio::time::timeout(Duration::from_millis(20), open.lost())
                .await
                .is_err()
        );
    }

    #[test]
    fn leadership_ends_at_its_fencing_deadline_without_any_call() {
        let leadership = Leadership::new("a".to_owned(), "ns/l".to_owned());
        assert!(!leadership.is_leading());
        leadership.lead_until(Instant::now() + Duration::from_millis(30));
        assert!(leadership.is_leading());
        assert_eq!(leadership.status().role, "leader");
        std::thread::sleep(Duration::from_millis(40));
        assert!(!leadership.is_leading());
        assert_eq!(leadership.status().role, "standby");
    }
}
