//! The serde types of the two file kinds: `capstan.yaml` (`kind: Fleet`) and one file per
//! cluster (`kind: Cluster`). Field names here are the file format: other tools and tests rely
//! on them. Defaults are filled by serde, so a parsed value is complete; cross-field rules live
//! in `validate`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::hardware::Machine;
use super::limits as bounds;
pub use super::network::{ClusterNetwork, Cni, Network, NetworkDefaults, RecordedNetwork};
pub use super::patch::Patch;
pub use super::policies::{BlockedDrain, ReplacePolicy};
pub use super::scheduling::{NodeTaint, TaintEffect};
pub use super::secret_source::SecretSource;
use super::values::{CronSchedule, HumanDuration, KubeVersion, MinorVersion, TimeZoneName};

/// The only `apiVersion` this release reads.
pub const API_VERSION: &str = "capstan.dev/v1alpha1";

/// `apiVersion` of every capstan file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum ApiVersion {
    /// The first, still-evolving version of the format.
    #[default]
    #[serde(rename = "capstan.dev/v1alpha1")]
    V1alpha1,
}

/// `kind` of the repository's root file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum FleetKind {
    /// The fleet: connections and policy shared by every cluster.
    #[default]
    Fleet,
}

/// `kind` of a cluster file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum ClusterKind {
    /// One Kubernetes cluster.
    #[default]
    Cluster,
}

/// `capstan.yaml`: where the cluster files are, how to reach Proxmox and the management
/// clusters, and the policy that applies to every cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fleet {
    /// Always `capstan.dev/v1alpha1`.
    pub api_version: ApiVersion,
    /// Always `Fleet`.
    pub kind: FleetKind,
    /// Folder, relative to the repository root, that holds one YAML file per cluster.
    #[serde(default = "default_clusters_dir")]
    pub clusters_dir: PathBuf,
    /// Proxmox VE connections by name; a cluster names the one it lives on in `spec.proxmox`.
    #[serde(default)]
    pub proxmox: BTreeMap<String, ProxmoxConnection>,
    /// Management clusters (where FluxCD runs) by name, for kubeconfig delivery.
    #[serde(default)]
    pub management_clusters: BTreeMap<String, ManagementCluster>,
    /// SQL servers by name on which capstan provisions K3s datastores (a database and a user
    /// limited to it per cluster); a K3s cluster names one in `kubernetes.datastore.server`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub datastores: BTreeMap<String, DatastoreServer>,
    /// Kubernetes minors that clusters may run or move to, e.g. `["1.36", "1.37"]`. A new minor
    /// is rolled out only once listed here (all of Flux's components must support it first).
    #[serde(default)]
    pub approved_minors: Vec<MinorVersion>,
    /// Delete clusters whose file was removed, and VMs that no cluster claims. Off by default:
    /// such clusters and VMs are reported, never destroyed.
    #[serde(default)]
    pub prune: bool,
    /// Where capstan writes status back to the repository.
    #[serde(default)]
    pub status: StatusSettings,
    /// How often the repository is polled for new commits.
    #[serde(default = "default_poll_interval")]
    pub poll_interval: HumanDuration,
    /// Where capstan tells people that something needs them (Slack, Teams, Discord, a signed
    /// JSON webhook, Alertmanager), and which events it tells.
    #[serde(
        default,
        skip_serializing_if = "super::notifications::Notifications::is_empty"
    )]
    pub notifications: super::notifications::Notifications,
}

fn default_clusters_dir() -> PathBuf {
    PathBuf::from("clusters")
}

fn default_poll_interval() -> HumanDuration {
    HumanDuration::minutes(1)
}

/// How to reach one Proxmox VE cluster through its REST API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxmoxConnection {
    /// API base, e.g. `https://pve1.lab.example:8006`.
    pub url: String,
    /// The API token's id, `USER@REALM!TOKENID` (e.g. `capstan@pve!reconciler`).
    pub token_id: String,
    /// Where to read the token's secret (a UUID). Never write the secret itself here.
    pub token_from: SecretSource,
    /// SHA-256 fingerprint of the server certificate (`AB:CD:...`, as the Proxmox GUI shows it),
    /// to trust a self-signed certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_fingerprint: Option<String>,
    /// PEM file of the CA that signed the server certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// A storage (content type `iso`, on every node that hosts Talos machines) where capstan
    /// uploads each Talos machine's NoCloud configuration image; Talos clusters need one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iso_storage: Option<String>,
    /// Whether capstan may create a resource pool a machine names (`machine.pool`) when
    /// Proxmox has none of that name; without it, a missing pool is refused before any clone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub create_pools: bool,
}

