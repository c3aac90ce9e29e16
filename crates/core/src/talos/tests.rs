//! Machine configs judged by Talos's published JSON schema: every rendering, for each role and
//! for any valid facts (property test), is a stream of documents the schema accepts, and reads
//! back with the cluster name, endpoint and role it was made for.

use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::Value;

use super::config::render_machine_config;
use super::facts::{ClusterFacts, FactsProblem, MachineRole, NodeFacts, StaticAddress};
use super::fixtures::{bundle, cluster, node};
use super::versions::VersionSupport;

/// Talos v1.13.9's machine-config schema, compiled once. The `jsonschema` crate judges rather
/// than Debian's python3-jsonschema: it is already the workspace's schema judge (tests/cli), it
/// supports the schema's draft 2020-12, and in-process the property test checks hundreds of
/// configs in well under a second, where a Python process per config would take minutes.
fn schema() -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<jsonschema::Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let text = include_str!("reference/config.schema.json");
        let schema: Value = serde_json::from_str(text).expect("the schema is JSON");
        jsonschema::validator_for(&schema).expect("the schema compiles")
    })
}

/// The documents of a YAML stream, each checked against the schema; panics naming the errors.
fn schema_checked(config: &str) -> Vec<Value> {
    let documents: Vec<Value> =
        serde_saphyr::from_str_multiple(config).expect("the config is YAML");
    for document in &documents {
        let errors: Vec<String> = schema()
            .iter_errors(document)
            .map(|err| format!("{} at {}", err, err.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "schema errors: {errors:#?}\nin\n{config}"
        );
    }
    documents
}

fn kind(document: &Value) -> &str {
    document["kind"].as_str().unwrap_or("v1alpha1")
}

fn kinds(documents: &[Value]) -> Vec<&str> {
    documents.iter().map(kind).collect()
}

#[test]
fn the_schema_refuses_what_talos_refuses() {
    // The judge judges: a field Talos does not know, or a wrong machine type, fails.
    let config =
        render_machine_config(&cluster(), &node(MachineRole::Worker), &bundle()).expect("renders");
    let mut documents: Vec<Value> = serde_saphyr::from_str_multiple(&config).expect("YAML");
    documents[0]["machine"]["type"] = "init".into();
    assert!(!schema().is_valid(&documents[0]));
    documents[0]["machine"]["type"] = "worker".into();
    documents[0]["machine"]["network"] = serde_json::json!({"hostname": "x"});
    assert!(!schema().is_valid(&documents[0]));
}

#[test]
fn a_control_plane_config_is_valid_and_announces_the_vip_on_its_own_link() {
    let config = render_machine_config(&cluster(), &node(MachineRole::ControlPlane), &bundle())
        .expect("renders");
    let documents = schema_checked(&config);
    assert_eq!(
        kinds(&documents),
        [
            "v1alpha1",
            "HostnameConfig",
            "LinkAliasConfig",
            "Layer2VIPConfig"
        ]
    );
    let [v1, hostname, alias, vip] = &documents[..] else {
        unreachable!("four documents")
    };
    assert_eq!(v1["machine"]["type"], "controlplane");
    assert_eq!(
        v1["cluster"]["controlPlane"]["endpoint"],
        "https://k8s-talos.lab.example:6443"
    );
    let sans = serde_json::json!(["k8s-talos.lab.example", "10.20.0.10"]);
    assert_eq!(v1["machine"]["certSANs"], sans);
    assert_eq!(v1["cluster"]["apiServer"]["certSANs"], sans);
    assert_eq!(
        v1["cluster"]["apiServer"]["image"],
        "registry.k8s.io/kube-apiserver:v1.36.3"
    );
    assert_eq!(
        v1["machine"]["kubelet"]["image"],
        "ghcr.io/siderolabs/kubelet:v1.36.3"
    );
    assert_eq!(
        v1["machine"]["install"]["image"],
        "ghcr.io/siderolabs/installer:v1.13.9"
    );
    assert_eq!(v1["machine"]["install"]["disk"], "/dev/sda");
    assert_eq!(hostname["hostname"], "talos-prod-cp-1");
    assert_eq!(alias["name"], "net0");
    assert_eq!(
        alias["selector"]["match"],
        r#"mac(link.permanent_addr) == "bc:24:11:00:00:01""#
    );
    assert_eq!(vip["name"], "10.20.0.10");
    assert_eq!(vip["link"], "net0");
}

/// Talos's default network, with no CNI (`cni_none`) and without kube-proxy as asked.
fn network_of(cni_none: bool, kube_proxy: bool) -> crate::spec::ClusterNetwork {
    crate::spec::ClusterNetwork {
        cni: if cni_none {
            crate::spec::Cni::None
        } else {
            crate::spec::Cni::Flannel
        },
        kube_proxy,
        ..super::fixtures::talos_network()
    }
}

#[test]
fn the_declared_network_is_rendered_and_the_default_one_as_talos_always_had_it() {
    let node = node(MachineRole::ControlPlane);
    let defaults = render_machine_config(&cluster(), &node, &bundle()).expect("renders");
    let v1 = &schema_checked(&defaults)[0];
    assert_eq!(
        v1["cluster"]["network"],
        serde_json::json!({"dnsDomain": "cluster.local", "podSubnets": ["10.244.0.0/16"],
                           "serviceSubnets": ["10.96.0.0/12"]}),
        "the ranges every Talos cluster of capstan ran before they were declared"
    );
    assert_eq!(
        v1["cluster"]["proxy"],
        serde_json::json!({"image": "registry.k8s.io/kube-proxy:v1.36.3"})
    );
    let mut declared = cluster();
    declared.network = crate::spec::ClusterNetwork {
        pods: "10.60.0.0/16".parse().expect("net"),
        services: "10.70.0.0/16".parse().expect("net"),
        ..network_of(true, false)
    };
    let config = render_machine_config(&declared, &node, &bundle()).expect("renders");
    let v1 = &schema_checked(&config)[0];
    assert_eq!(
        v1["cluster"]["network"]["podSubnets"],
        serde_json::json!(["10.60.0.0/16"])
    );
    assert_eq!(
        v1["cluster"]["network"]["serviceSubnets"],
        serde_json::json!(["10.70.0.0/16"])
    );
    assert_eq!(
        v1["cluster"]["network"]["cni"],
        serde_json::json!({"name": "none"})
    );
    assert_eq!(v1["cluster"]["proxy"]["disabled"], true);
}

#[test]
fn declared_cards_get_a_link_each_the_vip_follows_the_primary_and_volumes_mount_under_var_mnt() {
    use super::facts::{Link, UserVolume};
    let mut node = node(MachineRole::ControlPlane);
    let storage_card = "bc:24:11:00:00:02".parse().expect("mac");
    node.links = vec![
        Link {
            mac_address: "bc:24:11:00:00:01".parse().expect("mac"),
            mtu: None,
        },
        Link {
            mac_address: storage_card,
            mtu: Some(9000),
        },
    ];
    // The storage network's card carries the node's address here.
    node.mac_address = storage_card;
    node.volumes = vec![UserVolume {
        name: "longhorn".into(),
        serial: "capstan-disk1".into(),
        filesystem: "xfs",
    }];
    let config = render_machine_config(&cluster(), &node, &bundle()).expect("renders");
    let documents = schema_checked(&config);
    assert_eq!(
        kinds(&documents),
        vec![
            "v1alpha1",
            "HostnameConfig",
            "LinkAliasConfig",
            "LinkAliasConfig",
            "LinkConfig",
            "Layer2VIPConfig",
            "UserVolumeConfig"
        ]
    );
    assert_eq!(documents[4]["name"], "net1");
    assert_eq!(documents[4]["mtu"], 9000);
    assert_eq!(
        documents[5]["link"], "net1",
        "the VIP moves with the address"
    );
    assert_eq!(
        documents[6]["provisioning"]["diskSelector"]["match"],
        "disk.serial == \"capstan-disk1\""
    );
    assert_eq!(documents[6]["filesystem"]["type"], "xfs");
    let files = super::nocloud::cidata_files(&node, "vm-1", &config).expect("files");
    assert!(
        files
            .network_config
            .starts_with("version: 1\nconfig:\n  - type: physical\n    name: eth1\n    mac_address: 'bc:24:11:00:00:02'\n    subnets:\n      - type: dhcp\n  - type: physical\n    name: eth0\n"),
        "{}",
        files.network_config
    );
}

#[test]
fn a_control_plane_carries_every_ca_key_as_base64_pem() {
    use base64::Engine as _;
    let config = render_machine_config(&cluster(), &node(MachineRole::ControlPlane), &bundle())
        .expect("renders");
    let v1 = &schema_checked(&config)[0];
    let decode = |value: &Value| {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value.as_str().expect("a string"))
            .expect("base64");
        String::from_utf8(bytes).expect("UTF-8")
    };
    let secrets = bundle();
    assert_eq!(decode(&v1["machine"]["ca"]["key"]), secrets.os_ca.key_pem);
    assert_eq!(
        decode(&v1["cluster"]["ca"]["crt"]),
        secrets.kubernetes_ca.certificate_pem
    );
    assert_eq!(
        decode(&v1["cluster"]["etcd"]["ca"]["key"]),
        secrets.etcd_ca.key_pem
    );
    assert_eq!(
        decode(&v1["cluster"]["aggregatorCA"]["key"]),
        secrets.aggregator_ca.key_pem
    );
    assert_eq!(
        decode(&v1["cluster"]["serviceAccount"]["key"]),
        secrets.service_account_key_pem
    );
    assert_eq!(
        v1["cluster"]["secretboxEncryptionSecret"],
        secrets.secretbox_encryption_secret.as_str()
    );
    assert_eq!(v1["machine"]["token"], secrets.trustd_token.as_str());
    assert_eq!(v1["cluster"]["token"], secrets.bootstrap_token.as_str());
}

