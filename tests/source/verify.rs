//! Verified commits, judged by the stock tools: commits signed by `git` with `gpg.format=ssh`
//! (`ssh-keygen -Y sign`) and with GnuPG, and `git verify-commit` (with the same allowed-signers
//! file, and a GnuPG home holding only the allowed OpenPGP keys) agreeing with capstan on every
//! case; then `capstan run --config` following a remote: a commit by a key not allowed is not
//! applied, a key rotated in the allowed-signers file is taken without a restart, a force-push to
//! an unsigned commit is not applied (before and after a restart). Rollbacks to older signed
//! commits are `rollback`'s.

use std::path::{Path, PathBuf};
use std::process::Command;

use capstan::source::verify::{Mode, Refusal, Verifier, VerifyPolicy};

use super::servers;
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::process::CapstanRun;
use capstan_testkit::{Remote, git};

/// Signing keys made for one test: SSH keys, and GnuPG keys in a throwaway GNUPGHOME.
pub(super) struct Keys {
    pub(super) dir: tempfile::TempDir,
}

impl Drop for Keys {
    fn drop(&mut self) {
        // GnuPG starts an agent per home: stop the ones this test started.
        for home in [self.gnupg_home(), self.judge_home()] {
            let _ = Command::new("gpgconf")
                .args(["--kill", "gpg-agent"])
                .env("GNUPGHOME", home)
                .status();
        }
    }
}

