//! What a preview says of a cluster whose CNI Flux installs (`cni: none`): that its nodes stay
//! NotReady until then and that the kubeconfig goes to Flux as soon as the API answers, and,
//! for a live cluster waiting for it, the same words as its status.

use crate::plan::{ClusterPlan, Resource};
use crate::spec::{Cluster, RecordedNetwork};

/// The notes of `cluster` (the head's) on the network it runs (`running`: as built, when it
/// exists), with its head plan when it was planned.
pub(super) fn cni_notes(
    name: &str,
    cluster: Option<&Cluster>,
    running: Option<&RecordedNetwork>,
    plan: Option<&ClusterPlan>,
) -> Vec<String> {
    let Some(cluster) = cluster else {
        return Vec::new();
    };
    if !cluster.spec.cluster_network(running).awaits_flux_cni() {
        return Vec::new();
    }
    let flux = cluster.spec.delivery.flux.as_ref().map(|flux| {
        format!(
            "Flux installs one from {}/{}",
            flux.namespace,
            flux.secret_name_for(name)
        )
    });
    let mut notes = vec![format!(
        "network.cni none: capstan installs no CNI; the nodes stay NotReady (NetworkPluginNotReady) until {}; the kubeconfig goes to Flux as soon as the API answers",
        flux.as_deref()
            .unwrap_or("someone installs one (no delivery.flux)")
    )];
    let waiting = plan
        .into_iter()
        .flat_map(|p| &p.waiting_on)
        .find(|w| matches!(w.resource, Resource::Cni { .. }));
    if let Some(wait) = waiting {
        notes.push(format!("waiting for {}", wait.resource));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_without_a_cni_says_who_installs_it_and_what_it_waits_for() {
        let mut cluster = Cluster::test("prod");
        assert!(
            cni_notes("prod", Some(&cluster), None, None).is_empty(),
            "Calico"
        );
        cluster.spec.network.cni = Some(crate::spec::Cni::None);
        let notes = cni_notes("prod", Some(&cluster), None, None);
        assert_eq!(
            notes,
            [
                "network.cni none: capstan installs no CNI; the nodes stay NotReady (NetworkPluginNotReady) until Flux installs one from flux-system/prod-kubeconfig; the kubeconfig goes to Flux as soon as the API answers"
            ]
        );
    }
}