#[test]
fn authentication_is_a_control_plane_file_mounted_and_named_for_the_api_server() {
    use crate::spec::authentication::{Authentication, ClaimMapping, ClaimMappings, JwtIssuer};
    let mut facts = cluster();
    facts.authentication = Some(Authentication {
        jwt: vec![JwtIssuer {
            url: "https://sso.example.com/realms/lab".into(),
            audiences: vec!["kubernetes".into()],
            certificate_authority: None,
            claim_mappings: ClaimMappings {
                username: ClaimMapping {
                    claim: "email".into(),
                    prefix: "oidc:".into(),
                },
                groups: None,
            },
        }],
    });
    let path = super::authentication::CONFIG_PATH;
    let config = render_machine_config(&facts, &node(MachineRole::ControlPlane), &bundle())
        .expect("renders");
    let v1 = &schema_checked(&config)[0];
    let api_server = &v1["cluster"]["apiServer"];
    assert_eq!(api_server["extraArgs"]["authentication-config"], path);
    assert_eq!(
        api_server["extraVolumes"][0],
        serde_json::json!({"hostPath": path, "mountPath": path, "readonly": true})
    );
    let file = &v1["machine"]["files"][0];
    assert_eq!(
        (file["path"].as_str(), file["op"].as_str()),
        (Some(path), Some("create"))
    );
    let content: Value =
        serde_saphyr::from_str(file["content"].as_str().expect("text")).expect("YAML");
    assert_eq!(content["kind"], "AuthenticationConfiguration");
    assert_eq!(
        content["apiVersion"], "apiserver.config.k8s.io/v1",
        "Kubernetes 1.36"
    );
    let worker =
        render_machine_config(&facts, &node(MachineRole::Worker), &bundle()).expect("renders");
    let worker = &schema_checked(&worker)[0];
    assert!(
        worker["machine"].get("files").is_none(),
        "a worker's kubelet never reads it"
    );
}

