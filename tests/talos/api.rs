//! capstan's Talos API client against the lab's Talos API (gRPC over mutual TLS): Version,
//! Bootstrap exactly once, the etcd membership calls, and the refusals of a client
//! certificate from another CA and of one without the `os:admin` role.

use capstan::providers::talos::api::{
    BootstrapOutcome, GrpcTalosApi, TalosApi, TalosApiError, TalosCredentials,
};
use capstan::providers::talos::{AdminCredentials, admin_credentials, generate_bundle};
use capstan_core::talos::SecretsBundle;
use capstan_lab::talos::{EtcdCluster, OsCa, TalosNode, TalosNodeApi};
use rcgen::{CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair};
use tonic::Code;

pub(crate) const TALOS_TAG: &str = "v1.13.9";

fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

/// A cluster's bundle, its control planes' Talos APIs (`cp-1`, `cp-2`, ...) sharing one
/// simulated etcd, and capstan's credentials for them.
pub(crate) struct Cluster {
    pub(crate) bundle: SecretsBundle,
    pub(crate) credentials: TalosCredentials,
    pub(crate) etcd: EtcdCluster,
    pub(crate) nodes: Vec<TalosNodeApi>,
}

impl Cluster {
    pub(crate) async fn start(control_planes: usize) -> Self {
        Self::start_with(control_planes, 0).await
    }

    /// `control_planes` nodes `cp-<n>`, then `workers` nodes `w-<n>`.
    async fn start_with(control_planes: usize, workers: usize) -> Self {
        let bundle = generate_bundle("prod", now()).expect("generates");
        let admin = admin_credentials(&bundle, now()).expect("issues");
        let etcd = EtcdCluster::new();
        let os_ca = OsCa {
            certificate_pem: bundle.os_ca.certificate_pem.clone(),
            key_pem: bundle.os_ca.key_pem.clone(),
        };
        let mut nodes = Vec::new();
        for index in 1..=control_planes + workers {
            let control_plane = index <= control_planes;
            let node = TalosNode {
                hostname: if control_plane {
                    format!("cp-{index}")
                } else {
                    format!("w-{}", index - control_planes)
                },
                address: format!("10.5.0.{index}").parse().expect("an address"),
                talos_tag: TALOS_TAG.to_owned(),
                control_plane,
                registries: Default::default(),
                extensions: vec!["qemu-guest-agent".to_owned(), "iscsi-tools".to_owned()],
            };
            nodes.push(
                TalosNodeApi::start(&os_ca, node, etcd.clone())
                    .await
                    .expect("serves"),
            );
        }
        let credentials = TalosCredentials {
            os_ca_pem: bundle.os_ca.certificate_pem.clone(),
            admin,
        };
        Self {
            bundle,
            credentials,
            etcd,
            nodes,
        }
    }

    async fn client(&self, index: usize) -> GrpcTalosApi {
        GrpcTalosApi::connect(self.nodes[index].address(), &self.credentials)
            .await
            .expect("connects")
    }

    fn names(&self) -> Vec<String> {
        self.etcd
            .members_unchecked()
            .into_iter()
            .map(|m| m.name)
            .collect()
    }
}

/// A client certificate signed by `bundle`'s OS CA whose Organization is `role`.
fn client_with_role(bundle: &SecretsBundle, role: &str) -> AdminCredentials {
    let ca_key = KeyPair::from_pem(
        &bundle
            .os_ca
            .key_pem
            .replace("ED25519 PRIVATE KEY", "PRIVATE KEY"),
    )
    .expect("the OS CA key");
    let (_, pem) = x509_parser::pem::parse_x509_pem(bundle.os_ca.certificate_pem.as_bytes())
        .expect("the OS CA");
    let ca = pem.parse_x509().expect("the OS CA parses");
    let mut subject = DistinguishedName::new();
    // The issuer must be named exactly as the CA's subject is.
    for attribute in ca.subject().iter_attributes() {
        let value = attribute.as_str().expect("text");
        let oid = attribute.attr_type();
        if *oid == x509_parser::oid_registry::OID_X509_ORGANIZATION_NAME {
            subject.push(DnType::OrganizationName, value);
        } else if *oid == x509_parser::oid_registry::OID_X509_COMMON_NAME {
            subject.push(DnType::CommonName, value);
        }
    }
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = subject;
    ca_params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let issuer = Issuer::new(ca_params, &ca_key);
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::OrganizationName, role);
    params
        .distinguished_name
        .push(DnType::CommonName, "someone");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("a key");
    let certificate = params.signed_by(&key, &issuer).expect("signs");
    AdminCredentials {
        certificate_pem: certificate.pem(),
        key_pem: key.serialize_pem(),
    }
}

