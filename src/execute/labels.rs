//! Labels and taints through the API: the `label-nodes` step (a change in Git applied in
//! place on running Nodes) and, right after `init-control-plane` and `join-node`, what a new
//! Node's registration could not give it (labels a kubelet may not set on itself, every
//! label on Talos) with capstan's record of its keys.
//!
//! # Guarantees
//! Each change is fenced per Node and idempotent; only the keys a change names move (see
//! `capstan_core::scheduling`), so a label or taint someone else set stays.

use crate::connect::Providers;
use crate::model::NodeName;
use crate::plan::ActionKind;
use crate::providers::kube::{AdminKubeconfig, ClusterClient};
use crate::scheduling::{NodeScheduling, Relabel};

use super::access::{api_failed, fenced};
use super::{ExecuteError, Executor, StepContext};

impl<Pr: Providers> Executor<Pr> {
    /// `label-nodes`: each Node's change, one Node at a time.
    pub(super) async fn label_nodes(
        &self,
        ctx: StepContext<'_>,
        nodes: &[Relabel],
    ) -> Result<String, ExecuteError> {
        let action = ActionKind::LabelNodes;
        let api = self.api(ctx, action).await?;
        for change in nodes {
            fenced(
                ctx,
                format_args!("changing the labels and taints of Node {}", change.node),
            )?;
            api.relabel(change)
                .await
                .map_err(api_failed(action.name()))?;
        }
        Ok(crate::scheduling::in_place_summary(nodes))
    }

    /// Gives the Node `node`, just registered, the rest of `scheduling` through the API and
    /// records capstan's keys on it; says how that went, for the step's message. The step
    /// succeeded either way: a Node not registered yet (or an API that does not answer) is
    /// left to the next pass, whose plan has a `label-nodes` step for it.
    pub(crate) async fn settle_node(
        &self,
        ctx: StepContext<'_>,
        kubeconfig: &AdminKubeconfig,
        node: &NodeName,
        scheduling: &NodeScheduling,
    ) -> &'static str {
        if fenced(ctx, format_args!("labelling Node {node}")).is_err() {
            return "";
        }
        let change = Relabel::whole(node, scheduling);
        let done = match self.providers.connect_cluster(kubeconfig).await {
            Ok(api) => api.relabel(&change).await,
            Err(err) => Err(err),
        };
        match done {
            Ok(()) => ", labelled",
            Err(err) => {
                tracing::debug!(node = %node, error = %crate::errors::error_chain(&err), "new Node not labelled yet; the next pass labels it");
                ""
            }
        }
    }
}
