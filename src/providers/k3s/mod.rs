//! What capstan runs inside a node's VM to build and take apart a K3s cluster, the air-gap way
//! (the template carries the `k3s` binary, its images and the install script): servers start
//! with the cluster token and the datastore endpoint from K3s's configuration file, and
//! `--tls-san` for the endpoint host and address and `--node-ip` on their command line; agents
//! join the endpoint with the token from the same file; kube-vip holds the endpoint address as
//! a static pod on every server. The servers' flags carry the cluster's network (its ranges,
//! and no flannel when Flux installs the CNI): secrets never, ranges always. The steps are [`NodeStep`]s, run by the same runner as
//! kubeadm's ([`crate::providers::kubeadm::Kubeadm::run_steps`]).
//!
//! # Guarantees
//! - Installs are skipped on a node that already runs K3s (`unless` the kubeconfig or the
//!   agent's uninstall script exists), so a repeated step changes nothing.
//! - The token and the datastore DSN are never on a command line (QEMU's guest agent logs
//!   every command line to the guest's syslog, and `/proc/*/cmdline` shows it to every user
//!   of the node): they are in [`CONFIG`], of mode 0600 ([`FileMode::Secret`]), which K3s
//!   reads at every start of a server or an agent.

use std::net::IpAddr;
use std::time::Duration;

use super::kubeadm::{Kubeadm, KubeadmError, NodeStep, write_file};
use super::node_exec::{Command, FileMode, NodeExec, NodeTarget};
use crate::model::NodeName;
use crate::scheduling::Registration;
use crate::spec::{ClusterNetwork, ClusterSpec};

pub mod registries;

/// The install script a K3s template carries (K3s's air-gap install).
pub const INSTALL_SCRIPT: &str = "/usr/local/bin/k3s-install.sh";
/// What the install script leaves to remove a server.
pub const UNINSTALL_SCRIPT: &str = "/usr/local/bin/k3s-uninstall.sh";
/// The `k3s` binary a K3s template carries (the air-gap install), where the install script
/// looks for it.
pub const BINARY: &str = "/usr/local/bin/k3s";
/// What the install script leaves to remove an agent.
pub const AGENT_UNINSTALL_SCRIPT: &str = "/usr/local/bin/k3s-agent-uninstall.sh";
/// K3s's configuration file, read by `k3s server` and `k3s agent` at every start: it holds the
/// token and the datastore endpoint (mode 0600).
pub const CONFIG: &str = "/etc/rancher/k3s/config.yaml";
/// The admin kubeconfig a server writes (its server is the node's loopback).
pub const KUBECONFIG: &str = "/etc/rancher/k3s/k3s.yaml";
/// Static pods a K3s server's kubelet runs.
pub const KUBE_VIP_MANIFEST: &str = "/var/lib/rancher/k3s/agent/pod-manifests/kube-vip.yaml";

pub mod authentication;

const KUBE_VIP_TEMPLATE: &str = include_str!("templates/kube-vip.yaml");
/// K3s's own start (datastore, certificates, API server) on a slow host.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// The secrets and datastore a server starts with. `Debug` hides them.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerJoin {
    /// The cluster token (every server and agent presents the same one).
    pub token: String,
    /// kine's DSN; `None` for a single server on the embedded SQLite.
    pub datastore_endpoint: Option<String>,
}

impl std::fmt::Debug for ServerJoin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerJoin")
            .field("token", &"<redacted>")
            .field("external_datastore", &self.datastore_endpoint.is_some())
            .finish()
    }
}

fn install_env(version: &str) -> Vec<String> {
    vec![
        "env".to_owned(),
        "INSTALL_K3S_SKIP_DOWNLOAD=true".to_owned(),
        format!("INSTALL_K3S_VERSION=v{version}"),
    ]
}

/// [`CONFIG`] with `settings` (K3s's flag names, without `--`), each value a YAML
/// double-quoted string (JSON's escapes are YAML's).
fn config_file(settings: &[(&str, &str)]) -> String {
    settings
        .iter()
        .map(|(name, value)| {
            let quoted = serde_json::to_string(value).expect("a string serialises as JSON");
            format!("{name}: {quoted}\n")
        })
        .collect()
}

/// K3s's server flags for `network`: the pod and service ranges and the cluster DNS address
/// derived from the latter (K3s's own rule: the tenth address), then, when capstan installs
/// no CNI, no flannel and no network policy controller (the CNI Flux installs brings its
/// own), and no kube-proxy when the cluster runs without.
pub fn network_flags(network: &ClusterNetwork) -> Vec<String> {
    let mut flags = vec![
        "--cluster-cidr".to_owned(),
        network.pods.to_string(),
        "--service-cidr".to_owned(),
        network.services.to_string(),
        "--cluster-dns".to_owned(),
        network.dns_service_address().to_string(),
    ];
    if network.awaits_flux_cni() {
        flags.extend(["--flannel-backend", "none", "--disable-network-policy"].map(str::to_owned));
    }
    if !network.kube_proxy {
        flags.push("--disable-kube-proxy".to_owned());
    }
    flags
}

