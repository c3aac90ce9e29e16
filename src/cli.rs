//! The command line: what a user types ([`Args`], clap derive; doc comments are the `--help`).
//!
//! Precedence for every setting: command-line flag, then environment variable (named in
//! `env_vars`), then the built-in default.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::env_vars;
use crate::source::{RepoLocation, SecretFrom, TokenAuth};

mod listeners;
mod server;
pub use server::{ReconcileArgs, ResumeArgs, ServerArgs, StatusArgs, SuspendArgs};

/// capstan keeps Kubernetes clusters on Proxmox VE in the state a Git repository declares.
///
/// A repository holds `capstan.yaml` (connections and policy) and one YAML file per cluster.
/// capstan observes what exists (VMs, nodes, certificates, Flux's kubeconfig), plans the
/// difference and drives each cluster there, one safe step at a time.
///
/// Exit codes: 0 success; 1 the repository has errors or the command failed; 2 usage error.
#[derive(Debug, Parser)]
#[command(
    name = "capstan",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Logging options.
    #[command(flatten)]
    pub log: LogArgs,
}

/// Logging options, shared by every command.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// Log line format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Plain, env = env_vars::CAPSTAN_LOG_FORMAT)]
    pub log_format: LogFormat,
    /// Which logs to show, in `tracing` filter syntax (e.g. `info`, `capstan=debug`).
    #[arg(long, global = true, default_value = "warn", env = env_vars::CAPSTAN_LOG)]
    pub log: String,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Plain,
    /// One JSON object per event, for log collectors.
    Json,
}

/// Format of a command's report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// For people.
    Text,
    /// For programs.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a repository: syntax, field names, types and every rule between fields and files.
    ///
    /// Prints every error and warning with its file, line, column and field path, and what to do
    /// about it. Exits 0 when the repository is valid (warnings allowed), 1 when it has errors.
    ///
    /// Example: `capstan validate examples-repo`
    Validate(ValidateArgs),
    /// Print or write the JSON Schemas of `capstan.yaml` and the cluster files (for editors and
    /// CI). The committed copies live in `schemas/`.
    Schema(SchemaArgs),
    /// Print or write the book's reference pages generated from the code: the command line,
    /// its environment variables, the fleet and cluster files, the metrics.
    ///
    /// The committed copies live in `docs/src/reference/`; a test fails when one is stale.
    ///
    /// Example: `capstan reference --out docs/src/reference`
    Reference(ReferenceArgs),
    /// Plan a repository against an observed-state snapshot: what capstan would do next, and
    /// every step to convergence.
    ///
    /// Prints, per cluster, its phase, the steps that may run now, the predicted sequence,
    /// every refusal with the rule that made it, and what it waits on. `--observed none` plans
    /// from nothing (the full bootstrap). Exits 0 when planned (blocked clusters included),
    /// 1 when the repository has errors.
    ///
    /// Example: `capstan plan examples-repo --observed none --format markdown`
    Plan(PlanArgs),
    /// Preview a pull request: what merging `--head` into `--base` would make capstan do to
    /// the live fleet.
    ///
    /// Reads both revisions from Git (a remote's branches, or any ref or commit of a local
    /// repository, never checked out), validates the head, plans head and base against the
    /// observed state, and prints a summary line, every refusal (validation errors with
    /// file:line:column, and the planner's refusals, each with its rule and fix), then per
    /// changed cluster the diff of its file, what the change means and the predicted steps,
    /// marking those already pending on the base and those this change adds. With `--pr N` and
    /// the `--forge` flags it also posts the preview to that pull request (one sticky comment,
    /// a `capstan/preview` commit status; token in `CAPSTAN_FORGE_TOKEN`). Exits 1 when the
    /// change is refused.
    ///
    /// Example: `capstan preview --repo . --base main --head my-change --observed none
    /// --format markdown`
    Preview(PreviewArgs),
    /// Run the reconciler: keep every cluster of a repository in the state it declares.
    ///
    /// The repository is a Git remote (`--repo URL --branch main`: polled at the fleet's
    /// `pollInterval`, or at once on a webhook; files are read from the commit, never from a
    /// checkout) or a folder (a change to a file is picked up at once). Each pass observes
    /// Proxmox, the clusters and Flux, plans, and runs the next step of every cluster, one step
    /// at a time per cluster. Progress goes to standard output, logs to standard error. With
    /// `--lab` it starts an embedded lab and works against it instead of the connections of
    /// capstan.yaml. With `--leader-elect`, several replicas share the work safely: only the
    /// holder of a Lease starts steps. Runs until SIGTERM or Ctrl-C (which releases the Lease).
    ///
    /// Example: `capstan run --repo git@git.example:org/fleet.git --git-ssh-key id_ed25519
    /// --git-known-hosts known_hosts --http 0.0.0.0:9464`
    Run(Box<RunArgs>),
    /// The main job for a newcomer: GitOps on an embedded lab. Makes a bare Git repository
    /// (the remote) whose first commit is examples-repo/, and a clone of it for you; follows
    /// the remote's `main` branch, brings the example clusters up, says when they are Ready
    /// and how to look at them (kubectl), then keeps reconciling: edit, `git commit` and
    /// `git push` in the clone and watch.
    ///
    /// Example: `capstan demo`
    Demo(DemoArgs),
    /// Show the clusters a running daemon manages: phase, conditions, nodes with versions,
    /// certificate expiry and what each waits on (from the daemon's `/status`, or with
    /// `--repo` from the status branch capstan commits to).
    ///
    /// Example: `capstan status prod --server http://127.0.0.1:9464`, or
    /// `capstan status --repo git@git.example:org/fleet.git --git-ssh-key id_ed25519
    /// --git-known-hosts known_hosts`
    Status(StatusArgs),
    /// Suspend clusters on a running daemon, for an incident, without a commit: they are
    /// observed and reported (`Suspended`: who, when, why), no step starts, a running one
    /// finishes; kept in the management cluster until `capstan resume` (or `spec.suspend`).
    ///
    /// Example: `capstan suspend prod --reason "INC-42" --server-token-from env:TOKEN`
    Suspend(SuspendArgs),
    /// Resume clusters `capstan suspend` held (not those whose file says `spec.suspend`).
    ///
    /// Example: `capstan resume prod --server-token-from env:TOKEN`
    Resume(ResumeArgs),
    /// Make a running daemon poll its Git remote and run a pass now; prints the revision.
    ///
    /// Example: `capstan reconcile --server-token-from env:TOKEN`
    Reconcile(ReconcileArgs),
    /// Print the observed state (VMs, nodes, versions, certificates, Flux) as the JSON snapshot
    /// `capstan plan --observed` reads, from the real connections or from a running lab.
    ///
    /// Example: `capstan observe --repo examples-repo --lab-state .lab > observed.json`
    Observe(ObserveArgs),
    /// Serve the lab on loopback: a simulated Proxmox VE, simulated Kubernetes API servers (the
    /// `management` cluster where Flux runs, and every cluster kubeadm builds inside the VMs),
    /// for trying capstan and for tests.
    ///
    /// Prints the Proxmox URL, certificate fingerprint and API token and each cluster's
    /// kubeconfig, writes the same to `STATE_DIR/lab.json`, and runs until SIGTERM or Ctrl-C.
    ///
    /// Example: `capstan lab --listen 127.0.0.1:8006 --state-dir .lab`
    Lab(LabArgs),
}