/// A MySQL or MariaDB server that capstan administers to provision K3s datastores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatastoreServer {
    /// Where the server listens, `mysql://HOST[:PORT]` (port 3306 by default).
    pub url: String,
    /// A user allowed to create databases and users (e.g. `root`).
    pub admin_user: String,
    /// Where to read that user's password. Never write the password itself here.
    pub admin_password_from: SecretSource,
}

/// Why a datastore server's `url` is not a `mysql://HOST[:PORT]` URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatastoreUrlProblem {
    /// Another scheme, or none.
    #[error("`{url}` is not a mysql:// URL")]
    NotMysql {
        /// The URL as written.
        url: String,
    },
    /// A user, database or options, which capstan writes per cluster itself.
    #[error("`{url}` carries a user, database or options: write only mysql://HOST[:PORT]")]
    MoreThanHostPort {
        /// The URL as written.
        url: String,
    },
    /// The port is no number from 1 to 65535.
    #[error("`{port}` in `{url}` is not a port")]
    Port {
        /// The port as written.
        port: String,
        /// The URL as written.
        url: String,
    },
    /// Nothing before the port.
    #[error("`{url}` names no host")]
    NoHost {
        /// The URL as written.
        url: String,
    },
}

/// `url` as an error may show it: a user and password before the host become `***` (a
/// credential written into a file by mistake must not travel on into a status or a comment).
fn without_credentials(url: &str) -> String {
    let authority_at = url.find("://").map_or(0, |at| at + 3);
    let authority_end = url[authority_at..]
        .find('/')
        .map_or(url.len(), |end| authority_at + end);
    match url[authority_at..authority_end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..authority_at], &url[authority_at + at..]),
        None => url.to_owned(),
    }
}

/// The port of a `mysql://` URL that names none.
pub const MYSQL_DEFAULT_PORT: u16 = 3306;

impl DatastoreServer {
    /// The host and port of `url`, or why it is not a `mysql://HOST[:PORT]` URL.
    ///
    /// # Errors
    /// Which part of the URL is not host and port.
    pub fn host_port(&self) -> Result<(String, u16), DatastoreUrlProblem> {
        let url = || without_credentials(&self.url);
        let rest = self
            .url
            .strip_prefix("mysql://")
            .ok_or_else(|| DatastoreUrlProblem::NotMysql { url: url() })?;
        if rest.contains(['/', '@', '?']) {
            return Err(DatastoreUrlProblem::MoreThanHostPort { url: url() });
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(':') => {
                let port = port
                    .parse::<u16>()
                    .ok()
                    .filter(|port| *port != 0)
                    .ok_or_else(|| DatastoreUrlProblem::Port {
                        port: port.to_owned(),
                        url: url(),
                    })?;
                (host, port)
            }
            _ => (rest, MYSQL_DEFAULT_PORT),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(DatastoreUrlProblem::NoHost { url: url() });
        }
        Ok((host.to_owned(), port))
    }
}

/// A Kubernetes cluster where FluxCD runs and reads the kubeconfigs capstan delivers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagementCluster {
    /// Where to read a kubeconfig that may write Secrets in the delivery namespaces.
    pub kubeconfig_from: SecretSource,
}

/// Status write-back settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusSettings {
    /// Branch that status commits go to (kept apart from the branch people edit).
    #[serde(default = "default_status_branch")]
    pub branch: String,
    /// Author of the status commits, `Name <email>` (the committer is always capstan).
    #[serde(default = "default_status_author")]
    pub author: String,
    /// Mark status commits `[skip ci]`, so that CI does not run on them.
    #[serde(default, rename = "skipCI")]
    pub skip_ci: bool,
}

impl Default for StatusSettings {
    fn default() -> Self {
        StatusSettings {
            branch: default_status_branch(),
            author: default_status_author(),
            skip_ci: false,
        }
    }
}

/// The author and committer status commits have unless `status.author` says otherwise.
pub const CAPSTAN_SIGNATURE: &str = "capstan <capstan@noreply.capstan.dev>";

fn default_status_author() -> String {
    CAPSTAN_SIGNATURE.to_owned()
}

