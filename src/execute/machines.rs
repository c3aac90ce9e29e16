//! The executor's steps on VMs: a clone (configured, resized, started, its guest agent
//! awaited), a new machine prepared and tagged, a node reset and its VM shut down, a VM
//! destroyed, a failed machine fenced (hard-stopped, its Node tainted out-of-service).

use std::time::Duration;

use crate::connect::Providers;
use crate::execute::distribution::{Distribution as _, NewMachine};
use crate::model::{NodeName, Ownership};
use crate::observed::{MachineSpec, PREPARED_TAG};
use crate::plan::{ActionKind, MachineRef};
use crate::providers::kube::{ClusterClient, Taint};
use crate::providers::proxmox::{
    CloneRequest, CloudInit, ExpectedVm, ProxmoxProvider, PveNode, VmSettings,
};
use crate::scheduling::NodeScheduling;
use crate::spec::KubeVersion;
use capstan_core::addresses::StaticAddress;

use super::access::{api_failed, fenced, node_target, proxmox_failed, vm_ref};
use super::{ExecuteError, Executor, StepContext};

/// Where a new machine goes and how it is filed, as its `create-machine` step says.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placed<'a> {
    /// The Proxmox node.
    pub node: &'a str,
    /// The storage of its clone (and of its data disks that name none).
    pub storage: &'a Option<String>,
    /// The operator's tags.
    pub tags: &'a Vec<String>,
    /// Its resource pool.
    pub pool: &'a Option<String>,
}

/// A clean shutdown after a node's reset gets this long before the VM is stopped hard.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(120);

impl<Pr: Providers> Executor<Pr> {
    /// Clones `machine`'s template into VM `name` on `proxmox_node` (in the pool's resource
    /// pool, made first when missing and allowed), takes its static address, configures it
    /// (hardware, tags, cloud-init), resizes its boot disk, gives it what the distribution
    /// delivers before the first boot, and starts it. The distribution's preflight and the
    /// cluster's registry passwords are checked before the clone.
    pub(super) async fn create_machine(
        &self,
        ctx: StepContext<'_>,
        name: &NodeName,
        ownership: &Ownership,
        machine: &MachineSpec,
        placed: &Placed<'_>,
    ) -> Result<String, ExecuteError> {
        let (proxmox_node, storage) = (placed.node, placed.storage);
        let proxmox = self.proxmox(ctx)?;
        ctx.distribution().preflight(self, ctx).await?;
        if let Some(spec) = ctx.spec {
            // A registry password the daemon cannot read stops the step before any clone,
            // not at the node's install with a VM made for nothing.
            super::registries(self.providers(), ctx, spec, ActionKind::CreateMachine)?;
        }
        let pool = placed.pool.clone();
        if let Some(pool) = &pool {
            proxmox
                .ensure_pool(pool, ctx.access.create_pools)
                .await
                .map_err(proxmox_failed("resource pool"))?;
        }
        let created = self.clock.now();
        let request = CloneRequest {
            template: machine.template.to_string(),
            target: PveNode(proxmox_node.to_owned()),
            name: name.clone(),
            ownership: ownership.clone(),
            created,
            pool,
            storage: storage.clone(),
            built_from: Some(machine.summary()),
        };
        let vm = proxmox
            .clone_vm(&request)
            .await
            .map_err(proxmox_failed("clone"))?;
        let (address, cloud_init) = self.network_settings(ctx, &vm, name, machine).await?;
        let settings = VmSettings {
            cores: machine.cores,
            memory_mib: machine.memory_mib,
            cpu_type: machine.cpu.to_string(),
            ownership: ownership.clone(),
            created,
            cloud_init,
            built_from: Some(machine.summary()),
            hardware: machine.hardware.clone(),
            disk_storage: storage.clone(),
            tags: placed.tags.clone(),
        };
        proxmox
            .configure_vm(&vm, &settings)
            .await
            .map_err(proxmox_failed("configure"))?;
        proxmox
            .resize_disk(&vm, machine.disk_gib)
            .await
            .map_err(proxmox_failed("resize disk"))?;
        let scheduling = ctx
            .spec
            .map(|spec| NodeScheduling::of(spec, &ownership.pool, ownership.role, proxmox_node))
            .unwrap_or_default();
        let new_machine = NewMachine {
            vm: &vm,
            name,
            role: ownership.role,
            scheduling: &scheduling,
            address: address.as_ref(),
            hardware: &machine.hardware,
        };
        let delivered = ctx
            .distribution()
            .deliver_config(self, ctx, &new_machine)
            .await?;
        proxmox
            .start_vm(&vm)
            .await
            .map_err(proxmox_failed("start"))?;
        // Waiting for the agent here lets the prepare script start as the VM answers
        // (this step's end starts a pass), not a pass later.
        let agent = match proxmox.await_agent(&vm).await {
            Ok(true) => ", its guest agent answering",
            Ok(false) => ", its guest agent not answering yet",
            Err(err) => {
                tracing::debug!(vmid = %vm.vmid, error = %err, "cannot ping the new VM's guest agent; the next pass sees whether it answers");
                ""
            }
        };
        let delivered = delivered.map_or(String::new(), |what| format!(" with {what}"));
        let fixed = address.map_or(String::new(), |a| format!(" at {}", a.address.addr()));
        Ok(format!(
            "VM {} cloned from {} on {proxmox_node}{fixed} and started{delivered}{agent}",
            vm.vmid, machine.template
        ))
    }

