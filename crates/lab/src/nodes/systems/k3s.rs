//! K3s in the simulated VMs, installed the air-gap way: the template carries the binary, its
//! images and the install script, and `env INSTALL_K3S_SKIP_DOWNLOAD=true ... sh
//! k3s-install.sh server|agent FLAGS` installs the service and starts it, K3s reading its
//! token and datastore endpoint from `/etc/rancher/k3s/config.yaml`. A server keeps the
//! cluster in its datastore (kine on MySQL, reached by the node software before it comes
//! here) or, alone, in the embedded SQLite; agents join a server's endpoint with its token.
//! Refusals carry K3s's and the install script's words.
//!
//! The lab is stricter than K3s in one respect, as a judge of the reconciler: the token or
//! the datastore endpoint on the command line (`--token`, `K3S_TOKEN=`, ...) is refused, for
//! QEMU's guest agent logs every command line to the guest's syslog and `/proc/*/cmdline`
//! shows it to every user of the node; so is a configuration file holding them that others
//! than root may read.

use std::collections::BTreeMap;
use std::net::IpAddr;

use capstan_core::model::Role;

use crate::kine::Dsn;
use crate::nodes::{ClusterBackend, NewCluster, NewNode, Registration, cli, paths};
use crate::proxmox::ExecOutcome as Exit;
use crate::proxmox::GuestIdentity as GuestVm;
use crate::values::KubeVersion;

use super::{ClusterState, GuestSystems, Later, Member};

/// What the install command asks, read before anything changes (the datastore is reached
/// between reading and applying, outside the state lock).
#[derive(Debug, Clone)]
pub(in crate::nodes) enum K3sInstall {
    /// `server` with its flags (environment applied).
    Server(ServerRequest),
    /// `agent` with its flags.
    Agent(AgentRequest),
}

#[derive(Debug, Clone)]
pub(in crate::nodes) struct ServerRequest {
    pub version: KubeVersion,
    pub node: String,
    pub token: String,
    pub datastore: Option<Dsn>,
    pub tls_san: Vec<String>,
    pub port: u16,
    /// The network its flags (or configuration file) give the cluster.
    pub network: crate::kube::network::ClusterNetwork,
    pub registration: Registration,
    /// The packaged components it does not deploy (`disable`, from its configuration file).
    pub disable: Vec<String>,
    /// The arguments its API server runs with (`kube-apiserver-arg`, from its configuration
    /// file), `NAME=VALUE` each.
    pub apiserver_args: Vec<String>,
}

#[derive(Debug, Clone)]
pub(in crate::nodes) struct AgentRequest {
    pub version: KubeVersion,
    pub node: String,
    pub token: String,
    pub server: String,
    pub registration: Registration,
}

/// The state of a K3s cluster besides the common one.
#[derive(Debug, Clone)]
pub(super) struct K3sCluster {
    token: String,
    datastore: Option<Dsn>,
}

impl K3sCluster {
    /// Its token and its datastore's password, named.
    pub(super) fn secrets(&self) -> Vec<(&'static str, &str)> {
        let mut secrets = vec![("the K3s token", self.token.as_str())];
        if let Some(dsn) = &self.datastore {
            secrets.push(("the datastore password", dsn.password()));
        }
        secrets
    }
}

/// K3s's configuration file as the guest holds it: its text and permission bits.
#[derive(Debug, Clone)]
pub(in crate::nodes) struct ConfigFile {
    pub text: String,
    pub mode: Option<u32>,
}

/// `[INFO]`/`[ERROR]` lines and the systemd failure the install script ends with when the
/// service does not start.
fn service_failed(k3s_log: &str) -> Exit {
    Exit::failure(
        1,
        format!(
            "[INFO]  systemd: Starting k3s\n{k3s_log}\nJob for k3s.service failed because the control process exited with error code.\nSee \"systemctl status k3s.service\" and \"journalctl -xeu k3s.service\" for details.\n"
        ),
    )
}

/// `level=fatal` as K3s logs a start that fails.
pub(in crate::nodes) fn fatal(message: &str) -> Exit {
    service_failed(&format!("level=fatal msg=\"{message}\""))
}

