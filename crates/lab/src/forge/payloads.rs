//! The forge's JSON payloads, shaped as GitHub's OpenAPI description requires (every required
//! field present, with its type; nullable ones null when the lab has nothing to say).

use serde_json::{Value, json};

use super::{Comment, CommitStatus, Pull};

/// Where a payload's links point: the API base the request came through, and the web base.
pub(super) struct Links {
    /// `http://127.0.0.1:PORT/api/v3`.
    pub api: String,
    /// `http://127.0.0.1:PORT`.
    pub web: String,
}

/// Now, as GitHub writes times (`2026-04-29T12:00:00Z`).
pub(super) fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn node_id(prefix: &str, id: u64) -> String {
    format!("{prefix}_lab{id:08}")
}

/// A user id derived from the login, stable across calls.
fn user_id(login: &str) -> u64 {
    login.bytes().fold(1000_u64, |acc, b| {
        acc.wrapping_mul(31).wrapping_add(u64::from(b))
    }) % 1_000_000
}

/// A "Simple User".
pub(super) fn user(links: &Links, login: &str) -> Value {
    let api = format!("{}/users/{login}", links.api);
    let id = user_id(login);
    json!({
        "login": login,
        "id": id,
        "node_id": node_id("U", id),
        "avatar_url": format!("{}/avatars/{login}", links.web),
        "gravatar_id": "",
        "url": api,
        "html_url": format!("{}/{login}", links.web),
        "followers_url": format!("{api}/followers"),
        "following_url": format!("{api}/following{{/other_user}}"),
        "gists_url": format!("{api}/gists{{/gist_id}}"),
        "starred_url": format!("{api}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{api}/subscriptions"),
        "organizations_url": format!("{api}/orgs"),
        "repos_url": format!("{api}/repos"),
        "events_url": format!("{api}/events{{/privacy}}"),
        "received_events_url": format!("{api}/received_events"),
        "type": "User",
        "site_admin": false,
    })
}

/// The authenticated user (`GET /user`): a simple user plus the private-user fields clients
/// read.
pub(super) fn authenticated_user(links: &Links, login: &str) -> Value {
    let mut value = user(links, login);
    if let Value::Object(map) = &mut value {
        for (key, field) in [
            ("name", json!(login)),
            ("company", Value::Null),
            ("blog", json!("")),
            ("location", Value::Null),
            ("email", Value::Null),
            ("hireable", Value::Null),
            ("bio", Value::Null),
            ("public_repos", json!(1)),
            ("public_gists", json!(0)),
            ("followers", json!(0)),
            ("following", json!(0)),
            ("created_at", json!("2026-01-01T00:00:00Z")),
            ("updated_at", json!("2026-01-01T00:00:00Z")),
        ] {
            map.insert(key.to_owned(), field);
        }
    }
    value
}

