//! The state of every simulated VM's operating system and of each cluster's kubeadm-side data
//! (bootstrap tokens, the uploaded certificate key, etcd members), and the commands that change
//! them. Each handler checks what the real tool checks, in the same order, and answers with the
//! real tool's words.
//!
//! This file holds the state, the command dispatcher, the shell built-ins and the prepare
//! script, and power events; `kubeadm` and `kubectl` (with etcdctl through `kubectl exec`) are
//! the two tools' handlers.

mod disks;
pub(super) mod k3s;
mod kubeadm;
mod kubeadm_config;
mod kubectl;
pub(crate) mod talos;
pub(crate) mod talos_network;
pub(crate) mod talos_node;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::paths;
use super::{ClusterAccess, ClusterBackend, NodeTimings};
use crate::proxmox::{ExecOutcome as Exit, GuestIdentity as GuestVm, PowerEvent};
use crate::values::KubeVersion;
use capstan_core::model::{Role, VmId};

/// How long `kubeadm init phase upload-certs` keeps the certificates (kubeadm's constant).
const CERTIFICATE_KEY_LIFETIME: SignedDuration = SignedDuration::from_hours(2);
/// Oldest kubelet minor a control plane accepts (Kubernetes' version skew policy).
const KUBELET_MAX_MINOR_SKEW: u32 = 3;

/// Work that happens a little after a command returns (a kubelet becoming Ready).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Later {
    /// The node's kubelet reports Ready, if it still runs and the cluster has its CNI.
    NodeReady {
        cluster: String,
        node: String,
        vmid: VmId,
    },
    /// A Talos machine's kubelet reports Ready, if the machine still runs as that Node.
    TalosNodeReady {
        cluster: String,
        node: String,
        vmid: VmId,
    },
}

#[derive(Debug, Default)]
pub(super) struct GuestSystems {
    guests: BTreeMap<VmId, Guest>,
    clusters: BTreeMap<String, ClusterState>,
    talos: BTreeMap<VmId, talos_node::TalosGuest>,
    /// Talos clusters by `cluster.id`.
    talos_clusters: BTreeMap<String, talos_node::TalosCluster>,
    /// What a Talos API calls after it changed its cluster's etcd (set by the node software).
    pub(super) talos_hook: Option<talos_node::TalosHook>,
    /// Every URL a VM was asked to fetch and could not (the lab is air-gapped), in order.
    refused_fetches: Vec<String>,
}

#[derive(Debug)]
pub(super) struct Guest {
    pub(super) files: BTreeMap<String, String>,
    /// Permission bits of the files written through the guest agent or `install` (others are
    /// the lab's own and carry no mode). Read only while the file exists.
    pub(super) modes: BTreeMap<String, u32>,
    /// The folders that exist: the image's ([`IMAGE_FOLDERS`]), those `install -D` created and
    /// the parents of every file the node's own software wrote. The guest agent's file-write
    /// creates no folder.
    folders: BTreeSet<String>,
    kubelet: Option<KubeVersion>,
    kubeadm: Option<KubeVersion>,
    member: Option<Member>,
    running: bool,
    /// `systemctl stop k3s` stopped the K3s service (the VM still runs).
    k3s_stopped: bool,
    /// `k3s certificate rotate` ran: the next service start issues new certificates.
    k3s_rotation_pending: bool,
    /// The data disks mounted by capstan's script: mount point → (device, filesystem).
    pub(super) mounts: BTreeMap<String, (String, String)>,
    /// `registries.yaml` and the CA files it names as K3s read them when it last started
    /// (K3s renders containerd's registry configuration from them at start only).
    k3s_registries: BTreeMap<String, String>,
}

impl Default for Guest {
    fn default() -> Self {
        Guest {
            files: BTreeMap::new(),
            modes: BTreeMap::new(),
            folders: IMAGE_FOLDERS.iter().map(|f| (*f).to_owned()).collect(),
            kubelet: None,
            kubeadm: None,
            member: None,
            running: true,
            k3s_stopped: false,
            k3s_rotation_pending: false,
            mounts: BTreeMap::new(),
            k3s_registries: BTreeMap::new(),
        }
    }
}

/// The folders of a fresh VM from the lab's Debian template (no Kubernetes, no K3s folders:
/// their packages and install scripts make those).
const IMAGE_FOLDERS: &[&str] = &[
    "/",
    "/etc",
    "/root",
    "/run",
    "/tmp",
    "/usr",
    "/usr/local",
    "/usr/local/bin",
    "/var",
    "/var/lib",
];

