//! The Alertmanager provider: the alerts firing, posted to `POST /api/v2/alerts` at once when
//! they change and again every resend interval; those that stopped, posted once ending now.

use std::collections::BTreeMap;
use std::sync::Arc;

use capstan_core::notify::Firing;
use capstan_core::notify::payloads;
use jiff::SignedDuration;
use tokio::sync::watch;

use super::{ALERT_LIFETIME_RESENDS, Answer, Target, post};
use crate::clock::Clock;

/// Keeps Alertmanager told of `feed`'s alerts until the feed closes.
pub(super) async fn run(
    target: Target,
    mut feed: watch::Receiver<Vec<Firing>>,
    clock: Arc<dyn Clock>,
) {
    let url = format!("{}/api/v2/alerts", target.address.trim_end_matches('/'));
    let ends_in = target.options.resend.saturating_mul(ALERT_LIFETIME_RESENDS);
    let ends_in = SignedDuration::try_from(ends_in).unwrap_or(SignedDuration::MAX);
    // What Alertmanager was last told fires, by the alert's labels.
    let mut told: BTreeMap<(&'static str, Option<String>), Firing> = BTreeMap::new();
    let mut failures = 0;
    loop {
        let firing: Vec<Firing> = feed.borrow_and_update().clone();
        let resolved: Vec<Firing> = told
            .iter()
            .filter(|(key, _)| !firing.iter().any(|f| f.key() == (key.0, key.1.as_deref())))
            .map(|(_, alert)| alert.clone())
            .collect();
        let mut wait = target.options.resend;
        if (!firing.is_empty() || !resolved.is_empty()) && target.leadership.is_leading() {
            let body = payloads::alertmanager(&firing, &resolved, clock.now(), ends_in);
            let body = crate::redact::redact(&body.to_string());
            match post(&target, &url, body, &[]).await {
                Answer::Accepted => {
                    tracing::info!(provider = %target.name, firing = firing.len(), resolved = resolved.len(), "alerts posted");
                    target.count("sent");
                    failures = 0;
                    told = firing
                        .iter()
                        .map(|f| ((f.alertname, f.cluster.clone()), f.clone()))
                        .collect();
                }
                Answer::TooMany(_) | Answer::Transient(_) => {
                    target.count("retried");
                    failures += 1;
                    wait = target
                        .options
                        .backoff
                        .delay(failures, crate::backoff::random_unit())
                        .min(target.options.resend);
                }
                Answer::Final(why) => {
                    tracing::warn!(provider = %target.name, error = %why, "alerts refused");
                    target.count("rejected");
                }
            }
        }
        tokio::select! {
            changed = feed.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(wait) => {}
        }
    }
}
