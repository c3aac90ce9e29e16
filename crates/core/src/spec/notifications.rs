//! `notifications:` in `capstan.yaml`: where capstan tells people that something needs them
//! (Flux's split: `providers` say where to send, `alerts` say which events go to which
//! providers), and the rules that check it.
//!
//! A provider's address is read from a secret, never written in the repository: a Slack,
//! Teams or Discord webhook URL carries the token that lets anyone post, and an Alertmanager
//! or a generic receiver is the operator's to choose. Each source is bound to its provider
//! (the daemon's secret policy), so a commit can only send to destinations the operator gave.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::diagnostic::{Diagnostic, SourceFile};
use super::limits::{MAX_ALERT_SELECTORS, MAX_ALERTS, MAX_NOTIFICATION_PROVIDERS};
use super::secret_source::SecretSource;
use super::values::is_dns1123_label;

/// Where and what capstan notifies.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Notifications {
    /// Receivers by name (a DNS-1123 label); alerts name them.
    #[serde(default)]
    #[schemars(length(max = MAX_NOTIFICATION_PROVIDERS))]
    pub providers: BTreeMap<String, NotificationProvider>,
    /// Which events go to which providers. An event goes to every provider of every alert
    /// that selects it, once per provider.
    #[serde(default)]
    #[schemars(length(max = MAX_ALERTS))]
    pub alerts: Vec<Alert>,
}

impl Notifications {
    /// Whether nothing is configured.
    pub fn is_empty(&self) -> bool {
        self.providers.is_empty() && self.alerts.is_empty()
    }
}

/// One receiver of notifications.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotificationProvider {
    /// What the receiver is, which decides the payload.
    #[serde(rename = "type")]
    pub kind: ProviderKind,
    /// Where to read the receiver's address: the webhook URL (Slack, Teams, Discord,
    /// generic) or the Alertmanager's base URL (`http://alertmanager:9093`). Never write
    /// the address itself here: a webhook URL is a credential.
    pub address_from: SecretSource,
    /// `generic` only: where to read the key the body is signed with (HMAC-SHA256, header
    /// `X-Signature: sha256=<hex>`, as capstan's own `/hooks/generic` verifies it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key_from: Option<SecretSource>,
}

/// The kinds of receivers.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// A Slack incoming webhook.
    Slack,
    /// A Microsoft Teams incoming webhook (Workflows), sent an Adaptive Card.
    Msteams,
    /// A Discord webhook.
    Discord,
    /// Any HTTP receiver: capstan's own JSON, signed.
    Generic,
    /// Prometheus Alertmanager's v2 API: conditions become alerts that fire while they last.
    Alertmanager,
}

impl ProviderKind {
    /// The name the file and the metrics use.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Slack => "slack",
            ProviderKind::Msteams => "msteams",
            ProviderKind::Discord => "discord",
            ProviderKind::Generic => "generic",
            ProviderKind::Alertmanager => "alertmanager",
        }
    }

    /// Whether the address is a webhook URL whose path is the credential (it may then only
    /// travel over https, or plain http to this machine).
    pub fn address_is_credential(self) -> bool {
        matches!(
            self,
            ProviderKind::Slack | ProviderKind::Msteams | ProviderKind::Discord
        )
    }
}

/// How serious an event is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum EventSeverity {
    /// Something happened as planned (a rollout finished, a certificate renewed).
    #[default]
    Info,
    /// Something may need a person soon (a source unreachable, remediation held).
    Warning,
    /// A person must act (a cluster Blocked, a step failing).
    Error,
}

impl EventSeverity {
    /// The name the payloads use.
    pub fn name(self) -> &'static str {
        match self {
            EventSeverity::Info => "info",
            EventSeverity::Warning => "warning",
            EventSeverity::Error => "error",
        }
    }
}

