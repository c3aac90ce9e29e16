//! kubeadm patches: configuration documents merged onto capstan's by `kind`, each judged by its
//! published API (`reference/kubeadm.schema.json`, see its README):
//! - `InitConfiguration`, `ClusterConfiguration` (`kubeadm.k8s.io/v1beta4`): the control plane
//!   (cluster or control-plane level); kubeadm reads them when the cluster is created, and
//!   capstan uploads the ClusterConfiguration again (`upload-config kubeadm`) before each new
//!   control plane joins;
//! - `JoinConfiguration` (`kubeadm.k8s.io/v1beta4`): every joining node of its level;
//! - `KubeletConfiguration` (`kubelet.config.k8s.io/v1beta1`): the kubelet of every machine of
//!   its level, delivered through kubeadm's patches directory (target `kubeletconfiguration`);
//! - `KubeProxyConfiguration` (`kubeproxy.config.k8s.io/v1alpha1`): kube-proxy, cluster level
//!   only, when the cluster runs it; written again (`addon kube-proxy`) before each new control
//!   plane joins.
//!
//! Maps merge, scalars and lists replace, except the argument lists (`extraArgs`,
//! `kubeletExtraArgs`), volumes and variables (`extraVolumes`, `extraEnvs`), merged by `name`.

use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::merge::{self, ListRule};
use super::schema::{Definitions, join_path};
use super::{Level, Located, Owned, find_owned, owned_finding};
use crate::spec::diagnostic::{Diagnostic, SourceFile};
use crate::spec::types::ClusterSpec;

/// kubeadm's configuration API.
pub const KUBEADM_API: &str = "kubeadm.k8s.io/v1beta4";
/// The kubelet's configuration API.
pub const KUBELET_API: &str = "kubelet.config.k8s.io/v1beta1";
/// kube-proxy's configuration API.
pub const KUBE_PROXY_API: &str = "kubeproxy.config.k8s.io/v1alpha1";

/// The kinds a patch may hold, with their API and the levels that may set them.
pub const KINDS: &[(&str, &str, &[Level])] = &[
    (
        "InitConfiguration",
        KUBEADM_API,
        &[Level::Cluster, Level::ControlPlane],
    ),
    (
        "ClusterConfiguration",
        KUBEADM_API,
        &[Level::Cluster, Level::ControlPlane],
    ),
    (
        "JoinConfiguration",
        KUBEADM_API,
        &[Level::Cluster, Level::ControlPlane, Level::Pool],
    ),
    (
        "KubeletConfiguration",
        KUBELET_API,
        &[Level::Cluster, Level::ControlPlane, Level::Pool],
    ),
    ("KubeProxyConfiguration", KUBE_PROXY_API, &[Level::Cluster]),
];

const SECRETS: &str = "nothing: capstan makes the join tokens, certificate keys and CAs itself";
const ENDPOINT: &str = "`spec.endpoint`: capstan writes it into every config, certificate and join";
const NODE_NAME: &str = "nothing: capstan names every node (its VM's name)";
const CRI_O: &str = "nothing: capstan's kubeadm nodes run CRI-O with systemd's cgroups";
const TAINTS: &str = "`taints` (and `spec.controlPlane.schedulable`)";
const AUTHENTICATION: &str = "`spec.kubernetes.authentication`: capstan writes the API server's AuthenticationConfiguration from it";
const PATCH_DIRECTORY: &str =
    "a `KubeletConfiguration` patch: capstan delivers it through kubeadm's patches directory";

