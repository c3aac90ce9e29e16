//! The simulated control loops: what kube-controller-manager, the scheduler and the kubelets
//! would do, run to a fixed point after every change so the API is always settled when a
//! request returns (tests see no in-between states and never wait).
//!
//! - Deployments get a ReplicaSet per pod template; ReplicaSets get their pods.
//! - DaemonSets get one pod per node whose taints they tolerate (unschedulable included).
//! - Unscheduled pods go to the Ready, schedulable node with the fewest pods whose taints they
//!   tolerate; pods run and are Ready while their node is Ready.
//! - Pods on deleted nodes, or on nodes with a `NoExecute` taint they do not tolerate, are
//!   deleted; objects whose controller is gone are deleted (background cascading deletion).
//! - Workload and PodDisruptionBudget statuses follow the pods.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::network::ClusterNetwork;
use super::resources::{ResourceType, by_plural};
use super::selectors::LabelSelector;
use super::store::{Key, Store, rfc3339};

fn resource(plural: &str) -> &'static ResourceType {
    by_plural(plural).expect("controllers only touch served resources")
}

/// Runs every loop until nothing changes (bounded, so a bug cannot hang the server).
pub(crate) fn reconcile(store: &mut Store, network: &ClusterNetwork, now: Timestamp) {
    for _ in 0..16 {
        let before = store.revision();
        super::network::reconcile(store, network, now);
        super::tigera::reconcile(store, now);
        deployments(store, now);
        replica_sets(store, now);
        daemon_sets(store, now);
        collect_garbage(store);
        evict_for_no_execute_taints(store);
        schedule(store);
        run_pods(store, now);
        workload_statuses(store);
        budget_statuses(store);
        if store.revision() == before {
            return;
        }
    }
    tracing::warn!("simulated controllers did not settle");
}

/// A snapshot of a resource's objects (so loops can write while iterating).
fn all(store: &Store, plural: &str) -> Vec<Value> {
    store.list(plural, None).into_iter().cloned().collect()
}

fn key_of(plural: &str, object: &Value) -> Key {
    let rt = resource(plural);
    let namespace = object["metadata"]["namespace"].as_str();
    Key::new(rt, namespace.filter(|_| rt.namespaced), name(object))
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

fn namespace(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

fn uid(object: &Value) -> &str {
    object["metadata"]["uid"].as_str().unwrap_or_default()
}

/// Writes `object` when it differs from the stored one. Errors cannot happen here (the
/// controllers hold the store lock and write what they just read), so they are only logged.
fn save(store: &mut Store, plural: &str, object: Value) {
    let key = key_of(plural, &object);
    if store.get(&key) == Some(&object) {
        return;
    }
    let mut object = object;
    // Controllers write unconditionally, like an update without resourceVersion.
    object["metadata"]["resourceVersion"] = json!("");
    if let Err(err) = store.update(resource(plural), &key, object, false) {
        tracing::debug!(?err, "simulated controller update failed");
    }
}

fn create(store: &mut Store, plural: &str, object: Value, now: Timestamp) {
    let rt = resource(plural);
    let namespace = object["metadata"]["namespace"].as_str().map(str::to_owned);
    if let Err(err) = store.create(rt, namespace.as_deref(), object, now, false) {
        tracing::debug!(?err, "simulated controller create failed");
    }
}

fn remove(store: &mut Store, plural: &str, object: &Value) {
    let key = key_of(plural, object);
    if let Err(err) = store.delete(resource(plural), &key, false) {
        tracing::debug!(?err, "simulated controller delete failed");
    }
}

/// The uid of the object's controller, from its ownerReferences.
pub(crate) fn controller_of(object: &Value) -> Option<(&str, &str)> {
    object["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"] == true)
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default(),
                r["uid"].as_str().unwrap_or_default(),
            )
        })
}

fn owner_reference(owner: &Value) -> Value {
    json!([{
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": true,
        "blockOwnerDeletion": true,
    }])
}

fn owned_by<'a>(objects: &'a [Value], owner: &Value) -> Vec<&'a Value> {
    objects
        .iter()
        .filter(|o| controller_of(o).is_some_and(|(_, u)| u == uid(owner)))
        .collect()
}

