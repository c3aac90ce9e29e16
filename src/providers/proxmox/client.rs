//! [`ProxmoxClient`]: the [`ProxmoxProvider`] over the Proxmox VE REST API.
//!
//! Wire values are read leniently, as Proxmox writes them: numbers may come as JSON numbers or
//! numeric strings, booleans as `1`/`0`, and false flags are often left out.
//!
//! # Invariants
//! - Stop, shutdown and destroy re-read the VM and compare its name and ownership with what the
//!   caller expects before touching it.
//! - Every UPID returned by Proxmox is awaited through the task status endpoint.

use std::net::Ipv4Addr;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use tokio::time::Instant;

use super::api::{Api, Method, Params, Retry};
use super::connection::ConnectionConfig;
use super::error::ProxmoxError;
pub use super::options::ClientOptions;
use super::ownership::{self, VmOwner};
use super::templates::TemplateCache;
use super::wire::{accepted, as_u64, boot_disk, flag, float, owner_of, text, uint, vm_path};
use super::{
    CloneRequest, CommandOutput, ExecStatus, ExpectedVm, HostInfo, Inventory, PowerState,
    ProxmoxProvider, PveNode, ResizeOutcome, StorageContent, StoredVolume, VmInfo, VmRef,
    VmSettings, VolumeId,
};
use crate::model::VmId;
use std::collections::BTreeSet;

use super::wire::{GIB, MIB};
/// `agent/file-write` takes at most 61440 characters of content (the schema's maxLength).
const FILE_WRITE_MAX_CHARS: usize = 61_440;

/// The Proxmox VE REST client.
#[derive(Debug, Clone)]
pub struct ProxmoxClient {
    pub(super) api: Api,
    pub(super) options: ClientOptions,
    /// Where each known template's volumes are (read once per template).
    templates: TemplateCache,
    /// Guest-agent requests made, shared by the clones of this client.
    pub(super) agent_calls: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The VMIDs its clones in flight hold.
    vmids: super::vmids::VmidClaims,
}

impl ProxmoxClient {
    /// A client for one Proxmox cluster.
    ///
    /// # Errors
    /// When the TLS settings cannot be used (unreadable CA file, ...).
    pub fn new(config: &ConnectionConfig, options: ClientOptions) -> Result<Self, ProxmoxError> {
        let api = Api::new(config, options.retry, options.request_timeout)?;
        Ok(ProxmoxClient {
            api,
            options,
            templates: TemplateCache::default(),
            agent_calls: std::sync::Arc::default(),
            vmids: super::vmids::VmidClaims::default(),
        })
    }

    async fn resources(&self, kind: &str) -> Result<Vec<Value>, ProxmoxError> {
        let params: Params = vec![("type".into(), kind.into())];
        self.api
            .call(Method::Get, "/cluster/resources", &params, Retry::Transient)
            .await
    }

    pub(super) async fn vm_config(&self, vm: &VmRef) -> Result<Value, ProxmoxError> {
        self.api
            .call_value(
                Method::Get,
                &vm_path(vm, "/config"),
                &Vec::new(),
                Retry::Transient,
            )
            .await
    }

    async fn vm_status(&self, vm: &VmRef) -> Result<Value, ProxmoxError> {
        self.api
            .call_value(
                Method::Get,
                &vm_path(vm, "/status/current"),
                &Vec::new(),
                Retry::Transient,
            )
            .await
    }