#[test]
fn a_worker_config_is_valid_and_holds_no_ca_key_nor_control_plane_secret() {
    let config =
        render_machine_config(&cluster(), &node(MachineRole::Worker), &bundle()).expect("renders");
    let documents = schema_checked(&config);
    assert_eq!(
        kinds(&documents),
        ["v1alpha1", "HostnameConfig", "LinkAliasConfig"]
    );
    let v1 = &documents[0];
    assert_eq!(v1["machine"]["type"], "worker");
    assert_eq!(
        v1["cluster"]["controlPlane"]["endpoint"],
        "https://k8s-talos.lab.example:6443"
    );
    for secret in bundle().secret_values() {
        let needs = [
            bundle().trustd_token,
            bundle().bootstrap_token,
            bundle().cluster_id,
            bundle().cluster_secret,
        ];
        if needs.iter().any(|needed| needed == secret) {
            continue;
        }
        use base64::Engine as _;
        let encoded = base64::engine::general_purpose::STANDARD.encode(secret);
        assert!(
            !config.contains(secret) && !config.contains(&encoded),
            "a worker holds a control plane's secret"
        );
    }
    assert!(v1["cluster"]["ca"].get("key").is_none());
    assert!(v1["machine"]["ca"].get("key").is_none());
}

#[test]
fn an_ipv6_endpoint_host_is_bracketed_in_the_url() {
    let mut facts = cluster();
    facts.endpoint_host = "fd00::10".into();
    facts.endpoint_address = "fd00::10".parse().expect("an address");
    let config = render_machine_config(&facts, &node(MachineRole::ControlPlane), &bundle())
        .expect("renders");
    let documents = schema_checked(&config);
    assert_eq!(
        documents[0]["cluster"]["controlPlane"]["endpoint"],
        "https://[fd00::10]:6443"
    );
    assert_eq!(documents[3]["name"], "fd00::10");
}

