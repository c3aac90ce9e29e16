//! deploy/capstan.yaml is well-formed: every document is accepted by an API server (the lab's
//! management cluster, through the stock kubectl, server-side dry run), and the capstan
//! container's arguments are a command line capstan accepts.

use std::path::Path;

use crate::judges::{self, Judge};
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
    assert_eq!(
        deployment["spec"]["replicas"], 1,
        "one reconciler at a time"
    );
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_accepts_every_document() {
    if !judges::present("an_api_server_accepts_every_document", &[Judge::Kubectl]) {
        return;
    }
    let world = crate::lifecycle_support::World::new(
        &crate::lifecycle_support::fleet_yaml(&["1.36"], false),
        &[],
    )
    .await;
    let management = world.kubeconfig("management");
    let path = manifest();
    let kubeconfig = management.clone();
    let output = tokio::task::spawn_blocking(move || {
        // A dry run creates nothing, so the namespace the other objects go to must exist.
        crate::lifecycle_support::kubectl_with(
            &kubeconfig,
            &["create", "namespace", "capstan-system"],
        );
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
        "deployment.apps/capstan",
        "service/capstan",
    ] {
        assert!(stdout.contains(object), "{object} accepted: {stdout}");
    }
}
