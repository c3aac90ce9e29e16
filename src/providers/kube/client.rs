//! [`ClusterClient`] through the kube crate: a `kube::Client` built from a kubeconfig text
//! (honouring `tls-server-name`), typed `Api`s for nodes, pods, ConfigMaps and Secrets, the
//! Eviction API for drains and `await_condition` for waits.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;
use tracing::{debug, info};

use super::drain::{self, Disposition, pod_ref};
use super::{
    AdminKubeconfig, ClusterClient, ClusterError, DrainBlocker, DrainOptions, DrainReport,
    ListedSecret, NodeAddress, NodeState, PodRef, SecretRecord, SkippedPod, Taint, TaintEffect,
    Workloads,
};
use crate::model::NodeName;

/// How often a read-modify-write of a node (taints) is retried after a 409 Conflict before
/// giving up; conflicts come from the kubelet's status updates and clear at once.
const CONFLICT_RETRIES: usize = 5;

/// The label prefix that names node roles (`node-role.kubernetes.io/control-plane`).
const ROLE_LABEL_PREFIX: &str = "node-role.kubernetes.io/";

/// What a kubelet's Ready condition says while the runtime has no network plugin (its reason
/// is `KubeletNotReady`; the runtime's reason is in the message).
const NETWORK_PLUGIN_NOT_READY: &str = "NetworkPluginNotReady";

/// A [`ClusterClient`] talking to one cluster through the kube crate.
#[derive(Clone)]
pub struct KubeClusterClient {
    pub(super) client: Client,
}

impl fmt::Debug for KubeClusterClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeClusterClient").finish_non_exhaustive()
    }
}

impl KubeClusterClient {
    /// A client from a kubeconfig's text, using its current context. `tls-server-name` is
    /// honoured (the certificate is checked against it, not the connection's address).
    ///
    /// The whole kubeconfig is honoured, `exec` plugins and files included: for the
    /// operator's kubeconfigs only (a management cluster's, the Lease's). A kubeconfig a VM
    /// gave goes through [`AdminKubeconfig::reduce`] and [`KubeClusterClient::for_admin`].
    ///
    /// # Errors
    /// When the text is not a kubeconfig, lacks a usable context or credentials, or the TLS
    /// material is refused. Nothing is sent over the network.
    pub async fn connect(kubeconfig: &str) -> Result<Self, ClusterError> {
        let parsed = Kubeconfig::from_yaml(kubeconfig).map_err(parse_failed)?;
        let mut config = Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
            .await
            .map_err(ClusterError::Configure)?;
        // kube retries 429s itself, for minutes; a drain must see them (a PodDisruptionBudget
        // refusing an eviction answers 429) and retries on its own schedule under its
        // deadline, and the executor retries transient errors with its own backoff.
        config.default_retry = false;
        let client = Client::try_from(config).map_err(ClusterError::Connect)?;
        Ok(KubeClusterClient { client })
    }

    /// A client from an admin kubeconfig a VM gave, reduced ([`AdminKubeconfig`]): kube's
    /// configuration is built from its server, CA and client certificate alone, so nothing
    /// else a VM wrote (plugins, files, proxies, skipped verification) can reach the kube crate.
    ///
    /// # Errors
    /// When the client cannot be built from those parts. Nothing is sent over the network.
    pub fn for_admin(admin: &AdminKubeconfig) -> Result<Self, ClusterError> {
        let url = admin
            .server()
            .parse()
            .map_err(|_| ClusterError::AdminKubeconfig {
                reason: "its server is not a URI",
            })?;
        let mut config = Config::new(url);
        config.root_cert = Some(admin.certificate_authority().to_vec());
        config.tls_server_name = admin.tls_server_name().map(str::to_owned);
        let (certificate, key) = admin.client_data();
        // kube keeps the key in a type of the `secrecy` crate; its own deserializer builds it.
        config.auth_info = serde_json::from_value(json!({
            "client-certificate-data": certificate,
            "client-key-data": key,
        }))
        .map_err(|_| ClusterError::AdminKubeconfig {
            reason: "its client certificate and key do not make kube credentials",
        })?;
        config.default_retry = false;
        let client = Client::try_from(config).map_err(ClusterError::Connect)?;
        Ok(KubeClusterClient { client })
    }

