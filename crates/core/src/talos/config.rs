//! Talos machine configs (pure): the v1alpha1 document and the network documents beside it,
//! rendered from the secrets bundle and the facts, for a control plane or a worker.
//!
//! Every config is one YAML stream of documents, all valid under Talos v1.13.9's published
//! schema (`reference/config.schema.json`; the tests validate every rendering against it):
//! - `v1alpha1`: the machine (type, trustd token, the OS CA, certificate SANs, kubelet, install
//!   disk and image) and the cluster (name, endpoint, network, bootstrap token, CAs, images);
//! - `HostnameConfig`: the hostname (Talos 1.13 has no `machine.network`);
//! - `LinkAliasConfig`: names the interface with the node's MAC address `net0`, so what
//!   follows does not depend on the name Linux gives it; with cards declared
//!   (`machine.networks`), one alias per card (`net<i>`), and a `LinkConfig` with the MTU of
//!   each card that sets one;
//! - `Layer2VIPConfig` (control planes): the endpoint address, announced on the link that
//!   carries the node's address by one control plane at a time (Talos's own VIP, not
//!   kube-vip);
//! - `UserVolumeConfig`: each data disk with a mount, by its serial, formatted and mounted by
//!   Talos at `/var/mnt/<name>`.
//!
//! The node's patches (`spec.patches` and its level's) are merged last, by Talos's rules
//! (`spec::patches::talos`); validation judged the result by the schema before.
//!
//! Workers get only what they need: the CA certificates without their keys, no etcd,
//! aggregator, service-account or encryption secret.

use base64::Engine as _;
use serde_json::{Value, json};

use super::facts::{ClusterFacts, FactsProblem, MachineRole, NodeFacts};
use super::secrets::{BundleShape, CertificateAuthority, SecretsBundle};

/// The alias the node's interface gets, named by its MAC address.
pub const LINK_ALIAS: &str = "net0";

/// Kubernetes's own image registry, where Talos takes the control-plane images from.
const KUBERNETES_REGISTRY: &str = "registry.k8s.io";

