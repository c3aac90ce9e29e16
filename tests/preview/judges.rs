//! Real forge clients read what capstan posted to the lab forge: Debian's PyGithub (over
//! HTTP, GitHub Enterprise's `/api/v3`) and `gh api` (over HTTPS, as a GitHub Enterprise host
//! with `GH_ENTERPRISE_TOKEN`, trusting the forge's CA through `SSL_CERT_FILE`).

use std::process::Command;

use crate::forge::{NAME, OWNER, OnForge, TOKEN};
use capstan_testkit::judge::{Judge, present};

/// Posts the preview of a refused change (a skipped minor) and returns the forge, the pull
/// request and its head.
async fn posted_refusal() -> (OnForge, u64, String) {
    let (on, pr, head) = OnForge::minor_pull().await;
    on.post("minor", pr).await.assert_code(1);
    (on, pr, head)
}

fn output(command: &mut Command) -> String {
    let output = command.output().expect("the judge runs");
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pygithub_reads_the_sticky_comment_and_the_failed_status() {
    if !present(&[Judge::PyGithub]) {
        return;
    }
    let (on, pr, head) = posted_refusal().await;
    let script = format!(
        r#"
import github
from github.CommitStatus import CommitStatus
from github.PaginatedList import PaginatedList
g = github.Github(login_or_token="{TOKEN}", base_url="{url}/api/v3")
assert g.get_user().login == "capstan-bot"
repo = g.get_repo("{OWNER}/{NAME}")
pull = repo.get_pull({pr})
assert pull.head.ref == "minor", pull.head.ref
assert pull.head.sha == "{head}", pull.head.sha
sticky = [c for c in pull.get_issue_comments() if "<!-- capstan-preview -->" in c.body]
assert len(sticky) == 1, len(sticky)
assert sticky[0].user.login == "capstan-bot"
statuses = PaginatedList(CommitStatus, repo._requester, repo.url + "/commits/" + pull.head.sha + "/statuses", None)
preview = [s for s in statuses if s.context == "capstan/preview"]
print(preview[0].state)
print(preview[0].description)
"#,
        url = on.forge.http_url(),
    );
    let printed = tokio::task::spawn_blocking(move || {
        output(Command::new("/usr/bin/python3").args(["-c", &script]))
    })
    .await
    .expect("ran");
    let mut lines = printed.lines();
    assert_eq!(lines.next(), Some("failure"), "{printed}");
    assert!(
        lines
            .next()
            .is_some_and(|d| d.starts_with("refused: prod: ")),
        "{printed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gh_reads_the_comment_and_status_as_an_enterprise_host() {
    if !present(&[Judge::Gh]) {
        return;
    }
    let (on, pr, head) = posted_refusal().await;
    let config = tempfile::tempdir().expect("temp dir");
    let ca = config.path().join("forge-ca.pem");
    std::fs::write(&ca, on.forge.ca_pem()).expect("write the CA");
    // gh refuses a port in --hostname, so it is given the full URL of GitHub Enterprise
    // Server's layout (`https://HOST/api/v3/...`); the token goes to the host by name.
    let api = format!("https://127.0.0.1:{}/api/v3", on.forge.https_addr().port());
    let gh = |path: String, jq: &str| {
        let mut command = Command::new("gh");
        command
            .args(["api", &format!("{api}/{path}"), "--jq", jq])
            .env("GH_CONFIG_DIR", config.path())
            .env("GH_ENTERPRISE_TOKEN", TOKEN)
            .env("GH_HOST", "127.0.0.1")
            .env("SSL_CERT_FILE", &ca)
            .env("GH_NO_UPDATE_NOTIFIER", "1")
            .env("NO_COLOR", "1");
        output(&mut command)
    };
    let (comments_path, statuses_path, pull_path) = (
        format!("repos/{OWNER}/{NAME}/issues/{pr}/comments"),
        format!("repos/{OWNER}/{NAME}/commits/{head}/statuses"),
        format!("repos/{OWNER}/{NAME}/pulls/{pr}"),
    );
    // The forge serves on the runtime's other worker meanwhile.
    let (marked, state, pull_head) = tokio::task::block_in_place(|| {
        (
            gh(
                comments_path,
                r#"[.[] | select(.body | contains("<!-- capstan-preview -->"))] | length"#,
            ),
            gh(
                statuses_path,
                r#".[] | select(.context == "capstan/preview") | .state"#,
            ),
            gh(pull_path, ".head.sha"),
        )
    });
    assert_eq!(marked, "1");
    assert_eq!(state, "failure");
    assert_eq!(pull_head, head);
}