    /// A client from the pod's service account (`KUBERNETES_SERVICE_HOST`, the mounted token
    /// and CA), as a Deployment's replicas reach the cluster they run on.
    ///
    /// # Errors
    /// When not in a pod (no service account mounted) or the client cannot be built.
    pub fn in_cluster() -> Result<Self, ClusterError> {
        let mut config = Config::incluster().map_err(ClusterError::InCluster)?;
        config.default_retry = false;
        let client = Client::try_from(config).map_err(ClusterError::Connect)?;
        Ok(KubeClusterClient { client })
    }

    pub(super) fn nodes_api(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    async fn pods_on(&self, node: &NodeName) -> Result<Vec<Pod>, ClusterError> {
        let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let pods = Api::<Pod>::all(self.client.clone())
            .list(&params)
            .await
            .map_err(|source| ClusterError::ListPods {
                node: node.clone(),
                source,
            })?;
        Ok(pods.items)
    }

    /// Evicts a pod; `Ok(None)` when it went (or was already gone), `Ok(Some(reason))` when
    /// the API refused it for now (a disruption budget, a busy server).
    async fn evict(&self, pod: &PodRef, dry_run: bool) -> Result<Option<String>, ClusterError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let params = EvictParams {
            delete_options: Some(DeleteParams {
                dry_run,
                ..DeleteParams::default()
            }),
            post_options: PostParams {
                dry_run,
                ..PostParams::default()
            },
        };
        match api.evict(&pod.name, &params).await {
            Ok(_) => Ok(None),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            // 429: a disruption budget forbids it now; 500: several budgets select the pod (the
            // API cannot decide) or the server is struggling. Both are worth retrying.
            Err(kube::Error::Api(status)) if status.code == 429 || status.code >= 500 => {
                Ok(Some(drain::refusal(&status)))
            }
            Err(kube::Error::HyperError(err)) => Ok(Some(format!("API unreachable: {err}"))),
            Err(source) => Err(ClusterError::Evict {
                pod: pod.clone(),
                source,
            }),
        }
    }

    async fn patch_node(
        &self,
        node: &NodeName,
        patch: serde_json::Value,
    ) -> Result<(), kube::Error> {
        self.nodes_api()
            .patch(
                node.as_str(),
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await
            .map(drop)
    }

    /// Read-modify-write of a node's taints, retried on conflicts.
    async fn edit_taints(
        &self,
        node: &NodeName,
        edit: impl Fn(&mut Vec<k8s_openapi::api::core::v1::Taint>) + Send,
    ) -> Result<(), ClusterError> {
        let wrap = |source| ClusterError::Taint {
            node: node.clone(),
            source,
        };
        let api = self.nodes_api();
        let mut attempt = 0;
        loop {
            let mut current = api.get(node.as_str()).await.map_err(wrap)?;
            let spec = current.spec.get_or_insert_with(Default::default);
            let before = spec.taints.clone().unwrap_or_default();
            let mut taints = before.clone();
            edit(&mut taints);
            if taints == before {
                return Ok(());
            }
            spec.taints = (!taints.is_empty()).then_some(taints);
            match api
                .replace(node.as_str(), &PostParams::default(), &current)
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(status))
                    if status.code == 409 && attempt < CONFLICT_RETRIES =>
                {
                    attempt += 1;
                }
                Err(source) => return Err(wrap(source)),
            }
        }
    }
}

