use super::*;
use crate::spec::Distribution;

fn edge_spec() -> ClusterSpec {
    let cluster = crate::providers::kubeadm::tests::example_cluster("prod");
    let mut spec = cluster.spec;
    spec.kubernetes.distribution = Distribution::K3s;
    spec.kubernetes.version = "v1.36.2+k3s1".parse().expect("version");
    spec
}

fn address() -> IpAddr {
    "192.168.1.101".parse().expect("ip")
}

fn join() -> ServerJoin {
    ServerJoin {
        token: "t0k3n-secret".to_owned(),
        datastore_endpoint: Some("mysql://k3s_edge:pw-secret@tcp(db:3306)/k3s_edge".to_owned()),
    }
}

fn commands(steps: &[NodeStep]) -> Vec<&Command> {
    steps
        .iter()
        .filter_map(|step| match step {
            NodeStep::Run { command, .. } => Some(command),
            NodeStep::WriteFile { .. } => None,
        })
        .collect()
}

/// The files the steps write, by path, with their mode.
fn written(steps: &[NodeStep]) -> Vec<(&str, &str, FileMode)> {
    steps
        .iter()
        .filter_map(|step| match step {
            NodeStep::WriteFile {
                path,
                mode,
                content,
            } => Some((path.as_str(), content.as_str(), *mode)),
            NodeStep::Run { .. } => None,
        })
        .collect()
}

/// The token and the DSN are in K3s's configuration file, of mode 0600, and on no command
/// line.
fn assert_secrets_only_in_the_config_file(steps: &[NodeStep], expected_config: &str) {
    for command in commands(steps) {
        let line = command.argv.join(" ");
        assert!(
            !line.contains("t0k3n") && !line.contains("pw-secret"),
            "a secret on a command line: {line}"
        );
    }
    let files = written(steps);
    let (_, content, mode) = files
        .iter()
        .find(|(path, _, _)| *path == CONFIG)
        .expect("the configuration file is written");
    assert_eq!(*content, expected_config);
    assert_eq!(*mode, FileMode::Secret, "root's only");
}

#[test]
fn a_server_installs_air_gapped_with_its_token_and_datastore_in_a_0600_file() {
    let spec = edge_spec();
    let steps = install_server(
        &spec,
        &spec.cluster_network(None),
        &join(),
        &NodeName::from("capstan-prod-cp-a1b2c"),
        address(),
        &Registration::default(),
    );
    assert_secrets_only_in_the_config_file(
        &steps,
        "token: \"t0k3n-secret\"\ndatastore-endpoint: \"mysql://k3s_edge:pw-secret@tcp(db:3306)/k3s_edge\"\n",
    );
    let install = *commands(&steps).last().expect("the install");
    assert_eq!(
        install.argv,
        [
            "env",
            "INSTALL_K3S_SKIP_DOWNLOAD=true",
            "INSTALL_K3S_VERSION=v1.36.2+k3s1",
            "sh",
            INSTALL_SCRIPT,
            "server",
            "--tls-san",
            "k8s-prod.lab.example",
            "--tls-san",
            "192.168.1.23",
            "--node-ip",
            "192.168.1.101",
            "--node-name",
            "capstan-prod-cp-a1b2c",
            "--https-listen-port",
            "6443",
            "--cluster-cidr",
            "172.16.0.0/16",
            "--service-cidr",
            "10.96.0.0/12",
            "--cluster-dns",
            "10.96.0.10",
        ]
    );
    assert!(!install.sensitive, "nothing secret to hide in its output");
    let shown = format!("{:?}", join());
    assert!(
        !shown.contains("t0k3n") && !shown.contains("pw-secret"),
        "{shown}"
    );
    assert!(
        matches!(steps.last(), Some(NodeStep::Run { unless: Some(check), .. }) if check.argv == ["test", "-f", KUBECONFIG])
    );
}

#[test]
fn an_agent_registers_with_its_labels_and_taints_as_flags() {
    let registration = Registration {
        labels: [("workload-class".to_owned(), "memory".to_owned())].into(),
        taints: vec![
            crate::spec::NodeTaint {
                key: "dedicated".to_owned(),
                value: Some("memory".to_owned()),
                effect: crate::spec::TaintEffect::NoSchedule,
            },
            crate::spec::NodeTaint {
                key: "gpu".to_owned(),
                value: None,
                effect: crate::spec::TaintEffect::NoExecute,
            },
        ],
    };
    let steps = install_agent(
        &edge_spec(),
        "t0k3n-secret",
        &NodeName::from("w1"),
        address(),
        &registration,
    );
    let install = *commands(&steps).last().expect("the install");
    let flags = &install.argv[install.argv.len() - 6..];
    assert_eq!(
        flags,
        [
            "--node-label",
            "workload-class=memory",
            "--node-taint",
            "dedicated=memory:NoSchedule",
            "--node-taint",
            "gpu:NoExecute"
        ]
    );
}

#[test]
fn kube_vip_holds_the_endpoint_on_every_server_with_k3s_kubeconfig() {
    let spec = edge_spec();
    let steps = install_server(
        &spec,
        &spec.cluster_network(None),
        &join(),
        &NodeName::from("n"),
        address(),
        &Registration::default(),
    );
    let NodeStep::WriteFile { path, content, .. } = &steps[0] else {
        panic!("kube-vip first: {steps:?}");
    };
    assert_eq!(path, KUBE_VIP_MANIFEST);
    assert!(
        !content.contains("${"),
        "every placeholder filled:\n{content}"
    );
    assert!(content.contains("value: \"192.168.1.23\""));
    assert!(content.contains("path: /etc/rancher/k3s/k3s.yaml"));
}

