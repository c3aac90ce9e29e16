//! One message-oriented provider (Slack, Teams, Discord, generic): its queue, folding,
//! rate limit and retries.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use capstan_core::notify::Event;
use capstan_core::notify::payloads::{self, Notice};
use capstan_core::spec::ProviderKind;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Answer, Target, post};

/// A message waiting to be sent.
struct Pending {
    notice: Notice,
    /// Not before then (a repeat waits for the end of its fold window).
    due: Instant,
}

/// Folds events into messages: the first of a key is due at once, repeats of a key sent
/// within the window wait for its end and are sent as one message with their count.
#[derive(Default)]
pub(super) struct Folder {
    pending: VecDeque<Pending>,
    sent: BTreeMap<String, Instant>,
}

impl Folder {
    /// Takes `event`, arrived at `now`; whether it was folded into a message already waiting.
    pub(super) fn offer(&mut self, event: Event, now: Instant, window: Duration) -> bool {
        if let Some(waiting) = self
            .pending
            .iter_mut()
            .find(|p| p.notice.event.dedup_key == event.dedup_key)
        {
            waiting.notice.count = waiting.notice.count.saturating_add(1);
            waiting.notice.event = event;
            return true;
        }
        let due = match self.sent.get(&event.dedup_key) {
            Some(last) if now < *last + window => *last + window,
            _ => now,
        };
        self.pending.push_back(Pending {
            notice: Notice { event, count: 1 },
            due,
        });
        false
    }

    /// When the next message is due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.pending.iter().map(|p| p.due).min()
    }

    /// The first message due at `now`, marked sent at `now`.
    pub(super) fn take_due(&mut self, now: Instant, window: Duration) -> Option<Notice> {
        let index = self.pending.iter().position(|p| p.due <= now)?;
        let pending = self.pending.remove(index)?;
        self.sent
            .insert(pending.notice.event.dedup_key.clone(), now);
        self.sent.retain(|_, at| now < *at + window);
        Some(pending.notice)
    }
}

/// Sends what `queue` brings to `target` until the queue closes.
pub(super) async fn run(target: Target, mut queue: mpsc::Receiver<Event>) {
    let window = target.options.fold_window;
    let mut folder = Folder::default();
    loop {
        let due = folder.next_due();
        tokio::select! {
            event = queue.recv() => {
                let Some(event) = event else { return };
                if folder.offer(event, Instant::now(), window) {
                    target.count("folded");
                }
                // Take every event already queued before sending, so they fold.
                while let Ok(event) = queue.try_recv() {
                    if folder.offer(event, Instant::now(), window) {
                        target.count("folded");
                    }
                }
            }
            () = sleep_until(due) => {}
        }
        while let Some(notice) = folder.take_due(Instant::now(), window) {
            deliver(&target, &notice).await;
            tokio::time::sleep(target.options.min_gap).await;
            while let Ok(event) = queue.try_recv() {
                if folder.offer(event, Instant::now(), window) {
                    target.count("folded");
                }
            }
        }
    }
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// The body and headers of `notice` for `target`: rendered, then redacted whole.
pub(super) fn render(target: &Target, notice: &Notice) -> (String, Vec<(&'static str, String)>) {
    let value = match target.kind {
        ProviderKind::Slack => payloads::slack(notice),
        ProviderKind::Msteams => payloads::msteams(notice),
        ProviderKind::Discord => payloads::discord(notice),
        ProviderKind::Generic | ProviderKind::Alertmanager => payloads::generic(notice),
    };
    let body = crate::redact::redact(&value.to_string());
    let mut headers = Vec::new();
    if let Some(key) = &target.signing_key {
        headers.push((
            payloads::SIGNATURE_HEADER,
            payloads::signature(key.as_bytes(), body.as_bytes()),
        ));
    }
    (body, headers)
}

/// Sends one message, retrying as the module says.
async fn deliver(target: &Target, notice: &Notice) {
    let (body, headers) = render(target, notice);
    let mut failures = 0;
    for attempt in 1..=target.options.attempts.max(1) {
        if !target.leadership.is_leading() {
            tracing::info!(provider = %target.name, "not leading any more; notification not sent");
            target.count("not_leading");
            return;
        }
        let wait = match post(target, &target.address, body.clone(), &headers).await {
            Answer::Accepted => {
                tracing::info!(provider = %target.name, kind = notice.event.kind.name(), count = notice.count, "notification sent");
                target.count("sent");
                return;
            }
            Answer::TooMany(after) => {
                target.count("rate_limited");
                failures += 1;
                after
                    .map(|after| after.min(target.options.max_retry_after))
                    .unwrap_or_else(|| {
                        target
                            .options
                            .backoff
                            .delay(failures, crate::backoff::random_unit())
                    })
            }
            Answer::Transient(why) => {
                tracing::warn!(provider = %target.name, attempt, error = %why, "notification not delivered; retrying");
                target.count("retried");
                failures += 1;
                target
                    .options
                    .backoff
                    .delay(failures, crate::backoff::random_unit())
            }
            Answer::Final(why) => {
                tracing::warn!(provider = %target.name, error = %why, "notification refused");
                target.count("rejected");
                return;
            }
        };
        tokio::time::sleep(wait).await;
    }
    tracing::warn!(provider = %target.name, kind = notice.event.kind.name(), "notification given up after its retries");
    target.count("failed");
}

#[cfg(test)]
mod tests {
    use super::*;
    use capstan_core::spec::{EventKind, EventSeverity};

    fn event(key: &str, message: &str) -> Event {
        Event {
            kind: EventKind::StepFailed,
            severity: EventSeverity::Error,
            cluster: Some("prod".to_owned()),
            message: message.to_owned(),
            dedup_key: key.to_owned(),
            revision: None,
            at: jiff::Timestamp::UNIX_EPOCH,
        }
    }

    #[test]
    fn repeats_within_the_window_are_one_later_message_with_their_count() {
        let window = Duration::from_secs(300);
        let start = Instant::now();
        let mut folder = Folder::default();
        assert!(!folder.offer(event("a", "first"), start, window));
        let sent = folder
            .take_due(start, window)
            .expect("the first is due at once");
        assert_eq!((sent.count, sent.event.message.as_str()), (1, "first"));
        let later = start + Duration::from_secs(10);
        assert!(!folder.offer(event("a", "second"), later, window));
        assert!(folder.offer(event("a", "third"), later, window));
        assert!(!folder.offer(event("b", "other"), later, window));
        let other = folder
            .take_due(later, window)
            .expect("another key is due at once");
        assert_eq!(other.event.dedup_key, "b");
        assert!(folder.take_due(later, window).is_none(), "the repeat waits");
        assert_eq!(folder.next_due(), Some(start + window));
        let folded = folder
            .take_due(start + window, window)
            .expect("due at the end of the window");
        assert_eq!((folded.count, folded.event.message.as_str()), (2, "third"));
    }

    #[test]
    fn after_the_window_the_same_event_is_sent_at_once_again() {
        let window = Duration::from_secs(60);
        let start = Instant::now();
        let mut folder = Folder::default();
        folder.offer(event("a", "first"), start, window);
        folder.take_due(start, window).expect("first");
        let much_later = start + Duration::from_secs(61);
        folder.offer(event("a", "again"), much_later, window);
        assert_eq!(
            folder.take_due(much_later, window).map(|n| n.count),
            Some(1)
        );
    }
}
