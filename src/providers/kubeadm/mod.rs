//! What capstan runs inside a node's VM to build, join, upgrade and take apart a kubeadm
//! cluster: the phases of the design brief as files and commands.
//!
//! The files are templates in `templates/` that a reader can compare line by line with kubeadm's
//! and kube-vip's documentation; this module fills them and lists the commands, and
//! [`Kubeadm`] runs them through a [`NodeExec`] transport. Nothing here fetches anything from
//! the internet: the CNI goes through the cluster's API (`execute::distribution::kubeadm`).
//!
//! # Guarantees
//! - Every operation is safe to repeat: `kubeadm init` and `kubeadm join` are skipped on a node
//!   that already has their result (`unless` guards), `kubectl apply` and the scripts converge,
//!   `kubeadm reset --force` on a clean node is a no-op.
//! - Join tokens, certificate keys and kubeconfigs never reach logs or errors: the commands that
//!   print them are [`Command::sensitive`], and what they print is known to the redactor
//!   ([`crate::redact`]) as it is read. A sensitive command that fails is reported with the
//!   end of its standard error (where it says why; the secret goes to its standard output)
//!   only once the redactor has run over it, capped at [`SENSITIVE_STDERR_CAP`].
//! - No secret is ever an argument of a command (QEMU's guest agent logs every command line
//!   to the guest's syslog, and `/proc/*/cmdline` shows it to every user of the node): the
//!   join configuration that holds the bootstrap token and the certificate key is a file of
//!   mode 0600, removed once the join is done.
//! - Every file written into a VM is first created with its mode and folder
//!   ([`NodeStep::WriteFile`]): scripts root runs are 0700, secrets 0600, the rest 0644.

use std::net::IpAddr;
use std::time::Duration;

use super::node_exec::{Command, ExecError, FileMode, NodeExec, NodeTarget, Output};
use crate::model::{NodeName, Role};
use crate::scheduling::Registration;
use crate::spec::{ClusterNetwork, ClusterSpec, KubeVersion};

/// The most of a failed sensitive command's standard error an error quotes (after the
/// redactor): enough for the reason it failed (`kubeadm`'s last lines), not a document.
pub const SENSITIVE_STDERR_CAP: usize = 512;

/// Folder for the files capstan writes on a node.
pub const CAPSTAN_DIR: &str = "/etc/capstan";
/// Phase 2 script: CRI-O and the Kubernetes packages.
pub const PREPARE_SCRIPT: &str = "/etc/capstan/prepare-node.sh";
/// Certificate renewal script.
pub const RENEW_SCRIPT: &str = "/etc/capstan/renew-certificates.sh";
/// `kubeadm init --config`.
pub const INIT_CONFIG: &str = "/etc/capstan/kubeadm-init.yaml";
/// `kubeadm join --config` (holds a bootstrap token, and a control plane's certificate key:
/// mode 0600, removed after the join).
pub const JOIN_CONFIG: &str = "/etc/capstan/kubeadm-join.yaml";
/// `kubeadm upgrade apply --config` (its `UpgradeConfiguration`).
pub const UPGRADE_CONFIG: &str = "/etc/capstan/kubeadm-upgrade.yaml";
/// kube-vip's static pod.
pub const KUBE_VIP_MANIFEST: &str = "/etc/kubernetes/manifests/kube-vip.yaml";
/// The cluster-admin kubeconfig `kubeadm init` writes (the one delivered to Flux).
pub const ADMIN_CONF: &str = "/etc/kubernetes/admin.conf";
/// Present once a node has joined (or initialised) a cluster.
pub const KUBELET_CONF: &str = "/etc/kubernetes/kubelet.conf";
/// kubeadm's phase that deploys kube-proxy, skipped (at init and at every upgrade) when the
/// cluster runs without it.
pub const KUBE_PROXY_PHASE: &str = "addon/kube-proxy";

pub mod authentication;
pub mod patches;
pub mod registries;

