//! A fake [`ProxmoxProvider`] for unit tests: it records every change and command it is asked
//! for, and answers commands as the test says.

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{
    CloneRequest, CommandOutput, ExpectedVm, Inventory, ProxmoxError, ProxmoxProvider, PveNode,
    ResizeOutcome, StorageContent, StoredVolume, VmRef, VmSettings, VolumeId,
};
use std::collections::BTreeSet;

/// What a fake guest answers to a command.
type Answer = dyn Fn(&[String]) -> CommandOutput + Send + Sync;

/// A Proxmox that records each change and command, and calls `on_command` for each command
/// (which may end the replica's leadership, as a Lease lost while kubeadm runs).
#[derive(Clone)]
pub(crate) struct Recorder {
    calls: Arc<Mutex<Vec<String>>>,
    on_command: Arc<Answer>,
}

impl Recorder {
    pub(crate) fn new(
        on_command: impl Fn(&[String]) -> CommandOutput + Send + Sync + 'static,
    ) -> Self {
        Recorder {
            calls: Arc::default(),
            on_command: Arc::new(on_command),
        }
    }

    fn record(&self, call: String) {
        self.calls.lock().expect("calls").push(call);
    }

    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("calls").clone()
    }
}

/// A command that exited `code`, printing nothing.
pub(crate) fn exited(code: i32) -> CommandOutput {
    CommandOutput {
        exit_code: Some(code),
        signal: None,
        stdout: String::new(),
        stderr: String::new(),
    }
}

fn unexpected() -> ProxmoxError {
    ProxmoxError::Configure {
        reason: "not faked".to_owned(),
    }
}

impl ProxmoxProvider for Recorder {
    async fn inventory(&self) -> Result<Inventory, ProxmoxError> {
        Err(unexpected())
    }
    async fn clone_vm(&self, request: &CloneRequest) -> Result<VmRef, ProxmoxError> {
        self.record(format!("clone {}", request.name));
        Err(unexpected())
    }
    async fn configure_vm(&self, vm: &VmRef, _: &VmSettings) -> Result<(), ProxmoxError> {
        self.record(format!("configure {}", vm.vmid));
        Ok(())
    }
    async fn resize_disk(&self, vm: &VmRef, _: u32) -> Result<ResizeOutcome, ProxmoxError> {
        self.record(format!("resize {}", vm.vmid));
        Ok(ResizeOutcome::Unchanged)
    }
    async fn start_vm(&self, vm: &VmRef) -> Result<(), ProxmoxError> {
        self.record(format!("start {}", vm.vmid));
        Ok(())
    }
    async fn shutdown_vm(&self, vm: &ExpectedVm, _: Duration) -> Result<(), ProxmoxError> {
        self.record(format!("shutdown {}", vm.vm.vmid));
        Ok(())
    }
    async fn stop_vm(&self, vm: &ExpectedVm) -> Result<(), ProxmoxError> {
        self.record(format!("stop {}", vm.vm.vmid));
        Ok(())
    }
    async fn destroy_vm(&self, vm: &ExpectedVm) -> Result<(), ProxmoxError> {
        self.record(format!("destroy {}", vm.vm.vmid));
        Ok(())
    }
    async fn add_tag(&self, vm: &ExpectedVm, tag: &str) -> Result<(), ProxmoxError> {
        self.record(format!("tag {} {tag}", vm.vm.vmid));
        Ok(())
    }
    async fn vm_description(&self, _: &VmRef) -> Result<String, ProxmoxError> {
        Err(unexpected())
    }
    async fn agent_ping(&self, _: &VmRef) -> Result<(), ProxmoxError> {
        Ok(())
    }
    async fn await_agent(&self, _: &VmRef) -> Result<bool, ProxmoxError> {
        Ok(true)
    }
    async fn run_command(
        &self,
        vm: &VmRef,
        command: &[String],
        _: Option<&str>,
        _: Duration,
    ) -> Result<CommandOutput, ProxmoxError> {
        self.record(format!("run {} {}", vm.vmid, command.join(" ")));
        Ok((self.on_command)(command))
    }
    async fn vm_addresses(&self, _: &VmRef) -> Result<Vec<Ipv4Addr>, ProxmoxError> {
        Ok(vec![Ipv4Addr::new(10, 0, 0, 10)])
    }
    async fn vm_hardware(&self, _: &VmRef) -> Result<super::VmHardware, ProxmoxError> {
        Err(unexpected())
    }
    async fn write_file(&self, vm: &VmRef, path: &str, _: &[u8]) -> Result<(), ProxmoxError> {
        self.record(format!("write {} {path}", vm.vmid));
        Ok(())
    }
    async fn storage_content(
        &self,
        _: &PveNode,
        _: &str,
    ) -> Result<BTreeSet<StorageContent>, ProxmoxError> {
        Err(unexpected())
    }
    async fn storage_volumes(
        &self,
        _: &PveNode,
        _: &str,
        _: StorageContent,
    ) -> Result<Vec<StoredVolume>, ProxmoxError> {
        Err(unexpected())
    }
    async fn upload_iso(
        &self,
        node: &PveNode,
        storage: &str,
        file_name: &str,
        _: &[u8],
    ) -> Result<VolumeId, ProxmoxError> {
        self.record(format!("upload {node} {storage} {file_name}"));
        Ok(VolumeId::iso(storage, file_name))
    }
    async fn delete_volume(&self, node: &PveNode, volume: &VolumeId) -> Result<(), ProxmoxError> {
        self.record(format!("delete {node} {volume}"));
        Ok(())
    }
    async fn attach_cdrom(&self, vm: &VmRef, volume: &VolumeId) -> Result<(), ProxmoxError> {
        self.record(format!("attach {} {volume}", vm.vmid));
        Ok(())
    }
    async fn detach_cdrom(&self, vm: &VmRef, volume: &VolumeId) -> Result<(), ProxmoxError> {
        self.record(format!("detach {} {volume}", vm.vmid));
        Ok(())
    }
    async fn hardware_facts(&self, _: &[PveNode]) -> Result<super::HardwareFacts, ProxmoxError> {
        Err(unexpected())
    }
    async fn ensure_pool(&self, pool: &str, create: bool) -> Result<(), ProxmoxError> {
        self.record(format!("pool {pool} create={create}"));
        Ok(())
    }
    async fn place_vm(
        &self,
        vm: &ExpectedVm,
        filing: &super::VmFiling,
    ) -> Result<(), ProxmoxError> {
        self.record(format!(
            "file {} tags={} pool={:?} remove_foreign={}",
            vm.vm.vmid,
            filing.tags.join(";"),
            filing.pool,
            filing.remove_foreign
        ));
        Ok(())
    }
}