/// `--node-label KEY=VALUE` and `--node-taint KEY[=VALUE]:EFFECT` for each of what the node
/// registers with (K3s applies them at registration only; capstan changes them later through
/// the API). Keys and values are validated as Kubernetes does: no shell or flag syntax.
fn registration_flags(registration: &Registration) -> Vec<String> {
    let labels = registration
        .labels
        .iter()
        .flat_map(|(key, value)| ["--node-label".to_owned(), format!("{key}={value}")]);
    let taints = registration.taints.iter().flat_map(|taint| {
        let taint = match &taint.value {
            Some(value) => format!("{}={value}:{}", taint.key, taint.effect),
            None => format!("{}:{}", taint.key, taint.effect),
        };
        ["--node-taint".to_owned(), taint]
    });
    labels.chain(taints).collect()
}

/// A K3s server (the first, or any later one: with a shared datastore they are alike):
/// kube-vip's static pod, K3s's configuration file (token, datastore), then the install on
/// `network` (see [`network_flags`]).
pub fn install_server(
    spec: &ClusterSpec,
    network: &ClusterNetwork,
    join: &ServerJoin,
    node: &NodeName,
    address: IpAddr,
    registration: &Registration,
) -> Vec<NodeStep> {
    let endpoint = &spec.endpoint;
    let mut settings = vec![("token", join.token.as_str())];
    if let Some(dsn) = &join.datastore_endpoint {
        settings.push(("datastore-endpoint", dsn));
    }
    let mut argv = install_env(&spec.kubernetes.version.to_string());
    argv.extend(
        [
            "sh",
            INSTALL_SCRIPT,
            "server",
            "--tls-san",
            &endpoint.host,
            "--tls-san",
            &endpoint.address.to_string(),
            "--node-ip",
            &address.to_string(),
            "--node-name",
            node.as_str(),
            "--https-listen-port",
            &endpoint.port.to_string(),
        ]
        .map(str::to_owned),
    );
    argv.extend(network_flags(network));
    argv.extend(registration_flags(registration));
    vec![
        write_file(KUBE_VIP_MANIFEST, FileMode::Config, kube_vip(spec)),
        write_file(CONFIG, FileMode::Secret, config_file(&settings)),
        NodeStep::Run {
            command: Command::new(&argv).timeout(INSTALL_TIMEOUT),
            unless: Some(Command::new(&["test", "-f", KUBECONFIG])),
        },
    ]
}

/// A K3s agent joining the endpoint with the cluster token (from K3s's configuration file).
pub fn install_agent(
    spec: &ClusterSpec,
    token: &str,
    node: &NodeName,
    address: IpAddr,
    registration: &Registration,
) -> Vec<NodeStep> {
    let endpoint = &spec.endpoint;
    let mut argv = install_env(&spec.kubernetes.version.to_string());
    argv.push(format!(
        "K3S_URL=https://{}:{}",
        endpoint.host, endpoint.port
    ));
    argv.extend(
        [
            "sh",
            INSTALL_SCRIPT,
            "agent",
            "--node-ip",
            &address.to_string(),
            "--node-name",
            node.as_str(),
        ]
        .map(str::to_owned),
    );
    argv.extend(registration_flags(registration));
    vec![
        write_file(CONFIG, FileMode::Secret, config_file(&[("token", token)])),
        NodeStep::Run {
            command: Command::new(&argv).timeout(INSTALL_TIMEOUT),
            unless: Some(Command::new(&["test", "-f", AGENT_UNINSTALL_SCRIPT])),
        },
    ]
}

/// `steps` (from [`install_server`] or [`install_agent`]) with the cluster's K3s patches for
/// `pool`'s machines (`None`: a server) added to [`CONFIG`]: the keys the role reads
/// (`capstan_core::spec::patches::k3s`), after capstan's own. Unchanged when none reaches it.
///
/// # Errors
/// [`KubeadmError::Patches`] when capstan's own file does not read back as YAML.
pub fn with_patches(
    steps: Vec<NodeStep>,
    spec: &ClusterSpec,
    pool: Option<&str>,
    node: &str,
) -> Result<Vec<NodeStep>, KubeadmError> {
    let settings = crate::spec::patches::k3s::settings(spec, pool);
    if settings.is_empty() {
        return Ok(steps);
    }
    let failed = |reason: &str| KubeadmError::Patches {
        node: node.to_owned(),
        reason: reason.to_owned(),
    };
    steps
        .into_iter()
        .map(|step| match step {
            NodeStep::WriteFile {
                path,
                mode,
                content,
            } if path == CONFIG => {
                // The file holds the token: an error never quotes it.
                let mut config: serde_json::Map<String, serde_json::Value> =
                    serde_saphyr::from_str(&content)
                        .map_err(|_| failed("config.yaml does not read back as YAML"))?;
                for (key, value) in &settings {
                    config.entry(key.clone()).or_insert_with(|| value.clone());
                }
                let content = serde_saphyr::to_string(&config)
                    .map_err(|_| failed("config.yaml cannot be written as YAML"))?;
                Ok(NodeStep::WriteFile {
                    path,
                    mode,
                    content,
                })
            }
            other => Ok(other),
        })
        .collect()
}

