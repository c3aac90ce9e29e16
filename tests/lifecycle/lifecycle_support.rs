//! The whole lifecycle in one process: a lab (simulated Proxmox, clusters, node software), a
//! repository in a temporary folder, and capstan's daemon reconciling it, with helpers to edit
//! the repository, wait on the daemon's status, kill and restart the daemon, and look at the
//! world with the stock kubectl.
//!
//! Rollout rules ("one at a time", "new before old") are asserted on a [`Timeline`]: a
//! [`Recorder`] samples a cluster's Nodes, VMs, served version, Flux Secret and daemon status
//! every 10 ms and keeps each change. The daemon observes afresh between two steps of a
//! cluster, so a state a rollout passes through usually lasts longer than the sampling period;
//! the safety properties are asserted on every sample taken (a state shorter than 10 ms may
//! go unseen: sampling can miss a violation, never invent one).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capstan::connect::Connections;
use capstan::daemon::{Counters, Daemon, DaemonOptions, StatusBoard};
use capstan::status::FleetStatus;
use capstan_lab::lab::{Lab, LabOptions};
use capstan_lab::proxmox::SimVm;
use capstan_lab::world::LabConfig;

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
    /// Admin passwords of the fleet's datastore servers (real MariaDB servers) the daemon is
    /// given, as `main` would read them from `adminPasswordFrom`.
    pub datastore_passwords: std::collections::BTreeMap<String, String>,
    /// What the daemon reads the secrets later revisions name (`endpointFrom`) through, and
    /// whose policy every revision is admitted under (default: `CAPSTAN_` variables of an
    /// empty environment, no files).
    pub secret_reader: capstan::secrets::SecretReader,
    board: Option<Arc<StatusBoard>>,
    daemon: Option<tokio::task::JoinHandle<()>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl World {
    /// A lab and a repository holding `capstan.yaml` and the given cluster files.
    pub async fn new(fleet: &str, clusters: &[(&str, String)]) -> World {
        World::start(fleet, clusters, false).await
    }

    /// [`World::new`] with the simulated Proxmox recording every request (`exchanges()`).
    pub async fn recording(fleet: &str, clusters: &[(&str, String)]) -> World {
        World::start(fleet, clusters, true).await
    }

    async fn start(fleet: &str, clusters: &[(&str, String)], record: bool) -> World {
        World::with_lab(LabConfig::default(), fleet, clusters, record).await
    }

    /// [`World::new`] on a lab built from `config` (other templates, nodes, clusters).
    pub async fn with_lab(
        config: LabConfig,
        fleet: &str,
        clusters: &[(&str, String)],
        record: bool,
    ) -> World {
        let state = tempfile::tempdir().expect("state dir");
        let options = LabOptions {
            state_dir: Some(state.path().to_owned()),
            record,
            ..LabOptions::ephemeral()
        };
        let lab = Lab::start(config, options).await.expect("lab starts");
        let repo = tempfile::tempdir().expect("repo dir");
        std::fs::create_dir_all(repo.path().join("clusters")).expect("clusters dir");
        std::fs::write(repo.path().join("capstan.yaml"), fleet).expect("capstan.yaml");
        let world = World {
            lab,
            repo,
            state,
            datastore_passwords: std::collections::BTreeMap::new(),
            secret_reader: capstan::secrets::SecretReader::default(),
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
        self.start_daemon_with(|connections| connections).await;
    }

    /// Starts a daemon and waits until `clusters` are Ready.
    pub async fn start_until_ready(&mut self, clusters: &[&str]) -> FleetStatus {
        self.start_daemon().await;
        self.wait_for("the cluster Ready", |s| ready(s, clusters))
            .await
    }

    /// [`World::start_daemon`] through the providers `wrap` makes of the lab's connections
    /// (to put a fault between the daemon and the lab).
    pub async fn start_daemon_with<Pr: capstan::connect::Providers>(
        &mut self,
        wrap: impl FnOnce(Connections) -> Pr,
    ) {
        let files = capstan::source::read_repo(self.repo.path()).expect("repo reads");
        let fleet = capstan::spec::load(&files)
            .desired
            .expect("valid fleet")
            .fleet;
        let connections = Connections::for_lab(
            &fleet,
            &self.lab.lab_file(),
            &self.lab.management_kubeconfig(),
            self.lab.api_addresses(),
        )
        .await
        .expect("lab connections")
        .with_secret_reader(self.secret_reader.clone())
        .with_datastores(&fleet, &self.datastore_passwords)
        .expect("datastore access");
        let mut options = DaemonOptions::new(self.repo.path().to_owned());
        options.admission =
            capstan::secrets::Admission::lab(std::sync::Arc::clone(self.secret_reader.policy()));
        options.busy_interval = Duration::from_millis(100);
        // Converged passes come often too, so a test can watch the daemon decide "nothing to
        // do" (the default waits for the fleet's pollInterval, a minute).
        options.resync = Some(Duration::from_millis(300));
        options.backoff = capstan::backoff::Backoff {
            base: Duration::from_millis(200),
            cap: Duration::from_secs(2),
        };
        let clock: Arc<dyn capstan::clock::Clock> = Arc::new(self.lab.clock().clone());
        let daemon = Daemon::new(options, Arc::new(wrap(connections)), clock);
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

    /// Observes the lab and plans the repository once, as a daemon pass would (without
    /// executing anything): what `capstan observe` + `capstan plan` would show.
    pub async fn observe_and_plan(&self) -> capstan::plan::Plan {
        use capstan::clock::Clock as _;
        let files = capstan::source::read_repo(self.repo.path()).expect("repo reads");
        let desired = capstan::spec::load(&files)
            .desired
            .expect("valid repository");
        let connections = Connections::for_lab(
            &desired.fleet,
            &self.lab.lab_file(),
            &self.lab.management_kubeconfig(),
            self.lab.api_addresses(),
        )
        .await
        .expect("lab connections");
        let observer = capstan::observe::Observer::new(Arc::new(connections));
        let now = self.lab.clock().now();
        let observation = observer.observe(&desired, now).await;
        let policy = capstan::plan::Policy::of(&desired);
        capstan::plan::plan(&desired, &observation.observed, &policy, now)
    }

    /// The daemon's status board (to serve it over HTTP).
    pub fn board(&self) -> Arc<StatusBoard> {
        Arc::clone(self.board.as_ref().expect("daemon started"))
    }

    /// The daemon's current status.
    pub fn status(&self) -> FleetStatus {
        self.board.as_ref().expect("daemon started").status()
    }

    /// The daemon's counters (passes, steps by action and outcome).
    pub fn counters(&self) -> Counters {
        self.board.as_ref().expect("daemon started").counters()
    }

    /// How many times `action` (a stable action name) succeeded so far (this daemon).
    pub fn steps_ok(&self, action: &str) -> u64 {
        let kind = capstan::plan::ActionKind::from_name(action).expect("an action name");
        self.counters()
            .steps
            .get(&(kind, "ok"))
            .copied()
            .unwrap_or(0)
    }

    /// Waits until the daemon has run `passes` more passes (each re-reads, observes and
    /// plans), so a test can assert that nothing happened over them.
    pub async fn wait_passes(&self, passes: u64) {
        let start = self.counters().passes;
        self.wait_for(&format!("{passes} more passes"), |_| {
            self.counters().passes >= start + passes
        })
        .await;
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
        write_atomically(&path, text);
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
        write_atomically(&self.repo.path().join("capstan.yaml"), text);
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

    /// `capstan.yaml` of a real fleet (no `--lab`) on this lab: the connection `homelab` to
    /// its Proxmox (token from `CAPSTAN_PROXMOX_HOMELAB_TOKEN`), the management cluster's
    /// kubeconfig from the daemon's `--secrets-dir`; [`World::real_fleet_args`] are the flags
    /// that allow it.
    pub fn real_fleet(&self) -> String {
        let lab = self.lab.lab_file();
        format!(
            "apiVersion: capstan.dev/v1alpha1
kind: Fleet
proxmox:
  homelab:
    url: {}
    tokenId: \"{}\"
    tokenFrom: {{env: CAPSTAN_PROXMOX_HOMELAB_TOKEN}}
    tlsFingerprint: \"{}\"
managementClusters:
  management:
    kubeconfigFrom: {{file: managementClusters/management/kubeconfig}}
approvedMinors: [\"1.36\"]
",
            lab.proxmox.url, lab.proxmox.token_id, lab.proxmox.fingerprint,
        )
    }

    /// The daemon's flags for [`World::real_fleet`]: a `--secrets-dir` holding the management
    /// cluster's kubeconfig (made now, in the lab's state folder) and the pins of `homelab`.
    pub fn real_fleet_args(&self) -> Vec<String> {
        let secrets = self.state.path().join("secrets");
        let folder = secrets.join("managementClusters/management");
        std::fs::create_dir_all(&folder).expect("the management cluster's folder");
        std::fs::copy(self.kubeconfig("management"), folder.join("kubeconfig"))
            .expect("the management kubeconfig");
        let lab = self.lab.lab_file();
        vec![
            "--secrets-dir".to_owned(),
            secrets.display().to_string(),
            "--pin".to_owned(),
            format!("proxmox.homelab.url={}", lab.proxmox.url),
            "--pin".to_owned(),
            format!("proxmox.homelab.tlsFingerprint={}", lab.proxmox.fingerprint),
        ]
    }

    /// Runs the stock kubectl against a cluster of the lab; returns stdout, failing the test
    /// when kubectl fails.
    pub fn kubectl(&self, cluster: &str, args: &[&str]) -> String {
        kubectl_with(&self.kubeconfig(cluster), args)
    }

    /// The fingerprint capstan shows for `cluster`'s current admin kubeconfig (a cluster of
    /// [`cluster_yaml`], endpoint `k8s-<name>.lab.example:6443`): that of the form capstan
    /// admits and rebuilds, not of the file on the node.
    pub fn admin_fingerprint(&self, cluster: &str) -> String {
        use capstan::providers::kube::{AdminKubeconfig, ApiEndpoint};
        let sim = self.lab.kube().cluster(cluster).expect("cluster");
        let endpoint = ApiEndpoint::declared(&format!("k8s-{cluster}.lab.example"), 6443)
            .served_at(sim.local_addr());
        // The daemon's key: the lab's connections derive it from the lab's token.
        let key = capstan::connect::lab_fingerprint_key(&self.lab.lab_file());
        AdminKubeconfig::reduce(&sim.admin_kubeconfig(), &endpoint, &key)
            .expect("admitted")
            .fingerprint()
            .to_owned()
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

/// Looking at the world.
impl World {
    /// The simulated cluster's Nodes, by name (empty before `kubeadm init`).
    pub fn nodes_of(&self, cluster: &str) -> Vec<NodeView> {
        nodes_of(self.lab.kube(), cluster)
    }

    /// The VMs of one cluster as ownership sees them (tags parsed).
    pub fn vm_views(&self, cluster: &str) -> Vec<VmView> {
        vm_views(&self.lab.proxmox(), cluster)
    }

    /// What `/version` of the simulated cluster says (`v1.36.2`).
    pub fn served_version(&self, cluster: &str) -> Option<String> {
        self.lab.kube().cluster(cluster).map(|c| c.version())
    }

    /// `kubernetesVersion` of the cluster's `kube-system/kubeadm-config`.
    pub fn kubeadm_config_version(&self, cluster: &str) -> Option<String> {
        kubeadm_config_version(self.lab.kube(), cluster)
    }

    /// Starts recording a timeline of one cluster: every change of its Nodes, VMs, served
    /// version, Flux Secret and daemon status, sampled every few milliseconds.
    pub fn record(&self, cluster: &str) -> Recorder {
        let kube = Arc::clone(self.lab.kube());
        let proxmox = self.lab.proxmox();
        let board = self.board.clone();
        let cluster = cluster.to_owned();
        let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let samples = Arc::clone(&samples);
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let started = tokio::time::Instant::now();
                loop {
                    let sample = Sample {
                        at: started.elapsed(),
                        status: board
                            .as_ref()
                            .and_then(|b| b.status().clusters.get(&cluster).cloned()),
                        nodes: nodes_of(&kube, &cluster),
                        vms: vm_views(&proxmox, &cluster),
                        version: kube.cluster(&cluster).map(|c| c.version()),
                        kubeadm_config_version: kubeadm_config_version(&kube, &cluster),
                        flux: flux_fingerprint(&kube, &cluster),
                    };
                    {
                        let mut samples = samples.lock().expect("samples");
                        if samples.last().is_none_or(|last| !last.same_world(&sample)) {
                            samples.push(sample);
                        }
                    }
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        };
        Recorder {
            samples,
            stop,
            task: Some(task),
        }
    }
}

/// A Node as the simulated API server holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// Node name (= VM name).
    pub name: String,
    /// `Ready` is `True`.
    pub ready: bool,
    /// `spec.unschedulable`.
    pub cordoned: bool,
    /// `status.nodeInfo.kubeletVersion`.
    pub kubelet: String,
    /// Labelled as a control plane.
    pub control_plane: bool,
}

impl NodeView {
    /// Ready and schedulable: it carries workloads.
    pub fn is_serving(&self) -> bool {
        self.ready && !self.cordoned
    }
}

/// A VM of a cluster, with its ownership tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmView {
    /// VM name.
    pub name: String,
    /// VMID.
    pub vmid: u32,
    /// Running.
    pub running: bool,
    /// Tags.
    pub tags: Vec<String>,
}

impl VmView {
    /// The `spec-<hash>` tag's hash.
    pub fn spec_hash(&self) -> Option<&str> {
        self.tags.iter().find_map(|t| t.strip_prefix("spec-"))
    }

    /// Tagged as on its way out.
    pub fn is_retiring(&self) -> bool {
        self.tags
            .iter()
            .any(|t| t == capstan::observed::RETIRING_TAG)
    }

    /// Its pool, from its name (`capstan-<cluster>-<pool>-<suffix>`): a fresh clone carries
    /// no tags until its config call.
    pub fn pool(&self) -> &str {
        self.name.rsplit('-').nth(1).unwrap_or_default()
    }

    /// A worker (any pool but the control plane's `cp`).
    pub fn is_worker(&self) -> bool {
        !self.is_control_plane()
    }

    /// A control plane (pool `cp`).
    pub fn is_control_plane(&self) -> bool {
        self.pool() == "cp"
    }
}

/// One moment of a recorded timeline.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Since the recording started.
    pub at: Duration,
    /// The daemon's status of the cluster.
    pub status: Option<capstan::status::ClusterStatus>,
    /// Its Nodes.
    pub nodes: Vec<NodeView>,
    /// Its VMs.
    pub vms: Vec<VmView>,
    /// `/version`.
    pub version: Option<String>,
    /// `kubeadm-config`'s `kubernetesVersion`.
    pub kubeadm_config_version: Option<String>,
    /// Fingerprint of the kubeconfig in Flux's Secret.
    pub flux: Option<String>,
}

impl Sample {
    fn same_world(&self, other: &Sample) -> bool {
        self.status == other.status
            && self.nodes == other.nodes
            && self.vms == other.vms
            && self.version == other.version
            && self.kubeadm_config_version == other.kubeadm_config_version
            && self.flux == other.flux
    }

    /// A Node by name.
    pub fn node(&self, name: &str) -> Option<&NodeView> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Worker Nodes that are Ready and schedulable.
    pub fn serving_workers(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| !n.control_plane && n.is_serving())
            .count()
    }

    /// A one-line summary, for failure messages.
    pub fn summary(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                format!(
                    "{}{}{}",
                    n.name,
                    if n.ready { "" } else { "(NotReady)" },
                    if n.cordoned { "(cordoned)" } else { "" }
                )
            })
            .collect();
        let vms: Vec<String> = self
            .vms
            .iter()
            .map(|v| {
                format!(
                    "{}{}{}",
                    v.name,
                    if v.running { "" } else { "(stopped)" },
                    if v.is_retiring() { "(retiring)" } else { "" }
                )
            })
            .collect();
        let next = self
            .status
            .as_ref()
            .map(|s| format!("{} next {:?}", s.phase, s.next_steps))
            .unwrap_or_default();
        format!(
            "{:>6}ms {} nodes [{}] vms [{}] {next}",
            self.at.as_millis(),
            self.version.as_deref().unwrap_or("-"),
            nodes.join(" "),
            vms.join(" ")
        )
    }
}

