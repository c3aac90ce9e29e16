//! What a cluster waits on while something outside the plan runs: a clone's Proxmox task, an unreachable API server, VMs retiring.

use super::*;

#[test]
fn a_vm_whose_clone_is_running_makes_the_cluster_wait_on_the_task() {
    let prod = Cluster::test("prod");
    let desired = desired(vec![prod.clone()]);
    let first = plan_at(&desired, &Observed::nothing(), now());
    let mut observed = Observed::nothing();
    expected_effect(&mut observed, &first.clusters[0].steps[0], now());
    let cp = prod.name_of("cp", 0);
    let vm: &mut ObservedMachine = cluster_mut(&mut observed, "prod")
        .machines
        .get_mut(&cp)
        .expect("vm");
    vm.vm_id = VmId(101);
    vm.power = PowerState::Stopped;
    vm.guest_agent = false;
    vm.task = Some(crate::observed::ProxmoxTask {
        upid: "UPID:pve1:0000A1B2:0001C3D4:6630A1B2:qmclone:101:capstan@pve!reconciler:".into(),
        kind: "qmclone".into(),
        started: minutes(-1),
    });
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.phase, Phase::Provisioning);
    // The workers are cloned meanwhile; the control plane's prepare waits for its clone.
    assert!(
        cluster
            .steps
            .iter()
            .all(|s| s.name() == "create-machine" && s.target.role == Some(Role::Worker)),
        "{:?}",
        shape(&cluster.steps)
    );
    assert_eq!(
        cluster.waiting_on,
        vec![Waiting {
            step: Some(ActionKind::PrepareNode),
            machine: Some(cp.clone()),
            resource: Resource::ProxmoxTask {
                upid: "UPID:pve1:0000A1B2:0001C3D4:6630A1B2:qmclone:101:capstan@pve!reconciler:"
                    .into(),
                task: "qmclone".into(),
            },
            since: Some(minutes(-1)),
        }]
    );
    let predicted = shape(&cluster.predicted);
    let init = predicted.iter().position(|s| s.0 == "init-control-plane");
    let prepare = predicted.iter().position(|p| *p == s("prepare-node", &cp));
    assert!(prepare < init && prepare.is_some(), "{predicted:?}");
}

#[test]
fn an_unreachable_api_stops_node_work_and_says_so() {
    let desired = desired(vec![Cluster::test("prod").with_workers("general", 4)]);
    let mut observed = built(&desired);
    let cluster = cluster_mut(&mut observed, "prod");
    cluster.nodes.clear();
    cluster
        .control_plane
        .as_mut()
        .expect("cp")
        .unreachable_since = Some(minutes(-3));
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.steps, vec![]);
    assert_eq!(
        cluster.waiting_on,
        vec![Waiting {
            step: None,
            machine: None,
            resource: Resource::ApiEndpoint {
                endpoint: "k8s-prod.lab.example:6443".into()
            },
            since: Some(minutes(-3)),
        }]
    );
    assert_eq!(plan.findings, vec![], "no member is mistaken for an orphan");
}

#[test]
fn retiring_vms_are_reset_then_destroyed() {
    let desired = desired(vec![Cluster::test("prod")]);
    let mut observed = built(&desired);
    let extra = NodeName::from("capstan-prod-general-zzzzz");
    let mut vm = observed.clusters["prod"]
        .machines
        .values()
        .next()
        .expect("vm")
        .clone();
    vm.ownership.pool = "general".into();
    vm.ownership.role = Role::Worker;
    vm.tags.push(crate::observed::RETIRING_TAG.into());
    cluster_mut(&mut observed, "prod")
        .machines
        .insert(extra.clone(), vm);
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.steps), vec![s("reset-node", &extra)]);
    assert_eq!(
        shape(&cluster.predicted),
        vec![s("reset-node", &extra), s("destroy-machine", &extra)]
    );
}
