//! What follows a control plane's init, and a node's join: the admin kubeconfig the first
//! control plane wrote is admitted (reduced, its server and CA pinned: the CA is pinned here,
//! the first time capstan sees the cluster's), the bootstrap is recorded in the cluster, and
//! the new Node is awaited briefly.

use std::time::Duration;

use crate::connect::Providers;
use crate::model::NodeName;
use crate::plan::ActionKind;
use crate::providers::kube::{AdminKubeconfig, ClusterClient};
use crate::providers::node_exec::NodeTarget;
use crate::spec::ClusterSpec;

use super::access::{api_failed, fenced};
use super::{ExecuteError, Executor, StepContext};

/// How long `init-control-plane` and `join-node` wait for their Node to be Ready once kubeadm
/// is done. A new Node is usually Ready within seconds (the CNI starts); waiting for it here
/// lets what waits on it (the next control plane's join, the removal a replacement allows)
/// start the moment it is, not a pass later. A slower Node is left to the planner, which
/// waits for it as before.
const READY_WAIT: Duration = Duration::from_secs(30);

impl<Pr: Providers> Executor<Pr> {
    /// Records in the cluster that its bootstrap finished (kube-vip and the CNI in place), the
    /// fact the planner reads to stop re-running `init-control-plane`.
    pub(crate) async fn mark_bootstrapped(
        &self,
        ctx: StepContext<'_>,
        kubeconfig: &AdminKubeconfig,
    ) -> Result<(), ExecuteError> {
        let api = self
            .providers
            .connect_cluster(kubeconfig)
            .await
            .map_err(api_failed(ActionKind::InitControlPlane.name()))?;
        let mut data = std::collections::BTreeMap::from([
            ("cluster".to_owned(), ctx.cluster.to_owned()),
            ("completed".to_owned(), self.clock.now().to_string()),
        ]);
        // The network it was built with: a file that later leaves a field unset keeps it.
        if let Some(network) = ctx.network() {
            data.extend(network.record().into_iter().map(|(k, v)| (k.to_owned(), v)));
        }
        let (namespace, name) = crate::observed::BOOTSTRAP_MARKER;
        fenced(ctx, "recording the bootstrap")?;
        api.write_config_map(namespace, name, &data)
            .await
            .map_err(api_failed("record the bootstrap"))
    }

    /// Waits up to [`READY_WAIT`] for `node` to be Ready; says how that went, for the
    /// step's message. The step succeeded either way: the planner sees a Node that is not
    /// Ready yet and waits for it. Without a CNI from capstan (`cni: none`) nothing waits:
    /// the node is Ready once Flux installs one.
    pub(crate) async fn await_ready(
        &self,
        ctx: StepContext<'_>,
        kubeconfig: &AdminKubeconfig,
        node: &NodeName,
    ) -> &'static str {
        self.changed.notify_one();
        if ctx.network().is_some_and(|n| n.awaits_flux_cni()) {
            return ", NotReady until Flux installs a CNI (cni: none)";
        }
        let waited = match self.providers.connect_cluster(kubeconfig).await {
            Ok(api) => api.await_ready(node, READY_WAIT).await,
            Err(err) => Err(err),
        };
        match waited {
            Ok(true) => ", Ready",
            Ok(false) => ", not Ready yet",
            Err(err) => {
                tracing::debug!(node = %node, error = %crate::errors::error_chain(&err), "cannot watch the new Node; the next pass sees whether it is Ready");
                ""
            }
        }
    }

    /// The admin kubeconfig `read` from the control plane `from`, admitted: reduced, its
    /// server and CA pinned (the CA pinned now, for a cluster just initialised).
    pub(crate) async fn admit(
        &self,
        ctx: StepContext<'_>,
        spec: &ClusterSpec,
        from: &NodeTarget,
        read: &str,
    ) -> Result<AdminKubeconfig, ExecuteError> {
        self.providers
            .admit_kubeconfig(ctx.cluster, spec, read)
            .await
            .map_err(|source| ExecuteError::KubeconfigRefused {
                action: ActionKind::InitControlPlane,
                machine: from.name.clone(),
                source: Box::new(source),
            })
    }
}
