//! Rule 13, fencing: a dead node is fenced, then replaced. With `remediation.maxUnhealthy`: past it nothing is fenced or replaced, and the plan names
//! the unhealthy nodes; under it, fencing goes on as before.

use super::*;

#[test]
fn rule_13_a_dead_node_is_fenced_then_replaced() {
    let prod = Cluster::test("prod").with_fencing();
    let desired = desired(vec![prod.clone()]);
    let mut observed = built(&desired);
    let dead = machines_of(&observed, "prod", "general")[1].clone();
    let cluster = cluster_mut(&mut observed, "prod");
    let node = cluster.nodes.get_mut(&dead).expect("node");
    node.ready = false;
    node.ready_since = minutes(-6);
    cluster.machines.get_mut(&dead).expect("vm").guest_agent = false;
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.steps), vec![s("fence-machine", &dead)]);
    assert_eq!(
        cluster.steps[0].reason,
        "node NotReady since 2026-04-29T11:54:00Z (over remediation.after 5m), VM running but its guest agent silent: hard-stop it and taint it out-of-service so its volumes detach, then replace it"
    );
    let taken: std::collections::BTreeSet<NodeName> =
        observed.clusters["prod"].machines.keys().cloned().collect();
    let new = (0..)
        .map(|i| prod.name_of("general", i))
        .find(|n| !taken.contains(n))
        .expect("free");
    assert_eq!(
        shape(&cluster.predicted),
        vec![
            s("fence-machine", &dead),
            s("create-machine", &new),
            s("prepare-node", &new),
            s("join-node", &new),
            s("delete-node", &dead),
            s("destroy-machine", &dead),
        ]
    );
    // Before `after`, it only waits.
    let plan = plan_at(&desired, &observed, minutes(-2));
    assert_eq!(plan.clusters[0].steps, vec![]);
    assert_eq!(
        plan.clusters[0].waiting_on[0].step,
        Some(ActionKind::FenceMachine)
    );
}

/// prod with 5 workers and fencing on, `dead` of its workers NotReady for 6 minutes with
/// their guest agents silent.
fn with_dead_workers(dead: usize) -> (Desired, Observed, Vec<NodeName>) {
    let prod = Cluster::test("prod")
        .with_workers("general", 5)
        .with_fencing();
    let desired = desired(vec![prod]);
    let mut observed = built(&desired);
    let names: Vec<NodeName> = machines_of(&observed, "prod", "general")[..dead].to_vec();
    let cluster = cluster_mut(&mut observed, "prod");
    for name in &names {
        let node = cluster.nodes.get_mut(name).expect("node");
        node.ready = false;
        node.ready_since = minutes(-6);
        cluster.machines.get_mut(name).expect("vm").guest_agent = false;
    }
    (desired, observed, names)
}

#[test]
fn three_of_five_workers_dead_at_once_are_not_fenced_and_the_plan_names_them() {
    let (desired, observed, dead) = with_dead_workers(3);
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.steps, vec![], "nothing is fenced");
    assert!(
        cluster
            .predicted
            .iter()
            .all(|s| s.name() != "fence-machine"),
        "nor predicted: {:?}",
        shape(&cluster.predicted)
    );
    // 6 nodes (a control plane and 5 workers): 40% of 6 is 2, rounded down.
    let held = cluster.remediation_held.clone().expect("held");
    assert_eq!(
        held,
        RemediationHeld {
            unhealthy: dead.clone(),
            nodes: 6,
            max_unhealthy: 2,
        }
    );
    assert_eq!(
        held.message(),
        format!(
            "3 of 6 nodes NotReady ({}, {}, {}), over remediation.maxUnhealthy (2): nothing is fenced or replaced until at most 2 are; so many at once looks like the network, not the nodes",
            dead[0], dead[1], dead[2]
        )
    );
}

#[test]
fn one_of_five_workers_dead_is_fenced_and_replaced_as_before() {
    let (desired, observed, dead) = with_dead_workers(1);
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.remediation_held, None);
    assert_eq!(shape(&cluster.steps), vec![s("fence-machine", &dead[0])]);
    let predicted: Vec<&str> = cluster.predicted.iter().map(Step::name).collect();
    assert_eq!(
        predicted,
        [
            "fence-machine",
            "create-machine",
            "prepare-node",
            "join-node",
            "delete-node",
            "destroy-machine"
        ]
    );
}

#[test]
fn a_count_limit_lets_more_nodes_be_fenced() {
    let (mut desired, observed, dead) = with_dead_workers(3);
    let prod = desired.clusters.get_mut("prod").expect("prod");
    prod.spec.remediation.max_unhealthy = crate::spec::remediation::MaxUnhealthy::Count(3);
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.remediation_held, None);
    let fenced: Vec<&NodeName> = cluster
        .steps
        .iter()
        .filter(|s| s.name() == "fence-machine")
        .filter_map(|s| s.target.machine.as_ref())
        .collect();
    assert_eq!(fenced, dead.iter().collect::<Vec<_>>());
}
