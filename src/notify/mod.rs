//! Delivery of notifications (`notifications:` in `capstan.yaml`): the events capstan-core
//! computes from each published status and each finished step, sent to Slack, Teams,
//! Discord, a signed generic webhook, or Alertmanager.
//!
//! # Guarantees
//! - Delivery never slows a pass: the daemon hands events over without waiting
//!   ([`Notifier::status_published`], [`Notifier::step_finished`]); each provider has one
//!   bounded queue and one task that sends. A full queue drops the event (counted
//!   `dropped`), never blocks.
//! - Only the leader sends: events are handed over only while this replica leads, and a
//!   task checks again before each request (a standby's statuses are the leader's news).
//! - The same event (its dedup key) within the fold window is sent once: the first at once,
//!   the repeats folded into one later message with their count. At most one message per
//!   [`NotifyOptions::min_gap`] per provider (Slack's documented rate for a webhook).
//! - A `429` is retried after its `Retry-After` (capped), a `5xx` or a failed connection
//!   after a capped exponential backoff, at most [`NotifyOptions::attempts`] times; a
//!   redirect is not followed (the address must answer itself) and any other answer is
//!   final. Every outcome is counted in `capstan_notifications_total{provider,outcome}`.
//! - Nothing secret is sent: every body passes the redactor after rendering, the receivers'
//!   addresses and keys are known to it from the moment they are read, and no error names
//!   an address (request errors are stripped of their URL).
//! - Alertmanager gets state, not events: every alert firing (a Blocked cluster is
//!   `CapstanClusterBlocked`) is posted at once and again every [`NotifyOptions::resend`],
//!   each time ending [`ALERT_LIFETIME_RESENDS`] resends ahead, so alerts of a capstan that
//!   died resolve by themselves; an alert that stops firing is posted once more ending now.

mod alertmanager;
mod chat;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use capstan_core::notify::{self, Event, Firing};
use capstan_core::spec::{Alert, Notifications, ProviderKind};
use tokio::sync::{mpsc, watch};

use crate::backoff::Backoff;
use crate::clock::Clock;
use crate::leader::Leadership;
use crate::secrets::{SecretReader, SecretUse};
use crate::status::{FleetStatus, StepRecord};

/// An Alertmanager alert ends this many resend intervals after it was last posted, unless
/// posted again: Prometheus uses four evaluation intervals for the same reason (a missed post
/// or two must not resolve it; a capstan that is gone must not keep it firing).
pub const ALERT_LIFETIME_RESENDS: u32 = 4;

/// The most of a receiver's answer that is read (its body is not used; only its end is
/// waited for, so the connection can be reused).
const ANSWER_LIMIT: usize = 64 << 10;

/// How delivery paces itself.
#[derive(Debug, Clone)]
pub struct NotifyOptions {
    /// Repeats of the same event within this are folded into one message with a count.
    pub fold_window: Duration,
    /// At least this between two messages to one provider: Slack allows one message a second
    /// per incoming webhook, Discord a few; one a second suits all.
    pub min_gap: Duration,
    /// Alertmanager: firing alerts are posted again this often.
    pub resend: Duration,
    /// Pacing of retries after a failed request.
    pub backoff: Backoff,
    /// Requests per message at most (the first and the retries).
    pub attempts: u32,
    /// Longest `Retry-After` honoured: a longer one waits this long.
    pub max_retry_after: Duration,
    /// Events waiting per provider at most.
    pub queue: usize,
    /// Longest a request may take.
    pub timeout: Duration,
}

