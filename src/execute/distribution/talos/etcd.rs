//! A control plane's etcd member leaves with it, and no member outlives its machine: the
//! member list ends equal to the control-plane machines (the stale member behind "expected to
//! have 4 members, got 3").

use crate::connect::Providers;
use crate::execute::{ExecuteError, Executor, StepContext, fenced};
use crate::model::NodeName;
use crate::plan::ActionKind;
use crate::providers::node_exec::NodeTarget;
use crate::providers::talos::api::{GrpcTalosApi, TalosApi as _};

use super::{TalosError, bundle, credentials, failed};

const ACTION: ActionKind = ActionKind::DeleteNode;

/// `node`'s member leaves etcd: through its own Talos API when it answers (forfeiting
/// leadership first, so the cluster elects another leader before losing this one), else
/// removed by id through a healthy control plane; members of no machine are removed too.
pub(super) async fn leave<Pr: Providers>(
    ex: &Executor<Pr>,
    ctx: StepContext<'_>,
    node: &NodeName,
) -> Result<(), ExecuteError> {
    // A removed cluster is destroyed whole: no member needs to leave.
    if ctx.spec.is_none() {
        return Ok(());
    }
    if let Some(api) = own_api(ex, ctx, node).await {
        fenced(ctx, format_args!("{node} leaving etcd"))?;
        let left = async {
            api.etcd_forfeit_leadership().await?;
            api.etcd_leave_cluster().await
        }
        .await;
        match left {
            Ok(()) => return remove_stale(ex, ctx, node).await,
            Err(err) => {
                tracing::info!(node = %node, error = %crate::errors::error_chain(&err), "the member did not leave itself: removing it by id");
            }
        }
    }
    remove_stale(ex, ctx, node).await
}

/// The Talos API of `node` when its VM runs and it answers.
async fn own_api<Pr: Providers>(
    ex: &Executor<Pr>,
    ctx: StepContext<'_>,
    node: &NodeName,
) -> Option<GrpcTalosApi> {
    let machine = ctx.observed.machines.get(node)?;
    if !machine.is_running() {
        return None;
    }
    let target = NodeTarget {
        vmid: machine.vm_id,
        proxmox_node: machine.proxmox_node.to_string(),
        name: node.clone(),
    };
    api_of(ex, ctx, &target).await.ok()
}

async fn api_of<Pr: Providers>(
    ex: &Executor<Pr>,
    ctx: StepContext<'_>,
    target: &NodeTarget,
) -> Result<GrpcTalosApi, ExecuteError> {
    let spec = crate::execute::require_spec(ctx, ACTION)?;
    let address = ex.address(ctx, target).await?;
    let stored = bundle(ex, ctx, spec, ACTION).await?;
    let credentials = credentials(&stored, ACTION)?;
    ex.providers()
        .talos_api(address, &credentials)
        .await
        .map_err(|source| failed(ACTION, source.into()))
}

/// Through a healthy control plane other than `leaving`: removes `leaving`'s member and every
/// member whose name is no machine of the cluster.
async fn remove_stale<Pr: Providers>(
    ex: &Executor<Pr>,
    ctx: StepContext<'_>,
    leaving: &NodeName,
) -> Result<(), ExecuteError> {
    let through = ex.healthy_control_plane(ctx, ACTION, leaving)?;
    let api = api_of(ex, ctx, &through).await.map_err(|_| {
        failed(
            ACTION,
            TalosError::NoHealthyMember {
                machine: leaving.clone(),
            },
        )
    })?;
    let members = api
        .etcd_member_list()
        .await
        .map_err(|source| failed(ACTION, source.into()))?;
    for member in members {
        let name = NodeName(member.name.as_str().into());
        let stale = name == *leaving || !ctx.observed.machines.contains_key(&name);
        if !stale {
            continue;
        }
        fenced(
            ctx,
            format_args!("removing etcd member {} ({})", member.id, member.name),
        )?;
        api.etcd_remove_member_by_id(member.id)
            .await
            .map_err(|source| failed(ACTION, source.into()))?;
    }
    Ok(())
}
