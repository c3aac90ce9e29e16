//! What the management clusters hold for each cluster, one listing each per pass: the Flux
//! kubeconfigs capstan delivered (by the cluster each names) and every record capstan keeps
//! (by its owner). How what a cluster whose file is gone left behind is found, to be deleted
//! with it.

use std::collections::BTreeMap;

use crate::connect::Providers;
use crate::observed::{FluxSecret, FluxTarget, ObservedRecord};
use crate::records::flux::KubeconfigDelivery as _;
use crate::spec::Desired;

use super::Observer;

impl<Pr: Providers> Observer<Pr> {
    /// The Flux Secrets capstan manages on every management cluster, by the cluster each
    /// belongs to, and why some management cluster could not list them.
    pub(super) async fn held_secrets(
        &self,
        desired: &Desired,
    ) -> (BTreeMap<String, Vec<FluxSecret>>, Option<String>) {
        let mut held: BTreeMap<String, Vec<FluxSecret>> = BTreeMap::new();
        let mut unlisted = None;
        for management in desired.fleet.management_clusters.keys() {
            let Some(deliverer) = self.providers.flux(management) else {
                continue;
            };
            match deliverer.held().await {
                Ok(secrets) => {
                    for (target, delivered) in secrets {
                        held.entry(target.cluster).or_default().push(FluxSecret {
                            target: FluxTarget {
                                cluster: management.clone(),
                                namespace: target.namespace,
                                secret_name: target.secret_name,
                            },
                            kubeconfig: delivered.fingerprint,
                        });
                    }
                }
                Err(err) => {
                    unlisted = Some(format!(
                        "management cluster `{management}`: {}",
                        crate::errors::error_chain(&err)
                    ));
                }
            }
        }
        (held, unlisted)
    }

    /// The records capstan keeps on every management cluster, by the cluster each belongs to,
    /// and why some management cluster could not list them: one list call each.
    pub(super) async fn records(
        &self,
        desired: &Desired,
    ) -> (BTreeMap<String, Vec<ObservedRecord>>, Option<String>) {
        let mut found: BTreeMap<String, Vec<ObservedRecord>> = BTreeMap::new();
        let mut unlisted = None;
        for management in desired.fleet.management_clusters.keys() {
            let client = self
                .providers
                .flux(management)
                .and_then(|_| self.providers.management(Some(management)));
            let Some(client) = client else {
                continue;
            };
            match crate::records::list(client).await {
                Ok(listed) => {
                    for record in listed {
                        found.entry(record.owner).or_default().push(ObservedRecord {
                            management: management.clone(),
                            namespace: record.namespace,
                            name: record.name,
                            kind: record.kind,
                        });
                    }
                }
                Err(err) => {
                    unlisted = Some(format!(
                        "management cluster `{management}`: {}",
                        crate::errors::error_chain(&err)
                    ));
                }
            }
        }
        (found, unlisted)
    }
}
