//! Tags and resource pools follow the file in place: every VM of a desired pool whose
//! operator tags (`machine.tags`) or resource pool (`machine.pool`) differ from the file gets
//! its change in one `tag-machines` step through the Proxmox API, with no machine created or
//! destroyed (neither is part of a machine's spec hash).
//!
//! capstan is authoritative only for the tags it set: it records them on the VM (its
//! description), so a tag the file drops is removed and a tag someone else added stays, as a
//! drift finding (rule 14); with `onDrift: replace` that tag is removed in place too (a tag is
//! never a reason to replace a machine). Removing `pool` from the file leaves the VMs where
//! they are.

use crate::plan::types::{Action, Finding, FindingKind, MachineRef};
use crate::spec::{DriftPolicy, Machine};

use super::{Ctx, Gate, Outcome};
use crate::observed::ObservedMachine;
use crate::plan::types::Filing;
use crate::spec::hardware::is_capstan_tag;

/// What a VM carries of the operator's tags and pool, against its pool's declaration.
struct Difference {
    missing: Vec<String>,
    dropped: Vec<String>,
    foreign: Vec<String>,
    pool: Option<String>,
}

fn difference(vm: &ObservedMachine, machine: &Machine) -> Difference {
    let has = |tag: &str| vm.tags.iter().any(|t| t == tag);
    let missing = machine
        .tags
        .iter()
        .filter(|tag| !has(tag))
        .cloned()
        .collect();
    let recorded = vm.recorded_tags.as_deref().unwrap_or_default();
    let extra = vm
        .tags
        .iter()
        .filter(|tag| !is_capstan_tag(tag) && !machine.tags.iter().any(|t| t == tag.as_str()));
    let (dropped, foreign): (Vec<String>, Vec<String>) = extra
        .map(ToString::to_string)
        .partition(|tag| recorded.iter().any(|r| r == tag.as_str()));
    let pool = machine
        .pool
        .clone()
        .filter(|pool| vm.pool.as_deref() != Some(pool.as_str()));
    Difference {
        missing,
        dropped,
        foreign,
        pool,
    }
}

/// Applies `filing` to a VM as the step would (for predictions).
pub(crate) fn file_in_place(vm: &mut ObservedMachine, filing: &Filing) {
    let recorded = vm.recorded_tags.take().unwrap_or_default();
    vm.tags.retain(|tag| {
        is_capstan_tag(tag)
            || filing.tags.iter().any(|t| t == tag.as_str())
            || (!filing.remove_foreign && !recorded.iter().any(|r| r == tag))
    });
    for tag in &filing.tags {
        if !vm.tags.iter().any(|t| t == tag.as_str()) {
            vm.tags.push(tag.as_str().into());
        }
    }
    vm.recorded_tags = Some(filing.tags.iter().map(|t| t.as_str().into()).collect());
    if let Some(pool) = &filing.pool {
        vm.pool = Some(pool.as_str().into());
    }
}

impl<'a> Ctx<'a> {
    /// Rule: one `tag-machines` step for every VM whose tags or pool differ from its pool's,
    /// never gated by a maintenance window (it disturbs nothing that runs); the tags someone
    /// else added are reported as drift.
    pub(super) fn filings(&self, out: &mut Outcome) {
        let replace = self.spec().rollout.on_drift == DriftPolicy::Replace;
        let mut machines = Vec::new();
        for view in &self.views {
            let Some(desired) = &self.pools[view.pool].desired else {
                continue;
            };
            if view.retiring || view.fenced || !view.fresh {
                continue;
            }
            let machine = view.machine;
            let diff = difference(machine, desired.machine);
            if !diff.foreign.is_empty() && !self.input.predicting {
                out.findings.push(Finding {
                    kind: FindingKind::Drift,
                    cluster: self.name().into(),
                    machine: Some(view.name.clone()),
                    vm_id: Some(machine.vm_id),
                    message: format!(
                        "VM {} {} carries tags the file does not declare and capstan did not set: {} (changed outside capstan); {}",
                        machine.vm_id,
                        view.name,
                        diff.foreign.join(", "),
                        if replace {
                            "rollout.onDrift is replace: they are removed in place (tag-machines)"
                        } else {
                            "rollout.onDrift is report: left as they are"
                        }
                    ),
                });
            }
            let foreign = replace && !diff.foreign.is_empty();
            if diff.missing.is_empty() && diff.dropped.is_empty() && diff.pool.is_none() && !foreign
            {
                continue;
            }
            let mut changes = Vec::new();
            let added: Vec<String> = diff.missing.iter().map(|t| format!("+{t}")).collect();
            let mut removed: Vec<String> = diff.dropped.iter().map(|t| format!("−{t}")).collect();
            if foreign {
                removed.extend(diff.foreign.iter().map(|t| format!("−{t}")));
            }
            let tags: Vec<String> = added.into_iter().chain(removed).collect();
            if !tags.is_empty() {
                changes.push(format!("tags {}", tags.join(" ")));
            }
            if let Some(pool) = &diff.pool {
                changes.push(format!(
                    "pool {} → {pool}",
                    machine.pool.as_deref().unwrap_or("none")
                ));
            }
            machines.push(Filing {
                machine: MachineRef {
                    name: view.name.clone(),
                    vm_id: Some(machine.vm_id),
                    proxmox_node: machine.proxmox_node.clone(),
                },
                ownership: machine.ownership.clone(),
                tags: desired.machine.tags.clone(),
                pool: desired.machine.pool.clone(),
                remove_foreign: foreign,
                changes: changes.join(", "),
            });
        }
        if machines.is_empty() {
            return;
        }
        let count = machines.len();
        let reason = format!(
            "in place, no machine replaced: Proxmox tags or resource pool change on {count} VM{}",
            if count == 1 { "" } else { "s" }
        );
        out.push(
            Self::step(
                Action::TagMachines { machines },
                self.cluster_target(),
                reason,
            ),
            Gate::Open,
        );
    }
}