/// `Name <email>` split into its name and email, as Git writes an author; `None` when `text`
/// is not of that shape (an empty name or email, or `<`, `>` or a newline elsewhere).
pub fn parse_signature(text: &str) -> Option<(&str, &str)> {
    let (name, rest) = text.split_once('<')?;
    let email = rest.strip_suffix('>')?;
    let name = name.trim();
    let valid = |part: &str| !part.is_empty() && !part.contains(['<', '>', '\n', '\r']);
    (valid(name) && valid(email) && !email.contains(char::is_whitespace)).then_some((name, email))
}

fn default_status_branch() -> String {
    "capstan-status".to_owned()
}

/// One cluster file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cluster {
    /// Always `capstan.dev/v1alpha1`.
    pub api_version: ApiVersion,
    /// Always `Cluster`.
    pub kind: ClusterKind,
    /// The cluster's identity.
    pub metadata: Metadata,
    /// What the cluster should be.
    pub spec: ClusterSpec,
}

/// Identity of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    /// DNS-1123 label, unique in the repository; it prefixes every VM's name.
    pub name: String,
}

/// The desired shape of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSpec {
    /// Suspend the cluster: capstan keeps observing it and reporting it (condition
    /// `Suspended`) but starts no step on it; a step already running finishes. Set it back to
    /// `false` (or remove it) to resume. `capstan suspend` does the same without a commit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// Name of a connection under `proxmox:` in `capstan.yaml`.
    pub proxmox: String,
    /// Kubernetes version and distribution.
    pub kubernetes: KubernetesSpec,
    /// Talos Linux only (`kubernetes.distribution: talos`): the release its machines run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub talos: Option<TalosSpec>,
    /// The API endpoint: fixed forever once the cluster is initialised.
    pub endpoint: Endpoint,
    /// Pod, service and node networks.
    pub network: Network,
    /// The control-plane nodes.
    pub control_plane: ControlPlane,
    /// Worker pools.
    #[schemars(length(max = bounds::MAX_POOLS))]
    pub workers: Vec<WorkerPool>,
    /// How changes roll out.
    #[serde(default)]
    pub rollout: Rollout,
    /// When disruptive steps may start: allow and deny windows, and the time zone their
    /// schedules are read in.
    #[serde(default, skip_serializing_if = "Maintenance::is_default")]
    pub maintenance: Maintenance,
    /// Certificate renewal.
    #[serde(default)]
    pub certificates: Certificates,
    /// Automatic recovery of dead nodes.
    #[serde(default)]
    pub remediation: Remediation,
    /// Where the admin kubeconfig is delivered.
    #[serde(default)]
    pub delivery: Delivery,
    /// Settings capstan has no field for, in the distribution's own language (Talos
    /// strategic-merge patches, kubeadm documents, K3s `config.yaml` keys), for every machine;
    /// the control plane's and each pool's follow. A change replaces the machines it reaches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = super::patch::MAX_PATCHES))]
    pub patches: Vec<Patch>,
}

/// Kubernetes version and distribution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubernetesSpec {
    /// Release, `MAJOR.MINOR.PATCH`. Its minor must be in `approvedMinors`.
    pub version: KubeVersion,
    /// How the cluster is built.
    #[serde(default)]
    pub distribution: Distribution,
    /// K3s only: where the servers keep the cluster state (kine on MySQL/MariaDB). Without
    /// one, a single K3s server uses its embedded SQLite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datastore: Option<Datastore>,
    /// Registry mirrors, credentials and CAs for every node's container runtime (CRI-O's
    /// `registries.conf.d` and auth file on kubeadm, `registries.yaml` on K3s, the registry
    /// documents on Talos). Passwords come from secret sources, never from the file. A change
    /// replaces every machine.
    #[serde(
        default,
        skip_serializing_if = "super::registries::Registries::is_empty"
    )]
    pub registries: super::registries::Registries,
    /// Single sign-on for the API server: the JWT (OpenID Connect) issuers whose tokens it
    /// accepts, on every distribution. A change replaces the control planes, one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<super::authentication::Authentication>,
}

/// The Talos Linux release of a Talos cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TalosSpec {
    /// Talos release, `vMAJOR.MINOR.PATCH` (e.g. `v1.13.9`): the templates must run it, and it
    /// must support `kubernetes.version` (Talos's support matrix). Changing it replaces every
    /// machine, control planes first.
    pub version: super::talos_versions::TalosVersion,
    /// The installer image Talos installs from (an Image Factory image with the
    /// `siderolabs/qemu-guest-agent` extension); Talos's own by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installer_image: Option<String>,
    /// System extensions every machine must run (`siderolabs/iscsi-tools`, as Image Factory
    /// names them). They come with the template's image; a new machine whose template lacks
    /// one is refused at `prepare-node`, before capstan counts it, naming what is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub extensions: Vec<String>,
}

