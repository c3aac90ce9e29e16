//! Table tests: one group per lifecycle rule, each on a built world changed one way, asserting
//! whole ordered plans and the exact refusal messages.

mod authentication;
mod guard;
mod labels;
mod later_rules;
mod network;
mod predictions;
mod remediation;
mod stages;
mod suspension;
mod talos;
mod window_fit;

use super::fixtures::*;
use super::*;
use crate::model::{NodeName, Role, VmId};
use crate::observed::{
    DrainObserved, FluxSecret, FluxTarget, Observed, ObservedMachine, PodRef, PowerState, VmConfig,
};
use crate::spec::Cluster;

fn s(action: &'static str, machine: &NodeName) -> (&'static str, String) {
    (action, machine.to_string())
}

fn c(action: &'static str) -> (&'static str, String) {
    (action, String::new())
}

/// The removal of one member: the five steps, in order.
fn removal(machine: &NodeName) -> Vec<(&'static str, String)> {
    [
        "cordon",
        "drain",
        "delete-node",
        "reset-node",
        "destroy-machine",
    ]
    .into_iter()
    .map(|a| s(a, machine))
    .collect()
}

#[test]
fn bootstrap_creates_the_control_plane_initialises_joins_then_workers_then_delivers() {
    let prod = Cluster::test("prod");
    let desired = desired(vec![prod.clone()]);
    let plan = plan_at(&desired, &Observed::nothing(), now());
    let cluster = plan.cluster("prod").expect("planned");
    let cp = prod.name_of("cp", 0);
    let workers: Vec<NodeName> = (0..3).map(|i| prod.name_of("general", i)).collect();
    assert_eq!(cluster.phase, Phase::Pending);
    // Every machine is cloned at once, and prepared as soon as it answers; workers join once
    // kubeadm init succeeded.
    let mut creates = vec![s("create-machine", &cp)];
    creates.extend(workers.iter().map(|w| s("create-machine", w)));
    assert_eq!(shape(&cluster.steps), creates);
    let mut expected = creates.clone();
    let mut sorted = workers.clone();
    sorted.sort();
    expected.push(s("prepare-node", &cp));
    expected.extend(sorted.iter().map(|w| s("prepare-node", w)));
    expected.push(s("init-control-plane", &cp));
    expected.extend(sorted.iter().map(|w| s("join-node", w)));
    expected.push(c("deliver-kubeconfig"));
    assert_eq!(shape(&cluster.predicted), expected);
    assert!(cluster.blocked.is_empty() && cluster.waiting_on.is_empty());
    let Action::CreateMachine {
        ownership,
        machine,
        proxmox_node,
        ..
    } = &cluster.steps[0].action
    else {
        panic!("create-machine first");
    };
    assert_eq!(ownership.spec_hash, prod.hash("cp"));
    assert_eq!(ownership.role, Role::ControlPlane);
    assert_eq!(**machine, prod.machine_spec("cp"));
    assert_eq!(proxmox_node, "pve1");
    assert_eq!(cluster.steps[0].target.vm_id, None);
    assert!(!cluster.steps[0].disruptive);
}

#[test]
fn a_built_world_plans_nothing() {
    let desired = desired(vec![
        Cluster::test("prod"),
        Cluster::test("platform").with_control_planes(3),
    ]);
    let observed = built(&desired);
    let plan = plan_at(&desired, &observed, now());
    for cluster in &plan.clusters {
        assert_eq!(cluster.phase, Phase::Ready, "{}", cluster.name);
        assert_eq!(cluster.steps, vec![]);
        assert_eq!(cluster.predicted, vec![]);
    }
    assert_eq!(plan.findings, vec![]);
}

#[test]
fn three_control_planes_join_one_at_a_time_after_init() {
    let platform = Cluster::test("platform").with_control_planes(3);
    let plan = plan_at(
        &desired(vec![platform.clone()]),
        &Observed::nothing(),
        now(),
    );
    let all = shape(&plan.clusters[0].predicted);
    let mut cps: Vec<NodeName> = (0..3).map(|i| platform.name_of("cp", i)).collect();
    let is_cp = |step: &&(&str, String)| cps.iter().any(|n| n.as_str() == step.1);
    let predicted: Vec<_> = all.iter().filter(is_cp).cloned().collect();
    assert_eq!(
        predicted[..3],
        cps.iter()
            .map(|n| s("create-machine", n))
            .collect::<Vec<_>>()[..]
    );
    cps.sort();
    assert_eq!(
        predicted[3..],
        [
            s("prepare-node", &cps[0]),
            s("prepare-node", &cps[1]),
            s("prepare-node", &cps[2]),
            s("init-control-plane", &cps[0]),
            s("join-node", &cps[1]),
            s("join-node", &cps[2]),
        ]
    );
    // The workers are cloned with the control planes.
    let creates = all.iter().take_while(|s| s.0 == "create-machine").count();
    assert_eq!(
        creates,
        all.iter().filter(|s| s.0 == "create-machine").count()
    );
}

