//! [`Fenced`]: a [`ProxmoxProvider`] that checks its replica still leads before each call that
//! changes something (a clone, a configuration, a start, a stop, a shutdown, a destroy, a tag,
//! a command or a file sent to a guest, an ISO uploaded, deleted, attached or detached, a
//! resource pool made, a VM's tags and pool filed), so a step whose replica lost the Lease sends nothing
//! more. Reads pass through: a standby observes too.

use std::future::Future;
use std::net::Ipv4Addr;
use std::time::Duration;

use super::{
    CloneRequest, CommandOutput, ExpectedVm, Inventory, ProxmoxError, ProxmoxProvider, PveNode,
    ResizeOutcome, StorageContent, StoredVolume, VmRef, VmSettings, VolumeId,
};
use crate::fence::Fence;
use std::collections::BTreeSet;

/// `P`, fenced.
#[derive(Debug, Clone)]
pub struct Fenced<P> {
    inner: P,
    fence: Fence,
}

impl<P> Fenced<P> {
    /// `inner`, acting only while `fence` is open.
    pub fn new(inner: P, fence: Fence) -> Self {
        Fenced { inner, fence }
    }

    fn check(&self, before: impl std::fmt::Display) -> Result<(), ProxmoxError> {
        self.fence.check(before).map_err(ProxmoxError::NotLeading)
    }
}

impl<P: ProxmoxProvider> ProxmoxProvider for Fenced<P> {
    fn inventory(&self) -> impl Future<Output = Result<Inventory, ProxmoxError>> + Send {
        self.inner.inventory()
    }

    async fn clone_vm(&self, request: &CloneRequest) -> Result<super::VmRef, ProxmoxError> {
        self.check(format_args!("cloning {}", request.name))?;
        self.inner.clone_vm(request).await
    }

    async fn configure_vm(&self, vm: &VmRef, settings: &VmSettings) -> Result<(), ProxmoxError> {
        self.check(format_args!("configuring VM {}", vm.vmid))?;
        self.inner.configure_vm(vm, settings).await
    }

    async fn resize_disk(&self, vm: &VmRef, size_gib: u32) -> Result<ResizeOutcome, ProxmoxError> {
        self.check(format_args!("resizing the disk of VM {}", vm.vmid))?;
        self.inner.resize_disk(vm, size_gib).await
    }

    async fn start_vm(&self, vm: &VmRef) -> Result<(), ProxmoxError> {
        self.check(format_args!("starting VM {}", vm.vmid))?;
        self.inner.start_vm(vm).await
    }

    async fn shutdown_vm(&self, vm: &ExpectedVm, timeout: Duration) -> Result<(), ProxmoxError> {
        self.check(format_args!("shutting down VM {}", vm.vm.vmid))?;
        self.inner.shutdown_vm(vm, timeout).await
    }

    async fn stop_vm(&self, vm: &ExpectedVm) -> Result<(), ProxmoxError> {
        self.check(format_args!("stopping VM {}", vm.vm.vmid))?;
        self.inner.stop_vm(vm).await
    }

    async fn destroy_vm(&self, vm: &ExpectedVm) -> Result<(), ProxmoxError> {
        self.check(format_args!("destroying VM {}", vm.vm.vmid))?;
        self.inner.destroy_vm(vm).await
    }

    async fn add_tag(&self, vm: &ExpectedVm, tag: &str) -> Result<(), ProxmoxError> {
        self.check(format_args!("tagging VM {} {tag}", vm.vm.vmid))?;
        self.inner.add_tag(vm, tag).await
    }

    fn vm_description(
        &self,
        vm: &VmRef,
    ) -> impl Future<Output = Result<String, ProxmoxError>> + Send {
        self.inner.vm_description(vm)
    }

    fn agent_ping(&self, vm: &VmRef) -> impl Future<Output = Result<(), ProxmoxError>> + Send {
        self.inner.agent_ping(vm)
    }