/// Where `capstan run` works: a real fleet or an embedded lab.
#[derive(Debug, clap::Args)]
pub struct LabChoice {
    /// Work against an embedded lab (simulated Proxmox VE and clusters) instead of the
    /// connections in capstan.yaml.
    #[arg(long, env = env_vars::CAPSTAN_LAB)]
    pub lab: bool,
    /// With `--lab`: folder for the lab's `lab.json` and kubeconfigs.
    #[arg(long, default_value = ".lab", env = env_vars::CAPSTAN_LAB_STATE_DIR)]
    pub state_dir: PathBuf,
    /// With `--lab`: lab config (YAML) describing the world (default: pve1..pve3 and the
    /// templates of examples-repo).
    #[arg(long, env = env_vars::CAPSTAN_LAB_CONFIG)]
    pub lab_config: Option<PathBuf>,
    /// Without `--lab`, with the connections of capstan.yaml: dial each workload cluster's
    /// API endpoint where the lab whose state folder this is (`capstan lab --state-dir`)
    /// serves it, as its `lab.json` says (read again as clusters appear). For running against
    /// a lab in another process; the API server's certificate is still verified for the
    /// endpoint's name against the cluster's pinned CA. Kubeconfigs read from VMs never
    /// choose where capstan connects.
    #[arg(long, value_name = "DIR", conflicts_with = "lab", env = env_vars::CAPSTAN_LAB_ADDRESSES)]
    pub lab_addresses: Option<PathBuf>,
}