impl Keys {
    pub(super) fn new() -> Keys {
        let keys = Keys {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        std::fs::create_dir(keys.gnupg_home()).expect("gnupg home");
        std::fs::create_dir(keys.judge_home()).expect("judge home");
        for home in [keys.gnupg_home(), keys.judge_home()] {
            std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .expect("chmod");
        }
        keys
    }

    fn gnupg_home(&self) -> PathBuf {
        self.dir.path().join("gnupg")
    }

    /// The judge's GNUPGHOME: only the allowed keys, imported from the file capstan reads.
    fn judge_home(&self) -> PathBuf {
        self.dir.path().join("judge")
    }

    /// A new SSH key `name` (ed25519); its private key file.
    pub(super) fn ssh(&self, name: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        run(Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
            .arg(&path));
        path
    }

    /// The public half of SSH key `name`, as `type base64`.
    pub(super) fn ssh_public(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.path().join(format!("{name}.pub")))
            .expect("public key");
        text.split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A new GnuPG key (`algorithm` as `--quick-gen-key` takes it); its fingerprint.
    fn gpg(&self, name: &str, algorithm: &str) -> String {
        let uid = format!("{name} <{name}@example.com>");
        run(self
            .gpg_command()
            .args(["--passphrase", "", "--quick-gen-key", &uid, algorithm])
            .args(["default", "never"]));
        let listing = run(self
            .gpg_command()
            .args(["--with-colons", "--list-keys", &uid]));
        listing
            .lines()
            .find_map(|line| line.strip_prefix("fpr:"))
            .and_then(|rest| rest.split(':').find(|f| f.len() == 40))
            .expect("a fingerprint")
            .to_owned()
    }

    fn gpg_command(&self) -> Command {
        let mut command = Command::new("gpg");
        command
            .args(["--batch", "--quiet", "--pinentry-mode", "loopback"])
            .env("GNUPGHOME", self.gnupg_home());
        command
    }

    /// Revokes key `fingerprint` with the certificate GnuPG made when it generated the key.
    fn revoke(&self, fingerprint: &str) {
        let certificate = self
            .gnupg_home()
            .join("openpgp-revocs.d")
            .join(format!("{fingerprint}.rev"));
        let text = std::fs::read_to_string(certificate).expect("revocation certificate");
        // GnuPG prefixes the armor line with `:` so that it is not imported by accident.
        let armored = text.replace(
            ":-----BEGIN PGP PUBLIC KEY BLOCK-----",
            "-----BEGIN PGP PUBLIC KEY BLOCK-----",
        );
        let file = self.dir.path().join("revocation.asc");
        std::fs::write(&file, armored).expect("write");
        run(self.gpg_command().arg("--import").arg(&file));
    }

    /// Writes the OpenPGP keys file (the public keys `fingerprints`, as `gpg --armor --export`
    /// writes them) and imports it, alone, into the judge's GNUPGHOME.
    fn export(&self, fingerprints: &[&str]) -> PathBuf {
        let path = self.dir.path().join("openpgp.asc");
        let exported = run(self
            .gpg_command()
            .args(["--armor", "--export"])
            .args(fingerprints));
        std::fs::write(&path, exported).expect("write keys");
        run(Command::new("gpg")
            .args(["--batch", "--quiet", "--import"])
            .arg(&path)
            .env("GNUPGHOME", self.judge_home()));
        path
    }
}

/// Runs `command`, failing loudly; its standard output.
fn run(command: &mut Command) -> String {
    let output = command.output().expect("the command runs");
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// How a commit is made.
pub(super) enum Sign<'a> {
    Unsigned,
    Ssh(&'a Path),
    Gpg(&'a str),
}

/// Commits everything in `work` (`git commit -S` as `sign` says); the commit id.
pub(super) fn commit(work: &Path, keys: &Keys, sign: &Sign<'_>, message: &str) -> String {
    let mut command = Command::new("git");
    command
        .current_dir(work)
        .env("GNUPGHOME", keys.gnupg_home())
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"]);
    match sign {
        Sign::Unsigned => {}
        Sign::Ssh(key) => {
            command
                .args(["-c", "gpg.format=ssh", "-c"])
                .arg(format!("user.signingkey={}", key.display()));
        }
        Sign::Gpg(fingerprint) => {
            command.args([
                "-c",
                "gpg.program=gpg",
                "-c",
                &format!("user.signingkey={fingerprint}"),
            ]);
        }
    }
    git(work, &["add", "-A"]);
    command.args(["commit", "-q", "--allow-empty", "-m", message]);
    if !matches!(sign, Sign::Unsigned) {
        command.arg("-S");
    }
    run(&mut command);
    git(work, &["rev-parse", "HEAD"])
}

/// The judge: `git verify-commit` with `allowed_signers` and the judge's GnuPG home.
fn git_verifies(work: &Path, keys: &Keys, allowed_signers: &Path, commit: &str) -> bool {
    Command::new("git")
        .current_dir(work)
        .env("GNUPGHOME", keys.judge_home())
        .arg("-c")
        .arg(format!(
            "gpg.ssh.allowedSignersFile={}",
            allowed_signers.display()
        ))
        .args(["verify-commit", commit])
        .output()
        .expect("git verify-commit runs")
        .status
        .success()
}

/// A copy of commit `commit` whose message is changed but whose signature is kept.
fn tampered(work: &Path, commit: &str) -> String {
    let raw = git(work, &["cat-file", "commit", commit]);
    let forged = format!("{raw} (tampered)\n");
    let file = work.join("../forged-commit");
    std::fs::write(&file, forged).expect("write");
    git(
        work,
        &[
            "hash-object",
            "-t",
            "commit",
            "-w",
            file.to_str().expect("path"),
        ],
    )
}

fn policy(mode: Mode, allowed_signers: &Path, openpgp_keys: Option<PathBuf>) -> VerifyPolicy {
    VerifyPolicy {
        mode,
        allowed_signers: Some(allowed_signers.to_owned()),
        openpgp_keys,
        max_commits: VerifyPolicy::DEFAULT_MAX_COMMITS,
        since: None,
        allow_rewrite: None,
    }
}

fn oid(commit: &str) -> git2::Oid {
    git2::Oid::from_str(commit).expect("commit id")
}

#[test]
fn capstan_and_git_verify_commit_agree_on_every_signed_commit() {
    if !judge::present(&[Judge::Gpg, Judge::SshKeygen]) {
        return;
    }
    let keys = Keys::new();
    let remote = Remote::new();
    let work = remote.work();
    let (alice, mallory, vera) = (keys.ssh("alice"), keys.ssh("mallory"), keys.ssh("vera"));
    let allowed_signers = keys.dir.path().join("allowed_signers");
    std::fs::write(
        &allowed_signers,
        format!(
            "alice@example.com {}\nvera@example.com valid-before=\"20000101Z\" {}\n",
            keys.ssh_public("alice"),
            keys.ssh_public("vera")
        ),
    )
    .expect("allowed signers");
    // carol signs with an ed25519 signing subkey, erin with an RSA primary key; frank's key is
    // revoked after he signs; dave is not allowed.
    let carol = keys.gpg("carol", "future-default");
    run(keys.gpg_command().args([
        "--passphrase",
        "",
        "--quick-add-key",
        &carol,
        "ed25519",
        "sign",
        "never",
    ]));
    let erin = keys.gpg("erin", "rsa3072");
    let frank = keys.gpg("frank", "future-default");
    let dave = keys.gpg("dave", "future-default");

    let cases = [
        (
            "ssh, allowed",
            commit(&work, &keys, &Sign::Ssh(&alice), "alice"),
            None,
        ),
        (
            "ssh, not allowed",
            commit(&work, &keys, &Sign::Ssh(&mallory), "mallory"),
            Some("KeyNotAllowed"),
        ),
        (
            "ssh, outside its line's validity",
            commit(&work, &keys, &Sign::Ssh(&vera), "vera"),
            Some("KeyNotValid"),
        ),
        (
            "unsigned",
            commit(&work, &keys, &Sign::Unsigned, "nobody"),
            Some("Unsigned"),
        ),
        (
            "openpgp subkey, allowed",
            commit(&work, &keys, &Sign::Gpg(&carol), "carol"),
            None,
        ),
        (
            "openpgp rsa, allowed",
            commit(&work, &keys, &Sign::Gpg(&erin), "erin"),
            None,
        ),
        (
            "openpgp, revoked",
            commit(&work, &keys, &Sign::Gpg(&frank), "frank"),
            Some("KeyNotValid"),
        ),
        (
            "openpgp, not allowed",
            commit(&work, &keys, &Sign::Gpg(&dave), "dave"),
            Some("KeyNotAllowed"),
        ),
    ];
    keys.revoke(&frank);
    let openpgp_keys = keys.export(&[&carol, &erin, &frank]);
    let tampered_cases = [
        (
            "ssh, tampered",
            tampered(&work, &cases[0].1),
            Some("BadSignature"),
        ),
        (
            "openpgp, tampered",
            tampered(&work, &cases[4].1),
            Some("BadSignature"),
        ),
    ];

    let verifier = Verifier::new(policy(Mode::Head, &allowed_signers, Some(openpgp_keys)));
    let repository = git2::Repository::open(&work).expect("repository");
    for (case, commit, refused) in cases.iter().chain(tampered_cases.iter()) {
        let verdict = verifier.verify(&repository, oid(commit), &[]);
        let judged = git_verifies(&work, &keys, &allowed_signers, commit);
        assert_eq!(
            verdict.is_ok(),
            judged,
            "{case}: capstan says {verdict:?}, git verify-commit says {judged}"
        );
        match (refused, &verdict) {
            (None, Ok(verified)) => assert_eq!(verified.commit, oid(commit), "{case}"),
            (Some(reason), Err(refusal)) => {
                assert_eq!(refusal.reason(), *reason, "{case}: {refusal}");
                assert!(
                    refusal.to_string().contains(commit.as_str()),
                    "{case}: {refusal}"
                );
            }
            _ => panic!("{case}: expected {refused:?}, capstan says {verdict:?}"),
        }
    }
    // A refusal names the signer's key as the stock tools print it.
    let mallory_refusal = verifier
        .verify(&repository, oid(&cases[1].1), &[])
        .expect_err("mallory");
    let mallory_fingerprint = run(Command::new("ssh-keygen")
        .args(["-l", "-E", "sha256", "-f"])
        .arg(mallory.with_extension("pub")));
    let fingerprint = mallory_fingerprint
        .split_whitespace()
        .nth(1)
        .expect("fingerprint");
    assert!(
        mallory_refusal.to_string().contains(fingerprint),
        "{mallory_refusal}"
    );
    let dave_refusal = verifier
        .verify(&repository, oid(&cases[7].1), &[])
        .expect_err("dave");
    assert!(
        matches!(&dave_refusal, Refusal::KeyNotAllowed { fingerprint, .. } if *fingerprint == dave),
        "{dave_refusal}"
    );
}

#[test]
fn mode_all_verifies_every_commit_a_tip_brings_and_says_when_there_are_too_many() {
    if !judge::present(&[Judge::SshKeygen]) {
        return;
    }
    let keys = Keys::new();
    let remote = Remote::new();
    let work = remote.work();
    let alice = keys.ssh("alice");
    let allowed_signers = keys.dir.path().join("allowed_signers");
    std::fs::write(
        &allowed_signers,
        format!("alice {}\n", keys.ssh_public("alice")),
    )
    .expect("allowed signers");
    let first = commit(&work, &keys, &Sign::Ssh(&alice), "signed");
    let unsigned = commit(&work, &keys, &Sign::Unsigned, "slipped in unsigned");
    let tip = commit(&work, &keys, &Sign::Ssh(&alice), "signed on top");
    let repository = git2::Repository::open(&work).expect("repository");

    let head = Verifier::new(policy(Mode::Head, &allowed_signers, None));
    assert!(head.verify(&repository, oid(&tip), &[oid(&first)]).is_ok());

    let all = Verifier::new(policy(Mode::All, &allowed_signers, None));
    let refusal = all
        .verify(&repository, oid(&tip), &[oid(&first)])
        .expect_err("an unsigned commit in between");
    assert!(
        matches!(refusal, Refusal::Unsigned { commit } if commit == oid(&unsigned)),
        "{refusal}"
    );
    // The operator vouches for the history up to the unsigned commit.
    let since = Verifier::new(VerifyPolicy {
        since: Some(oid(&unsigned)),
        ..policy(Mode::All, &allowed_signers, None)
    });
    let verified = since
        .verify(&repository, oid(&tip), &[])
        .expect("only the tip is new");
    assert_eq!(verified.commits, 1);

    let bounded = Verifier::new(VerifyPolicy {
        max_commits: 1,
        ..policy(Mode::All, &allowed_signers, None)
    });
    let refusal = bounded
        .verify(&repository, oid(&tip), &[oid(&first)])
        .expect_err("two commits, one allowed");
    assert_eq!(refusal.reason(), "TooManyCommits", "{refusal}");
    assert!(refusal.to_string().contains("since"), "{refusal}");
}

/// `capstan run --lab --config CONFIG` on `url`, its lab and mirrors in `dir`.
fn spawn_verifying(dir: &Path, url: &str, config: &Path) -> (CapstanRun, std::net::SocketAddr) {
    let mut run = CapstanRun::start(dir, |command| {
        command
            .args(["--repo", url, "--lab", "--log"])
            .arg(format!("warn,{}", capstan_testkit::announced::ANNOUNCING))
            .arg("--config")
            .arg(config);
    });
    let address = run.address();
    (run, address)
}

/// The fleet's `SourceVerified` condition in a `/status` body: (status, reason, message).
pub(super) fn source_verified(body: &str) -> Option<(String, String, String)> {
    let status: serde_json::Value = serde_json::from_str(body).ok()?;
    let condition = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "SourceVerified")?;
    Some((
        condition["status"].as_str()?.to_owned(),
        condition["reason"].as_str()?.to_owned(),
        condition["message"].as_str()?.to_owned(),
    ))
}

pub(super) fn revision_of(body: &str) -> Option<String> {
    let status: serde_json::Value = serde_json::from_str(body).ok()?;
    status["revision"].as_str().map(str::to_owned)
}

#[test]
fn the_daemon_applies_only_signed_revisions_takes_a_rotated_key_and_refuses_a_force_pushed_unsigned_tip()
 {
    if !judge::present(&[Judge::SshKeygen]) {
        return;
    }
    let keys = Keys::new();
    let remote = Remote::new();
    let work = remote.work();
    let (alice, bob) = (keys.ssh("alice"), keys.ssh("bob"));
    let allowed_signers = keys.dir.path().join("allowed_signers");
    std::fs::write(
        &allowed_signers,
        format!("alice@example.com {}\n", keys.ssh_public("alice")),
    )
    .expect("allowed signers");
    let config = keys.dir.path().join("capstan-config.yaml");
    std::fs::write(
        &config,
        "apiVersion: capstan.dev/v1alpha1\nkind: DaemonConfig\nsource:\n  verify:\n    mode: head\n    allowedSigners: allowed_signers\n",
    )
    .expect("config");
    // A fast poll for the test (the fleet file warns about it, and runs).
    let fleet = std::fs::read_to_string(work.join("capstan.yaml")).expect("fleet");
    remote.write(
        "capstan.yaml",
        &fleet.replace("pollInterval: 1m", "pollInterval: 1s"),
    );
    let signed = commit(&work, &keys, &Sign::Ssh(&alice), "signed by alice");
    git(&work, &["push", "-q", "origin", "HEAD:main"]);
    let Some(server) = servers::git_daemon(&remote.root()) else {
        return;
    };
    let url = format!("git://127.0.0.1:{}/fleet.git", server.port);
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut daemon, addr) = spawn_verifying(dir.path(), &url, &config);
    let signed_revision = format!("main@sha1:{signed}");
    daemon.wait_status(addr, "the signed revision, verified", &|body| {
        revision_of(body).as_deref() == Some(signed_revision.as_str())
            && source_verified(body).is_some_and(|(status, _, message)| {
                status == "True" && message.contains("alice@example.com")
            })
    });

    // bob is not allowed yet: his commit is not applied, and the status says who and why.
    remote.write("clusters/bob.yaml", &capstan_testkit::lab_cluster("bob", 2));
    let by_bob = commit(&work, &keys, &Sign::Ssh(&bob), "signed by bob");
    git(&work, &["push", "-q", "origin", "HEAD:main"]);
    assert!(!git_verifies(&work, &keys, &allowed_signers, &by_bob));
    let bob_fingerprint = run(Command::new("ssh-keygen")
        .args(["-l", "-E", "sha256", "-f"])
        .arg(bob.with_extension("pub")));
    let bob_fingerprint = bob_fingerprint
        .split_whitespace()
        .nth(1)
        .expect("fingerprint")
        .to_owned();
    let body = daemon.wait_status(addr, "bob's commit refused", &|body| {
        source_verified(body).is_some_and(|(status, reason, message)| {
            status == "False"
                && reason == "KeyNotAllowed"
                && message.contains(&by_bob)
                && message.contains(&bob_fingerprint)
        })
    });
    assert_eq!(
        revision_of(&body).as_deref(),
        Some(signed_revision.as_str()),
        "{body}"
    );
    assert!(
        !body.contains("\"bob\""),
        "bob's cluster is not applied: {body}"
    );

    // The key rotates: bob replaces alice in the file; no restart, no new push.
    std::fs::write(
        &allowed_signers,
        format!("bob@example.com {}\n", keys.ssh_public("bob")),
    )
    .expect("rotate");
    assert!(git_verifies(&work, &keys, &allowed_signers, &by_bob));
    let bob_revision = format!("main@sha1:{by_bob}");
    let body = daemon.wait_status(addr, "bob's commit applied after the rotation", &|body| {
        revision_of(body).as_deref() == Some(bob_revision.as_str())
            && source_verified(body).is_some_and(|(status, _, _)| status == "True")
    });
    assert!(body.contains("\"bob\""), "bob's cluster is applied: {body}");

    // A force-push to an unsigned commit that adds a cluster: not applied (a rewrite of the
    // verified history, refused before its signature is looked at).
    remote.write(
        "clusters/evil.yaml",
        &capstan_testkit::lab_cluster("evil", 2),
    );
    git(&work, &["add", "-A"]);
    git(
        &work,
        &[
            "commit",
            "-q",
            "--amend",
            "--no-gpg-sign",
            "-m",
            "rewritten, unsigned",
        ],
    );
    git(&work, &["push", "-q", "--force", "origin", "HEAD:main"]);
    let unsigned = git(&work, &["rev-parse", "HEAD"]);
    assert!(!git_verifies(&work, &keys, &allowed_signers, &unsigned));
    let refused = |body: &str| {
        source_verified(body).is_some_and(|(status, reason, message)| {
            status == "False"
                && reason == "NotDescendant"
                && message.contains(&unsigned)
                && message.contains(&bob_revision)
        })
    };
    let body = daemon.wait_status(addr, "the unsigned force-push refused", &refused);
    assert_eq!(
        revision_of(&body).as_deref(),
        Some(bob_revision.as_str()),
        "{body}"
    );
    assert!(
        !body.contains("\"evil\""),
        "the unsigned cluster is not applied: {body}"
    );
    assert!(
        body.contains("force-push"),
        "the force-push is reported: {body}"
    );

    // A restarted daemon resumes from the last verified revision, not the unsigned tip.
    drop(daemon);
    let (mut daemon, addr) = spawn_verifying(dir.path(), &url, &config);
    let body = daemon.wait_status(addr, "the restart keeps bob's revision", &refused);
    assert_eq!(
        revision_of(&body).as_deref(),
        Some(bob_revision.as_str()),
        "{body}"
    );
    assert!(!body.contains("\"evil\""), "{body}");
}

#[test]
fn a_daemon_with_no_verified_revision_refuses_to_start_and_says_why() {
    if !judge::present(&[Judge::SshKeygen]) {
        return;
    }
    let keys = Keys::new();
    keys.ssh("alice");
    let allowed_signers = keys.dir.path().join("allowed_signers");
    std::fs::write(
        &allowed_signers,
        format!("alice {}\n", keys.ssh_public("alice")),
    )
    .expect("allowed signers");
    let config = keys.dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: capstan.dev/v1alpha1\nkind: DaemonConfig\nsource:\n  verify: {{mode: all, allowedSigners: {}}}\n",
            allowed_signers.display()
        ),
    )
    .expect("config");
    let remote = Remote::new();
    let head = git(&remote.work(), &["rev-parse", "HEAD"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let output = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["run", "--lab", "--repo"])
        .arg(format!("file://{}", remote.bare().display()))
        .arg("--config")
        .arg(&config)
        .arg("--state-dir")
        .arg(dir.path().join("lab"))
        .arg("--git-mirror-dir")
        .arg(dir.path().join("mirrors"))
        .output()
        .expect("capstan runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("commit {head} is not signed")),
        "{stderr}"
    );
    assert!(stderr.contains("nothing to reconcile"), "{stderr}");
}

