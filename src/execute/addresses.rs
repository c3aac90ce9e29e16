//! A new machine's static address, when its cluster declares `network.nodeAddresses` (every
//! distribution): chosen and recorded as a tag on its VM before anything that carries it is
//! written (kubeadm and K3s: the VM's cloud-init settings; Talos: its machine config).
//!
//! # Guarantees
//! - A VM that already carries an address tag (a retry after a crash) keeps that address
//!   (adopting a half-made VM keeps its `capstan-…` facts); so does one the pass observed
//!   with it. Only
//!   while the address is inside `network.nodeAddresses` and no other VM holds it: a tag is
//!   anyone's to write who may tag VMs, so one outside the range or naming another VM's
//!   address is ignored (with a warning naming it) and the machine takes a free address.
//! - A new address is the lowest of the range that no other VM holds (any VM's tag counts,
//!   the cluster's or not), read fresh from Proxmox and from what the pass observed, under the
//!   executor's lock: two machines created at once never get the same one.

use std::collections::BTreeSet;
use std::net::IpAddr;

use capstan_core::talos::{
    StaticAddress, address_tag, choose_address, static_address, tagged_addresses, trusted_address,
};

use crate::connect::Providers;
use crate::execute::{ExecuteError, Executor, StepContext};
use crate::model::NodeName;
use crate::plan::ActionKind;
use crate::providers::proxmox::{ExpectedVm, ProxmoxProvider as _, VmRef};
use crate::spec::ClusterSpec;

use super::access::proxmox_failed;

/// The static address `name` (VM `vm`) is configured with; `None` when the cluster's VMs
/// take DHCP leases.
///
/// # Errors
/// When Proxmox cannot be read or tagged, or every address of the range is held.
pub(super) async fn node_address<Pr: Providers>(
    ex: &Executor<Pr>,
    ctx: StepContext<'_>,
    spec: &ClusterSpec,
    vm: &VmRef,
    name: &NodeName,
) -> Result<Option<StaticAddress>, ExecuteError> {
    let Some(range) = spec.network.node_addresses else {
        return Ok(None);
    };
    let action = ActionKind::CreateMachine;
    let proxmox = ex.proxmox(ctx)?;
    let _choosing = ex.address_choice().await;
    let inventory = proxmox
        .inventory()
        .await
        .map_err(proxmox_failed("list the VMs holding addresses"))?;
    let this = inventory
        .owned_by(ctx.cluster)
        .find(|info| info.vm_ref() == *vm);
    let observed_tags = |machine: &NodeName| -> Vec<IpAddr> {
        ctx.observed
            .machines
            .get(machine)
            .map(|observed| tagged_addresses(&observed.tags).collect())
            .unwrap_or_default()
    };
    let mut taken: BTreeSet<IpAddr> = inventory
        .vms
        .iter()
        .filter(|info| info.vm_ref() != *vm && info.name != name.as_str())
        .flat_map(|info| tagged_addresses(&info.tags).collect::<Vec<_>>())
        .collect();
    taken.extend(
        ctx.observed
            .machines
            .keys()
            .filter(|machine| *machine != name)
            .flat_map(observed_tags),
    );
    let own_tags: Vec<String> = this.map(|info| info.tags.clone()).unwrap_or_default();
    let held = trusted_address(&own_tags, range, &taken).or_else(|| {
        let observed: Vec<String> = observed_tags(name)
            .iter()
            .map(|a| address_tag(*a))
            .collect();
        trusted_address(&observed, range, &taken)
    });
    if held.is_none()
        && let Some(ignored) = tagged_addresses(&own_tags).next()
    {
        tracing::warn!(cluster = ctx.cluster, machine = %name, %ignored, %range, "a static address tag outside the range or held by another VM is ignored");
    }
    let address = match held {
        Some(address) => address,
        None => choose_address(range, &taken).ok_or_else(|| ExecuteError::NoFreeAddress {
            action,
            machine: name.clone(),
            range: range.to_string(),
        })?,
    };
    // Recorded before the config is rendered: a crash after this finds the address again.
    let owner =
        this.and_then(|info| info.owner.as_ref())
            .ok_or_else(|| ExecuteError::VmNotListed {
                action,
                machine: name.clone(),
            })?;
    let expected = ExpectedVm {
        vm: vm.clone(),
        name: name.clone(),
        ownership: owner.ownership.clone(),
    };
    proxmox
        .add_tag(&expected, &address_tag(address))
        .await
        .map_err(proxmox_failed("tag the static address"))?;
    tracing::info!(cluster = ctx.cluster, machine = %name, %address, "static address chosen");
    Ok(Some(static_address(&spec.network, address)))
}