/// A repository ("Repository" in pulls' head and base, and `GET /repos/{owner}/{repo}`).
pub(super) fn repository(links: &Links, owner: &str, name: &str) -> Value {
    let full = format!("{owner}/{name}");
    let api = format!("{}/repos/{full}", links.api);
    let html = format!("{}/{full}", links.web);
    let mut value = json!({
        "id": 1,
        "node_id": node_id("R", 1),
        "name": name,
        "full_name": full,
        "owner": user(links, owner),
        "private": false,
        "html_url": html,
        "description": null,
        "fork": false,
        "url": api,
        "clone_url": format!("{html}.git"),
        "git_url": format!("git://{}/{full}.git", links.web.split("://").nth(1).unwrap_or_default()),
        "ssh_url": format!("git@localhost:{full}.git"),
        "svn_url": html,
        "mirror_url": null,
        "homepage": null,
        "language": null,
        "license": null,
    });
    let counters = json!({
        "default_branch": "main",
        "forks": 0,
        "forks_count": 0,
        "open_issues": 0,
        "open_issues_count": 0,
        "size": 0,
        "stargazers_count": 0,
        "watchers": 0,
        "watchers_count": 0,
        "has_downloads": true,
        "has_issues": true,
        "has_projects": false,
        "has_wiki": false,
        "has_pages": false,
        "archived": false,
        "disabled": false,
        "pushed_at": "2026-01-01T00:00:00Z",
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "permissions": {"admin": false, "maintain": false, "push": true, "triage": true, "pull": true},
    });
    if let (Value::Object(map), Value::Object(more)) = (&mut value, counters) {
        map.extend(more);
    }
    // The hypermedia links GitHub lists for every repository, as URI templates.
    let templates = [
        ("archive_url", "/{archive_format}{/ref}"),
        ("assignees_url", "/assignees{/user}"),
        ("blobs_url", "/git/blobs{/sha}"),
        ("branches_url", "/branches{/branch}"),
        ("collaborators_url", "/collaborators{/collaborator}"),
        ("comments_url", "/comments{/number}"),
        ("commits_url", "/commits{/sha}"),
        ("compare_url", "/compare/{base}...{head}"),
        ("contents_url", "/contents/{+path}"),
        ("contributors_url", "/contributors"),
        ("deployments_url", "/deployments"),
        ("downloads_url", "/downloads"),
        ("events_url", "/events"),
        ("forks_url", "/forks"),
        ("git_commits_url", "/git/commits{/sha}"),
        ("git_refs_url", "/git/refs{/sha}"),
        ("git_tags_url", "/git/tags{/sha}"),
        ("hooks_url", "/hooks"),
        ("issue_comment_url", "/issues/comments{/number}"),
        ("issue_events_url", "/issues/events{/number}"),
        ("issues_url", "/issues{/number}"),
        ("keys_url", "/keys{/key_id}"),
        ("labels_url", "/labels{/name}"),
        ("languages_url", "/languages"),
        ("merges_url", "/merges"),
        ("milestones_url", "/milestones{/number}"),
        (
            "notifications_url",
            "/notifications{?since,all,participating}",
        ),
        ("pulls_url", "/pulls{/number}"),
        ("releases_url", "/releases{/id}"),
        ("stargazers_url", "/stargazers"),
        ("statuses_url", "/statuses/{sha}"),
        ("subscribers_url", "/subscribers"),
        ("subscription_url", "/subscription"),
        ("tags_url", "/tags"),
        ("teams_url", "/teams"),
        ("trees_url", "/git/trees{/sha}"),
    ];
    if let Value::Object(map) = &mut value {
        for (key, suffix) in templates {
            map.insert(key.to_owned(), json!(format!("{api}{suffix}")));
        }
    }
    value
}