#[test]
fn the_preview_of_a_head_that_would_not_be_applied_says_so_first() {
    if !judge::present(&[Judge::SshKeygen]) {
        return;
    }
    let keys = Keys::new();
    let remote = Remote::new();
    let work = remote.work();
    let alice = keys.ssh("alice");
    let allowed_signers = keys.dir.path().join("allowed_signers");
    std::fs::write(
        &allowed_signers,
        format!("alice {}\n", keys.ssh_public("alice")),
    )
    .expect("allowed signers");
    commit(&work, &keys, &Sign::Ssh(&alice), "signed base");
    git(&work, &["push", "-q", "origin", "HEAD:main"]);
    remote.write(
        "clusters/prod.yaml",
        &capstan_testkit::lab_cluster("prod", 2),
    );
    let head = commit(&work, &keys, &Sign::Unsigned, "an unsigned pull request");
    git(&work, &["push", "-q", "origin", "HEAD:refs/pull/7/head"]);
    let url = format!("file://{}", remote.bare().display());
    let options = remote.options(&url, capstan::source::GitCredentials::default());
    // What `run --previews` does for pull request 7: read base and head, verify the head.
    let base = capstan::source::revisions::read_remote_ref(&options, "main").expect("base");
    let pull =
        capstan::source::revisions::read_remote_ref(&options, "refs/pull/7/head").expect("head");
    for mode in [Mode::Head, Mode::All] {
        let verifier = Verifier::new(policy(mode, &allowed_signers, None));
        let refusal = capstan::source::revisions::verify_remote_head(
            &options,
            &verifier,
            &pull.revision,
            &base.revision,
        )
        .expect("both revisions are in the mirror")
        .expect_err("an unsigned head");
        assert_eq!(refusal.reason(), "Unsigned", "{mode}: {refusal}");
        let mut preview = capstan::preview::build(
            &capstan::preview::RevisionFiles {
                revision: base.revision.clone(),
                files: base.files.clone(),
            },
            &capstan::preview::RevisionFiles {
                revision: pull.revision.clone(),
                files: pull.files.clone(),
            },
            &capstan::observed::Observed::default(),
            jiff::Timestamp::UNIX_EPOCH,
            &capstan::secrets::Admission::against_base(),
        );
        preview.refuse_unverified(&capstan::errors::error_chain(&refusal));
        assert!(preview.is_refused());
        assert!(
            preview.summary.starts_with("not applied"),
            "{}",
            preview.summary
        );
        let markdown = capstan::preview::render::markdown(&preview);
        assert!(
            markdown.contains("capstan will not apply this revision") && markdown.contains(&head),
            "{markdown}"
        );
    }
}