    /// Re-reads a VM and checks it is the one the caller expects. `Ok(None)` when the VM is
    /// gone from the whole cluster; `Ok(Some(vm))` with its current location otherwise.
    pub(super) async fn verify(
        &self,
        action: &'static str,
        expected: &ExpectedVm,
    ) -> Result<Option<VmRef>, ProxmoxError> {
        let mut at = expected.vm.clone();
        let config = match self.vm_config(&at).await {
            Ok(config) => config,
            Err(err) if err.is_not_found() => {
                // Moved to another node (migration), or gone.
                let moved = self.resources("vm").await?.into_iter().find(|entry| {
                    uint(entry, "vmid") == Some(u64::from(at.vmid.0))
                        && text(entry, "type").as_deref() == Some("qemu")
                });
                match moved.and_then(|entry| text(&entry, "node")) {
                    Some(node) if node != at.node.0 => {
                        at.node = PveNode(node);
                        self.vm_config(&at).await?
                    }
                    _ => return Ok(None),
                }
            }
            Err(err) => return Err(err),
        };
        let name = text(&config, "name").unwrap_or_default();
        let refuse = |reason: String| ProxmoxError::NotOurs {
            action,
            vmid: at.vmid,
            node: at.node.0.clone(),
            reason,
        };
        if name != expected.name.as_str() {
            return Err(refuse(format!(
                "it is named `{name}`, not `{}`",
                expected.name
            )));
        }
        let owner = owner_of(at.vmid, &config);
        match owner {
            Some(VmOwner { ownership, .. })
                if ownership.cluster == expected.ownership.cluster
                    && ownership.role == expected.ownership.role
                    && ownership.pool == expected.ownership.pool =>
            {
                Ok(Some(at))
            }
            Some(VmOwner { ownership, .. }) => Err(refuse(format!(
                "it belongs to cluster {} ({} in pool {}), not cluster {} ({} in pool {})",
                ownership.cluster,
                ownership.role,
                ownership.pool,
                expected.ownership.cluster,
                expected.ownership.role,
                expected.ownership.pool
            ))),
            None => Err(refuse("it carries no capstan ownership".into())),
        }
    }

    pub(super) async fn post_task(
        &self,
        vm: &VmRef,
        suffix: &str,
        params: Params,
    ) -> Result<(), ProxmoxError> {
        let data = self
            .api
            .call_value(
                Method::Post,
                &vm_path(vm, suffix),
                &params,
                Retry::Transient,
            )
            .await?;
        self.await_data(data).await
    }

    async fn hard_stop(&self, vm: &VmRef) -> Result<(), ProxmoxError> {
        self.post_task(vm, "/status/stop", Vec::new()).await
    }

    async fn is_running(&self, vm: &VmRef) -> Result<bool, ProxmoxError> {
        let status = self.vm_status(vm).await?;
        Ok(text(&status, "status").as_deref() == Some("running"))
    }

    /// Waits while a VM holds a config lock (a clone still copying its disk).
    async fn wait_unlocked(&self, vm: &VmRef) -> Result<(), ProxmoxError> {
        let started = Instant::now();
        loop {
            let status = self.vm_status(vm).await?;
            if text(&status, "lock").is_none() {
                return Ok(());
            }
            if started.elapsed() >= self.options.task_timeout {
                return Err(ProxmoxError::TaskTimeout {
                    upid: format!("(lock on VM {})", vm.vmid),
                    waited: started.elapsed(),
                });
            }
            tokio::time::sleep(self.options.task_poll_max).await;
        }
    }

    async fn set_tags(&self, vm: &VmRef, tags: &[String]) -> Result<(), ProxmoxError> {
        let params: Params = vec![("tags".into(), tags.join(";"))];
        self.post_task(vm, "/config", params).await
    }

    /// A VMID for a new clone: Proxmox's next free one, or, when a clone of ours in flight
    /// holds that, the first one past ours that Proxmox says is free (at most
    /// `VMID_PROBES` asked); held until the claim is dropped.
    async fn claim_vmid(&self) -> Result<super::vmids::Claim, ProxmoxError> {
        const VMID_PROBES: u32 = 32;
        let offered = self.next_vmid(None).await?;
        let mut candidate = self.vmids.first_unclaimed_from(offered);
        for _ in 0..VMID_PROBES {
            let free = candidate == offered
                || match self.next_vmid(Some(candidate)).await {
                    Ok(_) => true,
                    Err(ProxmoxError::Api { .. }) => false,
                    Err(err) => return Err(err),
                };
            if free && let Some(claim) = self.vmids.try_claim(candidate) {
                return Ok(claim);
            }
            candidate = self
                .vmids
                .first_unclaimed_from(VmId(candidate.0.saturating_add(1)));
        }
        // Every probe taken: Proxmox's own answer, unheld; the clone's "already exists" retry
        // settles it.
        Ok(super::vmids::Claim::unheld(offered))
    }

