//! capstan's K3s steps and the lab's K3s node software on a real MariaDB: capstan provisions
//! the datastore and keeps the token in capstan-system, servers installed the air-gap way keep
//! the cluster in kine's table through a real MySQL connection, agents join with the token, the
//! stock kubectl sees the nodes, and the failures read as K3s's (a refused datastore, another
//! token, a download attempted without network, the API's 503 while the datastore is away).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::kube_support::Kubectl;
use crate::lab_support::eventually;
use capstan::model::NodeName;
use capstan::providers::datastore::{AdminAccess, generate_secret};
use capstan::providers::k3s::{self, ServerJoin};
use capstan::providers::kube::{AdminKubeconfig, ApiEndpoint, KubeClusterClient};
use capstan::providers::kubeadm::Kubeadm;
use capstan::providers::node_exec::{Command, ExecError, NodeExec, NodeTarget, Output};
use capstan::records::k3s::k3s_secrets;
use capstan::scheduling::Registration;
use capstan::spec::{DatastoreChoice, DatastoreServer, SecretSource};
use capstan_core::model::VmId;
use capstan_lab::clock::LabClock;
use capstan_lab::kube::KubeLab;
use capstan_lab::lab::LabBackend;
use capstan_lab::nodes::{NodeSoftware, NodeTimings};
use capstan_lab::proxmox::{ExecOutcome, GuestIdentity};
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::mariadb::MariaDb;

const RELEASE: &str = "v1.36.2+k3s1";
const ENDPOINT_HOST: &str = "k8s-edge.lab.example";

struct K3sLab {
    nodes: NodeSoftware<LabBackend>,
    kube: Arc<KubeLab>,
    clock: LabClock,
}

async fn k3s_lab() -> K3sLab {
    let clock = LabClock::new();
    let kube = Arc::new(
        KubeLab::start(clock.clone(), &BTreeMap::new())
            .await
            .expect("lab starts"),
    );
    let fast = Duration::from_millis(20);
    let timings = NodeTimings {
        prepare: fast,
        init: fast,
        join: fast,
        node_ready_after: fast,
        upgrade: fast,
    };
    K3sLab {
        nodes: NodeSoftware::new(LabBackend::new(Arc::clone(&kube)), clock.clone(), timings),
        kube,
        clock,
    }
}

