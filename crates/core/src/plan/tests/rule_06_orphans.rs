//! Rule 6, machines that never joined, and orphans.

use super::*;

#[test]
fn rule_6_a_machine_that_never_joined_within_the_timeout_is_destroyed_and_created_again() {
    let prod = Cluster::test("prod");
    let desired = desired(vec![prod.clone()]);
    let mut observed = built(&desired);
    let worker = machines_of(&observed, "prod", "general")[0].clone();
    let cluster = cluster_mut(&mut observed, "prod");
    cluster.nodes.remove(&worker);
    cluster.machines.get_mut(&worker).expect("vm").created = minutes(-16);
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let taken: std::collections::BTreeSet<NodeName> =
        observed.clusters["prod"].machines.keys().cloned().collect();
    let replacement = (0..)
        .map(|i| prod.name_of("general", i))
        .find(|n| !taken.contains(n))
        .expect("a free name");
    assert_eq!(
        shape(&cluster.steps),
        vec![
            s("destroy-machine", &worker),
            s("create-machine", &replacement)
        ]
    );
    assert_eq!(
        cluster.steps[0].reason,
        "created 2026-04-29T11:44:00Z, never joined within rollout.joinTimeout 15m: destroyed to be created again"
    );
}

#[test]
fn rule_6_orphans_are_reported_and_destroyed_only_with_prune() {
    let prod = Cluster::test("prod");
    let mut desired = desired(vec![prod.clone()]);
    let mut observed = built(&desired);
    let orphan = NodeName::from("capstan-prod-old-abcde");
    let mut vm = observed.clusters["prod"]
        .machines
        .values()
        .next()
        .expect("vm")
        .clone();
    vm.vm_id = VmId(999);
    vm.ownership.pool = "old".into();
    vm.ownership.role = Role::Worker;
    cluster_mut(&mut observed, "prod")
        .machines
        .insert(orphan.clone(), vm);
    let plan = plan_at(&desired, &observed, now());
    assert_eq!(plan.cluster("prod").expect("planned").steps, vec![]);
    assert_eq!(
        plan.findings,
        vec![Finding {
            kind: FindingKind::Orphan,
            cluster: "prod".into(),
            machine: Some(orphan.clone()),
            vm_id: Some(VmId(999)),
            message: format!(
                "orphan: VM 999 {orphan} (pool old, spec {}) matches no desired machine of prod; kept because prune is off",
                prod.hash("cp")
            ),
        }]
    );
    desired.fleet.prune = true;
    let plan = plan_at(&desired, &observed, now());
    assert_eq!(
        shape(&plan.cluster("prod").expect("planned").steps),
        vec![s("destroy-machine", &orphan)]
    );
    assert_eq!(plan.findings, vec![]);
}
