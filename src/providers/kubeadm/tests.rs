use std::collections::BTreeSet;
use std::sync::Mutex;

use super::*;
use crate::model::VmId;
use crate::spec::{Cluster, RepoFiles, SourceText};

/// A cluster of the example repository (also the K3s tests' starting point).
pub(crate) fn example_cluster(name: &str) -> Cluster {
    let read = |path: &str| {
        std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples-repo")
                .join(path),
        )
        .expect("example file")
    };
    let files = RepoFiles {
        fleet: SourceText {
            path: "capstan.yaml".into(),
            text: read("capstan.yaml"),
        },
        clusters: vec![SourceText {
            path: format!("clusters/{name}.yaml"),
            text: read(&format!("clusters/{name}.yaml")),
        }],
    };
    let desired = crate::spec::load(&files).desired.expect("valid example");
    desired.clusters[name].clone()
}

/// What a node of `pool` of `cluster` on pve2 registers with, as kubeadm registers it.
fn registration_of(cluster: &Cluster, role: Role, pool: &str) -> Registration {
    let scheduling = crate::scheduling::NodeScheduling::of(&cluster.spec, pool, role, "pve2");
    scheduling.registration(&crate::spec::Distribution::Kubeadm.capabilities().scheduling)
}

fn address() -> IpAddr {
    "192.168.1.101".parse().expect("ip")
}

/// The network a new cluster of `cluster` runs on.
fn network_of(cluster: &Cluster) -> crate::spec::ClusterNetwork {
    cluster.spec.cluster_network(None)
}

fn written(steps: &[NodeStep], path: &str) -> String {
    steps
        .iter()
        .rev()
        .find_map(|step| match step {
            NodeStep::WriteFile {
                path: p, content, ..
            } if p == path => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{path} is written"))
}

/// Field paths kubeadm.k8s.io/v1beta4 and kubelet.config.k8s.io/v1beta1 define (the ones our
/// templates may use), from https://kubernetes.io/docs/reference/config-api/kubeadm-config.v1beta4/.
fn known_fields(kind: &str) -> BTreeSet<&'static str> {
    let node_registration = [
        "nodeRegistration",
        "nodeRegistration.name",
        "nodeRegistration.criSocket",
        "nodeRegistration.taints",
        "nodeRegistration.taints.key",
        "nodeRegistration.taints.value",
        "nodeRegistration.taints.effect",
        "nodeRegistration.kubeletExtraArgs",
        "nodeRegistration.kubeletExtraArgs.name",
        "nodeRegistration.kubeletExtraArgs.value",
        "nodeRegistration.ignorePreflightErrors",
        "nodeRegistration.imagePullPolicy",
        "nodeRegistration.imagePullSerial",
    ];
    let mut fields: BTreeSet<&str> = ["apiVersion", "kind"].into();
    match kind {
        "InitConfiguration" => {
            fields.extend(node_registration);
            fields.extend([
                "bootstrapTokens",
                "localAPIEndpoint",
                "localAPIEndpoint.advertiseAddress",
                "localAPIEndpoint.bindPort",
                "certificateKey",
                "skipPhases",
                "patches",
                "timeouts",
                "dryRun",
            ]);
        }
        "ClusterConfiguration" => fields.extend([
            "etcd",
            "etcd.local",
            "etcd.local.dataDir",
            "etcd.local.extraArgs",
            "etcd.local.serverCertSANs",
            "etcd.local.peerCertSANs",
            "etcd.external",
            "networking",
            "networking.serviceSubnet",
            "networking.podSubnet",
            "networking.dnsDomain",
            "kubernetesVersion",
            "controlPlaneEndpoint",
            "apiServer",
            "apiServer.certSANs",
            "apiServer.extraArgs",
            "apiServer.extraVolumes",
            "controllerManager",
            "scheduler",
            "dns",
            "proxy",
            "certificatesDir",
            "imageRepository",
            "featureGates",
            "clusterName",
            "encryptionAlgorithm",
            "certificateValidityPeriod",
            "caCertificateValidityPeriod",
        ]),
        "JoinConfiguration" => {
            fields.extend(node_registration);
            fields.extend([
                "dryRun",
                "caCertPath",
                "discovery",
                "discovery.bootstrapToken",
                "discovery.bootstrapToken.token",
                "discovery.bootstrapToken.apiServerEndpoint",
                "discovery.bootstrapToken.caCertHashes",
                "discovery.bootstrapToken.unsafeSkipCAVerification",
                "discovery.file",
                "discovery.tlsBootstrapToken",
                "discovery.timeout",
                "controlPlane",
                "controlPlane.localAPIEndpoint",
                "controlPlane.localAPIEndpoint.advertiseAddress",
                "controlPlane.localAPIEndpoint.bindPort",
                "controlPlane.certificateKey",
                "skipPhases",
                "patches",
                "timeouts",
            ]);
        }
        "KubeletConfiguration" => fields.extend(["cgroupDriver"]),
        "UpgradeConfiguration" => fields.extend([
            "apply",
            "apply.kubernetesVersion",
            "apply.skipPhases",
            "apply.allowExperimentalUpgrades",
            "apply.certificateRenewal",
            "apply.etcdUpgrade",
            "apply.forceUpgrade",
            "apply.ignorePreflightErrors",
            "apply.patches",
            "apply.printConfig",
            "apply.imagePullPolicy",
            "apply.imagePullSerial",
            "node",
            "diff",
            "plan",
            "timeouts",
        ]),
        other => panic!("unexpected kind {other}"),
    }
    fields
}

fn field_paths(value: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                out.push(path.clone());
                field_paths(child, &path, out);
            }
        }
        serde_json::Value::Array(items) => {
            items.iter().for_each(|item| field_paths(item, prefix, out))
        }
        _ => {}
    }
}