    /// Asks Proxmox for the next free VMID (not reserved: a concurrent clone may take it), or
    /// whether `wanted` is free (an error when it is not).
    async fn next_vmid(&self, wanted: Option<VmId>) -> Result<VmId, ProxmoxError> {
        let params: Params = wanted
            .map(|id| vec![("vmid".into(), id.to_string())])
            .unwrap_or_default();
        let data = self
            .api
            .call_value(Method::Get, "/cluster/nextid", &params, Retry::Transient)
            .await?;
        as_u64(&data)
            .and_then(|id| u32::try_from(id).ok())
            .map(VmId)
            .ok_or_else(|| ProxmoxError::Decode {
                method: "GET",
                path: "/cluster/nextid".into(),
                reason: format!("`{data}` is not a VMID"),
            })
    }
}

impl ProxmoxProvider for ProxmoxClient {
    fn guest_agent_calls(&self) -> u64 {
        ProxmoxClient::guest_agent_calls(self)
    }

    async fn storage_content(
        &self,
        node: &PveNode,
        storage: &str,
    ) -> Result<BTreeSet<StorageContent>, ProxmoxError> {
        self.read_storage_content(node, storage).await
    }

    async fn storage_volumes(
        &self,
        node: &PveNode,
        storage: &str,
        content: StorageContent,
    ) -> Result<Vec<StoredVolume>, ProxmoxError> {
        self.list_volumes(node, storage, content).await
    }

    async fn upload_iso(
        &self,
        node: &PveNode,
        storage: &str,
        file_name: &str,
        image: &[u8],
    ) -> Result<VolumeId, ProxmoxError> {
        self.send_iso(node, storage, file_name, image).await
    }

    async fn delete_volume(&self, node: &PveNode, volume: &VolumeId) -> Result<(), ProxmoxError> {
        self.remove_volume(node, volume).await
    }

    async fn attach_cdrom(&self, vm: &VmRef, volume: &VolumeId) -> Result<(), ProxmoxError> {
        self.insert_cdrom(vm, volume).await
    }

    async fn detach_cdrom(&self, vm: &VmRef, volume: &VolumeId) -> Result<(), ProxmoxError> {
        self.eject_cdrom(vm, volume).await
    }

