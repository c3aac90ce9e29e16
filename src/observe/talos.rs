//! A Talos cluster's admin kubeconfig: computed from its secrets bundle (a Talos node has no
//! shell to print one), only once the bundle is marked bootstrapped, so a cluster whose etcd
//! was never bootstrapped has none and the planner bootstraps it.

use crate::connect::Providers;
use crate::providers::node_exec::NodeTarget;
use crate::providers::proxmox::VmInfo;
use crate::providers::talos::kubeconfig;
use crate::records::talos as store;
use crate::spec::Cluster;

use super::guest::running_control_planes;

/// The admin kubeconfig of Talos cluster `name`, with the first running control plane as
/// where it stands for; `None` before the bootstrap, without a running control plane, or
/// when the management cluster cannot be read (said at debug level; the next pass retries).
pub(super) async fn talos_admin_kubeconfig<Pr: Providers>(
    providers: &Pr,
    name: &str,
    cluster: &Cluster,
    vms: &[VmInfo],
) -> Option<(NodeTarget, String)> {
    let target = running_control_planes(vms).into_iter().next()?;
    let preferred = cluster
        .spec
        .delivery
        .flux
        .as_ref()
        .map(|f| f.cluster.as_str());
    let management = providers.management(preferred)?;
    // A bundle an earlier capstan made is adopted once a machine was prepared from it (a new
    // cluster's machines never are from a deleted one's bundle: its first config is refused).
    let live = vms.iter().any(|vm| {
        vm.tags
            .iter()
            .any(|tag| tag == crate::observed::PREPARED_TAG)
    });
    let stored = match store::stored(management, name, live).await {
        Ok(Some(stored)) if stored.bootstrapped => stored,
        Ok(_) => return None,
        Err(err) => {
            tracing::debug!(cluster = name, error = %crate::errors::error_chain(&err), "cannot read the Talos secrets bundle");
            return None;
        }
    };
    let now = time::OffsetDateTime::now_utc();
    match kubeconfig::admin_kubeconfig(name, &stored.bundle, &cluster.spec.endpoint, now) {
        Ok(text) => Some((target, text)),
        Err(err) => {
            tracing::warn!(cluster = name, error = %crate::errors::error_chain(&err), "cannot compute the Talos admin kubeconfig");
            None
        }
    }
}
