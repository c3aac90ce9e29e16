//! `capstan run` without `--lab`, as in production: the connections come from capstan.yaml
//! (URL, token id, pinned certificate fingerprint, the token's secret from the environment,
//! the management kubeconfig from a file). Pointed at a lab, it builds the cluster, serves its
//! status, and stops cleanly on SIGTERM.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::lifecycle_support::{World, cluster_yaml};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_uses_the_connections_of_capstan_yaml_and_stops_on_sigterm() {
    let world = World::new("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n", &[]).await;
    let lab = world.lab.lab_file();
    let fleet = format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Fleet
proxmox:
  homelab:
    url: {}
    tokenId: \"{}\"
    tokenFrom: {{env: TEST_PROXMOX_TOKEN}}
    tlsFingerprint: \"{}\"
managementClusters:
  management:
    kubeconfigFrom: {{file: {}}}
approvedMinors: [\"1.36\"]
",
        lab.proxmox.url,
        lab.proxmox.token_id,
        lab.proxmox.fingerprint,
        world.kubeconfig("management").display()
    );
    world.write_fleet(&fleet);
    world.write_cluster(
        "prod",
        &cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s"),
    );

    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        probe.local_addr().expect("addr").port()
    };
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["run", "--repo"])
        .arg(world.repo.path())
        .args([
            "--http",
            &format!("127.0.0.1:{port}"),
            "--busy-interval",
            "100ms",
        ])
        .env("TEST_PROXMOX_TOKEN", &lab.proxmox.token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("capstan run starts");

    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = format!("http://127.0.0.1:{port}/status");
    let started = tokio::time::Instant::now();
    let ready = loop {
        let answer = async {
            reqwest::get(&url)
                .await
                .ok()?
                .json::<serde_json::Value>()
                .await
                .ok()
        }
        .await;
        if let Some(status) = answer
            && status["clusters"]["prod"]["phase"] == "Ready"
        {
            break status;
        }
        if started.elapsed() > crate::lifecycle_support::PATIENCE {
            let _ = daemon.kill();
            let output = daemon.wait_with_output().expect("output");
            panic!(
                "prod never became Ready:\n{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        ready["clusters"]["prod"]["nodes"]
            .as_array()
            .expect("nodes")
            .len(),
        3
    );
    assert_eq!(world.vms_of("prod").len(), 3);

    let pid = daemon.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    let output = tokio::task::spawn_blocking(move || daemon.wait_with_output().expect("exits"))
        .await
        .expect("joined");
    assert!(output.status.success(), "exits 0 on SIGTERM: {output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("prod         Ready"),
        "progress lines on stdout:\n{stdout}"
    );
    let logs = String::from_utf8_lossy(&output.stderr);
    assert!(
        !logs.contains(&lab.proxmox.token),
        "the token never reaches the logs"
    );
}