/// Converts a Node to what capstan observes.
fn node_state(node: &Node) -> NodeState {
    let metadata = &node.metadata;
    let status = node.status.clone().unwrap_or_default();
    let spec = node.spec.clone().unwrap_or_default();
    let ready_condition = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready");
    let mut roles: Vec<String> = metadata
        .labels
        .iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix(ROLE_LABEL_PREFIX).map(str::to_owned))
        .collect();
    roles.sort();
    NodeState {
        name: NodeName(metadata.name.clone().unwrap_or_default().into()),
        ready: ready_condition.is_some_and(|c| c.status == "True"),
        ready_since: ready_condition
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0),
        kubelet_version: status
            .node_info
            .map(|info| info.kubelet_version)
            .unwrap_or_default(),
        unschedulable: spec.unschedulable.unwrap_or(false),
        taints: spec
            .taints
            .iter()
            .flatten()
            .filter_map(|t| {
                Some(Taint {
                    key: t.key.clone(),
                    value: t.value.clone().filter(|v| !v.is_empty()),
                    effect: TaintEffect::parse(&t.effect)?,
                })
            })
            .collect(),
        roles,
        addresses: status
            .addresses
            .iter()
            .flatten()
            .map(|a| NodeAddress {
                kind: a.type_.clone(),
                address: a.address.clone(),
            })
            .collect(),
        annotations: metadata.annotations.clone().unwrap_or_default(),
        pod_cidr: spec.pod_cidr.clone(),
        created: metadata.creation_timestamp.as_ref().map(|t| t.0),
        network_plugin_not_ready: ready_condition.is_some_and(|c| {
            c.status == "False"
                && (c.reason.as_deref() == Some(NETWORK_PLUGIN_NOT_READY)
                    || c.message
                        .as_deref()
                        .is_some_and(|m| m.contains(NETWORK_PLUGIN_NOT_READY)))
        }),
        labels: metadata.labels.clone().unwrap_or_default(),
    }
}

impl ClusterClient for KubeClusterClient {
    async fn apply_manifest(
        &self,
        name: &str,
        manifest: &str,
        manager: &str,
    ) -> Result<usize, ClusterError> {
        super::apply::apply_manifest(&self.client, name, manifest, manager).await
    }

