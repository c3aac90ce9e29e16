//! The bodies each receiver takes, within each one's documented limits:
//!
//! - Slack incoming webhooks: `text` (the notification's fallback; Slack truncates past
//!   40,000 characters) and `blocks` (at most 50; a section's text at most 3,000). Text is
//!   `mrkdwn`, in which `&`, `<` and `>` are control characters: they are escaped, so no
//!   message (a VM's error text among them) can mention `<!channel>` or forge a link.
//! - Microsoft Teams (Workflows incoming webhooks): a message with one Adaptive Card 1.4
//!   attachment (Teams takes at most 28 KB a message). The message (a VM's error text among
//!   them) is a `RichTextBlock`'s `TextRun`, which Adaptive Cards never read as Markdown, so it
//!   cannot forge a link.
//! - Discord webhooks: `content` at most 2,000 characters, at most 10 `embeds` whose title is
//!   at most 256 and description at most 4,096 characters (6,000 in all), and
//!   `allowed_mentions: {parse: []}`, so no message pings `@everyone`. The message is the
//!   description's code block (its backticks replaced, so it cannot close it): Discord renders
//!   no Markdown and makes no link there.
//! - Generic: capstan's own JSON, signed with HMAC-SHA256 of the raw body under the
//!   provider's key, sent as `X-Signature: sha256=<hex>` (what capstan's `/hooks/generic`
//!   verifies).
//! - Alertmanager: the v2 API's `postableAlerts` (`POST /api/v2/alerts`).

use hmac::{KeyInit as _, Mac as _};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::{Event, Firing};
use crate::spec::EventSeverity;

/// Slack's limit on a message's `text`.
pub const SLACK_TEXT_MAX: usize = 40_000;
/// Slack's limit on a section block's text.
pub const SLACK_SECTION_MAX: usize = 3_000;
/// Slack's limit on the blocks of a message.
pub const SLACK_BLOCKS_MAX: usize = 50;
/// Discord's limit on a message's `content`.
pub const DISCORD_CONTENT_MAX: usize = 2_000;
/// Discord's limit on an embed's title.
pub const DISCORD_TITLE_MAX: usize = 256;
/// Discord's limit on an embed's description.
pub const DISCORD_DESCRIPTION_MAX: usize = 4_096;
/// Discord's limit on the embeds of a message.
pub const DISCORD_EMBEDS_MAX: usize = 10;
/// What capstan puts in one Teams card's text: Teams refuses a message past about 28 KB, and
/// a card's JSON adds its own.
pub const TEAMS_TEXT_MAX: usize = 20_000;
/// The header that carries a generic payload's signature.
pub const SIGNATURE_HEADER: &str = "X-Signature";

/// One message: an event, and how many times it happened within the fold window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The latest occurrence.
    pub event: Event,
    /// Occurrences folded into this message (at least 1).
    pub count: u32,
}

impl Notice {
    /// The message's text: the event's, and the count when it happened more than once.
    pub fn text(&self) -> String {
        if self.count > 1 {
            format!(
                "{} (×{} within the fold window)",
                self.event.message, self.count
            )
        } else {
            self.event.message.clone()
        }
    }
}

/// `text` cut to at most `max` characters, saying how many were cut.
pub fn cut(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_owned();
    }
    let note = format!("… ({} characters cut)", total - max);
    let keep = max.saturating_sub(note.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(&note);
    out
}

fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn emoji(severity: EventSeverity) -> &'static str {
    match severity {
        EventSeverity::Info => ":information_source:",
        EventSeverity::Warning => ":warning:",
        EventSeverity::Error => ":rotating_light:",
    }
}

fn context(notice: &Notice) -> String {
    let mut parts = vec![
        notice.event.kind.name().to_owned(),
        notice.event.severity.name().to_owned(),
    ];
    if let Some(revision) = &notice.event.revision {
        parts.push(revision.clone());
    }
    parts.push(notice.event.at.to_string());
    parts.join(" · ")
}

/// A Slack incoming webhook's body.
pub fn slack(notice: &Notice) -> Value {
    let title = slack_escape(&notice.event.title());
    let text = slack_escape(&notice.text());
    json!({
        "text": cut(&format!("{title}: {text}"), SLACK_TEXT_MAX),
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": cut(
                        &format!("{} *{title}*\n{text}", emoji(notice.event.severity)),
                        SLACK_SECTION_MAX,
                    ),
                },
            },
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": slack_escape(&context(notice))}],
            },
        ],
    })
}

