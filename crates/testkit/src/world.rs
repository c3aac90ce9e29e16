//! The one in-process harness: a lab (simulated Proxmox, clusters, node software), a
//! repository in a temporary folder, and capstan's daemon reconciling it (or following a Git
//! remote instead, see [`Setup`]), with helpers to edit the repository, wait on the daemon's
//! status, kill and restart the daemon, and look at the world with the stock kubectl.
//!

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use capstan::backoff::Backoff;
use capstan::connect::Connections;
use capstan::daemon::{Counters, Daemon, DaemonOptions, StatusBoard, http};
use capstan::leader::Leadership;
use capstan::source::webhook::Webhooks;
use capstan::source::{GitOptions, GitSource, Redactor, Secret, SourceMetrics, Tracker};
use capstan::status::FleetStatus;
use capstan::status_branch::{
    BranchOptions, CommitSettings, StatusRepository, StatusWriter, WriterOptions,
};
use capstan_lab::lab::{Lab, LabOptions};
use capstan_lab::proxmox::SimVm;

use capstan_lab::world::LabConfig;

use crate::timeline::{NodeView, Recorder, VmView, kubeadm_config_version, nodes_of, vm_views};

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
    http: Option<SocketAddr>,
    daemon: Option<tokio::task::JoinHandle<()>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Whether a test took the schema's verdict itself ([`World::take_schema_violations`]).
    schema_judged: bool,
}

/// How a [`World`]'s daemon runs: what it follows (the world's folder, or a Git remote), how
/// often it looks, and what it adds (webhooks, the status branch, leader election, HTTP).
/// Datastores come from [`World::datastore_passwords`], secrets from [`World::secret_reader`].
#[derive(Clone)]
pub struct Setup {
    follow: Option<GitOptions>,
    redactor: Redactor,
    poll_interval: Option<Duration>,
    resync: Duration,
    backoff: Backoff,
    webhook_secret: Option<Secret>,
    status_branch: Option<(Duration, Duration)>,
    leadership: Option<Arc<Leadership>>,
    http: bool,
    notify: Option<capstan::notify::NotifyOptions>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup::folder()
    }
}

impl Setup {
    /// The world's folder, passes every 100 ms while busy and every 300 ms when converged
    /// (so a test can watch the daemon decide "nothing to do"), failures retried after
    /// 200 ms doubling to 2 s; no HTTP.
    pub fn folder() -> Setup {
        Setup {
            follow: None,
            redactor: Redactor::default(),
            poll_interval: None,
            resync: Duration::from_millis(300),
            backoff: Backoff {
                base: Duration::from_millis(200),
                cap: Duration::from_secs(2),
            },
            webhook_secret: None,
            status_branch: None,
            leadership: None,
            http: false,
            notify: None,
        }
    }

    /// Follows the Git remote `options` name, polled every `poll_interval`, failures retried
    /// after 50 ms doubling to 500 ms; serves HTTP (`/status`, `/metrics`).
    pub fn git(options: GitOptions, poll_interval: Duration) -> Setup {
        Setup {
            follow: Some(options),
            poll_interval: Some(poll_interval),
            backoff: Backoff {
                base: Duration::from_millis(50),
                cap: Duration::from_millis(500),
            },
            http: true,
            ..Setup::folder()
        }
    }

    /// Passes at least every `resync` when converged.
    #[must_use]
    pub fn resync(mut self, resync: Duration) -> Setup {
        self.resync = resync;
        self
    }

    /// The redactor the source and the status branch know the secrets by.
    #[must_use]
    pub fn redactor(mut self, redactor: Redactor) -> Setup {
        self.redactor = redactor;
        self
    }

    /// Serves forge webhooks under `/hooks/` checked with `secret` (a Git remote only).
    #[must_use]
    pub fn webhooks(mut self, secret: Secret) -> Setup {
        self.webhook_secret = Some(secret);
        self.http = true;
        self
    }

    /// Commits the status to the remote's status branch, debounced over `window` and at most
    /// once a `floor` (both in lab time; a Git remote only).
    #[must_use]
    pub fn status_branch(mut self, window: Duration, floor: Duration) -> Setup {
        self.status_branch = Some((window, floor));
        self
    }

    /// Acts only while `leadership` leads.
    #[must_use]
    pub fn leadership(mut self, leadership: Arc<Leadership>) -> Setup {
        self.leadership = Some(leadership);
        self
    }