/// Every kind of event capstan notifies.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "PascalCase")]
pub enum EventKind {
    /// A step failed (with its redacted error).
    StepFailed,
    /// A cluster became Blocked.
    ClusterBlocked,
    /// A Blocked cluster is clear again.
    ClusterUnblocked,
    /// A Ready cluster has work to do (a new revision).
    RolloutStarted,
    /// A cluster is Ready again, at a revision, after a time.
    RolloutFinished,
    /// A planner rule refuses a change (with the rule and the fix).
    ChangeRefused,
    /// A drain is held (a PodDisruptionBudget) past `drainTimeout`.
    DrainHeld,
    /// A node's VM was fenced (hard-stopped) to be replaced.
    NodeFenced,
    /// Too many nodes are NotReady at once: nothing is fenced.
    RemediationHeld,
    /// The source (the Git remote) does not answer.
    SourceUnavailable,
    /// The source answers again.
    SourceRestored,
    /// The branch's tip is not signed by an allowed key.
    CommitNotVerified,
    /// A cluster's certificates were renewed.
    CertificateRenewed,
    /// A cluster's certificates expire soon and are not renewed yet.
    CertificateNearExpiry,
    /// Another replica leads now.
    LeadershipChanged,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 15] = [
        EventKind::StepFailed,
        EventKind::ClusterBlocked,
        EventKind::ClusterUnblocked,
        EventKind::RolloutStarted,
        EventKind::RolloutFinished,
        EventKind::ChangeRefused,
        EventKind::DrainHeld,
        EventKind::NodeFenced,
        EventKind::RemediationHeld,
        EventKind::SourceUnavailable,
        EventKind::SourceRestored,
        EventKind::CommitNotVerified,
        EventKind::CertificateRenewed,
        EventKind::CertificateNearExpiry,
        EventKind::LeadershipChanged,
    ];

    /// The name the file and the payloads use (`ClusterBlocked`).
    pub fn name(self) -> &'static str {
        match self {
            EventKind::StepFailed => "StepFailed",
            EventKind::ClusterBlocked => "ClusterBlocked",
            EventKind::ClusterUnblocked => "ClusterUnblocked",
            EventKind::RolloutStarted => "RolloutStarted",
            EventKind::RolloutFinished => "RolloutFinished",
            EventKind::ChangeRefused => "ChangeRefused",
            EventKind::DrainHeld => "DrainHeld",
            EventKind::NodeFenced => "NodeFenced",
            EventKind::RemediationHeld => "RemediationHeld",
            EventKind::SourceUnavailable => "SourceUnavailable",
            EventKind::SourceRestored => "SourceRestored",
            EventKind::CommitNotVerified => "CommitNotVerified",
            EventKind::CertificateRenewed => "CertificateRenewed",
            EventKind::CertificateNearExpiry => "CertificateNearExpiry",
            EventKind::LeadershipChanged => "LeadershipChanged",
        }
    }
}

/// Which events go to which providers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Alert {
    /// Names of providers under `notifications.providers`.
    #[schemars(length(min = 1, max = MAX_ALERT_SELECTORS))]
    pub providers: Vec<String>,
    /// The least severity sent (`info` sends everything).
    #[serde(default)]
    pub severity: EventSeverity,
    /// Only events of these clusters (none: every cluster, and the fleet's own events).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_ALERT_SELECTORS))]
    pub clusters: Vec<String>,
    /// Only events of these kinds (none: every kind).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_ALERT_SELECTORS))]
    pub kinds: Vec<EventKind>,
}

impl Alert {
    /// Whether this alert selects an event of `kind`, `severity`, about `cluster` (`None`:
    /// the fleet's own, which a cluster list does not exclude).
    pub fn selects(&self, kind: EventKind, severity: EventSeverity, cluster: Option<&str>) -> bool {
        severity >= self.severity
            && (self.kinds.is_empty() || self.kinds.contains(&kind))
            && match cluster {
                Some(cluster) => {
                    self.clusters.is_empty() || self.clusters.iter().any(|c| c == cluster)
                }
                None => true,
            }
    }
}

const DNS_LABEL_HINT: &str = "use lowercase letters, digits and `-`, starting and ending with a letter or digit, at most 63 characters";

