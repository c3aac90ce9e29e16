//! Rule 5, a drain has a deadline.

use super::*;

fn draining_world() -> (crate::spec::Desired, Observed, NodeName) {
    let before = Cluster::test("prod").with_workers("general", 3);
    let mut observed = built(&desired(vec![before.clone()]));
    let old = machines_of(&observed, "prod", "general");
    let node = cluster_mut(&mut observed, "prod")
        .nodes
        .get_mut(&old[0])
        .expect("node");
    node.unschedulable = true;
    node.drain = Some(DrainObserved {
        started: minutes(-11),
        remaining_pods: vec![PodRef {
            namespace: "traefik".into(),
            name: "traefik-7d4f".into(),
            reason: Some("PodDisruptionBudget traefik allows 0 disruptions".into()),
        }],
    });
    (
        desired(vec![before.with_workers("general", 2)]),
        observed,
        old[0].clone(),
    )
}

#[test]
fn rule_5_a_drain_past_its_deadline_blocks_on_the_pods_and_keeps_the_vm() {
    let (desired, observed, node) = draining_world();
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.phase, Phase::Blocked);
    assert_eq!(cluster.steps, vec![]);
    let vm_id = observed.clusters["prod"].machines[&node].vm_id;
    assert_eq!(
        cluster.blocked,
        vec![Blocked {
            rule: Rule::DrainTimeout,
            message: format!(
                "drain of {node} timed out after rollout.drainTimeout 10m (started 2026-04-29T11:49:00Z): traefik/traefik-7d4f (PodDisruptionBudget traefik allows 0 disruptions) refused eviction. The node stays cordoned and VM {vm_id} is kept; fix what blocks the eviction and the drain resumes (or remove the annotation capstan.dev/drain-started from the node to give it a fresh deadline)"
            ),
        }]
    );
}

#[test]
fn rule_5_a_drain_past_its_deadline_resumes_once_nothing_refuses_eviction() {
    let (desired, mut observed, node) = draining_world();
    // The budget was deleted: the pod is still there, but its eviction is no longer refused.
    let drain = cluster_mut(&mut observed, "prod")
        .nodes
        .get_mut(&node)
        .and_then(|n| n.drain.as_mut())
        .expect("draining");
    drain.remaining_pods[0].reason = None;
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.phase, Phase::Updating);
    assert_eq!(cluster.blocked, vec![]);
    assert_eq!(shape(&cluster.steps), vec![s("drain", &node)]);
    assert_eq!(
        cluster.steps[0].action,
        Action::Drain {
            node: node.clone(),
            deadline: minutes(10),
        },
        "a fresh deadline: rollout.drainTimeout from now"
    );
    assert_eq!(
        cluster.steps[0].reason,
        "surplus: pool general wants 2: the drain passed rollout.drainTimeout 10m, but nothing refuses eviction any more (1 pod(s) left: traefik/traefik-7d4f): drain again"
    );
}

#[test]
fn rule_5_a_drain_within_its_deadline_continues_and_waits_on_the_pod() {
    let (desired, observed, node) = draining_world();
    let plan = plan_at(&desired, &observed, minutes(-5));
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.steps), vec![s("drain", &node)]);
    assert_eq!(
        cluster.steps[0].action,
        Action::Drain {
            node: node.clone(),
            deadline: minutes(-1),
        }
    );
    let pod = Resource::Pod {
        pod: PodRef {
            namespace: "traefik".into(),
            name: "traefik-7d4f".into(),
            reason: Some("PodDisruptionBudget traefik allows 0 disruptions".into()),
        },
        node: node.clone(),
    };
    assert_eq!(
        cluster.steps[0].waits_on,
        Some(Wait {
            resource: pod.clone(),
            since: Some(minutes(-11)),
        })
    );
    assert_eq!(cluster.waiting_on[0].resource, pod);
}