#[test]
fn an_unsupported_version_pair_is_refused_before_rendering() {
    let mut facts = cluster();
    facts.kubernetes_version = "1.30.2".parse().expect("a version");
    let err = render_machine_config(&facts, &node(MachineRole::Worker), &bundle())
        .expect_err("1.30 on Talos 1.13");
    assert!(matches!(
        err,
        super::RenderProblem::Facts(FactsProblem::Versions(
            VersionSupport::KubernetesOutsideWindow { .. }
        ))
    ));
    assert_eq!(
        capstan_error_chain(&err),
        "cannot render a Talos machine config: Talos v1.13.9 does not support Kubernetes 1.30.2: it supports Kubernetes 1.31 to 1.36"
    );
}

fn capstan_error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    crate::errors::error_chain(err)
}

/// A change made to valid facts.
type FactsChange = dyn Fn(&mut ClusterFacts, &mut NodeFacts);

#[test]
fn invalid_facts_are_refused_naming_the_fact() {
    let cases: Vec<(Box<FactsChange>, &str)> = vec![
        (
            Box::new(|c, _| c.cluster_name = "Prod_1".into()),
            "the cluster name `Prod_1` is not a DNS label",
        ),
        (
            Box::new(|c, _| c.endpoint_host = "k8s prod".into()),
            "the endpoint host `k8s prod` is not a DNS name",
        ),
        (
            Box::new(|_, n| n.hostname = "-cp".into()),
            "the hostname `-cp` is not a DNS name",
        ),
        (
            Box::new(|_, n| n.install_disk = "/dev/../etc".into()),
            "the install disk `/dev/../etc` is not a device path",
        ),
        (
            Box::new(|_, n| n.install_disk = "sda".into()),
            "the install disk `sda` is not a device path",
        ),
        (
            Box::new(|c, _| c.endpoint_port = 0),
            "the endpoint port must be between 1 and 65535",
        ),
        (
            Box::new(|c, _| c.installer_image = Some("a b".into())),
            "the installer image `a b` is not an image reference",
        ),
        (
            Box::new(|_, n| {
                n.static_address = Some(StaticAddress {
                    address: "10.20.0.50/24".parse().expect("net"),
                    gateway: "10.30.0.1".parse().expect("ip"),
                    nameservers: vec![],
                    search_domain: None,
                })
            }),
            "the gateway 10.30.0.1 is not in the network of the static address 10.20.0.50/24",
        ),
        (
            Box::new(|_, n| {
                n.static_address = Some(StaticAddress {
                    address: "10.20.0.0/24".parse().expect("net"),
                    gateway: "10.20.0.1".parse().expect("ip"),
                    nameservers: vec![],
                    search_domain: None,
                })
            }),
            "the static address 10.20.0.0/24 is not a host address",
        ),
    ];
    for (change, expected) in cases {
        let (mut facts, mut machine) = (cluster(), node(MachineRole::ControlPlane));
        change(&mut facts, &mut machine);
        let err = render_machine_config(&facts, &machine, &bundle()).expect_err(expected);
        let chain = capstan_error_chain(&err);
        assert!(chain.contains(expected), "{chain} does not say {expected}");
    }
}