fn vm(vmid: u32, name: &str, template_k3s: Option<&str>) -> GuestIdentity {
    GuestIdentity {
        vmid: VmId(vmid),
        name: name.to_owned(),
        node: "pve1".to_owned(),
        address: Some(format!("192.168.1.{}", vmid - 100).parse().expect("ip")),
        k3s_airgap: template_k3s.map(str::to_owned),
        talos: None,
        talos_extensions: Vec::new(),
        media: Vec::new(),
        cluster: Some("edge".to_owned()),
        hardware: Default::default(),
    }
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

/// Writes K3s's configuration file as capstan does: created empty and 0600, then filled
/// through the guest agent's file-write (which keeps the mode of a file that exists).
async fn configure(lab: &K3sLab, node: &GuestIdentity, settings: &str) {
    assert_ok(
        "the configuration file created 0600",
        &lab.nodes
            .exec(
                node,
                &words("install -D -m 0600 /dev/null /etc/rancher/k3s/config.yaml"),
            )
            .await,
    );
    lab.nodes
        .write_file(node, "/etc/rancher/k3s/config.yaml", settings.as_bytes())
        .expect("written");
}

/// The seed's server install, air-gapped: the token and the DSN in K3s's configuration file,
/// `env ... sh k3s-install.sh server ...` with neither.
async fn server_install(lab: &K3sLab, token: &str, dsn: &str, node: &GuestIdentity) -> ExecOutcome {
    configure(
        lab,
        node,
        &format!("token: \"{token}\"\ndatastore-endpoint: \"{dsn}\"\n"),
    )
    .await;
    let ip = node.address.expect("ip");
    let argv = words(&format!(
        "env INSTALL_K3S_SKIP_DOWNLOAD=true sh /usr/local/bin/k3s-install.sh server --tls-san {ENDPOINT_HOST} --tls-san 192.168.1.25 --node-ip {ip}"
    ));
    lab.nodes.exec(node, &argv).await
}

async fn agent_install(lab: &K3sLab, token: &str, node: &GuestIdentity) -> ExecOutcome {
    configure(lab, node, &format!("token: \"{token}\"\n")).await;
    let argv = words(&format!(
        "env INSTALL_K3S_SKIP_DOWNLOAD=true sh /usr/local/bin/k3s-install.sh agent --server https://{ENDPOINT_HOST}:6443 --node-ip {}",
        node.address.expect("ip")
    ));
    lab.nodes.exec(node, &argv).await
}

/// The database and user capstan provisions for the cluster, and its kine DSN.
async fn provisioned(server: &MariaDb) -> String {
    let declared = DatastoreServer {
        url: server.url(),
        admin_user: "root".to_owned(),
        admin_password_from: SecretSource::Env("UNUSED".to_owned()),
    };
    let admin = AdminAccess::new(&declared, server.root_password.clone()).expect("url");
    let password = generate_secret().expect("random");
    admin
        .provision("k3s_edge", &password)
        .await
        .expect("provisioned")
        .dsn()
}

fn assert_ok(what: &str, outcome: &ExecOutcome) {
    assert_eq!(outcome.exit_code, 0, "{what}: {outcome:?}");
}

/// capstan's node transport over the lab's node software: each VM a template carrying K3s.
struct LabNodes(NodeSoftware<LabBackend>);

fn identity(target: &NodeTarget) -> GuestIdentity {
    vm(target.vmid.0, target.name.as_str(), Some(RELEASE))
}

/// The same transport, each VM cloned from a template that carries no K3s.
struct BareNodes(NodeSoftware<LabBackend>);

impl NodeExec for BareNodes {
    async fn write_file(
        &self,
        target: &NodeTarget,
        path: &str,
        content: &str,
    ) -> Result<(), ExecError> {
        let bare = vm(target.vmid.0, target.name.as_str(), None);
        self.0
            .write_file(&bare, path, content.as_bytes())
            .map_err(|reason| ExecError::Transport {
                node: target.to_string(),
                command: format!("write {path}"),
                transient: false,
                source: reason.into(),
            })
    }
    async fn run(&self, target: &NodeTarget, command: &Command) -> Result<Output, ExecError> {
        let bare = vm(target.vmid.0, target.name.as_str(), None);
        let exit = self.0.exec(&bare, &command.argv).await;
        Ok(Output {
            exit_code: exit.exit_code,
            stdout: exit.stdout,
            stderr: exit.stderr,
        })
    }
}

impl NodeExec for LabNodes {
    async fn write_file(
        &self,
        target: &NodeTarget,
        path: &str,
        content: &str,
    ) -> Result<(), ExecError> {
        self.0
            .write_file(&identity(target), path, content.as_bytes())
            .map_err(|reason| ExecError::Transport {
                node: target.to_string(),
                command: format!("write {path}"),
                transient: false,
                source: reason.into(),
            })
    }
    async fn run(&self, target: &NodeTarget, command: &Command) -> Result<Output, ExecError> {
        let exit = self.0.exec(&identity(target), &command.argv).await;
        Ok(Output {
            exit_code: exit.exit_code,
            stdout: exit.stdout,
            stderr: exit.stderr,
        })
    }
}

fn target(vmid: u32, name: &str) -> NodeTarget {
    NodeTarget {
        vmid: VmId(vmid),
        proxmox_node: "pve1".to_owned(),
        name: NodeName::from(name),
    }
}

/// The seed's cluster in the cluster language (3 servers on a MariaDB datastore, 2 agents).
fn edge_spec(mariadb: &MariaDb) -> (capstan::spec::Fleet, capstan::spec::ClusterSpec) {
    let fleet = format!(
        "apiVersion: capstan.dev/v1alpha1\nkind: Fleet\napprovedMinors: [\"1.36\"]\ndatastores:\n  mariadb: {{url: \"{}\", adminUser: root, adminPasswordFrom: {{env: MARIADB_ROOT_PASSWORD}}}}\n",
        mariadb.url()
    );
    let cluster = format!(
        "apiVersion: capstan.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: edge}}\nspec:\n  proxmox: homelab\n  kubernetes: {{distribution: k3s, version: {RELEASE}, datastore: {{server: mariadb, database: k3s_edge}}}}\n  endpoint: {{host: {ENDPOINT_HOST}, address: 192.168.1.25}}\n  network: {{nodes: 192.168.1.0/24}}\n  controlPlane:\n    replicas: 3\n    machine: {{template: debian13-k3s, cores: 2, memoryMiB: 4096, cpu: host, placement: [pve1]}}\n  workers:\n    - {{pool: agents, replicas: 2, machine: {{template: debian13-k3s, cores: 4, memoryMiB: 8192, cpu: host, placement: [pve1]}}}}\n"
    );
    let fleet: capstan::spec::Fleet = serde_saphyr::from_str(&fleet).expect("fleet");
    let cluster: capstan::spec::Cluster = serde_saphyr::from_str(&cluster).expect("cluster");
    (fleet, cluster.spec)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capstans_k3s_steps_build_the_seed_cluster_on_a_provisioned_mariadb() {
    if !judge::present(&[Judge::Mariadb, Judge::Kubectl]) {
        return;
    }
    let mariadb = MariaDb::start();
    let (fleet, spec) = edge_spec(&mariadb);
    let lab = k3s_lab().await;
    let management = KubeClusterClient::connect(
        &lab.kube
            .cluster("management")
            .expect("management")
            .admin_kubeconfig(),
    )
    .await
    .expect("management client");

    // What the daemon does before the first server: the secrets, then the datastore.
    let secrets = k3s_secrets(&management, "edge", None, true)
        .await
        .expect("secrets");
    let Some(DatastoreChoice::Provisioned { server, database }) =
        spec.kubernetes.datastore.as_ref().and_then(|d| d.choice())
    else {
        panic!("the seed's datastore is provisioned");
    };
    let admin =
        AdminAccess::new(&fleet.datastores[server], mariadb.root_password.clone()).expect("url");
    admin.preflight().await.expect("the datastore answers");
    let endpoint = admin
        .provision(database, &secrets.datastore_password)
        .await
        .expect("provisioned");
    endpoint
        .check()
        .await
        .expect("the cluster's user reaches its database");
    let join = ServerJoin {
        token: secrets.token.clone(),
        datastore_endpoint: Some(endpoint.dsn()),
    };

    let nodes = Kubeadm::new(LabNodes(lab.nodes.clone()));
    let servers: Vec<NodeTarget> = (0..3)
        .map(|i| target(111 + i, &format!("capstan-edge-cp-{i}")))
        .collect();
    for server in &servers {
        let address = format!("192.168.1.{}", server.vmid.0 - 100)
            .parse()
            .expect("ip");
        let steps = k3s::install_server(
            &spec,
            &spec.cluster_network(None),
            &join,
            &server.name,
            address,
            &Registration::default(),
        );
        nodes
            .run_steps("init-control-plane", server, &steps)
            .await
            .expect("server");
        nodes
            .run_steps("init-control-plane", server, &steps)
            .await
            .expect("a repeated install is skipped");
    }
    for i in 0..2 {
        let agent = target(121 + i, &format!("capstan-edge-agents-{i}"));
        let address = format!("192.168.1.{}", 21 + i).parse().expect("ip");
        let steps = k3s::install_agent(
            &spec,
            &secrets.token,
            &agent.name,
            address,
            &Registration::default(),
        );
        nodes
            .run_steps("join-node", &agent, &steps)
            .await
            .expect("agent");
    }
    // The lab refused any command line carrying the token or the DSN; both are in K3s's
    // configuration file, which only root reads.
    for vmid in [111, 112, 113, 121, 122] {
        let config = lab
            .nodes
            .file(VmId(vmid), k3s::CONFIG)
            .expect("K3s's configuration file");
        assert!(config.contains(&secrets.token), "{vmid}");
        assert_eq!(
            config.contains(&secrets.datastore_password),
            vmid < 120,
            "servers only reach the datastore"
        );
        assert_eq!(lab.nodes.file_mode(VmId(vmid), k3s::CONFIG), Some(0o600));
    }

    let kubeconfig = nodes
        .checked("read the kubeconfig", &servers[1], &k3s::read_kubeconfig())
        .await
        .expect("k3s.yaml")
        .stdout;
    // What capstan admits of it: the lab's address for the endpoint, verified for its name.
    let served_at = lab.kube.api_address(ENDPOINT_HOST, 6443).expect("served");
    let endpoint = ApiEndpoint::declared(ENDPOINT_HOST, 6443)
        .or_node_loopback()
        .served_at(served_at);
    let admitted = AdminKubeconfig::reduce(
        &kubeconfig,
        &endpoint,
        &capstan::fingerprint::FingerprintKey::derive([]),
    )
    .expect("admitted");
    assert_eq!(admitted.tls_server_name(), Some(ENDPOINT_HOST));
    let kubectl = Kubectl::with_kubeconfig(&kubeconfig);
    let listed = eventually("five Ready nodes", || async {
        let out = kubectl.run(&["get", "nodes", "--no-headers"]).await;
        let ready = out
            .stdout
            .lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
            .count();
        (ready == 5).then_some(out.stdout)
    })
    .await;
    assert!(
        listed.contains(RELEASE),
        "kubelets report the K3s release:\n{listed}"
    );
    let servers_listed = listed
        .lines()
        .filter(|l| l.contains("control-plane"))
        .count();
    assert_eq!(servers_listed, 3, "three servers:\n{listed}");
    assert_eq!(
        lab.kube.cluster("edge").map(|c| c.version()).as_deref(),
        Some(RELEASE)
    );

    let columns = mariadb.sql(
        "SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY ORDINAL_POSITION) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'k3s_edge' AND TABLE_NAME = 'kine'",
    );
    assert_eq!(
        columns.trim(),
        "id,name,created,deleted,create_revision,prev_revision,lease,value,old_value"
    );
    assert_eq!(
        mariadb.sql(
            "SELECT name FROM k3s_edge.kine WHERE name LIKE '/registry/minions/%' ORDER BY name"
        ),
        "/registry/minions/capstan-edge-cp-0\n/registry/minions/capstan-edge-cp-1\n/registry/minions/capstan-edge-cp-2\n"
    );
    assert_eq!(
        mariadb.sql("SELECT COUNT(*) FROM k3s_edge.kine WHERE name LIKE '/bootstrap/%'"),
        "1\n",
        "one bootstrap, shared by the three servers"
    );
    let restarted = k3s_secrets(&management, "edge", None, true)
        .await
        .expect("found again");
    assert_eq!(
        restarted, secrets,
        "a restarted daemon finds the same token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_datastore_that_refuses_fails_the_server_as_k3s_does() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let mariadb = MariaDb::start();
    let dsn = provisioned(&mariadb).await;
    let (user, rest) = dsn.split_once('@').expect("dsn");
    let (name, _) = user.rsplit_once(':').expect("user:password");
    let wrong = format!("{name}:wrong-password@{rest}");
    let lab = k3s_lab().await;
    let server = vm(111, "capstan-edge-cp-0", Some(RELEASE));
    let outcome = server_install(&lab, "t0k3n", &wrong, &server).await;
    assert_eq!(outcome.exit_code, 1, "{outcome:?}");
    assert!(
        outcome.stderr.contains("level=fatal msg=\"starting kubernetes: preparing server: creating storage endpoint: building kine: Error 1045 (28000): Access denied for user 'k3s_edge'@'127.0.0.1' (using password: YES)\""),
        "{}",
        outcome.stderr
    );
    assert!(
        outcome.stderr.contains("Job for k3s.service failed"),
        "{}",
        outcome.stderr
    );
    assert!(
        !outcome.stderr.contains("wrong-password"),
        "{}",
        outcome.stderr
    );
    assert!(lab.kube.cluster("edge").is_none(), "no API server started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_another_token_finds_the_bootstrap_data_and_is_refused() {
    if !judge::present(&[Judge::Mariadb]) {
        return;
    }
    let mariadb = MariaDb::start();
    let dsn = provisioned(&mariadb).await;
    let lab = k3s_lab().await;
    let first = vm(111, "capstan-edge-cp-0", Some(RELEASE));
    assert_ok(
        "first server",
        &server_install(&lab, "token-a", &dsn, &first).await,
    );
    let second = vm(112, "capstan-edge-cp-1", Some(RELEASE));
    let outcome = server_install(&lab, "token-b", &dsn, &second).await;
    assert_eq!(outcome.exit_code, 1);
    assert!(
        outcome
            .stderr
            .contains("bootstrap data already found and encrypted with different token"),
        "{}",
        outcome.stderr
    );
    let agent = vm(121, "capstan-edge-agents-0", Some(RELEASE));
    let outcome = agent_install(&lab, "token-b", &agent).await;
    assert!(
        outcome.stderr.contains("/cacerts: 401 Unauthorized"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn the_lab_refuses_a_k3s_secret_on_the_command_line_or_in_a_file_others_can_read() {
    let lab = k3s_lab().await;
    let server = vm(111, "capstan-edge-cp-0", Some(RELEASE));
    let install = format!(
        "env INSTALL_K3S_SKIP_DOWNLOAD=true sh /usr/local/bin/k3s-install.sh server --tls-san {ENDPOINT_HOST}"
    );
    for (argv, named) in [
        (
            "env INSTALL_K3S_SKIP_DOWNLOAD=true K3S_TOKEN=t0k3n-1 sh /usr/local/bin/k3s-install.sh server".to_owned(),
            "K3S_TOKEN=",
        ),
        (format!("{install} --token t0k3n-1"), "--token"),
        (
            format!("{install} --datastore-endpoint mysql://u:pw-1@tcp(db:3306)/k3s"),
            "--datastore-endpoint",
        ),
    ] {
        let refused = lab.nodes.exec(&server, &words(&argv)).await;
        assert_eq!(refused.exit_code, 1, "{refused:?}");
        assert!(
            refused
                .stderr
                .starts_with(&format!("lab: {named} is on the command line")),
            "{}",
            refused.stderr
        );
    }

    // Written straight through the guest agent, a new file is 0666, and its folder must exist.
    let token = b"token: \"t0k3n-1\"\n";
    let missing = lab
        .nodes
        .write_file(&server, k3s::CONFIG, token)
        .expect_err("no /etc/rancher/k3s yet");
    assert_eq!(missing.why, "No such file or directory", "{missing}");
    assert_ok(
        "another file in the folder",
        &lab.nodes
            .exec(
                &server,
                &words("install -D -m 0644 /dev/null /etc/rancher/k3s/registries.yaml"),
            )
            .await,
    );
    lab.nodes
        .write_file(&server, k3s::CONFIG, token)
        .expect("written");
    let refused = lab.nodes.exec(&server, &words(&install)).await;
    assert!(
        refused.stderr.contains("is mode 0666"),
        "{}",
        refused.stderr
    );

    // Created 0600 first, the file keeps that mode when written; the server starts (alone,
    // on the embedded SQLite) with the token it holds.
    configure(&lab, &server, "token: \"t0k3n-0123456789\"\n").await;
    assert_eq!(lab.nodes.file_mode(server.vmid, k3s::CONFIG), Some(0o600));
    assert_ok("server", &lab.nodes.exec(&server, &words(&install)).await);

    // The lab knows the token now: no command line may carry it.
    let echoed = lab
        .nodes
        .exec(&server, &words("echo t0k3n-0123456789"))
        .await;
    assert!(
        echoed
            .stderr
            .starts_with("lab: the command line carries the K3s token"),
        "{echoed:?}"
    );
}

#[tokio::test]
async fn the_air_gapped_install_needs_skip_download_and_the_template_binary() {
    let lab = k3s_lab().await;
    let bare = vm(111, "capstan-edge-cp-0", None);
    let dsn = "mysql://u:p@tcp(127.0.0.1:1)/k3s";
    let outcome = server_install(&lab, "t", dsn, &bare).await;
    assert!(
        outcome
            .stderr
            .contains("k3s binary not found at /usr/local/bin/k3s"),
        "{outcome:?}"
    );
    let online = words("sh /usr/local/bin/k3s-install.sh server --token t");
    let carrying = vm(112, "capstan-edge-cp-1", Some(RELEASE));
    let outcome = lab.nodes.exec(&carrying, &online).await;
    assert!(
        outcome.stderr.contains("[ERROR]  Download failed"),
        "{outcome:?}"
    );
    let unknown = words(
        "env INSTALL_K3S_SKIP_DOWNLOAD=true sh /usr/local/bin/k3s-install.sh server --tls-sans x",
    );
    let outcome = lab.nodes.exec(&carrying, &unknown).await;
    assert!(outcome.stderr.contains("--tls-sans"), "{outcome:?}");
}

#[tokio::test]
async fn an_install_on_a_template_without_k3s_says_what_the_template_lacks() {
    let lab = k3s_lab().await;
    let cluster: capstan::spec::Cluster = serde_saphyr::from_str(&format!(
            "apiVersion: capstan.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: edge}}\nspec:\n  proxmox: homelab\n  kubernetes: {{distribution: k3s, version: {RELEASE}}}\n  endpoint: {{host: {ENDPOINT_HOST}, address: 192.168.1.25}}\n  network: {{nodes: 192.168.1.0/24}}\n  controlPlane:\n    machine: {{template: debian13-k8s, cores: 2, memoryMiB: 4096, placement: [pve1]}}\n  workers: []\n"
        ))
        .expect("cluster");
    let spec = cluster.spec;
    let join = ServerJoin {
        token: "t0k3n-for-a-bare-template".to_owned(),
        datastore_endpoint: None,
    };
    let node = target(121, "capstan-edge-cp-0");
    let steps = k3s::install_server(
        &spec,
        &spec.cluster_network(None),
        &join,
        &node.name,
        "192.168.1.21".parse().expect("ip"),
        &Registration::default(),
    );
    let err = k3s::install(
        &Kubeadm::new(BareNodes(lab.nodes.clone())),
        "init-control-plane",
        &node,
        "debian13-k8s",
        &steps,
    )
    .await
    .expect_err("no K3s on the template");
    assert_eq!(
        err.to_string(),
        "init-control-plane on capstan-edge-cp-0: template debian13-k8s has no K3s air-gap install: /usr/local/bin/k3s not found"
    );

    // On a template that carries K3s, a failing install keeps its own words.
    let carrying = Kubeadm::new(LabNodes(lab.nodes.clone()));
    let mut wrong = steps.clone();
    if let Some(capstan::providers::kubeadm::NodeStep::Run { command, .. }) = wrong.last_mut() {
        command.argv.push("--tls-sans".to_owned());
    }
    let err = k3s::install(
        &carrying,
        "init-control-plane",
        &node,
        "debian13-k3s",
        &wrong,
    )
    .await
    .expect_err("an unknown flag");
    assert!(err.to_string().contains("--tls-sans"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_answers_503_while_the_datastore_is_away_and_serves_again_once_back() {
    if !judge::present(&[Judge::Mariadb, Judge::Kubectl]) {
        return;
    }
    let mut mariadb = MariaDb::start();
    let dsn = provisioned(&mariadb).await;
    let lab = k3s_lab().await;
    let server = vm(111, "capstan-edge-cp-0", Some(RELEASE));
    assert_ok(
        "server",
        &server_install(&lab, "t0k3n", &dsn, &server).await,
    );
    let kubeconfig = lab
        .nodes
        .exec(&server, &words("cat /etc/rancher/k3s/k3s.yaml"))
        .await;
    let kubectl = Kubectl::with_kubeconfig(&kubeconfig.stdout);
    kubectl.run(&["get", "nodes"]).await.ok();

    tokio::task::block_in_place(|| mariadb.stop());
    let refused = eventually("a 503 naming the datastore", || async {
        let out = kubectl.run(&["get", "nodes"]).await;
        (out.code != 0 && out.stderr.contains("datastore")).then_some(out.stderr)
    })
    .await;
    assert!(
        refused.contains("storage is unavailable: datastore mysql://k3s_edge:***@tcp(127.0.0.1"),
        "{refused}"
    );
    assert!(
        refused.contains("ServiceUnavailable") || refused.contains("503"),
        "{refused}"
    );

    tokio::task::block_in_place(|| mariadb.resume());
    eventually("served again", || async {
        let out = kubectl.run(&["get", "nodes", "--no-headers"]).await;
        (out.code == 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capstans_certificate_rotation_on_a_server_issues_a_new_admin_kubeconfig() {
    if !judge::present(&[Judge::Mariadb, Judge::Kubectl]) {
        return;
    }
    let mariadb = MariaDb::start();
    let (_, spec) = edge_spec(&mariadb);
    let dsn = provisioned(&mariadb).await;
    let lab = k3s_lab().await;
    let nodes = Kubeadm::new(LabNodes(lab.nodes.clone()));
    let server = target(111, "capstan-edge-cp-0");
    let join = ServerJoin {
        token: "t0k3n".to_owned(),
        datastore_endpoint: Some(dsn),
    };
    let address = "192.168.1.11".parse().expect("ip");
    nodes
        .run_steps(
            "init-control-plane",
            &server,
            &k3s::install_server(
                &spec,
                &spec.cluster_network(None),
                &join,
                &server.name,
                address,
                &Registration::default(),
            ),
        )
        .await
        .expect("server");
    let read = || async {
        nodes
            .checked("read", &server, &k3s::read_kubeconfig())
            .await
            .expect("k3s.yaml")
            .stdout
    };
    let before = read().await;
    let sim = lab.kube.cluster("edge").expect("cluster");
    let expiry = sim.admin_certificate_expiry();

    lab.clock.advance(Duration::from_secs(200 * 86_400));
    nodes
        .run_steps("renew-certificates", &server, &k3s::rotate_certificates())
        .await
        .expect("rotated");
    let after = read().await;
    assert_ne!(after, before, "a new admin certificate");
    assert!(
        sim.admin_certificate_expiry() > expiry,
        "a year from the rotation"
    );
    let kubectl = Kubectl::with_kubeconfig(&after);
    eventually("the server Ready again", || async {
        let out = kubectl.run(&["get", "nodes", "--no-headers"]).await;
        out.stdout.contains(" Ready ").then_some(())
    })
    .await;

    let agent = target(121, "capstan-edge-agents-0");
    let agent_address = "192.168.1.21".parse().expect("ip");
    nodes
        .run_steps(
            "join-node",
            &agent,
            &k3s::install_agent(
                &spec,
                "t0k3n",
                &agent.name,
                agent_address,
                &Registration::default(),
            ),
        )
        .await
        .expect("agent");
    let err = nodes
        .run_steps("renew-certificates", &agent, &k3s::rotate_certificates())
        .await
        .expect_err("an agent has no k3s server unit");
    assert!(
        err.to_string().contains("Unit k3s.service not loaded"),
        "{err}"
    );
}
