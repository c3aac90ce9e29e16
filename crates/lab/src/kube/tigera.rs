//! The Tigera operator, as far as a cluster's bootstrap sees it: once its Deployment
//! (`tigera-operator/tigera-operator`, from Calico's `tigera-operator.yaml`) exists, it defines
//! its custom resources (it runs with `-manage-crds=true`, so the manifest carries no CRD);
//! once an `Installation` named `default` exists, it deploys Calico: the `calico-system`
//! namespace and the `calico-node` DaemonSet, whose pods give the nodes their network.
//!
//! The operator acts as soon as its Deployment exists (its pod tolerates every taint and uses
//! the host's network, so on a real cluster it runs before any CNI does).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::network::{cni_daemon_set, ensure_daemon_set};
use super::resources::by_plural;
use super::store::{Key, Store};

/// The operator's namespace and Deployment.
const OPERATOR: (&str, &str) = ("tigera-operator", "tigera-operator");
/// Where Calico runs.
const CALICO_NAMESPACE: &str = "calico-system";
/// The custom resources the operator defines that a bootstrap applies: (plural, kind).
const DEFINED: &[(&str, &str)] = &[
    ("installations", "Installation"),
    ("apiservers", "APIServer"),
];
const GROUP: &str = "operator.tigera.io";

/// Runs the operator's loop once.
pub(crate) fn reconcile(store: &mut Store, now: Timestamp) {
    let deployments = by_plural("deployments").expect("deployments are served");
    let (namespace, name) = OPERATOR;
    if store
        .get(&Key::new(deployments, Some(namespace), name))
        .is_none()
    {
        return;
    }
    for (plural, kind) in DEFINED {
        define(store, plural, kind, now);
    }
    let installations = by_plural("installations").expect("installations are known");
    if store
        .get(&Key::new(installations, None, "default"))
        .is_some()
    {
        deploy_calico(store, now);
    }
}

/// Creates the CustomResourceDefinition of `plural`, Established, unless it exists.
fn define(store: &mut Store, plural: &str, kind: &str, now: Timestamp) {
    let crds = by_plural("customresourcedefinitions").expect("CRDs are served");
    let name = format!("{plural}.{GROUP}");
    if store.get(&Key::new(crds, None, &name)).is_some() {
        return;
    }
    let crd = json!({
        "metadata": {"name": name},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object",
                                     "x-kubernetes-preserve-unknown-fields": true}}}],
        },
        "status": {"conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"},
        ]},
    });
    log_refusal(store.create(crds, None, crd, now, false).map(drop));
}

/// The `calico-system` namespace and the `calico-node` DaemonSet.
fn deploy_calico(store: &mut Store, now: Timestamp) {
    let namespaces = by_plural("namespaces").expect("namespaces are served");
    if store
        .get(&Key::new(namespaces, None, CALICO_NAMESPACE))
        .is_none()
    {
        let namespace: Value = json!({"metadata": {"name": CALICO_NAMESPACE},
                                      "spec": {"finalizers": ["kubernetes"]},
                                      "status": {"phase": "Active"}});
        log_refusal(
            store
                .create(namespaces, None, namespace, now, false)
                .map(drop),
        );
    }
    let node = cni_daemon_set(
        CALICO_NAMESPACE,
        "calico-node",
        "quay.io/calico/node:v3.31.2",
    );
    log_refusal(ensure_daemon_set(store, &node, now));
}

fn log_refusal(result: Result<(), super::status::ApiError>) {
    if let Err(err) = result {
        tracing::debug!(?err, "simulated Tigera operator write failed");
    }
}
