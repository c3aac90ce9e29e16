//! Table tests for rules 7 to 15, and for what a cluster waits on.

use super::*;

// Rule 7: upgrades.
#[test]
fn rule_7_a_patch_upgrade_moves_the_control_plane_then_delivers_then_replaces_cp_first() {
    let before = Cluster::test("prod").with_workers("general", 2);
    let observed = built(&desired(vec![before.clone()]));
    let after = before.with_version("1.36.4");
    let plan = plan_at(&desired(vec![after.clone()]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let Some(Step {
        action: Action::UpgradeControlPlane { from, to, .. },
        reason,
        disruptive: true,
        ..
    }) = cluster.steps.first()
    else {
        panic!("upgrade first: {:#?}", cluster.steps);
    };
    assert_eq!(
        (from.to_string(), to.to_string()),
        ("1.36.2".into(), "1.36.4".into())
    );
    assert_eq!(
        reason,
        "patch upgrade 1.36.2 → 1.36.4: kubeadm upgrade apply in place first; the machines are replaced after, control plane first"
    );
    let old_cp = machines_of(&observed, "prod", "cp");
    let old_workers = machines_of(&observed, "prod", "general");
    let new_cp = after.name_of("cp", 0);
    let new_workers: Vec<NodeName> = (0..2).map(|i| after.name_of("general", i)).collect();
    let expected = vec![
        c("upgrade-control-plane"),
        c("deliver-kubeconfig"),
        s("create-machine", &new_cp),
        s("prepare-node", &new_cp),
        s("join-node", &new_cp),
        s("cordon", &old_cp[0]),
        s("drain", &old_cp[0]),
        s("delete-node", &old_cp[0]),
        // The control plane is replaced: workers follow, and the kubeconfig (now read from
        // the new control plane) goes out again.
        s("reset-node", &old_cp[0]),
        c("deliver-kubeconfig"),
        s("destroy-machine", &old_cp[0]),
        // Flux has the new kubeconfig before any machine moves again.
        s("create-machine", &new_workers[0]),
        s("prepare-node", &new_workers[0]),
        s("join-node", &new_workers[0]),
        s("cordon", &old_workers[0]),
        s("drain", &old_workers[0]),
        s("delete-node", &old_workers[0]),
        s("reset-node", &old_workers[0]),
        s("destroy-machine", &old_workers[0]),
        s("create-machine", &new_workers[1]),
        s("prepare-node", &new_workers[1]),
        s("join-node", &new_workers[1]),
        s("cordon", &old_workers[1]),
        s("drain", &old_workers[1]),
        s("delete-node", &old_workers[1]),
        s("reset-node", &old_workers[1]),
        s("destroy-machine", &old_workers[1]),
    ];
    assert_eq!(shape(&cluster.predicted), expected);
}

#[test]
fn rule_7_refused_version_changes_say_which_rule_refused_them() {
    let before = Cluster::test("prod");
    let observed = built(&desired(vec![before.clone()]));
    let cases = [
        (
            "1.37.0",
            "1.36.2 → 1.37.0 refused (rule 7): minor 1.37 is not in approvedMinors; add \"1.37\" to approvedMinors in capstan.yaml once every Flux component supports it",
        ),
        (
            "1.38.1",
            "1.36.2 → 1.38.1 refused (rule 7): one minor at a time: move to 1.37 first",
        ),
        (
            "1.36.1",
            "1.36.2 → 1.36.1 refused (rule 7): a downgrade; Kubernetes never moves backwards: set spec.kubernetes.version back to 1.36.2",
        ),
    ];
    for (version, message) in cases {
        let mut desired = desired(vec![before.clone().with_version(version)]);
        desired
            .fleet
            .approved_minors
            .push("1.38".parse().expect("minor"));
        let plan = plan_at(&desired, &observed, now());
        let cluster = plan.cluster("prod").expect("planned");
        assert_eq!(
            cluster.blocked,
            vec![Blocked {
                rule: Rule::Upgrades,
                message: message.to_owned()
            }],
            "{version}"
        );
        assert_eq!(
            cluster.steps,
            vec![],
            "{version}: the cluster stays as it is"
        );
    }
    // Approved, the next minor moves.
    let mut desired = desired(vec![before.with_version("1.37.0")]);
    desired
        .fleet
        .approved_minors
        .push("1.37".parse().expect("minor"));
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.blocked, vec![]);
    assert_eq!(shape(&cluster.steps), vec![c("upgrade-control-plane")]);
    assert!(
        cluster.steps[0]
            .reason
            .starts_with("minor upgrade 1.36.2 → 1.37.0")
    );
}

// Rule 8: the endpoint never changes after init.
#[test]
fn rule_8_an_endpoint_change_is_refused_and_stops_the_whole_cluster() {
    let before = Cluster::test("prod");
    let observed = built(&desired(vec![before.clone()]));
    let mut after = before.with_workers("general", 5);
    after.spec.endpoint.address = "192.168.1.99".parse().expect("ip");
    let plan = plan_at(&desired(vec![after]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.phase, Phase::Blocked);
    assert_eq!(cluster.steps, vec![]);
    assert_eq!(cluster.predicted, vec![]);
    assert_eq!(
        cluster.blocked,
        vec![Blocked {
            rule: Rule::EndpointFixed,
            message: "the endpoint cannot change after init-control-plane (address 192.168.1.23 → 192.168.1.99): kubeadm wrote k8s-prod.lab.example (192.168.1.23:6443) into every certificate, kubeconfig and join of this cluster; revert spec.endpoint to it. Nothing else of this cluster proceeds until then (a new endpoint needs a new cluster)".to_owned()
        }]
    );
}

// Rule 9: control-plane replacement keeps quorum.
#[test]
fn rule_9_control_planes_are_replaced_one_at_a_time_new_before_old() {
    let before = Cluster::test("platform").with_control_planes(3);
    let observed = built(&desired(vec![before.clone()]));
    let after = before.with_template("cp", "debian13-k8s-v2");
    let plan = plan_at(&desired(vec![after.clone()]), &observed, now());
    let cluster = plan.cluster("platform").expect("planned");
    let old = machines_of(&observed, "platform", "cp");
    let new: Vec<NodeName> = (0..3).map(|i| after.name_of("cp", i)).collect();
    assert_eq!(shape(&cluster.steps), vec![s("create-machine", &new[0])]);
    // A new control plane joins only while none is absent; an old one leaves only once its
    // replacement is Ready. rollout.maxSurge 1: the next replacement is cloned once the old
    // VM is destroyed.
    let mut expected = Vec::new();
    for (old, new) in old.iter().zip(&new) {
        expected.extend([
            s("create-machine", new),
            s("prepare-node", new),
            s("join-node", new),
            s("cordon", old),
            s("drain", old),
            s("delete-node", old),
            s("reset-node", old),
            c("deliver-kubeconfig"),
            s("destroy-machine", old),
        ]);
    }
    assert_eq!(shape(&cluster.predicted), expected);

    // A control plane NotReady: no other control plane joins or leaves (the absent one
    // itself may: with rollout.maxSurge 1 no second replacement is cloned first, so its
    // cordon, which the earlier clone used to precede, comes now).
    let mut world = observed.clone();
    for step in &cluster.predicted[..1] {
        expected_effect(&mut world, step, now());
    }
    let node = cluster_mut(&mut world, "platform")
        .nodes
        .get_mut(&old[1])
        .expect("node");
    node.ready = false;
    node.ready_since = minutes(-30);
    let plan = plan_at(&desired(vec![after]), &world, now());
    let cluster = plan.cluster("platform").expect("planned");
    assert!(
        cluster.steps.iter().all(|s| {
            !matches!(s.name(), "join-node" | "cordon" | "drain" | "delete-node")
                || s.target.machine.as_ref() == Some(&old[1]) && s.name() != "join-node"
        }),
        "{:?}",
        shape(&cluster.steps)
    );
    assert!(cluster.waiting_on.contains(&Waiting {
        step: Some(ActionKind::JoinNode),
        machine: Some(new[0].clone()),
        resource: Resource::Node {
            name: old[1].clone(),
            condition: "Ready (one control plane absent at a time)".to_owned()
        },
        since: None,
    }));
}

// Rule 10: certificates and kubeconfig delivery.
#[test]
fn rule_10_certificates_near_expiry_are_renewed_then_delivered() {
    let prod = Cluster::test("prod");
    let desired = desired(vec![prod]);
    let mut observed = built(&desired);
    cluster_mut(&mut observed, "prod")
        .control_plane
        .as_mut()
        .expect("initialised")
        .certificates_expire = Some("2026-05-20T00:00:00Z".parse().expect("time"));
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.steps), vec![c("renew-certificates")]);
    assert_eq!(
        cluster.steps[0].reason,
        "certificates expire at 2026-05-20T00:00:00Z, within certificates.renewBefore 30days"
    );
    assert_eq!(
        shape(&cluster.predicted),
        vec![c("renew-certificates"), c("deliver-kubeconfig")]
    );
    assert_eq!(
        cluster.predicted[1].reason,
        "the admin kubeconfig changes with renew-certificates"
    );
}