/// The folder `path` is in (`/` for a file at the root); `None` for a relative path.
fn parent_of(path: &str) -> Option<&str> {
    let (parent, _) = path.rsplit_once('/')?;
    Some(if parent.is_empty() { "/" } else { parent })
}

impl Guest {
    /// The node's own software (kubeadm, K3s, a package) writes `path`, creating its folders
    /// as those tools do.
    pub(super) fn put_file(&mut self, path: String, content: String) {
        self.make_folders(&path);
        self.files.insert(path, content);
    }

    /// The guest agent's `guest-file-open` (mode `wb`) and `guest-file-write`: a new file is
    /// created mode 0666 whatever the umask (qga sets it with `fchmod`), a file that exists keeps
    /// its mode, and a file in a folder that does not exist is not created: `fopen` fails.
    ///
    /// # Errors
    /// qga's message when the file cannot be opened.
    pub(super) fn agent_write(
        &mut self,
        path: &str,
        content: String,
    ) -> Result<(), crate::proxmox::FileOpenError> {
        let folder_exists = parent_of(path).is_some_and(|folder| self.folders.contains(folder));
        if !folder_exists || self.folders.contains(path) {
            let why = if folder_exists {
                "Is a directory"
            } else {
                "No such file or directory"
            };
            return Err(crate::proxmox::FileOpenError {
                path: path.to_owned(),
                why,
            });
        }
        if !self.files.contains_key(path) {
            self.modes
                .insert(path.to_owned(), super::GUEST_AGENT_NEW_FILE_MODE);
        }
        self.files.insert(path.to_owned(), content);
        Ok(())
    }

    /// K3s starts (installed, or its service started): it reads `registries.yaml` now.
    pub(super) fn k3s_starts(&mut self) {
        // What registries.yaml names may be anywhere: K3s reads whichever it names.
        self.k3s_registries = if self.files.contains_key(crate::runtime::K3S_REGISTRIES) {
            self.files.clone()
        } else {
            BTreeMap::new()
        };
    }

    /// Whether `path` is a folder of this VM.
    pub(super) fn has_folder(&self, path: &str) -> bool {
        self.folders.contains(path)
    }

    /// `mkdir -p` of the folder `path` is in.
    fn make_folders(&mut self, path: &str) {
        if let Some(folder) = parent_of(path) {
            self.make_folder(folder);
        }
    }

    /// `mkdir -p FOLDER`.
    fn make_folder(&mut self, folder: &str) {
        let mut folder = Some(folder);
        while let Some(current) = folder {
            if !self.folders.insert(current.to_owned()) {
                break;
            }
            folder = parent_of(current);
        }
    }
}

#[derive(Debug, Clone)]
struct Member {
    cluster: String,
    node: String,
    role: Role,
}

#[derive(Debug)]
struct ClusterState {
    endpoint: String,
    version: KubeVersion,
    access: ClusterAccess,
    tokens: BTreeMap<String, Timestamp>,
    certificate_key: Option<(String, Timestamp)>,
    etcd: BTreeMap<u64, String>,
    k3s: Option<k3s::K3sCluster>,
    /// kubeadm's cluster-wide configuration (empty for K3s).
    kubeadm: kubeadm_config::Stored,
}

/// An image pull a node's runtime was asked for, with what it read of its files.
#[derive(Debug)]
pub(super) struct ImagePull {
    hosts: crate::runtime::RegistryHosts,
    image: crate::runtime::Image,
    runtime: crate::runtime::Runtime,
}

impl ImagePull {
    /// Pulls, answering as `crictl pull` does.
    pub(super) async fn run(self) -> Exit {
        match crate::runtime::pull(&self.hosts, &self.image, self.runtime).await {
            Ok(digest) => Exit::success(format!("Image is up to date for {digest}\n")),
            Err(why) => Exit::failure(
                1,
                format!(
                    "level=fatal msg=\"pulling image: rpc error: code = Unknown desc = failed to pull and unpack image \\\"{}/{}:{}\\\": {why}\"\n",
                    self.image.registry, self.image.repository, self.image.reference
                ),
            ),
        }
    }
}