const INIT_TEMPLATE: &str = include_str!("templates/kubeadm-init.yaml");
const JOIN_WORKER_TEMPLATE: &str = include_str!("templates/kubeadm-join-worker.yaml");
const JOIN_CONTROL_PLANE_TEMPLATE: &str = include_str!("templates/kubeadm-join-control-plane.yaml");
const KUBE_VIP_TEMPLATE: &str = include_str!("templates/kube-vip.yaml");
const UPGRADE_TEMPLATE: &str = include_str!("templates/kubeadm-upgrade.yaml");
const PREPARE_SCRIPT_TEXT: &str = include_str!("templates/prepare-node.sh");
const RENEW_SCRIPT_TEXT: &str = include_str!("templates/renew-certificates.sh");

/// Package installation downloads hundreds of megabytes on a real node.
const PREPARE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// kubeadm's own default wait for the control plane is four minutes; leave room around it.
const KUBEADM_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// One thing to do on a node. `Debug` shows a file's path and size, never its content (a
/// join configuration holds a bootstrap token and a certificate key).
#[derive(Clone, PartialEq, Eq)]
pub enum NodeStep {
    /// Write a file (its content may hold a secret: never logged). The runner first creates
    /// it empty with `mode` and its folders ([`FileMode::create_command`]), then fills it
    /// through the transport: written directly, a new file would be 0666 (QEMU's guest agent
    /// creates files with that mode whatever the umask), a file left by an earlier step would
    /// keep whatever mode it had, and a missing folder would fail the write.
    WriteFile {
        /// Absolute path.
        path: String,
        /// Who may read, replace or run it.
        mode: FileMode,
        /// Content.
        content: String,
    },
    /// Run a command, unless `unless` exits 0 (the step's result is already there).
    Run {
        /// The command.
        command: Command,
        /// A check that makes the step a no-op when it succeeds.
        unless: Option<Command>,
    },
}

impl std::fmt::Debug for NodeStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeStep::WriteFile {
                path,
                mode,
                content,
            } => f
                .debug_struct("WriteFile")
                .field("path", path)
                .field("mode", mode)
                .field("bytes", &content.len())
                .finish(),
            NodeStep::Run { command, unless } => f
                .debug_struct("Run")
                .field("command", command)
                .field("unless", unless)
                .finish(),
        }
    }
}

/// Writes `path` with `mode` (see [`NodeStep::WriteFile`]).
pub fn write_file(path: &str, mode: FileMode, content: String) -> NodeStep {
    NodeStep::WriteFile {
        path: path.to_owned(),
        mode,
        content,
    }
}

fn run(command: Command) -> NodeStep {
    NodeStep::Run {
        command,
        unless: None,
    }
}

fn run_unless_file(command: Command, path: &str) -> NodeStep {
    NodeStep::Run {
        command,
        unless: Some(Command::new(&["test", "-f", path])),
    }
}

/// Fills `${NAME}` placeholders. Every placeholder must have a value (tested for each template).
fn render(template: &str, values: &[(&str, String)]) -> String {
    values
        .iter()
        .fold(template.to_owned(), |text, (name, value)| {
            text.replace(&format!("${{{name}}}"), value)
        })
}

/// The cluster-wide values every template uses.
fn cluster_values(
    cluster_name: &str,
    spec: &ClusterSpec,
    network: &ClusterNetwork,
) -> Vec<(&'static str, String)> {
    vec![
        ("CLUSTER_NAME", cluster_name.to_owned()),
        ("KUBERNETES_VERSION", spec.kubernetes.version.to_string()),
        ("ENDPOINT_HOST", spec.endpoint.host.clone()),
        ("ENDPOINT_ADDRESS", spec.endpoint.address.to_string()),
        ("ENDPOINT_PORT", spec.endpoint.port.to_string()),
        ("POD_SUBNET", network.pods.to_string()),
        ("SERVICE_SUBNET", network.services.to_string()),
        ("SKIP_PHASES", skip_phases(network)),
    ]
}

