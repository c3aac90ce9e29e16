//! What observation reads through the Proxmox guest agent and VM metadata: the admin
//! kubeconfig from a control plane (kubeadm's admin.conf or K3s's k3s.yaml), whether each
//! guest agent answers, and what an outdated VM was built from.

use std::time::Duration;

use crate::model::{NodeName, Role};
use crate::observed::{MachineSpec, ObservedCluster};
use crate::providers::node_exec::{Command, GuestAgent, NodeExec, NodeTarget};
use crate::providers::proxmox::{self, ProxmoxProvider, VmInfo, ownership};

/// How long reading admin.conf through a guest agent may take before trying another control
/// plane.
const ADMIN_READ_TIMEOUT: Duration = Duration::from_secs(10);

fn target_of(vm: &VmInfo) -> NodeTarget {
    NodeTarget {
        vmid: vm.vmid,
        proxmox_node: vm.node.0.clone(),
        name: NodeName(vm.name.as_str().into()),
    }
}

/// The admin kubeconfig from the first running control plane (by name) that gives it: a
/// stable choice, so its fingerprint changes only when the kubeconfig does. The text is the
/// VM's: not to be used before it is admitted.
pub(super) async fn read_admin_kubeconfig<P: ProxmoxProvider + Clone>(
    proxmox: &P,
    vms: &[VmInfo],
    read: &Command,
) -> Option<(NodeTarget, String)> {
    let agent = GuestAgent::new(proxmox.clone());
    for target in running_control_planes(vms) {
        let command = read.clone().timeout(ADMIN_READ_TIMEOUT);
        if let Ok(output) = agent.run(&target, &command).await
            && output.success()
            && !output.stdout.trim().is_empty()
        {
            crate::redact::remember_kubeconfig(&output.stdout);
            return Some((target, output.stdout));
        }
    }
    None
}

/// The running control planes that are not retiring, in name order: where the admin
/// kubeconfig is read.
pub(super) fn running_control_planes(vms: &[VmInfo]) -> Vec<NodeTarget> {
    let mut control_planes: Vec<&VmInfo> = vms
        .iter()
        .filter(|vm| vm.power == proxmox::PowerState::Running)
        .filter(|vm| {
            vm.owner
                .as_ref()
                .is_some_and(|o| o.ownership.role == Role::ControlPlane)
        })
        .filter(|vm| !vm.tags.iter().any(|t| t == crate::observed::RETIRING_TAG))
        .collect();
    control_planes.sort_by(|a, b| a.name.cmp(&b.name));
    control_planes.into_iter().map(target_of).collect()
}

/// Pings the guest agent of each running VM whose Node is not Ready; a Ready Node's VM answers
/// by definition.
pub(super) async fn mark_guest_agents<P: ProxmoxProvider>(
    proxmox: &P,
    vms: &[VmInfo],
    observed: &mut ObservedCluster,
) {
    for vm in vms
        .iter()
        .filter(|vm| vm.power == proxmox::PowerState::Running)
    {
        let name = NodeName(vm.name.as_str().into());
        let ready = observed.nodes.get(&name).is_some_and(|node| node.ready);
        let answers = ready || proxmox.agent_ping(&vm.vm_ref()).await.is_ok();
        if let Some(machine) = observed.machines.get_mut(&name) {
            machine.guest_agent = answers;
        }
    }
}

/// What each outdated VM was built from, read from its description: one call per VM whose
/// spec hash matches no desired pool (the ones about to be replaced), so the plan can say
/// which field changed ("template debian13-k8s → debian13-k8s-v2").
pub(super) async fn read_built_from<P: ProxmoxProvider>(
    proxmox: &P,
    spec: &crate::spec::ClusterSpec,
    vms: &[VmInfo],
    observed: &mut ObservedCluster,
) {
    let version = spec.kubernetes.version;
    let desired: Vec<_> = std::iter::once((None, &spec.control_plane.machine, Role::ControlPlane))
        .chain(
            spec.workers
                .iter()
                .map(|pool| (Some(pool.pool.as_str()), &pool.machine, Role::Worker)),
        )
        .map(|(pool, machine, role)| {
            MachineSpec::for_cluster(spec, pool, machine, version, role).spec_hash()
        })
        .collect();
    for vm in vms {
        let name = NodeName(vm.name.as_str().into());
        let Some(machine) = observed.machines.get_mut(&name) else {
            continue;
        };
        if desired.contains(&machine.ownership.spec_hash) {
            continue;
        }
        if let Ok(description) = proxmox.vm_description(&vm.vm_ref()).await {
            machine.built_from =
                ownership::parse_built_from(&description).and_then(MachineSpec::parse_summary);
        }
    }
}
