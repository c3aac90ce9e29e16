//! Rule 1, create before remove: a replacement is Ready before the old machine is cordoned.

use super::*;

#[test]
fn rule_1_a_replacement_is_created_and_ready_before_the_old_machine_is_cordoned() {
    let before = Cluster::test("prod").with_workers("general", 2);
    let observed = built(&desired(vec![before.clone()]));
    let after = before.clone().with_template("general", "debian13-k8s-v2");
    let desired = desired(vec![after.clone()]);
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let old = machines_of(&observed, "prod", "general");
    let new: Vec<NodeName> = (0..2).map(|i| after.name_of("general", i)).collect();
    assert_eq!(cluster.phase, Phase::Updating);
    assert_eq!(shape(&cluster.steps), vec![s("create-machine", &new[0])]);
    assert_eq!(
        cluster.steps[0].reason,
        "replacement for pool general (2 to replace; outdated: template debian13-k8s → debian13-k8s-v2): created before the old one leaves, at most 1 VM(s) above the declared count (rollout.maxSurge); on pve1; Proxmox memory not observed"
    );
    // rollout.maxSurge 1: the next replacement is cloned once the old VM is destroyed; the
    // second old worker is cordoned only once that replacement is Ready.
    let expected = vec![
        s("create-machine", &new[0]),
        s("prepare-node", &new[0]),
        s("join-node", &new[0]),
        s("cordon", &old[0]),
        s("drain", &old[0]),
        s("delete-node", &old[0]),
        s("reset-node", &old[0]),
        s("destroy-machine", &old[0]),
        s("create-machine", &new[1]),
        s("prepare-node", &new[1]),
        s("join-node", &new[1]),
        s("cordon", &old[1]),
        s("drain", &old[1]),
        s("delete-node", &old[1]),
        s("reset-node", &old[1]),
        s("destroy-machine", &old[1]),
    ];
    assert_eq!(shape(&cluster.predicted), expected);

    // The replacement joined but is not Ready yet: nothing is cordoned, the plan says why.
    let mut joining = observed.clone();
    let mut step_world = joining.clone();
    for step in &cluster.predicted[..3] {
        expected_effect(&mut step_world, step, now());
    }
    joining = step_world;
    let node = cluster_mut(&mut joining, "prod")
        .nodes
        .get_mut(&new[0])
        .expect("joined");
    node.ready = false;
    let plan = plan_at(&desired, &joining, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.steps), vec![]);
    assert_eq!(
        cluster.waiting_on,
        vec![
            Waiting {
                step: Some(ActionKind::Cordon),
                machine: Some(old[0].clone()),
                resource: Resource::Node {
                    name: new[0].clone(),
                    condition: "Ready (the replacement comes first)".to_owned()
                },
                since: None,
            },
            Waiting {
                step: Some(ActionKind::JoinNode),
                machine: Some(new[0].clone()),
                resource: Resource::Node {
                    name: new[0].clone(),
                    condition: "Ready".to_owned()
                },
                since: Some(now()),
            }
        ]
    );
}

#[test]
fn a_surge_of_two_clones_two_replacements_at_once() {
    let before = Cluster::test("prod").with_workers("general", 3);
    let observed = built(&desired(vec![before.clone()]));
    let after = before
        .clone()
        .with_template("general", "debian13-k8s-v2")
        .with_max_surge(2);
    let plan = plan_at(&desired(vec![after.clone()]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let new: Vec<NodeName> = (0..3).map(|i| after.name_of("general", i)).collect();
    assert_eq!(
        shape(&cluster.steps),
        vec![s("create-machine", &new[0]), s("create-machine", &new[1])]
    );
    assert!(
        cluster.steps[0]
            .reason
            .contains("at most 2 VM(s) above the declared count (rollout.maxSurge)"),
        "{}",
        cluster.steps[0].reason
    );
    let cordons = cluster
        .predicted
        .iter()
        .filter(|s| s.name() == "cordon")
        .count();
    assert_eq!(cordons, 3, "every old worker leaves, one at a time");
}
