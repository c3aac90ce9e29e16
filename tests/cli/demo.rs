//! `capstan demo`, the README's first command, as a newcomer runs it: it brings the example
//! clusters up on the embedded lab, says so with the time it took, and tells how to look.

#[test]
fn the_demo_brings_every_example_cluster_up_and_says_how_to_look() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("demo");
    let run = capstan_testkit::cli::capstan(&[
        "demo",
        "--state-dir",
        state.to_str().expect("path"),
        "--http",
        "127.0.0.1:0",
        "--exit-when-ready",
    ]);
    run.assert_code(0);
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("all 4 clusters Ready in "))
        .unwrap_or_else(|| panic!("the demo says when it is done:\n{}", run.stdout));
    let seconds: f64 = line
        .trim_start_matches("all 4 clusters Ready in ")
        .trim_end_matches('s')
        .parse()
        .expect("a duration");
    assert!(seconds > 0.0, "{line}");
    // One rule for kubeadm, K3s and Talos clusters alike: the file is named after the cluster.
    for file in ["prod", "platform", "edge", "talos"] {
        let kubeconfig = state.join("lab").join(format!("{file}.kubeconfig"));
        assert!(
            run.stdout.contains(&format!(
                "kubectl --kubeconfig {} get nodes",
                kubeconfig.display()
            )),
            "{}",
            run.stdout
        );
        assert!(kubeconfig.exists(), "{} is written", kubeconfig.display());
    }
    let talos = run
        .stdout
        .lines()
        .find(|l| l.starts_with("  talos "))
        .unwrap_or_else(|| panic!("the Talos cluster is listed:\n{}", run.stdout));
    assert!(talos.contains(" 5 nodes v1.36.2:"), "{talos}");
    // Where an operator finds the Talos cluster's talosconfig (and only that cluster's).
    assert!(
        run.stdout.contains(&format!(
            "  talos's talosconfig: kubectl --kubeconfig {} -n capstan-system get secret talos-talosconfig",
            state.join("lab/management.kubeconfig").display()
        )),
        "{}",
        run.stdout
    );
    assert_eq!(run.stdout.matches("talosconfig: kubectl").count(), 1);
    assert!(
        state.join("repo/clusters/prod.yaml").exists() && state.join("repo/.git").exists(),
        "the user gets a clone of the demo's remote"
    );
    assert!(
        state.join("remote.git/HEAD").exists(),
        "the remote is a bare repository"
    );
    assert!(
        run.stdout
            .contains(&format!("your clone: {}", state.join("repo").display()))
            && run.stdout.contains("git push"),
        "the demo prints the clone and the git push walkthrough:\n{}",
        run.stdout
    );
}
