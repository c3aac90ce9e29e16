//! `kubernetes.registries` on kubeadm and K3s clusters the daemon builds: the nodes' runtime
//! (CRI-O, K3s's containerd) pulls `docker.io` images through the mirror the file names, with
//! the credentials read from the secret source (the mirror, a real HTTP server on loopback,
//! records the pull and who made it; the kubeadm cluster's serves HTTPS under a private CA the
//! file gives); an image of a registry without a mirror is refused (the
//! lab reaches no registry of its own); and the password is nowhere but on the nodes: not in
//! the repository, the status, the daemon's log, nor a command line sent to a guest agent.
//!
//! The runtime is single-threaded so that the log of this test alone can be captured (a
//! subscriber set for the thread sees every task of the daemon and the lab).

use std::sync::Arc;

use capstan::secrets::{SecretPolicy, SecretReader};
use capstan::spec::registries::variable_word;
use capstan_testkit::log::CapturedLog;
use capstan_testkit::registry::{Mirror, MirrorRequest};
use capstan_testkit::{ClusterYaml, World, fleet_yaml, k3s_lab_cluster};

/// The mirror's password: what must show nowhere but on the nodes.
const PASSWORD: &str = "mirror-pull-password-3f9c2a71";
const USER: &str = "robot";

/// The environment variable cluster `cluster` reads the mirror's password from.
fn variable(cluster: &str, mirror: &Mirror) -> String {
    format!(
        "CAPSTAN_CLUSTER_{}_REGISTRY_{}_PASSWORD",
        cluster.to_ascii_uppercase().replace('-', "_"),
        variable_word(&mirror.host())
    )
}

/// `text` (a cluster file whose `kubernetes` is a flow mapping) with `docker.io` mirrored by
/// `mirror`, its credentials' password from `variable`, and its CA for an HTTPS mirror.
fn with_registries(text: &str, mirror: &Mirror, variable: &str) -> String {
    let ca = match mirror.ca_pem() {
        Some(pem) => format!(
            ", ca: {{\"{}\": {}}}",
            mirror.host(),
            serde_json::to_string(pem).expect("a JSON string is a YAML one")
        ),
        None => String::new(),
    };
    let registries = format!(
        "  kubernetes: {{registries: {{mirrors: {{docker.io: {{endpoints: [\"{url}\"]}}}}, credentials: {{\"{host}\": {{username: {USER}, passwordFrom: {{env: {variable}}}}}}}{ca}}}, ",
        url = mirror.url(),
        host = mirror.host(),
    );
    let out = text.replacen("  kubernetes: {", &registries, 1);
    assert_ne!(out, text, "the file has a flow-style `kubernetes`");
    out
}

/// A world whose daemon reads `variable` as the mirror's password.
async fn world(cluster: &str, file: String, variable: String) -> World {
    let mut world = World::recording(&fleet_yaml(&["1.36"], false), &[(cluster, file)]).await;
    world.secret_reader = SecretReader::new(Arc::new(SecretPolicy::default()), move |name| {
        (name == variable).then(|| PASSWORD.to_owned())
    });
    world
}

/// Runs `argv` in every VM of `cluster`; their outcomes.
async fn on_every_node(
    world: &World,
    cluster: &str,
    argv: &[&str],
) -> Vec<capstan_lab::proxmox::ExecOutcome> {
    let nodes = world.lab.nodes().expect("the lab's node software");
    let argv: Vec<String> = argv.iter().map(|w| (*w).to_owned()).collect();
    let mut out = Vec::new();
    for vm in world.vms_of(cluster) {
        let guest = world.lab.proxmox().guest(vm.vmid).expect("the VM exists");
        out.push(nodes.exec(&guest, &argv).await);
    }
    out
}