/// The findings of `notifications:`.
pub fn validate(notifications: &Notifications, file: &SourceFile) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if notifications.providers.len() > MAX_NOTIFICATION_PROVIDERS {
        out.push(
            file.error(
                "notifications.providers",
                format!(
                    "{} providers: at most {MAX_NOTIFICATION_PROVIDERS}",
                    notifications.providers.len()
                ),
            )
            .with_hint("send to fewer receivers; one channel can be fed to many people"),
        );
    }
    if notifications.alerts.len() > MAX_ALERTS {
        out.push(
            file.error(
                "notifications.alerts",
                format!(
                    "{} alerts: at most {MAX_ALERTS}",
                    notifications.alerts.len()
                ),
            )
            .with_hint("merge alerts that send to the same providers"),
        );
    }
    for (name, provider) in &notifications.providers {
        let path = format!("notifications.providers.{name}");
        if !is_dns1123_label(name) {
            out.push(
                file.error(&path, format!("`{name}` is not a valid provider name"))
                    .with_hint(DNS_LABEL_HINT),
            );
        }
        match (provider.kind, &provider.signing_key_from) {
            (ProviderKind::Generic, None) => out.push(
                file.error(&path, "a generic provider signs what it sends, but names no key")
                    .with_hint("add `signingKeyFrom: {env: ...}` or `{file: ...}`; the receiver checks `X-Signature: sha256=<hex>` with the same key"),
            ),
            (kind, Some(_)) if kind != ProviderKind::Generic => out.push(
                file.error(
                    &format!("{path}.signingKeyFrom"),
                    format!("a {} provider signs nothing", kind.name()),
                )
                .with_hint("remove signingKeyFrom, or use `type: generic`"),
            ),
            _ => {}
        }
    }
    let known = || {
        let names: Vec<&str> = notifications.providers.keys().map(String::as_str).collect();
        if names.is_empty() {
            "no provider is declared under notifications.providers".to_owned()
        } else {
            format!("declared providers: {}", names.join(", "))
        }
    };
    for (index, alert) in notifications.alerts.iter().enumerate() {
        let path = format!("notifications.alerts[{index}]");
        if alert.providers.is_empty() {
            out.push(
                file.error(&format!("{path}.providers"), "names no provider")
                    .with_hint(known()),
            );
        }
        for (list, length) in [
            ("providers", alert.providers.len()),
            ("clusters", alert.clusters.len()),
            ("kinds", alert.kinds.len()),
        ] {
            if length > MAX_ALERT_SELECTORS {
                out.push(
                    file.error(
                        &format!("{path}.{list}"),
                        format!("{length} entries: at most {MAX_ALERT_SELECTORS}"),
                    )
                    .with_hint("leave the list out to select every one"),
                );
            }
        }
        for (position, provider) in alert.providers.iter().enumerate() {
            if !notifications.providers.contains_key(provider) {
                out.push(
                    file.error(
                        &format!("{path}.providers[{position}]"),
                        format!("`{provider}` is not a provider"),
                    )
                    .with_hint(known()),
                );
            }
        }
        for (position, cluster) in alert.clusters.iter().enumerate() {
            if !is_dns1123_label(cluster) {
                out.push(
                    file.error(
                        &format!("{path}.clusters[{position}]"),
                        format!("`{cluster}` is not a cluster name"),
                    )
                    .with_hint(DNS_LABEL_HINT),
                );
            }
        }
    }
    for name in notifications.providers.keys() {
        if !notifications
            .alerts
            .iter()
            .any(|alert| alert.providers.contains(name))
        {
            out.push(
                file.warning(
                    &format!("notifications.providers.{name}"),
                    format!("no alert sends to `{name}`"),
                )
                .with_hint(format!("add an alert with `providers: [{name}]`")),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str) -> Vec<Diagnostic> {
        let text = format!("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n{yaml}");
        let files = crate::spec::RepoFiles {
            fleet: crate::spec::SourceText {
                path: "capstan.yaml".to_owned(),
                text,
            },
            clusters: Vec::new(),
        };
        crate::spec::load(&files).diagnostics.0
    }

    #[test]
    fn providers_and_alerts_parse_with_their_defaults() {
        let diagnostics = load(
            "notifications:
  providers:
    team-slack: {type: slack, addressFrom: {env: CAPSTAN_NOTIFICATION_TEAM_SLACK_ADDRESS}}
    am: {type: alertmanager, addressFrom: {file: notifications/am/address}}
  alerts:
    - providers: [team-slack, am]
      severity: warning
      clusters: [prod]
      kinds: [ClusterBlocked, RemediationHeld]
",
        );
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
    }

    #[test]
    fn an_alert_naming_an_unknown_provider_is_an_error_at_its_line_with_the_known_names() {
        let diagnostics = load(
            "notifications:
  providers:
    chat: {type: discord, addressFrom: {env: X}}
  alerts:
    - providers: [chat, pager]
",
        );
        let error = diagnostics
            .iter()
            .find(|d| d.field.as_deref() == Some("notifications.alerts[0].providers[1]"))
            .unwrap_or_else(|| panic!("{diagnostics:?}"));
        assert!(error.is_error());
        assert_eq!(error.line, Some(7), "{error}");
        assert!(
            error.message.contains("`pager` is not a provider"),
            "{error}"
        );
        assert_eq!(error.hint.as_deref(), Some("declared providers: chat"));
    }

    #[test]
    fn a_generic_provider_needs_a_signing_key_and_no_other_kind_takes_one() {
        let diagnostics = load(
            "notifications:
  providers:
    hook: {type: generic, addressFrom: {env: X}}
    chat: {type: slack, addressFrom: {env: Y}, signingKeyFrom: {env: Z}}
  alerts:
    - providers: [hook, chat]
",
        );
        let fields: Vec<_> = diagnostics
            .iter()
            .filter(|d| d.is_error())
            .filter_map(|d| d.field.as_deref())
            .collect();
        assert_eq!(
            fields,
            [
                "notifications.providers.hook",
                "notifications.providers.chat.signingKeyFrom"
            ],
            "{diagnostics:?}"
        );
    }

    #[test]
    fn an_unknown_event_kind_is_refused_by_the_parser_with_its_line() {
        let diagnostics = load(
            "notifications:
  providers:
    chat: {type: slack, addressFrom: {env: X}}
  alerts:
    - providers: [chat]
      kinds: [ClusterOnFire]
",
        );
        assert!(
            diagnostics
                .iter()
                .any(|d| d.is_error() && d.line.is_some() && d.message.contains("ClusterOnFire")),
            "{diagnostics:?}"
        );
    }

    #[test]
    fn too_many_providers_are_refused() {
        let providers: String = (0..=MAX_NOTIFICATION_PROVIDERS)
            .map(|i| format!("    p{i}: {{type: slack, addressFrom: {{env: X}}}}\n"))
            .collect();
        let diagnostics = load(&format!(
            "notifications:\n  providers:\n{providers}  alerts:\n    - providers: [p0]\n"
        ));
        assert!(
            diagnostics.iter().any(|d| d.is_error()
                && d.field.as_deref() == Some("notifications.providers")
                && d.message.contains("at most")),
            "{diagnostics:?}"
        );
    }

    #[test]
    fn an_alert_selects_by_severity_kind_and_cluster() {
        let alert = Alert {
            providers: vec!["chat".to_owned()],
            severity: EventSeverity::Warning,
            clusters: vec!["prod".to_owned()],
            kinds: vec![EventKind::ClusterBlocked],
        };
        assert!(alert.selects(
            EventKind::ClusterBlocked,
            EventSeverity::Error,
            Some("prod")
        ));
        assert!(!alert.selects(EventKind::ClusterBlocked, EventSeverity::Info, Some("prod")));
        assert!(!alert.selects(
            EventKind::ClusterBlocked,
            EventSeverity::Error,
            Some("edge")
        ));
        assert!(!alert.selects(EventKind::StepFailed, EventSeverity::Error, Some("prod")));
        let everything = Alert {
            providers: vec!["chat".to_owned()],
            severity: EventSeverity::Info,
            clusters: Vec::new(),
            kinds: Vec::new(),
        };
        assert!(everything.selects(EventKind::LeadershipChanged, EventSeverity::Info, None));
    }
}