/// Fields capstan sets, by kind (paths inside the document).
pub const OWNED: &[(&str, Owned)] = &[
    (
        "InitConfiguration",
        Owned {
            path: "bootstrapTokens",
            instead: SECRETS,
        },
    ),
    (
        "InitConfiguration",
        Owned {
            path: "certificateKey",
            instead: SECRETS,
        },
    ),
    (
        "InitConfiguration",
        Owned {
            path: "localAPIEndpoint",
            instead: ENDPOINT,
        },
    ),
    (
        "InitConfiguration",
        Owned {
            path: "skipPhases",
            instead: "`spec.network.kubeProxy` (capstan skips kube-proxy's phase when it is off)",
        },
    ),
    (
        "InitConfiguration",
        Owned {
            path: "patches",
            instead: PATCH_DIRECTORY,
        },
    ),
    (
        "JoinConfiguration",
        Owned {
            path: "discovery",
            instead: SECRETS,
        },
    ),
    (
        "JoinConfiguration",
        Owned {
            path: "caCertPath",
            instead: SECRETS,
        },
    ),
    (
        "JoinConfiguration",
        Owned {
            path: "controlPlane",
            instead: ENDPOINT,
        },
    ),
    (
        "JoinConfiguration",
        Owned {
            path: "patches",
            instead: PATCH_DIRECTORY,
        },
    ),
    (
        "*",
        Owned {
            path: "nodeRegistration.name",
            instead: NODE_NAME,
        },
    ),
    (
        "*",
        Owned {
            path: "nodeRegistration.criSocket",
            instead: CRI_O,
        },
    ),
    (
        "*",
        Owned {
            path: "nodeRegistration.taints",
            instead: TAINTS,
        },
    ),
    (
        "ClusterConfiguration",
        Owned {
            path: "clusterName",
            instead: "`metadata.name`",
        },
    ),
    (
        "ClusterConfiguration",
        Owned {
            path: "kubernetesVersion",
            instead: "`spec.kubernetes.version`",
        },
    ),
    (
        "ClusterConfiguration",
        Owned {
            path: "controlPlaneEndpoint",
            instead: ENDPOINT,
        },
    ),
    (
        "ClusterConfiguration",
        Owned {
            path: "networking.podSubnet",
            instead: "`spec.network.pods`",
        },
    ),
    (
        "ClusterConfiguration",
        Owned {
            path: "networking.serviceSubnet",
            instead: "`spec.network.services`",
        },
    ),
    (
        "ClusterConfiguration",
        Owned {
            path: "apiServer.certSANs",
            instead: ENDPOINT,
        },
    ),
    (
        "ClusterConfiguration",
        Owned {
            path: "certificatesDir",
            instead: SECRETS,
        },
    ),
    (
        "ClusterConfiguration",
        Owned {
            path: "etcd.external",
            instead: "nothing: capstan's kubeadm clusters run a stacked etcd",
        },
    ),
    (
        "ClusterConfiguration",
        Owned {
            path: "proxy.disabled",
            instead: "`spec.network.kubeProxy`",
        },
    ),
    (
        "KubeletConfiguration",
        Owned {
            path: "registerWithTaints",
            instead: TAINTS,
        },
    ),
    (
        "KubeletConfiguration",
        Owned {
            path: "podCIDR",
            instead: "`spec.network.pods`",
        },
    ),
    (
        "KubeletConfiguration",
        Owned {
            path: "clusterDNS",
            instead: "`spec.network.services` (the DNS service's address is its tenth)",
        },
    ),
    (
        "KubeletConfiguration",
        Owned {
            path: "cgroupDriver",
            instead: CRI_O,
        },
    ),
    (
        "KubeletConfiguration",
        Owned {
            path: "containerRuntimeEndpoint",
            instead: CRI_O,
        },
    ),
    (
        "KubeletConfiguration",
        Owned {
            path: "tlsCertFile",
            instead: SECRETS,
        },
    ),
    (
        "KubeletConfiguration",
        Owned {
            path: "tlsPrivateKeyFile",
            instead: SECRETS,
        },
    ),
    (
        "KubeletConfiguration",
        Owned {
            path: "staticPodPath",
            instead: "nothing: kube-vip and the control plane run as static pods from kubeadm's folder",
        },
    ),
    (
        "KubeProxyConfiguration",
        Owned {
            path: "clusterCIDR",
            instead: "`spec.network.pods`",
        },
    ),
    (
        "KubeProxyConfiguration",
        Owned {
            path: "hostnameOverride",
            instead: NODE_NAME,
        },
    ),
];

