//! What Proxmox offers a machine's hardware (each node's bridges, the resource pools, the PCI
//! mappings), making a resource pool, and filing a VM in place (its tags and pool).

use serde_json::Value;

use super::api::{Method, Params, Retry, segment};
use super::client::ProxmoxClient;
use super::error::ProxmoxError;
use super::ownership;
use super::wire::{text, uint, vm_path};
use super::{ExpectedVm, HardwareFacts, PveNode, VmFiling};

impl ProxmoxClient {
    /// [`super::ProxmoxProvider::hardware_facts`].
    pub(super) async fn read_hardware_facts(
        &self,
        nodes: &[PveNode],
    ) -> Result<HardwareFacts, ProxmoxError> {
        let mut facts = HardwareFacts::default();
        for node in nodes {
            let params: Params = vec![("type".into(), "any_bridge".into())];
            let interfaces: Vec<Value> = self
                .api
                .call(
                    Method::Get,
                    &format!("/nodes/{}/network", segment(&node.0)),
                    &params,
                    Retry::Transient,
                )
                .await?;
            let mut bridges: Vec<(String, Option<u32>)> = interfaces
                .iter()
                .filter_map(|entry| {
                    let mtu = uint(entry, "mtu").and_then(|m| u32::try_from(m).ok());
                    Some((text(entry, "iface")?, mtu))
                })
                .collect();
            bridges.sort();
            facts.bridges.insert(node.0.clone(), bridges);
        }
        let pools: Vec<Value> = self
            .api
            .call(Method::Get, "/pools", &Vec::new(), Retry::Transient)
            .await?;
        facts.pools = pools
            .iter()
            .filter_map(|entry| text(entry, "poolid"))
            .collect();
        facts.pools.sort();
        let mappings: Vec<Value> = self
            .api
            .call(
                Method::Get,
                "/cluster/mapping/pci",
                &Vec::new(),
                Retry::Transient,
            )
            .await?;
        for mapping in &mappings {
            let Some(id) = text(mapping, "id") else {
                continue;
            };
            // `map` is a list of property strings `node=pve1,path=0000:01:00.0,id=10de:2235`.
            let nodes: Vec<String> = mapping
                .get("map")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter_map(|entry| {
                    entry
                        .split(',')
                        .find_map(|part| part.strip_prefix("node="))
                        .map(str::to_owned)
                })
                .collect();
            facts.pci_mappings.insert(id, nodes);
        }
        Ok(facts)
    }

    /// [`super::ProxmoxProvider::ensure_pool`].
    pub(super) async fn make_pool(&self, pool: &str, create: bool) -> Result<(), ProxmoxError> {
        let pools: Vec<Value> = self
            .api
            .call(Method::Get, "/pools", &Vec::new(), Retry::Transient)
            .await?;
        let existing: Vec<String> = pools
            .iter()
            .filter_map(|entry| text(entry, "poolid"))
            .collect();
        if existing.iter().any(|id| id == pool) {
            return Ok(());
        }
        if !create {
            return Err(ProxmoxError::PoolMissing {
                pool: pool.to_owned(),
                existing: if existing.is_empty() {
                    "none".into()
                } else {
                    existing.join(", ")
                },
            });
        }
        let params: Params = vec![
            ("poolid".into(), pool.to_owned()),
            (
                "comment".into(),
                "created by capstan for machine.pool".into(),
            ),
        ];
        match self
            .api
            .call_value(Method::Post, "/pools", &params, Retry::Transient)
            .await
        {
            Ok(_) => {
                tracing::info!(pool, "resource pool created");
                Ok(())
            }
            // Made meanwhile by someone else (or by a retried call): there it is.
            Err(ProxmoxError::Api { message, .. }) if message.contains("already exists") => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// [`super::ProxmoxProvider::place_vm`].
    pub(super) async fn file_vm(
        &self,
        expected: &ExpectedVm,
        filing: &VmFiling,
    ) -> Result<(), ProxmoxError> {
        let tags = &filing.tags;
        let Some(vm) = self.verify("file", expected).await? else {
            return Ok(());
        };
        let config = self.vm_config(&vm).await?;
        let description = text(&config, "description").unwrap_or_default();
        let recorded = ownership::recorded_tags(&description);
        let mut written: Vec<String> =
            ownership::split_tags(&text(&config, "tags").unwrap_or_default())
                .into_iter()
                // Capstan's own stay; its former operator tags go unless still declared; anyone
                // else's stay unless told to remove them.
                .filter(|tag| {
                    ownership::is_capstan_tag(tag)
                        || tags.contains(tag)
                        || (!filing.remove_foreign && !recorded.contains(tag))
                })
                .collect();
        for tag in tags {
            if !written.contains(tag) {
                written.push(tag.clone());
            }
        }
        let params: Params = vec![
            ("tags".into(), written.join(";")),
            (
                "description".into(),
                ownership::with_tags_record(&description, tags),
            ),
        ];
        // PUT config is synchronous and merges: only tags and description change.
        self.api
            .call_value(
                Method::Put,
                &vm_path(&vm, "/config"),
                &params,
                Retry::Transient,
            )
            .await?;
        if let Some(pool) = &filing.pool {
            let params: Params = vec![
                ("poolid".into(), pool.clone()),
                ("vms".into(), vm.vmid.to_string()),
                ("allow-move".into(), "1".into()),
            ];
            self.api
                .call_value(Method::Put, "/pools", &params, Retry::Transient)
                .await?;
        }
        Ok(())
    }
}