/// kubeadm's `skipPhases` for `network`: its kube-proxy addon when the cluster runs without.
fn skip_phases(network: &ClusterNetwork) -> String {
    if network.kube_proxy {
        "[]".to_owned()
    } else {
        format!("[{KUBE_PROXY_PHASE}]")
    }
}

fn node_values(
    node: &NodeName,
    address: IpAddr,
    registration: &Registration,
) -> Vec<(&'static str, String)> {
    vec![
        ("NODE_NAME", node.to_string()),
        ("NODE_ADDRESS", address.to_string()),
        ("NODE_LABELS", node_labels(registration)),
        ("NODE_TAINTS", node_taints(registration)),
    ]
}

/// The kubelet's `--node-labels` (`k=v,k=v`) as a YAML double-quoted string. Keys and values
/// are validated as Kubernetes does: no `,`, `=` or quote can appear in them.
fn node_labels(registration: &Registration) -> String {
    let pairs: Vec<String> = registration
        .labels
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    serde_json::Value::String(pairs.join(",")).to_string()
}

/// `nodeRegistration.taints` as a YAML flow sequence (JSON): the node registers with exactly
/// these, `[]` meaning none (not kubeadm's default control-plane taint).
fn node_taints(registration: &Registration) -> String {
    let taints: Vec<serde_json::Value> = registration
        .taints
        .iter()
        .map(|taint| {
            let mut entry = serde_json::json!({"key": taint.key, "effect": taint.effect.as_str()});
            if let Some(value) = &taint.value {
                entry["value"] = serde_json::Value::String(value.clone());
            }
            entry
        })
        .collect();
    serde_json::Value::Array(taints).to_string()
}

/// Phase 2: CRI-O and kubelet/kubeadm/kubectl of `version`.
pub fn prepare_node(version: KubeVersion) -> Vec<NodeStep> {
    vec![
        write_file(
            PREPARE_SCRIPT,
            FileMode::Script,
            PREPARE_SCRIPT_TEXT.to_owned(),
        ),
        run(Command::new(&["bash", PREPARE_SCRIPT, &version.to_string()]).timeout(PREPARE_TIMEOUT)),
    ]
}

/// Phase 3 on the first control plane: kube-vip, then `kubeadm init` on `network` (the CNI
/// follows through the cluster's API).
pub fn init_control_plane(
    cluster_name: &str,
    spec: &ClusterSpec,
    network: &ClusterNetwork,
    node: &NodeName,
    address: IpAddr,
    registration: &Registration,
) -> Vec<NodeStep> {
    let mut values = cluster_values(cluster_name, spec, network);
    values.extend(node_values(node, address, registration));
    let kube_vip = |kubeconfig: &str| {
        let mut values = values.clone();
        values.push(("KUBE_VIP_KUBECONFIG", kubeconfig.to_owned()));
        render(KUBE_VIP_TEMPLATE, &values)
    };
    vec![
        write_file(
            INIT_CONFIG,
            FileMode::Config,
            render(INIT_TEMPLATE, &values),
        ),
        write_file(
            KUBE_VIP_MANIFEST,
            FileMode::Config,
            kube_vip("super-admin.conf"),
        ),
        run_unless_file(
            Command::new(&["kubeadm", "init", "--config", INIT_CONFIG, "--upload-certs"])
                .timeout(KUBEADM_TIMEOUT),
            ADMIN_CONF,
        ),
        write_file(KUBE_VIP_MANIFEST, FileMode::Config, kube_vip("admin.conf")),
    ]
}

/// What a node needs to join: the endpoint, a fresh bootstrap token and the CA's public-key hash
/// (`kubeadm token create --print-join-command`).
#[derive(Clone, PartialEq, Eq)]
pub struct JoinTicket {
    /// `HOST:PORT` of the API endpoint.
    pub api_server_endpoint: String,
    /// Bootstrap token `abcdef.0123456789abcdef` (secret).
    pub token: String,
    /// `sha256:<hex>` of the CA's public key.
    pub ca_cert_hash: String,
}

