//! Rollback and replay of signed history under `source.verify`: after signed B was applied,
//! signed A (B's parent) force-pushed back is refused with `NotDescendant` naming B, by the
//! daemon that applied B and by a new daemon whose mirror is empty (a new pod, a standby),
//! because B is recorded in the management cluster; nothing is planned from A. Both modes.
//! The daemons are real `capstan run` processes on one lab of this process.

use std::path::Path;

use capstan::source::verify::{Mode, Refusal, Rewrite, Verifier, VerifyPolicy};

use super::verify::{Keys, Sign, commit, revision_of, source_verified};
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::process::CapstanRun;
use capstan_testkit::{Remote, World, git};

/// `capstan run` on `world`'s lab (its management cluster shared by every daemon), following
/// `url` with `config`; its mirrors and log in `dir`.
fn spawn_on(
    world: &World,
    dir: &Path,
    url: &str,
    config: &Path,
) -> (CapstanRun, std::net::SocketAddr) {
    let token = world.lab.lab_file().proxmox.token;
    let mut run = CapstanRun::start(dir, |command| {
        command
            .args(["--repo", url, "--log"])
            .arg(format!("warn,{}", capstan_testkit::announced::ANNOUNCING))
            .arg("--lab-addresses")
            .arg(world.state.path())
            .arg("--config")
            .arg(config)
            .args(world.real_fleet_args())
            .env("CAPSTAN_PROXMOX_HOMELAB_TOKEN", token);
    });
    let address = run.address();
    (run, address)
}

/// The verified-revision records in the lab's management cluster, as kubectl lists them:
/// `name kind branch commit` per line.
fn records(world: &World) -> String {
    world.kubectl(
        "management",
        &[
            "get",
            "secrets",
            "-n",
            "capstan-system",
            "-l",
            "app.kubernetes.io/managed-by=capstan",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.metadata.annotations.capstan\\.dev/record-kind} {.metadata.annotations.capstan\\.dev/branch} {.data.commit}{\"\\n\"}{end}",
        ],
    )
}

fn base64_decode(text: &str) -> String {
    use base64::Engine as _;
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .expect("base64"),
    )
    .expect("utf-8")
}

