use super::*;
use crate::model::{Ownership, VmId};
use crate::observed::{ObservedMachine, ObservedNode, PowerState};

fn at(text: &str) -> Timestamp {
    text.parse().expect("time")
}

fn ready_before() -> ClusterStatus {
    let mut ready = condition(conditions::READY, true, reasons::CONVERGED, "phase Ready");
    ready.last_transition_time = at("2026-05-01T00:00:00Z");
    let mut blocked = condition(conditions::BLOCKED, false, reasons::CLEAR, "nothing blocks");
    blocked.last_transition_time = at("2026-05-01T00:00:00Z");
    ClusterStatus {
        phase: Phase::Ready,
        conditions: vec![ready, blocked],
        version: None,
        certificate_expiry: None,
        kubeconfig_fingerprint: None,
        flux_kubeconfig_fingerprint: None,
        nodes: Vec::new(),
        declared_nodes: Some(4),
        refusals: Vec::new(),
        waiting_on: Vec::new(),
        next_steps: vec!["cordon capstan-prod-general-a".into()],
        last_step: None,
        suspended: Vec::new(),
        converged: None,
    }
}

#[test]
fn a_suspended_cluster_reports_suspended_with_where_who_when_and_why() {
    let now = at("2026-05-02T00:00:00Z");
    let runtime = Suspension {
        source: SuspensionSource::Runtime,
        by: Some("bearer token, user alice".to_owned()),
        declared: true,
        at: Some(at("2026-05-01T23:00:00Z")),
        reason: Some("incident 42".to_owned()),
    };
    let plan = ClusterPlan {
        name: "prod".to_owned(),
        phase: Phase::Ready,
        steps: Vec::new(),
        predicted: Vec::new(),
        blocked: Vec::new(),
        waiting_on: Vec::new(),
        findings: Vec::new(),
        remediation_held: None,
        suspended: vec![runtime.clone()],
    };
    let input = StatusInput {
        plan: &plan,
        observed: None,
        delivers_to_flux: false,
        declared_nodes: Some(6),
        last_step: None,
        failures_to_block: 3,
        previous: None,
        api_down_because: None,
        now,
    };
    let status = cluster_status(&input);
    let condition = status
        .conditions
        .iter()
        .find(|c| c.kind == conditions::SUSPENDED)
        .expect("suspended");
    assert_eq!(condition.status, "True");
    assert_eq!(condition.reason, reasons::SUSPENDED_AT_RUNTIME);
    assert_eq!(
        condition.message,
        "suspended at runtime by bearer token, user alice (declared, not proven) at 2026-05-01T23:00:00Z: incident 42; no step starts; `capstan resume prod` resumes"
    );
    assert_eq!(status.suspended, vec![runtime.clone()]);
    // Git's first, and the reason says Git.
    let both = ClusterPlan {
        suspended: vec![Suspension::git(), runtime],
        ..plan.clone()
    };
    let status = cluster_status(&StatusInput {
        plan: &both,
        ..input
    });
    let condition = status
        .conditions
        .iter()
        .find(|c| c.kind == conditions::SUSPENDED)
        .expect("suspended");
    assert_eq!(condition.reason, reasons::SUSPENDED_IN_GIT);
    assert!(
        condition
            .message
            .starts_with("suspended in Git (spec.suspend: true)")
    );
    assert!(condition.message.contains("incident 42"));
    // Resumed: the condition is gone.
    let resumed = ClusterPlan {
        suspended: Vec::new(),
        ..plan.clone()
    };
    let status = cluster_status(&StatusInput {
        plan: &resumed,
        ..input
    });
    assert!(
        status
            .conditions
            .iter()
            .all(|c| c.kind != conditions::SUSPENDED)
    );
}

#[test]
fn held_remediation_is_a_condition_naming_the_unhealthy_nodes() {
    let now = at("2026-05-02T00:00:00Z");
    let held = crate::plan::RemediationHeld {
        unhealthy: vec![
            NodeName("capstan-prod-general-a".into()),
            NodeName("capstan-prod-general-b".into()),
            NodeName("capstan-prod-general-c".into()),
        ],
        nodes: 6,
        max_unhealthy: 2,
    };
    let plan = ClusterPlan {
        name: "prod".to_owned(),
        phase: Phase::Updating,
        steps: Vec::new(),
        predicted: Vec::new(),
        blocked: Vec::new(),
        waiting_on: Vec::new(),
        findings: Vec::new(),
        remediation_held: Some(held.clone()),
        suspended: Vec::new(),
    };
    let input = StatusInput {
        plan: &plan,
        observed: None,
        delivers_to_flux: false,
        declared_nodes: Some(6),
        last_step: None,
        failures_to_block: 3,
        previous: None,
        api_down_because: None,
        now,
    };
    let status = cluster_status(&input);
    let condition = status
        .conditions
        .iter()
        .find(|c| c.kind == conditions::REMEDIATION_HELD)
        .expect("held");
    assert_eq!(condition.status, "True");
    assert_eq!(condition.reason, reasons::TOO_MANY_UNHEALTHY);
    assert_eq!(condition.message, held.message());
    assert!(condition.message.contains("capstan-prod-general-c"));
    let clear = ClusterPlan {
        remediation_held: None,
        ..plan.clone()
    };
    let status = cluster_status(&StatusInput {
        plan: &clear,
        ..input
    });
    assert!(
        status
            .conditions
            .iter()
            .all(|c| c.kind != conditions::REMEDIATION_HELD)
    );
}