    async fn service_address(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<std::net::IpAddr>, ClusterError> {
        super::apply::service_address(&self.client, namespace, name).await
    }

    async fn nodes(&self) -> Result<Vec<NodeState>, ClusterError> {
        let nodes = self
            .nodes_api()
            .list(&ListParams::default())
            .await
            .map_err(ClusterError::ListNodes)?;
        let mut states: Vec<NodeState> = nodes.items.iter().map(node_state).collect();
        states.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(states)
    }

    async fn await_ready(&self, node: &NodeName, limit: Duration) -> Result<bool, ClusterError> {
        use futures_util::TryStreamExt as _;
        let params = WatchParams::default()
            .fields(&format!("metadata.name={node}"))
            .timeout(u32::try_from(limit.as_secs().clamp(1, 290)).unwrap_or(290));
        let watch = async {
            // From resourceVersion 0: the Node as it is now comes first (ADDED), then changes.
            let events = self
                .nodes_api()
                .watch(&params, "0")
                .await
                .map_err(ClusterError::ListNodes)?;
            futures_util::pin_mut!(events);
            while let Some(event) = events.try_next().await.map_err(ClusterError::ListNodes)? {
                if let WatchEvent::Added(node) | WatchEvent::Modified(node) = event
                    && node_state(&node).ready
                {
                    return Ok(true);
                }
            }
            Ok(false)
        };
        tokio::time::timeout(limit, watch)
            .await
            .unwrap_or(Ok(false))
    }

    async fn cordon(&self, node: &NodeName) -> Result<(), ClusterError> {
        self.patch_node(node, json!({"spec": {"unschedulable": true}}))
            .await
            .map_err(|source| ClusterError::Cordon {
                node: node.clone(),
                source,
            })?;
        info!(node = %node, "node cordoned");
        Ok(())
    }

    async fn delete_node(&self, node: &NodeName) -> Result<(), ClusterError> {
        match self
            .nodes_api()
            .delete(node.as_str(), &DeleteParams::default())
            .await
        {
            Ok(_) => {
                info!(node = %node, "node deleted");
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(source) => Err(ClusterError::DeleteNode {
                node: node.clone(),
                source,
            }),
        }
    }

    async fn add_taint(&self, node: &NodeName, taint: &Taint) -> Result<(), ClusterError> {
        let wanted = k8s_openapi::api::core::v1::Taint {
            key: taint.key.clone(),
            value: taint.value.clone(),
            effect: taint.effect.as_str().to_owned(),
            time_added: None,
        };
        self.edit_taints(node, |taints| {
            let same = |t: &k8s_openapi::api::core::v1::Taint| {
                t.key == wanted.key && t.effect == wanted.effect
            };
            if let Some(existing) = taints.iter_mut().find(|t| same(t)) {
                existing.value.clone_from(&wanted.value);
            } else {
                taints.push(wanted.clone());
            }
        })
        .await?;
        info!(node = %node, taint = %taint.key, effect = taint.effect.as_str(), "node tainted");
        Ok(())
    }

    async fn relabel(&self, change: &crate::scheduling::Relabel) -> Result<(), ClusterError> {
        self.relabel_node(change).await
    }

    async fn annotate(
        &self,
        node: &NodeName,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), ClusterError> {
        self.nodes_api()
            .patch(
                node.as_str(),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {key: value}}})),
            )
            .await
            .map_err(|source| ClusterError::Annotate {
                node: node.clone(),
                source,
            })?;
        Ok(())
    }

    #[tracing::instrument(skip_all, fields(node = %node))]
    async fn drain(
        &self,
        node: &NodeName,
        options: &DrainOptions,
    ) -> Result<DrainReport, ClusterError> {
        let fenced = |before: &str| {
            options
                .fence
                .check(format_args!("{before} {node}"))
                .map_err(ClusterError::NotLeading)
        };
        fenced("cordoning")?;
        self.cordon(node).await?;
        let deadline = tokio::time::Instant::now() + options.timeout;
        let mut evicted: BTreeSet<PodRef> = BTreeSet::new();
        info!(node = %node, timeout = ?options.timeout, "drain started");
        loop {
            fenced("a round of evictions on")?;
            let pods = self.pods_on(node).await?;
            let mut skipped = Vec::new();
            let mut blockers = Vec::new();
            let mut progressed = false;
            for pod in &pods {
                let pod_ref = pod_ref(pod);
                match drain::disposition(pod) {
                    Disposition::Skip(reason) => skipped.push(SkippedPod {
                        pod: pod_ref,
                        reason,
                    }),
                    Disposition::Terminating => blockers.push(DrainBlocker {
                        pod: pod_ref,
                        reason: "still terminating".to_owned(),
                    }),
                    Disposition::Evict => match self.evict(&pod_ref, false).await? {
                        None => {
                            debug!(node = %node, pod = %pod_ref, "pod evicted");
                            // Only a first eviction counts as progress: a pod of the same name
                            // showing up again must not turn this loop into a busy one.
                            progressed |= evicted.insert(pod_ref.clone());
                            blockers.push(DrainBlocker {
                                pod: pod_ref,
                                reason: "evicted, still on the node".to_owned(),
                            });
                        }
                        Some(reason) => {
                            debug!(node = %node, pod = %pod_ref, %reason, "eviction refused");
                            blockers.push(DrainBlocker {
                                pod: pod_ref,
                                reason,
                            });
                        }
                    },
                }
            }
            // Done when the listing held nothing left to evict or wait for.
            if blockers.is_empty() {
                skipped.sort();
                info!(node = %node, evicted = evicted.len(), skipped = skipped.len(), "drain finished");
                return Ok(DrainReport {
                    evicted: evicted.into_iter().collect(),
                    skipped,
                });
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                blockers.sort();
                info!(node = %node, blockers = blockers.len(), "drain timed out");
                return Err(ClusterError::DrainTimedOut {
                    node: node.clone(),
                    timeout: options.timeout,
                    blockers,
                });
            }
            // Evicted pods may be gone already: look again at once. Otherwise wait, as
            // kubectl does, before retrying refused evictions.
            if !progressed {
                tokio::time::sleep(options.retry_interval.min(deadline - now)).await;
            }
        }
    }

    async fn drain_blockers(&self, node: &NodeName) -> Result<Vec<DrainBlocker>, ClusterError> {
        let mut blockers = Vec::new();
        for pod in self.pods_on(node).await? {
            let pod_ref = pod_ref(&pod);
            match drain::disposition(&pod) {
                Disposition::Skip(_) => {}
                Disposition::Terminating => blockers.push(DrainBlocker {
                    pod: pod_ref,
                    reason: "still terminating".to_owned(),
                }),
                Disposition::Evict => {
                    if let Some(reason) = self.evict(&pod_ref, true).await? {
                        blockers.push(DrainBlocker {
                            pod: pod_ref,
                            reason,
                        });
                    }
                }
            }
        }
        blockers.sort();
        Ok(blockers)
    }

    async fn pods_to_move(&self, node: &NodeName) -> Result<Vec<PodRef>, ClusterError> {
        let mut pods: Vec<PodRef> = self
            .pods_on(node)
            .await?
            .iter()
            .filter(|pod| !matches!(drain::disposition(pod), Disposition::Skip(_)))
            .map(pod_ref)
            .collect();
        pods.sort();
        Ok(pods)
    }

    async fn workloads(&self) -> Result<Workloads, ClusterError> {
        let list_error = |what| move |source| ClusterError::ListWorkloads { what, source };
        let pods = Api::<Pod>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(list_error("pods"))?;
        let budgets = Api::<PodDisruptionBudget>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(list_error("PodDisruptionBudgets"))?;
        Ok(Workloads::from_wire(&pods.items, &budgets.items))
    }

    async fn authenticated_user(&self) -> Result<String, ClusterError> {
        let review = Api::<SelfSubjectReview>::all(self.client.clone())
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .map_err(ClusterError::Authenticate)?;
        Ok(review
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username)
            .unwrap_or_default())
    }

    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, ClusterError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let found = api
            .get_opt(name)
            .await
            .map_err(|source| ClusterError::GetConfigMap {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            })?;
        Ok(found.map(|cm| cm.data.unwrap_or_default()))
    }

    async fn write_config_map(
        &self,
        namespace: &str,
        name: &str,
        data: &BTreeMap<String, String>,
    ) -> Result<(), ClusterError> {
        let wrap = |source| ClusterError::WriteConfigMap {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        match api.get_opt(name).await.map_err(wrap)? {
            Some(mut existing) => {
                if existing.data.as_ref() == Some(data) {
                    return Ok(());
                }
                existing.data = Some(data.clone());
                api.replace(name, &PostParams::default(), &existing)
                    .await
                    .map_err(wrap)?;
            }
            None => {
                let fresh = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.to_owned()),
                        namespace: Some(namespace.to_owned()),
                        ..ObjectMeta::default()
                    },
                    data: Some(data.clone()),
                    ..ConfigMap::default()
                };
                api.create(&PostParams::default(), &fresh)
                    .await
                    .map_err(wrap)?;
            }
        }
        Ok(())
    }

    async fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<SecretRecord>, ClusterError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let found = api
            .get_opt(name)
            .await
            .map_err(|source| ClusterError::GetSecret {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            })?;
        Ok(found.map(secret_record))
    }

    async fn secrets_labelled(
        &self,
        label_selector: &str,
    ) -> Result<Vec<ListedSecret>, ClusterError> {
        let api: Api<Secret> = Api::all(self.client.clone());
        let listed = api
            .list(&ListParams::default().labels(label_selector))
            .await
            .map_err(|source| ClusterError::ListSecrets {
                selector: label_selector.to_owned(),
                source,
            })?;
        let mut secrets: Vec<ListedSecret> = listed
            .items
            .into_iter()
            .map(|secret| ListedSecret {
                namespace: secret.metadata.namespace.clone().unwrap_or_default(),
                name: secret.metadata.name.clone().unwrap_or_default(),
                record: secret_record(secret),
            })
            .collect();
        secrets.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Ok(secrets)
    }

    async fn write_secret(
        &self,
        namespace: &str,
        name: &str,
        secret: &SecretRecord,
    ) -> Result<String, ClusterError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let object = Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                labels: Some(secret.labels.clone()),
                annotations: Some(secret.annotations.clone()),
                resource_version: secret.resource_version.clone(),
                ..ObjectMeta::default()
            },
            data: Some(
                secret
                    .data
                    .iter()
                    .map(|(k, v)| (k.clone(), ByteString(v.clone())))
                    .collect(),
            ),
            type_: Some("Opaque".to_owned()),
            ..Secret::default()
        };
        let written = match &secret.resource_version {
            None => api.create(&PostParams::default(), &object).await,
            Some(_) => api.replace(name, &PostParams::default(), &object).await,
        }
        .map_err(|source| ClusterError::WriteSecret {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })?;
        Ok(written.metadata.resource_version.unwrap_or_default())
    }

    async fn delete_secret(&self, namespace: &str, name: &str) -> Result<bool, ClusterError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(source) => Err(ClusterError::DeleteSecret {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            }),
        }
    }
}

