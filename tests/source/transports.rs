//! Following a remote over each transport, against real servers: a pushed commit's revision
//! is seen, its files are read from the commit, and an idle poll fetches nothing.

use capstan::source::{
    GitCredentials, GitError, KnownHosts, PollOutcome, Redactor, Secret, TokenAuth,
};

use super::servers;
use capstan_testkit::git::open;
use capstan_testkit::{Remote, git, lab_cluster};

/// Polls, pushes a commit that scales `prod`, polls again: the new revision is the pushed
/// commit, its files say so, and a third poll is one ls-remote and no fetch.
fn a_pushed_commit_is_seen(remote: &Remote, url: &str, credentials: GitCredentials) {
    let (mut source, metrics) = open(remote.options(url, credentials));
    let head = git(&remote.work(), &["rev-parse", "HEAD"]);
    let first = source.poll().expect("first poll");
    assert_eq!(first.revision().to_string(), format!("main@sha1:{head}"));

    remote.write("clusters/prod.yaml", &lab_cluster("prod", 3));
    let pushed = remote.commit_and_push("prod: 3 workers");
    let PollOutcome::Moved {
        revision,
        previous,
        forced,
    } = source.poll().expect("second poll")
    else {
        panic!("the pushed commit is seen");
    };
    assert_eq!(revision.to_string(), format!("main@sha1:{pushed}"));
    assert_eq!(
        previous.map(|p| p.to_string()),
        Some(format!("main@sha1:{head}"))
    );
    assert!(!forced, "a fast-forward is not a force-push");
    let commit = source.read(&revision).expect("files read from the commit");
    let prod = commit
        .files
        .clusters
        .iter()
        .find(|f| f.path == "clusters/prod.yaml")
        .expect("prod.yaml read");
    assert!(prod.text.contains("replicas: 3"), "{}", prod.text);

    let fetches = metrics.fetch_total();
    let unchanged = source.poll().expect("third poll");
    assert!(
        matches!(unchanged, PollOutcome::Unchanged(_)),
        "{unchanged:?}"
    );
    assert_eq!(metrics.ls_remote_total(), 3);
    assert_eq!(
        metrics.fetch_total(),
        fetches,
        "an unchanged tip fetches nothing"
    );
}

#[test]
fn a_pushed_commit_is_seen_over_file_urls() {
    let remote = Remote::new();
    let url = format!("file://{}", remote.bare().display());
    a_pushed_commit_is_seen(&remote, &url, GitCredentials::default());
}

#[test]
fn a_pushed_commit_is_seen_over_git_daemon() {
    let remote = Remote::new();
    let Some(daemon) = servers::git_daemon(&remote.root()) else {
        return;
    };
    let url = format!("git://127.0.0.1:{}/fleet.git", daemon.port);
    a_pushed_commit_is_seen(&remote, &url, GitCredentials::default());
}

#[test]
fn a_pushed_commit_is_seen_over_ssh_with_a_key_and_known_hosts() {
    let remote = Remote::new();
    let Some(ssh) = servers::sshd() else {
        return;
    };
    let url = format!(
        "ssh://{}@127.0.0.1:{}{}",
        ssh.user,
        ssh.server.port,
        remote.bare().display()
    );
    let credentials = GitCredentials {
        ssh_key: Some(ssh.client_key.clone()),
        known_hosts: Some(KnownHosts::new(ssh.known_hosts.clone())),
        ..GitCredentials::default()
    };
    a_pushed_commit_is_seen(&remote, &url, credentials);
}

/// A token from a file, as `--git-token-from file:PATH` gives it.
fn token_credentials(dir: &std::path::Path, token: &str, redactor: &Redactor) -> GitCredentials {
    let file = dir.join("token");
    std::fs::write(&file, format!("{token}\n")).expect("token file");
    let secret = Secret::resolve(capstan::source::SecretFrom::File(file), &|_| None, redactor)
        .expect("secret");
    GitCredentials {
        token: Some(secret),
        username: "capstan".to_owned(),
        ..GitCredentials::default()
    }
}