/// How long a command takes in the lab, if it is one of the slow ones.
pub(super) fn duration_of(argv: &[String], timings: &NodeTimings) -> Option<Duration> {
    let words: Vec<&str> = argv.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["bash", script, ..] if *script == paths::PREPARE_SCRIPT => Some(timings.prepare),
        ["bash", script, ..] if *script == paths::RENEW_SCRIPT => Some(timings.upgrade),
        ["kubeadm", "init", "phase", ..] => None,
        ["kubeadm", "init", ..] => Some(timings.init),
        ["kubeadm", "join", ..] => Some(timings.join),
        ["kubeadm", "upgrade", ..] => Some(timings.upgrade),
        _ => None,
    }
}

impl GuestSystems {
    pub(super) fn guest(&mut self, vmid: VmId) -> &mut Guest {
        self.guests.entry(vmid).or_default()
    }

    /// K3s's configuration file in VM `vmid`, if there is one.
    pub(super) fn k3s_config(&mut self, vmid: VmId) -> Option<k3s::ConfigFile> {
        let guest = self.guest(vmid);
        let text = guest.files.get(paths::K3S_CONFIG)?.clone();
        Some(k3s::ConfigFile {
            text,
            mode: guest.modes.get(paths::K3S_CONFIG).copied(),
        })
    }

    /// An image pull through the node's runtime, `crictl pull IMAGE` (a K3s node's
    /// `k3s crictl pull IMAGE` too), with the registry configuration the runtime reads from
    /// the VM's files; `None` for any other command, an `Err` for a node without a runtime or
    /// whose runtime's files do not read.
    pub(super) fn image_pull(
        &mut self,
        vm: &GuestVm,
        argv: &[String],
    ) -> Option<Result<ImagePull, Exit>> {
        use crate::runtime::{self, Image, Runtime};
        let words: Vec<&str> = argv.iter().map(String::as_str).collect();
        let image = match words.as_slice() {
            ["crictl", "pull", image] | ["k3s", "crictl", "pull", image] => *image,
            _ => return None,
        };
        let k3s = vm.k3s_airgap.is_some();
        let guest = self.guest(vm.vmid);
        let runs = if k3s {
            guest.member.is_some() && guest.running && !guest.k3s_stopped
        } else {
            guest.kubelet.is_some()
        };
        if !runs {
            let socket = if k3s {
                "/run/k3s/containerd/containerd.sock"
            } else {
                "/var/run/crio/crio.sock"
            };
            return Some(Err(Exit::failure(
                1,
                format!(
                    "level=fatal msg=\"validate service connection: validate CRI v1 image API for endpoint \\\"unix://{socket}\\\": rpc error: code = Unavailable desc = connection error: dial unix {socket}: connect: no such file or directory\"\n"
                ),
            )));
        }
        let Some(image) = Image::parse(image) else {
            return Some(Err(Exit::failure(
                1,
                format!("level=fatal msg=\"pulling image: invalid reference format: {image}\"\n"),
            )));
        };
        let (hosts, runtime) = if k3s {
            (runtime::k3s(&guest.k3s_registries), Runtime::Containerd)
        } else {
            (runtime::crio(&guest.files), Runtime::CriO)
        };
        Some(match hosts {
            Ok(hosts) => Ok(ImagePull {
                hosts,
                image,
                runtime,
            }),
            Err(why) => Err(Exit::failure(
                1,
                format!("level=fatal msg=\"pulling image: {why}\"\n"),
            )),
        })
    }

    /// Every URL a VM was asked to fetch and refused, in order.
    pub(super) fn refused_fetches(&self) -> Vec<String> {
        self.refused_fetches.clone()
    }

    pub(super) fn cluster_endpoints(&self) -> BTreeMap<String, String> {
        self.clusters
            .iter()
            .map(|(name, c)| (name.clone(), c.endpoint.clone()))
            .collect()
    }