/// The most of a server's `config.yaml` capstan reads back.
const MAX_CONFIG_BYTES: usize = 64 * 1024 + 4096;

/// Refuses a new server whose K3s critical values (`spec::patches::k3s`) differ from those of
/// the running server `running`: K3s requires them equal on every server and, on an external
/// datastore, does not refuse a mismatch itself. The file holds the token: it is read as a
/// sensitive command's output and never quoted.
///
/// # Errors
/// [`KubeadmError::Patches`] naming the keys that differ; the read's own error.
pub async fn same_critical_values<E: NodeExec>(
    nodes: &Kubeadm<E>,
    running: &NodeTarget,
    spec: &ClusterSpec,
    node: &str,
) -> Result<(), KubeadmError> {
    let read = Command::new(&["cat", CONFIG])
        .sensitive()
        .max_output(MAX_CONFIG_BYTES);
    let output = nodes.checked("read config.yaml", running, &read).await?;
    let config: serde_json::Map<String, serde_json::Value> = serde_saphyr::from_str(&output.stdout)
        .map_err(|_| KubeadmError::Patches {
            node: running.name.to_string(),
            reason: "its config.yaml does not read as YAML".to_owned(),
        })?;
    let wanted = crate::spec::patches::k3s::settings(spec, None);
    let differ = crate::spec::patches::k3s::critical_differences(&config, &wanted);
    if differ.is_empty() {
        return Ok(());
    }
    Err(KubeadmError::Patches {
        node: node.to_owned(),
        reason: format!(
            "K3s's critical values {} differ from those server {} runs with: every server must have the same (K3s does not refuse a mismatch on an external datastore); put the running value back in spec.patches, or rebuild the cluster with the new one",
            differ.join(", "),
            running.name
        ),
    })
}

/// Runs an install's `steps` (from [`install_server`] or [`install_agent`]) on `target`, cloned
/// from `template`. When a command fails and the node has no [`BINARY`], says that the
/// template carries no K3s air-gap install, rather than the install script's last words.
///
/// # Errors
/// [`KubeadmError::MissingFromTemplate`] then; otherwise the steps' error.
pub async fn install<E: NodeExec>(
    nodes: &Kubeadm<E>,
    operation: &'static str,
    target: &NodeTarget,
    template: &str,
    steps: &[NodeStep],
) -> Result<(), KubeadmError> {
    let err = match nodes.run_steps(operation, target, steps).await {
        Ok(()) => return Ok(()),
        Err(err @ KubeadmError::CommandFailed { .. }) => err,
        Err(err) => return Err(err),
    };
    let check = Command::new(&["test", "-e", BINARY]);
    match nodes.transport().run(target, &check).await {
        Ok(output) if !output.success() => Err(KubeadmError::MissingFromTemplate {
            operation,
            node: target.name.to_string(),
            template: template.to_owned(),
            what: "K3s air-gap install",
            path: BINARY,
        }),
        // The binary is there, or the node cannot say: the install's own error stands.
        _ => Err(err),
    }
}

/// Takes K3s off a node (server or agent): the uninstall script the install left.
pub fn uninstall(server: bool) -> Vec<NodeStep> {
    let script = if server {
        UNINSTALL_SCRIPT
    } else {
        AGENT_UNINSTALL_SCRIPT
    };
    vec![NodeStep::Run {
        command: Command::new(&["sh", script]).timeout(INSTALL_TIMEOUT),
        unless: None,
    }]
}

/// Certificate rotation on one server, as K3s documents it: stop the service, rotate, start
/// (the new certificates are issued at the start); the kubeconfig is read and delivered again
/// afterwards.
pub fn rotate_certificates() -> Vec<NodeStep> {
    [
        Command::new(&["systemctl", "stop", "k3s"]),
        Command::new(&["k3s", "certificate", "rotate"]),
        Command::new(&["systemctl", "start", "k3s"]).timeout(INSTALL_TIMEOUT),
    ]
    .into_iter()
    .map(|command| NodeStep::Run {
        command,
        unless: None,
    })
    .collect()
}

/// Prints the admin kubeconfig a server wrote.
pub fn read_kubeconfig() -> Command {
    Command::new(&["cat", KUBECONFIG])
        .sensitive()
        .max_output(crate::providers::kube::MAX_KUBECONFIG_BYTES)
}

fn kube_vip(spec: &ClusterSpec) -> String {
    [
        ("ENDPOINT_ADDRESS", spec.endpoint.address.to_string()),
        ("ENDPOINT_PORT", spec.endpoint.port.to_string()),
    ]
    .iter()
    .fold(KUBE_VIP_TEMPLATE.to_owned(), |text, (name, value)| {
        text.replace(&format!("${{{name}}}"), value)
    })
}

#[cfg(test)]
mod tests;