/// Every file of the repository, as text.
fn repository_text(world: &World) -> String {
    fn walk(dir: &std::path::Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).expect("a folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    let mut out = String::new();
    walk(world.repo.path(), &mut out);
    out
}

/// The command lines the daemon sent the lab's guest agents.
fn command_lines(world: &World) -> Vec<String> {
    world
        .lab
        .proxmox()
        .exchanges()
        .into_iter()
        .filter(|exchange| exchange.template.ends_with("/agent/exec"))
        .map(|exchange| {
            exchange
                .params
                .get("command")
                .map(ToString::to_string)
                .unwrap_or_default()
        })
        .collect()
}

/// Pulls through the mirror on every node of `cluster` (`pull` is the node's crictl), checks
/// the mirror saw each with the credentials, that a registry without a mirror is refused,
/// and that the password shows nowhere it must not.
async fn pulls_through_the_mirror(
    world: &World,
    cluster: &str,
    mirror: &Mirror,
    pull: &[&str],
    log: &CapturedLog,
) {
    let image = "docker.io/library/busybox:1.36";
    let pulled = on_every_node(world, cluster, &[pull, &[image]].concat()).await;
    assert!(pulled.len() >= 2, "{pulled:?}");
    for outcome in &pulled {
        assert_eq!(outcome.exit_code, 0, "{outcome:?}");
        assert!(
            outcome.stdout.contains("Image is up to date for sha256:"),
            "{outcome:?}"
        );
    }
    let served: Vec<MirrorRequest> = mirror
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v2/library/busybox/manifests/1.36")
        .collect();
    assert_eq!(served.len(), pulled.len(), "{served:#?}");
    for request in &served {
        assert_eq!(request.user.as_deref(), Some(USER), "{request:?}");
        assert!(request.authorized && request.status == 200, "{request:?}");
    }
    let refused = on_every_node(
        world,
        cluster,
        &[pull, &["registry.k8s.io/pause:3.10"]].concat(),
    )
    .await;
    for outcome in &refused {
        assert_eq!(outcome.exit_code, 1, "{outcome:?}");
        assert!(
            outcome
                .stderr
                .contains("lookup registry.k8s.io: no such host"),
            "{outcome:?}"
        );
    }
    assert!(
        mirror.requests().iter().all(|r| !r.path.contains("pause")),
        "a registry without a mirror is never asked of the mirror"
    );
    let status = serde_json::to_string(&world.status()).expect("status serialises");
    assert!(
        !status.contains(PASSWORD),
        "the password in the status: {status}"
    );
    let log = log.text();
    assert!(!log.is_empty(), "the daemon logged");
    assert!(!log.contains(PASSWORD), "the password in the log");
    assert!(
        !repository_text(world).contains(PASSWORD),
        "the password in Git"
    );
    let lines = command_lines(world);
    assert!(!lines.is_empty(), "the exchanges were recorded");
    for line in lines {
        assert!(
            !line.contains(PASSWORD),
            "the password on a command line: {line}"
        );
    }
}

/// The kubeadm cluster's mirror serves HTTPS with a private CA, which CRI-O trusts through
/// `containers-certs.d`.
#[tokio::test]
async fn a_kubeadm_cluster_s_cri_o_pulls_through_its_mirror_with_credentials_kept_off_git_logs_and_command_lines()
 {
    let (log, _guard) = CapturedLog::capture(tracing::Level::DEBUG);
    let mirror = Mirror::start_tls(USER, PASSWORD).await;
    let variable = variable("mirrored", &mirror);
    let file = with_registries(
        &ClusterYaml::lab("mirrored")
            .address(75)
            .workers(1)
            .render()
            .replacen("minWorkers: 2", "minWorkers: 1", 1),
        &mirror,
        &variable,
    );
    let mut world = world("mirrored", file, variable).await;
    world.start_until_ready(&["mirrored"]).await;
    let nodes = world.lab.nodes().expect("the lab's node software");
    let vm = world.vms_of("mirrored")[0].vmid;
    let auth = nodes.file(capstan::model::VmId(vm), "/etc/crio/auth.json");
    assert!(auth.is_some(), "CRI-O's auth file is on the node");
    assert_eq!(
        nodes.file_mode(capstan::model::VmId(vm), "/etc/crio/auth.json"),
        Some(0o600)
    );
    let ca = nodes.file(
        capstan::model::VmId(vm),
        &format!("/etc/containers/certs.d/{}/ca.crt", mirror.host()),
    );
    assert_eq!(ca.as_deref(), mirror.ca_pem(), "the mirror's CA in certs.d");
    pulls_through_the_mirror(&world, "mirrored", &mirror, &["crictl", "pull"], &log).await;
}

#[tokio::test]
async fn a_k3s_cluster_s_containerd_pulls_through_its_mirror_with_credentials_kept_off_git_logs_and_command_lines()
 {
    let (log, _guard) = CapturedLog::capture(tracing::Level::DEBUG);
    let mirror = Mirror::start(USER, PASSWORD).await;
    let variable = variable("mirrored-k3s", &mirror);
    let file = with_registries(&k3s_lab_cluster("mirrored-k3s", 76), &mirror, &variable);
    let mut world = world("mirrored-k3s", file, variable).await;
    world.start_until_ready(&["mirrored-k3s"]).await;
    let nodes = world.lab.nodes().expect("the lab's node software");
    for vm in world.vms_of("mirrored-k3s") {
        let vmid = capstan::model::VmId(vm.vmid);
        assert_eq!(
            nodes.file_mode(vmid, "/etc/rancher/k3s/registries.yaml"),
            Some(0o600),
            "registries.yaml holds the password: 0600"
        );
    }
    pulls_through_the_mirror(
        &world,
        "mirrored-k3s",
        &mirror,
        &["k3s", "crictl", "pull"],
        &log,
    )
    .await;
    assert!(
        mirror
            .requests()
            .iter()
            .all(|r| r.query.as_deref() == Some("ns=docker.io")),
        "containerd names the registry it mirrors: {:#?}",
        mirror.requests()
    );
}

#[tokio::test]
async fn a_registry_password_the_daemon_cannot_read_blocks_the_cluster_before_any_clone() {
    let mirror = Mirror::start(USER, PASSWORD).await;
    let variable = variable("unread", &mirror);
    let file = with_registries(
        &ClusterYaml::lab("unread")
            .address(77)
            .workers(1)
            .render()
            .replacen("minWorkers: 2", "minWorkers: 1", 1),
        &mirror,
        &variable,
    );
    // The daemon's environment has no such variable.
    let mut world = world("unread", file, "CAPSTAN_SOMETHING_ELSE".to_owned()).await;
    world.start_daemon().await;
    let status = world
        .wait_for("unread Blocked on its registry password", |s| {
            s.clusters
                .get("unread")
                .is_some_and(|c| c.phase == capstan::status::Phase::Blocked)
        })
        .await;
    let last = status.clusters["unread"]
        .last_step
        .as_ref()
        .expect("the failed step");
    assert!(
        last.message.contains("cannot read a registry password")
            && last.message.contains(&variable)
            && last.message.contains("passwordFrom"),
        "{}",
        last.message
    );
    assert!(world.vms_of("unread").is_empty(), "no VM was cloned");
}
