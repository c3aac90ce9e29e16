//! Talos patches: strategic-merge patches as Talos documents them ("Configuration Patches",
//! Talos v1.13): a patch without `kind` merges onto the `v1alpha1` document; a patch with
//! `apiVersion` and `kind` (and `name`, for named documents) merges onto the document with the
//! same three, or is added as a new document; `$patch: delete` removes a field, or a whole
//! document. Maps merge, scalars replace, lists append, except where Talos documents otherwise:
//! `cluster.network.podSubnets` and `serviceSubnets` are replaced, `cluster.apiServer.auditPolicy`
//! is replaced whole, `ExtensionServiceConfig.configFiles` merge by `mountPath`.
//!
//! The resulting configs are judged by Talos's schema where they are rendered
//! (`talos::patches`); this module refuses what capstan owns.

use serde_json::Value;

use super::merge::{self, ListRule};
use super::{Owned, find_owned, owned_finding};
use crate::spec::diagnostic::{Diagnostic, SourceFile};
use crate::spec::types::ClusterSpec;

const SECRETS: &str = "nothing: capstan generates the cluster's CAs, keys and tokens and keeps them in the management cluster";
const ENDPOINT: &str = "`spec.endpoint` (`host`, `address`, `port`): capstan puts the endpoint in every certificate and config";
const VERSION: &str = "`spec.kubernetes.version`: capstan picks every Kubernetes image from it";
const VOLUMES: &str = "`machine.diskGiB`: capstan installs Talos on the VM's boot disk";
const NETWORK_CARDS: &str = "`spec.network` (`nodes`, `nodeAddresses`, `gateway`, `nameservers`): capstan gives each machine one network card, aliased `net0`";
const REGISTRIES: &str = "spec.kubernetes.registries: capstan writes the runtime's registry configuration from it (mirrors, CAs, and credentials from secret sources, never from Git)";
const AUTHENTICATION: &str = "`spec.kubernetes.authentication`: capstan writes the API server's AuthenticationConfiguration from it";
const TAINTS: &str = "`taints` of the control plane or the pool";

/// Fields of the `v1alpha1` document capstan sets.
pub const OWNED: &[Owned] = &[
    Owned {
        path: "machine.type",
        instead: "the level the machine is declared at: `spec.controlPlane` or `spec.workers`",
    },
    Owned {
        path: "machine.token",
        instead: SECRETS,
    },
    Owned {
        path: "machine.ca",
        instead: SECRETS,
    },
    Owned {
        path: "machine.acceptedCAs",
        instead: SECRETS,
    },
    Owned {
        path: "machine.certSANs",
        instead: ENDPOINT,
    },
    Owned {
        path: "machine.kubelet.image",
        instead: VERSION,
    },
    Owned {
        path: "machine.kubelet.nodeIP",
        instead: NETWORK_CARDS,
    },
    Owned {
        path: "machine.kubelet.extraConfig.registerWithTaints",
        instead: TAINTS,
    },
    Owned {
        path: "machine.nodeLabels",
        instead: "`labels` of the control plane or the pool (they change in place)",
    },
    Owned {
        path: "machine.nodeTaints",
        instead: TAINTS,
    },
    Owned {
        path: "machine.install.disk",
        instead: VOLUMES,
    },
    Owned {
        path: "machine.install.diskSelector",
        instead: VOLUMES,
    },
    Owned {
        path: "machine.install.image",
        instead: "`spec.talos.installerImage`",
    },
    Owned {
        path: "machine.disks",
        instead: VOLUMES,
    },
    Owned {
        path: "machine.network",
        instead: NETWORK_CARDS,
    },
    Owned {
        path: "machine.registries",
        instead: REGISTRIES,
    },
    Owned {
        path: "cluster.id",
        instead: SECRETS,
    },
    Owned {
        path: "cluster.secret",
        instead: SECRETS,
    },
    Owned {
        path: "cluster.token",
        instead: SECRETS,
    },
    Owned {
        path: "cluster.ca",
        instead: SECRETS,
    },
    Owned {
        path: "cluster.acceptedCAs",
        instead: SECRETS,
    },
    Owned {
        path: "cluster.aggregatorCA",
        instead: SECRETS,
    },
    Owned {
        path: "cluster.serviceAccount",
        instead: SECRETS,
    },
    Owned {
        path: "cluster.secretboxEncryptionSecret",
        instead: SECRETS,
    },
    Owned {
        path: "cluster.aescbcEncryptionSecret",
        instead: SECRETS,
    },
    Owned {
        path: "cluster.etcd.ca",
        instead: SECRETS,
    },
    Owned {
        path: "cluster.controlPlane",
        instead: ENDPOINT,
    },
    Owned {
        path: "cluster.clusterName",
        instead: "`metadata.name`",
    },
    Owned {
        path: "cluster.network.podSubnets",
        instead: "`spec.network.pods`",
    },
    Owned {
        path: "cluster.network.serviceSubnets",
        instead: "`spec.network.services`",
    },
    Owned {
        path: "cluster.network.cni",
        instead: "`spec.network.cni`",
    },
    Owned {
        path: "cluster.proxy.disabled",
        instead: "`spec.network.kubeProxy`",
    },
    Owned {
        path: "cluster.proxy.image",
        instead: VERSION,
    },
    Owned {
        path: "cluster.apiServer.image",
        instead: VERSION,
    },
    Owned {
        path: "cluster.apiServer.certSANs",
        instead: ENDPOINT,
    },
    Owned {
        path: "cluster.apiServer.extraArgs.oidc-*",
        instead: AUTHENTICATION,
    },
    Owned {
        path: "cluster.apiServer.extraArgs.authentication-config",
        instead: AUTHENTICATION,
    },
    Owned {
        path: "cluster.controllerManager.image",
        instead: VERSION,
    },
    Owned {
        path: "cluster.scheduler.image",
        instead: VERSION,
    },
    Owned {
        path: "cluster.allowSchedulingOnControlPlanes",
        instead: "`spec.controlPlane.schedulable`",
    },
];

