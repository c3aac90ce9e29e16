//! What a kubeadm or K3s machine gets through its guest agent before its packages and its
//! join: its data disks formatted and mounted where the file says (Talos formats and mounts its
//! own, from its machine config), and, with static addresses, the check that cloud-init gave
//! it its address (a template without cloud-init is refused, saying how to fix it).
//!
//! # Guarantees
//! Idempotent: the mount script never formats a disk twice and writes each fstab line once.

use capstan_core::addresses::tagged_addresses;
use capstan_core::spec::hardware::MachineHardware;

use crate::connect::Providers;
use crate::plan::{ActionKind, MachineRef};
use crate::providers::kubeadm::{KubeadmError, NodeStep, write_file};
use crate::providers::node_exec::Command;
use crate::providers::node_exec::{FileMode, NodeExec as _};
use crate::providers::proxmox::{ProxmoxProvider as _, disk_serial};

use super::access::kubeadm_failed;
use super::{ExecuteError, Executor, StepContext, node_target, run_steps};

/// The list of data disks to mount, one `SERIAL PATH FILESYSTEM` line each.
const DATA_DISKS_LIST: &str = "/etc/capstan/data-disks";
/// The script that formats and mounts them.
const DATA_DISKS_SCRIPT: &str = "/etc/capstan/mount-data-disks.sh";
const DATA_DISKS_SCRIPT_TEXT: &str = include_str!("templates/mount-data-disks.sh");
/// Where cloud-init is on a template that carries it.
const CLOUD_INIT: &str = "/usr/bin/cloud-init";

/// The steps that mount `hardware`'s disks that have a mount; none when none has.
pub(crate) fn mount_steps(hardware: &MachineHardware) -> Vec<NodeStep> {
    let lines: Vec<String> = hardware
        .disks
        .iter()
        .enumerate()
        .filter_map(|(index, disk)| {
            let mount = disk.mount.as_ref()?;
            Some(format!(
                "{} {} {}\n",
                disk_serial(index),
                mount.path,
                mount.filesystem.as_str()
            ))
        })
        .collect();
    if lines.is_empty() {
        return Vec::new();
    }
    vec![
        write_file(DATA_DISKS_LIST, FileMode::Config, lines.concat()),
        write_file(
            DATA_DISKS_SCRIPT,
            FileMode::Script,
            DATA_DISKS_SCRIPT_TEXT.to_owned(),
        ),
        NodeStep::Run {
            command: Command::new(&["bash", DATA_DISKS_SCRIPT]),
            unless: None,
        },
    ]
}

impl<Pr: Providers> Executor<Pr> {
    /// Before a kubeadm or K3s machine is prepared: checks it holds its static address (else
    /// refuses a template without cloud-init), then mounts its data disks. Says what it did,
    /// for the step's message (empty when nothing).
    pub(crate) async fn settle_hardware(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
    ) -> Result<String, ExecuteError> {
        let action = ActionKind::PrepareNode;
        let Some(spec) = ctx.spec else {
            return Ok(String::new());
        };
        let Some(observed) = ctx.observed.machines.get(&machine.name) else {
            return Ok(String::new());
        };
        let target = node_target(machine)?;
        let mut said = Vec::new();
        if let Some(wanted) = tagged_addresses(&observed.tags).next() {
            let has = self
                .proxmox(ctx)?
                .vm_addresses(&crate::providers::proxmox::VmRef {
                    node: crate::providers::proxmox::PveNode(target.proxmox_node.clone()),
                    vmid: target.vmid,
                })
                .await
                .is_ok_and(|addresses| {
                    addresses.iter().any(|a| std::net::IpAddr::V4(*a) == wanted)
                });
            if !has {
                let nodes = self.nodes(ctx)?;
                let found = nodes
                    .transport()
                    .run(&target, &Command::new(&["test", "-x", CLOUD_INIT]))
                    .await
                    .map_err(|source| {
                        kubeadm_failed(action.name())(KubeadmError::Exec {
                            operation: "look for cloud-init",
                            node: target.name.to_string(),
                            source,
                        })
                    })?;
                if !found.success() {
                    let template = spec
                        .machine_of(&observed.ownership.pool, observed.ownership.role)
                        .map_or("?", |m| m.template.as_str());
                    return Err(ExecuteError::Template {
                        action,
                        reason: format!(
                            "{}: template {template} has no cloud-init ({CLOUD_INIT} not found), so the VM never took its static address {wanted}: install cloud-init in the template (`apt install cloud-init`), keep its cloud-init drive, and make the template again",
                            machine.name
                        ),
                    });
                }
                // cloud-init is there and still at work: the next pass looks again.
                return Err(ExecuteError::NoAddress {
                    machine: machine.name.clone(),
                });
            }
            said.push(format!("at its static address {wanted}"));
        }
        let hardware = spec
            .machine_of(&observed.ownership.pool, observed.ownership.role)
            .map(MachineHardware::of)
            .unwrap_or_default();
        let steps = mount_steps(&hardware);
        if !steps.is_empty() {
            run_steps(&self.nodes(ctx)?, action, &target, &steps).await?;
            let mounts: Vec<String> = hardware
                .disks
                .iter()
                .filter_map(|d| d.mount.as_ref().map(|m| m.path.clone()))
                .collect();
            said.push(format!("data disks mounted at {}", mounts.join(", ")));
        }
        Ok(said.join(", "))
    }
}