fn code_of(error: &TalosApiError) -> Option<Code> {
    match error {
        TalosApiError::Call { code, .. } => Some(*code),
        _ => None,
    }
}

#[tokio::test]
async fn version_answers_the_nodes_talos_tag() {
    let cluster = Cluster::start(1).await;
    let version = cluster.client(0).await.version().await.expect("answers");
    assert_eq!(version.talos_tag, TALOS_TAG);
    assert!(version.rbac);
}

#[tokio::test]
async fn the_resource_api_lists_the_extensions_the_node_runs() {
    let cluster = Cluster::start(1).await;
    let extensions = cluster.client(0).await.extensions().await.expect("answers");
    let names: Vec<(&str, &str)> = extensions
        .iter()
        .map(|e| (e.name.as_str(), e.version.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![("qemu-guest-agent", TALOS_TAG), ("iscsi-tools", TALOS_TAG)]
    );
}

#[tokio::test]
async fn bootstrap_happens_once_and_the_second_is_a_typed_outcome() {
    let cluster = Cluster::start(2).await;
    let first = cluster.client(0).await;
    assert_eq!(
        first.bootstrap().await.expect("bootstraps"),
        BootstrapOutcome::Bootstrapped
    );
    assert_eq!(
        first.bootstrap().await.expect("answers"),
        BootstrapOutcome::AlreadyBootstrapped
    );
    let second = cluster.client(1).await;
    assert_eq!(
        second.bootstrap().await.expect("answers"),
        BootstrapOutcome::AlreadyBootstrapped
    );
    assert_eq!(cluster.names(), ["cp-1"]);
}

#[tokio::test]
async fn the_member_list_shows_joined_members_with_ids_and_peer_urls() {
    let cluster = Cluster::start(3).await;
    cluster
        .client(0)
        .await
        .bootstrap()
        .await
        .expect("bootstraps");
    cluster.etcd.join("cp-2", "10.5.0.2").expect("joins");
    cluster.etcd.join("cp-3", "10.5.0.3").expect("joins");
    let members = cluster
        .client(1)
        .await
        .etcd_member_list()
        .await
        .expect("lists");
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["cp-1", "cp-2", "cp-3"]);
    assert_eq!(members[2].peer_urls, ["https://10.5.0.3:2380"]);
    assert!(members.iter().all(|m| m.id != 0 && !m.learner));
}

#[tokio::test]
async fn a_dead_member_is_removed_by_id_and_a_leaving_leader_forfeits_then_leaves() {
    let cluster = Cluster::start(3).await;
    let first = cluster.client(0).await;
    first.bootstrap().await.expect("bootstraps");
    cluster.etcd.join("cp-2", "10.5.0.2").expect("joins");
    cluster.etcd.join("cp-3", "10.5.0.3").expect("joins");

    // cp-3 dies; two of three keep quorum, and a healthy member removes it by id.
    cluster.etcd.set_healthy("cp-3", false);
    let second = cluster.client(1).await;
    let dead = second
        .etcd_member_list()
        .await
        .expect("lists")
        .into_iter()
        .find(|m| m.name == "cp-3")
        .expect("cp-3 is a member");
    second
        .etcd_remove_member_by_id(dead.id)
        .await
        .expect("removes");
    assert_eq!(cluster.names(), ["cp-1", "cp-2"]);
    let again = second
        .etcd_remove_member_by_id(dead.id)
        .await
        .expect_err("gone");
    assert_eq!(code_of(&again), Some(Code::Unknown), "{again}");

    // The leader hands over before it leaves.
    assert_eq!(cluster.etcd.leader().as_deref(), Some("cp-1"));
    let new_leader = first.etcd_forfeit_leadership().await.expect("forfeits");
    assert_eq!(new_leader.as_deref(), Some("cp-2"));
    assert_eq!(cluster.etcd.leader().as_deref(), Some("cp-2"));
    first.etcd_leave_cluster().await.expect("leaves");
    assert_eq!(cluster.names(), ["cp-2"]);
}

