//! A Git remote for the tests: a bare repository (what the servers serve) and a working clone,
//! changed with the stock `git` CLI (commit, push, force-push).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use capstan::source::{GitCredentials, GitOptions, GitSource, Limits, Redactor, SourceMetrics};

/// A bare repository `fleet.git` under [`Remote::root`] and a clone to change it from.
pub struct Remote {
    dir: tempfile::TempDir,
}

/// Runs `git` in `dir`, failing loudly.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "protocol.file.allow=always",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

const FLEET: &str = "apiVersion: capstan.dev/v1alpha1
kind: Fleet
clustersDir: clusters
proxmox:
  homelab:
    url: https://pve1.lab.example:8006
    tokenId: capstan@pve!reconciler
    tokenFrom: {env: CAPSTAN_PROXMOX_HOMELAB_TOKEN}
managementClusters:
  management:
    kubeconfigFrom: {file: /etc/capstan/management.kubeconfig}
approvedMinors: [\"1.36\"]
pollInterval: 1m
";

impl Remote {
    /// A remote whose first commit holds `capstan.yaml` and `clusters/`.
    pub fn new() -> Remote {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("srv");
        std::fs::create_dir_all(&root).expect("srv");
        git(&root, &["init", "-q", "--bare", "-b", "main", "fleet.git"]);
        git(
            dir.path(),
            &[
                "clone",
                "-q",
                root.join("fleet.git").to_str().expect("path"),
                "work",
            ],
        );
        let remote = Remote { dir };
        remote.write("capstan.yaml", FLEET);
        remote.write("clusters/README.md", "one file per cluster\n");
        remote.commit_and_push("first commit");
        remote
    }

    /// The folder the servers serve (holding `fleet.git`).
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("srv")
    }

    /// The bare repository.
    pub fn bare(&self) -> PathBuf {
        self.root().join("fleet.git")
    }

    /// The working clone.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// Writes a file in the clone.
    pub fn write(&self, path: &str, text: &str) {
        let path = self.work().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    /// Commits everything and pushes to `main`; returns the commit id.
    pub fn commit_and_push(&self, message: &str) -> String {
        let work = self.work();
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "--allow-empty", "-m", message]);
        git(&work, &["push", "-q", "origin", "HEAD:main"]);
        git(&work, &["rev-parse", "HEAD"])
    }

    /// Pushes the clone's HEAD to `branch` too; returns the commit id.
    pub fn push_to(&self, branch: &str) -> String {
        let work = self.work();
        git(&work, &["push", "-q", "origin", &format!("HEAD:{branch}")]);
        git(&work, &["rev-parse", "HEAD"])
    }

    /// Rewrites the last commit and force-pushes it; returns the new commit id.
    pub fn amend_and_force_push(&self, message: &str) -> String {
        let work = self.work();
        git(&work, &["add", "-A"]);
        git(
            &work,
            &["commit", "-q", "--amend", "--allow-empty", "-m", message],
        );
        git(&work, &["push", "-q", "--force", "origin", "HEAD:main"]);
        git(&work, &["rev-parse", "HEAD"])
    }

    /// Options to follow `url`'s `main`, mirrors under a temporary folder of this remote.
    pub fn options(&self, url: &str, credentials: GitCredentials) -> GitOptions {
        GitOptions {
            url: url.to_owned(),
            branch: "main".to_owned(),
            path: None,
            mirror_root: self.dir.path().join("mirrors"),
            credentials,
            limits: Limits::default(),
        }
    }
}

/// A source following `options`, with its own counters and redactor.
pub fn open(options: GitOptions) -> (GitSource, Arc<SourceMetrics>) {
    let metrics = Arc::new(SourceMetrics::default());
    let source =
        GitSource::open(options, Redactor::default(), Arc::clone(&metrics)).expect("mirror opens");
    (source, metrics)
}

/// A cluster file (a small valid one, `workers` workers).
pub fn cluster(name: &str, workers: u32) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  proxmox: homelab
  kubernetes: {{version: 1.36.2}}
  endpoint: {{host: k8s-{name}.lab.example, address: 192.168.1.60}}
  network: {{nodes: 192.168.1.0/24}}
  controlPlane:
    machine: {{template: debian13-k8s, cores: 2, memoryMiB: 4096, placement: [pve1]}}
  workers:
    - pool: general
      replicas: {workers}
      machine: {{template: debian13-k8s, cores: 2, memoryMiB: 4096, placement: [pve1, pve2, pve3]}}
"
    )
}

/// A process of the test (a `capstan` binary), killed when dropped, so a failing test leaves
/// no daemon behind.
pub struct Spawned(pub std::process::Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The retry backoff of the daemon tests: short, so a failure is retried within the test.
pub const TEST_BACKOFF: capstan::backoff::Backoff = capstan::backoff::Backoff {
    base: std::time::Duration::from_millis(50),
    cap: std::time::Duration::from_millis(500),
};

/// A lab started for a daemon test, with the fleet and connections read from the tip of the
/// remote `source` follows (polled once here).
pub struct LabAtTip {
    /// The lab's state folder (kept for the test's length).
    pub state: tempfile::TempDir,
    /// The lab.
    pub lab: capstan_lab::lab::Lab,
    /// The fleet file of the tip.
    pub fleet: capstan::spec::Fleet,
    /// The fleet's connections, pointed at the lab.
    pub connections: capstan::connect::Connections,
}

/// Starts a lab described by `config` and reads the fleet at `source`'s tip.
pub async fn lab_at_tip(config: capstan_lab::world::LabConfig, source: &mut GitSource) -> LabAtTip {
    let state = tempfile::tempdir().expect("state dir");
    let lab = capstan_lab::lab::Lab::start(
        config,
        capstan_lab::lab::LabOptions {
            state_dir: Some(state.path().to_owned()),
            ..capstan_lab::lab::LabOptions::ephemeral()
        },
    )
    .await
    .expect("lab starts");
    let first = source
        .poll()
        .expect("the remote answers")
        .revision()
        .clone();
    let files = source.read(&first).expect("first commit reads").files;
    let fleet = capstan::spec::load(&files)
        .desired
        .expect("valid fleet")
        .fleet;
    let connections = capstan::connect::Connections::for_lab(
        &fleet,
        &lab.lab_file(),
        &lab.management_kubeconfig(),
        lab.api_addresses(),
    )
    .await
    .expect("lab connections");
    LabAtTip {
        state,
        lab,
        fleet,
        connections,
    }
}