#[test]
fn a_pushed_commit_is_seen_over_smart_http_with_basic_auth() {
    let remote = Remote::new();
    let token = "planted-token-7f3a9c";
    let Some(http) = servers::lighttpd(&remote.root(), "capstan", token) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/git/fleet.git", http.port);
    let credentials = token_credentials(http.dir.path(), token, &Redactor::default());
    a_pushed_commit_is_seen(&remote, &url, credentials);
}

#[test]
fn a_pushed_commit_is_seen_over_smart_http_with_a_bearer_token() {
    let remote = Remote::new();
    let token = "planted-bearer-token-31e8";
    let Some(http) = servers::lighttpd_bearer(&remote.root(), token) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/git/fleet.git", http.port);
    let mut credentials = token_credentials(http.dir.path(), token, &Redactor::default());
    credentials.token_auth = TokenAuth::Bearer;
    a_pushed_commit_is_seen(&remote, &url, credentials);

    let planted = "planted-wrong-bearer-77aa";
    let redactor = Redactor::default();
    let mut credentials = token_credentials(http.dir.path(), planted, &redactor);
    credentials.token_auth = TokenAuth::Bearer;
    let (mut source, _metrics) = open(remote.options(&url, credentials));
    let err = source.poll().expect_err("a wrong bearer token is refused");
    let shown = capstan::errors::error_chain(&err);
    assert!(matches!(err, GitError::LsRemote { .. }), "{shown}");
    assert!(!shown.contains(planted), "{shown}");
}

#[test]
fn a_refused_token_is_reported_without_its_value() {
    let remote = Remote::new();
    let Some(http) = servers::lighttpd(&remote.root(), "capstan", "the-right-token-1") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/git/fleet.git", http.port);
    let planted = "planted-wrong-token-5d21";
    let redactor = Redactor::default();
    let credentials = token_credentials(http.dir.path(), planted, &redactor);
    let metrics = std::sync::Arc::new(capstan::source::SourceMetrics::default());
    let mut source =
        capstan::source::GitSource::open(remote.options(&url, credentials), redactor, metrics)
            .expect("mirror");
    let err = source.poll().expect_err("refused");
    let shown = capstan::errors::error_chain(&err);
    assert!(matches!(err, GitError::LsRemote { .. }), "{shown}");
    assert!(err.is_transient());
    assert!(!shown.contains(planted), "{shown}");
    let debug = format!("{err:?} {source:?}");
    assert!(!debug.contains(planted), "{debug}");
}

#[test]
fn a_force_push_is_taken_and_reported_with_both_revisions() {
    let remote = Remote::new();
    let url = format!("file://{}", remote.bare().display());
    let (mut source, _metrics) = open(remote.options(&url, GitCredentials::default()));
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 2));
    let before = remote.commit_and_push("prod");
    source.poll().expect("first poll");
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 4));
    let after = remote.amend_and_force_push("prod, rewritten");
    let outcome = source.poll().expect("the rewritten branch is taken");
    let PollOutcome::Moved {
        revision,
        previous,
        forced,
    } = outcome
    else {
        panic!("moved: {outcome:?}");
    };
    assert!(forced, "reported as a force-push");
    assert_eq!(revision.to_string(), format!("main@sha1:{after}"));
    assert_eq!(
        previous.map(|p| p.to_string()),
        Some(format!("main@sha1:{before}"))
    );
    let files = source.read(&revision).expect("read");
    assert!(files.files.clusters[0].text.contains("replicas: 4"));
    // The mirror keeps working after the rewrite: a normal push on top is followed.
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 5));
    let next = remote.commit_and_push("prod: 5");
    let outcome = source.poll().expect("poll after the rewrite");
    assert_eq!(outcome.revision().to_string(), format!("main@sha1:{next}"));
}