/// A pull request ("Pull Request Simple" for lists, the same fields for one pull).
pub(super) fn pull(links: &Links, owner: &str, name: &str, author: &str, pull: &Pull) -> Value {
    let api = format!("{}/repos/{owner}/{name}", links.api);
    let html = format!("{}/{owner}/{name}/pull/{}", links.web, pull.number);
    let number = pull.number;
    let branch = |reference: &str, sha: &str| {
        json!({
            "label": format!("{owner}:{reference}"),
            "ref": reference,
            "sha": sha,
            "user": user(links, owner),
            "repo": repository(links, owner, name),
        })
    };
    let link = |href: String| json!({ "href": href });
    let closed = pull.state == "closed";
    let hypermedia = json!({
        "self": link(format!("{api}/pulls/{number}")),
        "html": link(html.clone()),
        "issue": link(format!("{api}/issues/{number}")),
        "comments": link(format!("{api}/issues/{number}/comments")),
        "review_comments": link(format!("{api}/pulls/{number}/comments")),
        "review_comment": link(format!("{api}/pulls/comments{{/number}}")),
        "commits": link(format!("{api}/pulls/{number}/commits")),
        "statuses": link(format!("{api}/statuses/{}", pull.head_sha)),
    });
    json!({
        "url": format!("{api}/pulls/{number}"),
        "id": number,
        "node_id": node_id("PR", number),
        "html_url": html,
        "diff_url": format!("{html}.diff"),
        "patch_url": format!("{html}.patch"),
        "issue_url": format!("{api}/issues/{number}"),
        "commits_url": format!("{api}/pulls/{number}/commits"),
        "review_comments_url": format!("{api}/pulls/{number}/comments"),
        "review_comment_url": format!("{api}/pulls/comments{{/number}}"),
        "comments_url": format!("{api}/issues/{number}/comments"),
        "statuses_url": format!("{api}/statuses/{}", pull.head_sha),
        "number": number,
        "state": pull.state,
        "locked": false,
        "title": pull.title,
        "user": user(links, author),
        "body": null,
        "labels": [],
        "milestone": null,
        "active_lock_reason": null,
        "created_at": pull.created_at,
        "updated_at": pull.created_at,
        "closed_at": if closed { json!(pull.created_at) } else { Value::Null },
        "merged_at": null,
        "merge_commit_sha": null,
        "assignee": null,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "head": branch(&pull.head_ref, &pull.head_sha),
        "base": branch(&pull.base_ref, &pull.base_sha),
        "_links": hypermedia,
        "author_association": "OWNER",
        "auto_merge": null,
        "draft": false,
    })
}

/// An issue comment.
pub(super) fn comment(links: &Links, owner: &str, name: &str, comment: &Comment) -> Value {
    let api = format!("{}/repos/{owner}/{name}", links.api);
    json!({
        "id": comment.id,
        "node_id": node_id("IC", comment.id),
        "url": format!("{api}/issues/comments/{}", comment.id),
        "html_url": format!("{}/{owner}/{name}/pull/{}#issuecomment-{}", links.web, comment.issue, comment.id),
        "body": comment.body,
        "user": user(links, &comment.author),
        "created_at": comment.created_at,
        "updated_at": comment.updated_at,
        "issue_url": format!("{api}/issues/{}", comment.issue),
        "author_association": "OWNER",
    })
}

/// A commit status.
pub(super) fn status(links: &Links, owner: &str, name: &str, status: &CommitStatus) -> Value {
    json!({
        "url": format!("{}/repos/{owner}/{name}/statuses/{}", links.api, status.sha),
        "avatar_url": null,
        "id": status.id,
        "node_id": node_id("SC", status.id),
        "state": status.state,
        "description": status.description,
        "target_url": status.target_url,
        "context": status.context,
        "created_at": status.created_at,
        "updated_at": status.created_at,
        "creator": user(links, &status.creator),
    })
}

/// What a single pull adds to a listed one: counts and merge state.
pub(super) struct PullDetail {
    /// Comments on it.
    pub comments: usize,
    /// Commits on the head not on the base.
    pub commits: usize,
    /// Files the change touches.
    pub changed_files: usize,
    /// Lines added.
    pub additions: usize,
    /// Lines removed.
    pub deletions: usize,
}

/// A pull request as `GET /pulls/{number}` answers: the listed fields and the detail.
pub(super) fn pull_detail(
    links: &Links,
    (owner, name, author): (&str, &str, &str),
    pull_request: &Pull,
    detail: &PullDetail,
) -> Value {
    let mut value = pull(links, owner, name, author, pull_request);
    if let Value::Object(map) = &mut value {
        map.extend(
            json!({
                "merged": false,
                "mergeable": true,
                "rebaseable": true,
                "mergeable_state": "clean",
                "merged_by": null,
                "comments": detail.comments,
                "review_comments": 0,
                "maintainer_can_modify": false,
                "commits": detail.commits,
                "additions": detail.additions,
                "deletions": detail.deletions,
                "changed_files": detail.changed_files,
            })
            .as_object()
            .cloned()
            .unwrap_or_default(),
        );
    }
    value
}
