//! `kubectl` in the simulated VMs as capstan's scripts use it (apply of manifests, exec of
//! etcdctl in the etcd pod to list and remove members).

use super::*;

impl GuestSystems {
    pub(super) fn kubectl(
        &mut self,
        vm: &GuestVm,
        args: &[String],
        later: &mut Vec<Later>,
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
                self.apply(vm.vmid, &cluster, &filename, later)
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

    fn apply(&mut self, vmid: VmId, cluster: &str, filename: &str, later: &mut Vec<Later>) -> Exit {
        let is_operator =
            filename.starts_with("https://") && filename.ends_with("tigera-operator.yaml");
        let content = if filename.starts_with("https://") {
            None
        } else {
            self.guest(vmid).files.get(filename).cloned()
        };
        let Some(state) = self.clusters.get_mut(cluster) else {
            return Exit::failure(1, "the cluster is gone\n");
        };
        if is_operator {
            state.operator = true;
            return Exit::success(
                "namespace/tigera-operator serverside-applied\ndeployment.apps/tigera-operator serverside-applied\n",
            );
        }
        let Some(content) = content else {
            return Exit::failure(
                1,
                format!("error: the path \"{filename}\" does not exist\n"),
            );
        };
        if content.contains("kind: Installation") {
            if !state.operator {
                return Exit::failure(
                    1,
                    format!(
                        "error: resource mapping not found for name: \"default\" namespace: \"\" from \"{filename}\": no matches for kind \"Installation\" in version \"operator.tigera.io/v1\"\nensure CRDs are installed first\n"
                    ),
                );
            }
            state.cni = true;
            let members: Vec<(VmId, String)> = self
                .guests
                .iter()
                .filter_map(|(vmid, g)| {
                    g.member
                        .as_ref()
                        .filter(|m| m.cluster == cluster)
                        .map(|m| (*vmid, m.node.clone()))
                })
                .collect();
            later.extend(members.into_iter().map(|(vmid, node)| Later::NodeReady {
                cluster: cluster.to_owned(),
                node,
                vmid,
            }));
            return Exit::success(
                "installation.operator.tigera.io/default created\napiserver.operator.tigera.io/default created\n",
            );
        }
        Exit::success("configured\n")
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
