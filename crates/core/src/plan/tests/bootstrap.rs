//! Building a cluster from nothing, and resuming what a crash interrupted: the plan after a restart finishes a creation, an init or a preparation instead of waiting it out or doing it twice.

use super::*;

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
