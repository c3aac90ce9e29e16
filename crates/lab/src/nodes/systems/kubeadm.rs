//! `kubeadm` in the simulated VMs: init (with its phases), join, token and certificate-key
//! handling, reset, upgrade and certificate renewal, each refusing what kubeadm refuses with its
//! words.

use std::collections::BTreeMap;
use std::net::IpAddr;

use capstan_core::model::{Role, VmId};
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use crate::nodes::cli::{
    CertsCommand, InitPhase, KubeadmCommand, PhaseName, TokenCommand, UpgradeCommand,
};
use crate::nodes::{ClusterBackend, NewCluster, NewNode, Registration, cli, paths, random_hex};
use crate::proxmox::ExecOutcome as Exit;
use crate::proxmox::GuestIdentity as GuestVm;
use crate::values::KubeVersion;

use super::kubeadm_config::{init_version, preflight_error};
use super::{
    CERTIFICATE_KEY_LIFETIME, ClusterState, GuestSystems, KUBELET_MAX_MINOR_SKEW, Later, Member,
    kubeadm_config,
};

impl GuestSystems {
    pub(super) fn kubeadm(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        args: &[String],
        now: Timestamp,
        later: &mut Vec<Later>,
    ) -> Exit {
        let parsed: cli::Kubeadm = match cli::parse("kubeadm", args) {
            Ok(parsed) => parsed,
            Err((code, message)) => return Exit::failure(code, message),
        };
        match parsed.command {
            KubeadmCommand::Init(init) => match init.phase {
                Some(InitPhase::Phase {
                    phase: PhaseName::UploadCerts { upload_certs },
                }) => self.upload_certs(vm, upload_certs, now),
                Some(InitPhase::Phase {
                    phase: PhaseName::UploadConfig { what, config },
                }) => self.upload_config(vm, &what, config.as_deref()),
                Some(InitPhase::Phase {
                    phase: PhaseName::Addon { which, config },
                }) => self.addon(backend, vm, &which, config.as_deref()),
                None => self.init(
                    backend,
                    vm,
                    init.config.as_deref(),
                    init.upload_certs,
                    now,
                    later,
                ),
            },
            KubeadmCommand::Join(join) => self.join(backend, vm, &join, now, later),
            KubeadmCommand::Reset(reset) => self.reset(backend, vm, reset.force),
            KubeadmCommand::Token {
                command:
                    TokenCommand::Create {
                        ttl,
                        print_join_command,
                    },
            } => self.token_create(vm, &ttl, print_join_command, now),
            KubeadmCommand::Upgrade {
                command: UpgradeCommand::Apply(apply),
            } => self.upgrade(backend, vm, &apply),
            KubeadmCommand::Certs {
                command: CertsCommand::Renew { which },
            } if which == "all" => self.renew(backend, vm),
            KubeadmCommand::Certs {
                command: CertsCommand::Renew { which },
            } => Exit::failure(1, format!("unknown certificate {which}\n")),
            KubeadmCommand::Version { .. } => match self.guest(vm.vmid).kubeadm {
                Some(version) => Exit::success(format!(
                    "kubeadm version: &version.Info{{GitVersion:\"v{version}\"}}\n"
                )),
                None => Exit::failure(127, "kubeadm: command not found\n"),
            },
        }
    }