/// A K3s cluster's external datastore: either a database capstan provisions on a server of
/// `capstan.yaml` (`server` and `database`), or a kine DSN the user provides (`endpointFrom`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Datastore {
    /// Name of a server under `datastores:` in `capstan.yaml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The database (and user) capstan creates on that server for this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// Where to read a whole kine DSN, `mysql://USER:PASS@tcp(HOST:PORT)/DB`, instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_from: Option<SecretSource>,
}

/// What a [`Datastore`] asks for, once validation has checked it names exactly one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatastoreChoice<'a> {
    /// A database capstan creates on a server of the fleet.
    Provisioned {
        /// The server's name in `capstan.yaml`.
        server: &'a str,
        /// The database (and user) name.
        database: &'a str,
    },
    /// A DSN the user gives whole.
    Given(&'a SecretSource),
}

impl Datastore {
    /// The datastore this asks for; `None` unless exactly one form is complete.
    pub fn choice(&self) -> Option<DatastoreChoice<'_>> {
        match (&self.server, &self.database, &self.endpoint_from) {
            (Some(server), Some(database), None) => {
                Some(DatastoreChoice::Provisioned { server, database })
            }
            (None, None, Some(source)) => Some(DatastoreChoice::Given(source)),
            _ => None,
        }
    }
}

/// How a cluster is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// kubeadm with CRI-O of the same minor and a stacked etcd.
    #[default]
    Kubeadm,
    /// K3s: servers keep their state in an external SQL datastore through kine (or, for a
    /// single server, in the embedded SQLite); workers are K3s agents.
    K3s,
    /// Talos Linux: machines configured through a NoCloud ISO and the Talos API (no SSH, no
    /// shell), a stacked etcd, Talos's own VIP on the endpoint; `spec.talos` names the release.
    Talos,
}

impl Distribution {
    /// The distribution a word names, as the cluster language spells it (`kubeadm`, `k3s`),
    /// case-insensitive.
    pub fn named(word: &str) -> Option<Self> {
        Distribution::ALL
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(word))
    }
}

/// The API endpoint: a DNS name reserved for the cluster and the address kube-vip holds on the
/// active control plane. `kubeadm init` writes it into every certificate, kubeconfig and join,
/// so it never changes after the cluster exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Endpoint {
    /// DNS name of the endpoint, e.g. `k8s-prod.lab.example`.
    pub host: String,
    /// Virtual address kube-vip announces; inside `network.nodes`, outside `network.reserved`,
    /// and no VM's own address.
    pub address: IpAddr,
    /// API server port.
    #[serde(default = "default_api_port")]
    pub port: u16,
}

fn default_api_port() -> u16 {
    6443
}

/// The control plane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControlPlane {
    /// Number of control-plane nodes: 1, 3 or 5 for kubeadm (etcd needs an odd number for
    /// quorum); any number of K3s servers (no quorum: they share the datastore); at most 7.
    #[serde(default = "default_control_plane_replicas")]
    #[schemars(range(min = 1, max = bounds::MAX_CONTROL_PLANES))]
    pub replicas: u32,
    /// Whether a change may replace live control planes; unset: `spec.rollout.replace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<ReplacePolicy>,
    /// The VM every control-plane node is built from.
    pub machine: Machine,
    /// Whether the control planes take workloads (`true` drops their `NoSchedule` taint, and
    /// `workers: []` is then valid); unset: the distribution's way (K3s servers do, kubeadm's
    /// and Talos's control planes do not). A change applies in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedulable: Option<bool>,
    /// Labels every control plane carries (see `workers[].labels`). A change applies in place.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(length(max = super::scheduling::MAX_LABELS))]
    pub labels: BTreeMap<String, String>,
    /// Taints every control plane carries from its registration on, besides its own
    /// (`schedulable`). A change applies in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = super::scheduling::MAX_TAINTS))]
    pub taints: Vec<NodeTaint>,
    /// Patches for the control planes only, after `spec.patches` (see there).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = super::patch::MAX_PATCHES))]
    pub patches: Vec<Patch>,
}

fn default_control_plane_replicas() -> u32 {
    1
}

