//! `kubectl` in the simulated VMs as capstan's scripts use it (apply of a manifest file
//! through the cluster's API, never of a URL; exec of etcdctl in the etcd pod to list and
//! remove members).

use capstan_core::model::VmId;
use serde_json::Value;

use crate::nodes::cli::{KubectlCommand, MemberCommand};
use crate::nodes::{ClusterBackend, cli};
use crate::proxmox::ExecOutcome as Exit;
use crate::proxmox::GuestIdentity as GuestVm;

use super::GuestSystems;

impl GuestSystems {
    pub(super) fn kubectl(
        &mut self,
        backend: &impl ClusterBackend,
        vm: &GuestVm,
        args: &[String],
    ) -> Exit {
        let parsed: cli::Kubectl = match cli::parse("kubectl", args) {
            Ok(parsed) => parsed,
            Err((code, message)) => return Exit::failure(code, message),
        };
        let cluster = match self.control_plane_of(vm.vmid) {
            Ok(cluster) => cluster,
            Err(_) => {
                return Exit::failure(
                    1,
                    "The connection to the server localhost:8080 was refused - did you specify the right host or port?\n",
                );
            }
        };
        match parsed.command {
            KubectlCommand::Apply { filename, .. } => {
                self.apply(backend, vm.vmid, &cluster, &filename)
            }
            KubectlCommand::Exec { pod, command } => self.etcdctl(&cluster, &pod, &command),
            KubectlCommand::Get { raw } if raw == "/readyz" || raw == "/healthz" => {
                Exit::success("ok")
            }
            KubectlCommand::Get { raw } => Exit::failure(
                1,
                format!(
                    "Error from server (NotFound): the server could not find the requested resource ({raw})\n"
                ),
            ),
        }
    }

    /// `kubectl apply -f FILE` through the cluster's API. A URL is refused: the lab's VMs
    /// reach nothing outside the lab, as an air-gapped site's do (each refusal is recorded,
    /// [`GuestSystems::refused_fetches`]).
    fn apply(
        &mut self,
        backend: &impl ClusterBackend,
        vmid: VmId,
        cluster: &str,
        filename: &str,
    ) -> Exit {
        if let Some(url) = filename
            .strip_prefix("https://")
            .or_else(|| filename.strip_prefix("http://"))
        {
            let host = url.split(['/', ':']).next().unwrap_or_default().to_owned();
            self.refused_fetches.push(filename.to_owned());
            return Exit::failure(
                1,
                format!(
                    "error: unable to read URL \"{filename}\": Get \"{filename}\": dial tcp: lookup {host}: no such host (the lab's VMs reach nothing outside the lab)\n"
                ),
            );
        }
        let Some(content) = self.guest(vmid).files.get(filename).cloned() else {
            return Exit::failure(
                1,
                format!("error: the path \"{filename}\" does not exist\n"),
            );
        };
        match backend.apply_manifest(cluster, &content) {
            Ok(applied) => Exit::success(applied),
            Err(err) => Exit::failure(
                1,
                format!("error: {}\n", capstan_core::errors::error_chain(&err)),
            ),
        }
    }

    fn etcdctl(&mut self, cluster: &str, pod: &str, command: &[String]) -> Exit {
        let Some(state) = self.clusters.get_mut(cluster) else {
            return Exit::failure(1, "the cluster is gone\n");
        };
        let member = pod.strip_prefix("etcd-").unwrap_or_default();
        if !state.etcd.values().any(|name| name == member) {
            return Exit::failure(
                1,
                format!("Error from server (NotFound): pods \"{pod}\" not found\n"),
            );
        }
        let Some((program, args)) = command.split_first().filter(|(p, _)| *p == "etcdctl") else {
            return Exit::failure(
                126,
                "OCI runtime exec failed: executable file not found in $PATH\n",
            );
        };
        let parsed: cli::Etcdctl = match cli::parse(program, args) {
            Ok(parsed) => parsed,
            Err((code, message)) => return Exit::failure(code, message),
        };
        match parsed.command {
            cli::EtcdctlCommand::Member {
                command: MemberCommand::List,
            } => {
                let members: Vec<Value> = state
                    .etcd
                    .iter()
                    .map(|(id, name)| serde_json::json!({"ID": id, "name": name}))
                    .collect();
                Exit::success(
                    serde_json::json!({"header": {"cluster_id": 1}, "members": members})
                        .to_string(),
                )
            }
            cli::EtcdctlCommand::Member {
                command: MemberCommand::Remove { id },
            } => {
                let removed = u64::from_str_radix(&id, 16)
                    .ok()
                    .and_then(|id| state.etcd.remove(&id));
                match removed {
                    Some(_) => Exit::success(format!("Member {id} removed from cluster 1\n")),
                    None => Exit::failure(1, "Error: etcdserver: member not found\n"),
                }
            }
        }
    }
}