    pub(super) fn read_config(
        &mut self,
        vmid: VmId,
        path: Option<&str>,
    ) -> Result<Vec<Value>, Exit> {
        let Some(path) = path else {
            return Err(Exit::failure(
                1,
                "the lab's kubeadm needs --config: capstan always passes one\n",
            ));
        };
        let Some(text) = self.guest(vmid).files.get(path) else {
            return Err(Exit::failure(
                1,
                format!(
                    "unable to read config from \"{path}\" : open {path}: no such file or directory\n"
                ),
            ));
        };
        let documents: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|err| {
            Exit::failure(
                1,
                // kubeadm names the fault, it does not quote the file (it holds a token).
                format!(
                    "error unmarshaling configuration from \"{path}\": {}\n",
                    err.without_snippet()
                ),
            )
        })?;
        for document in &documents {
            let api_version = document["apiVersion"].as_str().unwrap_or_default();
            let kind = document["kind"].as_str().unwrap_or_default();
            let kubeadm_kind = matches!(
                kind,
                "InitConfiguration"
                    | "ClusterConfiguration"
                    | "JoinConfiguration"
                    | "UpgradeConfiguration"
            );
            if kubeadm_kind
                && api_version != "kubeadm.k8s.io/v1beta4"
                && api_version != "kubeadm.k8s.io/v1beta3"
            {
                return Err(Exit::failure(
                    1,
                    format!(
                        "no kind \"{kind}\" is registered for version \"{api_version}\" in scheme\n"
                    ),
                ));
            }
        }
        Ok(documents)
    }

    fn init(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        config: Option<&str>,
        upload_certs: bool,
        now: Timestamp,
        later: &mut Vec<Later>,
    ) -> Exit {
        let documents = match self.read_config(vm.vmid, config) {
            Ok(documents) => documents,
            Err(exit) => return exit,
        };
        let find = |kind: &str| {
            documents
                .iter()
                .find(|d| d["kind"] == kind)
                .cloned()
                .unwrap_or(Value::Null)
        };
        let (init, cluster) = (find("InitConfiguration"), find("ClusterConfiguration"));
        let guest = self.guest(vm.vmid);
        if guest
            .files
            .contains_key("/etc/kubernetes/manifests/kube-apiserver.yaml")
        {
            return preflight_error(
                "FileAvailable--etc-kubernetes-manifests-kube-apiserver.yaml",
                "/etc/kubernetes/manifests/kube-apiserver.yaml already exists",
            );
        }
        let (Some(kubelet), Some(kubeadm)) = (guest.kubelet, guest.kubeadm) else {
            return preflight_error("FileExisting-kubelet", "kubelet not found in system path");
        };
        let version = match init_version(&cluster, kubelet, kubeadm) {
            Ok(version) => version,
            Err(exit) => return exit,
        };
        let Some(endpoint) = cluster["controlPlaneEndpoint"].as_str().map(str::to_owned) else {
            return Exit::failure(
                1,
                "the lab needs ClusterConfiguration.controlPlaneEndpoint: capstan always sets one\n",
            );
        };
        // kube-vip must hold the endpoint address before the API server can be reached through
        // it; during init (1.29 and later) it can only do so with super-admin.conf.
        let vip_ready = guest
            .files
            .get(paths::KUBE_VIP_MANIFEST)
            .is_some_and(|m| m.contains("super-admin.conf"));
        if !vip_ready {
            return Exit::failure(
                1,
                format!(
                    "[api-check] The API server is not healthy after 4m0s\nerror execution phase wait-control-plane: could not reach the control-plane endpoint {endpoint}: kube-vip is not holding its address (is /etc/kubernetes/manifests/kube-vip.yaml in place, with super-admin.conf?)\n"
                ),
            );
        }
        if let Some(name) = self
            .clusters
            .iter()
            .find(|(_, c)| c.endpoint == endpoint)
            .map(|(name, _)| name.clone())
        {
            return Exit::failure(
                1,
                format!(
                    "error execution phase wait-control-plane: the endpoint {endpoint} already answers for cluster {name}\n"
                ),
            );
        }
        let (host, port) = split_endpoint(&endpoint);
        let name = cluster["clusterName"]
            .as_str()
            .unwrap_or("kubernetes")
            .to_owned();
        let node = init["nodeRegistration"]["name"]
            .as_str()
            .unwrap_or(&vm.name)
            .to_owned();
        let network = match kubeadm_config::kubeadm_network(&init, &cluster) {
            Ok(network) => network,
            Err(message) => {
                return Exit::failure(
                    1,
                    format!("error execution phase wait-control-plane: {message}\n"),
                );
            }
        };
        let mut registration =
            match Registration::from_kubeadm(&init["nodeRegistration"], Role::ControlPlane) {
                Ok(registration) => registration,
                Err(message) => return Exit::failure(1, format!("{message}\n")),
            };
        let stored = kubeadm_config::Stored {
            kubelet: find("KubeletConfiguration"),
            cluster: cluster.clone(),
        };
        let guest = self.guest(vm.vmid);
        if let Err(exit) = kubeadm_config::take(guest, &stored.kubelet, &init, &mut registration) {
            return exit;
        }
        let cluster_configuration = serde_json::to_string(&cluster).unwrap_or_default();
        let access = match backend.create_cluster(&NewCluster {
            name: name.clone(),
            endpoint_host: host,
            endpoint_port: port,
            version,
            cluster_configuration,
            authority: None,
            network,
        }) {
            Ok(access) => access,
            Err(err) => {
                let message = capstan_core::errors::error_chain(&err);
                return Exit::failure(
                    1,
                    format!("error execution phase control-plane: {message}\n"),
                );
            }
        };
        let mut state = ClusterState {
            endpoint: endpoint.clone(),
            version,
            access: access.clone(),
            tokens: BTreeMap::new(),
            certificate_key: None,
            etcd: BTreeMap::new(),
            k3s: None,
            kubeadm: stored,
        };
        state.etcd.insert(member_id(), node.clone());
        let token = new_token();
        state
            .tokens
            .insert(token.clone(), now + SignedDuration::from_hours(24));
        let key = upload_certs.then(|| {
            let key = random_hex(32);
            state.certificate_key = Some((key.clone(), now + CERTIFICATE_KEY_LIFETIME));
            key
        });
        self.clusters.insert(name.clone(), state);
        let member = (node.as_str(), Role::ControlPlane, registration);
        if let Err(message) = self.register(backend, vm, &name, member, later) {
            return Exit::failure(
                1,
                format!("error execution phase kubelet-start: {message}\n"),
            );
        }
        let mut out = format!(
            "[init] Using Kubernetes version: v{version}\n[certs] Using certificateDir folder \"/etc/kubernetes/pki\"\n[kubeconfig] Writing \"admin.conf\" kubeconfig file\n\nYour Kubernetes control-plane has initialized successfully!\n\nYou can now join any number of control-plane nodes by running the following command on each as root:\n\n  kubeadm join {endpoint} --token {token} \\\n\t--discovery-token-ca-cert-hash {} \\\n\t--control-plane",
            access.ca_cert_hash
        );
        if let Some(key) = key {
            out.push_str(&format!(" --certificate-key {key}"));
        }
        out.push('\n');
        Exit::success(out)
    }

    /// Writes a member's files and registers its Node (Ready once the CNI runs).
    fn register(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        cluster: &str,
        (node, role, registration): (&str, Role, Registration),
        later: &mut Vec<Later>,
    ) -> Result<(), String> {
        let state = self.clusters.get(cluster).ok_or("no such cluster")?;
        let admin = state.access.admin_kubeconfig.clone();
        let apiserver = kubeadm_config::apiserver_manifest(&state.kubeadm.cluster);
        let cluster_configuration = state.kubeadm.cluster.clone();
        let guest = self.guests.entry(vm.vmid).or_default();
        let kubelet = guest.kubelet.ok_or("kubelet not installed")?;
        if role == Role::ControlPlane {
            let files = &guest.files;
            kubeadm_config::api_server(backend, (cluster, node), &cluster_configuration, files)?;
        }
        backend
            .register_node(
                cluster,
                &NewNode {
                    name: node.to_owned(),
                    kubelet_version: kubelet,
                    role,
                    address: vm.address.map(IpAddr::V4),
                    ready: false,
                    registration,
                },
            )
            .map_err(|err| capstan_core::errors::error_chain(&err))?;
        guest.put_file(
            paths::KUBELET_CONF.to_owned(),
            format!("# kubelet kubeconfig for {node}\n"),
        );
        if role == Role::ControlPlane {
            guest.put_file(paths::ADMIN_CONF.to_owned(), admin.clone());
            guest.put_file("/etc/kubernetes/super-admin.conf".to_owned(), admin);
            for component in [
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
                "etcd",
            ] {
                let manifest = match component {
                    "kube-apiserver" => apiserver.clone(),
                    _ => format!("# static pod {component}\n"),
                };
                guest.put_file(
                    format!("/etc/kubernetes/manifests/{component}.yaml"),
                    manifest,
                );
            }
        }
        guest.member = Some(Member {
            cluster: cluster.to_owned(),
            node: node.to_owned(),
            role,
        });
        later.push(Later::NodeReady {
            cluster: cluster.to_owned(),
            node: node.to_owned(),
            vmid: vm.vmid,
        });
        Ok(())
    }

    /// The cluster this VM is a control plane of, or kubectl's/kubeadm's error without one.
    pub(super) fn control_plane_of(&mut self, vmid: VmId) -> Result<String, Exit> {
        match &self.guest(vmid).member {
            Some(Member {
                cluster,
                role: Role::ControlPlane,
                ..
            }) => Ok(cluster.clone()),
            _ => Err(Exit::failure(
                1,
                format!(
                    "couldn't create a Kubernetes client from file \"{}\": failed to load admin kubeconfig: open {}: no such file or directory\n",
                    paths::ADMIN_CONF,
                    paths::ADMIN_CONF
                ),
            )),
        }
    }

    fn upload_certs(&mut self, vm: &GuestVm, upload: bool, now: Timestamp) -> Exit {
        let cluster = match self.control_plane_of(vm.vmid) {
            Ok(cluster) => cluster,
            Err(exit) => return exit,
        };
        if !upload {
            return Exit::success("[upload-certs] Skipping phase. Please see --upload-certs\n");
        }
        let key = random_hex(32);
        if let Some(state) = self.clusters.get_mut(&cluster) {
            state.certificate_key = Some((key.clone(), now + CERTIFICATE_KEY_LIFETIME));
        }
        Exit::success(format!(
            "[upload-certs] Storing the certificates in Secret \"kubeadm-certs\" in the \"kube-system\" Namespace\n[upload-certs] Using certificate key:\n{key}\n"
        ))
    }

    fn token_create(
        &mut self,
        vm: &GuestVm,
        ttl: &str,
        print_join_command: bool,
        now: Timestamp,
    ) -> Exit {
        let cluster = match self.control_plane_of(vm.vmid) {
            Ok(cluster) => cluster,
            Err(exit) => return exit,
        };
        let Ok(ttl) = humantime::parse_duration(ttl) else {
            return Exit::failure(
                1,
                format!(
                    "invalid argument \"{ttl}\" for \"--ttl\" flag: time: invalid duration \"{ttl}\"\n"
                ),
            );
        };
        let Some(state) = self.clusters.get_mut(&cluster) else {
            return Exit::failure(1, "the cluster is gone\n");
        };
        let token = new_token();
        let expiry = now + SignedDuration::try_from(ttl).unwrap_or(SignedDuration::from_hours(24));
        state.tokens.insert(token.clone(), expiry);
        if print_join_command {
            Exit::success(format!(
                "kubeadm join {} --token {token} --discovery-token-ca-cert-hash {} \n",
                state.endpoint, state.access.ca_cert_hash
            ))
        } else {
            Exit::success(format!("{token}\n"))
        }
    }

    fn join(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        args: &cli::JoinArgs,
        now: Timestamp,
        later: &mut Vec<Later>,
    ) -> Exit {
        let request = match self.join_request(vm, args) {
            Ok(request) => request,
            Err(exit) => return exit,
        };
        let guest = self.guest(vm.vmid);
        if guest.files.contains_key(paths::KUBELET_CONF) {
            return preflight_error(
                "FileAvailable--etc-kubernetes-kubelet.conf",
                "/etc/kubernetes/kubelet.conf already exists",
            );
        }
        let Some(kubelet) = guest.kubelet else {
            return preflight_error("FileExisting-kubelet", "kubelet not found in system path");
        };
        let found = self
            .clusters
            .iter_mut()
            .find(|(_, c)| c.endpoint == request.endpoint);
        let Some((name, state)) = found else {
            let host = split_endpoint(&request.endpoint).0;
            return Exit::failure(
                1,
                format!(
                    "error execution phase preflight: couldn't validate the identity of the API Server: failed to request the cluster-info ConfigMap: Get \"https://{}/api/v1/namespaces/kube-public/configmaps/cluster-info?timeout=10s\": dial tcp: lookup {host}: no such host\n",
                    request.endpoint
                ),
            );
        };
        let name = name.clone();
        let token_valid = state
            .tokens
            .get(&request.token)
            .is_some_and(|expiry| *expiry > now);
        if !token_valid {
            let id = request.token.split('.').next().unwrap_or_default();
            return Exit::failure(
                1,
                format!(
                    "error execution phase preflight: couldn't validate the identity of the API Server: could not find a JWS signature in the cluster-info ConfigMap for token ID \"{id}\"\n"
                ),
            );
        }
        if !request.ca_hashes.contains(&state.access.ca_cert_hash) {
            return Exit::failure(
                1,
                format!(
                    "error execution phase preflight: couldn't validate the identity of the API Server: cluster CA found in cluster-info ConfigMap is invalid: none of the public keys \"{}\" are pinned\n",
                    state.access.ca_cert_hash
                ),
            );
        }
        if kubelet.minor_version() > state.version.minor_version()
            || kubelet.minor + KUBELET_MAX_MINOR_SKEW < state.version.minor
        {
            return Exit::failure(
                1,
                format!(
                    "error execution phase kubelet-start: cannot get Node: the kubelet version is not supported by the control plane. Kubelet version: \"{kubelet}\" Control plane version: \"{}\"\n",
                    state.version
                ),
            );
        }
        let role = if request.control_plane {
            Role::ControlPlane
        } else {
            Role::Worker
        };
        if role == Role::ControlPlane {
            if !key_valid(state, &request, now) {
                return Exit::failure(1, CERTS_MISSING);
            }
            state.etcd.insert(member_id(), request.node.clone());
        }
        let base = state.kubeadm.kubelet.clone();
        let mut registration = request.registration;
        let guest = self.guest(vm.vmid);
        if let Err(exit) = kubeadm_config::take(guest, &base, &request.document, &mut registration)
        {
            return exit;
        }
        let member = (request.node.as_str(), role, registration);
        if let Err(message) = self.register(backend, vm, &name, member, later) {
            return Exit::failure(
                1,
                format!("error execution phase kubelet-start: {message}\n"),
            );
        }
        Exit::success(
            "This node has joined the cluster:\n* Certificate signing request was sent to apiserver and a response was received.\n* The Kubelet was informed of the new secure connection details.\n\nRun 'kubectl get nodes' on the control-plane to see this node join the cluster.\n",
        )
    }

    fn join_request(&mut self, vm: &GuestVm, args: &cli::JoinArgs) -> Result<JoinRequest, Exit> {
        let documents = self.read_config(vm.vmid, args.config.as_deref())?;
        let join = documents
            .iter()
            .find(|d| d["kind"] == "JoinConfiguration")
            .cloned()
            .unwrap_or(Value::Null);
        let token = &join["discovery"]["bootstrapToken"];
        let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
        let role = if join["controlPlane"].is_null() {
            Role::Worker
        } else {
            Role::ControlPlane
        };
        let registration = Registration::from_kubeadm(&join["nodeRegistration"], role)
            .map_err(|message| Exit::failure(1, format!("{message}\n")))?;
        let join_document = join.clone();
        Ok(JoinRequest {
            endpoint: text(&token["apiServerEndpoint"]),
            token: text(&token["token"]),
            ca_hashes: token["caCertHashes"]
                .as_array()
                .map(|a| a.iter().map(text).collect())
                .unwrap_or_default(),
            node: join["nodeRegistration"]["name"]
                .as_str()
                .unwrap_or(&vm.name)
                .to_owned(),
            control_plane: !join["controlPlane"].is_null(),
            certificate_key: join["controlPlane"]["certificateKey"]
                .as_str()
                .map(str::to_owned),
            registration,
            document: join_document,
        })
    }

    fn reset(&mut self, backend: &impl ClusterBackend, vm: &GuestVm, force: bool) -> Exit {
        if !force {
            return Exit::failure(
                1,
                "[reset] Are you sure you want to proceed? [y/N]: error: aborted reset operation\n",
            );
        }
        let guest = self.guest(vm.vmid);
        let member = guest.member.take();
        guest
            .files
            .retain(|path, _| !path.starts_with("/etc/kubernetes/"));
        let mut out = String::from("[preflight] Running pre-flight checks\n");
        if let Some(member) = member {
            backend.set_node_ready(&member.cluster, &member.node, false);
            if member.role == Role::ControlPlane
                && let Some(state) = self.clusters.get_mut(&member.cluster)
            {
                state.etcd.retain(|_, name| *name != member.node);
                out.push_str("[reset] Removing member from the etcd cluster\n");
                kubeadm_config::api_server_stopped(backend, &member.cluster, &member.node);
            }
        }
        out.push_str("[reset] Stopping the kubelet service\n[reset] Deleting contents of directories: [/etc/kubernetes/manifests /var/lib/kubelet /etc/kubernetes/pki]\n");
        Exit::success(out)
    }

    fn upgrade(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        apply: &cli::UpgradeApply,
    ) -> Exit {
        let cluster = match self.control_plane_of(vm.vmid) {
            Ok(cluster) => cluster,
            Err(exit) => return exit,
        };
        let config = match &apply.config {
            Some(path) => match self.read_config(vm.vmid, Some(path)) {
                Ok(documents) => documents
                    .into_iter()
                    .find(|d| d["kind"] == "UpgradeConfiguration")
                    .unwrap_or(Value::Null),
                Err(exit) => return exit,
            },
            None => Value::Null,
        };
        let named = config["apply"]["kubernetesVersion"]
            .as_str()
            .map(str::to_owned);
        let Some(target) = apply.version.clone().or(named) else {
            return Exit::failure(
                1,
                "[upgrade/version] FATAL: missing version: give it as an argument or in UpgradeConfiguration.apply.kubernetesVersion\n",
            );
        };
        let target = target.as_str();
        let renew = apply.certificate_renewal;
        if !apply.yes {
            return Exit::failure(
                1,
                "[upgrade] Are you sure you want to proceed? [y/N]: error: aborted upgrade\n",
            );
        }
        let Ok(target) = target.parse::<KubeVersion>() else {
            return Exit::failure(
                1,
                format!("[upgrade/version] FATAL: unable to parse version \"{target}\"\n"),
            );
        };
        let kubeadm = self.guest(vm.vmid).kubeadm;
        let Some(state) = self.clusters.get_mut(&cluster) else {
            return Exit::failure(1, "the cluster is gone\n");
        };
        let current = state.version;
        if kubeadm.is_none_or(|k| k < target) {
            let kubeadm = kubeadm.map(|k| format!("v{k}")).unwrap_or_default();
            return Exit::failure(
                1,
                format!(
                    "[upgrade/version] FATAL: the --version argument is invalid due to these fatal errors:\n\t- Specified version to upgrade to \"v{target}\" is higher than the kubeadm version \"{kubeadm}\". Upgrade kubeadm first using the tool you used to install kubeadm\n"
                ),
            );
        }
        if target.skips_a_minor_from(&current) {
            return Exit::failure(
                1,
                format!(
                    "[upgrade/version] FATAL: the --version argument is invalid due to these fatal errors:\n\t- Specified version to upgrade to \"v{target}\" is too high; kubeadm can upgrade only 1 minor version at a time\n"
                ),
            );
        }
        if target < current {
            return Exit::failure(
                1,
                format!(
                    "[upgrade/version] FATAL: the --version argument is invalid due to these fatal errors:\n\t- Specified version to upgrade to \"v{target}\" is lower than the cluster version \"v{current}\". Downgrades are not supported yet\n"
                ),
            );
        }
        state.version = target;
        backend.set_version(&cluster, target);
        // The `addon/kube-proxy` phase deploys kube-proxy again unless told to skip it.
        if !kubeadm_config::skips(&config["apply"]["skipPhases"], "addon/kube-proxy")
            && let Err(err) = backend.deploy_kube_proxy(&cluster)
        {
            let message = capstan_core::errors::error_chain(&err);
            return Exit::failure(
                1,
                format!("error execution phase addon/kube-proxy: {message}\n"),
            );
        }
        if renew && let Err(exit) = self.renew_for(backend, vm.vmid, &cluster) {
            return exit;
        }
        Exit::success(format!(
            "[upgrade/successful] SUCCESS! A control plane node of your cluster was upgraded to \"v{target}\".\n"
        ))
    }

    pub(super) fn renew(&mut self, backend: &impl ClusterBackend, vm: &GuestVm) -> Exit {
        match self.control_plane_of(vm.vmid) {
            Ok(cluster) => match self.renew_for(backend, vm.vmid, &cluster) {
                Ok(()) => {
                    Exit::success("[renew] Certificates renewed; control-plane pods restarted\n")
                }
                Err(exit) => exit,
            },
            Err(exit) => exit,
        }
    }

    /// Renews the cluster's certificates and rewrites this control plane's admin.conf.
    fn renew_for(
        &mut self,
        backend: &impl ClusterBackend,
        vmid: VmId,
        cluster: &str,
    ) -> Result<(), Exit> {
        let access = backend.renew_certificates(cluster).map_err(|err| {
            let message = capstan_core::errors::error_chain(&err);
            Exit::failure(1, format!("{message}\n"))
        })?;
        self.guest(vmid).put_file(
            paths::ADMIN_CONF.to_owned(),
            access.admin_kubeconfig.clone(),
        );
        if let Some(state) = self.clusters.get_mut(cluster) {
            state.access = access;
        }
        Ok(())
    }
}

