//! `capstan demo` followed as a newcomer reads it: wait for the clusters, then edit, commit
//! and `git push` in the printed clone; the daemon applies the push and shows its revision.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capstan_testkit::git;
use capstan_testkit::process::{Spawned, http_request};

#[test]
fn the_demo_walkthrough_scales_prod_with_a_git_push() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("demo");
    let child = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["demo", "--http", "127.0.0.1:0"])
        .arg("--state-dir")
        .arg(&state)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("capstan demo starts");
    let mut child = Spawned(child);
    let stdout = child.0.stdout.take().expect("stdout");
    let (lines, printed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !seen.contains("\ngit push") && !seen.contains("  git push") {
        let line = printed
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("the demo prints its walkthrough:\n{seen}"));
        seen.push_str(&line);
        seen.push('\n');
    }
    // The clone's path, as printed.
    let clone = seen
        .lines()
        .find_map(|l| l.trim().strip_prefix("cd "))
        .expect("a `cd CLONE` line")
        .to_owned();
    let clone = std::path::PathBuf::from(clone);
    let prod = clone.join("clusters/prod.yaml");
    let text = std::fs::read_to_string(&prod).expect("prod.yaml");
    let edited = text.replacen("      replicas: 3", "      replicas: 4", 1);
    assert_ne!(edited, text, "the walkthrough's line is in prod.yaml");
    std::fs::write(&prod, edited).expect("edit");
    git(&clone, &["commit", "-q", "-am", "prod: 4 workers"]);
    git(&clone, &["push", "-q"]);
    let head = git(&clone, &["rev-parse", "HEAD"]);
    let revision = format!("main@sha1:{head}");

    // Where it serves HTTP, as its walkthrough prints it.
    let addr: SocketAddr = seen
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("status:     capstan status --server http://")
        })
        .and_then(|address| address.parse().ok())
        .unwrap_or_else(|| panic!("the demo prints its status address:\n{seen}"));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, body) = http_request(addr, "GET", "/status", &[], b"");
        let status: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let prod = &status["clusters"]["prod"];
        let nodes = prod["nodes"].as_array().map_or(0, Vec::len);
        if status["revision"] == revision.as_str() && prod["phase"] == "Ready" && nodes == 5 {
            break;
        }
        assert!(Instant::now() < deadline, "the push is applied: {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(child);
}