#[test]
fn a_remote_going_down_is_a_transient_error_and_the_mirror_keeps_the_last_revision() {
    let remote = Remote::new();
    let Some(mut daemon) = servers::git_daemon(&remote.root()) else {
        return;
    };
    let url = format!("git://127.0.0.1:{}/fleet.git", daemon.port);
    let (mut source, _metrics) = open(remote.options(&url, GitCredentials::default()));
    let first = source.poll().expect("first poll").revision().clone();
    daemon.stop();
    let err = source.poll().expect_err("the remote is down");
    assert!(err.is_transient(), "{err}");
    assert!(
        capstan::errors::error_chain(&err).contains("cannot list the refs"),
        "{}",
        capstan::errors::error_chain(&err)
    );
    assert_eq!(source.last(), Some(&first));
    assert!(
        source.read(&first).is_ok(),
        "the last revision is still readable"
    );
}

/// `ssh-keygen -lf`'s SHA256 fingerprint of a public key file.
fn fingerprint_of(public_key: &std::path::Path) -> String {
    let output = std::process::Command::new("ssh-keygen")
        .arg("-lf")
        .arg(public_key)
        .output()
        .expect("ssh-keygen runs");
    let text = String::from_utf8(output.stdout).expect("utf-8");
    text.split_whitespace()
        .nth(1)
        .expect("fingerprint field")
        .to_owned()
}

#[test]
fn a_changed_ssh_host_key_is_refused_with_its_fingerprint() {
    let remote = Remote::new();
    let Some(ssh) = servers::sshd() else {
        return;
    };
    let url = format!(
        "ssh://{}@127.0.0.1:{}{}",
        ssh.user,
        ssh.server.port,
        remote.bare().display()
    );
    let wrong = servers::wrong_known_hosts(ssh.server.dir.path(), ssh.server.port);
    let credentials = GitCredentials {
        ssh_key: Some(ssh.client_key.clone()),
        known_hosts: Some(KnownHosts::new(wrong)),
        ..GitCredentials::default()
    };
    let (mut source, metrics) = open(remote.options(&url, credentials));
    let err = source.poll().expect_err("refused");
    let shown = capstan::errors::error_chain(&err);
    let server_key = fingerprint_of(&ssh.server.dir.path().join("host_ed25519.pub"));
    assert!(shown.contains("changed"), "{shown}");
    assert!(
        shown.contains(&server_key),
        "the presented key's fingerprint: {shown}"
    );
    assert_eq!(metrics.fetch_total(), 0, "nothing fetched from an impostor");

    let empty = ssh.server.dir.path().join("empty_known_hosts");
    std::fs::write(&empty, "").expect("write");
    let credentials = GitCredentials {
        ssh_key: Some(ssh.client_key.clone()),
        known_hosts: Some(KnownHosts::new(empty)),
        ..GitCredentials::default()
    };
    let (mut source, _metrics) = open(remote.options(&url, credentials));
    let shown = capstan::errors::error_chain(&source.poll().expect_err("unknown host"));
    assert!(shown.contains("is not in known_hosts"), "{shown}");
    assert!(shown.contains(&server_key), "{shown}");
}

