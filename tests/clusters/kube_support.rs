//! Helpers for the tests against simulated clusters: a lab with the default world, and the
//! stock `kubectl` run against a cluster with its own HOME (so its discovery cache is fresh).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use capstan_lab::clock::LabClock;
use capstan_lab::kube::{KubeLab, SimCluster, SimClusterConfig};

/// Starts a lab with `management` and the clusters given as YAML (`name: config` pairs).
pub async fn lab(clusters_yaml: &str) -> KubeLab {
    let configs: BTreeMap<String, SimClusterConfig> = if clusters_yaml.trim().is_empty() {
        BTreeMap::new()
    } else {
        serde_saphyr::from_str(clusters_yaml).expect("cluster config")
    };
    KubeLab::start(LabClock::new(), &configs)
        .await
        .expect("lab starts")
}

/// What a kubectl run printed.
#[derive(Debug)]
pub struct Output {
    /// Exit code.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Output {
    /// Asserts success and returns stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(
            self.code, 0,
            "kubectl failed:\n{}\n{}",
            self.stdout, self.stderr
        );
        &self.stdout
    }
}

/// kubectl pointed at one kubeconfig.
pub struct Kubectl {
    home: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// kubectl with the cluster's admin kubeconfig.
    pub fn admin(cluster: &SimCluster) -> Self {
        Kubectl::with_kubeconfig(&cluster.admin_kubeconfig())
    }

    /// kubectl with any kubeconfig text.
    pub fn with_kubeconfig(text: &str) -> Self {
        let home = tempfile::tempdir().expect("home");
        let kubeconfig = home.path().join("config");
        std::fs::write(&kubeconfig, text).expect("write kubeconfig");
        Kubectl { home, kubeconfig }
    }

    /// Runs kubectl with `args` off the async runtime (the API server keeps serving).
    pub async fn run(&self, args: &[&str]) -> Output {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let home = self.home.path().to_owned();
        let kubeconfig = self.kubeconfig.clone();
        tokio::task::spawn_blocking(move || {
            let output = Command::new("kubectl")
                .args(&args)
                .env("HOME", &home)
                .env("KUBECONFIG", &kubeconfig)
                .env_remove("KUBECTL_EXTERNAL_DIFF")
                .output()
                .expect("kubectl on PATH");
            Output {
                code: output.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            }
        })
        .await
        .expect("kubectl task")
    }
}

/// Runs curl (no client certificate, server certificate not checked) and returns the HTTP
/// status code and body.
pub async fn curl_insecure(url: &str) -> (String, String) {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let output = Command::new("curl")
            .args(["-sk", "-w", "\n%{http_code}", &url])
            .output()
            .expect("curl on PATH");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or((&text, ""));
        (code.to_owned(), body.to_owned())
    })
    .await
    .expect("curl task")
}

/// The YAML of a workload cluster for drain scenarios: a control plane and three workers;
/// on `w1`, a Deployment `web` (2 replicas, PDB minAvailable 1, emptyDir) and, when
/// `blocked`, a Deployment `db` (1 replica, PDB minAvailable 1: never evictable); a DaemonSet
/// `agent` everywhere. Workers `w2` and `w3` start cordoned so the scheduler puts everything
/// on `w1`; the test uncordons them before draining.
pub fn drain_world(blocked: bool) -> String {
    let db = if blocked {
        ", {name: db, replicas: 1, pdbMinAvailable: 1}"
    } else {
        ""
    };
    format!(
        "prod:\n  version: 1.36.2\n  endpointHost: k8s-prod.lab.example\n  nodes:\n    - {{name: cp, role: control-plane, address: 10.30.0.10}}\n    - {{name: w1, address: 10.30.0.11}}\n    - {{name: w2, address: 10.30.0.12, unschedulable: true}}\n    - {{name: w3, address: 10.30.0.13, unschedulable: true}}\n  workloads:\n    deployments: [{{name: web, replicas: 2, pdbMinAvailable: 1, emptyDir: true}}{db}]\n    daemonSets: [{{name: agent, namespace: kube-system}}]\n"
    )
}

/// Uncordons `w2` and `w3` of [`drain_world`] directly in the simulated cluster.
pub fn open_spare_workers(cluster: &SimCluster) {
    for node in ["w2", "w3"] {
        let mut object = cluster.object("nodes", None, node).expect("node");
        object["spec"]["unschedulable"] = serde_json::json!(false);
        replace(cluster, "nodes", None, object);
    }
}

/// Replaces an object through the simulated cluster's own store (no HTTP).
pub fn replace(
    cluster: &SimCluster,
    plural: &str,
    namespace: Option<&str>,
    object: serde_json::Value,
) {
    cluster
        .replace_object(plural, namespace, object)
        .expect("replace");
}

/// `namespace/name` of pods on `node` whose name starts with `prefix`.
pub fn pods_named(cluster: &SimCluster, node: &str, prefix: &str) -> Vec<String> {
    cluster
        .pods_on(node)
        .into_iter()
        .filter(|p| p.split('/').nth(1).is_some_and(|n| n.starts_with(prefix)))
        .collect()
}

/// curl as the cluster admin (client certificate from the admin kubeconfig, server verified
/// against the cluster CA): returns the HTTP status code and the parsed JSON body.
pub async fn curl_admin(
    cluster: &SimCluster,
    method: &str,
    path: &str,
    body: Option<(&str, &str)>,
) -> (u16, serde_json::Value) {
    use base64::Engine as _;
    let kubeconfig = cluster.admin_kubeconfig();
    let field = |name: &str| -> Vec<u8> {
        let line = kubeconfig
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix(&format!("{name}: "))
                    .map(str::to_owned)
            })
            .expect("field in kubeconfig");
        base64::engine::general_purpose::STANDARD
            .decode(line)
            .expect("base64")
    };
    let dir = tempfile::tempdir().expect("dir");
    let write = |file: &str, data: Vec<u8>| {
        let path = dir.path().join(file);
        std::fs::write(&path, data).expect("write");
        path.to_str().expect("utf-8").to_owned()
    };
    let ca = write("ca.pem", field("certificate-authority-data"));
    let cert = write("cert.pem", field("client-certificate-data"));
    let key = write("key.pem", field("client-key-data"));
    let mut args = vec![
        "-s".to_owned(),
        "--cacert".into(),
        ca,
        "--cert".into(),
        cert,
        "--key".into(),
        key,
        "-X".into(),
        method.into(),
        "-w".into(),
        "\n%{http_code}".into(),
    ];
    if let Some((content_type, data)) = body {
        args.extend([
            "-H".into(),
            format!("Content-Type: {content_type}"),
            "--data-binary".into(),
            data.into(),
        ]);
    }
    args.push(format!("{}{path}", cluster.url()));
    let output = tokio::task::spawn_blocking(move || {
        Command::new("curl")
            .args(&args)
            .output()
            .expect("curl on PATH")
    })
    .await
    .expect("curl task");
    drop(dir);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or((&text, "0"));
    let json = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    (code.parse().unwrap_or(0), json)
}
