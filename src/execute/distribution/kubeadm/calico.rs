//! Calico on a new kubeadm cluster, with nothing fetched from the internet at bootstrap: the
//! Tigera operator's manifest travels with capstan (`calico/tigera-operator.yaml`, pinned,
//! its release, source and checksum in `calico/README.md` and below) and is applied through
//! the new cluster's API, never by the node. Once the operator has defined its custom
//! resources, the `Installation` (IPIP over the cluster's pod network; Calico's eBPF
//! dataplane when the cluster runs without kube-proxy) and the `APIServer` follow.
//!
//! # Guarantees
//! Every apply is a server-side apply under one field manager: repeating the whole install
//! after a crash changes nothing.

use std::time::Duration;

use capstan_core::spec::{ClusterNetwork, Endpoint};

use crate::providers::kube::{ClusterClient, ClusterError};

/// The Calico release vendored.
pub const RELEASE: &str = "v3.31.2";
/// Where `calico/tigera-operator.yaml` comes from, byte for byte.
pub const SOURCE_URL: &str =
    "https://raw.githubusercontent.com/projectcalico/calico/v3.31.2/manifests/tigera-operator.yaml";
/// The sha256 of `calico/tigera-operator.yaml` (of the file at [`SOURCE_URL`]).
pub const SHA256: &str = "c0b05a7f074adb266695e4b7e1fe712e2dbccd26f26e3b84e81c4e895d9879bb";

const OPERATOR: &str = include_str!("calico/tigera-operator.yaml");
const INSTALLATION: &str = include_str!("calico/installation.yaml");
const SERVICES_ENDPOINT: &str = include_str!("calico/services-endpoint.yaml");

/// The field manager capstan applies as (`kubectl get -o yaml --show-managed-fields` names it).
const FIELD_MANAGER: &str = "capstan";
/// How long the operator may take to define its resources: on a real node it pulls its image
/// first.
const DEFINITIONS_WAIT: Duration = Duration::from_secs(5 * 60);
/// How often the definitions are looked for meanwhile.
const DEFINITIONS_POLL: Duration = Duration::from_secs(2);

/// Installs Calico through `api`; says what it applied.
///
/// # Errors
/// The API's refusal, or the operator not defining its resources within
/// [`DEFINITIONS_WAIT`] ([`ClusterError::NotServed`], retried by the next pass).
pub async fn install<C: ClusterClient>(
    api: &C,
    network: &ClusterNetwork,
    endpoint: &Endpoint,
) -> Result<String, ClusterError> {
    let mut applied = api
        .apply_manifest("tigera-operator.yaml", OPERATOR, FIELD_MANAGER)
        .await?;
    if !network.kube_proxy {
        applied += api
            .apply_manifest(
                "services-endpoint.yaml",
                &services_endpoint(endpoint),
                FIELD_MANAGER,
            )
            .await?;
    }
    let installation = installation(network);
    let started = tokio::time::Instant::now();
    loop {
        match api
            .apply_manifest("installation.yaml", &installation, FIELD_MANAGER)
            .await
        {
            Ok(count) => {
                applied += count;
                break;
            }
            Err(ClusterError::NotServed { .. }) if started.elapsed() < DEFINITIONS_WAIT => {
                tokio::time::sleep(DEFINITIONS_POLL).await;
            }
            Err(err) => return Err(err),
        }
    }
    Ok(format!(
        "Calico {RELEASE} ({applied} objects, through the API)"
    ))
}

/// The `Installation` and `APIServer` for `network`.
fn installation(network: &ClusterNetwork) -> String {
    let dataplane = if network.kube_proxy {
        "Iptables"
    } else {
        "BPF"
    };
    INSTALLATION
        .replace("${POD_SUBNET}", &network.pods.to_string())
        .replace("${LINUX_DATAPLANE}", dataplane)
}

/// The ConfigMap that tells Calico's eBPF dataplane where the API server is.
fn services_endpoint(endpoint: &Endpoint) -> String {
    SERVICES_ENDPOINT
        .replace("${ENDPOINT_HOST}", &endpoint.host)
        .replace("${ENDPOINT_PORT}", &endpoint.port.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_operator_manifest_is_the_one_pinned() {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(OPERATOR.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex, SHA256,
            "calico/tigera-operator.yaml is not {SOURCE_URL}"
        );
        assert!(SOURCE_URL.contains(&format!("/{RELEASE}/")));
        let readme = include_str!("calico/README.md");
        for pinned in [RELEASE, SOURCE_URL, SHA256] {
            assert!(readme.contains(pinned), "the README names {pinned}");
        }
        assert!(
            OPERATOR.contains("-manage-crds=true"),
            "the operator defines its own resources"
        );
    }

    #[test]
    fn the_installation_runs_over_the_pod_network_and_replaces_kube_proxy_when_it_is_off() {
        let network = ClusterNetwork {
            pods: "10.60.0.0/16".parse().expect("net"),
            services: "10.70.0.0/16".parse().expect("net"),
            cni: capstan_core::spec::Cni::Calico,
            kube_proxy: true,
        };
        let text = installation(&network);
        assert!(text.contains("cidr: 10.60.0.0/16") && text.contains("linuxDataplane: Iptables"));
        assert!(!text.contains("${"), "{text}");
        let without = installation(&ClusterNetwork {
            kube_proxy: false,
            ..network
        });
        assert!(without.contains("linuxDataplane: BPF"));
        let endpoint = Endpoint {
            host: "k8s-prod.lab.example".to_owned(),
            address: "192.168.1.23".parse().expect("ip"),
            port: 6443,
        };
        let config_map = services_endpoint(&endpoint);
        assert!(config_map.contains("KUBERNETES_SERVICE_HOST: \"k8s-prod.lab.example\""));
        assert!(config_map.contains("KUBERNETES_SERVICE_PORT: \"6443\""));
    }
}