fn assert_kubeadm_fields(yaml: &str, expected_kinds: &[&str]) {
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(yaml).expect("rendered YAML parses");
    let kinds: Vec<&str> = documents
        .iter()
        .map(|d| d["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, expected_kinds);
    for document in &documents {
        let kind = document["kind"].as_str().expect("kind");
        let known = known_fields(kind);
        let mut paths = Vec::new();
        field_paths(document, "", &mut paths);
        for path in paths {
            assert!(
                known.contains(path.as_str()),
                "{kind} has no field `{path}`"
            );
        }
    }
    assert!(
        !yaml.contains("${"),
        "a placeholder is left unfilled:\n{yaml}"
    );
}

#[test]
fn init_configuration_uses_kubeadm_field_names_and_the_cluster_values() {
    let cluster = example_cluster("prod");
    let steps = init_control_plane(
        "prod",
        &cluster.spec,
        &network_of(&cluster),
        &NodeName::from("capstan-prod-cp-1a2b3"),
        address(),
        &registration_of(&cluster, Role::ControlPlane, "cp"),
    );
    let config = written(&steps, INIT_CONFIG);
    assert_kubeadm_fields(
        &config,
        &[
            "InitConfiguration",
            "ClusterConfiguration",
            "KubeletConfiguration",
        ],
    );
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&config).expect("parses");
    let cluster_configuration = &documents[1];
    assert_eq!(
        cluster_configuration["apiVersion"],
        "kubeadm.k8s.io/v1beta4"
    );
    assert_eq!(
        cluster_configuration["controlPlaneEndpoint"],
        "k8s-prod.lab.example:6443"
    );
    assert_eq!(cluster_configuration["kubernetesVersion"], "v1.36.2");
    assert_eq!(
        cluster_configuration["networking"]["podSubnet"],
        "172.16.0.0/16"
    );
    assert_eq!(
        cluster_configuration["networking"]["serviceSubnet"],
        "10.96.0.0/12"
    );
    assert_eq!(
        documents[0]["nodeRegistration"]["name"],
        "capstan-prod-cp-1a2b3"
    );
    assert_eq!(documents[0]["skipPhases"], serde_json::json!([]));
}

#[test]
fn a_cluster_without_kube_proxy_skips_its_addon_at_init_and_at_every_upgrade() {
    let mut cluster = example_cluster("prod");
    cluster.spec.network.kube_proxy = Some(false);
    cluster.spec.network.pods = Some("10.60.0.0/16".parse().expect("net"));
    cluster.spec.network.services = Some("10.70.0.0/16".parse().expect("net"));
    let network = network_of(&cluster);
    let steps = init_control_plane(
        "prod",
        &cluster.spec,
        &network,
        &NodeName::from("n"),
        address(),
        &Registration::default(),
    );
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&written(&steps, INIT_CONFIG)).expect("parses");
    assert_eq!(
        documents[0]["skipPhases"],
        serde_json::json!(["addon/kube-proxy"])
    );
    assert_eq!(documents[1]["networking"]["podSubnet"], "10.60.0.0/16");
    assert_eq!(documents[1]["networking"]["serviceSubnet"], "10.70.0.0/16");
    let version = "1.36.4".parse().expect("version");
    let upgrade = upgrade_control_plane(version, &network);
    let config = written(&upgrade, UPGRADE_CONFIG);
    assert_kubeadm_fields(&config, &["UpgradeConfiguration"]);
    let document: serde_json::Value = serde_saphyr::from_str(&config).expect("parses");
    assert_eq!(document["apply"]["kubernetesVersion"], "v1.36.4");
    assert_eq!(
        document["apply"]["skipPhases"],
        serde_json::json!(["addon/kube-proxy"])
    );
    let with_proxy = upgrade_control_plane(version, &network_of(&example_cluster("prod")));
    let document: serde_json::Value =
        serde_saphyr::from_str(&written(&with_proxy, UPGRADE_CONFIG)).expect("parses");
    assert_eq!(document["apply"]["skipPhases"], serde_json::json!([]));
    let command = with_proxy
        .iter()
        .find_map(|step| match step {
            NodeStep::Run { command, .. } if command.argv.contains(&"upgrade".to_owned()) => {
                Some(command.argv.join(" "))
            }
            _ => None,
        })
        .expect("upgrade command");
    assert_eq!(
        command,
        format!("kubeadm upgrade apply v1.36.4 --config {UPGRADE_CONFIG} --yes")
    );
}