// Rule 1: create before remove.
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

// Rule 2: one disruptive step at a time per cluster; clusters are independent.
#[test]
fn rule_2_a_batch_holds_one_disruptive_step_and_clusters_do_not_wait_for_each_other() {
    let prod = Cluster::test("prod").with_workers("general", 3);
    let staging = Cluster::test("staging");
    let before = desired(vec![prod.clone(), staging.clone()]);
    let observed = built(&before);
    // Every general worker is surplus: three removals are possible, one is planned.
    let after = desired(vec![
        prod.clone().with_workers("general", 1).with_min_workers(1),
        staging.clone().with_version("1.36.3"),
    ]);
    let plan = plan_at(&after, &observed, now());
    let prod_plan = plan.cluster("prod").expect("planned");
    assert_eq!(prod_plan.steps.len(), 1);
    assert!(prod_plan.steps[0].disruptive);
    assert_eq!(prod_plan.steps[0].name(), "cordon");
    let staging_plan = plan.cluster("staging").expect("planned");
    assert_eq!(shape(&staging_plan.steps), vec![c("upgrade-control-plane")]);
    // Each cluster's plan is the plan it gets alone.
    let alone = plan_at(
        &desired(vec![staging.with_version("1.36.3")]),
        &observed,
        now(),
    );
    assert_eq!(alone.cluster("staging"), Some(staging_plan));
}

// Rule 3: never fewer than rollout.minWorkers Ready, schedulable workers.
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

// Rule 4: several removals in one change go one at a time.
#[test]
fn rule_4_several_removals_go_one_at_a_time() {
    let before = Cluster::test("prod").with_workers("general", 4);
    let observed = built(&desired(vec![before.clone()]));
    let plan = plan_at(
        &desired(vec![before.with_workers("general", 2)]),
        &observed,
        now(),
    );
    let cluster = plan.cluster("prod").expect("planned");
    let old = machines_of(&observed, "prod", "general");
    assert_eq!(shape(&cluster.steps), vec![s("cordon", &old[0])]);
    assert_eq!(cluster.steps[0].reason, "surplus: pool general wants 2");
    let mut expected = removal(&old[0]);
    expected.extend(removal(&old[1]));
    assert_eq!(shape(&cluster.predicted), expected);
}

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

// Rule 5: a drain has a deadline.
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

// Rule 6: machines that never joined, and orphans.
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

#[test]
fn a_creation_interrupted_before_the_start_is_finished_not_waited_out() {
    let prod = Cluster::test("prod");
    let desired = desired(vec![prod.clone()]);
    let mut observed = Observed::nothing();
    let first = plan_at(&desired, &observed, now());
    expected_effect(&mut observed, &first.clusters[0].steps[0], now());
    let cp = prod.name_of("cp", 0);
    // The crash came between the clone and the start: the VM exists, stopped, never joined.
    let machine = cluster_mut(&mut observed, "prod")
        .machines
        .get_mut(&cp)
        .expect("cloned");
    machine.power = crate::observed::PowerState::Stopped;
    machine.guest_agent = false;
    machine.vm_id = VmId(104);

    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let steps: Vec<&Step> = cluster
        .steps
        .iter()
        .filter(|s| s.target.machine.as_ref() == Some(&cp))
        .collect();
    assert_eq!(steps.len(), 1, "{:?}", shape(&cluster.steps));
    assert_eq!(
        steps[0].reason,
        "finish creating VM 104: it exists but was never started (an interrupted creation)"
    );
    let Action::CreateMachine {
        name, proxmox_node, ..
    } = &steps[0].action
    else {
        panic!("create-machine");
    };
    assert_eq!(
        (name, proxmox_node.as_str()),
        (&cp, "pve1"),
        "the same VM, where it is"
    );
    // Its id is known: the steps the prediction finds for it after the start keep it.
    let later: Vec<_> = cluster
        .predicted
        .iter()
        .filter(|s| s.target.machine.as_ref() == Some(&cp))
        .map(|s| (s.name(), s.target.vm_id))
        .collect();
    assert!(later.len() > 1, "{later:?}");
    assert!(
        later.iter().all(|(_, vm_id)| *vm_id == Some(VmId(104))),
        "{later:?}"
    );
}

