//! Facts and a secrets bundle for tests: PEM-shaped placeholders, not real keys (core parses
//! no X.509; the daemon's tests render from a real bundle).

use super::facts::{ClusterFacts, MachineRole, NodeFacts};
use super::secrets::{BUNDLE_FORMAT, CertificateAuthority, SecretsBundle};

fn pem(label: &str, body: &str) -> String {
    format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----\n")
}

fn authority(name: &str) -> CertificateAuthority {
    CertificateAuthority {
        certificate_pem: pem("CERTIFICATE", &format!("{name}certificate")),
        key_pem: pem("PRIVATE KEY", &format!("{name}privatekeysecret")),
    }
}

/// A bundle whose every field has the shape Talos requires.
pub fn bundle() -> SecretsBundle {
    SecretsBundle {
        format: BUNDLE_FORMAT,
        cluster_id: "Y2x1c3Rlci1pZC1jbHVzdGVyLWlkLWNsdXN0ZXItaWQ=".into(),
        cluster_secret: "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3I=".into(),
        bootstrap_token: "abcdef.0123456789abcdef".into(),
        secretbox_encryption_secret: "Ym94LWJveC1ib3gtYm94LWJveC1ib3gtYm94LWJveC0=".into(),
        trustd_token: "trustd.0123456789trustd".into(),
        os_ca: authority("os"),
        kubernetes_ca: authority("kubernetes"),
        etcd_ca: authority("etcd"),
        aggregator_ca: authority("aggregator"),
        service_account_key_pem: pem("EC PRIVATE KEY", "serviceaccountsecret"),
    }
}

/// A cluster `talos-prod` on Talos v1.13.9 with Kubernetes 1.36.3, its endpoint at
/// `k8s-talos.lab.example` = 10.20.0.10.
pub fn cluster() -> ClusterFacts {
    ClusterFacts {
        cluster_name: "talos-prod".into(),
        endpoint_host: "k8s-talos.lab.example".into(),
        endpoint_address: "10.20.0.10".parse().expect("an address"),
        endpoint_port: 6443,
        kubernetes_version: "1.36.3".parse().expect("a version"),
        talos_version: "v1.13.9".parse().expect("a version"),
        installer_image: None,
        network: talos_network(),
        authentication: None,
    }
}

/// Talos's default network (flannel, kube-proxy, 10.244.0.0/16 and 10.96.0.0/12).
pub fn talos_network() -> crate::spec::ClusterNetwork {
    crate::spec::Distribution::Talos
        .capabilities()
        .network
        .cluster_network()
}

/// A node of `role` taking its address from DHCP.
pub fn node(role: MachineRole) -> NodeFacts {
    NodeFacts {
        role,
        hostname: match role {
            MachineRole::ControlPlane => "talos-prod-cp-1".into(),
            MachineRole::Worker => "talos-prod-w-1".into(),
        },
        install_disk: "/dev/sda".into(),
        mac_address: "bc:24:11:00:00:01".parse().expect("a MAC address"),
        static_address: None,
        register_with_taints: Vec::new(),
        patches: Vec::new(),
        links: Vec::new(),
        volumes: Vec::new(),
    }
}