    async fn inventory(&self) -> Result<Inventory, ProxmoxError> {
        // One listing of every resource: nodes, VMs, templates and storages.
        let entries: Vec<Value> = self
            .api
            .call(
                Method::Get,
                "/cluster/resources",
                &Vec::new(),
                Retry::Transient,
            )
            .await?;
        let of_type = |kind: &str| -> Vec<&Value> {
            entries
                .iter()
                .filter(|entry| text(entry, "type").as_deref() == Some(kind))
                .collect()
        };
        let vm_entries = of_type("qemu");
        let storage_space = of_type("storage")
            .into_iter()
            .filter_map(storage_space)
            .collect();
        let storages: std::collections::BTreeMap<String, bool> = of_type("storage")
            .into_iter()
            .filter_map(|entry| Some((text(entry, "storage")?, flag(entry, "shared"))))
            .collect();
        let mut nodes: Vec<HostInfo> = of_type("node").into_iter().filter_map(host).collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let online = |node: &str| nodes.iter().any(|n| n.name.0 == node && n.online);
        let mut vms = Vec::new();
        for entry in &vm_entries {
            let (Some(vmid), Some(node)) = (uint(entry, "vmid"), text(entry, "node")) else {
                continue;
            };
            let Ok(vmid) = u32::try_from(vmid) else {
                continue;
            };
            let name = text(entry, "name").unwrap_or_default();
            let tags = text(entry, "tags")
                .map(|raw| ownership::split_tags(&raw))
                .unwrap_or_default();
            let power = match text(entry, "status").as_deref() {
                Some("running") => PowerState::Running,
                Some("stopped") => PowerState::Stopped,
                _ => PowerState::Unknown,
            };
            let parsed = ownership::parse_tags(&tags);
            let refused = parsed.is_err();
            let mut owner = accepted(VmId(vmid), parsed);
            // A VM named like ours but not (fully) tagged: a crash between clone and tag.
            // Its description, written by the clone call itself, tells.
            if owner.is_none() && !refused && ownership::has_capstan_name(&name) && online(&node) {
                let vm = VmRef {
                    node: PveNode(node.clone()),
                    vmid: VmId(vmid),
                };
                match self.vm_config(&vm).await {
                    Ok(config) => owner = owner_of(VmId(vmid), &config),
                    Err(err) if err.is_not_found() => continue,
                    Err(err) => return Err(err),
                }
            }
            vms.push(VmInfo {
                vmid: VmId(vmid),
                node: PveNode(node),
                name,
                power,
                tags,
                is_template: flag(entry, "template"),
                cores: float(entry, "maxcpu").unwrap_or(0.0) as u32,
                memory_mib: uint(entry, "maxmem").unwrap_or(0) / MIB,
                disk_bytes: uint(entry, "maxdisk").unwrap_or(0),
                lock: text(entry, "lock").filter(|lock| !lock.is_empty()),
                owner,
                pool: text(entry, "pool").filter(|pool| !pool.is_empty()),
            });
        }
        vms.sort_by_key(|vm| vm.vmid);
        let templates = self
            .templates
            .templates(&vm_entries, &storages, online, |vm| async move {
                self.vm_config(&vm).await
            })
            .await?;
        Ok(Inventory {
            nodes,
            vms,
            storages,
            templates,
            storage_space,
        })
    }

    async fn clone_vm(&self, request: &CloneRequest) -> Result<VmRef, ProxmoxError> {
        let listing = self.resources("vm").await?;
        let tags = ownership::encode_tags(&request.ownership, request.created);
        // Idempotence: a previous attempt (maybe cut short by a crash) already made it.
        let existing = listing.iter().find(|entry| {
            text(entry, "name").as_deref() == Some(request.name.as_str())
                && !flag(entry, "template")
        });
        if let Some(entry) = existing {
            let vm = VmRef {
                node: PveNode(text(entry, "node").unwrap_or_default()),
                vmid: VmId(uint(entry, "vmid").unwrap_or(0) as u32),
            };
            let expected = ExpectedVm {
                vm: vm.clone(),
                name: request.name.clone(),
                ownership: request.ownership.clone(),
            };
            if let Some(vm) = self.verify("adopt", &expected).await? {
                self.wait_unlocked(&vm).await?;
                // A crash may have come after the VM's address was chosen and configured:
                // its facts stay.
                let existing = text(&self.vm_config(&vm).await?, "tags").unwrap_or_default();
                let tags = ownership::with_recorded_facts(tags, &existing);
                self.set_tags(&vm, &tags).await?;
                return Ok(vm);
            }
        }
        let source = self
            .templates
            .clone_source(&listing, &request.template, &request.target)
            .ok_or_else(|| ProxmoxError::TemplateNotFound {
                template: request.template.clone(),
            })?;
        let description = ownership::encode_description(
            &request.ownership,
            request.created,
            request.built_from.as_deref(),
        );
        let mut tried = Vec::new();
        for _ in 0..self.options.clone_attempts.max(1) {
            let claim = self.claim_vmid().await?;
            let newid = claim.id();
            tried.push(newid);
            let mut params: Params = vec![
                ("newid".into(), newid.to_string()),
                ("name".into(), request.name.to_string()),
                ("description".into(), description.clone()),
                ("full".into(), "1".into()),
            ];
            if source.node != request.target {
                params.push(("target".into(), request.target.to_string()));
            }
            if let Some(pool) = &request.pool {
                params.push(("pool".into(), pool.clone()));
            }
            if let Some(storage) = &request.storage {
                params.push(("storage".into(), storage.clone()));
            }
            let result = self
                .api
                .call_value(
                    Method::Post,
                    &vm_path(&source, "/clone"),
                    &params,
                    Retry::Transient,
                )
                .await;
            let upid = match result {
                Ok(data) => data,
                Err(ProxmoxError::Api { message, .. }) if message.contains("already exists") => {
                    tracing::debug!(vmid = %newid, "vmid taken by a concurrent clone, retrying");
                    continue;
                }
                Err(err) => return Err(err),
            };
            match self.await_data(upid).await {
                Ok(()) => {}
                Err(ProxmoxError::TaskFailed(failure))
                    if failure.exitstatus.contains("already exists") =>
                {
                    continue;
                }
                Err(err) => return Err(err),
            }
            let vm = VmRef {
                node: request.target.clone(),
                vmid: newid,
            };
            tracing::info!(vmid = %newid, node = %vm.node, name = %request.name, "vm cloned");
            self.set_tags(&vm, &tags).await?;
            return Ok(vm);
        }
        Err(ProxmoxError::VmidExhausted {
            name: request.name.to_string(),
            tried,
        })
    }