/// A timeline being recorded; [`Recorder::finish`] stops it and hands the samples over.
pub struct Recorder {
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Recorder {
    /// Stops recording (after one last sample) and returns the timeline.
    pub async fn finish(mut self) -> Timeline {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(task) = self.task.take() {
            task.await.expect("recorder runs");
        }
        let samples = std::mem::take(&mut *self.samples.lock().expect("samples"));
        Timeline(samples)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Recorded samples, each differing from the one before.
#[derive(Debug, Clone)]
pub struct Timeline(pub Vec<Sample>);

impl Timeline {
    /// The whole timeline, one line per sample, for failure messages.
    pub fn dump(&self) -> String {
        self.0
            .iter()
            .map(Sample::summary)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Index of the first sample where `what` holds.
    pub fn first(&self, what: impl Fn(&Sample) -> bool) -> Option<usize> {
        self.0.iter().position(what)
    }

    /// The last sample.
    pub fn last(&self) -> &Sample {
        self.0.last().expect("a timeline has at least one sample")
    }
}

fn nodes_of(kube: &capstan_lab::kube::KubeLab, cluster: &str) -> Vec<NodeView> {
    let Some(sim) = kube.cluster(cluster) else {
        return Vec::new();
    };
    let mut nodes: Vec<NodeView> = sim
        .objects("nodes", None)
        .iter()
        .map(|node| NodeView {
            name: node["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            ready: node["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True"),
            cordoned: node["spec"]["unschedulable"] == true,
            kubelet: node["status"]["nodeInfo"]["kubeletVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            control_plane: node["metadata"]["labels"]
                .get("node-role.kubernetes.io/control-plane")
                .is_some(),
        })
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    nodes
}

fn vm_views(proxmox: &capstan_lab::proxmox::SimHandle, cluster: &str) -> Vec<VmView> {
    let prefix = format!("capstan-{cluster}-");
    let mut vms: Vec<VmView> = proxmox
        .vms()
        .into_iter()
        .filter(|vm| !vm.template && vm.name.starts_with(&prefix))
        .map(|vm| VmView {
            tags: vm
                .config
                .get("tags")
                .map(|t| {
                    t.split([';', ',', ' '])
                        .filter(|t| !t.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            name: vm.name,
            vmid: vm.vmid,
            running: vm.running,
        })
        .collect();
    vms.sort_by(|a, b| a.name.cmp(&b.name));
    vms
}

fn kubeadm_config_version(kube: &capstan_lab::kube::KubeLab, cluster: &str) -> Option<String> {
    let config =
        kube.cluster(cluster)?
            .object("configmaps", Some("kube-system"), "kubeadm-config")?;
    let text = config["data"]["ClusterConfiguration"].as_str()?;
    // YAML from `kubeadm init`; an upgrade may store it as JSON, which is YAML too.
    let document: serde_json::Value = serde_saphyr::from_str(text).ok()?;
    document["kubernetesVersion"].as_str().map(str::to_owned)
}

fn flux_fingerprint(kube: &capstan_lab::kube::KubeLab, cluster: &str) -> Option<String> {
    let secret = kube.management()?.object(
        "secrets",
        Some("flux-system"),
        &format!("{cluster}-kubeconfig"),
    )?;
    let value = secret["data"]["value"].as_str()?;
    // Only to tell one Secret from the next: the daemon's fingerprints are keyed.
    Some(capstan::fingerprint::content_sha256(value.as_bytes()))
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            daemon.abort();
        }
        self.lab.stop();
    }
}

/// Replaces a file the way Git and git-sync do (a new file renamed over the old one), so the
/// daemon never reads it half-written.
fn write_atomically(path: &Path, text: &str) {
    let partial = path.with_extension("yaml.partial");
    std::fs::write(&partial, text).expect("write");
    std::fs::rename(&partial, path).expect("rename");
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
            .is_some_and(|c| c.phase == capstan::status::Phase::Ready)
    })
}