    /// Sends the notifications the fleet's `notifications:` asks for, paced by `options`,
    /// reading the receivers' addresses through [`World::secret_reader`].
    #[must_use]
    pub fn notify(mut self, options: capstan::notify::NotifyOptions) -> Setup {
        self.notify = Some(options);
        self
    }

    /// Serves HTTP (`/status`, `/metrics`) on a loopback port the system picks.
    #[must_use]
    pub fn http(mut self) -> Setup {
        self.http = true;
        self
    }
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
            http: None,
            daemon: None,
            stop: None,
            schema_judged: false,
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
        self.start_daemon_as(Setup::folder(), wrap).await;
    }

    /// A lab built from `config` and a daemon following the Git remote of `setup` (see
    /// [`Setup::git`]); the world's folder stays empty.
    pub async fn following(config: LabConfig, setup: Setup) -> World {
        let mut world = World::with_lab(config, "", &[], false).await;
        world
            .start_daemon_as(setup, |connections| connections)
            .await;
        world
    }

    /// Starts a daemon as `setup` says, through the providers `wrap` makes of the lab's
    /// connections.
    pub async fn start_daemon_as<Pr: capstan::connect::Providers>(
        &mut self,
        setup: Setup,
        wrap: impl FnOnce(Connections) -> Pr,
    ) {
        assert!(
            setup.follow.is_some()
                || (setup.webhook_secret.is_none() && setup.status_branch.is_none()),
            "webhooks and the status branch need a Git remote to follow (Setup::git)"
        );
        let (files, source) = match &setup.follow {
            None => (
                capstan::source::read_repo(self.repo.path()).expect("repo reads"),
                None,
            ),
            Some(options) => {
                let metrics = Arc::new(SourceMetrics::default());
                let mut source = GitSource::open(
                    options.clone(),
                    setup.redactor.clone(),
                    Arc::clone(&metrics),
                )
                .expect("mirror opens");
                let tip = source
                    .poll()
                    .expect("the remote answers")
                    .revision()
                    .clone();
                let files = source.read(&tip).expect("the tip reads").files;
                (files, Some((source, metrics)))
            }
        };
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
        let mut options = DaemonOptions::new(if source.is_none() {
            self.repo.path().to_owned()
        } else {
            PathBuf::new()
        });
        options.admission =
            capstan::secrets::Admission::lab(std::sync::Arc::clone(self.secret_reader.policy()));
        options.busy_interval = Duration::from_millis(100);
        options.resync = Some(setup.resync);
        options.poll_interval = setup.poll_interval;
        options.backoff = setup.backoff;
        let clock: Arc<dyn capstan::clock::Clock> = Arc::new(self.lab.clock().clone());
        let mut daemon = Daemon::new(options, Arc::new(wrap(connections)), Arc::clone(&clock));
        if let Some(options) = &setup.notify {
            daemon = daemon.with_notifier(capstan::notify::Notifier::new(
                self.secret_reader.clone(),
                options.clone(),
                Arc::clone(&clock),
            ));
        }
        let mut hooks = axum::Router::new();
        if let (Some((source, metrics)), Some(follow)) = (source, &setup.follow) {
            daemon = daemon.with_tracker(Tracker::git(source, setup.poll_interval, setup.backoff));
            if let Some(secret) = &setup.webhook_secret {
                hooks = Arc::new(Webhooks::new(
                    secret.clone(),
                    follow.branch.clone(),
                    daemon.poll_trigger(),
                    metrics,
                ))
                .router();
            }
            if let Some((window, floor)) = setup.status_branch {
                daemon = daemon.with_status_branch(status_writer(
                    follow,
                    &fleet,
                    &setup.redactor,
                    (window, floor),
                    clock,
                ));
            }
        }
        if let Some(leadership) = setup.leadership {
            daemon = daemon.with_leadership(leadership);
        }
        self.board = Some(daemon.board());
        self.http = None;
        if setup.http {
            let address = http::serve_with(
                "127.0.0.1:0".parse().expect("an address"),
                daemon.board(),
                hooks,
                &http::HttpOptions::default(),
            )
            .await
            .expect("http serves");
            self.http = Some(address);
        }
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

    /// Where the daemon serves HTTP (see [`Setup::http`]).
    pub fn http(&self) -> SocketAddr {
        self.http.expect("a daemon serving HTTP")
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

    /// How many passes the daemon has run.
    pub fn passes(&self) -> u64 {
        self.counters().passes
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
    /// after [`crate::wait::PATIENCE`].
    pub async fn wait_for(&self, what: &str, done: impl Fn(&FleetStatus) -> bool) -> FleetStatus {
        self.wait_for_within(what, crate::wait::PATIENCE, done)
            .await
    }

    /// [`World::wait_for`] with its own patience.
    pub async fn wait_for_within(
        &self,
        what: &str,
        patience: Duration,
        done: impl Fn(&FleetStatus) -> bool,
    ) -> FleetStatus {
        crate::wait::on(what)
            .within(patience)
            .until(async || {
                let status = self.status();
                if done(&status) {
                    Ok(status)
                } else {
                    Err(format!(
                        "status:\n{}",
                        serde_json::to_string_pretty(&status).unwrap_or_default()
                    ))
                }
            })
            .await
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
    /// [`crate::fleet::cluster_yaml`], endpoint `k8s-<name>.lab.example:6443`): that of the form capstan
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

    /// The kubeconfig Flux holds for `cluster`, written to a file for kubectl.
    pub fn flux_kubeconfig_file(&self, cluster: &str) -> PathBuf {
        let delivered = self.flux_kubeconfig(cluster).expect("delivered to Flux");
        let file = self
            .state
            .path()
            .join(format!("{cluster}-from-flux.kubeconfig"));
        std::fs::write(&file, delivered).expect("write kubeconfig");
        file
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
        Recorder::start(
            Arc::clone(self.lab.kube()),
            self.lab.proxmox(),
            self.board.clone(),
            cluster,
        )
    }
}

impl World {
    /// Every parameter the lab's Proxmox received that Proxmox's published schema refuses
    /// (see [`crate::pve_schema`]), one line each; empty when all fit.
    pub fn schema_violations(&self) -> Vec<String> {
        let sent: Vec<crate::pve_schema::SentParameter> = self
            .lab
            .proxmox()
            .sent_parameters()
            .into_iter()
            .map(
                |(method, template, name, value)| crate::pve_schema::SentParameter {
                    method,
                    template,
                    name,
                    value,
                },
            )
            .collect();
        crate::pve_schema::violations(&sent)
    }

    /// [`World::schema_violations`], taken by the test: dropping the world then judges no
    /// more (a test that plants a wrong parameter on purpose).
    pub fn take_schema_violations(&mut self) -> Vec<String> {
        self.schema_judged = true;
        self.schema_violations()
    }
}

impl Drop for World {
    /// Stops the daemon and the lab; then, unless the test already failed, judges every
    /// parameter the lab received against Proxmox's published schema, so no test of the suite
    /// passes with a parameter a real Proxmox VE would refuse.
    fn drop(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            daemon.abort();
        }
        self.lab.stop();
        if std::thread::panicking() || self.schema_judged {
            return;
        }
        let violations = self.schema_violations();
        assert!(
            violations.is_empty(),
            "parameters sent to Proxmox that its published API schema refuses:\n{}",
            violations.join("\n")
        );
    }
}

/// The status writer of a daemon following `follow`, as `capstan run` makes it from the
/// fleet's `status:` settings.
fn status_writer(
    follow: &GitOptions,
    fleet: &capstan::spec::Fleet,
    redactor: &Redactor,
    (window, floor): (Duration, Duration),
    clock: Arc<dyn capstan::clock::Clock>,
) -> StatusWriter {
    let repository = StatusRepository::open(
        BranchOptions {
            url: follow.url.clone(),
            branch: fleet.status.branch.clone(),
            credentials: follow.credentials.clone(),
            mirror_root: follow.mirror_root.clone(),
        },
        redactor.clone(),
    )
    .expect("status repository opens");
    StatusWriter::new(
        repository,
        WriterOptions {
            commit: CommitSettings {
                author: fleet.status.author.clone(),
                skip_ci: fleet.status.skip_ci,
                max_attempts: 5,
            },
            window,
            floor,
        },
        clock,
    )
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

/// Whether `cluster` is Ready with `nodes` Nodes, every one Ready.
pub fn ready_with(status: &FleetStatus, cluster: &str, nodes: usize) -> bool {
    status.clusters.get(cluster).is_some_and(|c| {
        c.phase == capstan::status::Phase::Ready
            && c.nodes.len() == nodes
            && c.nodes.iter().all(|n| n.ready == Some(true))
    })
}

/// The fleet condition `kind`: (status, reason).
pub fn condition<'a>(status: &'a FleetStatus, kind: &str) -> Option<(&'a str, &'a str)> {
    status
        .conditions
        .iter()
        .find(|c| c.kind == kind)
        .map(|c| (c.status.as_str(), c.reason.as_str()))
}
