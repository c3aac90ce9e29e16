//! Two `capstan run --leader-elect` processes (the real binary) on one repository and one lab:
//! exactly one leads and starts steps, the other's `/status` says standby and names the
//! leader, and SIGTERM on the leader hands the Lease over at once.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::lifecycle_support::{PATIENCE, World, cluster_yaml};

/// One replica: the process and its `/status` URL.
struct Replica {
    child: Option<Child>,
    port: u16,
    identity: String,
}

impl Replica {
    fn start(world: &World, identity: &str, token: &str) -> Replica {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
            probe.local_addr().expect("addr").port()
        };
        let child = Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args(["run", "--repo"])
            .arg(world.repo.path())
            .args([
                "--http",
                &format!("127.0.0.1:{port}"),
                "--busy-interval",
                "100ms",
                "--leader-elect",
                "--lease-namespace",
                "default",
                "--lease-identity",
                identity,
                "--lease-duration",
                "3s",
                "--lease-renew",
                "1s",
                "--lease-retry",
                "200ms",
            ])
            .env("TEST_PROXMOX_TOKEN", token)
            .env("CAPSTAN_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("capstan run starts");
        Replica {
            child: Some(child),
            port,
            identity: identity.to_owned(),
        }
    }

    async fn get(&self, path: &str) -> Option<String> {
        reqwest::get(format!("http://127.0.0.1:{}{path}", self.port))
            .await
            .ok()?
            .text()
            .await
            .ok()
    }

    async fn status(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&self.get("/status").await?).ok()
    }

    /// Steps this replica ran, from its `/metrics`.
    async fn steps_run(&self) -> u64 {
        let metrics = self.get("/metrics").await.unwrap_or_default();
        metrics
            .lines()
            .filter(|l| l.starts_with("capstan_steps_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let status = Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    async fn wait_exit(&mut self) -> std::process::Output {
        let child = self.child.take().expect("running");
        tokio::task::spawn_blocking(move || child.wait_with_output().expect("exits"))
            .await
            .expect("joined")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn fleet(world: &World) -> String {
    let lab = world.lab.lab_file();
    format!(
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
    )
}

async fn role_of(replica: &Replica) -> Option<(String, Option<String>)> {
    let status = replica.status().await?;
    let leadership = &status["leadership"];
    Some((
        leadership["role"].as_str()?.to_owned(),
        leadership["leader"].as_str().map(str::to_owned),
    ))
}

fn lease_holder(world: &World) -> Option<String> {
    let lease =
        world
            .lab
            .kube()
            .cluster("management")?
            .object("leases", Some("default"), "capstan")?;
    lease["spec"]["holderIdentity"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_leads_the_other_stands_by_and_sigterm_hands_over_at_once() {
    let world = World::new("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n", &[]).await;
    world.write_fleet(&fleet(&world));
    world.write_cluster(
        "prod",
        &cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s"),
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    let token = world.lab.lab_file().proxmox.token;
    let first = Replica::start(&world, "replica-a", &token);
    let second = Replica::start(&world, "replica-b", &token);
    let replicas = [first, second];

    // Both come up; prod converges; exactly one leads and the other names it.
    let started = Instant::now();
    let (leader, standby) = loop {
        let a = role_of(&replicas[0]).await;
        let b = role_of(&replicas[1]).await;
        let ready = replicas[0]
            .status()
            .await
            .is_some_and(|s| s["clusters"]["prod"]["phase"] == "Ready");
        match (a, b) {
            (Some((ra, _)), Some((rb, lb))) if ready && ra == "leader" && rb == "standby" => {
                assert_eq!(lb.as_deref(), Some("replica-a"));
                break (0, 1);
            }
            (Some((ra, la)), Some((rb, _))) if ready && rb == "leader" && ra == "standby" => {
                assert_eq!(la.as_deref(), Some("replica-b"));
                break (1, 0);
            }
            _ => {}
        }
        assert!(
            started.elapsed() < PATIENCE,
            "no single leader with prod Ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        lease_holder(&world).as_deref(),
        Some(replicas[leader].identity.as_str())
    );
    assert!(
        replicas[leader].steps_run().await > 0,
        "the leader built prod"
    );
    assert_eq!(
        replicas[standby].steps_run().await,
        0,
        "the standby started no step"
    );
    assert_eq!(world.vms_of("prod").len(), 3, "no VM duplicated");

    // SIGTERM on the leader: it releases the Lease and the standby leads in under 2 s.
    let mut replicas = Vec::from(replicas);
    let mut old = replicas.remove(leader);
    let new = replicas.remove(0);
    let signalled = Instant::now();
    old.signal("-TERM");
    let handed_over = loop {
        if role_of(&new)
            .await
            .is_some_and(|(role, _)| role == "leader")
        {
            break signalled.elapsed();
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(10),
            "the standby never took over"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let output = old.wait_exit().await;
    assert!(output.status.success(), "exits 0 on SIGTERM: {output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("lease released"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("hand-over after SIGTERM: {handed_over:?}");
    assert!(
        handed_over < Duration::from_secs(2),
        "hand-over took {handed_over:?}"
    );
    assert_eq!(lease_holder(&world).as_deref(), Some(new.identity.as_str()));
}