/// Daemon pacing and its HTTP endpoint.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("listener").args(["http", "hooks_listen"]).multiple(true)))]
pub struct DaemonArgs {
    /// Serve `/status`, `/observed`, `/healthz` and `/metrics` on this address (and the
    /// webhooks, unless `--hooks-listen` is given).
    #[arg(long, env = env_vars::CAPSTAN_HTTP)]
    pub http: Option<std::net::SocketAddr>,
    /// Require `Authorization: Bearer <token>` on `/status`, `/observed` and `/metrics`, the
    /// token read from `env:VARIABLE` or `file:PATH` (a file is re-read at each request, so
    /// it can be rotated without a restart). `/healthz` stays open for probes. Without it,
    /// anyone who can connect reads them.
    #[arg(long, requires = "http", env = env_vars::CAPSTAN_HTTP_TOKEN_FROM)]
    pub http_token_from: Option<SecretFrom>,
    /// Serve `--http` over HTTPS with this certificate chain (PEM).
    #[arg(long, requires_all = ["http", "http_tls_key"], env = env_vars::CAPSTAN_HTTP_TLS_CERT)]
    pub http_tls_cert: Option<PathBuf>,
    /// The private key of `--http-tls-cert` (PEM).
    #[arg(long, requires = "http_tls_cert", env = env_vars::CAPSTAN_HTTP_TLS_KEY)]
    pub http_tls_key: Option<PathBuf>,
    /// With `--http-tls-cert`: ask clients for a certificate; one that chains to this CA
    /// (PEM) authenticates its connection as the token does (`/healthz` needs none).
    #[arg(long, requires = "http_tls_cert", env = env_vars::CAPSTAN_HTTP_CLIENT_CA)]
    pub http_client_ca: Option<PathBuf>,
    /// With `--http-client-ca`: a certificate revocation list signed by that CA (PEM, as
    /// `openssl ca -gencrl` writes it, or DER); a client certificate it lists fails the
    /// handshake. The file is read again when it changes, so publishing a new CRL revokes a
    /// certificate without a restart. Without it, a client certificate is valid until it
    /// expires.
    #[arg(long, requires = "http_client_ca", env = env_vars::CAPSTAN_HTTP_CLIENT_CRL)]
    pub http_client_crl: Option<PathBuf>,
    /// Host names `--http` answers to, besides loopback (`localhost`) and IP addresses
    /// (comma-separated, e.g. `capstan.example.com,capstan.capstan-system.svc`). A request
    /// naming another host in its `Host` header is refused (421), so a web page cannot read
    /// the endpoint through a DNS name it rebinds to this address. Probes and Prometheus
    /// scraping by pod IP need nothing here; a name people or Prometheus use does.
    #[arg(long, value_delimiter = ',', requires = "http", env = env_vars::CAPSTAN_HTTP_ALLOWED_HOSTS)]
    pub http_allowed_hosts: Vec<String>,
    /// `/events` streams (open dashboard pages) held at once (default: a quarter of
    /// `--http-max-connections`); one more is answered 503, so pages never take the
    /// connections Prometheus and people need.
    #[arg(long, env = env_vars::CAPSTAN_HTTP_MAX_EVENT_STREAMS)]
    pub http_max_event_streams: Option<usize>,
    /// `/events` streams one client address holds at once (behind a proxy, every viewer
    /// shares the proxy's address: raise it there).
    #[arg(long, default_value_t = crate::daemon::http::DEFAULT_EVENT_STREAMS_PER_CLIENT, env = env_vars::CAPSTAN_HTTP_MAX_EVENT_STREAMS_PER_CLIENT)]
    pub http_max_event_streams_per_client: usize,
    /// Serve the webhooks (`POST /hooks/...`) on this address only, not on `--http`: the one
    /// port to expose through an ingress.
    #[arg(long, requires = "webhook_secret_from", env = env_vars::CAPSTAN_HOOKS_LISTEN)]
    pub hooks_listen: Option<std::net::SocketAddr>,
    /// How long a request's head, or a webhook's body, may take to arrive (and how long a
    /// keep-alive connection may stay idle) before its connection is closed.
    #[arg(long, default_value = "10s", env = env_vars::CAPSTAN_HTTP_READ_TIMEOUT)]
    pub http_read_timeout: crate::spec::HumanDuration,
    /// Connections each listener serves at once; one more is answered 503 and closed.
    #[arg(long, default_value_t = crate::daemon::http::DEFAULT_MAX_CONNECTIONS, env = env_vars::CAPSTAN_HTTP_MAX_CONNECTIONS)]
    pub http_max_connections: usize,
    /// Delay between passes while work is in progress (e.g. `5s`, `250ms`).
    #[arg(long, env = env_vars::CAPSTAN_BUSY_INTERVAL)]
    pub busy_interval: Option<crate::spec::HumanDuration>,
    /// Clusters whose steps run at the same time.
    #[arg(long, default_value_t = 4, env = env_vars::CAPSTAN_CONCURRENCY)]
    pub concurrency: usize,
    /// Serve webhooks (`POST /hooks/github|gitea|gitlab|generic`) on `--hooks-listen`, or
    /// else on `--http`, checked with the secret read from `env:VARIABLE` or `file:PATH`
    /// (re-read when it changes).
    #[arg(long, requires = "listener", env = env_vars::CAPSTAN_WEBHOOK_SECRET_FROM)]
    pub webhook_secret_from: Option<SecretFrom>,
    /// Status changes within this window become one commit on the status branch.
    #[arg(long, default_value = "10s", env = env_vars::CAPSTAN_STATUS_DEBOUNCE)]
    pub status_debounce: crate::spec::HumanDuration,
    /// The least time between two status commits (a cluster turning Blocked or Ready is
    /// written at once).
    #[arg(long, default_value = "1m", env = env_vars::CAPSTAN_STATUS_MIN_INTERVAL)]
    pub status_min_interval: crate::spec::HumanDuration,
}

