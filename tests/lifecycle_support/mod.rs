//! The whole lifecycle in one process: a lab (simulated Proxmox, clusters, node software), a
//! repository in a temporary folder, and capstan's daemon reconciling it, with helpers to edit
//! the repository, wait on the daemon's status, kill and restart the daemon, and look at the
//! world with the stock kubectl.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use capstan::connect::Connections;
use capstan::daemon::{Daemon, DaemonOptions, StatusBoard};
use capstan::sim::lab::{Lab, LabOptions};
use capstan::sim::proxmox::SimVm;
use capstan::sim::world::LabConfig;
use capstan::status::FleetStatus;

/// How long a wait may take before the test fails (the lab builds a cluster in seconds).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// `capstan.yaml` of the test repositories: the example fleet, with 1.37 approved or not.
pub fn fleet_yaml(approved: &[&str], prune: bool) -> String {
    let minors: Vec<String> = approved.iter().map(|m| format!("\"{m}\"")).collect();
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Fleet
clustersDir: clusters
proxmox:
  homelab:
    url: https://pve1.lab.example:8006
    tokenId: capstan@pve!reconciler
    tokenFrom: {{env: CAPSTAN_PROXMOX_HOMELAB_TOKEN}}
managementClusters:
  management:
    kubeconfigFrom: {{file: /etc/capstan/management.kubeconfig}}
approvedMinors: [{}]
prune: {prune}
pollInterval: 1m
",
        minors.join(", ")
    )
}

/// A small cluster file: one control plane, `workers` workers in pool `general`, no
/// maintenance window, short timeouts (the lab is fast).
pub fn cluster_yaml(
    name: &str,
    address_octet: u8,
    version: &str,
    workers: u32,
    template: &str,
) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  proxmox: homelab
  kubernetes: {{version: {version}}}
  endpoint: {{host: k8s-{name}.lab.example, address: 192.168.1.{address_octet}}}
  network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  controlPlane:
    replicas: 1
    machine: {{template: debian13-k8s, cores: 2, memoryMiB: 4096, placement: [pve1]}}
  workers:
    - pool: general
      replicas: {workers}
      machine: {{template: {template}, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}}
  rollout: {{minWorkers: 2, drainTimeout: 4s, joinTimeout: 2m}}
  delivery:
    flux: {{cluster: management}}
"
    )
}

/// A lab, a repository and (while started) a daemon, all in this process.
pub struct World {
    /// The lab.
    pub lab: Lab,
    /// The repository folder.
    pub repo: tempfile::TempDir,
    /// Where the lab writes lab.json and kubeconfigs.
    pub state: tempfile::TempDir,
    board: Option<Arc<StatusBoard>>,
    daemon: Option<tokio::task::JoinHandle<()>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl World {
    /// A lab and a repository holding `capstan.yaml` and the given cluster files.
    pub async fn new(fleet: &str, clusters: &[(&str, String)]) -> World {
        let state = tempfile::tempdir().expect("state dir");
        let options = LabOptions {
            state_dir: Some(state.path().to_owned()),
            ..LabOptions::ephemeral()
        };
        let lab = Lab::start(LabConfig::default(), options)
            .await
            .expect("lab starts");
        let repo = tempfile::tempdir().expect("repo dir");
        std::fs::create_dir_all(repo.path().join("clusters")).expect("clusters dir");
        std::fs::write(repo.path().join("capstan.yaml"), fleet).expect("capstan.yaml");
        let world = World {
            lab,
            repo,
            state,
            board: None,
            daemon: None,
            stop: None,
        };
        for (name, text) in clusters {
            world.write_cluster(name, text);
        }
        world
    }

    /// Starts a daemon on the repository (a fresh one: nothing carried over from before).
    pub async fn start_daemon(&mut self) {
        let files = capstan::source::read_repo(self.repo.path()).expect("repo reads");
        let fleet = capstan::spec::load(&files)
            .desired
            .expect("valid fleet")
            .fleet;
        let connections = Connections::for_lab(
            &fleet,
            &self.lab.lab_file(),
            &self.lab.management_kubeconfig(),
        )
        .await
        .expect("lab connections");
        let mut options = DaemonOptions::new(self.repo.path().to_owned());
        options.busy_interval = Duration::from_millis(100);
        options.backoff = capstan::backoff::Backoff {
            base: Duration::from_millis(200),
            cap: Duration::from_secs(2),
        };
        let clock: Arc<dyn capstan::clock::Clock> = Arc::new(self.lab.clock().clone());
        let daemon = Daemon::new(options, Arc::new(connections), clock);
        self.board = Some(daemon.board());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        self.stop = Some(stop);
        self.daemon = Some(tokio::spawn(async move {
            daemon
                .run(async {
                    let _ = stopped.await;
                })
                .await
                .expect("daemon runs");
        }));
    }

    /// Kills the daemon where it stands: its steps in flight are dropped mid-way, as with
    /// `kill -9` (the lab keeps whatever Proxmox tasks were already submitted).
    pub async fn kill_daemon(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            daemon.abort();
            let _ = daemon.await;
        }
        self.stop = None;
        self.board = None;
    }