#[test]
fn rule_10_a_kubeconfig_that_differs_from_fluxs_is_redelivered() {
    let desired = desired(vec![Cluster::test("prod")]);
    let mut observed = built(&desired);
    cluster_mut(&mut observed, "prod").flux = Some(FluxSecret {
        target: FluxTarget {
            cluster: "management".into(),
            namespace: "flux-system".into(),
            secret_name: "prod-kubeconfig".into(),
        },
        kubeconfig: "sha256:00000000000000bb".into(),
    });
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(
        cluster.steps,
        vec![Step {
            action: Action::DeliverKubeconfig {
                flux: FluxTarget {
                    cluster: "management".into(),
                    namespace: "flux-system".into(),
                    secret_name: "prod-kubeconfig".into(),
                }
            },
            target: Target {
                cluster: "prod".into(),
                ..Target::default()
            },
            reason: "Flux holds kubeconfig sha256:00000000000000bb, the cluster's admin kubeconfig is sha256:00000000000000aa".into(),
            disruptive: false,
            waits_on: None,
        }]
    );
}

// Rule 11: disruptive steps wait for the maintenance window.
#[test]
fn rule_11_disruptive_steps_wait_for_the_window_and_the_rest_proceeds() {
    let before = Cluster::test("prod")
        .with_workers("general", 2)
        .with_window();
    let mut observed = built(&desired(vec![before.clone()]));
    let after = before.with_template("general", "debian13-k8s-v2");
    let desired = desired(vec![after.clone()]);
    // The replacement exists and is Ready: the next step is a cordon, outside the window.
    let first = plan_at(&desired, &observed, now());
    for step in &first.clusters[0].predicted[..3] {
        expected_effect(&mut observed, step, now());
    }
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let old = machines_of(&observed, "prod", "general");
    let old_first = old
        .iter()
        .find(|n| {
            observed.clusters["prod"].machines[*n].ownership.spec_hash != after.hash("general")
        })
        .expect("old");
    assert_eq!(cluster.steps, vec![]);
    let opens: jiff::Timestamp = "2026-05-02T01:00:00Z".parse().expect("time");
    assert_eq!(
        cluster.waiting_on,
        vec![Waiting {
            step: Some(ActionKind::Cordon),
            machine: Some(old_first.clone()),
            resource: Resource::MaintenanceWindow {
                opens: Some(opens),
                deny: None,
                time_zone: None,
                fit: None,
            },
            since: None,
        }]
    );
    assert_eq!(
        cluster.predicted[0].waits_on,
        Some(Wait {
            resource: Resource::MaintenanceWindow {
                opens: Some(opens),
                deny: None,
                time_zone: None,
                fit: None,
            },
            since: None
        })
    );
    // Inside the window it runs.
    let plan = plan_at(&desired, &observed, opens);
    assert_eq!(shape(&plan.clusters[0].steps), vec![s("cordon", old_first)]);
}