impl Default for DaemonArgs {
    /// The defaults the command line has.
    fn default() -> Self {
        DaemonArgs {
            http: None,
            http_token_from: None,
            http_tls_cert: None,
            http_tls_key: None,
            http_client_ca: None,
            http_client_crl: None,
            http_allowed_hosts: Vec::new(),
            http_max_event_streams: None,
            http_max_event_streams_per_client:
                crate::daemon::http::DEFAULT_EVENT_STREAMS_PER_CLIENT,
            hooks_listen: None,
            http_read_timeout: crate::spec::HumanDuration(
                crate::daemon::http::DEFAULT_READ_TIMEOUT,
            ),
            http_max_connections: crate::daemon::http::DEFAULT_MAX_CONNECTIONS,
            busy_interval: None,
            concurrency: 4,
            webhook_secret_from: None,
            status_debounce: crate::spec::HumanDuration(crate::status_branch::DEFAULT_WINDOW),
            status_min_interval: crate::spec::HumanDuration(crate::status_branch::DEFAULT_FLOOR),
        }
    }
}

/// How to follow a Git remote (ignored for a folder).
#[derive(Debug, Clone, clap::Args)]
pub struct GitArgs {
    /// The branch followed.
    #[arg(long, default_value = "main", env = env_vars::CAPSTAN_GIT_BRANCH)]
    pub branch: String,
    /// The folder of the repository holding `capstan.yaml` (default: its root).
    #[arg(long, env = env_vars::CAPSTAN_GIT_PATH)]
    pub path: Option<PathBuf>,
    /// SSH private key for `ssh://` and `user@host:path` remotes.
    #[arg(long, requires = "git_known_hosts", env = env_vars::CAPSTAN_GIT_SSH_KEY)]
    pub git_ssh_key: Option<PathBuf>,
    /// known_hosts file holding the SSH server's host key (an unknown or changed key is
    /// refused, with its fingerprint shown).
    #[arg(long, env = env_vars::CAPSTAN_GIT_KNOWN_HOSTS)]
    pub git_known_hosts: Option<PathBuf>,
    /// HTTPS token, from `env:VARIABLE` or `file:PATH` (a file is re-read at each
    /// connection).
    #[arg(long, env = env_vars::CAPSTAN_GIT_TOKEN_FROM)]
    pub git_token_from: Option<SecretFrom>,
    /// How the token is sent: `basic` (as the password of `--git-username`) or `bearer`
    /// (`Authorization: Bearer`).
    #[arg(long, default_value = "basic", env = env_vars::CAPSTAN_GIT_TOKEN_AUTH)]
    pub git_token_auth: TokenAuth,
    /// User name for the token (and for SSH when the URL names none).
    #[arg(long, default_value = "git", env = env_vars::CAPSTAN_GIT_USERNAME)]
    pub git_username: String,
    /// Where bare mirrors of Git remotes are kept (files are read from their object
    /// database, never from a checkout).
    #[arg(long, default_value = ".capstan/git", env = env_vars::CAPSTAN_GIT_MIRROR_DIR)]
    pub git_mirror_dir: PathBuf,
}

impl GitArgs {
    /// What the flags say, as the source reads it.
    pub fn settings(&self) -> crate::source::GitSettings {
        crate::source::GitSettings {
            branch: self.branch.clone(),
            path: self.path.clone(),
            git_ssh_key: self.git_ssh_key.clone(),
            git_known_hosts: self.git_known_hosts.clone(),
            git_token_from: self.git_token_from.clone(),
            git_token_auth: self.git_token_auth,
            git_username: self.git_username.clone(),
            git_mirror_dir: self.git_mirror_dir.clone(),
        }
    }
}

