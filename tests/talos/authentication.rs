//! `kubernetes.authentication` on a Talos cluster the daemon builds: the control plane's
//! machine config carries the AuthenticationConfiguration (`machine.files`, mounted and named
//! in `cluster.apiServer`), and `kubectl auth whoami` with a JWT minted by PyJWT prints the
//! mapped user and groups; another issuer's token, or one signed by a key the issuer does not
//! publish, is refused (401).

use capstan_testkit::World;
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::oidc::{Issuer, whoami};
use serde_json::json;

use crate::reconcile::{TALOS, fleet, talos_lab};

const CLUSTER: &str = "sso";

fn cluster(issuer: &Issuer) -> String {
    format!(
        "apiVersion: capstan.dev/v1alpha1
kind: Cluster
metadata: {{name: {CLUSTER}}}
spec:
  proxmox: homelab
  kubernetes:
    distribution: talos
    version: 1.36.2
{authentication}  talos: {{version: {TALOS}}}
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
        authentication = issuer.authentication_yaml()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_talos_cluster_s_api_server_accepts_its_issuer_s_tokens_and_refuses_others() {
    if !judge::present(&[Judge::Kubectl, Judge::PyJwt]) {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let issuer = Issuer::start().await;
    let mut world =
        World::with_lab(talos_lab(), &fleet(), &[(CLUSTER, cluster(&issuer))], false).await;
    world.start_until_ready(&[CLUSTER]).await;
    let kubeconfig = world.flux_kubeconfig(CLUSTER).expect("delivered to Flux");
    let dir = world.state.path();
    for key in ["rsa", "ec"] {
        let user = whoami(&kubeconfig, &issuer.token(&issuer.url, key, key), dir)
            .unwrap_or_else(|err| panic!("a {key} token is accepted: {err}"));
        assert_eq!(user["username"], "oidc:alice@example.com", "{user}");
        assert_eq!(
            user["groups"],
            json!(["oidc:platform", "oidc:dev", "system:authenticated"]),
            "{user}"
        );
    }
    let other_issuer = issuer.token("https://sso.other.example/realms/lab", "rsa", "rsa");
    let rogue_key = issuer.token(&issuer.url, "rogue", "rsa");
    for (what, token) in [("another issuer", other_issuer), ("another key", rogue_key)] {
        let refused = whoami(&kubeconfig, &token, dir).expect_err(what);
        assert!(refused.contains("Unauthorized"), "{what}: {refused}");
    }
}