    pub(super) fn exec(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        argv: &[String],
        now: Timestamp,
    ) -> (Exit, Vec<Later>) {
        let Some((program, args)) = argv.split_first() else {
            return (Exit::failure(1, "no command given\n"), Vec::new());
        };
        let mut later = Vec::new();
        let exit = match program.as_str() {
            "true" => Exit::success(""),
            "false" => Exit::failure(1, ""),
            "echo" => Exit::success(format!("{}\n", args.join(" "))),
            "hostname" => Exit::success(format!("{}\n", vm.name)),
            "cat" => self.cat(vm.vmid, args),
            "test" => self.test(vm, args),
            "install" => self.install(vm.vmid, args),
            "rm" => self.remove(vm.vmid, args),
            "bash" => self.bash(backend, vm, args, now, &mut later),
            "lsblk" => disks::lsblk(&self.guest(vm.vmid).mounts, vm, args),
            "kubeadm" | "kubectl" if self.guest(vm.vmid).kubeadm.is_none() => {
                Exit::failure(127, format!("bash: line 1: {program}: command not found\n"))
            }
            "kubeadm" => self.kubeadm(backend, vm, args, now, &mut later),
            "kubectl" => self.kubectl(backend, vm, args),
            "systemctl" => self.systemctl(backend, vm, args, &mut later),
            "k3s" if vm.k3s_airgap.is_some() => self.k3s_command(vm, args),
            "sh" => match args {
                [script]
                    if script == paths::K3S_UNINSTALL_SCRIPT
                        || script == paths::K3S_AGENT_UNINSTALL_SCRIPT =>
                {
                    self.k3s_uninstall(backend, vm, script)
                }
                _ => Exit::failure(
                    2,
                    "sh: the lab runs only K3s's uninstall scripts this way\n",
                ),
            },
            other => Exit::failure(127, format!("bash: line 1: {other}: command not found\n")),
        };
        (exit, later)
    }

    fn cat(&mut self, vmid: VmId, args: &[String]) -> Exit {
        let guest = self.guest(vmid);
        let mut out = String::new();
        for path in args {
            match guest.files.get(path) {
                Some(content) => out.push_str(content),
                None => {
                    return Exit::failure(1, format!("cat: {path}: No such file or directory\n"));
                }
            }
        }
        Exit::success(out)
    }

    /// `test -f|-e PATH`: a file written, or what the VM's template carries (the `k3s` binary
    /// of an air-gap install).
    fn test(&mut self, vm: &GuestVm, args: &[String]) -> Exit {
        let carried = |path: &str| {
            path == paths::K3S_BINARY && vm.k3s_airgap.is_some()
                || path == paths::CLOUD_INIT && vm.hardware.cloud_init
        };
        let guest = self.guest(vm.vmid);
        match args {
            [flag, path] if flag == "-f" || flag == "-e" || flag == "-x" => Exit {
                exit_code: i32::from(!guest.files.contains_key(path) && !carried(path)),
                stdout: String::new(),
                stderr: String::new(),
            },
            _ => Exit::failure(2, "test: unsupported expression\n"),
        }
    }

    /// coreutils' `install [-D] -m MODE /dev/null PATH`: an empty file of that mode (the
    /// destination is replaced, not opened: its old mode does not survive); its folders are
    /// created (mode 0755) with `-D`, and without it a missing folder fails as coreutils does.
    fn install(&mut self, vmid: VmId, args: &[String]) -> Exit {
        let create_folders = args.iter().any(|word| word == "-D");
        let words: Vec<&str> = args
            .iter()
            .map(String::as_str)
            .filter(|word| *word != "-D")
            .collect();
        let (mode, path) = match words.as_slice() {
            ["-m", mode, "/dev/null", path] => (*mode, *path),
            _ => {
                return Exit::failure(
                    1,
                    "install: the lab runs only `install [-D] -m MODE /dev/null PATH`\n",
                );
            }
        };
        let Ok(mode) = u32::from_str_radix(mode, 8) else {
            return Exit::failure(1, format!("install: invalid mode '{mode}'\n"));
        };
        let guest = self.guest(vmid);
        let Some(folder) = parent_of(path) else {
            return Exit::failure(1, "install: the lab takes only absolute paths\n");
        };
        if create_folders {
            guest.make_folders(path);
        } else if !guest.has_folder(folder) {
            return Exit::failure(
                1,
                format!(
                    "install: cannot create regular file '{path}': No such file or directory\n"
                ),
            );
        }
        guest.files.insert(path.to_owned(), String::new());
        guest.modes.insert(path.to_owned(), mode);
        Exit::success("")
    }

    /// `rm [-f] PATH...` of files (`-f`: a missing file is no error).
    fn remove(&mut self, vmid: VmId, args: &[String]) -> Exit {
        let force = args.first().is_some_and(|word| word == "-f");
        let paths = if force { &args[1..] } else { args };
        let guest = self.guest(vmid);
        for path in paths {
            if path.starts_with('-') {
                return Exit::failure(1, "rm: the lab runs only `rm [-f] PATH...`\n");
            }
            if guest.files.remove(path).is_none() && !force {
                return Exit::failure(
                    1,
                    format!("rm: cannot remove '{path}': No such file or directory\n"),
                );
            }
            guest.modes.remove(path);
        }
        Exit::success("")
    }