#[tokio::test]
async fn the_last_member_may_not_leave() {
    let cluster = Cluster::start(1).await;
    let only = cluster.client(0).await;
    only.bootstrap().await.expect("bootstraps");
    let error = only.etcd_leave_cluster().await.expect_err("refused");
    assert_eq!(code_of(&error), Some(Code::Unknown), "{error}");
    assert!(error.to_string().contains("EtcdLeaveCluster"), "{error}");
    assert_eq!(cluster.names(), ["cp-1"]);
}

#[tokio::test]
async fn a_cluster_that_lost_its_quorum_answers_no_member_list() {
    let cluster = Cluster::start(3).await;
    cluster
        .client(0)
        .await
        .bootstrap()
        .await
        .expect("bootstraps");
    cluster.etcd.join("cp-2", "10.5.0.2").expect("joins");
    cluster.etcd.join("cp-3", "10.5.0.3").expect("joins");
    cluster.etcd.set_healthy("cp-1", false);
    cluster.etcd.set_healthy("cp-2", false);
    let error = cluster
        .client(2)
        .await
        .etcd_member_list()
        .await
        .expect_err("no quorum");
    assert_eq!(code_of(&error), Some(Code::Unavailable), "{error}");
}

#[tokio::test]
async fn a_client_certificate_from_another_ca_is_refused_at_tls() {
    let cluster = Cluster::start(1).await;
    let other = generate_bundle("other", now()).expect("generates");
    let credentials = TalosCredentials {
        os_ca_pem: cluster.credentials.os_ca_pem.clone(),
        admin: admin_credentials(&other, now()).expect("issues"),
    };
    // With TLS 1.3 the server's refusal of the client certificate arrives after the client
    // finished its side of the handshake: at connect or at the first call.
    let result = match GrpcTalosApi::connect(cluster.nodes[0].address(), &credentials).await {
        Ok(client) => client.version().await.map(|_| ()),
        Err(error) => Err(error),
    };
    let error = result.expect_err("refused");
    assert_ne!(code_of(&error), Some(Code::PermissionDenied), "{error}");
    let text = format!("{error:?}");
    assert!(!text.contains("PRIVATE KEY"), "{text}");
}

#[tokio::test]
async fn a_client_certificate_without_os_admin_is_denied() {
    let cluster = Cluster::start(1).await;
    let credentials = TalosCredentials {
        os_ca_pem: cluster.credentials.os_ca_pem.clone(),
        admin: client_with_role(&cluster.bundle, "os:reader"),
    };
    let client = GrpcTalosApi::connect(cluster.nodes[0].address(), &credentials)
        .await
        .expect("the TLS layer accepts a certificate of the OS CA");
    let error = client.version().await.expect_err("denied");
    assert_eq!(code_of(&error), Some(Code::PermissionDenied), "{error}");
}

#[tokio::test]
async fn a_server_not_signed_by_the_os_ca_is_not_trusted() {
    let cluster = Cluster::start(1).await;
    let other = generate_bundle("other", now()).expect("generates");
    let credentials = TalosCredentials {
        os_ca_pem: other.os_ca.certificate_pem.clone(),
        admin: cluster.credentials.admin.clone(),
    };
    let error = GrpcTalosApi::connect(cluster.nodes[0].address(), &credentials)
        .await
        .expect_err("refused");
    assert!(matches!(error, TalosApiError::Connect { .. }), "{error}");
}

#[tokio::test]
async fn a_worker_answers_version_but_no_etcd_call() {
    let cluster = Cluster::start_with(1, 1).await;
    cluster
        .client(0)
        .await
        .bootstrap()
        .await
        .expect("bootstraps");
    let worker = cluster.client(1).await;
    assert_eq!(
        worker.version().await.expect("answers").talos_tag,
        TALOS_TAG
    );
    let error = worker
        .etcd_member_list()
        .await
        .expect_err("not a control plane");
    assert_eq!(code_of(&error), Some(Code::Unimplemented), "{error}");
    assert!(
        error
            .to_string()
            .contains("only available on control plane nodes"),
        "{error}"
    );
    let error = worker.bootstrap().await.expect_err("not a control plane");
    assert_eq!(code_of(&error), Some(Code::Unimplemented), "{error}");
}