/// Command-line flags capstan sets through argument lists, by list field.
const OWNED_ARGS: &[(&str, &str, &str)] = &[
    (
        "kubeletExtraArgs",
        "node-ip",
        "`spec.network.nodes`: capstan passes the node's own address",
    ),
    (
        "kubeletExtraArgs",
        "node-labels",
        "`labels` of the control plane or the pool",
    ),
    ("kubeletExtraArgs", "register-with-taints", TAINTS),
    ("kubeletExtraArgs", "hostname-override", NODE_NAME),
    ("extraArgs", "oidc-", AUTHENTICATION),
    ("extraArgs", "authentication-config", AUTHENTICATION),
];

fn definitions() -> &'static Definitions {
    static DEFINITIONS: OnceLock<Definitions> = OnceLock::new();
    DEFINITIONS.get_or_init(|| {
        let schema: Value = serde_json::from_str(include_str!("reference/kubeadm.schema.json"))
            .expect("the kubeadm reference schema built into capstan is JSON");
        let names: Vec<&str> = KINDS.iter().map(|(kind, _, _)| *kind).collect();
        Definitions::compile(&schema, &names)
    })
}

/// The rule of a list at `path`: argument lists, volumes and variables merge by name.
pub fn rule(path: &[String]) -> ListRule {
    match path.last().map(String::as_str) {
        Some("extraArgs" | "kubeletExtraArgs" | "extraVolumes" | "extraEnvs") => {
            ListRule::MergeBy("name")
        }
        _ => ListRule::Replace,
    }
}