impl std::fmt::Debug for JoinTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinTicket")
            .field("api_server_endpoint", &self.api_server_endpoint)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// A fresh bootstrap token that expires soon after the join it is made for.
pub fn create_join_token() -> Command {
    Command::new(&[
        "kubeadm",
        "token",
        "create",
        "--ttl",
        "30m",
        "--print-join-command",
    ])
    .sensitive()
}

/// Reads the output of [`create_join_token`]:
/// `kubeadm join HOST:PORT --token T --discovery-token-ca-cert-hash sha256:H`.
pub fn parse_join_command(stdout: &str) -> Option<JoinTicket> {
    let line = stdout
        .lines()
        .find(|line| line.trim_start().starts_with("kubeadm join"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |flag: &str| {
        words
            .iter()
            .position(|w| *w == flag)
            .and_then(|i| words.get(i + 1))
    };
    Some(JoinTicket {
        api_server_endpoint: (*words.get(2)?).to_owned(),
        token: (*after("--token")?).to_owned(),
        ca_cert_hash: (*after("--discovery-token-ca-cert-hash")?).to_owned(),
    })
}

/// Re-uploads the control-plane certificates (encrypted, for two hours) and prints the key that
/// decrypts them; a joining control plane needs it.
pub fn upload_certificates() -> Command {
    Command::new(&["kubeadm", "init", "phase", "upload-certs", "--upload-certs"]).sensitive()
}

/// Reads the certificate key: the last line of [`upload_certificates`]' output, 64 hex digits.
pub fn parse_certificate_key(stdout: &str) -> Option<String> {
    let key = stdout
        .lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty())?;
    (key.len() == 64 && key.chars().all(|c| c.is_ascii_hexdigit())).then(|| key.to_owned())
}

/// Phase 4: joins a node, as a worker or (with the certificate key) as a control plane.
pub fn join_node(
    role: Role,
    ticket: &JoinTicket,
    certificate_key: Option<&str>,
    spec: &ClusterSpec,
    node: &NodeName,
    address: IpAddr,
    registration: &Registration,
) -> Vec<NodeStep> {
    let mut values = node_values(node, address, registration);
    values.extend([
        ("API_SERVER_ENDPOINT", ticket.api_server_endpoint.clone()),
        ("TOKEN", ticket.token.clone()),
        ("CA_CERT_HASH", ticket.ca_cert_hash.clone()),
        ("ENDPOINT_PORT", spec.endpoint.port.to_string()),
        ("ENDPOINT_ADDRESS", spec.endpoint.address.to_string()),
        (
            "CERTIFICATE_KEY",
            certificate_key.unwrap_or_default().to_owned(),
        ),
        ("KUBE_VIP_KUBECONFIG", "admin.conf".to_owned()),
    ]);
    let template = match role {
        Role::ControlPlane => JOIN_CONTROL_PLANE_TEMPLATE,
        Role::Worker => JOIN_WORKER_TEMPLATE,
    };
    let mut steps = vec![
        write_file(JOIN_CONFIG, FileMode::Secret, render(template, &values)),
        run_unless_file(
            Command::new(&["kubeadm", "join", "--config", JOIN_CONFIG]).timeout(KUBEADM_TIMEOUT),
            KUBELET_CONF,
        ),
        // The bootstrap token (and a control plane's certificate key) is of no use on the
        // node once it has joined.
        run(Command::new(&["rm", "-f", JOIN_CONFIG])),
    ];
    if role == Role::ControlPlane {
        steps.push(write_file(
            KUBE_VIP_MANIFEST,
            FileMode::Config,
            render(KUBE_VIP_TEMPLATE, &values),
        ));
    }
    steps
}

/// Takes a node out: `kubeadm reset` stops the kubelet, removes the node's state and, on a
/// control plane, its etcd member.
pub fn reset_node() -> Vec<NodeStep> {
    vec![run(
        Command::new(&["kubeadm", "reset", "--force"]).timeout(KUBEADM_TIMEOUT)
    )]
}

/// One member of the cluster's etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdMember {
    /// Member id (etcdctl prints it in decimal, takes it in hex).
    pub id: u64,
    /// The member's name: the control plane's node name.
    pub name: String,
}