/// `capstan run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The repository: a Git remote URL (`https://`, `ssh://`, `user@host:path`, `git://`,
    /// `file://`) or a folder holding `capstan.yaml`.
    #[arg(long, default_value = ".", env = env_vars::CAPSTAN_REPO)]
    pub repo: RepoLocation,
    /// Following a Git remote.
    #[command(flatten)]
    pub git: GitArgs,
    /// Real fleet or lab.
    #[command(flatten)]
    pub target: LabChoice,
    /// Pacing and the HTTP endpoint.
    #[command(flatten)]
    pub daemon: DaemonArgs,
    /// Leader election (several replicas).
    #[command(flatten)]
    pub leader: LeaderArgs,
    /// Where secrets may come from, and where they may go.
    #[command(flatten)]
    pub secrets: SecretArgs,
    /// Post a preview on every open pull request of `--forge-repo` (whose heads are fetched
    /// from the Git remote as `refs/pull/<N>/head`, GitLab's merge requests' as
    /// `refs/merge-requests/<N>/head`) on every poll, when its head or the
    /// observed state its plan depends on changed. Needs a Git remote and the `--forge` flags.
    #[arg(long, requires = "forge", env = env_vars::CAPSTAN_PREVIEWS)]
    pub previews: bool,
    /// What planning a pull request's preview may take.
    #[command(flatten)]
    pub preview_limits: PreviewLimitArgs,
    /// Where previews are posted.
    #[command(flatten)]
    pub forge: ForgeArgs,
    /// The daemon's own configuration (YAML, `kind: DaemonConfig`): settings no commit of the
    /// repository can change. `source.verify` applies only revisions signed by allowed keys
    /// (`mode: head|all`, `allowedSigners: FILE` for SSH, `openpgpKeys: FILE` for OpenPGP;
    /// the key files are re-read when they change). Relative paths are relative to its
    /// folder. See the book's "Verified commits" (docs/src/guide/verified-commits.md).
    #[arg(long, env = env_vars::CAPSTAN_CONFIG)]
    pub config: Option<PathBuf>,
}

/// The operator's limits on the secrets a repository names and the servers they are sent to
/// (ignored by `--lab` for Proxmox and the management clusters, which are the lab's).
#[derive(Debug, Clone, clap::Args)]
pub struct SecretArgs {
    /// The prefix of the environment variables capstan.yaml may read secrets from. A secret
    /// comes only from the variable named after its owner: `<PREFIX>PROXMOX_<NAME>_TOKEN`,
    /// `<PREFIX>DATASTORE_<NAME>_PASSWORD`, `<PREFIX>MANAGEMENT_<NAME>_KUBECONFIG`, and a
    /// cluster's `endpointFrom` `<PREFIX>CLUSTER_<NAME>_DATASTORE_ENDPOINT` (NAME upper-case,
    /// `-` as `_`).
    #[arg(long, default_value = crate::secrets::DEFAULT_ENV_PREFIX, env = env_vars::CAPSTAN_SECRETS_ENV_PREFIX)]
    pub secrets_env_prefix: String,
    /// The folder capstan.yaml may read secret files (and `caFile`) from: each owner's in its
    /// own folder, `DIR/proxmox/<name>/`, `DIR/datastores/<name>/`,
    /// `DIR/managementClusters/<name>/`, `DIR/clusters/<name>/` (a relative path in
    /// capstan.yaml is relative to DIR; `..` and symbolic links leading out are refused).
    /// Without it, no secret file is read.
    #[arg(long, env = env_vars::CAPSTAN_SECRETS_DIR)]
    pub secrets_dir: Option<PathBuf>,
    /// Where a connection's secret may be sent: `proxmox.NAME.url=URL`,
    /// `proxmox.NAME.tlsFingerprint=FINGERPRINT`, `datastores.NAME.url=mysql://HOST:PORT`
    /// (repeat it, or separate them with `,` in the variable). Every connection of a real fleet
    /// must be pinned: a revision whose connection differs, or that adds one, is refused whole
    /// until the pin changes. `--lab` pins nothing.
    #[arg(long = "pin", value_name = "FIELD=VALUE", value_delimiter = ',', env = env_vars::CAPSTAN_PINS)]
    pub pins: Vec<crate::secrets::Pin>,
    /// The namespaces of the management clusters a cluster file may deliver its admin
    /// kubeconfig to (`delivery.flux.namespace`; repeat it, or separate them with `,`).
    /// Unset: any namespace but `capstan-system`, which is always refused. A cluster file
    /// naming another is refused with its line: its cluster is left as it is, Blocked on its
    /// file.
    #[arg(long, value_name = "NAMESPACE", value_delimiter = ',', env = env_vars::CAPSTAN_DELIVERY_NAMESPACES)]
    pub delivery_namespaces: Vec<String>,
}

impl SecretArgs {
    /// The limits the flags describe: the policy (never allowing the variables in
    /// `reserved`, those the daemon's own flags read), and the admission of revisions on a
    /// real fleet or, with `lab`, on a lab (whose Proxmox and management clusters are its own,
    /// so nothing is pinned).
    ///
    /// # Errors
    /// When the prefix is malformed, `--secrets-dir` is not a folder, or a field is pinned to
    /// two values.
    pub fn limits(
        &self,
        lab: bool,
        reserved: impl IntoIterator<Item = String>,
    ) -> Result<crate::secrets::Limits, crate::secrets::LimitsError> {
        let policy = std::sync::Arc::new(
            crate::secrets::SecretPolicy::new(
                &self.secrets_env_prefix,
                self.secrets_dir.as_deref(),
            )?
            .reserving(reserved),
        );
        let admission = if lab {
            crate::secrets::Admission::lab(std::sync::Arc::clone(&policy))
        } else {
            let pins = crate::secrets::Pins::new(self.pins.iter().cloned())?;
            crate::secrets::Admission::fleet(std::sync::Arc::clone(&policy), pins)
        }
        .with_delivery_namespaces(&self.delivery_namespaces);
        Ok(crate::secrets::Limits { policy, admission })
    }
}

