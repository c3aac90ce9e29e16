//! Rule 3, never fewer than `rollout.minWorkers` Ready, schedulable workers.

use super::*;

#[test]
fn rule_3_a_spec_below_min_workers_is_refused() {
    let prod = Cluster::test("prod");
    let observed = built(&desired(vec![prod.clone()]));
    let desired = desired(vec![prod.with_workers("general", 1)]);
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.phase, Phase::Blocked);
    assert_eq!(
        cluster.blocked,
        vec![Blocked {
            rule: Rule::MinWorkers,
            message: "the spec asks for 1 worker(s), below rollout.minWorkers 2: add a worker first; no worker is removed until then".to_owned()
        }]
    );
    assert_eq!(cluster.steps, vec![]);
}

#[test]
fn rule_3_moving_workers_to_a_new_pool_waits_for_the_new_workers() {
    let before = Cluster::test("prod").with_workers("general", 2);
    let observed = built(&desired(vec![before.clone()]));
    let after = before.without_pool("general").with_workers("big", 2);
    let plan = plan_at(&desired(vec![after.clone()]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let big: Vec<NodeName> = (0..2).map(|i| after.name_of("big", i)).collect();
    // rollout.maxSurge 1: one VM above the declared count at a time.
    assert_eq!(shape(&cluster.steps), vec![s("create-machine", &big[0])]);
    assert_eq!(
        cluster.waiting_on[0].resource,
        Resource::NewWorker {
            ready: 2,
            minimum: 2
        }
    );
    let old = machines_of(&observed, "prod", "general");
    let built = |name| {
        [
            s("create-machine", name),
            s("prepare-node", name),
            s("join-node", name),
        ]
    };
    let mut expected = built(&big[0]).to_vec();
    expected.extend(removal(&old[0]));
    expected.extend(built(&big[1]));
    expected.extend(removal(&old[1]));
    assert_eq!(shape(&cluster.predicted), expected);
}

// rollout.maxSurge: a larger surge overlaps the replacements; removals stay one at a time.

#[test]
fn rule_3_a_removal_that_would_leave_too_few_workers_with_none_coming_is_refused() {
    let before = Cluster::test("prod")
        .with_workers("general", 1)
        .with_workers("gpu", 1)
        .with_min_workers(2);
    let mut observed = built(&desired(vec![before.clone()]));
    // Someone cordoned the general worker: 1 schedulable worker is left.
    let general = machines_of(&observed, "prod", "general");
    cluster_mut(&mut observed, "prod")
        .nodes
        .get_mut(&general[0])
        .expect("node")
        .unschedulable = true;
    let after = before.with_workers("general", 2).without_pool("gpu");
    let plan = plan_at(&desired(vec![after.clone()]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    // A new general worker is coming, so the gpu worker waits rather than refusing.
    assert_eq!(
        shape(&cluster.steps),
        vec![s("create-machine", &after.name_of("general", 1))]
    );
    let gpu = machines_of(&observed, "prod", "gpu");
    assert_eq!(
        cluster.waiting_on[0],
        Waiting {
            step: Some(ActionKind::Cordon),
            machine: Some(gpu[0].clone()),
            resource: Resource::NewWorker {
                ready: 1,
                minimum: 2
            },
            since: None,
        }
    );
    // Without the new worker (general stays at 1), the removal is refused.
    let after = Cluster::test("prod")
        .with_workers("general", 1)
        .with_workers("other", 1)
        .with_min_workers(2);
    let plan = plan_at(&desired(vec![after]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert!(
        cluster.blocked.contains(&Blocked {
            rule: Rule::MinWorkers,
            message: format!(
                "removing {} would leave 0 Ready, schedulable worker(s), below rollout.minWorkers 2: add a worker first",
                gpu[0]
            ),
        }) || !cluster.steps.iter().any(|s| s.name() == "cordon"),
        "{cluster:#?}"
    );
}