/// Reads `[env VAR=VALUE...] sh k3s-install.sh ARGS`, with K3s's configuration file
/// `config`; `None` when `argv` is not K3s's install, `Some(Err)` when the install script or
/// K3s (or the lab, for a secret on the command line) refuses it before starting.
pub(in crate::nodes) fn parse_install(
    vm: &GuestVm,
    argv: &[String],
    config: Option<&ConfigFile>,
) -> Option<Result<K3sInstall, Exit>> {
    let (env, command) = split_env(argv);
    match command {
        [sh, script, args @ ..]
            if (sh == "sh" || sh == "bash") && script == paths::K3S_INSTALL_SCRIPT =>
        {
            Some(install(vm, &env, args, config))
        }
        _ => None,
    }
}

/// The lab's refusal of a secret on the command line (`what` says where it was).
fn secret_on_command_line(what: &str) -> Exit {
    Exit::failure(
        1,
        format!(
            "lab: {what} is on the command line, where QEMU's guest agent logs it to the guest's syslog and /proc/*/cmdline shows it to every user of the node: write it to {} (mode 0600), which K3s reads at every start\n",
            paths::K3S_CONFIG
        ),
    )
}

/// The settings of K3s's configuration file (`None`: there is none), refused when it holds a
/// secret and others than root may read it.
fn read_config(config: Option<&ConfigFile>) -> Result<Option<serde_json::Value>, Exit> {
    let Some(config) = config else {
        return Ok(None);
    };
    let settings: serde_json::Value = serde_saphyr::from_str(&config.text).map_err(|err| {
        fatal(&format!(
            "failed to parse {}: {}",
            paths::K3S_CONFIG,
            err.without_snippet()
        ))
    })?;
    let secret = ["token", "datastore-endpoint", "agent-token"]
        .iter()
        .any(|key| settings.get(key).is_some());
    match config.mode {
        Some(mode) if secret && mode & 0o077 != 0 => Err(Exit::failure(
            1,
            format!(
                "lab: {} holds the cluster's secrets and is mode {mode:04o}: every user of the node can read it; create it 0600 before writing it (QEMU's guest agent creates a new file 0666)\n",
                paths::K3S_CONFIG
            ),
        )),
        _ => Ok(Some(settings)),
    }
}

fn split_env(argv: &[String]) -> (BTreeMap<String, String>, &[String]) {
    let mut env = BTreeMap::new();
    let Some(("env", mut rest)) = argv.split_first().map(|(p, r)| (p.as_str(), r)) else {
        return (env, argv);
    };
    while let Some((pair, tail)) = rest.split_first() {
        let Some((name, value)) = pair.split_once('=') else {
            break;
        };
        env.insert(name.to_owned(), value.to_owned());
        rest = tail;
    }
    (env, rest)
}