impl RunArgs {
    /// The variables the daemon's own flags read secrets from: a repository may never name
    /// them, whatever their names.
    pub fn reserved_variables(&self) -> Vec<String> {
        let from_flag = |origin: &Option<SecretFrom>| match origin {
            Some(SecretFrom::Env { variable }) => Some(variable.clone()),
            _ => None,
        };
        [
            Some(env_vars::CAPSTAN_FORGE_TOKEN.to_owned()),
            from_flag(&self.git.git_token_from),
            from_flag(&self.daemon.webhook_secret_from),
            from_flag(&self.daemon.http_token_from),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// Limits on planning a preview: whoever opens a pull request chooses its head, so planning
/// it runs on a thread of its own within a time and a number of predicted steps; a head past
/// either gets a refusal that names the limit ("planning the head revision exceeded 30s:
/// refused"), and the daemon goes on reconciling.
#[derive(Debug, Clone, clap::Args)]
pub struct PreviewLimitArgs {
    /// How long planning a preview (the base and the head) may take.
    #[arg(long, default_value = "30s", env = env_vars::CAPSTAN_PREVIEW_TIMEOUT)]
    pub preview_timeout: crate::spec::HumanDuration,
    /// How many predicted steps the plan of each revision may hold (a few hundred bytes each;
    /// the default fits a replacement of every machine of a 5,000-machine cluster).
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..), env = env_vars::CAPSTAN_PREVIEW_MAX_STEPS)]
    pub preview_max_steps: u64,
}

impl PreviewLimitArgs {
    /// The limits these flags set.
    pub fn limits(&self) -> crate::preview::Limits {
        crate::preview::Limits {
            time: self.preview_timeout.0,
            max_predicted_steps: usize::try_from(self.preview_max_steps).unwrap_or(usize::MAX),
        }
    }
}

/// The forge pull-request previews are posted to. The token is read from the environment
/// variable `CAPSTAN_FORGE_TOKEN` only.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ForgeArgs {
    /// The forge's API: `github` (GitHub, GitHub Enterprise Server), `gitea` (Gitea,
    /// Forgejo) or `gitlab` (GitLab; `--pr` is then a merge request's iid).
    #[arg(long, value_enum, env = env_vars::CAPSTAN_FORGE)]
    pub forge: Option<crate::forge::ForgeKind>,
    /// The API base URL: `https://api.github.com` (the default for `github`),
    /// `https://HOST/api/v3` (GitHub Enterprise Server), `https://HOST/api/v1` (Gitea),
    /// `https://HOST/api/v4` (GitLab). Plain `http://` is refused (the token would travel
    /// unencrypted) except to a loopback address.
    #[arg(long, requires = "forge", env = env_vars::CAPSTAN_FORGE_URL)]
    pub forge_url: Option<String>,
    /// The repository on the forge, `OWNER/NAME` (GitLab: the project's `GROUP/NAME`).
    #[arg(long, requires = "forge", env = env_vars::CAPSTAN_FORGE_REPO)]
    pub forge_repo: Option<String>,
}

/// Leader election among replicas of `capstan run`.
#[derive(Debug, Clone, clap::Args)]
pub struct LeaderArgs {
    /// Start steps only while holding a `coordination.k8s.io/v1` Lease; otherwise stand by
    /// (observe, keep the Git mirror fresh, serve `/status` naming the leader) and take over
    /// when the Lease expires or is released.
    #[arg(long, env = env_vars::CAPSTAN_LEADER_ELECT)]
    pub leader_elect: bool,
    /// Namespace of the Lease (it must exist).
    #[arg(long, default_value = "capstan-system", env = env_vars::CAPSTAN_LEASE_NAMESPACE)]
    pub lease_namespace: String,
    /// Name of the Lease.
    #[arg(long, default_value = "capstan", env = env_vars::CAPSTAN_LEASE_NAME)]
    pub lease_name: String,
    /// Kubeconfig of the cluster holding the Lease (default: the fleet's first management
    /// cluster, by name; with `--lab`, the lab's `management`).
    #[arg(long, conflicts_with = "lease_in_cluster", env = env_vars::CAPSTAN_LEASE_KUBECONFIG)]
    pub lease_kubeconfig: Option<PathBuf>,
    /// Hold the Lease in the cluster capstan runs in, through its pod's service account (which
    /// needs only get, create and update on Leases in `--lease-namespace`).
    #[arg(long, env = env_vars::CAPSTAN_LEASE_IN_CLUSTER)]
    pub lease_in_cluster: bool,
    /// This replica's identity in the Lease (default: host name and process id; in a pod, the
    /// pod's name is the host name).
    #[arg(long, env = env_vars::CAPSTAN_LEASE_IDENTITY)]
    pub lease_identity: Option<String>,
    /// How long a Lease not renewed stays its holder's, in whole seconds (the Lease holds no
    /// fraction, so `1500ms` is refused); a leader that cannot renew stops starting steps
    /// `--lease-retry` before that.
    #[arg(long, default_value = "15s", env = env_vars::CAPSTAN_LEASE_DURATION,
          value_parser = crate::leader::parse_lease_duration)]
    pub lease_duration: crate::spec::HumanDuration,
    /// How often the leader renews the Lease.
    #[arg(long, default_value = "5s", env = env_vars::CAPSTAN_LEASE_RENEW)]
    pub lease_renew: crate::spec::HumanDuration,
    /// How often a standby looks at the Lease (and a leader retries a failed renewal): a
    /// released Lease is taken over within this.
    #[arg(long, default_value = "1s", env = env_vars::CAPSTAN_LEASE_RETRY)]
    pub lease_retry: crate::spec::HumanDuration,
}