#[test]
fn an_agent_joins_the_endpoint_with_the_token_from_a_0600_file() {
    let spec = edge_spec();
    let steps = install_agent(
        &spec,
        "t0k3n-secret",
        &NodeName::from("w1"),
        address(),
        &Registration::default(),
    );
    assert_secrets_only_in_the_config_file(&steps, "token: \"t0k3n-secret\"\n");
    let install = *commands(&steps).last().expect("the install");
    assert!(
        install
            .argv
            .contains(&"K3S_URL=https://k8s-prod.lab.example:6443".to_owned())
    );
    assert!(install.argv.contains(&"agent".to_owned()));
    assert!(
        !install.argv.iter().any(|a| a.contains("DATASTORE")),
        "agents never see the datastore"
    );
}

#[test]
fn a_server_without_a_cni_from_capstan_runs_no_flannel_and_without_kube_proxy_none_either() {
    let mut spec = edge_spec();
    spec.network.cni = Some(crate::spec::Cni::None);
    spec.network.kube_proxy = Some(false);
    spec.network.pods = None;
    spec.network.services = Some("10.70.0.0/16".parse().expect("net"));
    let flags = network_flags(&spec.cluster_network(None));
    assert_eq!(
        flags.join(" "),
        "--cluster-cidr 10.42.0.0/16 --service-cidr 10.70.0.0/16 --cluster-dns 10.70.0.10 --flannel-backend none --disable-network-policy --disable-kube-proxy"
    );
}

#[test]
fn patches_add_the_keys_each_role_reads_to_the_0600_file_and_nothing_to_a_command_line() {
    let mut spec = edge_spec();
    let patch = |value: serde_json::Value| match value {
        serde_json::Value::Object(map) => crate::spec::Patch(map),
        _ => unreachable!("a map"),
    };
    spec.patches = vec![patch(serde_json::json!({
        "disable": ["traefik", "servicelb"],
        "kubelet-arg": ["max-pods=150"],
    }))];
    let server = install_server(
        &spec,
        &spec.cluster_network(None),
        &join(),
        &NodeName::from("capstan-prod-cp-a1b2c"),
        address(),
        &Registration::default(),
    );
    let server = with_patches(server, &spec, None, "capstan-prod-cp-a1b2c").expect("patched");
    let (_, config, mode) = written(&server)
        .into_iter()
        .find(|(path, _, _)| *path == CONFIG)
        .expect("the configuration file");
    assert_eq!(mode, FileMode::Secret);
    let config: serde_json::Value = serde_saphyr::from_str(config).expect("YAML");
    assert_eq!(config["token"], "t0k3n-secret", "capstan's own keys stay");
    assert_eq!(
        config["disable"],
        serde_json::json!(["traefik", "servicelb"])
    );
    assert_eq!(config["kubelet-arg"], serde_json::json!(["max-pods=150"]));
    for command in commands(&server) {
        assert!(!command.argv.join(" ").contains("traefik"), "{command:?}");
    }
    let agent = install_agent(
        &spec,
        "t0k3n-secret",
        &NodeName::from("capstan-prod-general-a1b2c"),
        address(),
        &Registration::default(),
    );
    let agent = with_patches(agent, &spec, Some("general"), "agent").expect("patched");
    let (_, config, _) = written(&agent)
        .into_iter()
        .find(|(path, _, _)| *path == CONFIG)
        .expect("the configuration file");
    let config: serde_json::Value = serde_saphyr::from_str(config).expect("YAML");
    assert!(config.get("disable").is_none(), "a server flag: {config}");
    assert_eq!(config["kubelet-arg"], serde_json::json!(["max-pods=150"]));
}

#[test]
fn a_server_writes_the_authentication_file_and_names_it_beside_the_patches_api_server_arguments() {
    use crate::providers::k3s::authentication::{CONFIG_PATH, with_authentication};
    use crate::spec::authentication::{Authentication, ClaimMapping, ClaimMappings, JwtIssuer};
    let mut spec = edge_spec();
    spec.kubernetes.authentication = Some(Authentication {
        jwt: vec![JwtIssuer {
            url: "https://sso.example.com".into(),
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
    let config = "token: \"t\"\nkube-apiserver-arg: [\"audit-log-path=/var/log/audit.log\"]\n";
    let steps = vec![write_file(CONFIG, FileMode::Secret, config.to_owned())];
    let steps = with_authentication(steps, &spec, "edge-cp-1").expect("rendered");
    let [
        NodeStep::WriteFile {
            path: file,
            content: configuration,
            ..
        },
        NodeStep::WriteFile { content, .. },
    ] = &steps[..]
    else {
        panic!("{steps:?}")
    };
    assert_eq!(file, CONFIG_PATH);
    assert!(configuration.contains("kind: AuthenticationConfiguration"));
    let config: serde_json::Value = serde_saphyr::from_str(content).expect("YAML");
    assert_eq!(
        config["kube-apiserver-arg"],
        serde_json::json!([
            "audit-log-path=/var/log/audit.log",
            format!("authentication-config={CONFIG_PATH}")
        ])
    );
    assert_eq!(config["token"], "t");
}