    /// The daemon's status board (to serve it over HTTP).
    pub fn board(&self) -> Arc<StatusBoard> {
        Arc::clone(self.board.as_ref().expect("daemon started"))
    }

    /// The daemon's current status.
    pub fn status(&self) -> FleetStatus {
        self.board.as_ref().expect("daemon started").status()
    }

    /// Waits until `done` holds for the daemon's status; fails the test with the last status
    /// after [`PATIENCE`].
    pub async fn wait_for(&self, what: &str, done: impl Fn(&FleetStatus) -> bool) -> FleetStatus {
        self.wait_for_within(what, PATIENCE, done).await
    }

    /// [`World::wait_for`] with its own patience.
    pub async fn wait_for_within(
        &self,
        what: &str,
        patience: Duration,
        done: impl Fn(&FleetStatus) -> bool,
    ) -> FleetStatus {
        let started = tokio::time::Instant::now();
        loop {
            let status = self.status();
            if done(&status) {
                return status;
            }
            assert!(
                started.elapsed() < patience,
                "timed out waiting for {what}; status:\n{}",
                serde_json::to_string_pretty(&status).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Writes (or replaces) `clusters/<name>.yaml`.
    pub fn write_cluster(&self, name: &str, text: &str) {
        let path = self
            .repo
            .path()
            .join("clusters")
            .join(format!("{name}.yaml"));
        std::fs::write(path, text).expect("cluster file");
    }

    /// Removes `clusters/<name>.yaml`.
    pub fn remove_cluster(&self, name: &str) {
        std::fs::remove_file(
            self.repo
                .path()
                .join("clusters")
                .join(format!("{name}.yaml")),
        )
        .expect("remove cluster file");
    }

    /// Replaces `capstan.yaml`.
    pub fn write_fleet(&self, text: &str) {
        std::fs::write(self.repo.path().join("capstan.yaml"), text).expect("capstan.yaml");
    }

    /// The simulated Proxmox's VMs that are not templates, by name.
    pub fn vms(&self) -> Vec<SimVm> {
        let mut vms: Vec<SimVm> = self
            .lab
            .proxmox()
            .vms()
            .into_iter()
            .filter(|vm| !vm.template)
            .collect();
        vms.sort_by(|a, b| a.name.cmp(&b.name));
        vms
    }

    /// The VMs of one cluster (by name prefix).
    pub fn vms_of(&self, cluster: &str) -> Vec<SimVm> {
        let prefix = format!("capstan-{cluster}-");
        self.vms()
            .into_iter()
            .filter(|vm| vm.name.starts_with(&prefix))
            .collect()
    }

    /// The kubeconfig file lab.json lists for a cluster.
    pub fn kubeconfig(&self, cluster: &str) -> PathBuf {
        self.lab
            .kubeconfig_path(cluster)
            .unwrap_or_else(|| panic!("no kubeconfig for {cluster}"))
    }

    /// Runs the stock kubectl against a cluster of the lab; returns stdout, failing the test
    /// when kubectl fails.
    pub fn kubectl(&self, cluster: &str, args: &[&str]) -> String {
        kubectl_with(&self.kubeconfig(cluster), args)
    }

    /// The Flux Secret's `value` for a cluster (the delivered kubeconfig), decoded.
    pub fn flux_kubeconfig(&self, cluster: &str) -> Option<String> {
        let management = self.lab.kube().management().expect("management cluster");
        let secret = management.object(
            "secrets",
            Some("flux-system"),
            &format!("{cluster}-kubeconfig"),
        )?;
        let encoded = secret["data"]["value"].as_str()?;
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()?;
        String::from_utf8(bytes).ok()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            daemon.abort();
        }
        self.lab.stop();
    }
}

/// Runs the stock kubectl with a kubeconfig file.
pub fn kubectl_with(kubeconfig: &Path, args: &[&str]) -> String {
    let output = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--request-timeout", "10s"])
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Whether every named cluster is Ready.
pub fn ready(status: &FleetStatus, clusters: &[&str]) -> bool {
    clusters.iter().all(|name| {
        status
            .clusters
            .get(*name)
            .is_some_and(|c| c.phase == capstan::status::PhaseName::Ready)
    })
}