#[test]
fn rendering_is_deterministic() {
    let render = || render_machine_config(&cluster(), &node(MachineRole::ControlPlane), &bundle());
    assert_eq!(render(), render());
}

fn dns_label() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?"
}

fn dns_name() -> impl Strategy<Value = String> {
    prop::collection::vec(dns_label(), 1..4).prop_map(|labels| labels.join("."))
}

fn ip_address() -> impl Strategy<Value = std::net::IpAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(std::net::IpAddr::from),
        any::<[u16; 8]>().prop_map(std::net::IpAddr::from),
    ]
}

fn static_address() -> impl Strategy<Value = Option<StaticAddress>> {
    let fixed = (
        any::<[u8; 4]>(),
        8u8..=24,
        1u32..100,
        100u32..200,
        prop::collection::vec(ip_address(), 0..3),
    )
        .prop_map(|(base, prefix, host, gateway, nameservers)| {
            let network = u32::from_be_bytes(base) & (u32::MAX << (32 - prefix));
            StaticAddress {
                address: ipnet::IpNet::new(std::net::Ipv4Addr::from(network + host).into(), prefix)
                    .expect("a prefix within 32"),
                gateway: std::net::Ipv4Addr::from(network + gateway).into(),
                nameservers,
                search_domain: None,
            }
        });
    prop::option::of(fixed)
}

prop_compose! {
    fn facts()(
        cluster_name in dns_label(),
        endpoint_host in prop_oneof![dns_name(), ip_address().prop_map(|ip| ip.to_string())],
        endpoint_address in ip_address(),
        endpoint_port in 1u16..,
        talos_minor in 0u32..=13,
        talos_patch in 0u32..20,
        kube_offset in 0u32..6,
        kube_patch in 0u32..20,
        installer in prop::option::of("[a-z0-9./:@-]{1,60}"),
        is_control_plane in any::<bool>(),
        hostname in dns_name(),
        disk in "/dev/(sd|vd|nvme0n)[a-z1-9]",
        mac in any::<[u8; 6]>(),
        static_address in static_address(),
        cni_none in any::<bool>(),
        kube_proxy in any::<bool>(),
    ) -> (ClusterFacts, NodeFacts) {
        let kube_minor = talos_minor + 23 - kube_offset;
        let cluster = ClusterFacts {
            cluster_name,
            endpoint_host,
            endpoint_address,
            endpoint_port,
            kubernetes_version: format!("1.{kube_minor}.{kube_patch}").parse().expect("a version"),
            talos_version: format!("v1.{talos_minor}.{talos_patch}").parse().expect("a version"),
            installer_image: installer,
            network: network_of(cni_none, kube_proxy),
            authentication: None,
        };
        let node = NodeFacts {
            role: if is_control_plane { MachineRole::ControlPlane } else { MachineRole::Worker },
            hostname,
            install_disk: disk,
            mac_address: super::facts::MacAddress(mac),
            static_address,
            register_with_taints: Vec::new(),
            patches: Vec::new(),
            links: Vec::new(),
            volumes: Vec::new(),
        };
        (cluster, node)
    }
}

proptest! {
    #[test]
    fn any_valid_facts_render_a_config_the_schema_accepts_and_that_reads_back((cluster, node) in facts()) {
        let config = render_machine_config(&cluster, &node, &bundle()).expect("valid facts render");
        let documents = schema_checked(&config);
        let v1 = &documents[0];
        prop_assert_eq!(v1["cluster"]["clusterName"].as_str(), Some(cluster.cluster_name.as_str()));
        let endpoint = cluster.endpoint_url();
        prop_assert_eq!(v1["cluster"]["controlPlane"]["endpoint"].as_str(), Some(endpoint.as_str()));
        prop_assert_eq!(v1["machine"]["type"].as_str(), Some(node.role.as_talos()));
        let vips: Vec<&Value> = documents.iter().filter(|d| kind(d) == "Layer2VIPConfig").collect();
        let expected_vips = usize::from(node.role == MachineRole::ControlPlane);
        prop_assert_eq!(vips.len(), expected_vips);
        let address = cluster.endpoint_address.to_string();
        for vip in vips {
            prop_assert_eq!(vip["name"].as_str(), Some(address.as_str()));
        }
    }
}