// Rule 11: a deny window holds disruptive steps whatever the allow windows say, and says
// until when, on the zone's clock.
#[test]
fn rule_11_a_deny_window_holds_a_template_change_and_says_until_when() {
    // A week's freeze from Monday 27 April, midnight in Rome (UTC+2 then).
    let before = Cluster::test("prod").with_workers("general", 2).with_deny(
        "0 0 27 4 *",
        7 * 24,
        "Europe/Rome",
    );
    let mut observed = built(&desired(vec![before.clone()]));
    let after = before.with_template("general", "debian13-k8s-v2");
    let desired = desired(vec![after]);
    let first = plan_at(&desired, &observed, now());
    for step in &first.clusters[0].predicted[..3] {
        expected_effect(&mut observed, step, now());
    }
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.steps, vec![], "the cordon waits");
    let until: jiff::Timestamp = "2026-05-03T22:00:00Z".parse().expect("time");
    let held = Resource::MaintenanceWindow {
        opens: Some(until),
        deny: Some("0 0 27 4 *".to_owned()),
        time_zone: Some("Europe/Rome".to_owned()),
        fit: None,
    };
    assert_eq!(cluster.waiting_on.len(), 1);
    assert_eq!(cluster.waiting_on[0].step, Some(ActionKind::Cordon));
    assert_eq!(cluster.waiting_on[0].resource, held);
    assert_eq!(
        held.to_string(),
        "deny window `0 0 27 4 *` (until 2026-05-04 00:00 Europe/Rome)"
    );
    assert_eq!(
        held.hold_phrase().as_deref(),
        Some("held by deny window `0 0 27 4 *` until Mon 2026-05-04 00:00 Europe/Rome")
    );
    assert!(
        cluster
            .predicted
            .iter()
            .filter(|s| s.disruptive)
            .all(|s| s.waits_on
                == Some(Wait {
                    resource: held.clone(),
                    since: None
                })),
        "every disruptive step of the prediction is held: {:?}",
        cluster.predicted
    );
    // Once it ends the cordon starts.
    let plan = plan_at(&desired, &observed, until);
    assert_eq!(plan.clusters[0].steps[0].name(), "cordon");
}