    /// A new machine's static address (chosen and recorded on its VM, when the cluster
    /// declares `network.nodeAddresses`) and its cloud-init settings.
    async fn network_settings(
        &self,
        ctx: StepContext<'_>,
        vm: &crate::providers::proxmox::VmRef,
        name: &NodeName,
        machine: &MachineSpec,
    ) -> Result<(Option<StaticAddress>, Option<CloudInit>), ExecuteError> {
        let Some(spec) = ctx.spec else {
            return Ok((None, None));
        };
        let address = super::addresses::node_address(self, ctx, spec, vm, name).await?;
        let cloud_init = self
            .cloud_init(ctx, spec, vm, machine, address.as_ref())
            .await?;
        Ok((address, cloud_init))
    }

    /// The cloud-init settings of a new machine whose distribution is configured through
    /// Proxmox's cloud-init: its static address on the card that carries it, DHCP on its
    /// other cards; `None` when it declares neither cards nor a static address (the
    /// template's settings stay). Refuses a VM without a cloud-init drive, saying how to fix
    /// the template.
    async fn cloud_init(
        &self,
        ctx: StepContext<'_>,
        spec: &crate::spec::ClusterSpec,
        vm: &crate::providers::proxmox::VmRef,
        machine: &MachineSpec,
        address: Option<&StaticAddress>,
    ) -> Result<Option<CloudInit>, ExecuteError> {
        let capabilities = spec.kubernetes.distribution.capabilities();
        let cards = machine.hardware.networks.len();
        if !capabilities.cloud_init_network || (cards == 0 && address.is_none()) {
            return Ok(None);
        }
        let has_drive = self
            .proxmox(ctx)?
            .vm_hardware(vm)
            .await
            .map_err(proxmox_failed("read the config"))?
            .cloud_init_drive;
        if !has_drive {
            return Err(ExecuteError::Template {
                action: ActionKind::CreateMachine,
                reason: format!(
                    "template {} has no cloud-init drive, which {} nodes need for their static address and network cards: add one to the template (Hardware → Add → CloudInit Drive, or `qm set <id> --ide2 <storage>:cloudinit`) and install cloud-init in it",
                    machine.template, capabilities.tool
                ),
            });
        }
        let primary = machine.hardware.primary_card();
        let ipconfigs = (0..cards.max(1))
            .map(|index| {
                let value = match address {
                    Some(fixed) if index == primary => fixed.ipconfig(),
                    _ => "ip=dhcp".to_owned(),
                };
                (index, value)
            })
            .collect();
        Ok(Some(CloudInit {
            ipconfigs,
            nameservers: address.map(|a| a.nameservers.clone()).unwrap_or_default(),
            search_domain: address.and_then(|a| a.search_domain.clone()),
            ..CloudInit::default()
        }))
    }

    /// What the distribution prepares on a new machine, then the tag that says it is done.
    pub(super) async fn prepare_node(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        version: KubeVersion,
    ) -> Result<String, ExecuteError> {
        let target = node_target(machine)?;
        let holds = ctx
            .distribution()
            .prepare(self, ctx, machine, version)
            .await?;
        // The tag after the script: a crash in between runs the script again.
        let expected = self.expected(ctx, machine)?;
        self.proxmox(ctx)?
            .add_tag(&expected, PREPARED_TAG)
            .await
            .map_err(proxmox_failed("tag prepared"))?;
        Ok(format!("{} prepared: {holds}", target.name))
    }

    /// The distribution's reset of the node, then a clean shutdown of its VM.
    pub(super) async fn reset_node(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
    ) -> Result<String, ExecuteError> {
        let target = node_target(machine)?;
        ctx.distribution().reset(self, ctx, machine).await?;
        let expected = self.expected(ctx, machine)?;
        self.proxmox(ctx)?
            .shutdown_vm(&expected, SHUTDOWN_TIMEOUT)
            .await
            .map_err(proxmox_failed("shut down"))?;
        Ok(format!("{} reset and its VM shut down", target.name))
    }

    pub(super) async fn destroy_machine(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        ownership: &Ownership,
    ) -> Result<String, ExecuteError> {
        let expected = ExpectedVm {
            vm: vm_ref(machine)?,
            name: machine.name.clone(),
            ownership: ownership.clone(),
        };
        self.proxmox(ctx)?
            .destroy_vm(&expected)
            .await
            .map_err(proxmox_failed("destroy"))?;
        Ok(format!(
            "VM {} ({}) destroyed",
            expected.vm.vmid, machine.name
        ))
    }

    /// Hard-stops a failed machine's VM, then taints its Node out-of-service so its pods
    /// and volumes move.
    pub(super) async fn fence_machine(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        node: &NodeName,
    ) -> Result<String, ExecuteError> {
        let expected = self.expected(ctx, machine)?;
        self.proxmox(ctx)?
            .stop_vm(&expected)
            .await
            .map_err(proxmox_failed("fence (hard stop)"))?;
        let api = self.api(ctx, ActionKind::FenceMachine).await?;
        fenced(ctx, format_args!("tainting {node} out-of-service"))?;
        api.add_taint(node, &Taint::out_of_service())
            .await
            .map_err(api_failed("taint out-of-service"))?;
        Ok(format!(
            "VM {} hard-stopped, {node} tainted out-of-service",
            expected.vm.vmid
        ))
    }
}
