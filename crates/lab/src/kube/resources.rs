//! The resource types a simulated API server serves, and the discovery documents kubectl reads
//! to find them (`/api`, `/apis`, `/api/v1`, `/apis/<group>/<version>`).
//!
//! Invariant: a plural name identifies one resource type (the store keys objects by it).

use serde_json::{Value, json};

/// One served resource type.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ResourceType {
    /// API group, empty for the core group.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Plural resource name, as in URLs.
    pub plural: &'static str,
    /// Singular name.
    pub singular: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// kubectl's short names.
    pub short_names: &'static [&'static str],
    /// Supported verbs.
    pub verbs: &'static [&'static str],
    /// For a custom resource, the CustomResourceDefinition that defines it
    /// (`installations.operator.tigera.io`): it is served only while that object exists.
    pub crd: Option<&'static str>,
}

const ALL: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

const fn resource(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
) -> ResourceType {
    ResourceType {
        group,
        version: "v1",
        plural,
        singular,
        kind,
        namespaced,
        short_names,
        verbs: ALL,
        crd: None,
    }
}

/// A cluster-scoped custom resource of `group`, served once the CustomResourceDefinition
/// `crd` exists (as an API server serves what a CRD defines).
const fn custom(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    crd: &'static str,
) -> ResourceType {
    ResourceType {
        crd: Some(crd),
        ..resource(group, plural, singular, kind, false, &[])
    }
}

/// Every resource type served, in discovery order.
pub(crate) static RESOURCES: &[ResourceType] = &[
    resource("", "namespaces", "namespace", "Namespace", false, &["ns"]),
    resource("", "nodes", "node", "Node", false, &["no"]),
    resource("", "pods", "pod", "Pod", true, &["po"]),
    resource("", "secrets", "secret", "Secret", true, &[]),
    resource("", "configmaps", "configmap", "ConfigMap", true, &["cm"]),
    resource("", "events", "event", "Event", true, &["ev"]),
    resource("", "services", "service", "Service", true, &["svc"]),
    resource(
        "",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        &["sa"],
    ),
    resource(
        "apps",
        "deployments",
        "deployment",
        "Deployment",
        true,
        &["deploy"],
    ),
    resource(
        "apps",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        &["rs"],
    ),
    resource(
        "apps",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        true,
        &["ds"],
    ),
    resource(
        "policy",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        &["pdb"],
    ),
    resource("coordination.k8s.io", "leases", "lease", "Lease", true, &[]),
    // Stored, not enforced: the lab authorizes by user and group (see `api::authorize`).
    resource(
        "rbac.authorization.k8s.io",
        "roles",
        "role",
        "Role",
        true,
        &[],
    ),
    resource(
        "rbac.authorization.k8s.io",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        true,
        &[],
    ),
    resource(
        "rbac.authorization.k8s.io",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        false,
        &[],
    ),
    resource(
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
        &[],
    ),
    // Stored: the custom resources below are served while their definition exists.
    resource(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
    ),
    // What the Tigera operator defines (`-manage-crds`) and reads (see `tigera`).
    custom(
        "operator.tigera.io",
        "installations",
        "installation",
        "Installation",
        "installations.operator.tigera.io",
    ),
    custom(
        "operator.tigera.io",
        "apiservers",
        "apiserver",
        "APIServer",
        "apiservers.operator.tigera.io",
    ),
    ResourceType {
        group: "authentication.k8s.io",
        version: "v1",
        plural: "selfsubjectreviews",
        singular: "selfsubjectreview",
        kind: "SelfSubjectReview",
        namespaced: false,
        short_names: &[],
        verbs: &["create"],
        crd: None,
    },
];

/// Subresources listed in discovery: `(parent plural, subresource, group, kind, verbs)`. The
/// eviction entry is what `kubectl drain` looks for to decide it may use the Eviction API.
const SUBRESOURCES: &[(&str, &str, &str, &str, &[&str])] = &[
    ("pods", "eviction", "policy", "Eviction", &["create"]),
    ("pods", "status", "", "Pod", &["get", "patch", "update"]),
    ("nodes", "status", "", "Node", &["get", "patch", "update"]),
    (
        "deployments",
        "status",
        "apps",
        "Deployment",
        &["get", "patch", "update"],
    ),
    (
        "replicasets",
        "status",
        "apps",
        "ReplicaSet",
        &["get", "patch", "update"],
    ),
    (
        "daemonsets",
        "status",
        "apps",
        "DaemonSet",
        &["get", "patch", "update"],
    ),
    (
        "poddisruptionbudgets",
        "status",
        "policy",
        "PodDisruptionBudget",
        &["get", "patch", "update"],
    ),
];

