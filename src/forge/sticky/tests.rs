use std::sync::Mutex;

use super::*;
use crate::forge::{ForgeKind, IssueComment, PullHead};
use crate::preview::Refusal;
use crate::preview::comment::GITHUB_COMMENT_LIMIT;

/// A forge in memory, counting calls by verb.
#[derive(Default)]
struct Fake {
    comments: Mutex<Vec<IssueComment>>,
    statuses: Mutex<Vec<(String, CommitStatus)>>,
    calls: Mutex<Vec<&'static str>>,
}

impl Fake {
    fn called(&self, verb: &'static str) {
        self.calls.lock().expect("lock").push(verb);
    }

    fn count(&self, verb: &str) -> usize {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .filter(|v| **v == verb)
            .count()
    }
}

impl ForgeApi for Fake {
    fn kind(&self) -> ForgeKind {
        ForgeKind::Github
    }

    async fn comments(&self, _pr: u64) -> Result<Vec<IssueComment>, ForgeError> {
        self.called("list");
        Ok(self.comments.lock().expect("lock").clone())
    }

    async fn create_comment(&self, _pr: u64, body: &str) -> Result<IssueComment, ForgeError> {
        self.called("create");
        let mut comments = self.comments.lock().expect("lock");
        let comment = IssueComment {
            id: 100 + comments.len() as u64,
            body: Some(body.to_owned()),
        };
        comments.push(comment.clone());
        Ok(comment)
    }

    async fn edit_comment(&self, _pr: u64, id: u64, body: &str) -> Result<(), ForgeError> {
        self.called("edit");
        for comment in self.comments.lock().expect("lock").iter_mut() {
            if comment.id == id {
                comment.body = Some(body.to_owned());
            }
        }
        Ok(())
    }

    async fn set_status(&self, sha: &str, status: &CommitStatus) -> Result<(), ForgeError> {
        self.called("status");
        self.statuses
            .lock()
            .expect("lock")
            .push((sha.to_owned(), status.clone()));
        Ok(())
    }

    async fn open_pulls(&self) -> Result<Vec<PullHead>, ForgeError> {
        Ok(Vec::new())
    }

    async fn pull(&self, pr: u64) -> Result<PullHead, ForgeError> {
        Err(ForgeError::Status {
            operation: format!("read #{pr}"),
            status: 404,
            message: "Not Found".into(),
        })
    }
}

fn success() -> CommitStatus {
    CommitStatus {
        state: StatusState::Success,
        description: "prod: +1 worker".into(),
        context: STATUS_CONTEXT.into(),
    }
}

#[tokio::test]
async fn the_same_text_twice_makes_one_comment_and_no_edit() {
    let forge = Fake::default();
    forge.comments.lock().expect("lock").extend([
        IssueComment {
            id: 1,
            body: Some("LGTM".into()),
        },
        IssueComment {
            id: 2,
            body: Some(format!("> {MARKER}\n> quoted by a reviewer")),
        },
    ]);
    let body = format!("{MARKER}\n### capstan preview");
    let first = post(&forge, 7, "abc", &body, &success())
        .await
        .expect("post");
    let second = post(&forge, 7, "abc", &body, &success())
        .await
        .expect("post");
    assert_eq!(first.action, CommentAction::Created);
    assert_eq!(second.action, CommentAction::Unchanged);
    assert_eq!(first.comment_id, second.comment_id);
    assert_eq!((forge.count("create"), forge.count("edit")), (1, 0));
    assert_eq!(forge.comments.lock().expect("lock").len(), 3);
}

#[tokio::test]
async fn new_text_edits_the_marked_comment_in_place() {
    let forge = Fake::default();
    let first = post(&forge, 7, "abc", &format!("{MARKER}\nold"), &success())
        .await
        .expect("post");
    let second = post(&forge, 7, "def", &format!("{MARKER}\nnew"), &success())
        .await
        .expect("post");
    assert_eq!(second.action, CommentAction::Edited);
    assert_eq!(second.comment_id, first.comment_id);
    let comments = forge.comments.lock().expect("lock").clone();
    assert_eq!(comments.len(), 1);
    assert_eq!(
        comments[0].body.as_deref(),
        Some(&*format!("{MARKER}\nnew"))
    );
    let statuses = forge.statuses.lock().expect("lock").clone();
    assert_eq!(statuses.last().map(|(sha, _)| sha.as_str()), Some("def"));
}

