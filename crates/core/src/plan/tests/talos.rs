use super::*;

/// A Talos release change replaces every machine, control planes first and one at a time, new
/// before old; each control plane's delete step says it leaves etcd through its own Talos API
/// and how many members stay for quorum.
#[test]
fn a_talos_release_change_replaces_control_planes_one_at_a_time_naming_the_etcd_leave() {
    let before = Cluster::test("edge")
        .with_control_planes(3)
        .with_talos("v1.13.8");
    let observed = built(&desired(vec![before.clone()]));
    let after = before.with_talos("v1.13.9");
    assert_ne!(
        after.hash("cp"),
        Cluster::test("edge").with_talos("v1.13.8").hash("cp")
    );
    let plan = plan_at(&desired(vec![after.clone()]), &observed, now());
    let cluster = plan.cluster("edge").expect("planned");
    let old = machines_of(&observed, "edge", "cp");
    let new: Vec<NodeName> = (0..3).map(|i| after.name_of("cp", i)).collect();
    assert_eq!(shape(&cluster.steps)[0], s("create-machine", &new[0]));
    let deletes: Vec<&Step> = cluster
        .predicted
        .iter()
        .filter(|step| step.name() == "delete-node")
        .filter(|step| old.iter().any(|o| step.target.machine.as_ref() == Some(o)))
        .collect();
    assert_eq!(deletes.len(), 3, "{:?}", shape(&cluster.predicted));
    for step in deletes {
        assert!(
            step.reason.contains(
                "it leaves etcd through its Talos API (forfeiting leadership first): 3 of 4 members stay, 3 healthy, 2 needed for quorum"
            ),
            "{}",
            step.reason
        );
    }
}
