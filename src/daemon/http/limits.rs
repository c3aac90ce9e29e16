//! What keeps `/healthz` answering whatever else the endpoint is asked: a lane for health
//! probes beside the connection cap, and a cap of its own on `/events` streams.
//!
//! The kubelet restarts the pod when `/healthz` stops answering, so anyone who could fill
//! the connection cap (with dashboard streams, which need no token on a token-less daemon,
//! or with requests never finished) could restart the daemon at will.
//!
//! # Guarantees
//! - A connection over `--http-max-connections` is not refused at once: it enters the health
//!   lane ([`HealthLane`], [`HEALTH_LANE`] connections at once) for at most
//!   [`HEALTH_LANE_WAIT`]. Over plain HTTP its first bytes are looked at (not read) and,
//!   unless they are `GET /healthz`, it is answered 503 as soon as they differ, so a request
//!   that is merely unfinished leaves the lane at once; over TLS the handshake comes first,
//!   within the same time. A full lane makes room by dropping the connection that has waited
//!   longest, never by refusing the newcomer: a probe, which sends its request as soon as it
//!   connects, is told apart within a millisecond, so connections that send nothing cannot
//!   keep it out. At most [`HEALTH_ANSWERS`] connections told apart as probes are answered at
//!   once, `/healthz` and nothing else, then closed.
//! - `/events` streams are at most [`StreamCaps::total`] at once and
//!   [`StreamCaps::per_client`] per client address; one more is answered 503 with
//!   `Retry-After` and its connection closed, so open pages never hold the connections
//!   Prometheus, probes and people need.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Connections over the cap waiting at once to be told apart (their first bytes, or a TLS
/// handshake); past it, the one that waited longest is dropped. A kubelet probes each
/// container at most once a second per probe.
pub const HEALTH_LANE: usize = 64;

/// Connections told apart as probes answered at once (each within [`HEALTH_LANE_WAIT`]);
/// past it, one more is refused.
pub const HEALTH_ANSWERS: usize = 32;

/// The longest a connection stays in the health lane before its request line: a probe
/// sends it at once.
pub const HEALTH_LANE_WAIT: Duration = Duration::from_secs(1);

/// How often the lane looks again at a connection whose first bytes have not all arrived.
const PEEK_AGAIN: Duration = Duration::from_millis(10);

/// The request line a probe's begins with.
const PROBE: &[u8] = b"GET /healthz";

/// The default for [`StreamCaps::per_client`]: a person with a few tabs open.
pub const DEFAULT_EVENT_STREAMS_PER_CLIENT: usize = 8;

/// How many `/events` streams are held open at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCaps {
    /// In all.
    pub total: usize,
    /// Per client address.
    pub per_client: usize,
}

impl StreamCaps {
    /// `total` (default: a quarter of `max_connections`) and `per_client`, each at least one.
    pub fn of(max_connections: usize, total: Option<usize>, per_client: usize) -> Self {
        StreamCaps {
            total: total.unwrap_or(max_connections / 4).max(1),
            per_client: per_client.max(1),
        }
    }
}

impl Default for StreamCaps {
    fn default() -> Self {
        StreamCaps::of(
            super::DEFAULT_MAX_CONNECTIONS,
            None,
            DEFAULT_EVENT_STREAMS_PER_CLIENT,
        )
    }
}

/// The `/events` streams open now, in all and by client address.
#[derive(Debug)]
pub(super) struct EventStreams {
    caps: StreamCaps,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One open stream; dropping it (the stream ended) frees its place.
pub(super) struct StreamPermit {
    streams: Arc<EventStreams>,
    client: IpAddr,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self
            .streams
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        open.0 = open.0.saturating_sub(1);
        if let Some(count) = open.1.get_mut(&self.client) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.1.remove(&self.client);
            }
        }
    }
}

impl EventStreams {
    pub(super) fn new(caps: StreamCaps) -> Arc<Self> {
        Arc::new(EventStreams {
            caps,
            open: Mutex::new((0, HashMap::new())),
        })
    }

    /// A place for one more stream of `client`, or why there is none.
    pub(super) fn open(self: &Arc<Self>, client: IpAddr) -> Result<StreamPermit, String> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.0 >= self.caps.total {
            return Err(format!(
                "{} dashboard event streams are open, the most this daemon holds (--http-max-event-streams): close a page or try again shortly",
                self.caps.total
            ));
        }
        let mine = open.1.get(&client).copied().unwrap_or(0);
        if mine >= self.caps.per_client {
            return Err(format!(
                "this address holds {mine} dashboard event streams, the most one client may (--http-max-event-streams-per-client): close a page"
            ));
        }
        open.0 += 1;
        open.1.insert(client, mine + 1);
        Ok(StreamPermit {
            streams: Arc::clone(self),
            client,
        })
    }
}

/// Connections over the cap being told apart (see the module), oldest first.
#[derive(Debug)]
pub(super) struct HealthLane {
    waiting: Mutex<(u64, VecDeque<(u64, tokio::task::AbortHandle)>)>,
    answering: Arc<tokio::sync::Semaphore>,
}

/// A connection's place in the lane: [`LanePlace::told_apart`] leaves it, before the answer.
pub(super) struct LanePlace {
    lane: Arc<HealthLane>,
    id: u64,
}