// Rule 12: removed cluster files.
#[test]
fn rule_12_a_removed_cluster_is_reported_or_deleted_with_prune() {
    let prod = Cluster::test("prod");
    let staging = Cluster::test("staging");
    let observed = built(&desired(vec![prod.clone(), staging]));
    let mut desired = desired(vec![prod]);
    let plan = plan_at(&desired, &observed, now());
    assert_eq!(plan.cluster("staging"), None);
    assert_eq!(
        plan.findings,
        vec![Finding {
            kind: FindingKind::RemovedCluster,
            cluster: "staging".into(),
            machine: None,
            vm_id: None,
            message: "cluster staging has no file any more; its 4 VM(s) and its kubeconfig are kept because prune is off".into(),
        }]
    );
    desired.fleet.prune = true;
    desired.incomplete = true;
    let plan = plan_at(&desired, &observed, now());
    assert_eq!(
        plan.findings[0].message,
        "cluster staging has no file any more; its 4 VM(s) and its kubeconfig are kept because some cluster file is invalid, so an absent file may only be broken: nothing is deleted for being absent"
    );
    // Its file is there but has errors: not reported as removed, never deleted.
    desired
        .invalid
        .insert("clusters/staging.yaml".into(), Some("staging".into()));
    let plan = plan_at(&desired, &observed, now());
    assert_eq!(plan.cluster("staging"), None);
    assert_eq!(
        plan.findings,
        vec![Finding {
            kind: FindingKind::InvalidFile,
            cluster: "staging".into(),
            machine: None,
            vm_id: None,
            message: "cluster staging: clusters/staging.yaml has errors; its 4 VM(s) are left as they are until the file is fixed".into(),
        }]
    );
    desired.invalid.clear();
    desired.incomplete = false;
    let plan = plan_at(&desired, &observed, now());
    let staging = plan.cluster("staging").expect("deleting");
    assert_eq!(staging.phase, Phase::Deleting);
    assert_eq!(shape(&staging.steps), vec![c("delete-cluster")]);
    let Action::DeleteCluster { machines, flux, .. } = &staging.steps[0].action else {
        panic!("delete-cluster");
    };
    assert_eq!(machines.len(), 4);
    assert_eq!(
        flux.as_ref().map(|f| f.secret_name.as_str()),
        Some("staging-kubeconfig")
    );
}

