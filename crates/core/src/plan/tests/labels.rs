//! Labels and taints in place: a change is one `label-nodes` step on the running Nodes, never
//! a machine replaced; compact clusters (control planes schedulable, no workers).

use super::*;
use crate::scheduling::{MANAGED_LABELS_ANNOTATION, ManagedKeys};
use crate::spec::scheduling::{CONTROL_PLANE_TAINT, ZONE_LABEL};

fn with_label(mut cluster: Cluster, pool: &str, key: &str, value: &str) -> Cluster {
    let pool = cluster
        .spec
        .workers
        .iter_mut()
        .find(|p| p.pool == pool)
        .expect("pool");
    pool.labels.insert(key.to_owned(), value.to_owned());
    cluster
}

fn label_steps(plan: &ClusterPlan) -> Vec<&Step> {
    plan.predicted
        .iter()
        .filter(|s| s.kind() == ActionKind::LabelNodes)
        .collect()
}

#[test]
fn a_built_cluster_carries_its_labels_and_taints_and_has_nothing_to_do() {
    let prod = with_label(Cluster::test("prod"), "general", "workload-class", "memory");
    let desired = desired(vec![prod]);
    let observed = built(&desired);
    let cluster = &observed.clusters["prod"];
    for (name, node) in &cluster.nodes {
        let machine = &cluster.machines[name];
        assert_eq!(node.labels[ZONE_LABEL], machine.proxmox_node.as_str());
        let is_control_plane = machine.ownership.role == Role::ControlPlane;
        assert_eq!(
            node.taints.iter().any(|t| t.key == CONTROL_PLANE_TAINT),
            is_control_plane,
            "{name}"
        );
        assert!(node.managed.labels.contains("capstan.dev/pool"));
    }
    let plan = plan_at(&desired, &observed, now());
    assert!(
        plan.clusters[0].predicted.is_empty(),
        "{:?}",
        plan.clusters[0].predicted
    );
}

#[test]
fn a_changed_label_is_one_in_place_step_on_every_node_of_the_pool_and_replaces_nothing() {
    let before = with_label(Cluster::test("prod"), "general", "workload-class", "memory");
    let observed = built(&desired(vec![before.clone()]));
    let after = with_label(before.clone(), "general", "workload-class", "cpu");
    assert_eq!(
        after.hash("general"),
        before.hash("general"),
        "not in the hash"
    );
    let plan = plan_at(&desired(vec![after.clone()]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.steps), [c("label-nodes")]);
    assert_eq!(cluster.phase, Phase::Updating);
    assert_eq!(
        shape(&cluster.predicted),
        [c("label-nodes")],
        "no machine created or destroyed"
    );
    let Action::LabelNodes { nodes } = &cluster.steps[0].action else {
        panic!("label-nodes");
    };
    let changed: Vec<String> = nodes.iter().map(|n| n.node.to_string()).collect();
    let workers: Vec<String> = machines_of(&observed, "prod", "general")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(changed, workers);
    assert!(
        nodes
            .iter()
            .all(|n| n.set_labels["workload-class"] == "cpu")
    );
    assert_eq!(
        cluster.steps[0].reason,
        "in place, no machine replaced: labels change on 3 nodes"
    );
    assert!(!cluster.steps[0].disruptive);
}

#[test]
fn a_cluster_built_before_labels_existed_gets_them_in_place_once() {
    let prod = Cluster::test("prod");
    let desired = desired(vec![prod]);
    let mut observed = built(&desired);
    for node in cluster_mut(&mut observed, "prod").nodes.values_mut() {
        node.labels.clear();
        node.managed = ManagedKeys::default();
    }
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.predicted), [c("label-nodes")]);
    let Action::LabelNodes { nodes } = &cluster.steps[0].action else {
        panic!("label-nodes");
    };
    assert_eq!(nodes.len(), 4, "every node");
    assert!(
        nodes.iter().all(|n| n.managed.labels.contains(ZONE_LABEL)),
        "{MANAGED_LABELS_ANNOTATION} records them"
    );
}

#[test]
fn making_control_planes_schedulable_drops_their_taint_in_place() {
    let prod = Cluster::test("prod");
    let observed = built(&desired(vec![prod.clone()]));
    let mut compact = prod.clone();
    compact.spec.control_plane.schedulable = Some(true);
    let plan = plan_at(&desired(vec![compact]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.predicted), [c("label-nodes")]);
    let Action::LabelNodes { nodes } = &cluster.steps[0].action else {
        panic!("label-nodes");
    };
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].node, prod.name_of("cp", 0));
    assert_eq!(
        nodes[0].remove_taints,
        [format!("{CONTROL_PLANE_TAINT}:NoSchedule")]
    );
}

#[test]
fn a_compact_cluster_builds_three_schedulable_control_planes_and_no_worker() {
    let mut compact = Cluster::test("edge")
        .with_control_planes(3)
        .without_pool("general");
    compact.spec.control_plane.schedulable = Some(true);
    assert_eq!(compact.spec.min_workers(), 0);
    let desired = desired(vec![compact]);
    let observed = built(&desired);
    let cluster = &observed.clusters["edge"];
    assert_eq!(cluster.nodes.len(), 3);
    assert!(cluster.nodes.values().all(|n| n.taints.is_empty()));
    let plan = plan_at(&desired, &observed, now());
    assert!(plan.clusters[0].predicted.is_empty());
    assert!(
        plan.clusters[0].blocked.is_empty(),
        "{:?}",
        plan.clusters[0].blocked
    );
}

#[test]
fn a_node_being_drained_away_is_left_as_it_is() {
    let before = Cluster::test("prod");
    let mut observed = built(&desired(vec![before.clone()]));
    let leaving = machines_of(&observed, "prod", "general")[0].clone();
    let node = cluster_mut(&mut observed, "prod")
        .nodes
        .get_mut(&leaving)
        .expect("node");
    node.unschedulable = true;
    node.drain = Some(DrainObserved {
        started: minutes(-1),
        remaining_pods: Vec::new(),
    });
    let after = with_label(before, "general", "workload-class", "cpu");
    let plan = plan_at(&desired(vec![after]), &observed, now());
    let steps = label_steps(plan.cluster("prod").expect("planned"));
    let Action::LabelNodes { nodes } = &steps[0].action else {
        panic!("label-nodes");
    };
    assert!(nodes.iter().all(|n| n.node != leaving));
}