/// The steps that join a node (`w` or `c`, by role) to the example `platform` cluster with the
/// bootstrap token `abcdef.0123456789abcdef`.
fn platform_join(role: Role, certificate_key: Option<&str>) -> Vec<NodeStep> {
    let cluster = example_cluster("platform");
    let ticket = JoinTicket {
        api_server_endpoint: "k8s-platform.lab.example:6443".into(),
        token: "abcdef.0123456789abcdef".into(),
        ca_cert_hash: "sha256:00ff".into(),
    };
    let node = match role {
        Role::Worker => "w",
        Role::ControlPlane => "c",
    };
    join_node(
        role,
        &ticket,
        certificate_key,
        &cluster.spec,
        &NodeName::from(node),
        address(),
        &registration_of(&cluster, role, "memory"),
    )
}

#[test]
fn join_configurations_use_kubeadm_field_names() {
    let worker = platform_join(Role::Worker, None);
    assert_kubeadm_fields(&written(&worker, JOIN_CONFIG), &["JoinConfiguration"]);
    assert!(
        !worker
            .iter()
            .any(|s| matches!(s, NodeStep::WriteFile { path, .. } if path == KUBE_VIP_MANIFEST))
    );

    let key = "a".repeat(64);
    let control_plane = platform_join(Role::ControlPlane, Some(&key));
    let config = written(&control_plane, JOIN_CONFIG);
    assert_kubeadm_fields(&config, &["JoinConfiguration"]);
    assert!(config.contains(&format!("certificateKey: {key}")));
    let kube_vip = written(&control_plane, KUBE_VIP_MANIFEST);
    assert!(
        kube_vip.contains("value: \"192.168.1.24\"")
            && kube_vip.contains("/etc/kubernetes/admin.conf")
    );
}