// Rule 13: fencing.
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

// Rule 14: drift.
#[test]
fn rule_14_drift_is_reported_and_replaced_only_when_asked() {
    let prod = Cluster::test("prod");
    let mut observed = built(&desired(vec![prod.clone()]));
    let worker = machines_of(&observed, "prod", "general")[0].clone();
    let vm = cluster_mut(&mut observed, "prod")
        .machines
        .get_mut(&worker)
        .expect("vm");
    vm.config = Some(VmConfig {
        cores: 8,
        memory_mib: 8192,
        disk_gib: 50,
        hardware: None,
    });
    let vm_id = vm.vm_id;
    let plan = plan_at(&desired(vec![prod.clone()]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.steps, vec![]);
    assert_eq!(cluster.phase, Phase::Ready);
    assert_eq!(
        cluster.findings,
        vec![Finding {
            kind: FindingKind::Drift,
            cluster: "prod".into(),
            machine: Some(worker.clone()),
            vm_id: Some(vm_id),
            message: format!(
                "VM {vm_id} {worker} drifted (changed outside capstan): cores 4 → 8; rollout.onDrift is report: left as is"
            ),
        }]
    );
    let plan = plan_at(
        &desired(vec![prod.clone().with_drift_replace()]),
        &observed,
        now(),
    );
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.steps)[0].0, "create-machine");
    assert!(
        cluster.steps[0].reason.contains("drifted: cores 4 → 8"),
        "{}",
        cluster.steps[0].reason
    );
    assert!(shape(&cluster.predicted).contains(&s("cordon", &worker)));
}

// Rule 15: capacity.
#[test]
fn rule_15_new_vms_go_to_the_least_loaded_node_or_are_refused_before_any_clone() {
    let prod = Cluster::test("prod");
    let desired = desired(vec![prod.clone()]);
    let mut observed = Observed::nothing();
    observed.proxmox_nodes = proxmox(&[("pve1", 8_000), ("pve2", 64_000)]);
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let Action::CreateMachine { proxmox_node, .. } = &cluster.steps[0].action else {
        panic!("create");
    };
    assert_eq!(proxmox_node, "pve2");
    // The predicted workers spread over both nodes.
    let nodes: Vec<&str> = cluster
        .predicted
        .iter()
        .filter_map(|s| match &s.action {
            Action::CreateMachine {
                proxmox_node,
                machine,
                ..
            } if machine.role == Role::Worker => Some(proxmox_node.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(nodes, vec!["pve2", "pve2", "pve2"]);

    observed.proxmox_nodes = proxmox(&[("pve1", 8_000), ("pve2", 20_000)]);
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(cluster.steps, vec![]);
    assert_eq!(cluster.phase, Phase::Blocked);
    assert_eq!(
        cluster.blocked,
        vec![Blocked {
            rule: Rule::Capacity,
            message: "no Proxmox node in placement has the memory for a 8192 MiB worker of pool general (pve1 has 8000 MiB free, pve2 has 5664 MiB free): nothing is cloned until the VMs this cluster still needs fit; free memory or add nodes to placement".into()
        }]
    );
}

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