impl ResourceType {
    /// `v1` or `<group>/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// How error messages name the resource: `pods`, `deployments.apps`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// The resource type served at `group`/`version` under `plural`.
pub(crate) fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The CustomResourceDefinitions that exist, by name: which custom resources are served.
pub(crate) type Defined = std::collections::BTreeSet<String>;

impl ResourceType {
    /// Whether it is served now: a built-in type always, a custom one while its definition
    /// exists.
    pub fn is_served(&self, defined: &Defined) -> bool {
        self.crd.is_none_or(|crd| defined.contains(crd))
    }
}

/// Every resource type served now, in discovery order.
fn served(defined: &Defined) -> impl Iterator<Item = &'static ResourceType> + '_ {
    RESOURCES.iter().filter(|r| r.is_served(defined))
}

/// The resource type of objects of `api_version` (`v1`, `apps/v1`) and `kind`.
pub(crate) fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.kind == kind && r.api_version() == api_version)
}

/// The resource type with this plural name (any group).
pub(crate) fn by_plural(plural: &str) -> Option<&'static ResourceType> {
    RESOURCES.iter().find(|r| r.plural == plural)
}

/// Groups other than core, in discovery order.
fn groups(defined: &Defined) -> Vec<&'static str> {
    let mut groups: Vec<&str> = Vec::new();
    for r in served(defined) {
        if !r.group.is_empty() && !groups.contains(&r.group) {
            groups.push(r.group);
        }
    }
    groups
}

/// `/version` for a server reporting `git_version` (`v1.36.2`).
pub(crate) fn version_document(git_version: &str) -> Value {
    let core = git_version.trim_start_matches('v');
    let mut parts = core.split('.');
    let major = parts.next().unwrap_or("1").to_owned();
    let minor = parts.next().unwrap_or("0").to_owned();
    json!({
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub(crate) fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// `/apis`.
pub(crate) fn api_group_list(defined: &Defined) -> Value {
    let groups: Vec<Value> = groups(defined).into_iter().map(api_group).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, or `None` for a group not served.
pub(crate) fn api_group_document(group: &str, defined: &Defined) -> Option<Value> {
    groups(defined).contains(&group).then(|| {
        let mut doc = api_group(group);
        doc["kind"] = json!("APIGroup");
        doc["apiVersion"] = json!("v1");
        doc
    })
}

fn api_group(group: &str) -> Value {
    let version = json!({"groupVersion": format!("{group}/v1"), "version": "v1"});
    json!({"name": group, "versions": [version.clone()], "preferredVersion": version})
}

/// `/api/v1` or `/apis/<group>/<version>`, or `None` when nothing is served there.
pub(crate) fn api_resource_list(group: &str, version: &str, defined: &Defined) -> Option<Value> {
    let mut resources = Vec::new();
    for r in served(defined).filter(|r| r.group == group && r.version == version) {
        let mut entry = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs,
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if matches!(
            r.plural,
            "pods" | "services" | "deployments" | "replicasets" | "daemonsets"
        ) {
            entry["categories"] = json!(["all"]);
        }
        resources.push(entry);
        for (parent, sub, sub_group, kind, verbs) in SUBRESOURCES {
            if *parent == r.plural {
                let mut entry = json!({
                    "name": format!("{parent}/{sub}"),
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": kind,
                    "verbs": verbs,
                });
                if *sub_group != r.group {
                    entry["group"] = json!(sub_group);
                    entry["version"] = json!("v1");
                }
                resources.push(entry);
            }
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// `/openapi/v3`: where each group version's document lives.
pub(crate) fn openapi_root(hash: &str, defined: &Defined) -> Value {
    let mut paths = serde_json::Map::new();
    let mut versions: Vec<String> = vec!["api/v1".to_owned()];
    versions.extend(groups(defined).iter().map(|g| format!("apis/{g}/v1")));
    for version in versions {
        paths.insert(
            version.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{version}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/<group version>`: a skeleton document announcing, for each resource, that its
/// PATCH accepts `fieldValidation`. kubectl reads exactly that to decide it may leave
/// validation to the server (`fieldValidation=Strict`) instead of downloading schemas.
pub(crate) fn openapi_document(
    path: &str,
    server_version: &str,
    defined: &Defined,
) -> Option<Value> {
    let (group, version) = match path.split('/').collect::<Vec<_>>().as_slice() {
        ["api", version] => ("", *version),
        ["apis", group, version] => (*group, *version),
        _ => return None,
    };
    let mut paths = serde_json::Map::new();
    for r in served(defined).filter(|r| r.group == group && r.version == version) {
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let item = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("{prefix}/{}/{{name}}", r.plural)
        };
        paths.insert(
            item,
            json!({
                "patch": {
                    "parameters": [
                        {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
                        {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
                        {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
                    ],
                    "operationId": format!("patch{}", r.kind),
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": r.kind},
                    "responses": {"200": {"description": "OK"}},
                },
            }),
        );
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": server_version},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plural_names_are_unique() {
        for r in RESOURCES {
            assert_eq!(by_plural(r.plural), Some(r), "{}", r.plural);
        }
    }

    #[test]
    fn core_discovery_announces_the_policy_eviction_subresource() {
        let list = api_resource_list("", "v1", &Defined::new()).expect("core");
        let eviction = list["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["name"] == "pods/eviction")
            .expect("eviction");
        assert_eq!(eviction["group"], "policy");
        assert_eq!(eviction["kind"], "Eviction");
    }
}