    /// Every secret this lab's nodes hold or issued (bootstrap tokens, certificate keys, K3s
    /// tokens, datastore passwords): what must never be on a command line.
    pub(super) fn secrets(&self) -> Vec<(&'static str, &str)> {
        let mut secrets = Vec::new();
        for state in self.clusters.values() {
            secrets.extend(
                state
                    .tokens
                    .keys()
                    .map(|t| ("a kubeadm bootstrap token", t.as_str())),
            );
            if let Some((key, _)) = &state.certificate_key {
                secrets.push(("a kubeadm certificate key", key.as_str()));
            }
            if let Some(k3s) = &state.k3s {
                secrets.extend(k3s.secrets());
            }
        }
        secrets
    }

    fn bash(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        args: &[String],
        _now: Timestamp,
        later: &mut Vec<Later>,
    ) -> Exit {
        let Some((script, script_args)) = args.split_first() else {
            return Exit::failure(
                2,
                "bash: interactive shells are not available over the guest agent\n",
            );
        };
        if !self
            .guest(vm.vmid)
            .files
            .get(script)
            .is_some_and(|text| text.starts_with("#!"))
        {
            return Exit::failure(127, format!("bash: {script}: No such file or directory\n"));
        }
        match script.as_str() {
            paths::PREPARE_SCRIPT => self.prepare(vm, script_args, later),
            paths::RENEW_SCRIPT => self.renew(backend, vm),
            paths::DATA_DISKS_SCRIPT => {
                let list = self
                    .guest(vm.vmid)
                    .files
                    .get(paths::DATA_DISKS_LIST)
                    .cloned()
                    .unwrap_or_default();
                disks::mount_data_disks(&mut self.guest(vm.vmid).mounts, vm, &list)
            }
            other => Exit::failure(
                1,
                format!("bash: {other}: the lab does not emulate this script\n"),
            ),
        }
    }

    /// `prepare-node.sh VERSION [--kubeadm-only]`: CRI-O and the packages.
    fn prepare(&mut self, vm: &GuestVm, args: &[String], later: &mut Vec<Later>) -> Exit {
        let (version, kubeadm_only) = match args {
            [version] => (version, false),
            [version, flag] if flag == "--kubeadm-only" => (version, true),
            _ => return Exit::failure(1, "usage: prepare-node.sh VERSION [--kubeadm-only]\n"),
        };
        let Ok(version) = version.parse::<KubeVersion>() else {
            return Exit::failure(
                100,
                format!("E: Version '{version}-*' for 'kubeadm' was not found\n"),
            );
        };
        let guest = self.guest(vm.vmid);
        guest.kubeadm = Some(version);
        // The kubelet package's folder for static pods (kube-vip's goes there before `init`).
        guest.make_folder("/etc/kubernetes/manifests");
        if !kubeadm_only {
            guest.kubelet = Some(version);
            // A running kubelet of a member restarts with the new package.
            if let Some(member) = &guest.member {
                later.push(Later::NodeReady {
                    cluster: member.cluster.clone(),
                    node: member.node.clone(),
                    vmid: vm.vmid,
                });
            }
        }
        let what = if kubeadm_only {
            "kubeadm"
        } else {
            "cri-o kubelet kubeadm kubectl"
        };
        Exit::success(format!("Setting up {what} ({version}) ...\n"))
    }

    pub(super) fn power(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        event: PowerEvent,
    ) -> Vec<Later> {
        if vm.talos.is_some() {
            return self.talos_power(backend, vm, event);
        }
        let member = self.guests.get(&vm.vmid).and_then(|g| g.member.clone());
        match event {
            PowerEvent::Started => {
                let guest = self.guest(vm.vmid);
                guest.running = true;
                // An installed K3s service is enabled: it starts with the VM.
                guest.k3s_stopped = false;
                if vm.k3s_airgap.is_some() {
                    guest.k3s_starts();
                }
                member
                    .map(|m| Later::NodeReady {
                        cluster: m.cluster,
                        node: m.node,
                        vmid: vm.vmid,
                    })
                    .into_iter()
                    .collect()
            }
            PowerEvent::ShutDown
            | PowerEvent::HardStopped
            | PowerEvent::HostLost
            | PowerEvent::Destroyed => {
                if event == PowerEvent::Destroyed {
                    self.guests.remove(&vm.vmid);
                } else {
                    self.guest(vm.vmid).running = false;
                }
                if let Some(member) = member {
                    backend.set_node_ready(&member.cluster, &member.node, false);
                    if event == PowerEvent::Destroyed {
                        self.forget_if_last(backend, &member.cluster);
                    }
                }
                Vec::new()
            }
        }
    }