fn is_terminating(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
}

/// Whether a pod's Ready condition is True.
pub(crate) fn is_pod_ready(pod: &Value) -> bool {
    condition(&pod["status"], "Ready").is_some_and(|c| c["status"] == "True")
}

/// Whether a node's Ready condition is True.
pub(crate) fn is_node_ready(node: &Value) -> bool {
    condition(&node["status"], "Ready").is_some_and(|c| c["status"] == "True")
}

fn condition<'a>(status: &'a Value, kind: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Ten characters from a hash of the pod template, as the Deployment controller names its
/// ReplicaSets.
fn template_hash(template: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let digest = Sha256::digest(template.to_string().as_bytes());
    digest
        .iter()
        .take(10)
        .map(|byte| char::from(ALPHABET[usize::from(*byte) % ALPHABET.len()]))
        .collect()
}

fn replicas(spec: &Value) -> i64 {
    spec["replicas"].as_i64().unwrap_or(1)
}

fn deployments(store: &mut Store, now: Timestamp) {
    let sets = all(store, "replicasets");
    for deployment in all(store, "deployments") {
        let template = &deployment["spec"]["template"];
        let hash = template_hash(template);
        let wanted = format!("{}-{hash}", name(&deployment));
        let mut found = false;
        for set in owned_by(&sets, &deployment) {
            let mut set = set.clone();
            let target = if name(&set) == wanted {
                found = true;
                replicas(&deployment["spec"])
            } else {
                0
            };
            set["spec"]["replicas"] = json!(target);
            save(store, "replicasets", set);
        }
        if !found {
            let mut template = template.clone();
            template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
            let mut selector = deployment["spec"]["selector"].clone();
            selector["matchLabels"]["pod-template-hash"] = json!(hash);
            let set = json!({
                "metadata": {
                    "name": wanted,
                    "namespace": namespace(&deployment),
                    "labels": template["metadata"]["labels"],
                    "ownerReferences": owner_reference(&deployment),
                },
                "spec": {
                    "replicas": replicas(&deployment["spec"]),
                    "selector": selector,
                    "template": template,
                },
                "status": {"replicas": 0},
            });
            create(store, "replicasets", set, now);
        }
    }
}

