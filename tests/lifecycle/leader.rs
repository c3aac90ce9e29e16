//! Two `capstan run --leader-elect` processes (the real binary) on one repository and one lab:
//! exactly one leads and starts steps, the other's `/status` says standby and names the
//! leader, and SIGTERM on the leader hands the Lease over at once; a leader killed with -9 in
//! the middle of a rolling replacement is replaced within the Lease duration plus a poll and
//! the rollout converges with no duplicate and one machine out at a time; a leader cut off
//! from the management cluster stops starting steps before the standby may take over.

/// `--lease-duration` of the replicas: short, so the tests wait little.
const LEASE_DURATION: Duration = Duration::from_secs(3);
/// `--lease-retry` of the replicas: how often a standby looks at the Lease.
const LEASE_RETRY: Duration = Duration::from_millis(200);
/// `--busy-interval` of the replicas (the poll interval while work is in progress).
const BUSY_INTERVAL: Duration = Duration::from_millis(100);

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use capstan_lab::kube::{SimDeployment, SimWorkloads};
use capstan_testkit::{PATIENCE, World, cluster_yaml, ready};

/// One replica: the process and its `/status` URL.
struct Replica {
    child: Option<Child>,
    port: u16,
    identity: String,
}

impl Replica {
    fn start(world: &World, identity: &str, token: &str) -> Replica {
        Replica::start_with(world, identity, token, &[])
    }

