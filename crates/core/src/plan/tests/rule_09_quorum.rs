//! Rule 9, control-plane replacement keeps quorum.

use super::*;

#[test]
fn rule_9_control_planes_are_replaced_one_at_a_time_new_before_old() {
    let before = Cluster::test("platform").with_control_planes(3);
    let observed = built(&desired(vec![before.clone()]));
    let after = before.with_template("cp", "debian13-k8s-v2");
    let plan = plan_at(&desired(vec![after.clone()]), &observed, now());
    let cluster = plan.cluster("platform").expect("planned");
    let old = machines_of(&observed, "platform", "cp");
    let new: Vec<NodeName> = (0..3).map(|i| after.name_of("cp", i)).collect();
    assert_eq!(shape(&cluster.steps), vec![s("create-machine", &new[0])]);
    // A new control plane joins only while none is absent; an old one leaves only once its
    // replacement is Ready. rollout.maxSurge 1: the next replacement is cloned once the old
    // VM is destroyed.
    let mut expected = Vec::new();
    for (old, new) in old.iter().zip(&new) {
        expected.extend([
            s("create-machine", new),
            s("prepare-node", new),
            s("join-node", new),
            s("cordon", old),
            s("drain", old),
            s("delete-node", old),
            s("reset-node", old),
            c("deliver-kubeconfig"),
            s("destroy-machine", old),
        ]);
    }
    assert_eq!(shape(&cluster.predicted), expected);

    // A control plane NotReady: no other control plane joins or leaves (the absent one
    // itself may: with rollout.maxSurge 1 no second replacement is cloned first, so its
    // cordon, which the earlier clone used to precede, comes now).
    let mut world = observed.clone();
    for step in &cluster.predicted[..1] {
        expected_effect(&mut world, step, now());
    }
    let node = cluster_mut(&mut world, "platform")
        .nodes
        .get_mut(&old[1])
        .expect("node");
    node.ready = false;
    node.ready_since = minutes(-30);
    let plan = plan_at(&desired(vec![after]), &world, now());
    let cluster = plan.cluster("platform").expect("planned");
    assert!(
        cluster.steps.iter().all(|s| {
            !matches!(s.name(), "join-node" | "cordon" | "drain" | "delete-node")
                || s.target.machine.as_ref() == Some(&old[1]) && s.name() != "join-node"
        }),
        "{:?}",
        shape(&cluster.steps)
    );
    assert!(cluster.waiting_on.contains(&Waiting {
        step: Some(ActionKind::JoinNode),
        machine: Some(new[0].clone()),
        resource: Resource::Node {
            name: old[1].clone(),
            condition: "Ready (one control plane absent at a time)".to_owned()
        },
        since: None,
    }));
}