/// A pool of identical workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerPool {
    /// Pool name, a DNS-1123 label unique in the cluster; part of every VM's name.
    pub pool: String,
    /// Number of workers in the pool (the cluster has at most 5,000 machines in all).
    #[schemars(range(max = bounds::MAX_MACHINES_PER_CLUSTER))]
    pub replicas: u32,
    /// Whether a change may replace this pool's live workers; unset: `spec.rollout.replace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<ReplacePolicy>,
    /// The VM every worker of the pool is built from.
    pub machine: Machine,
    /// Labels every node of the pool carries (`workload-class: memory`); capstan adds
    /// `capstan.dev/pool` and `topology.kubernetes.io/region|zone` (the Proxmox connection and
    /// node). A change applies in place, never by replacing machines.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(length(max = super::scheduling::MAX_LABELS))]
    pub labels: BTreeMap<String, String>,
    /// Taints every node of the pool carries from its registration on (`{key: dedicated,
    /// effect: NoSchedule}`). A change applies in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = super::scheduling::MAX_TAINTS))]
    pub taints: Vec<NodeTaint>,
    /// Patches for this pool's workers only, after `spec.patches` (see there).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = super::patch::MAX_PATCHES))]
    pub patches: Vec<Patch>,
}

/// How changes roll out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rollout {
    /// Never fewer Ready, schedulable workers than this (two Traefik replicas on different
    /// nodes would otherwise block a drain).
    #[serde(default = "default_min_workers")]
    #[schemars(range(max = bounds::MAX_SURGE))]
    pub min_workers: u32,
    /// How long a drain may take; past it the node stays cordoned and its VM is kept.
    #[serde(default = "default_drain_timeout")]
    pub drain_timeout: HumanDuration,
    /// How long a new machine may take to join; past it, it is destroyed and created again.
    #[serde(default = "default_join_timeout")]
    pub join_timeout: HumanDuration,
    /// When disruptive steps may run. Without one they may run at any time. The older
    /// spelling of a single `maintenance.allow` window (and read in `maintenance.timeZone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_window: Option<MaintenanceWindow>,
    /// What to do with a VM whose Proxmox config was changed outside capstan.
    #[serde(default)]
    pub on_drift: DriftPolicy,
    /// Clusters this one follows (staged rollouts): its disruptive steps start only once each
    /// of them has converged at the revision being rolled out and stayed Ready for `soak`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = bounds::MAX_FOLLOWED))]
    pub after: Vec<String>,
    /// How long each cluster of `after` stays Ready at the revision before this one's
    /// disruptive steps start (default: none).
    #[serde(default, skip_serializing_if = "HumanDuration::is_zero")]
    pub soak: HumanDuration,
    /// At most this many VMs above the declared count while machines are replaced: with 1,
    /// the next replacement is cloned once the VM it replaces is gone; with more, replacements
    /// overlap (removals stay one at a time).
    #[serde(default = "default_max_surge")]
    #[schemars(range(min = 1, max = bounds::MAX_SURGE))]
    pub max_surge: u32,
    /// Whether a change may replace live machines (a pool or the control plane may say
    /// otherwise with its own `replace`). With `forbid`, a plan that would destroy a machine
    /// that is neither dead nor fenced is refused; dead and fenced machines are still replaced.
    #[serde(default, skip_serializing_if = "ReplacePolicy::is_allow")]
    pub replace: ReplacePolicy,
    /// What a pull request's preview does when a drain it plans would block now on a
    /// PodDisruptionBudget: `wait` (the drain waits, up to `drainTimeout`) or `fail` (the
    /// preview and its commit status fail, naming the budget).
    #[serde(default, skip_serializing_if = "BlockedDrain::is_wait")]
    pub blocked_drain: BlockedDrain,
}

impl Default for Rollout {
    fn default() -> Self {
        Rollout {
            after: Vec::new(),
            soak: HumanDuration::default(),
            max_surge: default_max_surge(),
            min_workers: default_min_workers(),
            drain_timeout: default_drain_timeout(),
            join_timeout: default_join_timeout(),
            maintenance_window: None,
            on_drift: DriftPolicy::default(),
            replace: ReplacePolicy::default(),
            blocked_drain: BlockedDrain::default(),
        }
    }
}

fn default_min_workers() -> u32 {
    2
}

fn default_max_surge() -> u32 {
    1
}

fn default_drain_timeout() -> HumanDuration {
    HumanDuration::minutes(10)
}