    async fn configure_vm(&self, vm: &VmRef, settings: &VmSettings) -> Result<(), ProxmoxError> {
        self.write_config(vm, settings).await
    }

    async fn hardware_facts(
        &self,
        nodes: &[PveNode],
    ) -> Result<super::HardwareFacts, ProxmoxError> {
        self.read_hardware_facts(nodes).await
    }

    async fn ensure_pool(&self, pool: &str, create: bool) -> Result<(), ProxmoxError> {
        self.make_pool(pool, create).await
    }

    async fn place_vm(
        &self,
        expected: &ExpectedVm,
        filing: &super::VmFiling,
    ) -> Result<(), ProxmoxError> {
        self.file_vm(expected, filing).await
    }

    async fn resize_disk(&self, vm: &VmRef, size_gib: u32) -> Result<ResizeOutcome, ProxmoxError> {
        let config = self.vm_config(vm).await?;
        let (disk, current) = boot_disk(&config).ok_or(ProxmoxError::NoDisk { vmid: vm.vmid })?;
        let requested = u64::from(size_gib) * GIB;
        if current == requested {
            return Ok(ResizeOutcome::Unchanged);
        }
        if current > requested {
            return Err(ProxmoxError::ShrinkDisk {
                vmid: vm.vmid,
                disk,
                current_bytes: current,
                requested_bytes: requested,
            });
        }
        let params: Params = vec![
            ("disk".into(), disk),
            ("size".into(), format!("{size_gib}G")),
        ];
        let data = self
            .api
            .call_value(
                Method::Put,
                &vm_path(vm, "/resize"),
                &params,
                Retry::Transient,
            )
            .await?;
        self.await_data(data).await?;
        Ok(ResizeOutcome::Grown)
    }

    async fn start_vm(&self, vm: &VmRef) -> Result<(), ProxmoxError> {
        if self.is_running(vm).await? {
            return Ok(());
        }
        match self.post_task(vm, "/status/start", Vec::new()).await {
            Err(ProxmoxError::TaskFailed(failure))
                if failure.exitstatus.contains("already running") =>
            {
                Ok(())
            }
            other => other,
        }
    }