#[test]
fn a_cluster_waiting_for_the_cni_flux_installs_says_so_in_its_ready_condition() {
    let now = at("2026-05-02T00:00:00Z");
    let wait = crate::plan::Waiting {
        step: None,
        machine: None,
        resource: crate::plan::Resource::Cni {
            nodes: 5,
            flux: Some("flux-system/prod-kubeconfig".to_owned()),
        },
        since: None,
    };
    let plan = ClusterPlan {
        name: "prod".to_owned(),
        phase: Phase::Updating,
        steps: Vec::new(),
        predicted: Vec::new(),
        blocked: Vec::new(),
        waiting_on: vec![wait],
        findings: Vec::new(),
        remediation_held: None,
        suspended: Vec::new(),
    };
    let status = cluster_status(&StatusInput {
        plan: &plan,
        observed: None,
        delivers_to_flux: true,
        declared_nodes: Some(5),
        last_step: None,
        failures_to_block: 3,
        previous: None,
        api_down_because: None,
        now,
    });
    let ready = &status.conditions[0];
    assert_eq!(
        (ready.kind.as_str(), ready.status.as_str()),
        (conditions::READY, "False")
    );
    assert_eq!(ready.reason, reasons::WAITING_FOR_CNI);
    assert_eq!(
        ready.message,
        "waiting for a CNI: 5 nodes report NetworkPluginNotReady (Flux installs it from flux-system/prod-kubeconfig)"
    );
    assert_eq!(
        status.waiting_on[0].resource,
        "a CNI: 5 nodes report NetworkPluginNotReady (Flux installs it from flux-system/prod-kubeconfig)"
    );
    let ready_plan = ClusterPlan {
        phase: Phase::Ready,
        waiting_on: Vec::new(),
        ..plan
    };
    let status = cluster_status(&StatusInput {
        plan: &ready_plan,
        observed: None,
        delivers_to_flux: true,
        declared_nodes: Some(5),
        last_step: None,
        failures_to_block: 3,
        previous: None,
        api_down_because: None,
        now,
    });
    assert_eq!(status.conditions[0].reason, reasons::CONVERGED);
}

#[test]
fn a_cluster_whose_file_has_errors_stays_in_the_status_blocked_on_its_file() {
    let now = at("2026-05-02T00:00:00Z");
    let mut observed = ObservedCluster::default();
    let name = NodeName("capstan-prod-general-a".into());
    observed.machines.insert(
        name.clone(),
        ObservedMachine {
            vm_id: VmId(101),
            proxmox_node: "pve1".into(),
            ownership: Ownership {
                cluster: "prod".into(),
                role: Role::Worker,
                pool: "general".into(),
                spec_hash: "0123456789ab".into(),
            },
            tags: Vec::new(),
            power: PowerState::Running,
            created: now,
            guest_agent: true,
            built_from: None,
            config: None,
            task: None,
            pool: None,
            recorded_tags: None,
        },
    );
    observed.nodes.insert(
        name.clone(),
        ObservedNode {
            ready: true,
            ready_since: now,
            kubelet_version: Some("1.36.2".parse().expect("version")),
            unschedulable: false,
            taints: Vec::new(),
            drain: None,
            pod_cidr: None,
            awaiting_network: false,
            labels: Default::default(),
            managed: Default::default(),
            owned_elsewhere: Default::default(),
        },
    );
    let status = invalid_file(
        "clusters/prod.yaml has errors",
        Some(&observed),
        Some(&ready_before()),
        now,
    );
    assert_eq!(status.phase, Phase::Blocked);
    assert!(status.next_steps.is_empty());
    let kinds: Vec<(&str, &str, &str)> = status
        .conditions
        .iter()
        .map(|c| (c.kind.as_str(), c.status.as_str(), c.reason.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (conditions::READY, "False", reasons::RECONCILING),
            (conditions::BLOCKED, "True", reasons::INVALID_FILE),
        ]
    );
    assert!(
        status
            .conditions
            .iter()
            .all(|c| c.last_transition_time == now)
    );
    assert_eq!(
        status.conditions[1].message,
        "clusters/prod.yaml has errors"
    );
    assert_eq!(status.nodes.len(), 1);
    assert_eq!(status.nodes[0].name, name);
    assert_eq!(status.nodes[0].ready, Some(true));

    // A second pass keeps the transition times.
    let again = invalid_file(
        "clusters/prod.yaml has errors",
        Some(&observed),
        Some(&status),
        at("2026-05-03T00:00:00Z"),
    );
    assert_eq!(again.conditions, status.conditions);
}