fn pod_from(owner: &Value, template: &Value, name: String, node: Option<&str>) -> Value {
    let mut spec = template["spec"].clone();
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    json!({
        "metadata": {
            "name": name,
            "namespace": namespace(owner),
            "labels": template["metadata"]["labels"],
            "annotations": template["metadata"]["annotations"],
            "ownerReferences": owner_reference(owner),
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    })
}

fn replica_sets(store: &mut Store, now: Timestamp) {
    let pods = all(store, "pods");
    for set in all(store, "replicasets") {
        let owned: Vec<&Value> = owned_by(&pods, &set)
            .into_iter()
            .filter(|p| !is_terminating(p))
            .collect();
        let wanted = usize::try_from(replicas(&set["spec"]).max(0)).unwrap_or(0);
        for _ in owned.len()..wanted {
            let number = store.next_number();
            let pod_name = format!("{}-{}", name(&set), super::store::random_suffix(number));
            create(
                store,
                "pods",
                pod_from(&set, &set["spec"]["template"], pod_name, None),
                now,
            );
        }
        // Scale down: unscheduled pods first, then the newest.
        let mut extra: Vec<&Value> = owned;
        extra.sort_by_key(|p| {
            (
                p["spec"]["nodeName"].is_string(),
                std::cmp::Reverse(p["metadata"]["creationTimestamp"].to_string()),
            )
        });
        for pod in extra.iter().take(extra.len().saturating_sub(wanted)) {
            remove(store, "pods", pod);
        }
    }
}

/// Effects that keep pods away: scheduling effects, and `NoExecute` (which also evicts).
fn is_blocking(effect: &str) -> bool {
    effect == "NoSchedule" || effect == "NoExecute"
}

fn tolerates(tolerations: &[Value], taint: &Value) -> bool {
    tolerations.iter().any(|t| {
        let key_matches = t["key"].is_null() && t["operator"] == "Exists"
            || t["key"] == taint["key"]
                && (t["operator"] == "Exists"
                    || t["value"] == taint["value"]
                    || t["value"].is_null() && taint["value"].is_null());
        let effect_matches =
            t["effect"].is_null() || t["effect"] == "" || t["effect"] == taint["effect"];
        key_matches && effect_matches
    })
}

fn tolerations_of(spec: &Value) -> Vec<Value> {
    spec["tolerations"].as_array().cloned().unwrap_or_default()
}

/// Tolerations the DaemonSet controller adds to every daemon pod.
fn daemon_tolerations() -> Vec<Value> {
    [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
    .into_iter()
    .map(|(key, effect)| json!({"key": key, "operator": "Exists", "effect": effect}))
    .collect()
}

fn taints(node: &Value) -> Vec<Value> {
    node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn tolerates_node(tolerations: &[Value], node: &Value, effects: fn(&str) -> bool) -> bool {
    taints(node)
        .iter()
        .filter(|t| effects(t["effect"].as_str().unwrap_or_default()))
        .all(|t| tolerates(tolerations, t))
}

fn daemon_sets(store: &mut Store, now: Timestamp) {
    let nodes = all(store, "nodes");
    let pods = all(store, "pods");
    for set in all(store, "daemonsets") {
        let template = &set["spec"]["template"];
        let mut tolerations = tolerations_of(&template["spec"]);
        tolerations.extend(daemon_tolerations());
        let eligible: BTreeSet<&str> = nodes
            .iter()
            .filter(|n| tolerates_node(&tolerations, n, is_blocking))
            .map(name)
            .collect();
        let owned = owned_by(&pods, &set);
        let covered: BTreeSet<&str> = owned
            .iter()
            .filter_map(|p| p["spec"]["nodeName"].as_str())
            .collect();
        for node in eligible.difference(&covered) {
            let number = store.next_number();
            let pod_name = format!("{}-{}", name(&set), super::store::random_suffix(number));
            let mut pod = pod_from(&set, template, pod_name, Some(node));
            pod["spec"]["tolerations"] = json!(tolerations);
            create(store, "pods", pod, now);
        }
        for pod in owned {
            let on = pod["spec"]["nodeName"].as_str().unwrap_or_default();
            if !eligible.contains(on) {
                remove(store, "pods", pod);
            }
        }
    }
}

fn collect_garbage(store: &mut Store) {
    let mut owners: BTreeSet<String> = BTreeSet::new();
    for plural in ["deployments", "replicasets", "daemonsets", "nodes"] {
        owners.extend(store.list(plural, None).iter().map(|o| uid(o).to_owned()));
    }
    let nodes: BTreeSet<String> = store
        .list("nodes", None)
        .iter()
        .map(|n| name(n).to_owned())
        .collect();
    for plural in ["replicasets", "pods", "leases"] {
        for object in all(store, plural) {
            let orphan = object["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| {
                    let kind = r["kind"].as_str().unwrap_or_default();
                    let owner = r["uid"].as_str().unwrap_or_default();
                    matches!(kind, "Deployment" | "ReplicaSet" | "DaemonSet" | "Node")
                        && !owners.contains(owner)
                });
            let lost_node = object["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| plural == "pods" && !nodes.contains(n));
            if orphan || lost_node {
                remove(store, plural, &object);
            }
        }
    }
}

fn evict_for_no_execute_taints(store: &mut Store) {
    let nodes: BTreeMap<String, Value> = all(store, "nodes")
        .into_iter()
        .map(|n| (name(&n).to_owned(), n))
        .collect();
    for pod in all(store, "pods") {
        let Some(node) = pod["spec"]["nodeName"].as_str().and_then(|n| nodes.get(n)) else {
            continue;
        };
        if !tolerates_node(&tolerations_of(&pod["spec"]), node, |e| e == "NoExecute") {
            remove(store, "pods", &pod);
        }
    }
}

fn schedule(store: &mut Store) {
    let nodes = all(store, "nodes");
    let mut load: BTreeMap<String, usize> = BTreeMap::new();
    for pod in store.list("pods", None) {
        if let Some(node) = pod["spec"]["nodeName"].as_str() {
            *load.entry(node.to_owned()).or_default() += 1;
        }
    }
    for mut pod in all(store, "pods") {
        if pod["spec"]["nodeName"].is_string() || is_terminating(&pod) {
            continue;
        }
        let tolerations = tolerations_of(&pod["spec"]);
        let chosen = nodes
            .iter()
            .filter(|n| is_node_ready(n) && n["spec"]["unschedulable"] != true)
            .filter(|n| tolerates_node(&tolerations, n, is_blocking))
            .min_by_key(|n| (load.get(name(n)).copied().unwrap_or(0), name(n).to_owned()));
        match chosen {
            Some(node) => {
                *load.entry(name(node).to_owned()).or_default() += 1;
                pod["spec"]["nodeName"] = json!(name(node));
            }
            None => {
                pod["status"]["phase"] = json!("Pending");
                pod["status"]["conditions"] = json!([{
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": format!("0/{} nodes are available.", nodes.len()),
                }]);
            }
        }
        save(store, "pods", pod);
    }
}

/// Pods on a node run; they are Ready while the node is.
fn run_pods(store: &mut Store, now: Timestamp) {
    let nodes: BTreeMap<String, Value> = all(store, "nodes")
        .into_iter()
        .map(|n| (name(&n).to_owned(), n))
        .collect();
    let mut pods = all(store, "pods");
    for index in 0..pods.len() {
        let mut pod = pods[index].clone();
        let Some(node) = pod["spec"]["nodeName"].as_str().and_then(|n| nodes.get(n)) else {
            continue;
        };
        let phase = pod["status"]["phase"].as_str().unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            continue;
        }
        let ready = is_node_ready(node);
        let flag = if ready { "True" } else { "False" };
        let host_ip = node["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["type"] == "InternalIP")
            .map(|a| a["address"].clone())
            .unwrap_or(Value::Null);
        if !pod["status"]["podIP"].is_string()
            && let Some(ip) = super::network::pod_address(&pod, node, &pods)
        {
            pod["status"]["podIP"] = json!(ip);
            pod["status"]["podIPs"] = json!([{"ip": ip}]);
        }
        let status = &mut pod["status"];
        if !status["startTime"].is_string() {
            status["startTime"] = json!(rfc3339(now));
        }
        status["phase"] = json!("Running");
        status["hostIP"] = host_ip;
        let previous = status["conditions"].clone();
        let since = |kind: &str, wanted: &str| {
            condition(&json!({"conditions": previous}), kind)
                .filter(|c| c["status"] == wanted)
                .map_or_else(|| json!(rfc3339(now)), |c| c["lastTransitionTime"].clone())
        };
        status["conditions"] = json!([
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": since("PodScheduled", "True")},
            {"type": "Initialized", "status": "True", "lastTransitionTime": since("Initialized", "True")},
            {"type": "ContainersReady", "status": flag, "lastTransitionTime": since("ContainersReady", flag)},
            {"type": "Ready", "status": flag, "lastTransitionTime": since("Ready", flag)},
        ]);
        let containers: Vec<Value> = pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                json!({
                    "name": c["name"], "image": c["image"], "ready": ready, "started": ready,
                    "restartCount": 0, "state": {"running": {}},
                })
            })
            .collect();
        pod["status"]["containerStatuses"] = json!(containers);
        pods[index] = pod.clone();
        save(store, "pods", pod);
    }
}

fn workload_statuses(store: &mut Store) {
    let pods = all(store, "pods");
    let sets = all(store, "replicasets");
    for mut set in sets.clone() {
        let owned = owned_by(&pods, &set);
        let ready = owned.iter().filter(|p| is_pod_ready(p)).count();
        set["status"] = json!({
            "replicas": owned.len(),
            "fullyLabeledReplicas": owned.len(),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": set["metadata"]["generation"],
        });
        save(store, "replicasets", set);
    }
    for mut deployment in all(store, "deployments") {
        let current = format!(
            "{}-{}",
            name(&deployment),
            template_hash(&deployment["spec"]["template"])
        );
        let mut total = 0;
        let mut ready = 0;
        let mut updated = 0;
        for set in owned_by(&sets, &deployment) {
            let owned = owned_by(&pods, set);
            total += owned.len();
            ready += owned.iter().filter(|p| is_pod_ready(p)).count();
            if name(set) == current {
                updated += owned.len();
            }
        }
        let wanted = usize::try_from(replicas(&deployment["spec"]).max(0)).unwrap_or(0);
        let available = if ready >= wanted { "True" } else { "False" };
        deployment["status"] = json!({
            "observedGeneration": deployment["metadata"]["generation"],
            "replicas": total,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": total.saturating_sub(ready),
            "conditions": [{"type": "Available", "status": available, "reason": "MinimumReplicasAvailable"}],
        });
        save(store, "deployments", deployment);
    }
    let nodes = all(store, "nodes");
    for mut set in all(store, "daemonsets") {
        let mut tolerations = tolerations_of(&set["spec"]["template"]["spec"]);
        tolerations.extend(daemon_tolerations());
        let desired = nodes
            .iter()
            .filter(|n| tolerates_node(&tolerations, n, is_blocking))
            .count();
        let owned = owned_by(&pods, &set);
        let ready = owned.iter().filter(|p| is_pod_ready(p)).count();
        set["status"] = json!({
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": owned.len(),
            "updatedNumberScheduled": owned.len(),
            "numberReady": ready,
            "numberAvailable": ready,
            "numberMisscheduled": 0,
            "observedGeneration": set["metadata"]["generation"],
        });
        save(store, "daemonsets", set);
    }
}

/// What a PodDisruptionBudget allows now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Pods the budget selects.
    pub expected: i64,
    /// Of those, Ready.
    pub healthy: i64,
    /// Ready pods the budget demands.
    pub desired: i64,
    /// Evictions allowed now.
    pub allowed: i64,
}