    async fn shutdown_vm(
        &self,
        expected: &ExpectedVm,
        timeout: Duration,
    ) -> Result<(), ProxmoxError> {
        let Some(vm) = self.verify("shut down", expected).await? else {
            return Ok(());
        };
        if !self.is_running(&vm).await? {
            return Ok(());
        }
        let params: Params = vec![("timeout".into(), timeout.as_secs().max(1).to_string())];
        let data = self
            .api
            .call_value(
                Method::Post,
                &vm_path(&vm, "/status/shutdown"),
                &params,
                Retry::Transient,
            )
            .await?;
        let clean = match data {
            Value::String(upid) => {
                // Proxmox enforces `timeout` itself; the margin covers task start and polling.
                self.wait_task_for(&upid, timeout + Duration::from_secs(30))
                    .await
            }
            _ => Ok(()),
        };
        match clean {
            Ok(()) if !self.is_running(&vm).await? => Ok(()),
            Ok(())
            | Err(ProxmoxError::TaskFailed { .. })
            | Err(ProxmoxError::TaskTimeout { .. }) => {
                tracing::info!(vmid = %vm.vmid, node = %vm.node, "clean shutdown failed, stopping");
                self.hard_stop(&vm).await
            }
            Err(err) => Err(err),
        }
    }

    async fn stop_vm(&self, expected: &ExpectedVm) -> Result<(), ProxmoxError> {
        let Some(vm) = self.verify("stop", expected).await? else {
            return Ok(());
        };
        // Stopping a stopped VM succeeds on Proxmox too; the status read saves a task.
        if !self.is_running(&vm).await? {
            return Ok(());
        }
        self.hard_stop(&vm).await
    }

    async fn vm_description(&self, vm: &VmRef) -> Result<String, ProxmoxError> {
        Ok(text(&self.vm_config(vm).await?, "description").unwrap_or_default())
    }

    async fn add_tag(&self, expected: &ExpectedVm, tag: &str) -> Result<(), ProxmoxError> {
        let Some(vm) = self.verify("tag", expected).await? else {
            return Ok(());
        };
        let config = self.vm_config(&vm).await?;
        let mut tags = ownership::split_tags(&text(&config, "tags").unwrap_or_default());
        if tags.iter().any(|existing| existing == tag) {
            return Ok(());
        }
        tags.push(tag.to_owned());
        // PUT config is synchronous (no task) and merges: only `tags` changes.
        let params: Params = vec![("tags".into(), tags.join(";"))];
        self.api
            .call_value(
                Method::Put,
                &vm_path(&vm, "/config"),
                &params,
                Retry::Transient,
            )
            .await
            .map(|_| ())
    }

    async fn destroy_vm(&self, expected: &ExpectedVm) -> Result<(), ProxmoxError> {
        let Some(vm) = self.verify("destroy", expected).await? else {
            return Ok(());
        };
        if self.is_running(&vm).await? {
            self.hard_stop(&vm).await?;
        }
        let params: Params = vec![
            ("purge".into(), "1".into()),
            ("destroy-unreferenced-disks".into(), "1".into()),
        ];
        let result = self
            .api
            .call_value(Method::Delete, &vm_path(&vm, ""), &params, Retry::Transient)
            .await;
        let outcome = match result {
            Ok(data) => self.await_data(data).await,
            Err(err) => Err(err),
        };
        match outcome {
            Err(err) if err.is_not_found() => Ok(()),
            Err(ProxmoxError::TaskFailed(failure))
                if failure.exitstatus.contains("does not exist") =>
            {
                Ok(())
            }
            other => {
                if other.is_ok() {
                    tracing::info!(vmid = %vm.vmid, node = %vm.node, "vm destroyed");
                }
                other
            }
        }
    }

    async fn agent_ping(&self, vm: &VmRef) -> Result<(), ProxmoxError> {
        self.agent_call(Method::Post, vm, "ping", &Vec::new())
            .await
            .map(|_| ())
    }

    async fn await_agent(&self, vm: &VmRef) -> Result<bool, ProxmoxError> {
        let started = Instant::now();
        loop {
            match self.agent_ping(vm).await {
                Ok(()) => return Ok(true),
                Err(err) if err.is_agent_unavailable() => {}
                Err(err) => return Err(err),
            }
            if started.elapsed() >= self.options.agent_wait {
                return Ok(false);
            }
            tokio::time::sleep(self.options.agent_poll).await;
        }
    }

