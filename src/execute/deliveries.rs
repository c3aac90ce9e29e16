//! The executor's deliveries: the cluster's admin kubeconfig written into its Flux Secret on
//! the management cluster (and withdrawn with the cluster).

use crate::connect::Providers;
use crate::observed::FluxTarget;
use crate::plan::ActionKind;
use crate::records::flux::{self, DeliveryOutcome, KubeconfigDelivery};

use super::access::fenced;
use super::{ExecuteError, Executor, StepContext};

impl<Pr: Providers> Executor<Pr> {
    pub(super) async fn deliver_kubeconfig(
        &self,
        ctx: StepContext<'_>,
        flux: &FluxTarget,
    ) -> Result<String, ExecuteError> {
        let kubeconfig = ctx
            .access
            .kubeconfig
            .as_ref()
            .ok_or(ExecuteError::NoKubeconfig {
                action: ActionKind::DeliverKubeconfig,
            })?;
        let deliverer = self.deliverer(flux)?;
        let target = flux_target(ctx, flux);
        fenced(ctx, "delivering the kubeconfig to Flux")?;
        let outcome = deliverer
            .deliver(&target, kubeconfig, ctx.revision)
            .await
            .map_err(|err| ExecuteError::Flux(Box::new(err)))?;
        let verb = match outcome {
            DeliveryOutcome::Created => "created",
            DeliveryOutcome::Updated => "updated",
            DeliveryOutcome::Unchanged => "already current",
        };
        Ok(format!(
            "Flux Secret {}/{} on {} {verb}",
            flux.namespace, flux.secret_name, flux.cluster
        ))
    }

    /// Removes the cluster's Flux Secret.
    pub(super) async fn withdraw_kubeconfig(
        &self,
        ctx: StepContext<'_>,
        flux: &FluxTarget,
    ) -> Result<(), ExecuteError> {
        let deliverer = self.deliverer(flux)?;
        let target = flux_target(ctx, flux);
        fenced(ctx, "withdrawing the Flux Secret")?;
        deliverer
            .withdraw(&target)
            .await
            .map_err(|err| ExecuteError::Flux(Box::new(err)))?;
        Ok(())
    }

    fn deliverer(&self, flux: &FluxTarget) -> Result<&Pr::Flux, ExecuteError> {
        self.providers
            .flux(&flux.cluster)
            .ok_or_else(|| ExecuteError::NoManagement {
                name: flux.cluster.clone(),
            })
    }
}

/// The Flux provider's target for a cluster's Secret (named by the plan).
fn flux_target(ctx: StepContext<'_>, flux: &FluxTarget) -> flux::FluxTarget {
    flux::FluxTarget {
        cluster: ctx.cluster.to_owned(),
        namespace: flux.namespace.clone(),
        secret_name: flux.secret_name.clone(),
    }
}
