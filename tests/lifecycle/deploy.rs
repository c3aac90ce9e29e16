//! deploy/capstan.yaml is well-formed: every document is accepted by an API server (the lab's
//! management cluster, through the stock kubectl, server-side dry run), and the capstan
//! container's arguments are a command line capstan accepts.

use std::path::Path;

use capstan_testkit::judge::{self, Judge};
use clap::Parser as _;

fn manifest() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/capstan.yaml")
}

#[test]
fn the_daemon_container_runs_a_command_line_capstan_accepts() {
    let text = std::fs::read_to_string(manifest()).expect("manifest");
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).expect("YAML");
    let deployment = documents
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    let container = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == "capstan")
        .expect("the capstan container");
    let mut argv = vec!["capstan".to_owned()];
    argv.extend(
        container["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("string").to_owned()),
    );
    let args =
        capstan::cli::Args::try_parse_from(&argv).unwrap_or_else(|err| panic!("{argv:?}: {err}"));
    assert!(matches!(args.command, capstan::cli::Command::Run(_)));
    let capstan::cli::Command::Run(run) = args.command else {
        unreachable!("matched above")
    };
    assert!(
        run.leader.leader_elect && run.leader.lease_in_cluster,
        "replicas elect a leader through their service account"
    );
    assert!(
        capstan::secrets::Pins::new(run.secrets.pins.clone()).is_ok()
            && run.secrets.pins.len() == 2,
        "the Proxmox connection's URL and fingerprint are pinned"
    );
    assert_eq!(
        run.secrets.secrets_dir.as_deref(),
        Some(Path::new("/etc/capstan")),
        "capstan.yaml reads secret files from the mounted Secret only"
    );
    assert!(
        run.daemon.http_token_from.is_some(),
        "/status, /observed and /metrics need a token"
    );
    assert_eq!(
        run.daemon.hooks_listen.map(|a| a.port()),
        Some(9465),
        "the webhooks on a port of their own"
    );
    assert_eq!(deployment["spec"]["replicas"], 2, "a hot standby");
    assert_eq!(deployment["spec"]["strategy"]["type"], "RollingUpdate");
    let role = documents
        .iter()
        .find(|d| d["kind"] == "Role")
        .expect("a Role");
    assert_eq!(
        role["rules"],
        serde_json::json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "verbs": ["get", "create", "update"]}]),
        "the Lease and nothing else"
    );
    assert!(
        !documents.iter().any(|d| d["kind"] == "ClusterRole"),
        "nothing cluster-wide"
    );
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert!(pod["affinity"]["podAntiAffinity"].is_object());
    assert!(documents.iter().any(|d| d["kind"] == "PodDisruptionBudget"));
}

#[test]
fn secrets_reach_the_daemon_as_files_only_its_user_reads() {
    let text = std::fs::read_to_string(manifest()).expect("manifest");
    // As the API server reads it: YAML 1.1, where `0400` is octal.
    let options = serde_saphyr::options! { legacy_octal_numbers: true };
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple_with_options(&text, options).expect("YAML");
    let pod = &documents
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment")["spec"]["template"]["spec"];
    let secret_volumes: Vec<&serde_json::Value> = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter(|v| v["secret"].is_object())
        .collect();
    assert!(!secret_volumes.is_empty());
    for volume in secret_volumes {
        assert_eq!(
            volume["secret"]["defaultMode"], 0o400,
            "secret volume {} is not 0400",
            volume["name"]
        );
    }
    // An environment variable is inherited by every process the daemon starts.
    for container in pod["containers"].as_array().expect("containers") {
        for variable in container["env"].as_array().into_iter().flatten() {
            assert!(
                variable["valueFrom"]["secretKeyRef"].is_null(),
                "{} takes {} from a Secret",
                container["name"],
                variable["name"]
            );
        }
        assert!(
            container["envFrom"].is_null(),
            "{} takes its environment from a Secret or ConfigMap",
            container["name"]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_accepts_every_document() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let world =
        capstan_testkit::World::new(&capstan_testkit::fleet_yaml(&["1.36"], false), &[]).await;
    let management = world.kubeconfig("management");
    let path = manifest();
    let kubeconfig = management.clone();
    let output = tokio::task::spawn_blocking(move || {
        // A dry run creates nothing, so the namespace the other objects go to must exist:
        // the lab's management cluster has it, as a cluster capstan was deployed to.
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["apply", "--dry-run=server", "-o", "name", "-f"])
            .arg(&path)
            .output()
            .expect("kubectl runs")
    })
    .await
    .expect("joined");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for object in [
        "namespace/capstan-system",
        "serviceaccount/capstan",
        "role.rbac.authorization.k8s.io/capstan-leader-election",
        "rolebinding.rbac.authorization.k8s.io/capstan-leader-election",
        "deployment.apps/capstan",
        "poddisruptionbudget.policy/capstan",
        "service/capstan",
        "service/capstan-hooks",
    ] {
        assert!(stdout.contains(object), "{object} accepted: {stdout}");
    }
}

#[test]
fn the_network_policy_lets_the_ingress_reach_the_hooks_and_prometheus_the_metrics_only() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/networkpolicy.yaml");
    let text = std::fs::read_to_string(path).expect("networkpolicy.yaml");
    let policy: serde_json::Value = serde_saphyr::from_str(&text).expect("YAML");
    assert_eq!(policy["kind"], "NetworkPolicy");
    assert_eq!(policy["metadata"]["namespace"], "capstan-system");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        "capstan"
    );
    assert_eq!(
        policy["spec"]["policyTypes"],
        serde_json::json!(["Ingress"])
    );
    let rules: Vec<(String, String)> = policy["spec"]["ingress"]
        .as_array()
        .expect("ingress rules")
        .iter()
        .map(|rule| {
            let from =
                rule["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                    .as_str()
                    .expect("a namespace")
                    .to_owned();
            let port = rule["ports"][0]["port"]
                .as_str()
                .expect("a port name")
                .to_owned();
            assert_eq!(rule["ports"].as_array().map(Vec::len), Some(1), "{rule}");
            (from, port)
        })
        .collect();
    assert_eq!(
        rules,
        [
            ("ingress-nginx".to_owned(), "hooks".to_owned()),
            ("monitoring".to_owned(), "http".to_owned())
        ]
    );
}