#[test]
fn known_hosts_wildcards_and_negations_are_matched_as_openssh_matches_them() {
    let remote = Remote::new();
    let Some(ssh) = servers::sshd() else {
        return;
    };
    let url = format!(
        "ssh://{}@127.0.0.1:{}{}",
        ssh.user,
        ssh.server.port,
        remote.bare().display()
    );
    let line = std::fs::read_to_string(&ssh.known_hosts).expect("known_hosts");
    let key = line
        .split_once(' ')
        .expect("host and key")
        .1
        .trim()
        .to_owned();
    let port = ssh.server.port;
    let follow = |hosts: &str| {
        let file = ssh.server.dir.path().join("patterned_known_hosts");
        std::fs::write(&file, format!("{hosts} {key}\n")).expect("write");
        // OpenSSH's own lookup is the judge of whether the line names the server.
        let found = std::process::Command::new("ssh-keygen")
            .arg("-F")
            .arg(format!("[127.0.0.1]:{port}"))
            .arg("-f")
            .arg(&file)
            .output()
            .expect("ssh-keygen runs")
            .status
            .success();
        let credentials = GitCredentials {
            ssh_key: Some(ssh.client_key.clone()),
            known_hosts: Some(KnownHosts::new(file)),
            ..GitCredentials::default()
        };
        let (mut source, _metrics) = open(remote.options(&url, credentials));
        (source.poll().is_ok(), found)
    };
    // A wildcard (which the hand-written parser never matched) names the server.
    assert_eq!(follow(&format!("[127.0.0.*]:{port}")), (true, true));
    assert_eq!(
        follow(&format!("git.example,[127.0.0.?]:{port}")),
        (true, true)
    );
    // A matching negation excludes the line whatever else matches.
    assert_eq!(
        follow(&format!("[127.0.0.*]:{port},![127.0.0.1]:{port}")),
        (false, false)
    );
    // Another port is another host.
    assert_eq!(follow("[127.0.0.*]:1"), (false, false));
}

#[test]
fn a_symlink_or_submodule_in_the_tree_is_never_read() {
    let remote = Remote::new();
    std::os::unix::fs::symlink("/etc/shadow", remote.work().join("clusters/evil.yaml"))
        .expect("symlink");
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 2));
    // A submodule entry (gitlink) named like a cluster file.
    let some_commit = git(&remote.work(), &["rev-parse", "HEAD"]);
    git(
        &remote.work(),
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{some_commit},clusters/sub.yaml"),
        ],
    );
    let head = remote.commit_and_push("a link and a submodule among the clusters");
    let url = format!("file://{}", remote.bare().display());
    let (mut source, _metrics) = open(remote.options(&url, GitCredentials::default()));
    let revision = source.poll().expect("poll").revision().clone();
    assert!(revision.to_string().ends_with(&head));
    let commit = source.read(&revision).expect("read");
    let paths: Vec<&str> = commit
        .files
        .clusters
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(paths, ["clusters/prod.yaml"]);
    assert!(
        commit
            .skipped
            .iter()
            .any(|s| s.contains("clusters/evil.yaml")),
        "{:?}",
        commit.skipped
    );
}

#[test]
fn a_file_over_the_size_limit_is_refused_with_a_clear_error() {
    let remote = Remote::new();
    remote.write("clusters/huge.yaml", &"#".repeat(4096));
    remote.commit_and_push("a huge file");
    let url = format!("file://{}", remote.bare().display());
    let mut options = remote.options(&url, GitCredentials::default());
    options.limits.max_file_bytes = 1024;
    let (mut source, _metrics) = open(options);
    let revision = source.poll().expect("poll").revision().clone();
    let err = source.read(&revision).expect_err("refused");
    assert!(
        err.to_string().contains("clusters/huge.yaml")
            && err.to_string().contains("more than the limit of 1024"),
        "{err}"
    );
}

#[test]
fn only_the_path_given_is_read() {
    let remote = Remote::new();
    let fleet = std::fs::read_to_string(remote.work().join("capstan.yaml")).expect("fleet");
    remote.write("fleets/lab/capstan.yaml", &fleet);
    remote.write("fleets/lab/clusters/lab.yaml", &lab_cluster("lab", 2));
    remote.write("clusters/prod.yaml", &lab_cluster("prod", 2));
    remote.commit_and_push("two fleets");
    let url = format!("file://{}", remote.bare().display());
    let mut options = remote.options(&url, GitCredentials::default());
    options.path = Some("fleets/lab".into());
    let (mut source, _metrics) = open(options);
    let revision = source.poll().expect("poll").revision().clone();
    let commit = source.read(&revision).expect("read");
    let paths: Vec<&str> = commit
        .files
        .clusters
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(paths, ["clusters/lab.yaml"]);
}
