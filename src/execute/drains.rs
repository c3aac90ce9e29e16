//! The executor's steps that empty a Node: a cordon, and a drain (its start annotated once,
//! evictions under the budgets until the deadline, each round fenced).

use std::time::Duration;

use jiff::Timestamp;

use crate::connect::Providers;
use crate::model::NodeName;
use crate::observed::DRAIN_STARTED_ANNOTATION;
use crate::plan::ActionKind;
use crate::providers::kube::{ClusterClient, DrainOptions};

use super::access::{api_failed, fenced};
use super::{ExecuteError, Executor, StepContext};

impl<Pr: Providers> Executor<Pr> {
    pub(super) async fn cordon(
        &self,
        ctx: StepContext<'_>,
        node: &NodeName,
    ) -> Result<String, ExecuteError> {
        let api = self.api(ctx, ActionKind::Cordon).await?;
        fenced(ctx, format_args!("cordoning {node}"))?;
        api.cordon(node)
            .await
            .map_err(api_failed(ActionKind::Cordon.name()))?;
        Ok(format!("{node} cordoned"))
    }

    pub(super) async fn drain(
        &self,
        ctx: StepContext<'_>,
        node: &NodeName,
        deadline: Timestamp,
    ) -> Result<String, ExecuteError> {
        let api = self.api(ctx, ActionKind::Drain).await?;
        let already = ctx
            .observed
            .nodes
            .get(node)
            .and_then(|n| n.drain.as_ref())
            .is_some();
        if !already {
            let now = self.clock.now().to_string();
            fenced(ctx, format_args!("marking the drain of {node}"))?;
            api.annotate(node, DRAIN_STARTED_ANNOTATION, Some(&now))
                .await
                .map_err(api_failed("mark drain start"))?;
        }
        let left = self.clock.now().duration_until(deadline);
        let timeout = Duration::try_from(left).unwrap_or(Duration::ZERO);
        let report = api
            .drain(node, &DrainOptions::new(timeout).fenced(ctx.fence.clone()))
            .await
            .map_err(api_failed(ActionKind::Drain.name()))?;
        Ok(format!(
            "{node} drained: {} pod(s) evicted, {} left in place (DaemonSet, mirror)",
            report.evicted.len(),
            report.skipped.len()
        ))
    }
}
