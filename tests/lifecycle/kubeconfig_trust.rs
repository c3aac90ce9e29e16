//! A kubeconfig read from a VM is hostile: root on a control plane can rewrite `admin.conf`.
//! Each rewrite below is read by a fresh daemon (nothing kept in memory) from the lab's
//! control plane and must be refused with a message in the cluster's status, with nothing run
//! (an `exec` plugin would create a marker file) and nothing sent (a listener counts every
//! connection made to it). The CA first seen is kept in the management cluster, so a changed
//! CA is refused after a restart too, and the Flux Secret never changes meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use capstan_lab::proxmox::GuestIdentity;
use serde_json::{Value, json};

use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};

const CLUSTER: &str = "trust";
const ADMIN_CONF: &str = "/etc/kubernetes/admin.conf";

/// A TCP listener on loopback that counts the connections made to it.
struct Listener {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl Listener {
    async fn start() -> Listener {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("address").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&connections);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Listener { port, connections }
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

fn control_plane(world: &World) -> GuestIdentity {
    let vm = world
        .lab
        .proxmox()
        .vms()
        .into_iter()
        .find(|vm| vm.name.starts_with(&format!("capstan-{CLUSTER}-cp-")))
        .expect("control plane VM");
    GuestIdentity {
        vmid: capstan::model::VmId(vm.vmid),
        name: vm.name.clone(),
        node: vm.node.clone(),
        address: vm.address,
        k3s_airgap: None,
        talos: None,
        talos_extensions: Vec::new(),
        media: Vec::new(),
        cluster: None,
        hardware: Default::default(),
    }
}

/// The cluster's status as JSON text (conditions, messages), to look for a refusal in.
fn status_text(world: &World) -> String {
    serde_json::to_string(&world.status().clusters.get(CLUSTER)).unwrap_or_default()
}

/// Replaces admin.conf on the control plane and starts a fresh daemon, which reads it.
async fn plant(world: &mut World, kubeconfig: &Value) {
    let text = serde_json::to_string_pretty(kubeconfig).expect("json");
    world.kill_daemon().await;
    world
        .lab
        .nodes()
        .expect("lab nodes")
        .write_file(&control_plane(world), ADMIN_CONF, text.as_bytes())
        .expect("planted");
    world.start_daemon().await;
}

/// Waits until the status says the planted kubeconfig was refused, naming `words`.
async fn refused(world: &World, case: &str, words: &[&str]) -> String {
    world
        .wait_for_within(
            &format!("the {case} kubeconfig refused, naming {words:?}"),
            Duration::from_secs(30),
            |_| {
                let text = status_text(world);
                text.contains("refused") && words.iter().all(|w| text.contains(w))
            },
        )
        .await;
    status_text(world)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_kubeconfigs_from_a_control_plane_are_refused_and_nothing_runs_or_is_sent() {
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(
            CLUSTER,
            cluster_yaml(CLUSTER, 36, "1.36.2", 2, "debian13-k8s"),
        )],
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    world
        .wait_for("the kubeconfig delivered to Flux", |s| {
            s.clusters.get(CLUSTER).is_some_and(|c| {
                c.flux_kubeconfig_fingerprint.is_some()
                    && c.flux_kubeconfig_fingerprint == c.kubeconfig_fingerprint
            })
        })
        .await;
    let delivered = world.flux_kubeconfig(CLUSTER).expect("delivered");
    let sim = world
        .lab
        .kube()
        .cluster(CLUSTER)
        .expect("simulated cluster");
    let genuine: Value = serde_saphyr::from_str(&sim.admin_kubeconfig()).expect("admin.conf");
    let listener = Listener::start().await;
    let scratch = tempfile::tempdir().expect("scratch");
    let marker = scratch.path().join("exec-ran");
    let stolen = scratch.path().join("token");
    std::fs::write(&stolen, "stolen-daemon-secret").expect("token file");

    // exec: the plugin would run as the daemon's user, with its environment.
    let mut exec = genuine.clone();
    exec["users"][0]["user"]["exec"] = json!({
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "/bin/sh",
        "args": ["-c", format!("touch {}", marker.display())],
        "interactiveMode": "Never",
    });
    plant(&mut world, &exec).await;
    let text = refused(&world, "exec", &["exec"]).await;
    assert!(!marker.exists(), "the exec plugin ran");
    assert!(
        !text.contains("/bin/sh"),
        "nothing of the document is echoed: {text}"
    );

    // tokenFile: a local file sent as a bearer token to a server of the attacker's choice.
    let mut token_file = genuine.clone();
    token_file["users"][0]["user"] = json!({"tokenFile": stolen.display().to_string()});
    token_file["clusters"][0]["cluster"]["server"] = json!(listener.url());
    plant(&mut world, &token_file).await;
    let text = refused(&world, "tokenFile", &["tokenFile"]).await;
    assert!(!text.contains("stolen"), "{text}");

    // insecure-skip-tls-verify: any server certificate would do.
    let mut insecure = genuine.clone();
    insecure["clusters"][0]["cluster"] = json!({
        "server": listener.url(),
        "insecure-skip-tls-verify": true,
    });
    plant(&mut world, &insecure).await;
    refused(&world, "insecure", &["insecure-skip-tls-verify"]).await;

    // Another server, everything else genuine.
    let mut elsewhere = genuine.clone();
    elsewhere["clusters"][0]["cluster"]["server"] = json!(listener.url());
    plant(&mut world, &elsewhere).await;
    refused(&world, "other server", &["server", "k8s-trust.lab.example"]).await;

    // Another CA, everything else genuine: the CA pinned at init (kept in the management
    // cluster, so this fresh daemon knows it) is not replaced by the one a VM offers.
    let management = world.lab.kube().management().expect("management");
    let mut other_ca = genuine.clone();
    other_ca["clusters"][0]["cluster"]["certificate-authority-data"] =
        json!(base64::engine::general_purpose::STANDARD.encode(management.ca_pem()));
    plant(&mut world, &other_ca).await;
    let pinned = certificate_fingerprint(&sim.ca_pem());
    let offered = certificate_fingerprint(&management.ca_pem());
    refused(
        &world,
        "other CA",
        &[
            &pinned,
            &offered,
            "delete Secret capstan-system/capstan-ca-trust",
        ],
    )
    .await;

    assert!(!marker.exists(), "the exec plugin never ran");
    assert_eq!(
        listener.connections(),
        0,
        "nothing connected to the listener"
    );
    assert_eq!(
        world.flux_kubeconfig(CLUSTER).as_deref(),
        Some(delivered.as_str()),
        "Flux kept the kubeconfig delivered before"
    );

    // The genuine admin.conf back: the cluster is Ready again, as before.
    plant(&mut world, &genuine).await;
    world
        .wait_for("the cluster Ready again", |s| ready(s, &[CLUSTER]))
        .await;
    assert_eq!(
        world.flux_kubeconfig(CLUSTER).as_deref(),
        Some(delivered.as_str())
    );
}

/// `AB:CD:…`, the form capstan names CAs by (what `openssl x509 -fingerprint -sha256` prints).
fn certificate_fingerprint(pem: &str) -> String {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).expect("PEM");
    capstan::fingerprint::certificate_sha256(&pem.contents)
}