    /// [`Replica::start`] with more arguments (e.g. `--lease-kubeconfig`).
    fn start_with(world: &World, identity: &str, token: &str, extra: &[&str]) -> Replica {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
            probe.local_addr().expect("addr").port()
        };
        let child = Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args(["run", "--repo"])
            .arg(world.repo.path())
            // The lab serves each cluster's endpoint on a loopback port of its own.
            .arg("--lab-addresses")
            .arg(world.state.path())
            .args([
                "--http",
                &format!("127.0.0.1:{port}"),
                "--busy-interval",
                &format!("{}ms", BUSY_INTERVAL.as_millis()),
                "--leader-elect",
                "--lease-namespace",
                "default",
                "--lease-identity",
                identity,
                "--lease-duration",
                &format!("{}s", LEASE_DURATION.as_secs()),
                "--lease-renew",
                "1s",
                "--lease-retry",
                &format!("{}ms", LEASE_RETRY.as_millis()),
            ])
            .args(world.real_fleet_args())
            .args(extra)
            .env("CAPSTAN_PROXMOX_HOMELAB_TOKEN", token)
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
    world.real_fleet()
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
        // Read from the leader: a standby observes at the idle pace, so its status lags.
        let mut ready = [false; 2];
        for (replica, ready) in replicas.iter().zip(&mut ready) {
            *ready = replica
                .status()
                .await
                .is_some_and(|s| s["clusters"]["prod"]["phase"] == "Ready");
        }
        match (a, b) {
            (Some((ra, _)), Some((rb, lb))) if ready[0] && ra == "leader" && rb == "standby" => {
                assert_eq!(lb.as_deref(), Some("replica-a"));
                break (0, 1);
            }
            (Some((ra, la)), Some((rb, _))) if ready[1] && rb == "leader" && ra == "standby" => {
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

/// Waits until exactly one of `replicas` leads and the other names it; returns the leader's
/// index.
async fn single_leader(replicas: &[Replica]) -> usize {
    let started = Instant::now();
    loop {
        let a = role_of(&replicas[0]).await;
        let b = role_of(&replicas[1]).await;
        if let (Some((ra, la)), Some((rb, lb))) = (a, b) {
            if ra == "leader" && rb == "standby" && lb.as_deref() == Some(&replicas[0].identity) {
                return 0;
            }
            if rb == "leader" && ra == "standby" && la.as_deref() == Some(&replicas[1].identity) {
                return 1;
            }
        }
        assert!(started.elapsed() < PATIENCE, "no single leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_role(replica: &Replica, role: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        if role_of(replica).await.is_some_and(|(r, _)| r == role) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "{} never became {role}",
            replica.identity
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_mid_rollout_is_replaced_within_the_lease_and_the_rollout_converges() {
    let world = World::recording("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n", &[]).await;
    world.write_fleet(&fleet(&world));
    world.write_cluster(
        "prod",
        &cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s"),
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    let token = world.lab.lab_file().proxmox.token;
    let mut replicas = vec![
        Replica::start(&world, "replica-a", &token),
        Replica::start(&world, "replica-b", &token),
    ];
    let leader = single_leader(&replicas).await;
    let started = Instant::now();
    while !replicas[leader]
        .status()
        .await
        .is_some_and(|s| ready(&serde_json::from_value(s).expect("status"), &["prod"]))
    {
        assert!(started.elapsed() < PATIENCE, "prod never Ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let old: Vec<String> = world
        .vm_views("prod")
        .into_iter()
        .filter(|vm| vm.is_worker())
        .map(|vm| vm.name)
        .collect();
    assert_eq!(old.len(), 2);
    // Pods to evict, under a budget, so each drain shows in the API server's eviction audit.
    let sim = world.lab.kube().cluster("prod").expect("simulated cluster");
    sim.add_workloads(&SimWorkloads {
        deployments: vec![SimDeployment {
            name: "web".into(),
            namespace: "shop".into(),
            replicas: 2,
            pdb_min_available: Some(1),
            empty_dir: false,
        }],
        ..SimWorkloads::default()
    })
    .expect("workloads");

    // A template change replaces both workers, new before old; kill -9 the leader once the
    // first new machine exists (the rollout is under way).
    let recorder = world.record("prod");
    world.write_cluster(
        "prod",
        &cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s-v2"),
    );
    let started = Instant::now();
    while world.vms_of("prod").len() < 4 {
        assert!(started.elapsed() < PATIENCE, "the rollout never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut killed = replicas.remove(leader);
    let standby = replicas.remove(0);
    let killed_at = Instant::now();
    killed.signal("-KILL");
    let _ = killed.wait_exit().await;
    wait_role(&standby, "leader", PATIENCE).await;
    let takeover = killed_at.elapsed();
    eprintln!("take-over after kill -9: {takeover:?}");
    // The standby's clock for the Lease starts when it sees the last renewal (up to one poll
    // after it), and it takes over at its first poll a whole duration later: at most the
    // duration plus two polls after the kill, plus slack for a loaded machine.
    assert!(
        takeover <= LEASE_DURATION + 2 * LEASE_RETRY + Duration::from_millis(500),
        "the standby took over after {takeover:?}"
    );

    // The rollout converges under the new leader.
    let started = Instant::now();
    loop {
        let status = standby.status().await.expect("status");
        let done = ready(
            &serde_json::from_value(status.clone()).expect("status"),
            &["prod"],
        ) && world
            .vm_views("prod")
            .iter()
            .filter(|vm| vm.is_worker())
            .all(|vm| !old.contains(&vm.name));
        if done && world.vms_of("prod").len() == 3 {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the rollout never converged: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let timeline = recorder.finish().await;
    // No VM duplicated: over the whole rollout, the machines were the three there before
    // and one new worker per old one, never two VMs of one name.
    let mut ever: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for sample in &timeline.0 {
        let mut names: Vec<&str> = sample.vms.iter().map(|vm| vm.name.as_str()).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(
            names.len(),
            count,
            "a VM name twice at\n{}",
            sample.summary()
        );
        ever.extend(names);
    }
    assert_eq!(
        ever.len(),
        3 + old.len(),
        "VMs seen: {ever:?}\n\ntimeline:\n{}",
        timeline.dump()
    );
    // From the Proxmox API's log (bootstrap included): one clone per machine ever built, the
    // three first ones and one per replaced worker, never a name twice.
    let exchanges = world.lab.proxmox().exchanges();
    let clones: Vec<String> = exchanges
        .iter()
        .filter(|e| e.template.ends_with("/clone") && e.status == 200)
        .filter_map(|e| {
            e.params
                .get("name")
                .and_then(|n| n.as_str())
                .map(str::to_owned)
        })
        .collect();
    let mut distinct = clones.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        (clones.len(), distinct.len()),
        (3 + old.len(), 3 + old.len()),
        "one clone per machine: {clones:?}"
    );
    // Stops and destroys of one VM never interleave with another's (each VM's retirement is
    // one span in the log, the spans disjoint).
    let retirements: Vec<String> = exchanges
        .iter()
        .filter(|e| e.status == 200)
        .filter_map(|e| {
            let upid = e.body["data"].as_str()?;
            let fields: Vec<&str> = upid.split(':').collect();
            let kind = *fields.get(5)?;
            matches!(kind, "qmstop" | "qmshutdown" | "qmdestroy").then(|| fields[6].to_owned())
        })
        .collect();
    let mut retired = retirements.clone();
    retired.sort();
    retired.dedup();
    assert_eq!(
        retired.len(),
        old.len(),
        "both old workers retired: {retirements:?}"
    );
    assert_disjoint_spans("VM retirements (Proxmox log)", &retirements);
    // No two drains overlap: in the API server's audit, the evictions of one node's pods
    // never interleave with another's, and only old workers were drained.
    let evicted: Vec<String> = sim
        .evictions()
        .into_iter()
        .filter(|e| !e.dry_run)
        .map(|e| e.node)
        .collect();
    assert!(
        evicted.iter().all(|node| old.contains(node)),
        "evictions on machines not retired: {evicted:?}"
    );
    assert!(!evicted.is_empty(), "the drains evicted the web pods");
    assert_disjoint_spans("evictions (API server audit)", &evicted);
    for sample in &timeline.0 {
        // And at most one node cordoned at any observation.
        let cordoned = sample.nodes.iter().filter(|n| n.cordoned).count();
        assert!(
            cordoned <= 1,
            "two machines out at once at\n{}\n\ntimeline:\n{}",
            sample.summary(),
            timeline.dump()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_management_cluster_stops_before_the_standby_may_take_over() {
    let world = World::new("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n", &[]).await;
    world.write_fleet(&fleet(&world));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let token = world.lab.lab_file().proxmox.token;
    let management = world.lab.kube().cluster("management").expect("management");
    // Each replica reaches the Lease with its own credentials, so the fault cuts one off.
    let dir = tempfile::tempdir().expect("dir");
    let mut tokens = Vec::new();
    let mut replicas = Vec::new();
    for identity in ["replica-a", "replica-b"] {
        let bearer = management.issue_token(identity, &["system:masters"]);
        let path = dir.path().join(format!("{identity}.kubeconfig"));
        std::fs::write(&path, management.token_kubeconfig(identity, &bearer)).expect("write");
        let path = path.to_str().expect("utf-8").to_owned();
        replicas.push(Replica::start_with(
            &world,
            identity,
            &token,
            &["--lease-kubeconfig", &path],
        ));
        tokens.push(bearer);
    }
    let leader = single_leader(&replicas).await;
    let standby = 1 - leader;
    let cut_at = Instant::now();
    management.partition_token(&tokens[leader], true);

    // The cut-off leader fences itself; only then, and not before a whole Lease duration,
    // the standby takes over.
    wait_role(&replicas[leader], "standby", PATIENCE).await;
    let fenced = cut_at.elapsed();
    wait_role(&replicas[standby], "leader", PATIENCE).await;
    let taken = cut_at.elapsed();
    eprintln!("cut-off leader fenced after {fenced:?}; standby leads after {taken:?}");
    assert!(
        fenced < LEASE_DURATION,
        "the cut-off leader still led after {fenced:?}"
    );
    assert!(
        fenced < taken,
        "the standby led ({taken:?}) before the old leader stopped ({fenced:?})"
    );

    // Work arriving now is done by the new leader only.
    let before = replicas[leader].steps_run().await;
    world.write_cluster(
        "prod",
        &cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s"),
    );
    let started = Instant::now();
    loop {
        let status = replicas[standby].status().await.expect("status");
        if ready(&serde_json::from_value(status).expect("status"), &["prod"]) {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "prod never Ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        replicas[leader].steps_run().await,
        before,
        "the cut-off replica started no step"
    );
    assert!(replicas[standby].steps_run().await > 0);

    // The partition heals: the old leader's election was not stuck on its hung requests, it
    // reads the Lease again and names the new leader, and stays standby.
    management.partition_token(&tokens[leader], false);
    let started = Instant::now();
    loop {
        let role = role_of(&replicas[leader]).await;
        if role
            == Some((
                "standby".to_owned(),
                Some(replicas[standby].identity.clone()),
            ))
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the healed replica never saw the new leader: {role:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        role_of(&replicas[standby])
            .await
            .map(|(role, _)| role)
            .as_deref(),
        Some("leader")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_mid_drain_stops_draining_instead_of_finishing_the_step() {
    let world = World::new("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n", &[]).await;
    world.write_fleet(&fleet(&world));
    // A drain that would wait ten minutes on a budget allowing no disruption.
    let spec = |workers: u32| {
        cluster_yaml("prod", 30, "1.36.2", workers, "debian13-k8s")
            .replace("drainTimeout: 4s", "drainTimeout: 10m")
    };
    world.write_cluster("prod", &spec(3));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let token = world.lab.lab_file().proxmox.token;
    let management = world.lab.kube().cluster("management").expect("management");
    let dir = tempfile::tempdir().expect("dir");
    let mut tokens = Vec::new();
    let mut replicas = Vec::new();
    for identity in ["replica-a", "replica-b"] {
        let bearer = management.issue_token(identity, &["system:masters"]);
        let path = dir.path().join(format!("{identity}.kubeconfig"));
        std::fs::write(&path, management.token_kubeconfig(identity, &bearer)).expect("write");
        let path = path.to_str().expect("utf-8").to_owned();
        replicas.push(Replica::start_with(
            &world,
            identity,
            &token,
            &["--lease-kubeconfig", &path],
        ));
        tokens.push(bearer);
    }
    let leader = single_leader(&replicas).await;
    let cluster_status = |status: serde_json::Value| -> Option<capstan::status::ClusterStatus> {
        let status: capstan::status::FleetStatus = serde_json::from_value(status).ok()?;
        status.clusters.get("prod").cloned()
    };
    let started = Instant::now();
    loop {
        let status = replicas[leader].status().await.expect("status");
        if ready(&serde_json::from_value(status).expect("status"), &["prod"]) {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "prod never Ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sim = world.lab.kube().cluster("prod").expect("simulated cluster");
    sim.add_workloads(&SimWorkloads {
        deployments: vec![SimDeployment {
            name: "web".into(),
            namespace: "shop".into(),
            replicas: 3,
            pdb_min_available: Some(3),
            empty_dir: false,
        }],
        ..SimWorkloads::default()
    })
    .expect("workloads");
    world.write_cluster("prod", &spec(2));
    let started = Instant::now();
    loop {
        let draining = cluster_status(replicas[leader].status().await.expect("status"))
            .is_some_and(|c| {
                c.waiting_on
                    .iter()
                    .any(|w| w.step == Some(capstan::plan::ActionKind::Drain))
            });
        if draining {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "the drain never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Cut off from the Lease while the drain waits on the budget: the replica stops the
    // drain at its fencing deadline, not ten minutes later, and says why.
    management.partition_token(&tokens[leader], true);
    let started = Instant::now();
    let stopped = loop {
        let last = cluster_status(replicas[leader].status().await.expect("status"))
            .and_then(|c| c.last_step);
        if let Some(last) = last.filter(|l| l.action == capstan::plan::ActionKind::Drain) {
            break last;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the cut-off replica's drain still runs after {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "drain stopped {:?} after the cut: {}",
        started.elapsed(),
        stopped.message
    );
    assert!(
        stopped.message.contains("this replica no longer leads"),
        "{stopped:?}"
    );
    assert!(!stopped.succeeded);
    assert_eq!(stopped.failures, 0, "not counted as a failure");
    let metrics = replicas[leader].get("/metrics").await.unwrap_or_default();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("capstan_steps_total{") && l.contains("stopped")),
        "{metrics}"
    );
    management.partition_token(&tokens[leader], false);
}

/// Asserts that in `events` (targets in log order) each target's events are consecutive:
/// work on one target never interleaves with work on another.
fn assert_disjoint_spans(what: &str, events: &[String]) {
    let mut blocks: Vec<&str> = Vec::new();
    for event in events {
        if blocks.last() != Some(&event.as_str()) {
            blocks.push(event);
        }
    }
    let mut seen = blocks.clone();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), blocks.len(), "{what} interleave: {events:?}");
}
