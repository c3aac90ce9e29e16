//! `capstan run --lab` following a Git remote builds the seed's K3s cluster (3 servers, 2
//! agents) on a real MariaDB: the admin password comes from the environment as
//! `adminPasswordFrom` says, and Flux's Secret on the lab's management cluster holds a
//! kubeconfig the stock kubectl uses to see the five nodes Ready.

use capstan_testkit::Remote;
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::mariadb::{MariaDb, seed_k3s_cluster};
use capstan_testkit::process::CapstanRun;

fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--request-timeout", "10s"])
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn run_lab_builds_the_seed_k3s_cluster_from_a_pushed_commit() {
    if !judge::present(&[Judge::Mariadb, Judge::Kubectl]) {
        return;
    }
    let mariadb = MariaDb::start();
    let remote = Remote::new();
    let fleet = std::fs::read_to_string(remote.work().join("capstan.yaml")).expect("fleet");
    remote.write(
        "capstan.yaml",
        &format!("{fleet}{}", mariadb.datastores_yaml()),
    );
    remote.write("clusters/edge.yaml", &seed_k3s_cluster());
    let head = remote.commit_and_push("the seed's K3s cluster");

    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("file://{}", remote.bare().display());
    let mut child = CapstanRun::start(dir.path(), |command| {
        command
            .args(["--repo", &url, "--lab", "--log"])
            .arg(format!("warn,{}", capstan_testkit::announced::ANNOUNCING))
            .env(
                capstan_testkit::mariadb::PASSWORD_VARIABLE,
                &mariadb.root_password,
            );
    });
    let addr = child.address();
    let status = child.wait_status(addr, "edge Ready at the pushed commit", &|body| {
        let Ok(status) = serde_json::from_str::<capstan::status::FleetStatus>(body) else {
            return false;
        };
        status.revision.as_deref() == Some(&format!("main@sha1:{head}"))
            && status
                .clusters
                .get("edge")
                .is_some_and(|c| c.phase == capstan::plan::Phase::Ready)
    });
    assert!(
        !status.contains(&mariadb.root_password),
        "no admin password in the status"
    );

    let management = dir.path().join("lab").join("management.kubeconfig");
    let encoded = kubectl(
        &management,
        &[
            "get",
            "secret",
            "-n",
            "flux-system",
            "edge-kubeconfig",
            "-o",
            "jsonpath={.data.value}",
        ],
    );
    use base64::Engine as _;
    let delivered = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .expect("base64");
    let file = dir.path().join("edge.kubeconfig");
    std::fs::write(&file, delivered).expect("write");
    let listed = kubectl(&file, &["get", "nodes", "--no-headers"]);
    let ready: Vec<&str> = listed
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
        .collect();
    assert_eq!(ready.len(), 5, "{listed}");
    assert_eq!(
        ready.iter().filter(|l| l.contains("control-plane")).count(),
        3,
        "{listed}"
    );
    assert_ne!(
        mariadb.sql("SELECT COUNT(*) FROM k3s_edge.kine"),
        "0\n",
        "kine's table has rows"
    );
}