#[test]
fn nodes_register_with_their_taints_and_the_labels_a_kubelet_may_set_on_itself() {
    let registration = |config: &str| {
        let documents: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(config).expect("parses");
        let node = documents[0]["nodeRegistration"].clone();
        let labels = node["kubeletExtraArgs"]
            .as_array()
            .and_then(|args| args.iter().find(|a| a["name"] == "node-labels"))
            .and_then(|arg| arg["value"].as_str())
            .unwrap_or_default()
            .to_owned();
        (labels, node["taints"].clone())
    };
    let worker = written(&platform_join(Role::Worker, None), JOIN_CONFIG);
    let (labels, taints) = registration(&worker);
    assert_eq!(
        labels,
        "capstan.dev/pool=memory,topology.kubernetes.io/region=homelab,topology.kubernetes.io/zone=pve2,workload-class=memory"
    );
    assert_eq!(
        taints,
        serde_json::json!([{"key": "dedicated", "value": "memory", "effect": "NoSchedule"}])
    );
    let cluster = example_cluster("prod");
    let init = init_control_plane(
        "prod",
        &cluster.spec,
        &network_of(&cluster),
        &NodeName::from("n"),
        address(),
        &registration_of(&cluster, Role::ControlPlane, "cp"),
    );
    let (labels, taints) = registration(&written(&init, INIT_CONFIG));
    assert!(labels.starts_with("capstan.dev/pool=cp,"), "{labels}");
    assert_eq!(
        taints,
        serde_json::json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
    );
    let mut compact = cluster.clone();
    compact.spec.control_plane.schedulable = Some(true);
    let init = init_control_plane(
        "prod",
        &compact.spec,
        &network_of(&compact),
        &NodeName::from("n"),
        address(),
        &registration_of(&compact, Role::ControlPlane, "cp"),
    );
    let (_, taints) = registration(&written(&init, INIT_CONFIG));
    assert_eq!(taints, serde_json::json!([]), "not kubeadm's default taint");
}

#[test]
fn the_join_configuration_is_a_secret_file_removed_after_the_join() {
    let key = "b".repeat(64);
    let steps = platform_join(Role::ControlPlane, Some(&key));
    let config_at = steps
        .iter()
        .position(|s| matches!(s, NodeStep::WriteFile { path, .. } if path == JOIN_CONFIG))
        .expect("the join configuration is written");
    assert!(
        matches!(
            &steps[config_at],
            NodeStep::WriteFile {
                mode: FileMode::Secret,
                ..
            }
        ),
        "root's only: {steps:?}"
    );
    let joined_at = steps
        .iter()
        .position(|s| matches!(s, NodeStep::Run { command, .. } if command.argv[..2] == ["kubeadm", "join"]))
        .expect("the join");
    assert!(
        matches!(&steps[joined_at + 1], NodeStep::Run { command, unless: None }
            if command.argv == ["rm", "-f", JOIN_CONFIG]),
        "the token is removed right after the join: {steps:?}"
    );
    for step in &steps {
        if let NodeStep::Run { command, unless } = step {
            for argv in std::iter::once(&command.argv).chain(unless.iter().map(|c| &c.argv)) {
                let line = argv.join(" ");
                assert!(
                    !line.contains("0123456789abcdef") && !line.contains(&key),
                    "a secret on a command line: {line}"
                );
            }
        }
    }
}

#[test]
fn a_join_steps_debug_shows_paths_and_sizes_never_the_token_or_key() {
    let key = "c0ffee".repeat(10) + "c0ff";
    let steps = platform_join(Role::ControlPlane, Some(&key));
    let debug = format!("{steps:?}");
    assert!(debug.contains(JOIN_CONFIG), "{debug}");
    assert!(debug.contains("bytes"), "{debug}");
    for secret in ["0123456789abcdef", "c0ffee"] {
        assert!(!debug.contains(secret), "{secret} in {debug}");
    }
}