/// `capstan demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Folder for the demo: the remote (`remote.git`), your clone of it (`repo/`: edit,
    /// commit and push there to change the clusters), the mirror capstan reads (`mirrors/`)
    /// and the lab's state (`lab/`). Kept between runs.
    #[arg(long, default_value = ".capstan-demo", env = env_vars::CAPSTAN_DEMO_DIR)]
    pub state_dir: PathBuf,
    /// Serve `/status`, `/healthz` and `/metrics` on this address (for `capstan status`).
    #[arg(long, default_value = "127.0.0.1:9464", env = env_vars::CAPSTAN_HTTP)]
    pub http: std::net::SocketAddr,
    /// The folder the remote's first commit holds (default: examples-repo/ of this checkout).
    #[arg(long)]
    pub examples: Option<PathBuf>,
    /// Stop once every cluster is Ready (for scripts), instead of reconciling until Ctrl-C.
    #[arg(long)]
    pub exit_when_ready: bool,
}

/// `capstan observe`.
#[derive(Debug, clap::Args)]
pub struct ObserveArgs {
    /// The repository, a Git remote URL or a folder (its clusters are observed).
    #[arg(long, default_value = ".", env = env_vars::CAPSTAN_REPO)]
    pub repo: RepoLocation,
    /// Reading a Git remote.
    #[command(flatten)]
    pub git: GitArgs,
    /// Observe a running lab (`capstan lab --state-dir DIR`) instead of the real connections.
    #[arg(long)]
    pub lab_state: Option<PathBuf>,
    /// Also list each cluster's pods and PodDisruptionBudgets (two calls per cluster), so
    /// `capstan preview --observed FILE` simulates drains.
    #[arg(long)]
    pub workloads: bool,
    /// Where secrets may come from, and where they may go (as for `run`).
    #[command(flatten)]
    pub secrets: SecretArgs,
}

/// `capstan validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The repository: a Git remote URL or a folder holding `capstan.yaml`.
    #[arg(default_value = ".", env = env_vars::CAPSTAN_REPO)]
    pub repo: RepoLocation,
    /// Reading a Git remote.
    #[command(flatten)]
    pub git: GitArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text, env = env_vars::CAPSTAN_FORMAT)]
    pub format: ReportFormat,
}

/// `capstan schema`.
#[derive(Debug, clap::Args)]
pub struct SchemaArgs {
    /// Write `fleet.schema.json`, `cluster.schema.json` and `observed.schema.json` (the
    /// snapshot `capstan plan --observed` reads) into this folder instead of printing them.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `capstan reference`.
#[derive(Debug, clap::Args)]
pub struct ReferenceArgs {
    /// Write the pages into this folder instead of printing them.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `capstan lab`.
#[derive(Debug, clap::Args)]
pub struct LabArgs {
    /// Address the simulated Proxmox VE listens on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8006", env = env_vars::CAPSTAN_LAB_LISTEN)]
    pub listen: std::net::SocketAddr,
    /// Folder where `lab.json` (URL, fingerprint, token) is written.
    #[arg(long, default_value = ".lab", env = env_vars::CAPSTAN_LAB_STATE_DIR)]
    pub state_dir: PathBuf,
    /// Lab config (YAML) describing the world: Proxmox nodes, storages, templates, task
    /// durations, faults. Without it: nodes pve1..pve3 and the templates of examples-repo.
    #[arg(long, env = env_vars::CAPSTAN_LAB_CONFIG)]
    pub config: Option<PathBuf>,
}

/// `capstan plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The repository: a Git remote URL or a folder holding `capstan.yaml`.
    #[arg(default_value = ".", env = env_vars::CAPSTAN_REPO)]
    pub repo: RepoLocation,
    /// Reading a Git remote.
    #[command(flatten)]
    pub git: GitArgs,
    /// The observed state: a JSON snapshot (schema: `schemas/observed.schema.json`), or `none`
    /// for "nothing exists yet".
    #[arg(long, env = env_vars::CAPSTAN_OBSERVED)]
    pub observed: ObservedSource,
    /// Plan as of this time (RFC 3339, e.g. `2026-05-02T01:30:00Z`) instead of now: to see
    /// what happens inside a maintenance window.
    #[arg(long, env = env_vars::CAPSTAN_NOW)]
    pub now: Option<jiff::Timestamp>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = PlanFormat::Text, env = env_vars::CAPSTAN_FORMAT)]
    pub format: PlanFormat,
}

