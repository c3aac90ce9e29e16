//! Rule 12: a cluster whose file was removed. With `prune` on (and every cluster file valid),
//! it is deleted in one `delete-cluster` step, VMs first, then every record capstan keeps of
//! it (so a new cluster of that name starts with secrets of its own); otherwise it is
//! reported and kept.

use super::Policy;
use super::placement::Capacity;
use super::types::{Action, ClusterPlan, Finding, FindingKind, MachineRef, Phase, Step, Target};
use crate::observed::ObservedCluster;

/// What happens to a removed cluster.
pub(crate) enum Removed {
    /// It is deleted.
    Delete(Box<ClusterPlan>),
    /// It is kept and reported.
    Report(Finding),
}

pub(crate) fn plan(
    name: &str,
    observed: &ObservedCluster,
    policy: &Policy,
    _capacity: &mut Capacity,
) -> Removed {
    let vms = observed.machines.len();
    if !policy.prune || policy.incomplete {
        let why = if policy.prune {
            "some cluster file is invalid, so an absent file may only be broken: nothing is deleted for being absent"
        } else {
            "prune is off"
        };
        return Removed::Report(Finding {
            kind: FindingKind::RemovedCluster,
            cluster: name.into(),
            machine: None,
            vm_id: None,
            message: format!(
                "cluster {name} has no file any more; its {vms} VM(s) and its kubeconfig are kept because {why}"
            ),
        });
    }
    let machines: Vec<MachineRef> = observed
        .machines
        .iter()
        .map(|(vm_name, vm)| MachineRef {
            name: vm_name.clone(),
            vm_id: Some(vm.vm_id),
            proxmox_node: vm.proxmox_node.clone(),
        })
        .collect();
    let records = observed.records.len();
    let step = Step {
        action: Action::DeleteCluster {
            machines,
            flux: observed.flux.as_ref().map(|f| f.target.clone()),
            records: observed.records.clone(),
        },
        target: Target {
            cluster: name.into(),
            ..Target::default()
        },
        reason: format!(
            "cluster {name} has no file any more and prune is on: destroy its {vms} VM(s) without draining, withdraw its Flux Secret, delete the {records} record(s) capstan keeps of it (secrets, CA pin, identity) and its config ISOs"
        ),
        disruptive: true,
        waits_on: None,
    };
    Removed::Delete(Box::new(ClusterPlan {
        name: name.to_owned(),
        phase: Phase::Deleting,
        steps: vec![step.clone()],
        predicted: vec![step],
        blocked: Vec::new(),
        waiting_on: Vec::new(),
        findings: Vec::new(),
        remediation_held: None,
        suspended: Vec::new(),
    }))
}