/// A config that cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderProblem {
    /// The facts are not valid.
    #[error("cannot render a Talos machine config")]
    Facts(#[source] FactsProblem),
    /// The secrets bundle is malformed.
    #[error("cannot render a Talos machine config")]
    Bundle(#[source] BundleShape),
    /// The YAML serializer refused a document (a defect: every value here is a string, number
    /// or boolean).
    #[error("cannot write the Talos machine config as YAML: {0}")]
    Yaml(String),
}

/// The machine config for one node: a YAML stream of documents (see the module's docs).
///
/// # Errors
///
/// [`RenderProblem`] when the facts or the bundle are not valid.
pub fn render_machine_config(
    cluster: &ClusterFacts,
    node: &NodeFacts,
    secrets: &SecretsBundle,
) -> Result<String, RenderProblem> {
    cluster.check().map_err(RenderProblem::Facts)?;
    node.check().map_err(RenderProblem::Facts)?;
    secrets.check().map_err(RenderProblem::Bundle)?;
    let mut documents = vec![v1alpha1(cluster, node, secrets)];
    if node.role == MachineRole::ControlPlane {
        super::authentication::apply(&mut documents[0], cluster);
    }
    documents.push(json!({
        "apiVersion": "v1alpha1",
        "kind": "HostnameConfig",
        "hostname": node.hostname,
    }));
    let alias = |mac: &super::facts::MacAddress| {
        json!({
            "apiVersion": "v1alpha1",
            "kind": "LinkAliasConfig",
            "selector": {"match": format!("mac(link.permanent_addr) == \"{mac}\"")},
        })
    };
    // The link carrying the node's address: `net0` for the template's one card, else the
    // alias of the card that carries it.
    let mut vip_link = LINK_ALIAS.to_owned();
    if node.links.is_empty() {
        let mut document = alias(&node.mac_address);
        document["name"] = json!(LINK_ALIAS);
        documents.push(document);
    }
    for (index, link) in node.links.iter().enumerate() {
        let name = format!("net{index}");
        let mut document = alias(&link.mac_address);
        document["name"] = json!(name);
        documents.push(document);
        if let Some(mtu) = link.mtu {
            documents.push(json!({
                "apiVersion": "v1alpha1",
                "kind": "LinkConfig",
                "name": name,
                "mtu": mtu,
            }));
        }
        if link.mac_address == node.mac_address {
            vip_link = name;
        }
    }
    if node.role == MachineRole::ControlPlane {
        documents.push(json!({
            "apiVersion": "v1alpha1",
            "kind": "Layer2VIPConfig",
            "name": cluster.endpoint_address.to_string(),
            "link": vip_link,
        }));
    }
    for volume in &node.volumes {
        documents.push(json!({
            "apiVersion": "v1alpha1",
            "kind": "UserVolumeConfig",
            "name": volume.name,
            "volumeType": "disk",
            "provisioning": {
                "diskSelector": {"match": format!("disk.serial == \"{}\"", volume.serial)},
            },
            "filesystem": {"type": volume.filesystem},
        }));
    }
    crate::spec::patches::talos::apply(&mut documents, &node.patches);
    let mut out = String::new();
    for document in &documents {
        let yaml = serde_saphyr::to_string(document)
            .map_err(|err| RenderProblem::Yaml(err.to_string()))?;
        out.push_str("---\n");
        out.push_str(&yaml);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

fn v1alpha1(cluster: &ClusterFacts, node: &NodeFacts, secrets: &SecretsBundle) -> Value {
    let is_control_plane = node.role == MachineRole::ControlPlane;
    let kubernetes = format!("v{}", cluster.kubernetes_version);
    let installer = cluster
        .installer_image
        .clone()
        .unwrap_or_else(|| format!("ghcr.io/siderolabs/installer:{}", cluster.talos_version));
    // The endpoint's name and address in the Talos API's and the API server's certificates,
    // so clients may use either.
    let sans = json!([cluster.endpoint_host, cluster.endpoint_address.to_string()]);
    let machine = json!({
        "type": node.role.as_talos(),
        "token": secrets.trustd_token,
        "ca": authority(&secrets.os_ca, is_control_plane),
        "certSANs": sans,
        "kubelet": kubelet(&kubernetes, node),
        "install": {
            "disk": node.install_disk,
            "image": installer,
            "wipe": false,
        },
    });
    let mut cluster_section = json!({
        "id": secrets.cluster_id,
        "secret": secrets.cluster_secret,
        "controlPlane": {"endpoint": cluster.endpoint_url()},
        "clusterName": cluster.cluster_name,
        "network": network(cluster),
        "token": secrets.bootstrap_token,
        // Talos would taint control planes itself (and own the taint, putting it back after
        // an in-place change): capstan registers the control-plane taint with the kubelet
        // instead, unless `controlPlane.schedulable`, so it is capstan's to change.
        "allowSchedulingOnControlPlanes": true,
        "ca": authority(&secrets.kubernetes_ca, is_control_plane),
        "proxy": proxy(cluster, &kubernetes),
        // Membership comes from the endpoint and etcd, not from Talos's discovery service
        // (an outside service an air-gapped site cannot reach).
        "discovery": {"enabled": false},
    });
    if is_control_plane && let Value::Object(section) = &mut cluster_section {
        let control_plane_only = json!({
            "secretboxEncryptionSecret": secrets.secretbox_encryption_secret,
            "aggregatorCA": authority(&secrets.aggregator_ca, true),
            "serviceAccount": {"key": base64_of(&secrets.service_account_key_pem)},
            "apiServer": {
                "image": format!("{KUBERNETES_REGISTRY}/kube-apiserver:{kubernetes}"),
                "certSANs": sans,
            },
            "controllerManager": {
                "image": format!("{KUBERNETES_REGISTRY}/kube-controller-manager:{kubernetes}"),
            },
            "scheduler": {"image": format!("{KUBERNETES_REGISTRY}/kube-scheduler:{kubernetes}")},
            "etcd": {"ca": authority(&secrets.etcd_ca, true)},
        });
        if let Value::Object(extra) = control_plane_only {
            section.extend(extra);
        }
    }
    json!({
        "version": "v1alpha1",
        "debug": false,
        "machine": machine,
        "cluster": cluster_section,
    })
}

/// `cluster.network`: the pod and service subnets; no CNI (`cni.name: none`, Flux installs
/// one) unless the cluster runs Talos's own flannel, which needs no field.
fn network(cluster: &ClusterFacts) -> Value {
    let network = &cluster.network;
    let mut section = json!({
        "dnsDomain": "cluster.local",
        "podSubnets": [network.pods.to_string()],
        "serviceSubnets": [network.services.to_string()],
    });
    if network.awaits_flux_cni() {
        section["cni"] = json!({"name": "none"});
    }
    section
}

/// `cluster.proxy`: kube-proxy's image, or disabled when a CNI replaces it.
fn proxy(cluster: &ClusterFacts, kubernetes: &str) -> Value {
    let mut section = json!({"image": format!("{KUBERNETES_REGISTRY}/kube-proxy:{kubernetes}")});
    if !cluster.network.kube_proxy {
        section["disabled"] = json!(true);
    }
    section
}

/// `machine.kubelet`: its image and, when the node has any, the taints it registers with
/// (`extraConfig.registerWithTaints`, the KubeletConfiguration field: set at registration
/// only, which NodeRestriction allows a kubelet; Talos's own `machine.nodeTaints` are applied
/// after registration with the kubelet's credentials, which NodeRestriction refuses on a
/// worker).
fn kubelet(kubernetes: &str, node: &NodeFacts) -> Value {
    let mut kubelet = json!({
        "image": format!("ghcr.io/siderolabs/kubelet:{kubernetes}"),
        "defaultRuntimeSeccompProfileEnabled": true,
    });
    if !node.register_with_taints.is_empty() {
        let taints: Vec<Value> = node
            .register_with_taints
            .iter()
            .map(|taint| match &taint.value {
                Some(value) => json!({"key": taint.key, "value": value, "effect": taint.effect}),
                None => json!({"key": taint.key, "effect": taint.effect}),
            })
            .collect();
        kubelet["extraConfig"] = json!({"registerWithTaints": taints});
    }
    kubelet
}

/// A CA as Talos writes it: base64 of the PEM; the key only where the node signs with it.
fn authority(ca: &CertificateAuthority, with_key: bool) -> Value {
    if with_key {
        json!({"crt": base64_of(&ca.certificate_pem), "key": base64_of(&ca.key_pem)})
    } else {
        json!({"crt": base64_of(&ca.certificate_pem)})
    }
}

fn base64_of(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
}
