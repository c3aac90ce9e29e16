//! Rule 7, upgrades.

use super::*;

#[test]
fn rule_7_a_patch_upgrade_moves_the_control_plane_then_delivers_then_replaces_cp_first() {
    let before = Cluster::test("prod").with_workers("general", 2);
    let observed = built(&desired(vec![before.clone()]));
    let after = before.with_version("1.36.4");
    let plan = plan_at(&desired(vec![after.clone()]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let Some(Step {
        action: Action::UpgradeControlPlane { from, to, .. },
        reason,
        disruptive: true,
        ..
    }) = cluster.steps.first()
    else {
        panic!("upgrade first: {:#?}", cluster.steps);
    };
    assert_eq!(
        (from.to_string(), to.to_string()),
        ("1.36.2".into(), "1.36.4".into())
    );
    assert_eq!(
        reason,
        "patch upgrade 1.36.2 → 1.36.4: kubeadm upgrade apply in place first; the machines are replaced after, control plane first"
    );
    let old_cp = machines_of(&observed, "prod", "cp");
    let old_workers = machines_of(&observed, "prod", "general");
    let new_cp = after.name_of("cp", 0);
    let new_workers: Vec<NodeName> = (0..2).map(|i| after.name_of("general", i)).collect();
    let expected = vec![
        c("upgrade-control-plane"),
        c("deliver-kubeconfig"),
        s("create-machine", &new_cp),
        s("prepare-node", &new_cp),
        s("join-node", &new_cp),
        s("cordon", &old_cp[0]),
        s("drain", &old_cp[0]),
        s("delete-node", &old_cp[0]),
        // The control plane is replaced: workers follow, and the kubeconfig (now read from
        // the new control plane) goes out again.
        s("reset-node", &old_cp[0]),
        c("deliver-kubeconfig"),
        s("destroy-machine", &old_cp[0]),
        // Flux has the new kubeconfig before any machine moves again.
        s("create-machine", &new_workers[0]),
        s("prepare-node", &new_workers[0]),
        s("join-node", &new_workers[0]),
        s("cordon", &old_workers[0]),
        s("drain", &old_workers[0]),
        s("delete-node", &old_workers[0]),
        s("reset-node", &old_workers[0]),
        s("destroy-machine", &old_workers[0]),
        s("create-machine", &new_workers[1]),
        s("prepare-node", &new_workers[1]),
        s("join-node", &new_workers[1]),
        s("cordon", &old_workers[1]),
        s("drain", &old_workers[1]),
        s("delete-node", &old_workers[1]),
        s("reset-node", &old_workers[1]),
        s("destroy-machine", &old_workers[1]),
    ];
    assert_eq!(shape(&cluster.predicted), expected);
}

#[test]
fn rule_7_refused_version_changes_say_which_rule_refused_them() {
    let before = Cluster::test("prod");
    let observed = built(&desired(vec![before.clone()]));
    let cases = [
        (
            "1.37.0",
            "1.36.2 → 1.37.0 refused (rule 7): minor 1.37 is not in approvedMinors; add \"1.37\" to approvedMinors in capstan.yaml once every Flux component supports it",
        ),
        (
            "1.38.1",
            "1.36.2 → 1.38.1 refused (rule 7): one minor at a time: move to 1.37 first",
        ),
        (
            "1.36.1",
            "1.36.2 → 1.36.1 refused (rule 7): a downgrade; Kubernetes never moves backwards: set spec.kubernetes.version back to 1.36.2",
        ),
    ];
    for (version, message) in cases {
        let mut desired = desired(vec![before.clone().with_version(version)]);
        desired
            .fleet
            .approved_minors
            .push("1.38".parse().expect("minor"));
        let plan = plan_at(&desired, &observed, now());
        let cluster = plan.cluster("prod").expect("planned");
        assert_eq!(
            cluster.blocked,
            vec![Blocked {
                rule: Rule::Upgrades,
                message: message.to_owned()
            }],
            "{version}"
        );
        assert_eq!(
            cluster.steps,
            vec![],
            "{version}: the cluster stays as it is"
        );
    }
    // Approved, the next minor moves.
    let mut desired = desired(vec![before.with_version("1.37.0")]);
    desired
        .fleet
        .approved_minors
        .push("1.37".parse().expect("minor"));
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.blocked, vec![]);
    assert_eq!(shape(&cluster.steps), vec![c("upgrade-control-plane")]);
    assert!(
        cluster.steps[0]
            .reason
            .starts_with("minor upgrade 1.36.2 → 1.37.0")
    );
}