fn scaled(value: &Value, total: i64) -> Option<i64> {
    if let Some(n) = value.as_i64() {
        return Some(n);
    }
    let percent: i64 = value.as_str()?.strip_suffix('%')?.parse().ok()?;
    Some((percent * total + 99) / 100)
}

/// Computes a budget over the current pods.
pub(crate) fn budget(store: &Store, pdb: &Value) -> Budget {
    let selector = LabelSelector::from_object(&pdb["spec"]["selector"]);
    let pods: Vec<&Value> = store
        .list("pods", Some(namespace(pdb)))
        .into_iter()
        .filter(|p| !is_terminating(p))
        .filter(|p| {
            selector
                .as_ref()
                .is_some_and(|s| s.matches(&p["metadata"]["labels"]))
        })
        .collect();
    let expected = i64::try_from(pods.len()).unwrap_or(i64::MAX);
    let healthy = i64::try_from(pods.iter().filter(|p| is_pod_ready(p)).count()).unwrap_or(0);
    let spec = &pdb["spec"];
    let desired = if let Some(min) = scaled(&spec["minAvailable"], expected) {
        min
    } else if let Some(max) = scaled(&spec["maxUnavailable"], expected) {
        (expected - max).max(0)
    } else {
        expected
    };
    Budget {
        expected,
        healthy,
        desired,
        allowed: (healthy - desired).max(0),
    }
}

fn budget_statuses(store: &mut Store) {
    for mut pdb in all(store, "poddisruptionbudgets") {
        let budget = budget(store, &pdb);
        let allowed = if budget.allowed > 0 { "True" } else { "False" };
        let reason = if budget.allowed > 0 {
            "SufficientPods"
        } else {
            "InsufficientPods"
        };
        pdb["status"] = json!({
            "observedGeneration": pdb["metadata"]["generation"],
            "expectedPods": budget.expected,
            "currentHealthy": budget.healthy,
            "desiredHealthy": budget.desired,
            "disruptionsAllowed": budget.allowed,
            "conditions": [{
                "type": "DisruptionAllowed", "status": allowed, "reason": reason,
                "observedGeneration": pdb["metadata"]["generation"], "message": "",
                "lastTransitionTime": pdb["metadata"]["creationTimestamp"],
            }],
        });
        save(store, "poddisruptionbudgets", pdb);
    }
}