#[test]
fn patches_merge_by_talos_rules_into_a_config_the_schema_accepts() {
    let patch = |value: serde_json::Value| match value {
        Value::Object(map) => crate::spec::Patch(map),
        _ => unreachable!("a patch is a map"),
    };
    let mut worker = node(MachineRole::Worker);
    worker.patches = vec![
        patch(serde_json::json!({"machine": {"sysctls": {"vm.max_map_count": "262144"}}})),
        patch(serde_json::json!({"machine": {"kubelet": {"extraMounts": [
            {"destination": "/var/lib/longhorn", "type": "bind", "source": "/var/lib/longhorn",
             "options": ["bind", "rshared", "rw"]}
        ]}}})),
        patch(
            serde_json::json!({"apiVersion": "v1alpha1", "kind": "KmsgLogConfig",
            "name": "remote", "url": "udp://192.168.1.5:6050/"}),
        ),
        // Talos's rule: `$patch: delete` removes a field capstan set and does not own.
        patch(
            serde_json::json!({"machine": {"kubelet": {"defaultRuntimeSeccompProfileEnabled": {"$patch": "delete"}}}}),
        ),
    ];
    let config = render_machine_config(&cluster(), &worker, &bundle()).expect("renders");
    let documents = schema_checked(&config);
    assert_eq!(
        kinds(&documents),
        [
            "v1alpha1",
            "HostnameConfig",
            "LinkAliasConfig",
            "KmsgLogConfig"
        ]
    );
    let kubelet = &documents[0]["machine"]["kubelet"];
    assert_eq!(
        documents[0]["machine"]["sysctls"]["vm.max_map_count"],
        "262144"
    );
    assert_eq!(
        kubelet["extraMounts"][0]["destination"],
        "/var/lib/longhorn"
    );
    assert!(kubelet.get("defaultRuntimeSeccompProfileEnabled").is_none());
    assert!(
        kubelet["image"].as_str().is_some(),
        "capstan's own fields stay"
    );
}

#[test]
fn registry_documents_are_valid_talos_documents_with_the_password_read() {
    use crate::spec::registries::{ResolvedCredentials, ResolvedRegistries};
    let registries = ResolvedRegistries {
        mirrors: [(
            "docker.io".to_owned(),
            vec![
                "https://mirror.example:5000".to_owned(),
                "http://10.0.0.9:5000".to_owned(),
            ],
        )]
        .into(),
        credentials: [(
            "mirror.example:5000".to_owned(),
            ResolvedCredentials {
                username: "robot".to_owned(),
                password: "s3cr3t-pull-password".to_owned(),
            },
        )]
        .into(),
        ca: [(
            "mirror.example:5000".to_owned(),
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".to_owned(),
        )]
        .into(),
    };
    let mut config =
        render_machine_config(&cluster(), &node(MachineRole::Worker), &bundle()).expect("renders");
    super::registries::append(&mut config, &registries).expect("appends");
    let documents = schema_checked(&config);
    assert_eq!(
        kinds(&documents)[3..],
        [
            "RegistryMirrorConfig",
            "RegistryAuthConfig",
            "RegistryTLSConfig"
        ]
    );
    let mirror = &documents[3];
    assert_eq!(mirror["name"], "docker.io");
    assert_eq!(mirror["endpoints"][1]["url"], "http://10.0.0.9:5000");
    assert_eq!(documents[4]["name"], "mirror.example:5000");
    assert_eq!(documents[4]["username"], "robot");
    assert_eq!(documents[4]["password"], "s3cr3t-pull-password");
    assert!(
        documents[5]["ca"]
            .as_str()
            .is_some_and(|ca| ca.contains("BEGIN CERTIFICATE"))
    );
}
