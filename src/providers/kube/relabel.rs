//! A node's labels and taints changed in place (`label-nodes`): one read-modify-write of the
//! Node, so labels, taints and capstan's record of them change together, conditioned on the
//! `resourceVersion` read and retried on conflicts (the kubelet updates its Node all the
//! time). Only what the change names moves: a label or taint someone else set stays.

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::PostParams;
use tracing::info;

use super::ClusterError;
use super::client::KubeClusterClient;
use crate::scheduling::{Relabel, taint_id};

/// Conflicts come from the kubelet's status updates and clear at once.
const CONFLICT_RETRIES: usize = 5;

impl KubeClusterClient {
    /// [`super::ClusterClient::relabel`].
    pub(super) async fn relabel_node(&self, change: &Relabel) -> Result<(), ClusterError> {
        let node = &change.node;
        let wrap = |source| ClusterError::Relabel {
            node: node.clone(),
            source,
        };
        let api = self.nodes_api();
        let mut attempt = 0;
        loop {
            let mut current = api.get(node.as_str()).await.map_err(wrap)?;
            apply(&mut current, change);
            match api
                .replace(node.as_str(), &PostParams::default(), &current)
                .await
            {
                Ok(_) => break,
                Err(kube::Error::Api(status))
                    if status.code == 409 && attempt < CONFLICT_RETRIES =>
                {
                    attempt += 1;
                }
                Err(source) => return Err(wrap(source)),
            }
        }
        info!(
            node = %node,
            set = change.set_labels.len(),
            removed = change.remove_labels.len(),
            taints_set = change.set_taints.len(),
            taints_removed = change.remove_taints.len(),
            "node labels and taints changed in place"
        );
        Ok(())
    }
}

/// `change` applied to the Node as read.
fn apply(node: &mut Node, change: &Relabel) {
    let metadata = &mut node.metadata;
    let labels = metadata.labels.get_or_insert_with(Default::default);
    for key in &change.remove_labels {
        labels.remove(key);
    }
    labels.extend(change.set_labels.clone());
    let annotations = metadata.annotations.get_or_insert_with(Default::default);
    for (name, value) in change.managed.annotations() {
        annotations.insert(name.to_owned(), value);
    }
    let spec = node.spec.get_or_insert_with(Default::default);
    let mut taints = spec.taints.take().unwrap_or_default();
    let id = |t: &Taint| format!("{}:{}", t.key, t.effect);
    let replaced: Vec<String> = change.set_taints.iter().map(taint_id).collect();
    taints.retain(|t| !change.remove_taints.contains(&id(t)) && !replaced.contains(&id(t)));
    taints.extend(change.set_taints.iter().map(|t| Taint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect: t.effect.as_str().to_owned(),
        time_added: None,
    }));
    spec.taints = (!taints.is_empty()).then_some(taints);
}