fn etcdctl(control_plane: &NodeName, args: &[&str]) -> Command {
    let pod = format!("etcd-{control_plane}");
    let mut argv = vec![
        "kubectl",
        "--kubeconfig",
        ADMIN_CONF,
        "-n",
        "kube-system",
        "exec",
        &pod,
        "--",
        "etcdctl",
        "--endpoints",
        "https://127.0.0.1:2379",
        "--cacert",
        "/etc/kubernetes/pki/etcd/ca.crt",
        "--cert",
        "/etc/kubernetes/pki/etcd/server.crt",
        "--key",
        "/etc/kubernetes/pki/etcd/server.key",
    ];
    argv.extend_from_slice(args);
    Command::new(&argv)
}

/// Lists etcd members, run on a healthy control plane (`control_plane` names its etcd pod).
pub fn etcd_member_list(control_plane: &NodeName) -> Command {
    etcdctl(control_plane, &["member", "list", "--write-out", "json"])
}

/// Reads [`etcd_member_list`]'s JSON.
pub fn parse_etcd_members(stdout: &str) -> Option<Vec<EtcdMember>> {
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        members: Vec<Member>,
    }
    #[derive(serde::Deserialize)]
    struct Member {
        #[serde(rename = "ID")]
        id: u64,
        #[serde(default)]
        name: String,
    }
    let list: List = serde_json::from_str(stdout).ok()?;
    Some(
        list.members
            .into_iter()
            .map(|m| EtcdMember {
                id: m.id,
                name: m.name,
            })
            .collect(),
    )
}

/// Removes a member whose control plane is gone without a `kubeadm reset` (a dead VM).
pub fn etcd_member_remove(control_plane: &NodeName, member: &EtcdMember) -> Command {
    etcdctl(
        control_plane,
        &["member", "remove", &format!("{:x}", member.id)],
    )
}

/// Moves the control plane to `version` in place (nodes are replaced afterwards), skipping
/// the kube-proxy addon when `network` runs without it: `kubeadm upgrade apply` would deploy
/// it again otherwise.
pub fn upgrade_control_plane(version: KubeVersion, network: &ClusterNetwork) -> Vec<NodeStep> {
    let values = [
        ("KUBERNETES_VERSION", version.to_string()),
        ("SKIP_PHASES", skip_phases(network)),
    ];
    vec![
        write_file(
            UPGRADE_CONFIG,
            FileMode::Config,
            render(UPGRADE_TEMPLATE, &values),
        ),
        write_file(
            PREPARE_SCRIPT,
            FileMode::Script,
            PREPARE_SCRIPT_TEXT.to_owned(),
        ),
        run(Command::new(&[
            "bash",
            PREPARE_SCRIPT,
            &version.to_string(),
            "--kubeadm-only",
        ])
        .timeout(PREPARE_TIMEOUT)),
        run(Command::new(&[
            "kubeadm",
            "upgrade",
            "apply",
            &format!("v{version}"),
            "--config",
            UPGRADE_CONFIG,
            "--yes",
        ])
        .timeout(KUBEADM_TIMEOUT)),
    ]
}

/// Renews every kubeadm certificate on a control plane and restarts its static pods.
pub fn renew_certificates() -> Vec<NodeStep> {
    vec![
        write_file(RENEW_SCRIPT, FileMode::Script, RENEW_SCRIPT_TEXT.to_owned()),
        run(Command::new(&["bash", RENEW_SCRIPT]).timeout(KUBEADM_TIMEOUT)),
    ]
}

/// Prints the cluster-admin kubeconfig.
pub fn read_admin_kubeconfig() -> Command {
    Command::new(&["cat", ADMIN_CONF])
        .sensitive()
        .max_output(crate::providers::kube::MAX_KUBECONFIG_BYTES)
}

