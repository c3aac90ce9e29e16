//! Manifests capstan carries, applied through a cluster's API (Calico's operator at a kubeadm
//! bootstrap: the node fetches nothing), and the Service addresses observation reads.
//!
//! Server-side apply as `kubectl apply --server-side --force-conflicts` does it: each object
//! by its kind, found through the API's discovery (so a custom resource is applied once its
//! definition is served), patched with `application/apply-patch+yaml` under one field
//! manager that takes over the fields it sets. Repeating an apply changes nothing.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use kube::Client;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{self, Scope};
use serde_json::Value;

use super::ClusterError;

/// Applies every object of `manifest`, in order; returns how many.
pub(super) async fn apply_manifest(
    client: &Client,
    name: &str,
    manifest: &str,
    manager: &str,
) -> Result<usize, ClusterError> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(manifest).map_err(|err| ClusterError::ParseManifest {
            manifest: name.to_owned(),
            reason: err.without_snippet().to_string(),
        })?;
    let mut applied = 0;
    for document in documents.iter().filter(|d| d.is_object()) {
        apply_object(client, name, document, manager).await?;
        applied += 1;
    }
    Ok(applied)
}

async fn apply_object(
    client: &Client,
    manifest: &str,
    document: &Value,
    manager: &str,
) -> Result<(), ClusterError> {
    let text = |field: &Value| field.as_str().unwrap_or_default().to_owned();
    let api_version = text(&document["apiVersion"]);
    let kind = text(&document["kind"]);
    let name = text(&document["metadata"]["name"]);
    if api_version.is_empty() || kind.is_empty() || name.is_empty() {
        return Err(ClusterError::ParseManifest {
            manifest: manifest.to_owned(),
            reason: "an object without apiVersion, kind or metadata.name".to_owned(),
        });
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let gvk = GroupVersionKind::gvk(group, version, &kind);
    let not_served = || ClusterError::NotServed {
        api_version: api_version.clone(),
        kind: kind.clone(),
    };
    let (resource, capabilities) = match discovery::pinned_kind(client, &gvk).await {
        Ok(found) => found,
        Err(kube::Error::Discovery(_)) => return Err(not_served()),
        Err(kube::Error::Api(status)) if status.code == 404 => return Err(not_served()),
        Err(source) => {
            return Err(ClusterError::Apply { kind, name, source });
        }
    };
    let namespace = document["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let (api, shown): (Api<DynamicObject>, String) = match capabilities.scope {
        Scope::Namespaced => (
            Api::namespaced_with(client.clone(), namespace, &resource),
            format!("{namespace}/{name}"),
        ),
        Scope::Cluster => (Api::all_with(client.clone(), &resource), name.clone()),
    };
    let params = PatchParams::apply(manager).force();
    api.patch(&name, &params, &Patch::Apply(document))
        .await
        .map_err(|source| ClusterError::Apply {
            kind,
            name: shown,
            source,
        })?;
    Ok(())
}

/// A Service's ClusterIP (`None` for no Service, or a headless one).
pub(super) async fn service_address(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<IpAddr>, ClusterError> {
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    let service = api
        .get_opt(name)
        .await
        .map_err(|source| ClusterError::GetService {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })?;
    Ok(service
        .and_then(|s| s.spec?.cluster_ip)
        .and_then(|ip| ip.parse().ok()))
}
