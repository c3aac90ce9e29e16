//! `capstan suspend` and `capstan resume` against a `capstan run` process with a token, as an
//! operator uses them during an incident: the suspension shows in `/status` with who, when and
//! why, holds a pushed scale-up, survives `kill -9` and a restart (it is kept in the management
//! cluster), and `capstan resume` lets the scale-up go on. Without the token nothing changes.

use std::net::SocketAddr;
use std::path::Path;

use capstan_testkit::process::{CapstanRun, http_request};
use capstan_testkit::{World, cluster_yaml, wait};

const TOKEN: &str = "suspend-test-token-3e8b1f";

/// `capstan run` on `world`'s real connections, requiring the token in `token_file`.
fn start(world: &World, dir: &Path, token_file: &Path) -> CapstanRun {
    let token = world.lab.lab_file().proxmox.token;
    CapstanRun::start(dir, |command| {
        command
            .args(["--repo"])
            .arg(world.repo.path())
            .arg("--lab-addresses")
            .arg(world.state.path())
            .args(["--busy-interval", "100ms", "--log"])
            .arg(format!("warn,{}", capstan_testkit::announced::ANNOUNCING))
            .arg("--http-token-from")
            .arg(format!("file:{}", token_file.display()))
            .args(world.real_fleet_args())
            .env("CAPSTAN_PROXMOX_HOMELAB_TOKEN", token);
    })
}

/// The daemon's `/status`, read with the token.
fn status(address: SocketAddr) -> serde_json::Value {
    let (_, body) = http_request(
        address,
        "GET",
        "/status",
        &[("Authorization", format!("Bearer {TOKEN}"))],
        b"",
    );
    serde_json::from_str(&body).unwrap_or_default()
}

fn wait_status(
    run: &mut CapstanRun,
    address: SocketAddr,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    wait::on(what).blocking(|| {
        assert!(
            run.is_running(),
            "capstan run exited while waiting for {what}"
        );
        let status = status(address);
        if done(&status) {
            Ok(status)
        } else {
            Err(status.to_string())
        }
    })
}