/// A kubeadm operation on a node failed.
#[derive(Debug, thiserror::Error)]
pub enum KubeadmError {
    /// The node could not be reached.
    #[error("{operation} on {node}")]
    Exec {
        /// What capstan was doing (`join`, `init`, ...).
        operation: &'static str,
        /// The node.
        node: String,
        /// Why the guest agent could not run the command.
        #[source]
        source: ExecError,
    },
    /// A command exited non-zero.
    #[error("{operation} on {node}: `{command}` exited {exit_code}{}", detail(.stderr_tail))]
    CommandFailed {
        /// What capstan was doing.
        operation: &'static str,
        /// The node.
        node: String,
        /// The command, as shown in logs.
        command: String,
        /// Its exit code.
        exit_code: i32,
        /// The end of its standard error (for a sensitive command, redacted and capped at
        /// [`SENSITIVE_STDERR_CAP`]).
        stderr_tail: String,
    },
    /// A node's template lacks what the step needs (K3s's air-gap install): no retry can help
    /// until the machine is built from another template.
    #[error("{operation} on {node}: template {template} has no {what}: {path} not found")]
    MissingFromTemplate {
        /// What capstan was doing.
        operation: &'static str,
        /// The node.
        node: String,
        /// The template the node's VM was cloned from.
        template: String,
        /// What the template should carry.
        what: &'static str,
        /// The file that is not there.
        path: &'static str,
    },
    /// The cluster's patches could not be merged into the node's configuration.
    #[error("the patches of {node}'s configuration: {reason}")]
    Patches {
        /// The node.
        node: String,
        /// What failed (never the configuration's content: it may hold a token).
        reason: String,
    },
    /// A command printed something capstan cannot read.
    #[error("{operation} on {node}: unexpected output from `{command}`")]
    UnexpectedOutput {
        /// What capstan was doing.
        operation: &'static str,
        /// The node.
        node: String,
        /// The command.
        command: String,
    },
}

fn detail(stderr_tail: &str) -> String {
    if stderr_tail.is_empty() {
        String::new()
    } else {
        format!(": {stderr_tail}")
    }
}

impl KubeadmError {
    /// Whether retrying later may succeed: the transport hiccuped. A command that exited
    /// non-zero is reported, then retried by the next reconcile pass with backoff.
    pub fn is_transient(&self) -> bool {
        matches!(self, KubeadmError::Exec { source, .. } if source.is_transient())
    }
}

/// Runs kubeadm operations on nodes through a [`NodeExec`] transport.
#[derive(Debug, Clone)]
pub struct Kubeadm<E> {
    exec: E,
}

impl<E: NodeExec> Kubeadm<E> {
    /// Operations over `exec`.
    pub fn new(exec: E) -> Self {
        Kubeadm { exec }
    }

    /// The transport the operations run over.
    pub fn transport(&self) -> &E {
        &self.exec
    }

    /// Runs `steps` in order, stopping at the first failure.
    ///
    /// # Errors
    /// When the node cannot be reached or a command exits non-zero.
    pub async fn run_steps(
        &self,
        operation: &'static str,
        target: &NodeTarget,
        steps: &[NodeStep],
    ) -> Result<(), KubeadmError> {
        for step in steps {
            match step {
                NodeStep::WriteFile {
                    path,
                    mode,
                    content,
                } => {
                    self.checked(operation, target, &mode.create_command(path))
                        .await?;
                    self.exec
                        .write_file(target, path, content)
                        .await
                        .map_err(|source| exec_error(operation, target, source))?;
                }
                NodeStep::Run { command, unless } => {
                    if let Some(check) = unless
                        && self.output(operation, target, check).await?.success()
                    {
                        tracing::debug!(node = %target.name, command = %command.display(), "already done");
                        continue;
                    }
                    self.checked(operation, target, command).await?;
                }
            }
        }
        Ok(())
    }