fn install(
    vm: &GuestVm,
    env: &BTreeMap<String, String>,
    args: &[String],
    config: Option<&ConfigFile>,
) -> Result<K3sInstall, Exit> {
    for variable in ["K3S_TOKEN", "K3S_AGENT_TOKEN", "K3S_DATASTORE_ENDPOINT"] {
        if env.contains_key(variable) {
            return Err(secret_on_command_line(&format!("{variable}=")));
        }
    }
    if env.get("INSTALL_K3S_SKIP_DOWNLOAD").map(String::as_str) != Some("true") {
        return Err(Exit::failure(
            1,
            "[INFO]  Finding release for channel stable\ncurl: (6) Could not resolve host: update.k3s.io\n[ERROR]  Download failed\n",
        ));
    }
    let Some(version) = vm
        .k3s_airgap
        .as_deref()
        .and_then(|v| v.parse::<KubeVersion>().ok())
    else {
        return Err(Exit::failure(
            1,
            "[INFO]  Skipping k3s download and verify\n[ERROR]  k3s binary not found at /usr/local/bin/k3s: copy it there for an air-gapped install\n",
        ));
    };
    let parsed: cli::K3s =
        cli::parse("k3s", args).map_err(|(code, message)| Exit::failure(code, message))?;
    let (token_flag, datastore_flag) = match &parsed.command {
        cli::K3sCommand::Server(server) => (&server.token, &server.datastore_endpoint),
        cli::K3sCommand::Agent(agent) => (&agent.token, &None),
    };
    if token_flag.is_some() {
        return Err(secret_on_command_line("--token"));
    }
    if datastore_flag.is_some() {
        return Err(secret_on_command_line("--datastore-endpoint"));
    }
    let settings = read_config(config)?;
    let setting = |key: &str| {
        settings
            .as_ref()
            .and_then(|s| s.get(key))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let from_env = |flag: Option<String>, name: &str| flag.or_else(|| env.get(name).cloned());
    match parsed.command {
        cli::K3sCommand::Server(server) => {
            let datastore = match setting("datastore-endpoint") {
                Some(endpoint) => Some(Dsn::parse(&endpoint).map_err(|err| {
                    fatal(&format!(
                        "starting kubernetes: preparing server: creating storage endpoint: {err}"
                    ))
                })?),
                None => None,
            };
            let token = setting("token").ok_or_else(|| {
                fatal("starting kubernetes: preparing server: token is required to join a cluster; with an external datastore every server must be started with the same --token")
            })?;
            let network = k3s_network(&server, &setting, settings.as_ref())?;
            let registration = registration(&server.node_label, &server.node_taint, &settings)?;
            Ok(K3sInstall::Server(ServerRequest {
                version,
                node: server.node_name.unwrap_or_else(|| vm.name.clone()),
                token,
                datastore,
                tls_san: server.tls_san,
                port: server.https_listen_port,
                network,
                registration,
                disable: disabled(settings.as_ref()),
                apiserver_args: listed(settings.as_ref(), "kube-apiserver-arg"),
            }))
        }
        cli::K3sCommand::Agent(agent) => {
            let server = from_env(agent.server, "K3S_URL")
                .or_else(|| setting("server"))
                .ok_or_else(|| fatal("--server is required"))?;
            let token = setting("token").ok_or_else(|| fatal("--token is required"))?;
            let registration = registration(&agent.node_label, &agent.node_taint, &settings)?;
            Ok(K3sInstall::Agent(AgentRequest {
                version,
                node: agent.node_name.unwrap_or_else(|| vm.name.clone()),
                token,
                server,
                registration,
            }))
        }
    }
}

/// The network a K3s server starts with, from its flags, else its configuration file, else
/// K3s's defaults: `--cluster-cidr` (10.42.0.0/16), `--service-cidr` (10.43.0.0/16), flannel
/// built in unless `--flannel-backend none`, kube-proxy built in unless
/// `--disable-kube-proxy`.
fn k3s_network(
    server: &cli::K3sServerArgs,
    setting: &dyn Fn(&str) -> Option<String>,
    settings: Option<&serde_json::Value>,
) -> Result<crate::kube::network::ClusterNetwork, Exit> {
    use crate::kube::network::{ClusterNetwork, KubeProxy, NetworkPlugin};
    let flag = |given: &Option<String>, key: &str, default: &str| {
        given
            .clone()
            .or_else(|| setting(key))
            .unwrap_or_else(|| default.to_owned())
    };
    // A configuration file's switch may be a YAML boolean or a string.
    let switch = |given: bool, key: &str| {
        given
            || settings
                .and_then(|s| s.get(key))
                .is_some_and(|v| v == &serde_json::json!(true) || v == &serde_json::json!("true"))
    };
    let pods = flag(&server.cluster_cidr, "cluster-cidr", "10.42.0.0/16");
    let services = flag(&server.service_cidr, "service-cidr", "10.43.0.0/16");
    let backend = flag(&server.flannel_backend, "flannel-backend", "vxlan");
    let network = ClusterNetwork {
        pods: ClusterNetwork::parse_range(&pods, "--cluster-cidr").map_err(|m| fatal(&m))?,
        services: ClusterNetwork::parse_range(&services, "--service-cidr")
            .map_err(|m| fatal(&m))?,
        plugin: if backend == "none" {
            NetworkPlugin::Applied
        } else {
            NetworkPlugin::Embedded
        },
        kube_proxy: if switch(server.disable_kube_proxy, "disable-kube-proxy") {
            KubeProxy::Disabled
        } else {
            KubeProxy::Embedded
        },
    };
    network.check().map_err(|m| fatal(&m))?;
    Ok(network)
}

/// What the kubelet registers with: the `node-label` and `node-taint` lists of K3s's
/// configuration file, then the flags. A K3s server carries no taint unless given one (servers
/// run workloads).
fn registration(
    labels: &[String],
    taints: &[String],
    settings: &Option<serde_json::Value>,
) -> Result<Registration, Exit> {
    let listed = |key: &str| -> Vec<String> {
        settings
            .as_ref()
            .and_then(|s| s.get(key))
            .and_then(serde_json::Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut registration = Registration::default();
    for label in listed("node-label").iter().chain(labels) {
        registration
            .add_labels_flag("--node-label", label)
            .map_err(|message| fatal(&message))?;
    }
    for taint in listed("node-taint").iter().chain(taints) {
        registration
            .add_taint_flag(taint)
            .map_err(|message| fatal(&message))?;
    }
    Ok(registration)
}

impl GuestSystems {
    /// The K3s cluster a server with `datastore` (or, alone, `endpoint`) belongs to.
    pub(in crate::nodes) fn k3s_cluster_of(&self, request: &ServerRequest) -> Option<String> {
        let endpoint = server_endpoint(request);
        self.clusters
            .iter()
            .find(|(_, state)| match (&state.k3s, &request.datastore) {
                (Some(k3s), Some(dsn)) => k3s.datastore.as_ref().is_some_and(|d| {
                    (&d.host, d.port, &d.database) == (&dsn.host, dsn.port, &dsn.database)
                }),
                (Some(_), None) => state.endpoint == endpoint,
                _ => false,
            })
            .map(|(name, _)| name.clone())
    }

    /// Whether the cluster still exists (a datastore watcher stops when it does not).
    pub(in crate::nodes) fn has_cluster(&self, name: &str) -> bool {
        self.clusters.contains_key(name)
    }

    /// Starts a server whose datastore (if any) was opened and holds its registration.
    /// Returns the cluster's name and whether this server created it.
    pub(in crate::nodes) fn k3s_server(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        request: &ServerRequest,
        later: &mut Vec<Later>,
    ) -> Result<(String, bool), Exit> {
        if self.guest(vm.vmid).member.is_some() {
            return Err(Exit::failure(
                1,
                "[INFO]  Skipping installation: k3s.service is already running on this node\n",
            ));
        }
        self.guest(vm.vmid).k3s_starts();
        let existing = self.k3s_cluster_of(request);
        let created = existing.is_none();
        let name = match existing {
            Some(name) => {
                if request.datastore.is_none() {
                    return Err(fatal(
                        "starting kubernetes: preparing server: a second server needs an external datastore (--datastore-endpoint) or embedded etcd",
                    ));
                }
                name
            }
            None => self.create_k3s_cluster(backend, vm, request)?,
        };
        let state = self
            .clusters
            .get_mut(&name)
            .ok_or_else(|| fatal("cluster vanished"))?;
        if state.k3s.as_ref().is_some_and(|k| k.token != request.token) {
            return Err(fatal(
                "starting kubernetes: preparing server: bootstrap data already found and encrypted with different token",
            ));
        }
        let admin = state.access.admin_kubeconfig.clone();
        // The API server runs inside K3s: it starts with the file its flag names, or K3s
        // does not start.
        let authentication =
            authentication_file(&request.apiserver_args, &self.guest(vm.vmid).files)?;
        backend
            .api_server(&name, &request.node, true, authentication.as_deref())
            .map_err(|err| fatal(&capstan_core::errors::error_chain(&err)))?;
        // Each server deploys the packaged components it does not disable (K3s's deploy
        // controller applies its manifests at every start).
        if !request.disable.iter().any(|c| c == "traefik") {
            backend
                .apply_manifest(&name, TRAEFIK)
                .map_err(|err| fatal(&capstan_core::errors::error_chain(&err)))?;
        }
        let node = kubelet(vm, &request.node, request.version, Role::ControlPlane)
            .registering(request.registration.clone());
        self.join_k3s(backend, vm, &name, &node, later)
            .map_err(|message| fatal(&message))?;
        let guest = self.guest(vm.vmid);
        // Real K3s points it at https://127.0.0.1:6443; the lab's servers listen on their own
        // loopback ports, so it carries that address, as the lab's admin.conf does for kubeadm.
        guest.put_file(paths::K3S_KUBECONFIG.to_owned(), admin);
        guest.put_file(
            paths::K3S_UNINSTALL_SCRIPT.to_owned(),
            "#!/bin/sh\n# k3s-uninstall.sh\n".to_owned(),
        );
        Ok((name, created))
    }

    /// Starts the cluster of a first server, named after the cluster its VM's owner tags
    /// name, as a kubeadm cluster is after its `clusterName` (K3s knows no cluster name);
    /// a VM no cluster owns names it after its database, else its endpoint host.
    fn create_k3s_cluster(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        request: &ServerRequest,
    ) -> Result<String, Exit> {
        let endpoint = server_endpoint(request);
        let (host, port) = split_host_port(&endpoint);
        let name = vm.cluster.clone().unwrap_or_else(|| {
            request
                .datastore
                .as_ref()
                .map_or_else(|| host.clone(), |d| d.database.clone())
        });
        let access = backend
            .create_cluster(&NewCluster {
                name: name.clone(),
                endpoint_host: host,
                endpoint_port: port,
                version: request.version,
                cluster_configuration: String::new(),
                authority: None,
                network: request.network.clone(),
            })
            .map_err(|err| {
                let message = capstan_core::errors::error_chain(&err);
                fatal(&format!("starting kubernetes: {message}"))
            })?;
        self.clusters.insert(
            name.clone(),
            ClusterState {
                endpoint,
                version: request.version,
                access,
                tokens: BTreeMap::new(),
                certificate_key: None,
                etcd: BTreeMap::new(),
                k3s: Some(K3sCluster {
                    token: request.token.clone(),
                    datastore: request.datastore.clone(),
                }),
                kubeadm: Default::default(),
            },
        );
        Ok(name)
    }

    /// An agent joining the server at `request.server` with its token.
    pub(in crate::nodes) fn k3s_agent(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        request: &AgentRequest,
        later: &mut Vec<Later>,
    ) -> Exit {
        self.guest(vm.vmid).k3s_starts();
        let address = request
            .server
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_owned();
        let found = self
            .clusters
            .iter()
            .find(|(_, state)| state.k3s.is_some() && state.endpoint == address)
            .map(|(name, state)| (name.clone(), state.k3s.as_ref().map(|k| k.token.clone())));
        let Some((name, token)) = found else {
            return agent_failed(&format!(
                "failed to get CA certs: Get \"{}/cacerts\": dial tcp {address}: connect: connection refused",
                request.server
            ));
        };
        if token.as_deref() != Some(request.token.as_str()) {
            return agent_failed(&format!(
                "failed to get CA certs: {}/cacerts: 401 Unauthorized",
                request.server
            ));
        }
        let node = kubelet(vm, &request.node, request.version, Role::Worker)
            .registering(request.registration.clone());
        match self.join_k3s(backend, vm, &name, &node, later) {
            Ok(()) => {
                self.guest(vm.vmid).put_file(
                    paths::K3S_AGENT_UNINSTALL_SCRIPT.to_owned(),
                    "#!/bin/sh\n# k3s-agent-uninstall.sh\n".to_owned(),
                );
                Exit::success("[INFO]  systemd: Starting k3s-agent\n")
            }
            Err(message) => agent_failed(&message),
        }
    }

    /// Registers the node's kubelet; it turns Ready shortly (K3s brings its own CNI).
    fn join_k3s(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        cluster: &str,
        node: &NewNode,
        later: &mut Vec<Later>,
    ) -> Result<(), String> {
        backend
            .register_node(cluster, node)
            .map_err(|err| capstan_core::errors::error_chain(&err))?;
        let guest = self.guest(vm.vmid);
        guest.kubelet = Some(node.kubelet_version);
        guest.member = Some(Member {
            cluster: cluster.to_owned(),
            node: node.name.clone(),
            role: node.role,
        });
        later.push(Later::NodeReady {
            cluster: cluster.to_owned(),
            node: node.name.clone(),
            vmid: vm.vmid,
        });
        Ok(())
    }

    /// `systemctl stop|start|restart k3s`: the server's service (its kubelet with it).
    pub(super) fn systemctl(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        args: &[String],
        later: &mut Vec<Later>,
    ) -> Exit {
        let words: Vec<&str> = args.iter().map(String::as_str).collect();
        let (verb, unit) = match words.as_slice() {
            [verb, unit] => (*verb, unit.trim_end_matches(".service")),
            _ => return Exit::failure(1, "Too few arguments.\n"),
        };
        let guest = self.guest(vm.vmid);
        let member = guest
            .member
            .clone()
            .filter(|m| m.role == Role::ControlPlane);
        let Some(member) = member.filter(|_| unit == "k3s") else {
            return Exit::failure(
                5,
                format!("Failed to {verb} {unit}.service: Unit {unit}.service not loaded.\n"),
            );
        };
        match verb {
            "stop" => {
                guest.k3s_stopped = true;
                backend.set_node_ready(&member.cluster, &member.node, false);
                Exit::success("")
            }
            "start" | "restart" => {
                guest.k3s_stopped = false;
                guest.k3s_starts();
                if std::mem::take(&mut guest.k3s_rotation_pending) {
                    match backend.renew_certificates(&member.cluster) {
                        Ok(access) => {
                            self.guest(vm.vmid).put_file(
                                paths::K3S_KUBECONFIG.to_owned(),
                                access.admin_kubeconfig.clone(),
                            );
                            if let Some(state) = self.clusters.get_mut(&member.cluster) {
                                state.access = access;
                            }
                        }
                        Err(err) => {
                            let message = capstan_core::errors::error_chain(&err);
                            return fatal(&format!("starting kubernetes: {message}"));
                        }
                    }
                }
                later.push(Later::NodeReady {
                    cluster: member.cluster,
                    node: member.node,
                    vmid: vm.vmid,
                });
                Exit::success("")
            }
            other => Exit::failure(1, format!("Unknown command verb '{other}'.\n")),
        }
    }

    /// `k3s certificate rotate` on a server: new certificates at the service's next start.
    pub(super) fn k3s_command(&mut self, vm: &GuestVm, args: &[String]) -> Exit {
        let words: Vec<&str> = args.iter().map(String::as_str).collect();
        if words != ["certificate", "rotate"] {
            return Exit::failure(
                1,
                format!(
                    "Incorrect Usage: the lab runs only `k3s certificate rotate`, not `k3s {}`\n",
                    words.join(" ")
                ),
            );
        }
        let guest = self.guest(vm.vmid);
        if guest
            .member
            .as_ref()
            .is_none_or(|m| m.role != Role::ControlPlane)
        {
            return Exit::failure(
                1,
                "level=fatal msg=\"no K3s server data found: is this a server node?\"\n",
            );
        }
        guest.k3s_rotation_pending = true;
        Exit::success(
            "level=info msg=\"Server detected, rotating server certificates\"\nlevel=info msg=\"Successfully backed up certificates for all services to path /var/lib/rancher/k3s/server/tls-backup, please restart k3s server or agent to rotate certificates\"\n",
        )
    }

    /// `sh k3s-uninstall.sh` / `sh k3s-agent-uninstall.sh`: the service stops and its files go.
    pub(super) fn k3s_uninstall(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        script: &str,
    ) -> Exit {
        let guest = self.guest(vm.vmid);
        if !guest.files.contains_key(script) {
            return Exit::failure(127, format!("sh: 0: cannot open {script}: No such file\n"));
        }
        if let Some(member) = guest.member.take() {
            backend.set_node_ready(&member.cluster, &member.node, false);
            if member.role == Role::ControlPlane
                && let Err(err) = backend.api_server(&member.cluster, &member.node, false, None)
            {
                tracing::debug!(error = %capstan_core::errors::error_chain(&err), "API server already gone");
            }
        }
        guest.kubelet = None;
        for path in [
            paths::K3S_KUBECONFIG,
            paths::K3S_CONFIG,
            paths::K3S_UNINSTALL_SCRIPT,
            paths::K3S_AGENT_UNINSTALL_SCRIPT,
        ] {
            guest.files.remove(path);
        }
        Exit::success("+ systemctl stop k3s\n+ rm -rf /etc/rancher/k3s /var/lib/rancher/k3s\n")
    }
}

/// K3s's packaged ingress controller, as its server deploys it unless `disable: traefik`
/// (K3s installs it through a HelmChart; the lab applies the Deployment it makes).
const TRAEFIK: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: traefik
  namespace: kube-system
  labels: {app.kubernetes.io/name: traefik}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/name: traefik}
  template:
    metadata:
      labels: {app.kubernetes.io/name: traefik}
    spec:
      containers:
        - name: traefik
          image: rancher/mirrored-library-traefik:3.3.6
";

/// The values of a repeatable key of K3s's configuration file: a list, or one string.
fn listed(settings: Option<&serde_json::Value>, key: &str) -> Vec<String> {
    match settings.and_then(|s| s.get(key)) {
        Some(serde_json::Value::String(text)) => vec![text.clone()],
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(|item| item.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// The `AuthenticationConfiguration` a K3s server's API server reads: the file its
/// `authentication-config` argument names, from the node; `None` without the argument.
fn authentication_file(
    args: &[String],
    files: &BTreeMap<String, String>,
) -> Result<Option<String>, Exit> {
    let Some(path) = args.iter().find_map(|arg| {
        arg.trim_start_matches('-')
            .strip_prefix("authentication-config=")
    }) else {
        return Ok(None);
    };
    files.get(path).cloned().map(Some).ok_or_else(|| {
        fatal(&format!(
            "kube-apiserver exited: failed to load AuthenticationConfiguration: open {path}: no such file or directory"
        ))
    })
}

/// The components `disable` names in K3s's configuration file: a list, or one
/// comma-separated string.
fn disabled(settings: Option<&serde_json::Value>) -> Vec<String> {
    match settings.and_then(|s| s.get("disable")) {
        Some(serde_json::Value::String(text)) => {
            text.split(',').map(|c| c.trim().to_owned()).collect()
        }
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(serde_json::Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The Node a K3s server's or agent's kubelet registers (not Ready until it reports).
fn kubelet(vm: &GuestVm, name: &str, version: KubeVersion, role: Role) -> NewNode {
    NewNode {
        name: name.to_owned(),
        kubelet_version: version,
        role,
        address: vm.address.map(IpAddr::V4),
        ready: false,
        registration: Registration::default(),
    }
}

fn agent_failed(message: &str) -> Exit {
    Exit::failure(
        1,
        format!(
            "[INFO]  systemd: Starting k3s-agent\nlevel=error msg=\"{message}\"\nJob for k3s-agent.service failed because the control process exited with error code.\n"
        ),
    )
}

/// `HOST:PORT` clients reach the servers at: the first `--tls-san` (capstan puts the endpoint
/// host first), on the listen port.
fn server_endpoint(request: &ServerRequest) -> String {
    let host = request
        .tls_san
        .first()
        .cloned()
        .unwrap_or_else(|| request.node.clone());
    format!("{host}:{}", request.port)
}

fn split_host_port(endpoint: &str) -> (String, u16) {
    match endpoint.rsplit_once(':') {
        Some((host, port)) => (host.to_owned(), port.parse().unwrap_or(6443)),
        None => (endpoint.to_owned(), 6443),
    }
}
