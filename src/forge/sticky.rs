//! Posting a preview: one sticky comment per pull request, found again by its hidden marker and
//! edited in place only when what it says changed, and a `capstan/preview` status on the head.
//! Nothing reaches the forge without going through the redactor ([`crate::redact`]).
//!
//! # Guarantees
//! - The comment carries the [`fingerprint`] of its preview in a hidden line after the marker,
//!   so a preview planned again at another time, but otherwise the same, edits nothing: not
//!   the daemon's next round, nor `capstan preview --pr N` run again in a new process.

use crate::preview::Preview;
use crate::preview::comment::{MARKER, comment};

use super::{CommitStatus, ForgeApi, ForgeError, StatusState};

/// The status context capstan sets.
pub const STATUS_CONTEXT: &str = "capstan/preview";

/// The longest status description GitHub keeps.
const DESCRIPTION_LIMIT: usize = 140;

/// What posting did to the comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentAction {
    /// There was none: it was created.
    Created,
    /// Its text differed: it was edited.
    Edited,
    /// Its text was the same: nothing was sent.
    Unchanged,
}

/// What posting did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posted {
    /// The sticky comment's id.
    pub comment_id: u64,
    /// What happened to it.
    pub action: CommentAction,
}

/// What opens the hidden line holding a comment's [`fingerprint`], just after the marker.
const FINGERPRINT_OPENS: &str = "<!-- capstan-preview-fingerprint: ";

/// What closes that line.
const FINGERPRINT_CLOSES: &str = " -->";

/// What makes two previews the same post: everything but the time they were planned at (the
/// comment shows it, but a preview planned again a minute later says nothing new).
pub fn fingerprint(preview: &Preview) -> String {
    let mut timeless = preview.clone();
    timeless.now = jiff::Timestamp::UNIX_EPOCH;
    let json = serde_json::to_vec(&timeless).unwrap_or_default();
    crate::fingerprint::content_sha256(&json)
}

/// The sticky comment for `preview`, at most `limit` characters: the marker, the hidden line
/// with the preview's [`fingerprint`], then the comment ([`comment`]).
pub fn sticky_comment(preview: &Preview, limit: usize) -> String {
    let line = format!(
        "{FINGERPRINT_OPENS}{}{FINGERPRINT_CLOSES}\n",
        fingerprint(preview)
    );
    let text = comment(preview, limit.saturating_sub(line.chars().count()));
    let rest = text.strip_prefix(MARKER).map_or(text.as_str(), |rest| {
        rest.strip_prefix('\n').unwrap_or(rest)
    });
    format!("{MARKER}\n{line}{rest}")
}

/// The fingerprint a sticky comment carries, if it carries one.
fn fingerprint_in(body: &str) -> Option<&str> {
    body.strip_prefix(MARKER)?
        .strip_prefix('\n')?
        .strip_prefix(FINGERPRINT_OPENS)?
        .split_once(FINGERPRINT_CLOSES)
        .map(|(fingerprint, _)| fingerprint)
        .filter(|fingerprint| !fingerprint.is_empty() && !fingerprint.contains('\n'))
}

/// Whether `existing` says what `body` says: the same text, or the same preview's fingerprint.
fn says_the_same(existing: &str, body: &str) -> bool {
    existing == body
        || fingerprint_in(body).is_some_and(|new| fingerprint_in(existing) == Some(new))
}

/// The status of a preview: failure naming the first refusal, else success with the summary.
pub fn status_for(preview: &Preview) -> CommitStatus {
    let (state, description) = match preview.refusals.first() {
        Some(refusal) => {
            let subject = refusal
                .cluster
                .as_deref()
                .or(refusal.location.as_deref())
                .unwrap_or("capstan.yaml");
            (
                StatusState::Failure,
                format!("refused: {subject}: {}: {}", refusal.rule, refusal.message),
            )
        }
        None => (StatusState::Success, preview.summary.clone()),
    };
    CommitStatus {
        state,
        description: shorten(&description, DESCRIPTION_LIMIT),
        context: STATUS_CONTEXT.to_owned(),
    }
}

fn shorten(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(limit - 1).collect();
    short.push('…');
    short
}

/// Posts `body` (which starts with [`MARKER`]; [`sticky_comment`] writes it) as pull request
/// `pr`'s sticky comment, and `status` on its head `head_sha`. The comment is left as it is
/// when it says the same: the same text, or the same [`fingerprint`]. Both are redacted first ([`crate::redact`]): whoever can
/// read the pull request reads them.
///
/// # Errors
/// When the forge refuses or cannot be reached (after the client's retries).
pub async fn post(
    api: &impl ForgeApi,
    pr: u64,
    head_sha: &str,
    body: &str,
    status: &CommitStatus,
) -> Result<Posted, ForgeError> {
    let body = crate::redact::redact(body);
    let body = body.as_str();
    let status = CommitStatus {
        description: crate::redact::redact(&status.description),
        ..status.clone()
    };
    let status = &status;
    let existing = api
        .comments(pr)
        .await?
        .into_iter()
        // The marker opens capstan's comment; a reply quoting it starts with `>`.
        .find(|c| c.body.as_deref().is_some_and(|b| b.starts_with(MARKER)));
    let posted = match existing {
        Some(comment)
            if comment
                .body
                .as_deref()
                .is_some_and(|existing| says_the_same(existing, body)) =>
        {
            Posted {
                comment_id: comment.id,
                action: CommentAction::Unchanged,
            }
        }
        Some(comment) => {
            api.edit_comment(pr, comment.id, body).await?;
            Posted {
                comment_id: comment.id,
                action: CommentAction::Edited,
            }
        }
        None => Posted {
            comment_id: api.create_comment(pr, body).await?.id,
            action: CommentAction::Created,
        },
    };
    api.set_status(head_sha, status).await?;
    Ok(posted)
}

#[cfg(test)]
mod tests;