/// A Microsoft Teams (Workflows) incoming webhook's body: one Adaptive Card.
pub fn msteams(notice: &Notice) -> Value {
    let color = match notice.event.severity {
        EventSeverity::Info => "Good",
        EventSeverity::Warning => "Warning",
        EventSeverity::Error => "Attention",
    };
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.4",
                "body": [
                    {
                        "type": "TextBlock",
                        "text": cut(&notice.event.title(), 256),
                        "weight": "Bolder",
                        "size": "Medium",
                        "color": color,
                        "wrap": true,
                    },
                    {
                        "type": "RichTextBlock",
                        "inlines": [{"type": "TextRun", "text": cut(&notice.text(), TEAMS_TEXT_MAX)}],
                    },
                    {"type": "TextBlock", "text": context(notice), "isSubtle": true, "wrap": true},
                ],
            },
        }],
    })
}

/// A Discord webhook's body.
pub fn discord(notice: &Notice) -> Value {
    let color = match notice.event.severity {
        EventSeverity::Info => 0x0034_98db,
        EventSeverity::Warning => 0x00f3_9c12,
        EventSeverity::Error => 0x00e7_4c3c,
    };
    json!({
        "username": "capstan",
        "content": cut(&notice.event.title(), DISCORD_CONTENT_MAX),
        "allowed_mentions": {"parse": []},
        "embeds": [{
            "title": cut(&notice.event.title(), DISCORD_TITLE_MAX),
            "description": discord_code_block(&notice.text()),
            "color": color,
            "footer": {"text": cut(&context(notice), 2_048)},
            "timestamp": notice.event.at.to_string(),
        }],
    })
}

/// `text` as a Discord code block of at most [`DISCORD_DESCRIPTION_MAX`] characters: its
/// backticks become `ˋ` (a modifier letter that looks the same), so nothing in it closes the
/// block and lets Markdown or a link through.
fn discord_code_block(text: &str) -> String {
    const FENCES: usize = "```\n\n```".len();
    let inner = cut(&text.replace('`', "ˋ"), DISCORD_DESCRIPTION_MAX - FENCES);
    format!("```\n{inner}\n```")
}

/// capstan's own JSON: the event as it is, with its count.
pub fn generic(notice: &Notice) -> Value {
    json!({
        "kind": notice.event.kind.name(),
        "severity": notice.event.severity.name(),
        "cluster": notice.event.cluster,
        "message": notice.event.message,
        "count": notice.count,
        "dedupKey": notice.event.dedup_key,
        "revision": notice.event.revision,
        "at": notice.event.at.to_string(),
    })
}

/// The value of [`SIGNATURE_HEADER`] for `body` under `key`: `sha256=` and the lowercase hex
/// of HMAC-SHA256.
pub fn signature(key: &[u8], body: &[u8]) -> String {
    // HMAC takes a key of any length (a long one is hashed first), so this cannot fail.
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key)
        .expect("HMAC-SHA256 accepts keys of any length");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Alertmanager's `postableAlerts`: every alert of `firing` ends `ends_in` from `now` unless
/// sent again (so alerts a dead capstan stops re-sending resolve by themselves), every one of
/// `resolved` ends now.
pub fn alertmanager(
    firing: &[Firing],
    resolved: &[Firing],
    now: Timestamp,
    ends_in: SignedDuration,
) -> Value {
    let ends = now.checked_add(ends_in).unwrap_or(now);
    let alert = |alert: &Firing, ends_at: Timestamp| {
        let mut labels = serde_json::Map::new();
        labels.insert("alertname".to_owned(), json!(alert.alertname));
        if let Some(cluster) = &alert.cluster {
            labels.insert("cluster".to_owned(), json!(cluster));
        }
        labels.insert("severity".to_owned(), json!(alert.severity.name()));
        // An alert that started after it ends is refused; a clock step must not do that.
        let starts = alert.since.min(ends_at);
        json!({
            "labels": labels,
            "annotations": {"summary": cut(&alert.summary, 4_096)},
            "startsAt": starts.to_string(),
            "endsAt": ends_at.to_string(),
        })
    };
    Value::Array(
        firing
            .iter()
            .map(|f| alert(f, ends))
            .chain(resolved.iter().map(|f| alert(f, now)))
            .collect(),
    )
}