struct JoinRequest {
    endpoint: String,
    token: String,
    ca_hashes: Vec<String>,
    node: String,
    control_plane: bool,
    certificate_key: Option<String>,
    registration: Registration,
    /// The `JoinConfiguration` (its `patches.directory`).
    document: Value,
}

/// What `kubeadm join --control-plane` says when the certificate key is not (or no longer)
/// the one uploaded.
const CERTS_MISSING: &str = "error execution phase control-plane-prepare/download-certs: error downloading certs: error downloading the secret: Secret \"kubeadm-certs\" was not found in the \"kube-system\" Namespace. This Secret might have expired. Please, run `kubeadm init phase upload-certs --upload-certs` on a control plane to generate a new one\n";

/// Whether the joining control plane's certificate key is the uploaded one, unexpired.
fn key_valid(state: &ClusterState, request: &JoinRequest, now: Timestamp) -> bool {
    state
        .certificate_key
        .as_ref()
        .is_some_and(|(key, expiry)| Some(key) == request.certificate_key.as_ref() && *expiry > now)
}

fn split_endpoint(endpoint: &str) -> (String, u16) {
    match endpoint.rsplit_once(':') {
        Some((host, port)) => (host.to_owned(), port.parse().unwrap_or(6443)),
        None => (endpoint.to_owned(), 6443),
    }
}

/// A bootstrap token, `[a-z0-9]{6}.[a-z0-9]{16}` as kubeadm makes them.
fn new_token() -> String {
    let hex = random_hex(11);
    format!("{}.{}", &hex[..6], &hex[6..22])
}

fn member_id() -> u64 {
    u64::from_str_radix(&random_hex(8), 16).unwrap_or(1)
}