/// A Secret as [`SecretRecord`] (data decoded).
fn secret_record(secret: Secret) -> SecretRecord {
    SecretRecord {
        data: secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, ByteString(v))| (k, v))
            .collect(),
        labels: secret.metadata.labels.unwrap_or_default(),
        annotations: secret.metadata.annotations.unwrap_or_default(),
        resource_version: secret.metadata.resource_version,
    }
}

/// A kubeconfig that does not parse, without the excerpt kube's YAML error carries (it quotes
/// the lines around the fault: a `token:`, a `client-key-data:`).
fn parse_failed(err: kube::config::KubeconfigError) -> ClusterError {
    const DOCUMENT: &str = "the kubeconfig";
    ClusterError::ParseKubeconfig(match &err {
        kube::config::KubeconfigError::Parse(yaml) => {
            crate::redact::DocumentError::yaml(DOCUMENT, yaml)
        }
        // Merging the documents of a multi-document kubeconfig: words of kube's own.
        other => crate::redact::DocumentError {
            document: DOCUMENT,
            line: None,
            column: None,
            problem: other.to_string(),
        },
    })
}

/// When the client certificate of the kubeconfig's current user expires; `None` when that
/// user authenticates otherwise (a token, an exec plugin) or names a certificate file.
///
/// # Errors
/// When the text is not a kubeconfig, or its embedded certificate is not a readable PEM
/// certificate.
pub fn client_certificate_expiry(kubeconfig: &str) -> Result<Option<Timestamp>, ClusterError> {
    let parsed = Kubeconfig::from_yaml(kubeconfig).map_err(parse_failed)?;
    let invalid = |reason: &str| ClusterError::ClientCertificate {
        reason: reason.to_owned(),
    };
    let user = parsed
        .current_context
        .as_ref()
        .and_then(|current| parsed.contexts.iter().find(|c| &c.name == current))
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.user.clone());
    let Some(user) = user else {
        return Ok(None);
    };
    let Some(data) = parsed
        .auth_infos
        .iter()
        .find(|a| a.name == user)
        .and_then(|a| a.auth_info.as_ref())
        .and_then(|a| a.client_certificate_data.as_ref())
    else {
        return Ok(None);
    };
    let pem = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| invalid("client-certificate-data is not base64"))?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem)
        .map_err(|_| invalid("client-certificate-data is not a PEM certificate"))?;
    let certificate = pem
        .parse_x509()
        .map_err(|_| invalid("client-certificate-data is not an X.509 certificate"))?;
    let not_after = certificate.validity().not_after.timestamp();
    Timestamp::from_second(not_after)
        .map(Some)
        .map_err(|_| invalid("the certificate's expiry is out of range"))
}