    fn await_agent(&self, vm: &VmRef) -> impl Future<Output = Result<bool, ProxmoxError>> + Send {
        self.inner.await_agent(vm)
    }

    async fn run_command(
        &self,
        vm: &VmRef,
        command: &[String],
        input: Option<&str>,
        timeout: Duration,
    ) -> Result<CommandOutput, ProxmoxError> {
        // The program only: its arguments may be secret.
        let program = command.first().map_or("", String::as_str);
        self.check(format_args!("running `{program}` on VM {}", vm.vmid))?;
        self.inner.run_command(vm, command, input, timeout).await
    }

    fn vm_addresses(
        &self,
        vm: &VmRef,
    ) -> impl Future<Output = Result<Vec<Ipv4Addr>, ProxmoxError>> + Send {
        self.inner.vm_addresses(vm)
    }

    fn vm_hardware(
        &self,
        vm: &VmRef,
    ) -> impl Future<Output = Result<super::VmHardware, ProxmoxError>> + Send {
        self.inner.vm_hardware(vm)
    }

    async fn write_file(&self, vm: &VmRef, path: &str, content: &[u8]) -> Result<(), ProxmoxError> {
        self.check(format_args!("writing {path} on VM {}", vm.vmid))?;
        self.inner.write_file(vm, path, content).await
    }

    fn guest_agent_calls(&self) -> u64 {
        self.inner.guest_agent_calls()
    }

    fn storage_content(
        &self,
        node: &PveNode,
        storage: &str,
    ) -> impl Future<Output = Result<BTreeSet<StorageContent>, ProxmoxError>> + Send {
        self.inner.storage_content(node, storage)
    }

    fn storage_volumes(
        &self,
        node: &PveNode,
        storage: &str,
        content: StorageContent,
    ) -> impl Future<Output = Result<Vec<StoredVolume>, ProxmoxError>> + Send {
        self.inner.storage_volumes(node, storage, content)
    }

    async fn upload_iso(
        &self,
        node: &PveNode,
        storage: &str,
        file_name: &str,
        image: &[u8],
    ) -> Result<VolumeId, ProxmoxError> {
        self.check(format_args!("uploading {file_name} to {storage} on {node}"))?;
        self.inner.upload_iso(node, storage, file_name, image).await
    }

    async fn delete_volume(&self, node: &PveNode, volume: &VolumeId) -> Result<(), ProxmoxError> {
        self.check(format_args!("deleting {volume} on {node}"))?;
        self.inner.delete_volume(node, volume).await
    }

    async fn attach_cdrom(&self, vm: &VmRef, volume: &VolumeId) -> Result<(), ProxmoxError> {
        self.check(format_args!("attaching {volume} to VM {}", vm.vmid))?;
        self.inner.attach_cdrom(vm, volume).await
    }

    async fn detach_cdrom(&self, vm: &VmRef, volume: &VolumeId) -> Result<(), ProxmoxError> {
        self.check(format_args!("detaching {volume} from VM {}", vm.vmid))?;
        self.inner.detach_cdrom(vm, volume).await
    }

    fn hardware_facts(
        &self,
        nodes: &[PveNode],
    ) -> impl Future<Output = Result<super::HardwareFacts, ProxmoxError>> + Send {
        self.inner.hardware_facts(nodes)
    }

    async fn ensure_pool(&self, pool: &str, create: bool) -> Result<(), ProxmoxError> {
        if create {
            self.check(format_args!("making sure resource pool {pool} exists"))?;
        }
        self.inner.ensure_pool(pool, create).await
    }

    async fn place_vm(
        &self,
        vm: &ExpectedVm,
        filing: &super::VmFiling,
    ) -> Result<(), ProxmoxError> {
        self.check(format_args!("filing VM {} (tags, pool)", vm.vm.vmid))?;
        self.inner.place_vm(vm, filing).await
    }
}