fn default_join_timeout() -> HumanDuration {
    HumanDuration::minutes(15)
}

/// A recurring window: it opens each time its schedule fires and lasts its duration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MaintenanceWindow {
    /// When a window opens (cron, read in `maintenance.timeZone`).
    pub schedule: CronSchedule,
    /// How long it stays open.
    pub duration: HumanDuration,
}

/// When disruptive steps (drains, control-plane restarts) may start. Steps already running
/// finish; nothing else waits.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Maintenance {
    /// The IANA time zone schedules are read in (`Europe/Rome`); daylight saving time moves
    /// them with the clocks. Default UTC.
    #[serde(default, skip_serializing_if = "TimeZoneName::is_utc")]
    pub time_zone: TimeZoneName,
    /// Disruptive steps start only inside one of these (none: at any time not denied).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = bounds::MAX_WINDOWS))]
    pub allow: Vec<MaintenanceWindow>,
    /// No disruptive step starts inside one of these, whatever the allow windows say (a
    /// freeze: `{schedule: "0 0 20 12 *", duration: 336h}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = bounds::MAX_WINDOWS))]
    pub deny: Vec<MaintenanceWindow>,
}

impl Maintenance {
    fn is_default(&self) -> bool {
        self == &Maintenance::default()
    }
}

/// What to do with a drifted VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DriftPolicy {
    /// Report the fields that differ; change nothing.
    #[default]
    Report,
    /// Replace the machine with one built from the spec.
    Replace,
}

/// Certificate renewal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Certificates {
    /// Renew this long before the certificates (one year) expire.
    #[serde(default = "default_renew_before")]
    pub renew_before: HumanDuration,
}

impl Default for Certificates {
    fn default() -> Self {
        Certificates {
            renew_before: default_renew_before(),
        }
    }
}

fn default_renew_before() -> HumanDuration {
    HumanDuration::days(30)
}

/// Automatic recovery of nodes that died.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Remediation {
    /// Hard-stop a node's VM when the node is NotReady and its guest agent is silent, taint it
    /// out-of-service so its volumes detach, and replace it.
    #[serde(default)]
    pub fence: bool,
    /// How long a node must be NotReady before it is fenced.
    #[serde(default = "default_fence_after")]
    pub after: HumanDuration,
    /// When more of the cluster's nodes than this are NotReady, nothing is fenced: so many at
    /// once looks like the network, not the nodes (a count, or a percentage rounded down).
    #[serde(default)]
    pub max_unhealthy: super::remediation::MaxUnhealthy,
}

impl Default for Remediation {
    fn default() -> Self {
        Remediation {
            fence: false,
            after: default_fence_after(),
            max_unhealthy: super::remediation::MaxUnhealthy::default(),
        }
    }
}

fn default_fence_after() -> HumanDuration {
    HumanDuration::minutes(5)
}

/// Where the cluster's admin kubeconfig goes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Delivery {
    /// A Secret that FluxCD reads through `spec.kubeConfig.secretRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flux: Option<FluxDelivery>,
}

/// The namespace of the management cluster where capstan keeps its records (secrets bundles,
/// CA pins, K3s tokens, suspensions): no cluster delivers its kubeconfig there.
pub const RECORDS_NAMESPACE: &str = "capstan-system";

/// The Flux Secret holding this cluster's kubeconfig (key `value`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FluxDelivery {
    /// Name of a management cluster in `capstan.yaml`.
    pub cluster: String,
    /// Namespace of the Secret.
    #[serde(default = "default_flux_namespace")]
    pub namespace: String,
    /// Name of the Secret (default `<cluster>-kubeconfig`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
}

fn default_flux_namespace() -> String {
    "flux-system".to_owned()
}

impl FluxDelivery {
    /// The Secret's name, defaulted from the cluster's name.
    pub fn secret_name_for(&self, cluster: &str) -> String {
        self.secret_name
            .clone()
            .unwrap_or_else(|| format!("{cluster}-kubeconfig"))
    }
}

impl ClusterSpec {
    /// The machine of pool `pool` (`cp` and the control-plane role: the control plane's).
    pub fn machine_of(&self, pool: &str, role: crate::model::Role) -> Option<&Machine> {
        match role {
            crate::model::Role::ControlPlane => Some(&self.control_plane.machine),
            crate::model::Role::Worker => self
                .workers
                .iter()
                .find(|p| p.pool == pool)
                .map(|p| &p.machine),
        }
    }
}
