//! `kubernetes.authentication` on kubeadm and K3s clusters the daemon builds: `kubectl auth
//! whoami` with a JWT minted by PyJWT (RS256 and ES256), whose issuer the test serves over
//! HTTPS on loopback with a CA the cluster file names, prints the mapped user and groups; a
//! token of another issuer, or signed by a key the issuer does not publish, is refused (401).
//! The API server reads the configuration from the file the node was given.

use capstan_testkit::judge::{self, Judge};
use capstan_testkit::oidc::{Issuer, whoami};
use capstan_testkit::{ClusterYaml, World, fleet_yaml, k3s_lab_cluster};
use serde_json::json;

/// `text` (a cluster file whose `kubernetes` is a one-line mapping) with `issuer`'s
/// authentication under `kubernetes`.
fn with_authentication(text: &str, issuer: &Issuer) -> String {
    let start = text.find("  kubernetes: {").expect("a one-line kubernetes");
    let end = start + text[start..].find('\n').expect("a line");
    let fields = text[start + "  kubernetes: {".len()..end].trim_end_matches('}');
    let fields: String = fields
        .split(", ")
        .map(|field| format!("    {field}\n"))
        .collect();
    format!(
        "{}  kubernetes:\n{fields}{}{}",
        &text[..start],
        issuer.authentication_yaml(),
        &text[end + 1..]
    )
}

/// The judgement every distribution must pass, on `cluster` of `world`.
fn judge_tokens(world: &World, cluster: &str, issuer: &Issuer) {
    let kubeconfig = world.flux_kubeconfig(cluster).expect("delivered to Flux");
    let dir = world.state.path();
    for key in ["rsa", "ec"] {
        let user = whoami(&kubeconfig, &issuer.token(&issuer.url, key, key), dir)
            .unwrap_or_else(|err| panic!("{cluster}: a {key} token is accepted: {err}"));
        assert_eq!(
            user["username"], "oidc:alice@example.com",
            "{cluster}: {user}"
        );
        assert_eq!(
            user["groups"],
            json!(["oidc:platform", "oidc:dev", "system:authenticated"]),
            "{cluster}: {user}"
        );
    }
    let other_issuer = issuer.token("https://sso.other.example/realms/lab", "rsa", "rsa");
    let rogue_key = issuer.token(&issuer.url, "rogue", "rsa");
    for (what, token) in [("another issuer", other_issuer), ("another key", rogue_key)] {
        let refused = whoami(&kubeconfig, &token, dir).expect_err(what);
        assert!(
            refused.contains("Unauthorized"),
            "{cluster}: {what}: {refused}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeadm_cluster_s_api_server_accepts_its_issuer_s_tokens_and_refuses_others() {
    if !judge::present(&[Judge::Kubectl, Judge::PyJwt]) {
        return;
    }
    let issuer = Issuer::start().await;
    let file = with_authentication(
        &ClusterYaml::lab("sso")
            .address(76)
            .workers(1)
            .render()
            .replacen("minWorkers: 2", "minWorkers: 1", 1),
        &issuer,
    );
    let mut world = World::new(&fleet_yaml(&["1.36"], false), &[("sso", file)]).await;
    world.start_until_ready(&["sso"]).await;
    judge_tokens(&world, "sso", &issuer);
    let nodes = world.lab.nodes().expect("the lab's node software");
    for vm in world.vms_of("sso") {
        let vmid = capstan::model::VmId(vm.vmid);
        let file = nodes.file(
            vmid,
            capstan::providers::kubeadm::authentication::CONFIG_PATH,
        );
        assert_eq!(
            file.is_some(),
            vm.name.contains("-cp-"),
            "{}: control planes only",
            vm.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_k3s_cluster_s_api_server_accepts_its_issuer_s_tokens_and_refuses_others() {
    if !judge::present(&[Judge::Kubectl, Judge::PyJwt]) {
        return;
    }
    let issuer = Issuer::start().await;
    let file = with_authentication(&k3s_lab_cluster("sso-k3s", 77), &issuer);
    let mut world = World::new(&fleet_yaml(&["1.36"], false), &[("sso-k3s", file)]).await;
    world.start_until_ready(&["sso-k3s"]).await;
    judge_tokens(&world, "sso-k3s", &issuer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_an_issuer_in_git_replaces_the_control_plane_and_no_worker() {
    if !judge::present(&[Judge::Kubectl, Judge::PyJwt]) {
        return;
    }
    let issuer = Issuer::start().await;
    let plain = ClusterYaml::lab("roll")
        .address(78)
        .workers(1)
        .render()
        .replacen("minWorkers: 2", "minWorkers: 1", 1);
    let mut world = World::new(&fleet_yaml(&["1.36"], false), &[("roll", plain.clone())]).await;
    world.start_until_ready(&["roll"]).await;
    let names = |world: &World| -> Vec<String> {
        world
            .vm_views("roll")
            .into_iter()
            .map(|vm| vm.name)
            .collect()
    };
    let before = names(&world);
    let token = issuer.token(&issuer.url, "rsa", "rsa");
    let kubeconfig = world.flux_kubeconfig("roll").expect("delivered to Flux");
    let refused = whoami(&kubeconfig, &token, world.state.path()).expect_err("no issuer yet");
    assert!(refused.contains("Unauthorized"), "{refused}");

    world.write_cluster("roll", &with_authentication(&plain, &issuer));
    let old_control_plane = before
        .iter()
        .find(|name| name.contains("-cp-"))
        .expect("a control plane")
        .clone();
    world
        .wait_for("the control plane replaced", |s| {
            capstan_testkit::ready(s, &["roll"])
                && s.clusters["roll"].nodes.len() == 2
                && s.clusters["roll"]
                    .nodes
                    .iter()
                    .all(|n| n.name.as_str() != old_control_plane)
        })
        .await;
    let after = names(&world);
    for worker in before.iter().filter(|name| !name.contains("-cp-")) {
        assert!(after.contains(worker), "{worker} untouched: {after:?}");
    }
    // The new control plane joined with the ClusterConfiguration capstan uploaded, its API
    // server started with the file written on it.
    let kubeconfig = world.flux_kubeconfig("roll").expect("delivered to Flux");
    let user = whoami(&kubeconfig, &token, world.state.path()).expect("accepted now");
    assert_eq!(user["username"], "oidc:alice@example.com", "{user}");
}
