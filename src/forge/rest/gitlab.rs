//! GitLab's REST API (`/api/v4`) for [`RestForge`]: a pull request is a merge request (its
//! number the `iid`), its comments are notes, and the status is a commit status named
//! `capstan/preview`. The project is addressed by its URL-encoded path (`group%2Fname`).
//!
//! GitLab pages with `page`/`per_page` and says the next page in `x-next-page` (empty on the
//! last); notes come newest first unless `sort=asc` is asked.

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::{PER_PAGE, RestForge, decode, page_limit};
use crate::forge::{CommitStatus, ForgeError, ForgeKind, IssueComment, PullHead};

/// A merge request, as `GET /projects/:id/merge_requests` lists it.
#[derive(serde::Deserialize)]
struct MergeRequestPayload {
    iid: u64,
    sha: String,
    source_branch: String,
    target_branch: String,
}

impl From<MergeRequestPayload> for PullHead {
    fn from(merge_request: MergeRequestPayload) -> Self {
        PullHead {
            number: merge_request.iid,
            head_sha: merge_request.sha,
            head_ref: merge_request.source_branch,
            base_ref: merge_request.target_branch,
        }
    }
}

/// The `:id` of a project: its full path, URL-encoded (`group/sub/name` → `group%2Fsub%2Fname`).
pub fn project_id(path: &str) -> String {
    path.bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                char::from(byte).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}

/// Every page of `path`'s list, following `x-next-page`.
async fn all_pages<T: DeserializeOwned>(
    forge: &RestForge,
    operation: &str,
    path: &str,
    query: &[(&str, &str)],
) -> Result<Vec<T>, ForgeError> {
    let mut all = Vec::new();
    let mut page = 1;
    // Pages read, not the page number: a forge naming far-away pages is bounded too.
    for read in 1.. {
        page_limit(operation, read)?;
        let response = forge
            .send(operation, || {
                forge
                    .request(Method::GET, path)
                    .query(query)
                    .query(&forge.page(page))
            })
            .await?;
        let next = response
            .headers()
            .get("x-next-page")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<usize>().ok());
        let batch: Vec<T> = decode(operation, response).await?;
        let full = batch.len() >= PER_PAGE;
        all.extend(batch);
        match next {
            // A forge that omits the header (a proxy stripping it) is paged by a full page.
            Some(next) if next > page => page = next,
            None if full => page += 1,
            _ => break,
        }
    }
    Ok(all)
}

/// The notes on merge request `iid`, oldest first (system notes included: they never carry
/// the marker).
pub(super) async fn notes(forge: &RestForge, iid: u64) -> Result<Vec<IssueComment>, ForgeError> {
    all_pages(
        forge,
        &format!("list the notes on !{iid}"),
        &format!("/merge_requests/{iid}/notes"),
        &[("sort", "asc"), ("order_by", "created_at")],
    )
    .await
}

pub(super) async fn create_note(
    forge: &RestForge,
    iid: u64,
    body: &str,
) -> Result<IssueComment, ForgeError> {
    forge
        .json(&format!("add a note to !{iid}"), || {
            forge
                .request(Method::POST, &format!("/merge_requests/{iid}/notes"))
                .json(&json!({ "body": body }))
        })
        .await
}

pub(super) async fn edit_note(
    forge: &RestForge,
    iid: u64,
    id: u64,
    body: &str,
) -> Result<(), ForgeError> {
    forge
        .send(&format!("edit note {id} on !{iid}"), || {
            forge
                .request(Method::PUT, &format!("/merge_requests/{iid}/notes/{id}"))
                .json(&json!({ "body": body }))
        })
        .await
        .map(drop)
}

pub(super) async fn set_status(
    forge: &RestForge,
    sha: &str,
    status: &CommitStatus,
) -> Result<(), ForgeError> {
    forge
        .send(&format!("set the status of {sha}"), || {
            forge
                .request(Method::POST, &format!("/statuses/{sha}"))
                .json(&json!({
                    "state": ForgeKind::Gitlab.status_word(status.state),
                    "name": status.context,
                    "description": status.description,
                }))
        })
        .await
        .map(drop)
}

pub(super) async fn open_merge_requests(forge: &RestForge) -> Result<Vec<PullHead>, ForgeError> {
    let listed: Vec<MergeRequestPayload> = all_pages(
        forge,
        "list the open merge requests",
        "/merge_requests",
        &[("state", "opened")],
    )
    .await?;
    Ok(listed.into_iter().map(PullHead::from).collect())
}

pub(super) async fn merge_request(forge: &RestForge, iid: u64) -> Result<PullHead, ForgeError> {
    forge
        .json::<MergeRequestPayload>(&format!("read merge request !{iid}"), || {
            forge.request(Method::GET, &format!("/merge_requests/{iid}"))
        })
        .await
        .map(PullHead::from)
}

#[cfg(test)]
mod tests {
    use super::project_id;

    #[test]
    fn a_project_path_is_url_encoded_as_one_segment() {
        assert_eq!(project_id("acme/fleet"), "acme%2Ffleet");
        assert_eq!(project_id("acme/infra/fleet.v2"), "acme%2Finfra%2Ffleet.v2");
    }
}