/// The rollback, in `mode`: A then B applied, A force-pushed back; refused by the daemon
/// that applied B, then by a new daemon with an empty mirror.
fn rollback_is_refused(mode: &str) {
    if !judge::present(&[Judge::SshKeygen, Judge::Kubectl]) {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    // The lab runs on the runtime's workers while this thread waits on the daemons.
    let world = runtime.block_on(World::new("", &[]));
    let keys = Keys::new();
    let alice = keys.ssh("alice");
    std::fs::write(
        keys.dir.path().join("allowed_signers"),
        format!("alice@example.com {}\n", keys.ssh_public("alice")),
    )
    .expect("allowed signers");
    let remote = Remote::with_fleet(&format!("{}pollInterval: 1s\n", world.real_fleet()));
    let work = remote.work();
    let first = git(&work, &["rev-parse", "HEAD"]);
    let config = keys.dir.path().join("capstan-config.yaml");
    std::fs::write(
        &config,
        format!("apiVersion: capstan.dev/v1alpha1\nkind: DaemonConfig\nsource:\n  verify:\n    mode: {mode}\n    allowedSigners: allowed_signers\n    since: {first}\n"),
    )
    .expect("config");
    remote.write("clusters/README.md", "A\n");
    let a = commit(&work, &keys, &Sign::Ssh(&alice), "A, signed");
    git(&work, &["push", "-q", "origin", "HEAD:main"]);
    let url = remote.file_url();
    let dir = tempfile::tempdir().expect("dir");
    let (mut daemon, addr) = spawn_on(&world, dir.path(), &url, &config);
    let applied = |commit: &str| {
        let revision = format!("main@sha1:{commit}");
        move |body: &str| {
            revision_of(body).as_deref() == Some(revision.as_str())
                && source_verified(body).is_some_and(|(status, _, _)| status == "True")
        }
    };
    daemon.wait_status(addr, "A applied", &applied(&a));
    remote.write("clusters/README.md", "B\n");
    let b = commit(&work, &keys, &Sign::Ssh(&alice), "B, signed");
    git(&work, &["push", "-q", "origin", "HEAD:main"]);
    daemon.wait_status(addr, "B applied", &applied(&b));
    let listed = records(&world);
    let line = listed
        .lines()
        .find(|line| line.contains("verified-revision"))
        .unwrap_or_else(|| panic!("a verified-revision record: {listed}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[1..3], ["verified-revision", "main"], "{line}");
    assert_eq!(base64_decode(fields[3]), b, "B is recorded");

    // A pushed back: signed, and older.
    git(
        &work,
        &["push", "-q", "--force", "origin", &format!("{a}:main")],
    );
    let refused = |body: &str| {
        source_verified(body).is_some_and(|(status, reason, message)| {
            status == "False"
                && reason == "NotDescendant"
                && message.contains(&format!("does not descend from {b}"))
                && message.contains("allowRewrite")
        })
    };
    let body = daemon.wait_status(addr, "A refused by the daemon that applied B", &refused);
    let b_revision = format!("main@sha1:{b}");
    assert_eq!(
        revision_of(&body).as_deref(),
        Some(b_revision.as_str()),
        "{body}"
    );
    assert!(body.contains("not applied (source.verify)"), "{body}");
    drop(daemon);

    // A new daemon, its mirror empty: the branch holds A alone, B only in the record.
    let fresh = tempfile::tempdir().expect("dir");
    let (mut daemon, addr) = spawn_on(&world, fresh.path(), &url, &config);
    let body = daemon.wait_status(addr, "A refused by a daemon with an empty mirror", &refused);
    assert_eq!(
        revision_of(&body),
        None,
        "nothing is planned from A: {body}"
    );
    assert!(body.contains("which the branch no longer holds"), "{body}");
    let listed = records(&world);
    assert!(
        listed.contains(&base64_encode(&b)),
        "B stays recorded: {listed}"
    );
    drop(runtime);
}

fn base64_encode(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[test]
fn an_older_signed_commit_pushed_back_is_refused_in_mode_all_even_by_a_daemon_with_an_empty_mirror()
{
    rollback_is_refused("all");
}

#[test]
fn an_older_signed_commit_pushed_back_is_refused_in_mode_head_even_by_a_daemon_with_an_empty_mirror()
 {
    rollback_is_refused("head");
}

#[test]
fn a_tip_must_descend_from_the_last_verified_revision_unless_that_rewrite_is_allowed() {
    let remote = Remote::new();
    let work = remote.work();
    let base = git(&work, &["rev-parse", "HEAD"]);
    std::fs::write(work.join("a.txt"), "a").expect("write");
    git(&work, &["add", "-A"]);
    git(
        &work,
        &[
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "-m",
            "a",
        ],
    );
    let a = git(&work, &["rev-parse", "HEAD"]);
    std::fs::write(work.join("b.txt"), "b").expect("write");
    git(&work, &["add", "-A"]);
    git(
        &work,
        &[
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "-m",
            "b",
        ],
    );
    let b = git(&work, &["rev-parse", "HEAD"]);
    // Another branch's commit off the base.
    git(&work, &["checkout", "-q", "-b", "other", &base]);
    std::fs::write(work.join("c.txt"), "c").expect("write");
    git(&work, &["add", "-A"]);
    git(
        &work,
        &[
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "-m",
            "c",
        ],
    );
    let c = git(&work, &["rev-parse", "HEAD"]);
    let repository = git2::Repository::open(&work).expect("repository");
    let oid = |text: &str| git2::Oid::from_str(text).expect("oid");
    let policy = |allow_rewrite| VerifyPolicy {
        mode: Mode::Head,
        allowed_signers: None,
        openpgp_keys: None,
        max_commits: VerifyPolicy::DEFAULT_MAX_COMMITS,
        since: None,
        allow_rewrite,
    };
    let verifier = Verifier::new(policy(None));
    let descent = |verifier: &Verifier, tip: &str, last: Option<&str>| {
        verifier.check_descent(&repository, oid(tip), last.map(oid))
    };
    assert!(descent(&verifier, &b, Some(&a)).is_ok(), "B follows A");
    assert!(
        descent(&verifier, &b, Some(&b)).is_ok(),
        "the same revision"
    );
    assert!(descent(&verifier, &a, None).is_ok(), "nothing verified yet");
    for (tip, what) in [(&a, "a rollback"), (&c, "another branch's commit")] {
        let refusal = descent(&verifier, tip, Some(&b)).expect_err(what);
        assert_eq!(refusal.reason(), "NotDescendant", "{what}: {refusal}");
        assert!(
            matches!(
                refusal,
                Refusal::NotDescendant {
                    in_mirror: true,
                    ..
                }
            ),
            "{refusal:?}"
        );
        assert!(
            refusal
                .to_string()
                .contains(&format!("allowRewrite: {{from: {b}, to: {tip}}}")),
            "the refusal says how to allow it: {refusal}"
        );
    }
    let gone = "1".repeat(40);
    let refusal = descent(&verifier, &b, Some(&gone)).expect_err("a lost revision");
    assert!(refusal.to_string().contains("no longer holds"), "{refusal}");
    let allowing = Verifier::new(policy(Some(Rewrite {
        from: oid(&b),
        to: oid(&c),
    })));
    assert!(
        descent(&allowing, &c, Some(&b)).is_ok(),
        "the rewrite allowed"
    );
    assert!(
        descent(&allowing, &a, Some(&b)).is_err(),
        "only that rewrite"
    );
    assert!(
        descent(&allowing, &c, Some(&a)).is_err(),
        "only from that revision: once applied, it allows nothing more"
    );
}
