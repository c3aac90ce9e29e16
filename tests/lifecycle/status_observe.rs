//! `capstan status` against a running daemon's endpoint, and `capstan observe` against a
//! running lab, as a user runs them (the real binary).

use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_observe_show_what_the_daemon_and_the_lab_hold() {
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(
            "prod",
            cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s"),
        )],
    )
    .await;
    world.start_daemon().await;
    world.wait_for("prod Ready", |s| ready(s, &["prod"])).await;
    let address = capstan::daemon::http::serve("127.0.0.1:0".parse().expect("addr"), world.board())
        .await
        .expect("serve");
    let server = format!("http://{address}");

    let _ = rustls::crypto::ring::default_provider().install_default();
    let healthz = reqwest::get(format!("{server}/healthz"))
        .await
        .expect("healthz");
    assert_eq!(healthz.status(), 200);
    let metrics = reqwest::get(format!("{server}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    for line in [
        "capstan_cluster_phase{cluster=\"prod\",phase=\"Ready\"} 1",
        "capstan_cluster_nodes_ready{cluster=\"prod\"} 3",
        "capstan_steps_total{action=\"init-control-plane\",result=\"ok\"} 1",
        "capstan_repository_errors 0",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "/metrics has `{line}`:\n{metrics}"
        );
    }

    let tree = tokio::task::spawn_blocking({
        let server = server.clone();
        move || capstan_testkit::cli::capstan(&["status", "prod", "--server", &server])
    })
    .await
    .expect("joined");
    tree.assert_code(0);
    tree.assert_reports("prod  Ready  v1.36.2  certificates expire")
        .assert_reports("KubeconfigDelivered=True (Current)")
        .assert_reports("└─ waiting on: nothing");
    assert_eq!(
        tree.stdout.matches(" Ready      v1.36.2 ").count(),
        3,
        "three Ready nodes listed:\n{}",
        tree.stdout
    );

    let json = tokio::task::spawn_blocking({
        let server = server.clone();
        move || capstan_testkit::cli::capstan(&["status", "--format", "json", "--server", &server])
    })
    .await
    .expect("joined");
    let status: serde_json::Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(status["clusters"]["prod"]["phase"], "Ready");

    let unknown = tokio::task::spawn_blocking(move || {
        capstan_testkit::cli::capstan(&["status", "nope", "--server", &server])
    })
    .await
    .expect("joined");
    unknown.assert_code(1);
    assert!(
        unknown
            .stderr
            .contains("no cluster `nope` in the daemon's status (known: prod)"),
        "{}",
        unknown.stderr
    );

    let repo = world.repo.path().to_owned();
    let state = world.state.path().to_owned();
    let observed = tokio::task::spawn_blocking(move || {
        capstan_testkit::cli::capstan(&[
            "observe",
            "--repo",
            repo.to_str().expect("path"),
            "--lab-state",
            state.to_str().expect("path"),
        ])
    })
    .await
    .expect("joined");
    observed.assert_code(0);
    let snapshot: serde_json::Value = serde_json::from_str(&observed.stdout).expect("a snapshot");
    let prod = &snapshot["clusters"]["prod"];
    assert_eq!(prod["machines"].as_object().expect("machines").len(), 3);
    assert_eq!(prod["nodes"].as_object().expect("nodes").len(), 3);
    assert_eq!(prod["controlPlane"]["version"], "1.36.2");
    assert!(
        !observed.stdout.contains("BEGIN"),
        "no certificate or key in the snapshot"
    );

    // The snapshot is what `plan --observed` reads: a converged cluster plans nothing.
    let file = world.state.path().join("observed.json");
    std::fs::write(&file, &observed.stdout).expect("write snapshot");
    let repo = world.repo.path().to_owned();
    let plan = tokio::task::spawn_blocking(move || {
        capstan_testkit::cli::capstan(&[
            "plan",
            repo.to_str().expect("path"),
            "--observed",
            file.to_str().expect("path"),
            "--format",
            "json",
        ])
    })
    .await
    .expect("joined");
    plan.assert_code(0);
    let plan: serde_json::Value = serde_json::from_str(&plan.stdout).expect("json plan");
    let prod = plan["clusters"]
        .as_array()
        .expect("clusters")
        .iter()
        .find(|c| c["name"] == "prod")
        .expect("prod planned");
    assert_eq!(prod["phase"], "Ready", "{prod:#}");
    assert_eq!(prod["steps"], serde_json::json!([]));
    world.kill_daemon().await;
}

const UNREACHABLE_FINGERPRINT: &str = "5C:7A:1F:02:9B:44:E3:10:8D:2A:6F:C1:73:0E:B5:98:24:D6:4F:E1:0A:9C:33:7B:C8:52:16:EF:40:A9:61:D7";

/// A repository whose only Proxmox connection refuses connections: `capstan observe` on it
/// logs its retries at debug level, then gives up. Its token is a file in `secrets/` of the
/// folder, which [`unreachable_proxmox_flags`] allow.
fn unreachable_proxmox_repo() -> tempfile::TempDir {
    let repo = tempfile::tempdir().expect("repo");
    std::fs::create_dir(repo.path().join("clusters")).expect("clusters");
    let folder = repo.path().join("secrets/proxmox/homelab");
    std::fs::create_dir_all(&folder).expect("the token's folder");
    std::fs::write(folder.join("token"), "secret").expect("token");
    let fleet = format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Fleet
clustersDir: clusters
proxmox:
  homelab:
    url: https://127.0.0.1:1
    tokenId: capstan@pve!reconciler
    tokenFrom: {{file: proxmox/homelab/token}}
    tlsFingerprint: \"{UNREACHABLE_FINGERPRINT}\"
"
    );
    std::fs::write(repo.path().join("capstan.yaml"), fleet).expect("capstan.yaml");
    repo
}

/// `capstan observe` on [`unreachable_proxmox_repo`], with the flags that allow its token and
/// connection.
fn observe_unreachable(path: &str, log_format: &str) -> capstan_testkit::cli::Run {
    let secrets = format!("{path}/secrets");
    let fingerprint = format!("proxmox.homelab.tlsFingerprint={UNREACHABLE_FINGERPRINT}");
    capstan_testkit::cli::capstan(&[
        "--log",
        "debug",
        "--log-format",
        log_format,
        "observe",
        "--repo",
        path,
        "--secrets-dir",
        &secrets,
        "--pin",
        "proxmox.homelab.url=https://127.0.0.1:1",
        "--pin",
        &fingerprint,
    ])
}

#[test]
fn logs_to_a_pipe_carry_no_colour_codes_in_either_format() {
    let repo = unreachable_proxmox_repo();
    let path = repo.path().to_str().expect("utf-8 path");
    let (plain, json) = std::thread::scope(|scope| {
        let plain = scope.spawn(|| observe_unreachable(path, "plain"));
        let json = observe_unreachable(path, "json");
        (plain.join().expect("plain run"), json)
    });
    assert!(
        plain.stderr.contains("proxmox call failed, retrying"),
        "the run logs: {}",
        plain.stderr
    );
    assert!(
        !plain.stderr.contains("\x1b["),
        "no escape sequences when standard error is not a terminal: {:?}",
        plain.stderr
    );
    let lines: Vec<&str> = json.stderr.lines().filter(|l| l.starts_with('{')).collect();
    assert!(!lines.is_empty(), "the run logs: {}", json.stderr);
    for line in lines {
        assert!(
            !line.contains("\x1b[") && !line.contains("\\u001b["),
            "{line:?}"
        );
        serde_json::from_str::<serde_json::Value>(line).expect("one JSON object per line");
    }
}