impl Default for NotifyOptions {
    fn default() -> Self {
        NotifyOptions {
            fold_window: Duration::from_secs(300),
            min_gap: Duration::from_secs(1),
            resend: Duration::from_secs(60),
            backoff: Backoff {
                base: Duration::from_secs(1),
                cap: Duration::from_secs(120),
            },
            attempts: 8,
            max_retry_after: Duration::from_secs(600),
            queue: 256,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Where delivery outcomes are counted: the daemon's metrics
/// (`capstan_notifications_total{provider,outcome}`).
pub trait Outcomes: Send + Sync {
    /// Counts one `outcome` of `provider`.
    fn count(&self, provider: &str, outcome: &'static str);
}

impl Outcomes for crate::metrics::Metrics {
    fn count(&self, provider: &str, outcome: &'static str) {
        self.count_notification(provider, outcome);
    }
}

/// Counts nowhere (a notifier not configured yet).
struct Uncounted;

impl Outcomes for Uncounted {
    fn count(&self, _: &str, _: &'static str) {}
}

/// What one provider task needs.
#[derive(Clone)]
struct Target {
    name: String,
    kind: ProviderKind,
    address: String,
    signing_key: Option<String>,
    client: reqwest::Client,
    options: NotifyOptions,
    outcomes: Arc<dyn Outcomes>,
    leadership: Arc<Leadership>,
}

impl Target {
    fn count(&self, outcome: &'static str) {
        self.outcomes.count(&self.name, outcome);
    }
}

/// A running provider.
struct Running {
    events: Option<mpsc::Sender<Event>>,
    alerts: Option<watch::Sender<Vec<Firing>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The daemon's notifications: which providers run, and what goes to each.
pub struct Notifier {
    reader: SecretReader,
    options: NotifyOptions,
    clock: Arc<dyn Clock>,
    /// Where outcomes are counted, and who may send (the daemon's, as of [`Notifier::configure`]).
    outcomes: Arc<dyn Outcomes>,
    leadership: Arc<Leadership>,
    client: Option<reqwest::Client>,
    /// The configuration the running providers were made from.
    configured: Option<Notifications>,
    running: BTreeMap<String, Running>,
    alerts: Vec<Alert>,
}

impl Notifier {
    /// A notifier reading receivers' secrets through `reader`, paced by `options`, telling
    /// Alertmanager the time of `clock`.
    pub fn new(reader: SecretReader, options: NotifyOptions, clock: Arc<dyn Clock>) -> Self {
        Notifier {
            reader,
            options,
            clock,
            outcomes: Arc::new(Uncounted),
            leadership: Arc::new(Leadership::always(String::new())),
            client: None,
            configured: None,
            running: BTreeMap::new(),
            alerts: Vec::new(),
        }
    }

    /// Follows `notifications` (a revision's), counting into `outcomes` and sending
    /// only while `leadership` leads: the providers are made again when any of them changed
    /// (their secrets read again), left running otherwise. A provider whose secret cannot be
    /// read, or whose address is refused, is left out with a warning in the log.
    pub fn configure(
        &mut self,
        notifications: &Notifications,
        outcomes: &Arc<dyn Outcomes>,
        leadership: &Arc<Leadership>,
    ) {
        if self.configured.as_ref() == Some(notifications)
            && Arc::ptr_eq(&self.outcomes, outcomes)
            && Arc::ptr_eq(&self.leadership, leadership)
        {
            return;
        }
        self.outcomes = Arc::clone(outcomes);
        self.leadership = Arc::clone(leadership);
        self.running.clear();
        self.alerts.clone_from(&notifications.alerts);
        self.configured = Some(notifications.clone());
        for (name, provider) in &notifications.providers {
            match self.target(name, provider) {
                Ok(target) => {
                    let running = self.spawn(target);
                    self.running.insert(name.clone(), running);
                }
                Err(err) => {
                    let why = anyhow_chain(&err);
                    tracing::warn!(provider = %name, error = %crate::redact::message(&why), "notification provider left out");
                    self.outcomes.count(name, "unconfigured");
                }
            }
        }
    }

    fn target(
        &mut self,
        name: &str,
        provider: &capstan_core::spec::NotificationProvider,
    ) -> Result<Target, ProviderSetupError> {
        let provider_name = || name.to_owned();
        let address = self
            .reader
            .read(SecretUse::NotificationAddress(name), &provider.address_from)
            .map_err(|source| ProviderSetupError::Address {
                provider: provider_name(),
                source,
            })?;
        let parsed = reqwest::Url::parse(&address).map_err(|_| ProviderSetupError::NotUrl {
            provider: provider_name(),
        })?;
        // The path of a webhook URL is its credential: known to the redactor on its own too.
        if parsed.path().len() > 8 {
            crate::redact::remember(parsed.path());
        }
        if provider.kind.address_is_credential() {
            crate::http_client::may_carry_token(&address).map_err(|source| {
                ProviderSetupError::InsecureAddress {
                    provider: provider_name(),
                    source,
                }
            })?;
        } else if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ProviderSetupError::NotHttp {
                provider: provider_name(),
            });
        }
        let signing_key = match &provider.signing_key_from {
            Some(source) => Some(
                self.reader
                    .read(SecretUse::NotificationSigningKey(name), source)
                    .map_err(|source| ProviderSetupError::SigningKey {
                        provider: provider_name(),
                        source,
                    })?,
            ),
            None => None,
        };
        let client = match &self.client {
            Some(client) => client.clone(),
            None => {
                // The system's roots, as a forge is trusted: receivers are public services.
                let tls = crate::forge::rest::tls_config().map_err(ProviderSetupError::Tls)?;
                let client = crate::http_client::builder()
                    .tls_backend_preconfigured(tls)
                    .timeout(self.options.timeout)
                    .build()
                    .map_err(|err| ProviderSetupError::Client(err.without_url()))?;
                self.client = Some(client.clone());
                client
            }
        };
        Ok(Target {
            name: name.to_owned(),
            kind: provider.kind,
            address,
            signing_key,
            client,
            options: self.options.clone(),
            outcomes: Arc::clone(&self.outcomes),
            leadership: Arc::clone(&self.leadership),
        })
    }

    fn spawn(&self, target: Target) -> Running {
        if target.kind == ProviderKind::Alertmanager {
            let (alerts, feed) = watch::channel(Vec::new());
            let clock = Arc::clone(&self.clock);
            Running {
                events: None,
                alerts: Some(alerts),
                task: tokio::spawn(alertmanager::run(target, feed, clock)),
            }
        } else {
            let (events, queue) = mpsc::channel(self.options.queue.max(1));
            Running {
                events: Some(events),
                alerts: None,
                task: tokio::spawn(chat::run(target, queue)),
            }
        }
    }

    /// Whether any provider runs.
    pub fn is_active(&self) -> bool {
        !self.running.is_empty()
    }

    /// Hands over the events between `previous` and `next` (two published statuses) and the
    /// alerts firing in `next`, while this replica leads.
    pub fn status_published(&self, previous: &FleetStatus, next: &FleetStatus) {
        if self.running.is_empty() || !self.leadership.is_leading() {
            return;
        }
        let now = next.updated.unwrap_or_else(|| self.clock.now());
        for event in notify::status_events(previous, next, now) {
            self.dispatch(event);
        }
        let firing = notify::firing(next);
        for (name, running) in &self.running {
            if let Some(alerts) = &running.alerts {
                let selected: Vec<Firing> = firing
                    .iter()
                    .filter(|f| self.selects(name, f.kind, f.severity, f.cluster.as_deref()))
                    .cloned()
                    .collect();
                alerts.send_if_modified(|current| {
                    let changed = *current != selected;
                    if changed {
                        current.clone_from(&selected);
                    }
                    changed
                });
            }
        }
    }

    /// Hands over the event of a step of `cluster` that finished as `step` says, if it is
    /// one, while this replica leads.
    pub fn step_finished(&self, cluster: &str, step: &StepRecord) {
        if self.running.is_empty() || !self.leadership.is_leading() {
            return;
        }
        if let Some(event) = notify::step_event(cluster, step) {
            self.dispatch(event);
        }
    }

    fn selects(
        &self,
        provider: &str,
        kind: capstan_core::spec::EventKind,
        severity: capstan_core::spec::EventSeverity,
        cluster: Option<&str>,
    ) -> bool {
        self.alerts.iter().any(|alert| {
            alert.providers.iter().any(|p| p == provider) && alert.selects(kind, severity, cluster)
        })
    }

    fn dispatch(&self, mut event: Event) {
        event.message = crate::redact::message(&event.message);
        for (name, running) in &self.running {
            let Some(events) = &running.events else {
                continue;
            };
            if !self.selects(name, event.kind, event.severity, event.cluster.as_deref()) {
                continue;
            }
            if events.try_send(event.clone()).is_err() {
                tracing::warn!(provider = %name, kind = event.kind.name(), "notification queue full; event dropped");
                self.outcomes.count(name, "dropped");
            }
        }
    }
}

/// Why a notification provider was left out; the daemon goes on without it.
#[derive(Debug, thiserror::Error)]
enum ProviderSetupError {
    #[error("cannot read the address of provider `{provider}`")]
    Address {
        provider: String,
        #[source]
        source: crate::secrets::SecretError,
    },
    #[error("the address of provider `{provider}` is not a URL")]
    NotUrl { provider: String },
    #[error("provider `{provider}`")]
    InsecureAddress {
        provider: String,
        #[source]
        source: crate::http_client::InsecureUrl,
    },
    #[error("the address of provider `{provider}` is not http(s)://")]
    NotHttp { provider: String },
    #[error("cannot read the signing key of provider `{provider}`")]
    SigningKey {
        provider: String,
        #[source]
        source: crate::secrets::SecretError,
    },
    #[error("cannot set up TLS")]
    Tls(#[source] crate::forge::ForgeError),
    #[error("cannot build an HTTP client")]
    Client(#[source] reqwest::Error),
}

/// An error with its causes, as one line.
fn anyhow_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

/// How one request ended.
enum Answer {
    /// 2xx.
    Accepted,
    /// 429: try again after this (when the receiver said).
    TooMany(Option<Duration>),
    /// A 5xx or no answer: try again later.
    Transient(String),
    /// Anything else (a 4xx, a redirect): trying again would not help.
    Final(String),
}

/// Posts `body` (already redacted) to `url` as JSON, with `headers`.
async fn post(
    target: &Target,
    url: &str,
    body: String,
    headers: &[(&'static str, String)],
) -> Answer {
    let mut request = target
        .client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(err) => {
            return Answer::Transient(crate::redact::message(&anyhow_chain(&err.without_url())));
        }
    };
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(parse_retry_after);
    // Read the answer to its end (bounded) so the connection can be reused.
    let _ = crate::http_client::read_body(response, ANSWER_LIMIT).await;
    if status.is_success() {
        Answer::Accepted
    } else if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
        Answer::TooMany(retry_after)
    } else if status.is_server_error() {
        Answer::Transient(format!("answered {status}"))
    } else if status.is_redirection() {
        Answer::Final(format!(
            "answered {status}, a redirect, which capstan does not follow: give the address that answers itself"
        ))
    } else {
        Answer::Final(format!("answered {status}"))
    }
}

/// `Retry-After` in seconds (Slack and Discord send seconds; Discord may send a fraction).
fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(86_400.0)))
}

#[cfg(test)]
mod tests;