fn suspended(status: &serde_json::Value) -> Option<&serde_json::Value> {
    status["clusters"]["prod"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Suspended")
}

/// Runs `capstan ARGS --server http://ADDRESS` with the token file (when given).
fn capstan(address: SocketAddr, token_file: Option<&Path>, args: &[&str]) -> (bool, String) {
    let mut command = capstan_testkit::cli::command();
    command
        .args(args)
        .args(["--server", &format!("http://{address}")]);
    if let Some(file) = token_file {
        command
            .arg("--server-token-from")
            .arg(format!("file:{}", file.display()));
    }
    let output = command.output().expect("capstan runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

fn nodes(status: &serde_json::Value) -> usize {
    status["clusters"]["prod"]["nodes"]
        .as_array()
        .map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_from_the_cli_holds_the_cluster_survives_kill_9_and_resume_lets_it_go_on() {
    let world = World::new("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n", &[]).await;
    world.write_fleet(&world.real_fleet());
    world.write_cluster(
        "prod",
        &cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s"),
    );
    let dir = tempfile::tempdir().expect("dir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).expect("token file");
    let run_dir = dir.path().join("run");
    std::fs::create_dir_all(&run_dir).expect("run dir");

    let mut run = start(&world, &run_dir, &token_file);
    let address = run.address();
    wait_status(&mut run, address, "prod Ready", |s| {
        s["clusters"]["prod"]["phase"] == "Ready"
    });

    // Without the token: refused, nothing changes.
    let (ok, text) = capstan(address, None, &["suspend", "prod", "--reason", "INC-42"]);
    assert!(!ok, "{text}");
    assert!(text.contains("--server-token-from"), "{text}");
    assert!(suspended(&status(address)).is_none());
    // An unknown cluster: refused, naming the known ones.
    let (ok, text) = capstan(
        address,
        Some(&token_file),
        &["suspend", "prdo", "--reason", "INC-42"],
    );
    assert!(!ok && text.contains("known: prod"), "{text}");

    let (ok, text) = capstan(
        address,
        Some(&token_file),
        &[
            "suspend",
            "prod",
            "--reason",
            "INC-42: storage outage",
            "--user",
            "alice",
        ],
    );
    assert!(ok, "{text}");
    let status = wait_status(&mut run, address, "prod Suspended", |s| {
        suspended(s).is_some()
    });
    let condition = suspended(&status).expect("suspended");
    assert_eq!(condition["reason"], "SuspendedAtRuntime");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("bearer token, user alice (declared")
            && message.contains("INC-42: storage outage"),
        "{message}"
    );
    assert!(status["clusters"]["prod"]["suspended"][0]["at"].is_string());

    // A scale-up pushed meanwhile is held: it waits on the suspension.
    // `capstan reconcile` makes the daemon read it now, not at its next resync: when it
    // returns, the pass that read the change has completed.
    let before = status["revision"].as_str().unwrap_or_default().to_owned();
    world.write_cluster(
        "prod",
        &cluster_yaml("prod", 30, "1.36.2", 3, "debian13-k8s"),
    );
    let (ok, text) = capstan(address, Some(&token_file), &["reconcile", "prod"]);
    assert!(ok && text.contains("ran a pass at revision"), "{text}");
    let after = self::status(address);
    let revision = after["revision"].as_str().unwrap_or_default();
    assert_ne!(revision, before);
    assert!(text.contains(revision), "{text}");
    assert_eq!(after["clusters"]["prod"]["declaredNodes"], 4);
    wait_status(&mut run, address, "the scale-up held", |s| {
        s["clusters"]["prod"]["waitingOn"]
            .as_array()
            .is_some_and(|w| {
                w.iter().any(|w| {
                    w["resource"]
                        .as_str()
                        .is_some_and(|r| r.starts_with("suspended at runtime"))
                })
            })
    });
    assert_eq!(
        world.vms_of("prod").len(),
        3,
        "no VM created while suspended"
    );

    // kill -9 and a restart: still suspended (the record is in the management cluster).
    run.spawned.0.kill().expect("SIGKILL");
    let _ = run.spawned.0.wait();
    drop(run);
    let mut run = start(&world, &run_dir, &token_file);
    let address = run.address();
    let status = wait_status(&mut run, address, "prod suspended after the restart", |s| {
        suspended(s).is_some()
            && !s["clusters"]["prod"]["waitingOn"]
                .as_array()
                .is_none_or(Vec::is_empty)
    });
    assert_eq!(nodes(&status), 3);
    assert_eq!(world.vms_of("prod").len(), 3, "still nothing created");

    let (ok, text) = capstan(address, Some(&token_file), &["resume", "prod"]);
    assert!(ok && text.contains("prod: resumed"), "{text}");
    let status = wait_status(&mut run, address, "prod scaled up after resume", |s| {
        s["clusters"]["prod"]["phase"] == "Ready" && nodes(s) == 4
    });
    assert!(suspended(&status).is_none());
    assert!(
        !run.log().contains(TOKEN),
        "the token never reaches the logs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unparsable_suspension_record_keeps_the_cluster_suspended_naming_the_record() {
    let world = World::new("apiVersion: capstan.dev/v1alpha1\nkind: Fleet\n", &[]).await;
    world.write_fleet(&world.real_fleet());
    world.write_cluster(
        "prod",
        &cluster_yaml("prod", 30, "1.36.2", 2, "debian13-k8s"),
    );
    // A record of prod's suspension that does not parse (a write over it, a hand edit).
    let management = world.lab.kube().management().expect("management");
    management
        .create_object(
            "secrets",
            Some("capstan-system"),
            serde_json::json!({
                "metadata": {
                    "name": "capstan-suspend-prod",
                    "labels": {
                        "app.kubernetes.io/managed-by": "capstan",
                        "capstan.dev/suspension": "true",
                    },
                    "annotations": {"capstan.dev/suspended-cluster": "prod"},
                },
                "data": {"suspension.json": "eyJzb3VyY2UiOg=="},
            }),
        )
        .expect("a broken suspension record");
    let dir = tempfile::tempdir().expect("dir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).expect("token file");
    let run_dir = dir.path().join("run");
    std::fs::create_dir_all(&run_dir).expect("run dir");

    let mut run = start(&world, &run_dir, &token_file);
    let address = run.address();
    let status = wait_status(&mut run, address, "prod held as suspended", |s| {
        suspended(s).is_some()
    });
    let condition = suspended(&status).expect("suspended");
    assert_eq!(condition["reason"], "SuspensionUnreadable");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(
            "its runtime suspension record capstan-system/capstan-suspend-prod does not parse"
        ),
        "{message}"
    );
    for _ in 0..10 {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(world.vms_of("prod").is_empty(), "no VM while held");
    }

    // `capstan resume` deletes the record: the cluster goes on.
    let (ok, text) = capstan(address, Some(&token_file), &["resume", "prod"]);
    assert!(ok, "{text}");
    wait_status(&mut run, address, "prod building", |s| {
        suspended(s).is_none() && nodes(s) > 0
    });
    run.spawned.0.kill().expect("SIGKILL");
    let _ = run.spawned.0.wait();
}