#[test]
fn kube_vip_starts_with_super_admin_during_init_then_switches_to_admin() {
    let cluster = example_cluster("prod");
    let steps = init_control_plane(
        "prod",
        &cluster.spec,
        &network_of(&cluster),
        &NodeName::from("n"),
        address(),
        &Registration::default(),
    );
    let manifests: Vec<&String> = steps
        .iter()
        .filter_map(|s| match s {
            NodeStep::WriteFile { path, content, .. } if path == KUBE_VIP_MANIFEST => Some(content),
            _ => None,
        })
        .collect();
    assert_eq!(manifests.len(), 2);
    assert!(manifests[0].contains("path: /etc/kubernetes/super-admin.conf"));
    assert!(manifests[1].contains("path: /etc/kubernetes/admin.conf"));
    // The CNI goes through the cluster's API: nothing on the node fetches or applies it.
    assert!(!format!("{steps:?}").contains("kubectl"), "{steps:#?}");
}

#[test]
fn join_commands_and_certificate_keys_are_read_from_kubeadm_output() {
    let output = "kubeadm join k8s-prod.lab.example:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash sha256:1234 \n";
    let ticket = parse_join_command(output).expect("ticket");
    assert_eq!(ticket.api_server_endpoint, "k8s-prod.lab.example:6443");
    assert_eq!(ticket.token, "abcdef.0123456789abcdef");
    assert_eq!(ticket.ca_cert_hash, "sha256:1234");
    assert!(!format!("{ticket:?}").contains("0123456789abcdef"));
    assert_eq!(parse_join_command("error"), None);

    let key = "f".repeat(64);
    let upload = format!(
        "[upload-certs] Storing the certificates in Secret \"kubeadm-certs\"\n[upload-certs] Using certificate key:\n{key}\n"
    );
    assert_eq!(parse_certificate_key(&upload), Some(key));
    assert_eq!(parse_certificate_key("no key here"), None);
}

#[test]
fn etcd_members_are_read_and_removed_by_hex_id() {
    let json = r#"{"header":{"cluster_id":1},"members":[{"ID":11400818519003537137,"name":"capstan-p-cp-aaaaa","peerURLs":["https://192.168.1.101:2380"]}]}"#;
    let members = parse_etcd_members(json).expect("members");
    assert_eq!(
        members,
        vec![EtcdMember {
            id: 11400818519003537137,
            name: "capstan-p-cp-aaaaa".into()
        }]
    );
    let remove = etcd_member_remove(&NodeName::from("capstan-p-cp-bbbbb"), &members[0]);
    assert_eq!(
        remove.argv.last().map(String::as_str),
        Some("9e37d809f5e69ef1")
    );
    assert!(remove.argv.contains(&"etcd-capstan-p-cp-bbbbb".to_owned()));
}

/// A node that records what it is asked and answers from a script.
#[derive(Default)]
struct ScriptedNode {
    log: Mutex<Vec<String>>,
    existing_files: Vec<&'static str>,
}

impl NodeExec for ScriptedNode {
    async fn write_file(&self, _: &NodeTarget, path: &str, _: &str) -> Result<(), ExecError> {
        self.log.lock().expect("log").push(format!("write {path}"));
        Ok(())
    }

    async fn run(&self, _: &NodeTarget, command: &Command) -> Result<Output, ExecError> {
        self.log.lock().expect("log").push(command.argv.join(" "));
        let exit_code = match command.argv.as_slice() {
            [test, flag, path] if test == "test" && flag == "-f" => {
                i32::from(!self.existing_files.contains(&path.as_str()))
            }
            _ => 0,
        };
        Ok(Output {
            exit_code,
            ..Output::default()
        })
    }
}

fn target() -> NodeTarget {
    NodeTarget {
        vmid: VmId(101),
        proxmox_node: "pve1".into(),
        name: NodeName::from("capstan-prod-cp-1a2b3"),
    }
}