    /// Runs one command and returns its output when it exits 0.
    ///
    /// # Errors
    /// When the node cannot be reached or the command exits non-zero.
    pub async fn checked(
        &self,
        operation: &'static str,
        target: &NodeTarget,
        command: &Command,
    ) -> Result<Output, KubeadmError> {
        let output = self.output(operation, target, command).await?;
        if output.success() {
            return Ok(output);
        }
        Err(KubeadmError::CommandFailed {
            operation,
            node: target.name.to_string(),
            command: command.display(),
            exit_code: output.exit_code,
            stderr_tail: if command.sensitive {
                crate::redact::cap(
                    &crate::redact::redact(&output.stderr_tail()),
                    SENSITIVE_STDERR_CAP,
                )
            } else {
                output.stderr_tail()
            },
        })
    }

    async fn output(
        &self,
        operation: &'static str,
        target: &NodeTarget,
        command: &Command,
    ) -> Result<Output, KubeadmError> {
        tracing::debug!(node = %target.name, command = %command.display(), "running");
        self.exec
            .run(target, command)
            .await
            .map_err(|source| exec_error(operation, target, source))
    }

    /// A fresh join ticket from a control plane.
    ///
    /// # Errors
    /// When the command fails or prints no join command.
    pub async fn join_ticket(
        &self,
        control_plane: &NodeTarget,
    ) -> Result<JoinTicket, KubeadmError> {
        let command = create_join_token();
        let output = self
            .checked("create join token", control_plane, &command)
            .await?;
        let ticket = parse_join_command(&output.stdout)
            .ok_or_else(|| unexpected("create join token", control_plane, &command))?;
        crate::redact::remember(&ticket.token);
        Ok(ticket)
    }

    /// A fresh certificate key from a control plane, for a control-plane join.
    ///
    /// # Errors
    /// When the command fails or prints no key.
    pub async fn certificate_key(
        &self,
        control_plane: &NodeTarget,
    ) -> Result<String, KubeadmError> {
        let command = upload_certificates();
        let output = self
            .checked("upload certificates", control_plane, &command)
            .await?;
        let key = parse_certificate_key(&output.stdout)
            .ok_or_else(|| unexpected("upload certificates", control_plane, &command))?;
        crate::redact::remember(&key);
        Ok(key)
    }

    /// The cluster-admin kubeconfig of a control plane.
    ///
    /// # Errors
    /// When the file cannot be read.
    pub async fn admin_kubeconfig(
        &self,
        control_plane: &NodeTarget,
    ) -> Result<String, KubeadmError> {
        let output = self
            .checked(
                "read admin kubeconfig",
                control_plane,
                &read_admin_kubeconfig(),
            )
            .await?;
        crate::redact::remember_kubeconfig(&output.stdout);
        Ok(output.stdout)
    }

    /// Removes `leaving`'s etcd member through a healthy control plane, when it is still listed.
    ///
    /// # Errors
    /// When etcdctl fails or prints something unreadable.
    pub async fn remove_etcd_member(
        &self,
        healthy: &NodeTarget,
        leaving: &NodeName,
    ) -> Result<(), KubeadmError> {
        let list = etcd_member_list(&healthy.name);
        let output = self.checked("list etcd members", healthy, &list).await?;
        let members = parse_etcd_members(&output.stdout)
            .ok_or_else(|| unexpected("list etcd members", healthy, &list))?;
        if let Some(member) = members.iter().find(|m| m.name == leaving.as_str()) {
            self.checked(
                "remove etcd member",
                healthy,
                &etcd_member_remove(&healthy.name, member),
            )
            .await?;
        }
        Ok(())
    }
}

fn exec_error(operation: &'static str, target: &NodeTarget, source: ExecError) -> KubeadmError {
    KubeadmError::Exec {
        operation,
        node: target.name.to_string(),
        source,
    }
}

fn unexpected(operation: &'static str, target: &NodeTarget, command: &Command) -> KubeadmError {
    KubeadmError::UnexpectedOutput {
        operation,
        node: target.name.to_string(),
        command: command.display(),
    }
}

#[cfg(test)]
pub(crate) mod tests;