#[test]
fn an_init_interrupted_after_kubeadm_is_run_again_before_anything_joins() {
    let prod = Cluster::test("prod");
    let desired = desired(vec![prod.clone()]);
    let mut observed = Observed::nothing();
    // Clone, prepare, init.
    for _ in 0..3 {
        let plan = plan_at(&desired, &observed, now());
        for step in &plan.clusters[0].steps {
            expected_effect(&mut observed, step, now());
        }
    }
    let cp = prod.name_of("cp", 0);
    // kubeadm init ran (the API answers) but the crash came before the CNI: the node is
    // NotReady and no bootstrap marker was written.
    let cluster = cluster_mut(&mut observed, "prod");
    cluster
        .control_plane
        .as_mut()
        .expect("initialised")
        .bootstrap_incomplete = true;
    cluster.nodes.get_mut(&cp).expect("registered").ready = false;

    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.steps), vec![s("init-control-plane", &cp)]);
    assert_eq!(cluster.phase, Phase::Provisioning);
}

#[test]
fn a_vm_prepared_before_a_restart_is_not_prepared_again() {
    let prod = Cluster::test("prod");
    let desired = desired(vec![prod.clone()]);
    let mut observed = Observed::nothing();
    // Clone every machine, then prepare them: the tag records it on each VM.
    for _ in 0..2 {
        let plan = plan_at(&desired, &observed, now());
        for step in &plan.clusters[0].steps {
            expected_effect(&mut observed, step, now());
        }
    }
    let cp = prod.name_of("cp", 0);
    let vms = &observed.clusters["prod"].machines;
    assert!(vms.values().all(|vm| vm.is_prepared()), "{vms:#?}");
    // A restarted daemon plans from the world alone: init, no second prepare.
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.steps), vec![s("init-control-plane", &cp)]);
    assert!(
        cluster.predicted.iter().all(|s| s.name() != "prepare-node"),
        "{:?}",
        shape(&cluster.predicted)
    );
}

#[test]
fn workers_join_through_a_running_control_plane_ready_or_not() {
    let prod = Cluster::test("prod").with_workers("general", 2);
    let desired = desired(vec![prod.clone()]);
    let mut observed = built(&desired);
    let workers = machines_of(&observed, "prod", "general");
    let control_plane = prod.name_of("cp", 0);
    for worker in &workers {
        // Fresh (created just now, prepared) VMs that have not joined yet.
        let cluster = cluster_mut(&mut observed, "prod");
        cluster.nodes.remove(worker);
        if let Some(machine) = cluster.machines.get_mut(worker) {
            machine.created = now();
        }
    }
    // The control case: with its control plane Ready, the fresh workers join.
    let joins = |plan: &Plan| {
        plan.clusters[0]
            .steps
            .iter()
            .filter(|s| s.action.kind() == ActionKind::JoinNode)
            .count()
    };
    let control = plan_at(&desired, &observed, now());
    assert_eq!(
        joins(&control),
        2,
        "{:#?}",
        shape(&control.clusters[0].steps)
    );

    // Right after `kubeadm init` its Node is registered, not Ready yet: the API answers and
    // the workers join through it at once.
    let cluster = cluster_mut(&mut observed, "prod");
    if let Some(node) = cluster.nodes.get_mut(&control_plane) {
        node.ready = false;
    }
    let plan = plan_at(&desired, &observed, now());
    assert_eq!(joins(&plan), 2, "{:#?}", shape(&plan.clusters[0].steps));

    // With its only control plane stopped there is nothing to join through: they wait.
    let cluster = cluster_mut(&mut observed, "prod");
    if let Some(machine) = cluster.machines.get_mut(&control_plane) {
        machine.power = crate::observed::PowerState::Stopped;
    }
    let plan = plan_at(&desired, &observed, now());
    assert_eq!(joins(&plan), 0, "{:#?}", shape(&plan.clusters[0].steps));
    let waits = format!("{:?}", plan.clusters[0].waiting_on);
    assert!(
        waits.contains(control_plane.as_str())
            && waits.contains("join through a running control plane"),
        "{waits}"
    );
}

#[test]
fn predictions_made_on_several_threads_are_the_ones_made_on_one() {
    // Clusters of different sizes (so threads finish out of order), mid template change.
    let clusters: Vec<Cluster> = (0..7)
        .map(|i| Cluster::test(&format!("c{i}")).with_workers("general", 1 + i % 4))
        .collect();
    let observed = built(&desired(clusters.clone()));
    let changed = desired(
        clusters
            .into_iter()
            .map(|c| c.with_template("general", "debian13-k8s-v2"))
            .collect(),
    );
    let policy = Policy::of(&changed);
    let unlimited = super::Budget::unlimited();
    let one = super::plan_on(&changed, &observed, &policy, now(), 1, &unlimited).expect("plan");
    assert!(one.clusters.iter().all(|c| !c.predicted.is_empty()));
    for threads in [2, 3, 16] {
        let several = super::plan_on(&changed, &observed, &policy, now(), threads, &unlimited);
        assert_eq!(several, Ok(one.clone()), "{threads} threads");
    }
}
