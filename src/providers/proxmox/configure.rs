//! Configuring a new VM in one config call: cores and sockets, memory, vCPU type, the guest
//! agent, tags (capstan's, the facts capstan recorded, the operator's), the description,
//! cloud-init, and the hardware of `machine_config`.
//!
//! # Guarantees
//! - Idempotent: the call is computed against the VM's config as it is (disks are not
//!   allocated twice, cards keep their MAC, recorded facts such as a static address stay).
//! - One `POST config`: Proxmox allocates the new disks in its `qmconfig` task and refuses the
//!   whole call when one value is wrong, so a VM is never half configured by it.

use serde_json::Value;

use super::api::{Params, segment};
use super::client::ProxmoxClient;
use super::error::ProxmoxError;
use super::machine_config::{boot_storage, hardware_params};
use super::ownership;
use super::wire::text;
use super::{VmRef, VmSettings};

impl ProxmoxClient {
    /// [`super::ProxmoxProvider::configure_vm`].
    pub(super) async fn write_config(
        &self,
        vm: &VmRef,
        settings: &VmSettings,
    ) -> Result<(), ProxmoxError> {
        let config = self.vm_config(vm).await?;
        let params = config_params(&config, settings);
        self.post_task(vm, "/config", params).await
    }
}

/// The parameters of [`ProxmoxClient::write_config`] for a VM whose config is `config`.
fn config_params(config: &Value, settings: &VmSettings) -> Params {
    let hardware = &settings.hardware;
    let mut params: Params = vec![
        ("cores".into(), settings.cores.to_string()),
        ("sockets".into(), hardware.sockets().to_string()),
        ("memory".into(), settings.memory_mib.to_string()),
        ("cpu".into(), settings.cpu_type.clone()),
        ("agent".into(), "1".into()),
        ("tags".into(), tags(config, settings).join(";")),
        (
            "description".into(),
            ownership::with_tags_record(
                &ownership::encode_description(
                    &settings.ownership,
                    settings.created,
                    settings.built_from.as_deref(),
                ),
                &settings.tags,
            ),
        ),
    ];
    if let Some(cloud_init) = &settings.cloud_init {
        for (index, ipconfig) in &cloud_init.ipconfigs {
            params.push((format!("ipconfig{index}"), ipconfig.clone()));
        }
        if !cloud_init.nameservers.is_empty() {
            let servers: Vec<String> = cloud_init
                .nameservers
                .iter()
                .map(ToString::to_string)
                .collect();
            params.push(("nameserver".into(), servers.join(" ")));
        }
        if let Some(domain) = &cloud_init.search_domain {
            params.push(("searchdomain".into(), domain.clone()));
        }
        if let Some(user) = &cloud_init.user {
            params.push(("ciuser".into(), user.clone()));
        }
        if let Some(keys) = &cloud_init.ssh_keys {
            // `sshkeys` has format `urlencoded`: Proxmox wants it percent-encoded itself.
            params.push(("sshkeys".into(), segment(keys)));
        }
    }
    let default_storage = settings
        .disk_storage
        .clone()
        .or_else(|| boot_storage(config))
        .unwrap_or_else(|| "local-lvm".into());
    params.extend(hardware_params(config, hardware, &default_storage));
    params
}

/// capstan's ownership tags, the facts capstan recorded on the VM before (a static address
/// chosen by an earlier attempt), then the operator's.
fn tags(config: &Value, settings: &VmSettings) -> Vec<String> {
    let mut tags = ownership::with_recorded_facts(
        ownership::encode_tags(&settings.ownership, settings.created),
        &text(config, "tags").unwrap_or_default(),
    );
    for tag in &settings.tags {
        if !tags.contains(tag) {
            tags.push(tag.clone());
        }
    }
    tags
}