/// `capstan preview`.
#[derive(Debug, clap::Args)]
pub struct PreviewArgs {
    /// The repository: a Git remote URL (its branches can be previewed) or a local Git
    /// repository (any ref or commit: a branch, a tag, `refs/pull/7/head`, a commit id).
    #[arg(long, default_value = ".", env = env_vars::CAPSTAN_REPO)]
    pub repo: RepoLocation,
    /// Reading the repository; `--branch` is the default base.
    #[command(flatten)]
    pub git: GitArgs,
    /// The revision the change would be merged into (default: `--branch`).
    #[arg(long, env = env_vars::CAPSTAN_PREVIEW_BASE)]
    pub base: Option<String>,
    /// The revision holding the change.
    #[arg(long, env = env_vars::CAPSTAN_PREVIEW_HEAD)]
    pub head: String,
    /// The observed state: a JSON snapshot (schema: `schemas/observed.schema.json`), or `none`
    /// for "nothing exists yet".
    #[arg(long, default_value = "none", env = env_vars::CAPSTAN_OBSERVED)]
    pub observed: ObservedSource,
    /// Plan as of this time (RFC 3339) instead of now.
    #[arg(long, env = env_vars::CAPSTAN_NOW)]
    pub now: Option<jiff::Timestamp>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = PlanFormat::Markdown, env = env_vars::CAPSTAN_FORMAT)]
    pub format: PlanFormat,
    /// Take the observed state from a running daemon (`GET URL/observed`) instead of
    /// `--observed`.
    #[arg(long, conflicts_with = "observed", env = env_vars::CAPSTAN_PREVIEW_SERVER)]
    pub server: Option<String>,
    /// The bearer token the daemon of `--server` requires (its `--http-token-from`), from
    /// `env:VARIABLE` or `file:PATH`; sent only over `https://`, or plain `http://` to a
    /// loopback address.
    #[arg(long, requires = "server", env = env_vars::CAPSTAN_SERVER_TOKEN_FROM)]
    pub server_token_from: Option<SecretFrom>,
    /// Also post the preview to this pull request (GitLab: the merge request's iid): one
    /// sticky comment (edited in place when its text changes) and a `capstan/preview` commit
    /// status on `--head`'s commit.
    #[arg(long, requires = "forge", env = env_vars::CAPSTAN_PREVIEW_PR)]
    pub pr: Option<u64>,
    /// What planning the preview may take.
    #[command(flatten)]
    pub limits: PreviewLimitArgs,
    /// Where the preview is posted.
    #[command(flatten)]
    pub forge: ForgeArgs,
}

/// Where `capstan plan` takes the observed state from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObservedSource {
    /// `none`: nothing exists yet.
    Nothing,
    /// A snapshot file.
    File(PathBuf),
}

impl std::str::FromStr for ObservedSource {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(if text == "none" {
            ObservedSource::Nothing
        } else {
            ObservedSource::File(PathBuf::from(text))
        })
    }
}

/// Format of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    /// For a terminal.
    Text,
    /// For a pull-request comment.
    Markdown,
    /// For programs.
    Json,
}

#[cfg(test)]
mod tests {
    use super::{Args, Command};
    use clap::Parser;

    #[test]
    fn every_variable_a_daemon_flag_reads_a_secret_from_is_reserved() {
        let cli = Args::try_parse_from([
            "capstan",
            "run",
            "--git-token-from",
            "env:CAPSTAN_GIT_SECRET",
            "--http",
            "127.0.0.1:8080",
            "--webhook-secret-from",
            "env:CAPSTAN_HOOK_SECRET",
            "--http-token-from",
            "env:CAPSTAN_PROXMOX_HTTP_TOKEN",
        ])
        .expect("the command line parses");
        let Command::Run(run) = cli.command else {
            panic!("parsed as another command");
        };
        let reserved = run.reserved_variables();
        for variable in [
            "CAPSTAN_GIT_SECRET",
            "CAPSTAN_HOOK_SECRET",
            "CAPSTAN_PROXMOX_HTTP_TOKEN",
        ] {
            assert!(
                reserved.iter().any(|name| name == variable),
                "{variable} is not reserved: {reserved:?}"
            );
        }
    }
}
