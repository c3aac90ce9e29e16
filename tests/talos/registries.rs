//! `kubernetes.registries` on a Talos cluster the daemon builds: each machine's containerd,
//! asked through the Talos API's `ImagePull` by third-party bindings (PyPI's
//! `talos-linux-api`, with the talosconfig capstan delivers), pulls a `docker.io` image
//! through the mirror of its machine config's `RegistryMirrorConfig`, presenting the
//! `RegistryAuthConfig` credentials and trusting the `RegistryTLSConfig` CA (the mirror, a real
//! HTTPS server on loopback under a private CA, records it);
//! a registry without a mirror is refused; the password read from the secret source is in no
//! status, log line or repository file.
//!
//! The runtime is single-threaded so that the log of this test alone can be captured.

use std::process::Command;
use std::sync::Arc;

use capstan::secrets::{SecretPolicy, SecretReader};
use capstan::spec::registries::variable_word;
use capstan_testkit::World;
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::log::CapturedLog;
use capstan_testkit::registry::Mirror;

use crate::reconcile::{TALOS, fleet, talos_lab};

const CLUSTER: &str = "mirrored-talos";
const PASSWORD: &str = "talos-mirror-password-8d41c0e2";
const USER: &str = "robot";

fn cluster(mirror: &Mirror, variable: &str) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {CLUSTER}}}
spec:
  proxmox: homelab
  kubernetes:
    distribution: talos
    version: 1.36.2
    registries:
      mirrors:
        docker.io:
          endpoints: [\"{url}\"]
      credentials:
        \"{host}\":
          username: {USER}
          passwordFrom: {{env: {variable}}}
      ca:
        \"{host}\": {ca}
  talos: {{version: {TALOS}}}
  endpoint: {{host: k8s-{CLUSTER}.lab.example, address: 192.168.1.69}}
  network: {{nodes: 192.168.1.0/24, reserved: [\"192.168.1.170-192.168.1.189\"]}}
  controlPlane:
    replicas: 1
    machine: {{template: talos-{TALOS}, cores: 2, memoryMiB: 4096, placement: [pve1]}}
  workers:
    - pool: general
      replicas: 1
      machine: {{template: talos-{TALOS}, cores: 2, memoryMiB: 4096, placement: [pve2]}}
  rollout: {{minWorkers: 1}}
  delivery:
    flux: {{cluster: management}}
",
        url = mirror.url(),
        host = mirror.host(),
        ca = serde_json::to_string(mirror.ca_pem().expect("an HTTPS mirror"))
            .expect("a JSON string is a YAML one"),
    )
}

/// Calls `ImagePull` of `reference` on the Talos API at 127.0.0.1:`port` with the
/// talosconfig's client certificate, and prints `pulled` or the gRPC status and message.
const CLIENT: &str = r#"
import asyncio, base64, os, ssl, sys, tempfile
import yaml
from grpclib.client import Channel
from grpclib.exceptions import GRPCError
from talos_linux_api.v1_6_0.machine import ImagePullRequest, MachineServiceStub

config_path, port, reference = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(config_path) as f:
    config = yaml.safe_load(f)
context = config["contexts"][config["context"]]
tls = ssl.create_default_context(cadata=base64.b64decode(context["ca"]).decode())
folder = tempfile.mkdtemp()
crt, key = os.path.join(folder, "crt"), os.path.join(folder, "key")
with open(crt, "wb") as f:
    f.write(base64.b64decode(context["crt"]))
with open(key, "wb") as f:
    f.write(base64.b64decode(context["key"]))
tls.load_cert_chain(crt, key)
tls.set_alpn_protocols(["h2"])

async def main():
    channel = Channel("127.0.0.1", port, ssl=tls)
    try:
        stub = MachineServiceStub(channel)
        try:
            await stub.image_pull(ImagePullRequest(reference=reference), timeout=30)
            print("pulled")
        except GRPCError as error:
            print("refused", error.status.name, error.message)
    finally:
        channel.close()

asyncio.run(main())
"#;

/// The talosconfig capstan keeps for operators on the management cluster (read from the lab's
/// store: a blocking kubectl would stall this single-threaded runtime's API servers).
fn talosconfig(world: &World) -> String {
    use base64::Engine as _;
    let management = world.lab.kube().management().expect("management cluster");
    let secret = management
        .object(
            "secrets",
            Some("capstan-system"),
            &format!("{CLUSTER}-talosconfig"),
        )
        .expect("the talosconfig Secret");
    let encoded = secret["data"]["talosconfig"].as_str().expect("the key");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    String::from_utf8(bytes).expect("text")
}

async fn image_pull(talosconfig: &std::path::Path, port: u16, reference: &str) -> String {
    let (config, reference) = (talosconfig.to_owned(), reference.to_owned());
    tokio::task::spawn_blocking(move || {
        let output = Command::new(judge::talos_python())
            .arg("-c")
            .arg(CLIENT)
            .arg(config)
            .arg(port.to_string())
            .arg(reference)
            .output()
            .expect("the venv's python runs");
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
    .await
    .expect("runs")
}

#[tokio::test]
async fn talos_machines_pull_through_the_mirror_of_their_registry_documents_with_its_credentials() {
    if !judge::present(&[Judge::TalosPython]) {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (log, _guard) = CapturedLog::capture(tracing::Level::DEBUG);
    let mirror = Mirror::start_tls(USER, PASSWORD).await;
    let variable = format!(
        "CAPSTAN_CLUSTER_MIRRORED_TALOS_REGISTRY_{}_PASSWORD",
        variable_word(&mirror.host())
    );
    let file = cluster(&mirror, &variable);
    let mut world = World::with_lab(talos_lab(), &fleet(), &[(CLUSTER, file)], false).await;
    world.secret_reader = SecretReader::new(Arc::new(SecretPolicy::default()), move |name| {
        (name == variable).then(|| PASSWORD.to_owned())
    });
    world.start_until_ready(&[CLUSTER]).await;
    let talosconfig = talosconfig(&world);
    let path = world.state.path().join("talosconfig");
    std::fs::write(&path, talosconfig).expect("write");
    let vms = world.vms_of(CLUSTER);
    assert_eq!(vms.len(), 2);
    for vm in &vms {
        let port = world
            .lab
            .talos_api_address(capstan::model::VmId(vm.vmid))
            .expect("its Talos API serves")
            .port();
        let pulled = image_pull(&path, port, "docker.io/library/busybox:1.36").await;
        assert_eq!(pulled.trim(), "pulled", "{}: {pulled}", vm.name);
        let refused = image_pull(&path, port, "registry.k8s.io/pause:3.10").await;
        assert!(
            refused.contains("refused UNKNOWN")
                && refused.contains("lookup registry.k8s.io: no such host"),
            "{}: {refused}",
            vm.name
        );
    }
    let served = mirror.requests();
    assert_eq!(served.len(), vms.len(), "{served:#?}");
    for request in &served {
        assert_eq!(request.path, "/v2/library/busybox/manifests/1.36");
        assert_eq!(request.query.as_deref(), Some("ns=docker.io"));
        assert_eq!(request.user.as_deref(), Some(USER));
        assert!(request.authorized && request.status == 200, "{request:?}");
    }
    let status = serde_json::to_string(&world.status()).expect("status serialises");
    assert!(!status.contains(PASSWORD), "the password in the status");
    let log = log.text();
    assert!(
        !log.is_empty() && !log.contains(PASSWORD),
        "the password in the log"
    );
    let repository = std::fs::read_dir(world.repo.path().join("clusters"))
        .expect("the clusters folder")
        .flatten()
        .map(|entry| std::fs::read_to_string(entry.path()).unwrap_or_default())
        .collect::<String>();
    assert!(repository.contains("passwordFrom") && !repository.contains(PASSWORD));
}