    async fn run_command(
        &self,
        vm: &VmRef,
        command: &[String],
        input: Option<&str>,
        timeout: Duration,
    ) -> Result<CommandOutput, ProxmoxError> {
        let started = Instant::now();
        let pid = self.agent_exec(vm, command, input).await?;
        let program = command.first().map_or("", String::as_str);
        loop {
            if let ExecStatus::Exited(output) = self.agent_exec_status(vm, pid, program).await? {
                return Ok(output);
            }
            if started.elapsed() >= timeout {
                return Err(ProxmoxError::CommandTimeout {
                    vmid: vm.vmid,
                    program: command.first().cloned().unwrap_or_default(),
                    timeout,
                });
            }
            tokio::time::sleep(self.options.agent_poll).await;
        }
    }

    async fn vm_hardware(&self, vm: &VmRef) -> Result<super::VmHardware, ProxmoxError> {
        Ok(super::VmHardware::from_config(&self.vm_config(vm).await?))
    }

    async fn vm_addresses(&self, vm: &VmRef) -> Result<Vec<Ipv4Addr>, ProxmoxError> {
        let data = self
            .agent_call(Method::Get, vm, "network-get-interfaces", &Vec::new())
            .await?;
        let mut addresses = Vec::new();
        for interface in data
            .get("result")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for address in interface
                .get("ip-addresses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if text(address, "ip-address-type").as_deref() != Some("ipv4") {
                    continue;
                }
                if let Some(ip) = text(address, "ip-address").and_then(|ip| ip.parse().ok()) {
                    let ip: Ipv4Addr = ip;
                    if !ip.is_loopback() && !addresses.contains(&ip) {
                        addresses.push(ip);
                    }
                }
            }
        }
        Ok(addresses)
    }

    async fn write_file(&self, vm: &VmRef, path: &str, content: &[u8]) -> Result<(), ProxmoxError> {
        let encoded = base64::engine::general_purpose::STANDARD.encode(content);
        if encoded.len() > FILE_WRITE_MAX_CHARS {
            return Err(ProxmoxError::FileTooLarge {
                path: path.to_owned(),
                bytes: content.len(),
                max: FILE_WRITE_MAX_CHARS / 4 * 3,
            });
        }
        // `encode=0`: the content is base64 already, so binary files survive the trip.
        let params: Params = vec![
            ("file".into(), path.to_owned()),
            ("content".into(), encoded),
            ("encode".into(), "0".into()),
        ];
        self.agent_call(Method::Post, vm, "file-write", &params)
            .await
            .map(|_| ())
    }
}

/// A storage's space and content on one node, from its `/cluster/resources` entry.
fn storage_space(entry: &Value) -> Option<super::StorageSpace> {
    Some(super::StorageSpace {
        node: text(entry, "node")?,
        storage: text(entry, "storage")?,
        content: text(entry, "content")
            .map(|c| c.split(',').map(str::to_owned).collect())
            .unwrap_or_default(),
        total_bytes: uint(entry, "maxdisk").unwrap_or(0),
        used_bytes: uint(entry, "disk").unwrap_or(0),
        available: text(entry, "status").as_deref() == Some("available"),
    })
}

/// A Proxmox node, from its `/cluster/resources` entry.
fn host(entry: &Value) -> Option<HostInfo> {
    Some(HostInfo {
        name: PveNode(text(entry, "node")?),
        online: text(entry, "status").as_deref() == Some("online"),
        cpu_capacity: float(entry, "maxcpu").unwrap_or(0.0) as u32,
        cpu_usage: float(entry, "cpu").unwrap_or(0.0),
        memory_capacity_bytes: uint(entry, "maxmem").unwrap_or(0),
        memory_used_bytes: uint(entry, "mem").unwrap_or(0),
    })
}