#[tokio::test]
async fn init_is_skipped_on_a_node_that_was_already_initialised() {
    let cluster = example_cluster("prod");
    let steps = init_control_plane(
        "prod",
        &cluster.spec,
        &network_of(&cluster),
        &target().name,
        address(),
        &Registration::default(),
    );

    let fresh = Kubeadm::new(ScriptedNode::default());
    fresh
        .run_steps("init", &target(), &steps)
        .await
        .expect("init");
    let log = fresh.exec.log.lock().expect("log").clone();
    assert!(
        log.iter().any(|l| l.starts_with("kubeadm init --config")),
        "{log:#?}"
    );

    let done = Kubeadm::new(ScriptedNode {
        existing_files: vec![ADMIN_CONF],
        ..Default::default()
    });
    done.run_steps("init", &target(), &steps)
        .await
        .expect("init again");
    let log = done.exec.log.lock().expect("log").clone();
    assert!(
        !log.iter().any(|l| l.starts_with("kubeadm init")),
        "{log:#?}"
    );
    assert!(
        log.iter().any(|l| l.contains("kube-vip.yaml")),
        "kube-vip still switches to admin.conf: {log:#?}"
    );
}

#[tokio::test]
async fn every_file_is_created_with_its_mode_and_folder_just_before_it_is_written() {
    let cluster = example_cluster("prod");
    let version = cluster.spec.kubernetes.version;
    let mut steps = prepare_node(version);
    steps.extend(init_control_plane(
        "prod",
        &cluster.spec,
        &network_of(&cluster),
        &target().name,
        address(),
        &Registration::default(),
    ));
    steps.extend(renew_certificates());
    let node = Kubeadm::new(ScriptedNode::default());
    node.run_steps("init", &target(), &steps)
        .await
        .expect("init");
    let log = node.exec.log.lock().expect("log").clone();
    let mut modes = Vec::new();
    for (at, line) in log.iter().enumerate() {
        if let Some(path) = line.strip_prefix("write ") {
            let created = at
                .checked_sub(1)
                .and_then(|before| log[before].strip_prefix("install -D -m "))
                .and_then(|rest| rest.strip_suffix(&format!(" /dev/null {path}")))
                .unwrap_or_else(|| panic!("{path} created first: {log:#?}"));
            modes.push((path.to_owned(), created.to_owned()));
        }
    }
    let mode_of = |path: &str| {
        modes
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, mode)| mode.as_str())
    };
    assert_eq!(mode_of(PREPARE_SCRIPT), Some("0700"), "root runs it");
    assert_eq!(mode_of(RENEW_SCRIPT), Some("0700"), "root runs it");
    assert_eq!(mode_of(INIT_CONFIG), Some("0644"));
    assert_eq!(mode_of(KUBE_VIP_MANIFEST), Some("0644"));
}

#[tokio::test]
async fn a_failed_sensitive_command_says_why_with_its_secrets_redacted() {
    struct Failing;
    impl NodeExec for Failing {
        async fn write_file(&self, _: &NodeTarget, _: &str, _: &str) -> Result<(), ExecError> {
            Ok(())
        }
        async fn run(&self, _: &NodeTarget, _: &Command) -> Result<Output, ExecError> {
            Ok(Output {
                exit_code: 1,
                stdout: String::new(),
                stderr: format!(
                    "token sensitive-stderr-0123456789abcdef rejected: {}",
                    "x".repeat(4096)
                ),
            })
        }
    }
    crate::redact::remember("sensitive-stderr-0123456789abcdef");
    let err = Kubeadm::new(Failing)
        .join_ticket(&target())
        .await
        .expect_err("fails");
    let text = format!("{err}");
    assert!(
        text.contains(
            "create join token on capstan-prod-cp-1a2b3: `kubeadm …` exited 1: token *** rejected: xxx"
        ),
        "{text}"
    );
    assert!(!text.contains("0123456789abcdef"), "{text}");
    assert!(
        text.len() < SENSITIVE_STDERR_CAP + 200,
        "capped: {} bytes",
        text.len()
    );
}