    /// Forgets `cluster` (and stops its API server) when no machine of it is left: a new
    /// cluster of that name starts its own, as on real machines.
    fn forget_if_last(&mut self, backend: &impl ClusterBackend, cluster: &str) {
        let left = self
            .guests
            .values()
            .any(|g| g.member.as_ref().is_some_and(|m| m.cluster == cluster));
        if !left && self.clusters.remove(cluster).is_some() {
            backend.remove_cluster(cluster);
        }
    }

    pub(super) fn apply_later(&self, backend: &impl ClusterBackend, later: &Later) {
        let (cluster, node, vmid) = match later {
            Later::NodeReady {
                cluster,
                node,
                vmid,
            } => (cluster, node, vmid),
            Later::TalosNodeReady {
                cluster,
                node,
                vmid,
            } => {
                if self.talos_node_runs(*vmid, node) {
                    backend.set_node_ready(cluster, node, true);
                }
                return;
            }
        };
        let guest = self.guests.get(vmid);
        let still_member = guest.is_some_and(|g| {
            g.running
                && !g.k3s_stopped
                && g.member
                    .as_ref()
                    .is_some_and(|m| &m.cluster == cluster && &m.node == node)
        });
        // Ready once a network plugin runs: the cluster's API server decides.
        if still_member {
            backend.set_node_ready(cluster, node, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_guest_agent_creates_no_folder_and_new_files_0666() {
        let mut systems = GuestSystems::default();
        let vmid = VmId(101);
        let missing = systems
            .guest(vmid)
            .agent_write("/etc/capstan/prepare-node.sh", "#!/bin/sh\n".into())
            .expect_err("no /etc/capstan on a fresh VM");
        assert_eq!(
            missing.to_string(),
            "failed to open file '/etc/capstan/prepare-node.sh' (mode: 'wb'): No such file or directory"
        );
        let guest = systems.guest(vmid);
        assert!(!guest.files.contains_key("/etc/capstan/prepare-node.sh"));
        guest
            .agent_write("/etc/motd", "hi\n".into())
            .expect("/etc exists");
        assert_eq!(guest.modes.get("/etc/motd"), Some(&0o666));
        assert!(
            guest.agent_write("/etc", String::new()).is_err(),
            "a folder"
        );
    }

    #[test]
    fn install_creates_folders_only_with_dash_d_and_the_agent_keeps_its_mode() {
        let mut systems = GuestSystems::default();
        let vmid = VmId(101);
        let path = "/etc/capstan/kubeadm-join.yaml";
        let without = systems.install(vmid, &words(&format!("-m 0600 /dev/null {path}")));
        assert_eq!(without.exit_code, 1, "{without:?}");
        assert!(without.stderr.contains("No such file or directory"));
        let with = systems.install(vmid, &words(&format!("-D -m 0600 /dev/null {path}")));
        assert_eq!(with.exit_code, 0, "{with:?}");
        let guest = systems.guest(vmid);
        assert!(guest.has_folder("/etc/capstan"));
        guest
            .agent_write(path, "token: t\n".into())
            .expect("its folder exists now");
        assert_eq!(guest.modes.get(path), Some(&0o600), "kept by the write");
        assert_eq!(
            guest.files.get(path).map(String::as_str),
            Some("token: t\n")
        );
    }

    #[test]
    fn rm_removes_files_and_dash_f_ignores_missing_ones() {
        let mut systems = GuestSystems::default();
        let vmid = VmId(101);
        let path = "/etc/capstan/kubeadm-join.yaml";
        systems.install(vmid, &words(&format!("-D -m 0600 /dev/null {path}")));
        assert_eq!(
            systems
                .remove(vmid, &words(&format!("-f {path}")))
                .exit_code,
            0
        );
        assert!(!systems.guest(vmid).files.contains_key(path));
        assert!(!systems.guest(vmid).modes.contains_key(path));
        assert_eq!(
            systems
                .remove(vmid, &words(&format!("-f {path}")))
                .exit_code,
            0
        );
        let missing = systems.remove(vmid, &words(path));
        assert_eq!(missing.exit_code, 1);
        assert!(missing.stderr.contains("cannot remove"), "{missing:?}");
    }
}
