//! Rule 16, the replacement guard: `replace: forbid` keeps live machines built from another
//! spec; dead and fenced ones are still replaced, and a pool may allow what the cluster
//! forbids.

use super::*;
use crate::spec::ReplacePolicy::{Allow, Forbid};

/// prod with 3 workers built, then planned with a new template for them under `replace`.
fn template_change(on: Option<&str>, replace: crate::spec::ReplacePolicy) -> (Cluster, Observed) {
    let before = Cluster::test("prod");
    let observed = built(&desired(vec![before.clone()]));
    let after = before
        .with_template("general", "debian13-k8s-v2")
        .with_replace(on, replace);
    (after, observed)
}

fn guard_refusals(cluster: &ClusterPlan) -> Vec<&str> {
    cluster
        .blocked
        .iter()
        .filter(|b| b.rule == Rule::ReplaceGuard)
        .map(|b| b.message.as_str())
        .collect()
}

#[test]
fn rule_16_a_template_change_of_a_forbidding_pool_is_refused_naming_the_field() {
    let (after, observed) = template_change(Some("general"), Forbid);
    let plan = plan_at(&desired(vec![after]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.phase, Phase::Blocked);
    assert_eq!(cluster.steps, vec![], "nothing is cloned");
    assert_eq!(shape(&cluster.predicted), vec![], "nor cordoned, ever");
    assert_eq!(
        guard_refusals(cluster),
        vec![
            "workers.general.replace: forbid refuses replacing 3 live machine(s) of workers.general, caused by workers.general.machine.template debian13-k8s → debian13-k8s-v2; none is cloned, cordoned or drained for it (dead and fenced machines are still replaced). Put those fields back, or set workers.general.replace: allow to let the machines be replaced"
        ]
    );
    assert_eq!(Rule::ReplaceGuard.number(), 16);
}

#[test]
fn rule_16_a_pool_may_allow_what_the_cluster_forbids_and_the_cluster_setting_is_named() {
    let (after, observed) = template_change(None, Forbid);
    let plan = plan_at(&desired(vec![after.clone()]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let refusals = guard_refusals(cluster);
    assert_eq!(refusals.len(), 1);
    assert!(
        refusals[0].starts_with("rollout.replace: forbid refuses replacing 3"),
        "{}",
        refusals[0]
    );
    let allowed = after.with_replace(Some("general"), Allow);
    let plan = plan_at(&desired(vec![allowed.clone()]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.blocked, vec![]);
    assert_eq!(
        shape(&cluster.steps),
        vec![s("create-machine", &allowed.name_of("general", 0))]
    );
}

#[test]
fn rule_16_a_dead_machine_of_a_forbidding_pool_is_still_fenced_and_replaced_alone() {
    let (after, mut observed) = template_change(Some("general"), Forbid);
    let after = after.with_fencing();
    let workers = machines_of(&observed, "prod", "general");
    let dead = workers[1].clone();
    let cluster = cluster_mut(&mut observed, "prod");
    let node = cluster.nodes.get_mut(&dead).expect("node");
    node.ready = false;
    node.ready_since = minutes(-6);
    let vm = cluster.machines.get_mut(&dead).expect("vm");
    vm.guest_agent = false;
    let plan = plan_at(&desired(vec![after.clone()]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let new = after.name_of("general", 0);
    // Dead and outdated: its replacement does not wait for the fencing.
    assert_eq!(
        shape(&cluster.steps),
        vec![s("fence-machine", &dead), s("create-machine", &new)]
    );
    let creates = cluster
        .predicted
        .iter()
        .filter(|s| s.name() == "create-machine")
        .count();
    assert_eq!(creates, 1, "only the dead machine is replaced");
    assert!(
        shape(&cluster.predicted).contains(&s("destroy-machine", &dead)),
        "{:?}",
        shape(&cluster.predicted)
    );
    let live: Vec<&NodeName> = workers.iter().filter(|w| **w != dead).collect();
    assert!(
        cluster.predicted.iter().all(|s| s
            .target
            .machine
            .as_ref()
            .is_none_or(|m| !live.contains(&m))),
        "the live ones are never cordoned: {:?}",
        shape(&cluster.predicted)
    );
    let refusals = guard_refusals(cluster);
    assert_eq!(refusals.len(), 1);
    assert!(
        refusals[0].contains("replacing 2 live machine(s)"),
        "{}",
        refusals[0]
    );
}

#[test]
fn rule_16_a_version_change_is_refused_while_a_forbidding_pool_has_live_machines() {
    let before = Cluster::test("prod");
    let observed = built(&desired(vec![before.clone()]));
    let after = before
        .with_version("1.36.4")
        .with_replace(Some("cp"), Forbid);
    let plan = plan_at(&desired(vec![after]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.phase, Phase::Blocked);
    assert_eq!(cluster.steps, vec![], "no upgrade-control-plane");
    assert_eq!(shape(&cluster.predicted), vec![]);
    assert_eq!(
        guard_refusals(cluster),
        vec![
            "controlPlane.replace: forbid refuses kubernetes.version 1.36.2 → 1.36.4: it would replace the live machines of controlPlane; the cluster stays at 1.36.2 and nothing of the upgrade starts. Put kubernetes.version back to 1.36.2, or set controlPlane.replace: allow to let the machines be replaced"
        ]
    );
}

#[test]
fn rule_16_a_drifted_machine_is_not_replaced_under_forbid() {
    let prod = Cluster::test("prod")
        .with_drift_replace()
        .with_replace(Some("general"), Forbid);
    let mut observed = built(&desired(vec![prod.clone()]));
    let worker = machines_of(&observed, "prod", "general")[0].clone();
    cluster_mut(&mut observed, "prod")
        .machines
        .get_mut(&worker)
        .expect("vm")
        .config = Some(VmConfig {
        cores: 8,
        memory_mib: 8192,
        disk_gib: 50,
        hardware: None,
    });
    let plan = plan_at(&desired(vec![prod]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.steps, vec![]);
    assert_eq!(shape(&cluster.predicted), vec![]);
    let refusals = guard_refusals(cluster);
    assert_eq!(refusals.len(), 1);
    assert!(
        refusals[0].contains("caused by its Proxmox config was changed outside capstan (cores 4 → 8) and rollout.onDrift is replace"),
        "{}",
        refusals[0]
    );
}

#[test]
fn rule_16_mid_rollout_the_guard_keeps_the_old_machines_and_no_surplus_takes_one() {
    let before = Cluster::test("prod");
    let observed = built(&desired(vec![before.clone()]));
    let after = before.with_template("general", "debian13-k8s-v2");
    // The first replacement is Ready when the guard is turned on.
    let mut world = observed.clone();
    let allowed = desired(vec![after.clone()]);
    for _ in 0..3 {
        let plan = plan_at(&allowed, &world, now());
        for step in &plan.cluster("prod").expect("planned").steps {
            expected_effect(&mut world, step, now());
        }
    }
    let new = after.name_of("general", 0);
    assert!(
        cluster_mut(&mut world, "prod").nodes.contains_key(&new),
        "the replacement joined"
    );
    let guarded = desired(vec![after.with_replace(Some("general"), Forbid)]);
    let plan = plan_at(&guarded, &world, now());
    let cluster = plan.cluster("prod").expect("planned");
    let old = machines_of(&observed, "prod", "general");
    for step in cluster.steps.iter().chain(&cluster.predicted) {
        let machine = step.target.machine.as_ref();
        assert!(
            !(machine.is_some_and(|m| old.contains(m)) && step.name() != "join-node"),
            "an old machine is touched: {:?}",
            shape(&cluster.predicted)
        );
    }
    assert_eq!(guard_refusals(cluster).len(), 1);
}