fn preview(refusals: Vec<Refusal>) -> Preview {
    Preview {
        base: "main@sha1:1".into(),
        head: "change@sha1:2".into(),
        now: jiff::Timestamp::UNIX_EPOCH,
        summary: "prod: upgrade 1.36 → 1.38".into(),
        stages: Vec::new(),
        refusals,
        fleet_diff: String::new(),
        clusters: Vec::new(),
    }
}

#[test]
fn a_refused_preview_fails_its_status_naming_the_refusal() {
    let refused = preview(vec![Refusal {
        cluster: Some("prod".into()),
        rule: "rule 4: upgrades".into(),
        location: None,
        field: None,
        message: "1.38 skips the minor 1.37 ".repeat(10),
        fix: None,
        on_base: false,
    }]);
    let status = status_for(&refused);
    assert_eq!(status.state, StatusState::Failure);
    assert!(
        status
            .description
            .starts_with("refused: prod: rule 4: upgrades: 1.38 skips"),
        "{}",
        status.description
    );
    assert_eq!(status.description.chars().count(), DESCRIPTION_LIMIT);
    let fine = status_for(&preview(Vec::new()));
    assert_eq!(fine.state, StatusState::Success);
    assert_eq!(fine.description, "prod: upgrade 1.36 → 1.38");
    assert_eq!(fine.context, "capstan/preview");
}

#[tokio::test]
async fn a_secret_capstan_generated_reaches_the_forge_only_as_stars() {
    let forge = Fake::default();
    // A K3s token or datastore password, generated as the executor generates them.
    let secret = crate::providers::datastore::generate_secret().expect("random");
    let body = format!("{MARKER}\nthe server said: level=fatal token={secret}");
    let status = CommitStatus {
        state: StatusState::Failure,
        description: format!("refused: edge: {secret}"),
        context: STATUS_CONTEXT.into(),
    };
    post(&forge, 7, "abc", &body, &status).await.expect("post");
    let comments = forge.comments.lock().expect("lock").clone();
    let posted = comments[0].body.clone().unwrap_or_default();
    assert_eq!(
        posted,
        format!("{MARKER}\nthe server said: level=fatal token=***")
    );
    let statuses = forge.statuses.lock().expect("lock").clone();
    assert_eq!(statuses[0].1.description, "refused: edge: ***");
    let again = post(&forge, 7, "abc", &body, &status).await.expect("post");
    assert_eq!(
        again.action,
        CommentAction::Unchanged,
        "the redacted comment is found equal to the redacted text"
    );
}

#[tokio::test]
async fn a_preview_planned_again_at_another_time_edits_nothing() {
    let forge = Fake::default();
    let earlier = preview(Vec::new());
    let later = Preview {
        now: jiff::Timestamp::from_second(3_600).expect("time"),
        ..earlier.clone()
    };
    let (first, second) = (
        sticky_comment(&earlier, GITHUB_COMMENT_LIMIT),
        sticky_comment(&later, GITHUB_COMMENT_LIMIT),
    );
    assert_ne!(first, second, "the comment shows when it was planned");
    assert!(first.starts_with(MARKER), "{first}");
    post(&forge, 7, "abc", &first, &success())
        .await
        .expect("post");
    let again = post(&forge, 7, "abc", &second, &success())
        .await
        .expect("post");
    assert_eq!(again.action, CommentAction::Unchanged);
    assert_eq!(forge.count("edit"), 0);

    let changed = Preview {
        summary: "prod: +2 workers".into(),
        ..later
    };
    let edited = post(
        &forge,
        7,
        "abc",
        &sticky_comment(&changed, GITHUB_COMMENT_LIMIT),
        &success(),
    )
    .await
    .expect("post");
    assert_eq!(edited.action, CommentAction::Edited);
}

#[test]
fn the_sticky_comment_keeps_within_the_forges_limit() {
    let long = Preview {
        fleet_diff: "+ a line of the fleet file\n".repeat(400),
        ..preview(Vec::new())
    };
    let limit = 2_000;
    let body = sticky_comment(&long, limit);
    assert!(body.chars().count() <= limit, "{}", body.chars().count());
    assert!(fingerprint_in(&body).is_some(), "{body}");
}