/// The documents of `kind` in `patches`, merged in order (without `apiVersion` and `kind`);
/// `None` when none has that kind.
pub fn merged(patches: &[Located<'_>], kind: &str) -> Option<Map<String, Value>> {
    let mut result: Option<Value> = None;
    for located in patches {
        if located.patch.0.get("kind").and_then(Value::as_str) != Some(kind) {
            continue;
        }
        let mut body = located.value();
        if let Value::Object(map) = &mut body {
            map.remove("apiVersion");
            map.remove("kind");
        }
        match &mut result {
            Some(base) => merge::merge(base, &body, &mut Vec::new(), &rule),
            None => result = Some(merge::without_directives(&body)),
        }
    }
    match result {
        Some(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// Merges `patch` (from [`merged`]) onto capstan's `document` of the same kind.
pub fn merge_onto(document: &mut Value, patch: &Map<String, Value>) {
    merge::merge(
        document,
        &Value::Object(patch.clone()),
        &mut Vec::new(),
        &rule,
    );
}

/// The patches that reach `pool`'s machines (`None`: the control planes), for their digest:
/// workers take only the kubelet's and the join's.
pub fn reaching(spec: &ClusterSpec, pool: Option<&str>) -> Vec<Value> {
    spec.patches_of(pool)
        .iter()
        .filter(|located| {
            pool.is_none()
                || matches!(
                    located.patch.0.get("kind").and_then(Value::as_str),
                    Some("KubeletConfiguration" | "JoinConfiguration")
                )
        })
        .map(Located::value)
        .collect()
}

/// Each patch is one known document at a level that may set it, valid under its API, setting
/// nothing capstan owns.
pub fn check(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    for located in spec.all_patches() {
        let path = located.path();
        let patch = located.value();
        let Some(kind) = patch.get("kind").and_then(Value::as_str) else {
            out.push(
                file.error(&path, "a kubeadm patch is one configuration document: it names its `apiVersion` and `kind`")
                    .with_hint(kinds_hint()),
            );
            continue;
        };
        let Some((_, api, levels)) = KINDS.iter().find(|(k, _, _)| *k == kind) else {
            out.push(
                file.error(
                    &format!("{path}.kind"),
                    format!("`{kind}` is not a kind a kubeadm patch may hold"),
                )
                .with_hint(kinds_hint()),
            );
            continue;
        };
        if patch.get("apiVersion").and_then(Value::as_str) != Some(api) {
            out.push(
                file.error(
                    &format!("{path}.apiVersion"),
                    format!("`{kind}` is of `{api}`"),
                )
                .with_hint(format!("write `apiVersion: {api}`")),
            );
            continue;
        }
        if !levels.contains(&located.level) {
            out.push(
                file.error(
                    &format!("{path}.kind"),
                    format!(
                        "`{kind}` configures {}, not one pool's or role's machines",
                        scope(kind)
                    ),
                )
                .with_hint(format!("move it to {}", levels_words(levels))),
            );
            continue;
        }
        if kind == "KubeProxyConfiguration" && !spec.cluster_network(None).kube_proxy {
            out.push(
                file.error(
                    &format!("{path}.kind"),
                    "the cluster runs without kube-proxy: there is nothing to configure",
                )
                .with_hint("remove the patch, or set `spec.network.kubeProxy: true`"),
            );
            continue;
        }
        for finding in definitions().findings(kind, &patch, 10) {
            out.push(
                file.error(&join_path(&path, &finding.path), finding.message)
                    .with_hint(format!("the fields of `{kind}` are those of its API reference ({api}); see crates/core/src/spec/patches/reference/README.md")),
            );
        }
        owned(out, file, &path, kind, &patch);
    }
}

fn owned(out: &mut Vec<Diagnostic>, file: &SourceFile, path: &str, kind: &str, patch: &Value) {
    for (owner, owned) in OWNED {
        if *owner == kind || *owner == "*" {
            for at in find_owned(patch, owned, path) {
                out.push(owned_finding(file, &at, owned));
            }
        }
    }
    for (list, flag, instead) in OWNED_ARGS {
        let owned = Owned { path: "", instead };
        for (at, name) in argument_names(patch, list, path) {
            let matches = match flag.strip_suffix('-') {
                Some(prefix) => name.starts_with(&format!("{prefix}-")),
                None => name == *flag,
            };
            if matches {
                out.push(
                    file.error(
                        &at,
                        format!("`--{name}` is capstan's to set, not a patch's"),
                    )
                    .with_hint(format!("use {}", owned.instead)),
                );
            }
        }
    }
}

/// The `name` of every item of every list called `list` in `value`, with its path.
fn argument_names(value: &Value, list: &str, path: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let child_path = format!("{path}.{key}");
                if key == list
                    && let Value::Array(items) = child
                {
                    for (index, item) in items.iter().enumerate() {
                        if let Some(name) = item.get("name").and_then(Value::as_str) {
                            out.push((format!("{child_path}[{index}].name"), name.to_owned()));
                        }
                    }
                } else {
                    out.extend(argument_names(child, list, &child_path));
                }
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                out.extend(argument_names(item, list, &format!("{path}[{index}]")));
            }
        }
        _ => {}
    }
    out
}

fn scope(kind: &str) -> &'static str {
    match kind {
        "KubeProxyConfiguration" => "kube-proxy on every node of the cluster",
        _ => "the control plane",
    }
}

fn levels_words(levels: &[Level]) -> String {
    let words: Vec<&str> = levels
        .iter()
        .map(|level| match level {
            Level::Cluster => "`spec.patches`",
            Level::ControlPlane => "`spec.controlPlane.patches`",
            Level::Pool => "`spec.workers[].patches`",
        })
        .collect();
    words.join(" or ")
}

fn kinds_hint() -> String {
    let kinds: Vec<String> = KINDS
        .iter()
        .map(|(kind, api, _)| format!("`{kind}` ({api})"))
        .collect();
    format!("one of {}", kinds.join(", "))
}