/// Documents capstan writes or owns the subject of, by kind.
pub const OWNED_KINDS: &[(&str, &str)] = &[
    (
        "HostnameConfig",
        "nothing: capstan names every machine (its VM's name)",
    ),
    ("LinkAliasConfig", NETWORK_CARDS),
    ("LinkConfig", NETWORK_CARDS),
    ("DHCPv4Config", NETWORK_CARDS),
    ("DHCPv6Config", NETWORK_CARDS),
    ("BondConfig", NETWORK_CARDS),
    ("BridgeConfig", NETWORK_CARDS),
    ("VLANConfig", NETWORK_CARDS),
    ("DummyLinkConfig", NETWORK_CARDS),
    ("ResolverConfig", NETWORK_CARDS),
    ("Layer2VIPConfig", ENDPOINT),
    ("HCloudVIPConfig", ENDPOINT),
    ("VolumeConfig", VOLUMES),
    ("UserVolumeConfig", VOLUMES),
    ("RawVolumeConfig", VOLUMES),
    ("ExistingVolumeConfig", VOLUMES),
    ("ExternalVolumeConfig", VOLUMES),
    ("SwapVolumeConfig", VOLUMES),
    ("RegistryMirrorConfig", REGISTRIES),
    ("RegistryAuthConfig", REGISTRIES),
    ("RegistryTLSConfig", REGISTRIES),
];

/// The rule of a list (or a map replaced whole) at `path` of the document of `kind`.
pub fn rule(kind: Option<&str>, path: &[String]) -> ListRule {
    let at = |fields: &[&str]| path.iter().map(String::as_str).eq(fields.iter().copied());
    match kind {
        None if at(&["cluster", "network", "podSubnets"])
            || at(&["cluster", "network", "serviceSubnets"]) =>
        {
            ListRule::Replace
        }
        None if at(&["cluster", "apiServer", "auditPolicy"]) => ListRule::ReplaceWhole,
        Some("ExtensionServiceConfig") if at(&["configFiles"]) => ListRule::MergeBy("mountPath"),
        _ => ListRule::Append,
    }
}

/// The kind a patch targets: `None` for the `v1alpha1` document.
pub fn kind_of(patch: &Value) -> Option<&str> {
    patch.get("kind").and_then(Value::as_str)
}

/// Whether `document` is the one `patch` targets.
fn targets(document: &Value, patch: &Value) -> bool {
    match kind_of(patch) {
        None => document.get("kind").is_none(),
        Some(kind) => {
            document.get("kind").and_then(Value::as_str) == Some(kind)
                && document.get("apiVersion") == patch.get("apiVersion")
                && document.get("name") == patch.get("name")
        }
    }
}

/// Applies `patches` in order to a config's `documents`.
pub fn apply(documents: &mut Vec<Value>, patches: &[crate::spec::types::Patch]) {
    for patch in patches {
        apply_one(documents, &Value::Object(patch.0.clone()));
    }
}

/// Applies one patch to a config's `documents`.
pub fn apply_one(documents: &mut Vec<Value>, patch: &Value) {
    let position = documents.iter().position(|d| targets(d, patch));
    match position {
        Some(index) if merge::is_delete(patch) => {
            documents.remove(index);
        }
        Some(index) => {
            let kind = kind_of(patch).map(str::to_owned);
            let rule = |path: &[String]| rule(kind.as_deref(), path);
            merge::merge(&mut documents[index], patch, &mut Vec::new(), &rule);
        }
        None if merge::is_delete(patch) => {}
        None => documents.push(merge::without_directives(patch)),
    }
}

/// Refuses fields and documents capstan owns, and documents without the `apiVersion` Talos
/// matches them by.
pub fn check(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    for located in spec.all_patches() {
        let path = located.path();
        let patch = located.value();
        match kind_of(&patch) {
            None => {
                for owned in OWNED {
                    for at in find_owned(&patch, owned, &path) {
                        out.push(owned_finding(file, &at, owned));
                    }
                }
            }
            Some(kind) => {
                if let Some((_, instead)) = OWNED_KINDS.iter().find(|(k, _)| *k == kind) {
                    out.push(
                        file.error(
                            &format!("{path}.kind"),
                            format!("`{kind}` documents are capstan's to write, not a patch's"),
                        )
                        .with_hint(format!("use {instead}")),
                    );
                }
                if patch.get("apiVersion").and_then(Value::as_str).is_none() {
                    out.push(
                        file.error(&format!("{path}.kind"), format!("a `{kind}` document names its `apiVersion`"))
                            .with_hint("Talos matches a patch to a document by apiVersion, kind and name: add `apiVersion: v1alpha1`"),
                    );
                }
            }
        }
    }
}
