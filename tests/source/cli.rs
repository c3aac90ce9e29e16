//! `validate`, `plan` and `observe` read a remote as they read a folder (read-only).

use std::process::Command;

use capstan_testkit::{Remote, git};

fn capstan(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(args)
        .output()
        .expect("capstan runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn validate_and_plan_read_the_tip_of_a_remote_branch() {
    let remote = Remote::new();
    remote.write(
        "clusters/prod.yaml",
        &capstan_testkit::lab_cluster("prod", 2),
    );
    let head = remote.commit_and_push("prod");
    let url = format!("file://{}", remote.bare().display());
    let mirrors = remote.work().join("../cli-mirrors");
    let mirrors = mirrors.to_str().expect("path");
    let (code, stdout, stderr) = capstan(&[
        "validate",
        &url,
        "--branch",
        "main",
        "--git-mirror-dir",
        mirrors,
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!(
            "{url} at main@sha1:{head}: valid (1 cluster file(s)"
        )),
        "{stdout}"
    );
    let (code, stdout, stderr) = capstan(&[
        "plan",
        &url,
        "--observed",
        "none",
        "--git-mirror-dir",
        mirrors,
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("prod"), "{stdout}");
    let (code, stdout, stderr) = capstan(&[
        "validate",
        &url,
        "--branch",
        "nope",
        "--git-mirror-dir",
        mirrors,
    ]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stderr.contains("has no branch nope"), "{stderr}");
    // Read-only: the remote's branch is where it was.
    assert_eq!(git(&remote.bare(), &["rev-parse", "main"]), head);
}
