//! Talos VMs at boot: Talos's NoCloud platform looks for a volume labelled `cidata`, reads its
//! `user-data` as the machine config and, when it is a valid v1alpha1 config, runs the
//! machine. The lab reads the CD-ROM with its own ISO 9660 reader and validates the config
//! with its own checks: the required fields, the certificate authorities (X.509 that parses,
//! self-issued CA certificates, a control plane's keys matching them) and the secrets shared
//! with the cluster's other members. What it finds is kept as the VM's console lines.
//!
//! The config holds secrets: none of them enters a console line, an error or a `Debug`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::kube::network::{ClusterNetwork, KubeProxy, NetworkPlugin};
use crate::nodes::Registration;
use crate::nodes::iso9660::{IsoReadError, read_image};
use crate::tls::AuthorityPem;
use crate::values::KubeVersion;
use capstan_core::model::Role;

/// The volume id Talos's NoCloud platform looks for.
pub const CIDATA_VOLUME: &str = "cidata";
/// The largest `user-data` read (a machine config is tens of KiB).
const MAX_CONFIG_BYTES: usize = 1024 * 1024;
/// The most YAML documents read from it.
const MAX_DOCUMENTS: usize = 32;

/// Why a Talos VM did not take its machine config.
#[derive(Debug, thiserror::Error)]
pub enum TalosBootError {
    /// No CD-ROM drive holds a volume labelled `cidata`.
    #[error("no volume labelled cidata: waiting for a machine config")]
    NoCidata,
    /// The CD-ROM holds no readable ISO 9660 image.
    #[error("cannot read the cidata volume")]
    ReadIso(#[source] IsoReadError),
    /// The volume has no `user-data`.
    #[error("the cidata volume has no user-data")]
    NoUserData,
    /// `user-data` is larger than the lab reads.
    #[error("user-data has {0} bytes; at most {MAX_CONFIG_BYTES} are read")]
    ConfigTooLarge(usize),
    /// `user-data` is no YAML.
    #[error("user-data is no YAML")]
    ParseYaml(#[source] serde_saphyr::Error),
    /// No v1alpha1 document among more than the lab reads, or none at all.
    #[error("user-data holds no v1alpha1 machine config")]
    NoV1alpha1,
    /// The v1alpha1 document does not have the shape of one.
    #[error("the v1alpha1 document does not parse")]
    Shape(#[source] serde_json::Error),
    /// A required field is missing or empty.
    #[error("the machine config has no {0}")]
    Missing(&'static str),
    /// `machine.type` is not `controlplane` or `worker`.
    #[error("unknown machine type `{0}`: controlplane or worker")]
    MachineType(String),
    /// `cluster.controlPlane.endpoint` is no `https://` URL.
    #[error("cluster.controlPlane.endpoint is no https:// URL")]
    Endpoint,
    /// `machine.kubelet.image` has no Kubernetes version as its tag.
    #[error("machine.kubelet.image has no Kubernetes version (v1.36.2) as its tag")]
    KubeletImage,
    /// The hostname is no DNS name.
    #[error("the hostname of the machine config is no DNS name")]
    Hostname,
    /// `cluster.clusterName` is no DNS label (the lab names files after it).
    #[error("cluster.clusterName is no DNS label (lowercase letters, digits and '-')")]
    ClusterName,
    /// A certificate authority is unusable.
    #[error("{field}: {why}")]
    Authority {
        /// The field (`machine.ca`).
        field: &'static str,
        /// What is wrong with it (no secret).
        why: &'static str,
    },
    /// The config belongs to a cluster whose members hold other secrets.
    #[error("{0} differs from the one of the cluster's other members")]
    NotShared(&'static str),
    /// `cluster.network` or `cluster.proxy` is unusable.
    #[error("cluster.network: {0}")]
    Network(String),
    /// `machine.kubelet.extraConfig.registerWithTaints` holds a malformed taint.
    #[error("machine.kubelet.extraConfig.registerWithTaints: {0}")]
    Taints(String),
}

/// A Talos machine whose config the lab took.
#[derive(Clone, PartialEq, Eq)]
pub struct TalosMachine {
    /// `cluster.id`.
    pub cluster_id: String,
    /// `cluster.clusterName`, if given.
    pub cluster_name: Option<String>,
    /// `machine.type`.
    pub role: Role,
    /// `cluster.controlPlane.endpoint`.
    pub endpoint: String,
    /// The Kubernetes CA certificate (PEM), `cluster.ca.crt`.
    pub kubernetes_ca_pem: String,
    /// The OS CA certificate (PEM), `machine.ca.crt`: what the Talos API trusts.
    pub os_ca_pem: String,
    /// The hostname the config sets (a `HostnameConfig` document, or the older
    /// `machine.network.hostname`); without one the machine takes the platform's (the VM name).
    pub hostname: Option<String>,
    /// The Kubernetes version of the kubelet it runs: the tag of `machine.kubelet.image`
    /// (`ghcr.io/siderolabs/kubelet:v1.36.2`), if the config names one.
    pub kubernetes_version: Option<KubeVersion>,
    /// What its Node registers with (see [`registration`]).
    pub registration: Registration,
    /// The OS CA key (PEM), a control plane's: what signs the Talos API's certificates.
    os_ca_key_pem: Option<String>,
    /// The Kubernetes CA key (PEM), a control plane's: what the API server signs with.
    kubernetes_ca_key_pem: Option<String>,
    /// SHA-256 of the secrets every member shares (`cluster.token`, `cluster.secret`,
    /// `machine.token`): compared, never shown.
    shared_secrets: [u8; 32],
    /// The cluster's network: `cluster.network` (pod and service subnets, the CNI) and
    /// `cluster.proxy`.
    pub network: ClusterNetwork,
    /// The kernel parameters it sets (`machine.sysctls`).
    pub sysctls: BTreeMap<String, String>,
    /// Where the kubelet's extra mounts land in its container
    /// (`machine.kubelet.extraMounts[].destination`).
    pub kubelet_mounts: Vec<String>,
    /// What its containerd pulls through: the `RegistryMirrorConfig` and
    /// `RegistryAuthConfig` documents.
    pub registries: crate::runtime::RegistryHosts,
    /// The `AuthenticationConfiguration` its API server reads (see [`api_server_authentication`]),
    /// or why the API server does not start.
    pub authentication: Result<Option<String>, String>,
}

impl std::fmt::Debug for TalosMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TalosMachine")
            .field("cluster_id", &self.cluster_id)
            .field("cluster_name", &self.cluster_name)
            .field("role", &self.role)
            .field("endpoint", &self.endpoint)
            .field("hostname", &self.hostname)
            .field("kubernetes_version", &self.kubernetes_version)
            .field("network", &self.network)
            .finish_non_exhaustive()
    }
}

impl TalosMachine {
    /// The OS CA with its key, on a control plane (a worker's config carries no key).
    pub fn os_ca(&self) -> Option<crate::talos::OsCa> {
        Some(crate::talos::OsCa {
            certificate_pem: self.os_ca_pem.clone(),
            key_pem: self.os_ca_key_pem.clone()?,
        })
    }

    /// The Kubernetes CA with its key, on a control plane.
    pub fn kubernetes_ca(&self) -> Option<AuthorityPem> {
        Some(AuthorityPem {
            certificate_pem: self.kubernetes_ca_pem.clone(),
            key_pem: self.kubernetes_ca_key_pem.clone()?,
        })
    }
}

#[derive(Deserialize)]
struct Config {
    #[serde(default)]
    machine: Option<MachineSection>,
    #[serde(default)]
    cluster: Option<ClusterSection>,
}

#[derive(Deserialize)]
struct MachineSection {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    ca: Option<Authority>,
    #[serde(default)]
    kubelet: Option<Kubelet>,
    #[serde(default)]
    network: Option<Network>,
    #[serde(default, rename = "nodeLabels")]
    node_labels: BTreeMap<String, String>,
    #[serde(default)]
    sysctls: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kubelet {
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    extra_config: Option<KubeletExtraConfig>,
    #[serde(default)]
    extra_mounts: Vec<ExtraMount>,
}

#[derive(Deserialize)]
struct ExtraMount {
    #[serde(default)]
    destination: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KubeletExtraConfig {
    #[serde(default)]
    register_with_taints: Vec<Value>,
}

#[derive(Deserialize)]
struct Network {
    #[serde(default)]
    hostname: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterSection {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    secret: Option<String>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    cluster_name: Option<String>,
    #[serde(default)]
    control_plane: Option<ControlPlane>,
    #[serde(default)]
    ca: Option<Authority>,
    #[serde(default)]
    allow_scheduling_on_control_planes: bool,
    #[serde(default)]
    network: Option<ClusterNetworkSection>,
    #[serde(default)]
    proxy: Option<ProxySection>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ClusterNetworkSection {
    #[serde(default)]
    pod_subnets: Vec<String>,
    #[serde(default)]
    service_subnets: Vec<String>,
    #[serde(default)]
    cni: Option<CniSection>,
}

#[derive(Deserialize)]
struct CniSection {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct ProxySection {
    #[serde(default)]
    disabled: bool,
}

#[derive(Deserialize)]
struct ControlPlane {
    #[serde(default)]
    endpoint: Option<String>,
}

#[derive(Deserialize)]
struct Authority {
    #[serde(default)]
    crt: Option<String>,
    #[serde(default)]
    key: Option<String>,
}

/// Reads the machine config from the first of `media` (the images in the VM's CD-ROM drives)
/// labelled `cidata`, and checks it against `members`: the machines of the lab already
/// running a config.
///
/// # Errors
/// [`TalosBootError`] naming why the VM does not run the config.
pub fn boot<'a>(
    media: impl IntoIterator<Item = &'a [u8]>,
    members: impl IntoIterator<Item = &'a TalosMachine>,
) -> Result<TalosMachine, TalosBootError> {
    // Talos looks at every device for the label: an unreadable image in another drive does
    // not hide the cidata one, but with no cidata found it is the reason given.
    let mut cidata = None;
    let mut unreadable = None;
    for image in media {
        match read_image(image) {
            Ok(read) if read.volume_id.eq_ignore_ascii_case(CIDATA_VOLUME) => {
                cidata = Some(read);
                break;
            }
            Ok(_) => {}
            Err(err) => unreadable = Some(err),
        }
    }
    let cidata = match (cidata, unreadable) {
        (Some(cidata), _) => cidata,
        (None, Some(err)) => return Err(TalosBootError::ReadIso(err)),
        (None, None) => return Err(TalosBootError::NoCidata),
    };
    let user_data = cidata.file("user-data").ok_or(TalosBootError::NoUserData)?;
    let machine = machine_config(user_data)?;
    let other = members
        .into_iter()
        .find(|m| m.cluster_id == machine.cluster_id);
    if let Some(other) = other
        && other.shared_secrets != machine.shared_secrets
    {
        return Err(TalosBootError::NotShared(
            "cluster.token, cluster.secret or machine.token",
        ));
    }
    Ok(machine)
}

/// Parses and checks `user_data`, a multi-document machine config.
/// The hostname of a `HostnameConfig` document (Talos 1.12+ sets it in a document of its own).
fn hostname_document(documents: &[Value]) -> Option<String> {
    documents
        .iter()
        .find(|d| d.get("kind").and_then(Value::as_str) == Some("HostnameConfig"))
        .and_then(|d| d.get("hostname").and_then(Value::as_str))
        .map(str::to_owned)
}

fn machine_config(user_data: &[u8]) -> Result<TalosMachine, TalosBootError> {
    if user_data.len() > MAX_CONFIG_BYTES {
        return Err(TalosBootError::ConfigTooLarge(user_data.len()));
    }
    let text = String::from_utf8_lossy(user_data);
    let documents: Vec<Value> =
        serde_saphyr::from_str_multiple(&text).map_err(TalosBootError::ParseYaml)?;
    if documents.len() > MAX_DOCUMENTS {
        return Err(TalosBootError::NoV1alpha1);
    }
    let hostname_document = hostname_document(&documents);
    let registries = crate::runtime::talos(&documents);
    let document = documents
        .into_iter()
        .find(|d| d.get("version").and_then(Value::as_str) == Some("v1alpha1"))
        .ok_or(TalosBootError::NoV1alpha1)?;
    let authentication = api_server_authentication(&document);
    let config: Config = serde_json::from_value(document).map_err(TalosBootError::Shape)?;
    let machine = config.machine.ok_or(TalosBootError::Missing("machine"))?;
    let cluster = config.cluster.ok_or(TalosBootError::Missing("cluster"))?;
    let role = match required(machine.kind.as_deref(), "machine.type")? {
        "controlplane" => Role::ControlPlane,
        "worker" => Role::Worker,
        other => {
            return Err(TalosBootError::MachineType(
                other.chars().take(40).collect(),
            ));
        }
    };
    let machine_token = required(machine.token.as_deref(), "machine.token")?;
    let cluster_id = required(cluster.id.as_deref(), "cluster.id")?;
    let cluster_secret = required(cluster.secret.as_deref(), "cluster.secret")?;
    let cluster_token = required(cluster.token.as_deref(), "cluster.token")?;
    let endpoint = required(
        cluster
            .control_plane
            .as_ref()
            .and_then(|c| c.endpoint.as_deref()),
        "cluster.controlPlane.endpoint",
    )?;
    if !endpoint.starts_with("https://") || endpoint.len() <= "https://".len() {
        return Err(TalosBootError::Endpoint);
    }
    let with_key = role == Role::ControlPlane;
    let (os_ca_pem, os_ca_key_pem) = authority(machine.ca.as_ref(), "machine.ca", with_key)?;
    let (kubernetes_ca_pem, kubernetes_ca_key_pem) =
        authority(cluster.ca.as_ref(), "cluster.ca", with_key)?;
    if let Some(name) = &cluster.cluster_name
        && (name.contains('.') || !is_dns_name(name))
    {
        return Err(TalosBootError::ClusterName);
    }
    let registration = registration(&machine, &cluster, role)?;
    let hostname = hostname_document.or(machine.network.and_then(|n| n.hostname));
    if let Some(name) = &hostname
        && !is_dns_name(name)
    {
        return Err(TalosBootError::Hostname);
    }
    let kubelet_mounts = machine.kubelet.as_ref().map_or_else(Vec::new, |k| {
        k.extra_mounts
            .iter()
            .map(|m| m.destination.clone())
            .collect()
    });
    let sysctls = machine.sysctls;
    let kubernetes_version = match machine.kubelet.and_then(|k| k.image) {
        Some(image) => Some(image_version(&image).ok_or(TalosBootError::KubeletImage)?),
        None => None,
    };
    let network = talos_network(cluster.network.unwrap_or_default(), cluster.proxy)
        .map_err(TalosBootError::Network)?;
    let mut hash = Sha256::new();
    for secret in [cluster_token, cluster_secret, machine_token] {
        hash.update((secret.len() as u64).to_le_bytes());
        hash.update(secret.as_bytes());
    }
    Ok(TalosMachine {
        cluster_id: cluster_id.to_owned(),
        cluster_name: cluster.cluster_name,
        role,
        endpoint: endpoint.to_owned(),
        kubernetes_ca_pem,
        os_ca_pem,
        hostname,
        kubernetes_version,
        registration,
        os_ca_key_pem,
        kubernetes_ca_key_pem,
        shared_secrets: hash.finalize().into(),
        network,
        sysctls,
        kubelet_mounts,
        registries,
        authentication,
    })
}

/// The `AuthenticationConfiguration` a control plane's API server reads, from its machine
/// config (`v1alpha1`): the file `cluster.apiServer.extraArgs.authentication-config` names
/// inside the pod, mounted from the host by `cluster.apiServer.extraVolumes`, written there by
/// `machine.files`; `None` without the argument. Without the mount or the file, the API server
/// does not start, in its words.
fn api_server_authentication(v1alpha1: &Value) -> Result<Option<String>, String> {
    let api_server = &v1alpha1["cluster"]["apiServer"];
    let Some(path) = api_server["extraArgs"]["authentication-config"].as_str() else {
        return Ok(None);
    };
    let missing = || {
        format!(
            "failed to load AuthenticationConfiguration: open {path}: no such file or directory"
        )
    };
    let host_path = api_server["extraVolumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|volume| volume["mountPath"].as_str() == Some(path))
        .and_then(|volume| volume["hostPath"].as_str())
        .ok_or_else(missing)?;
    v1alpha1["machine"]["files"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|file| file["path"].as_str() == Some(host_path))
        .and_then(|file| file["content"].as_str())
        .map(|content| Some(content.to_owned()))
        .ok_or_else(missing)
}

/// The network a Talos cluster runs: the first pod and service subnets (Talos's defaults
/// 10.244.0.0/16 and 10.96.0.0/12), flannel as a DaemonSet unless `cni.name` is `none` (or
/// `custom`: applied by someone else), kube-proxy as a DaemonSet unless `proxy.disabled`.
fn talos_network(
    network: ClusterNetworkSection,
    proxy: Option<ProxySection>,
) -> Result<ClusterNetwork, String> {
    let first = |subnets: &[String], default: &str| {
        subnets
            .first()
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    };
    let plugin = match network.cni.and_then(|c| c.name).as_deref() {
        None | Some("flannel") => NetworkPlugin::Flannel,
        Some("none" | "custom") => NetworkPlugin::Applied,
        Some(other) => {
            return Err(format!(
                "cni.name `{}`: flannel, custom or none",
                other.chars().take(40).collect::<String>()
            ));
        }
    };
    let network = ClusterNetwork {
        pods: ClusterNetwork::parse_range(
            &first(&network.pod_subnets, "10.244.0.0/16"),
            "podSubnets",
        )?,
        services: ClusterNetwork::parse_range(
            &first(&network.service_subnets, "10.96.0.0/12"),
            "serviceSubnets",
        )?,
        plugin,
        kube_proxy: if proxy.is_some_and(|p| p.disabled) {
            KubeProxy::Disabled
        } else {
            KubeProxy::DaemonSet
        },
    };
    network.check()?;
    Ok(network)
}

/// What the machine's Node registers with, as Talos gives it: the kubelet's
/// `registerWithTaints` (`machine.kubelet.extraConfig`), the control-plane taint on a control
/// plane unless `cluster.allowSchedulingOnControlPlanes`, and `machine.nodeLabels`, which
/// Talos applies once the Node exists (with the kubelet's credentials on a worker, where
/// NodeRestriction judges them; with its own on a control plane). Talos's later
/// reconciliation of `machine.nodeLabels` is not modelled: the lab applies them once.
fn registration(
    machine: &MachineSection,
    cluster: &ClusterSection,
    role: Role,
) -> Result<Registration, TalosBootError> {
    let mut registration = Registration::default();
    if let Some(extra) = machine
        .kubelet
        .as_ref()
        .and_then(|k| k.extra_config.as_ref())
    {
        registration
            .add_taint_objects(&extra.register_with_taints)
            .map_err(TalosBootError::Taints)?;
    }
    // Talos taints control planes itself (its NodeApplyController) and records the keys it
    // owns on the Node, as it does for `machine.nodeLabels`.
    let record = |keys: Vec<&String>| serde_json::to_string(&keys).unwrap_or_default();
    if role == Role::ControlPlane && !cluster.allow_scheduling_on_control_planes {
        let taint = crate::kube::SimTaint::control_plane();
        let owned = record(vec![&taint.key]);
        registration.taints.push(taint);
        registration
            .annotations
            .insert("talos.dev/owned-taints".to_owned(), owned);
    }
    if !machine.node_labels.is_empty() {
        let owned = record(machine.node_labels.keys().collect());
        registration
            .annotations
            .insert("talos.dev/owned-labels".to_owned(), owned);
    }
    match role {
        Role::ControlPlane => registration.privileged_labels = machine.node_labels.clone(),
        Role::Worker => registration.labels = machine.node_labels.clone(),
    }
    Ok(registration)
}

/// The Kubernetes version an image's tag names (`…/kubelet:v1.36.2`, a digest after `@`
/// ignored).
fn image_version(image: &str) -> Option<KubeVersion> {
    let image = image.split('@').next()?;
    let (name, tag) = image.rsplit_once(':')?;
    // A colon in the registry's host:port is no tag.
    if tag.contains('/') || name.is_empty() {
        return None;
    }
    tag.parse().ok()
}

/// A hostname Kubernetes takes as a Node name: lowercase DNS labels, at most 253 characters.
fn is_dns_name(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

fn required<'a>(value: Option<&'a str>, field: &'static str) -> Result<&'a str, TalosBootError> {
    value
        .filter(|v| !v.trim().is_empty())
        .ok_or(TalosBootError::Missing(field))
}

/// Checks a CA (`crt`, and `key` for a control plane) and returns its certificate's PEM and,
/// for a control plane, its key's.
fn authority(
    ca: Option<&Authority>,
    field: &'static str,
    with_key: bool,
) -> Result<(String, Option<String>), TalosBootError> {
    let refuse = |why| TalosBootError::Authority { field, why };
    let ca = ca.ok_or(TalosBootError::Missing(field))?;
    let crt = decode_base64(ca.crt.as_deref()).ok_or(refuse("crt is no base64"))?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&crt).map_err(|_| refuse("crt is no PEM"))?;
    if pem.label != "CERTIFICATE" {
        return Err(refuse("crt is no PEM certificate"));
    }
    let certificate = pem
        .parse_x509()
        .map_err(|_| refuse("crt is no X.509 certificate"))?;
    let is_ca = certificate
        .basic_constraints()
        .ok()
        .flatten()
        .is_some_and(|b| b.value.ca);
    if !is_ca {
        return Err(refuse("crt is no CA certificate"));
    }
    // A cluster's CAs are roots: the chain ends in the certificate itself.
    if certificate.issuer() != certificate.subject() {
        return Err(refuse("crt is not self-issued"));
    }
    let mut key_pem = None;
    if with_key {
        let key = decode_base64(ca.key.as_deref()).ok_or(refuse("key is no base64"))?;
        let public_key = certificate.public_key().subject_public_key.data.as_ref();
        if !key_matches(&key, public_key) {
            return Err(refuse("key does not match crt"));
        }
        key_pem = Some(String::from_utf8(key).map_err(|_| refuse("key is no PEM"))?);
    }
    let crt = String::from_utf8(crt).map_err(|_| refuse("crt is no PEM"))?;
    Ok((crt, key_pem))
}

fn decode_base64(value: Option<&str>) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let value = value?.trim();
    base64::engine::general_purpose::STANDARD.decode(value).ok()
}

/// Whether the PEM private key `key` belongs to the certificate key `public_key`: a PKCS#8
/// key (Talos's `ED25519 PRIVATE KEY` label over PKCS#8) is loaded and its public key
/// compared; a SEC1 `EC PRIVATE KEY` carries its public point, which must be the
/// certificate's.
fn key_matches(key: &[u8], public_key: &[u8]) -> bool {
    let Ok((_, pem)) = x509_parser::pem::parse_x509_pem(key) else {
        return false;
    };
    match pem.label.as_str() {
        "EC PRIVATE KEY" => {
            !public_key.is_empty()
                && pem
                    .contents
                    .windows(public_key.len())
                    .any(|w| w == public_key)
        }
        "ED25519 PRIVATE KEY" | "PRIVATE KEY" => {
            let der = rustls::pki_types::PrivatePkcs8KeyDer::from(pem.contents.clone());
            rcgen::KeyPair::try_from(&der).is_ok_and(|pair| {
                use rcgen::PublicKeyData as _;
                pair.der_bytes() == public_key
            })
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "talos_tests.rs"]
pub(super) mod tests;
