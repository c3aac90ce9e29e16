//! Posting a preview: one sticky comment per pull request, found again by its hidden marker and
//! edited in place only when its text changed, and a `capstan/preview` status on the head.
//! Nothing reaches the forge without going through the redactor ([`crate::redact`]).

use crate::preview::Preview;
use crate::preview::comment::MARKER;

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

/// Posts `body` (which starts with [`MARKER`]) as pull request `pr`'s sticky comment, and
/// `status` on its head `head_sha`. Both are redacted first ([`crate::redact`]): whoever can
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
        Some(comment) if comment.body.as_deref() == Some(body) => Posted {
            comment_id: comment.id,
            action: CommentAction::Unchanged,
        },
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
