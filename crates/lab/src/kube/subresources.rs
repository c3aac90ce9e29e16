//! Subresources with their own semantics: `pods/eviction` (a delete that PodDisruptionBudgets
//! may refuse) and `deployments/scale` / `replicasets/scale` (the `autoscaling/v1` Scale view
//! `kubectl scale` reads and patches).

use serde_json::{Value, json};

use super::controllers::{budget, is_pod_ready};
use super::patch::{self, PatchKind};
use super::resources::ResourceType;
use super::selectors::LabelSelector;
use super::state::{ClusterState, Eviction};
use super::status::ApiError;
use super::store::{Key, Store};

/// [`evict`], recorded in the cluster's audit of evictions whatever the answer.
///
/// # Errors
/// As [`evict`].
pub(crate) fn evict_audited(
    state: &ClusterState,
    pods: &ResourceType,
    key: &Key,
    dry_run: bool,
) -> Result<(), ApiError> {
    let (node, at, outcome) = state.change(|store, now| {
        let node = store.get(key).map_or_else(String::new, |pod| {
            pod["spec"]["nodeName"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        });
        (node, now, evict(store, pods, key, dry_run))
    });
    state.lock().evictions.push(Eviction {
        at,
        pod: format!("{}/{}", key.namespace, key.name),
        node,
        status: outcome.as_ref().map_or_else(|e| e.code, |()| 201),
        dry_run,
    });
    outcome
}

/// Evicts a pod: deletes it unless its PodDisruptionBudget forbids losing it now.
///
/// # Errors
/// NotFound; TooManyRequests with the real message when the budget refuses; InternalError
/// when several budgets select the pod (the real server refuses those too).
pub(crate) fn evict(
    store: &mut Store,
    pods: &ResourceType,
    key: &Key,
    dry_run: bool,
) -> Result<(), ApiError> {
    let pod = store
        .get(key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(pods, &key.name))?;
    let budgets: Vec<Value> = store
        .list("poddisruptionbudgets", Some(&key.namespace))
        .into_iter()
        .filter(|pdb| {
            LabelSelector::from_object(&pdb["spec"]["selector"])
                .is_some_and(|s| s.matches(&pod["metadata"]["labels"]))
        })
        .cloned()
        .collect();
    if budgets.len() > 1 {
        return Err(ApiError::several_budgets());
    }
    // Pods that are not running take nothing from a budget.
    let running = !matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed" | "Pending")
    );
    if let Some(pdb) = budgets.first()
        && running
    {
        let budget = budget(store, pdb);
        // A Ready pod takes one allowed disruption; an unready one may go while the budget is
        // met without it (the default unhealthyPodEvictionPolicy, IfHealthyBudget).
        let refused = if is_pod_ready(&pod) {
            budget.allowed < 1
        } else {
            budget.healthy < budget.desired
        };
        if refused {
            let name = pdb["metadata"]["name"].as_str().unwrap_or_default();
            return Err(ApiError::disruption_budget(
                name,
                budget.desired,
                budget.healthy,
            ));
        }
    }
    store.delete(pods, key, dry_run)?;
    Ok(())
}

/// The `autoscaling/v1` Scale of a Deployment or ReplicaSet.
pub(crate) fn scale_of(object: &Value) -> Value {
    let metadata = &object["metadata"];
    let selector = object["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "uid": metadata["uid"],
            "resourceVersion": metadata["resourceVersion"],
            "creationTimestamp": metadata["creationTimestamp"],
        },
        "spec": {"replicas": object["spec"]["replicas"].as_i64().unwrap_or(1)},
        "status": {"replicas": object["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector},
    })
}

/// How a request changes a Scale.
pub(crate) enum ScaleChange<'a> {
    /// PATCH with this format and body.
    Patch(PatchKind, &'a Value),
    /// PUT of a whole Scale.
    Replace(&'a Value),
}

/// Applies a change to the Scale of the object at `key` and stores the new replica count.
/// Returns the new Scale.
///
/// # Errors
/// NotFound, BadRequest for a bad patch or replica count, Conflict for a stale
/// resourceVersion.
pub(crate) fn set_scale(
    store: &mut Store,
    resource: &ResourceType,
    key: &Key,
    change: &ScaleChange<'_>,
    dry_run: bool,
) -> Result<Value, ApiError> {
    let current = store
        .get(key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(resource, &key.name))?;
    let mut scale = scale_of(&current);
    match change {
        ScaleChange::Patch(kind, body) => patch::apply(*kind, &mut scale, body)?,
        ScaleChange::Replace(body) => scale = (*body).clone(),
    }
    let replicas = scale["spec"]["replicas"]
        .as_i64()
        .filter(|r| *r >= 0)
        .ok_or_else(|| ApiError::bad_request("spec.replicas must be a non-negative integer"))?;
    let mut object = current;
    object["spec"]["replicas"] = json!(replicas);
    object["metadata"]["resourceVersion"] = scale["metadata"]["resourceVersion"].clone();
    let stored = store.update(resource, key, object, dry_run)?;
    Ok(scale_of(&stored))
}