impl HealthLane {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(HealthLane {
            waiting: Mutex::new((0, VecDeque::new())),
            answering: Arc::new(tokio::sync::Semaphore::new(HEALTH_ANSWERS)),
        })
    }

    /// Runs `tell_apart` for a connection over the cap in a task of its own, dropping the
    /// connection that has waited longest when the lane is full.
    pub(super) fn enter<F>(self: &Arc<Self>, tell_apart: impl FnOnce(LanePlace) -> F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        // Held while the task is spawned and listed, so it cannot leave before it is listed.
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if waiting.1.len() >= HEALTH_LANE
            && let Some((_, oldest)) = waiting.1.pop_front()
        {
            // Its stream is dropped with its task: closed.
            oldest.abort();
        }
        let id = waiting.0;
        waiting.0 += 1;
        let place = LanePlace {
            lane: Arc::clone(self),
            id,
        };
        let task = tokio::spawn(tell_apart(place));
        waiting.1.push_back((id, task.abort_handle()));
    }
}

impl HealthLane {
    /// A permit to answer a probe told apart before it entered the lane, unless
    /// [`HEALTH_ANSWERS`] are being answered already.
    pub(super) fn answering(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.answering).try_acquire_owned().ok()
    }
}

impl LanePlace {
    /// Leaves the lane once the connection is told apart: a permit to answer a probe, or
    /// `None` when [`HEALTH_ANSWERS`] are being answered already.
    pub(super) fn told_apart(self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.lane
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .retain(|(id, _)| *id != self.id);
        Arc::clone(&self.lane.answering).try_acquire_owned().ok()
    }
}

/// What a connection's first bytes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Looked {
    /// `GET /healthz`, then a space or a query.
    Health,
    /// Anything else (or the connection closed).
    Other,
    /// Nothing yet, or the beginning of a probe.
    NotYet,
}

fn tell(first: &[u8]) -> Looked {
    if first.len() > PROBE.len() {
        return match first.starts_with(PROBE) && matches!(first[PROBE.len()], b' ' | b'?') {
            true => Looked::Health,
            false => Looked::Other,
        };
    }
    match PROBE.starts_with(first) {
        true => Looked::NotYet,
        false => Looked::Other,
    }
}

/// Looks at what a connection has sent so far, without waiting and without reading it (so
/// that a flood over the cap is told apart in the accept loop, before any task is spawned);
/// hands back the standard socket (non-blocking), for the caller to answer or register again.
pub(super) fn look_now(
    stream: tokio::net::TcpStream,
) -> std::io::Result<(std::net::TcpStream, Looked)> {
    // The standard socket peeks without a wait (it stays non-blocking); tokio's would wait
    // for its driver to report the socket readable.
    let socket = stream.into_std()?;
    let mut first = [0_u8; PROBE.len() + 1];
    let looked = match socket.peek(&mut first) {
        Ok(0) => Looked::Other,
        Ok(seen) => tell(&first[..seen]),
        Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => Looked::NotYet,
        Err(_) => Looked::Other,
    };
    Ok((socket, looked))
}

/// Whether a plain-HTTP connection's request begins with `GET /healthz` (then a space or a
/// query), looking at its first bytes without reading them, for at most
/// [`HEALTH_LANE_WAIT`]; `false` as soon as they differ.
pub(super) async fn asks_for_health(stream: &tokio::net::TcpStream) -> bool {
    let deadline = tokio::time::Instant::now() + HEALTH_LANE_WAIT;
    let mut first = [0_u8; PROBE.len() + 1];
    loop {
        let seen = match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
            Ok(Ok(seen)) if seen > 0 => seen,
            // Closed, failed or silent for the whole wait.
            _ => return false,
        };
        match tell(&first[..seen]) {
            Looked::Health => return true,
            Looked::Other => return false,
            Looked::NotYet => {}
        }
        // A prefix of a probe: the rest is on its way (peek returns what is there at once).
        if tokio::time::Instant::now() + PEEK_AGAIN > deadline {
            return false;
        }
        tokio::time::sleep(PEEK_AGAIN).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_capped_in_all_and_per_client_and_a_closed_one_frees_its_place() {
        let streams = EventStreams::new(StreamCaps {
            total: 3,
            per_client: 2,
        });
        let (alice, bob, carol): (IpAddr, IpAddr, IpAddr) = (
            "10.0.0.1".parse().expect("ip"),
            "10.0.0.2".parse().expect("ip"),
            "10.0.0.3".parse().expect("ip"),
        );
        let first = streams.open(alice).expect("alice's first");
        let _second = streams.open(alice).expect("alice's second");
        let refused = streams.open(alice).err().expect("a third for alice");
        assert!(refused.contains("per-client"), "{refused}");
        let _bob = streams.open(bob).expect("bob's");
        let refused = streams.open(carol).err().expect("four in all");
        assert!(refused.contains("(--http-max-event-streams)"), "{refused}");
        drop(first);
        let _carol = streams.open(carol).expect("a place freed");
    }

    #[test]
    fn the_default_stream_cap_is_a_quarter_of_the_connections() {
        assert_eq!(
            StreamCaps::of(128, None, 8),
            StreamCaps {
                total: 32,
                per_client: 8
            }
        );
        assert_eq!(StreamCaps::of(2, None, 0).total, 1);
    }
}
