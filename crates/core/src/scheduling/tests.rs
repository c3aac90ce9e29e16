use super::*;
use crate::spec::scheduling::{CONTROL_PLANE_TAINT, POOL_LABEL, REGION_LABEL, ZONE_LABEL};
use crate::spec::{Cluster, Distribution, TaintEffect};

fn memory_pool() -> Cluster {
    let mut cluster = Cluster::test("prod").with_workers("memory", 2);
    let pool = cluster
        .spec
        .workers
        .iter_mut()
        .find(|p| p.pool == "memory")
        .expect("pool");
    pool.labels
        .insert("workload-class".to_owned(), "memory".to_owned());
    pool.labels
        .insert("node-role.kubernetes.io/memory".to_owned(), String::new());
    pool.taints.push(NodeTaint {
        key: "dedicated".to_owned(),
        value: Some("memory".to_owned()),
        effect: TaintEffect::NoSchedule,
    });
    cluster
}

fn node(scheduling: &NodeScheduling) -> ObservedNode {
    ObservedNode {
        ready: true,
        ready_since: "2026-04-29T12:00:00Z".parse().expect("a time"),
        kubelet_version: None,
        unschedulable: false,
        taints: scheduling
            .taints
            .iter()
            .map(|t| Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: t.effect.as_str().to_owned(),
            })
            .collect(),
        drain: None,
        pod_cidr: None,
        awaiting_network: false,
        labels: scheduling.labels.clone(),
        managed: scheduling.managed(),
        owned_elsewhere: OwnedElsewhere::default(),
    }
}

#[test]
fn a_node_carries_its_pools_labels_and_taints_and_capstans_topology_labels() {
    let cluster = memory_pool();
    let scheduling = NodeScheduling::of(&cluster.spec, "memory", Role::Worker, "pve2");
    assert_eq!(scheduling.labels["workload-class"], "memory");
    assert_eq!(scheduling.labels[POOL_LABEL], "memory");
    assert_eq!(scheduling.labels[REGION_LABEL], "homelab");
    assert_eq!(scheduling.labels[ZONE_LABEL], "pve2");
    assert_eq!(scheduling.taints.len(), 1);
    let control_plane = NodeScheduling::of(&cluster.spec, "cp", Role::ControlPlane, "pve1");
    assert_eq!(control_plane.labels[POOL_LABEL], "cp");
    assert_eq!(
        control_plane.taints,
        [NodeTaint {
            key: CONTROL_PLANE_TAINT.to_owned(),
            value: None,
            effect: TaintEffect::NoSchedule
        }]
    );
}

#[test]
fn schedulable_control_planes_carry_no_control_plane_taint_and_k3s_servers_none_by_default() {
    let mut cluster = memory_pool();
    cluster.spec.control_plane.schedulable = Some(true);
    let of =
        |cluster: &Cluster| NodeScheduling::of(&cluster.spec, "cp", Role::ControlPlane, "pve1");
    assert!(of(&cluster).taints.is_empty());
    cluster.spec.control_plane.schedulable = None;
    cluster.spec.kubernetes.distribution = Distribution::K3s;
    assert!(of(&cluster).taints.is_empty(), "K3s servers run workloads");
    cluster.spec.control_plane.schedulable = Some(false);
    assert_eq!(of(&cluster).taints.len(), 1, "unless told not to");
}

#[test]
fn registration_holds_every_taint_and_only_the_labels_a_kubelet_may_set_on_itself() {
    let cluster = memory_pool();
    let scheduling = NodeScheduling::of(&cluster.spec, "memory", Role::Worker, "pve2");
    let kubeadm = scheduling.registration(&Distribution::Kubeadm.capabilities().scheduling);
    assert!(kubeadm.labels.contains_key("workload-class"));
    assert!(kubeadm.labels.contains_key(ZONE_LABEL));
    assert!(
        !kubeadm
            .labels
            .contains_key("node-role.kubernetes.io/memory")
    );
    assert_eq!(kubeadm.taints, scheduling.taints);
    let talos = scheduling.registration(&Distribution::Talos.capabilities().scheduling);
    assert!(
        talos.labels.is_empty(),
        "Talos nodes take labels through the API"
    );
    assert_eq!(talos.taints, scheduling.taints);
}

#[test]
fn a_node_as_desired_needs_nothing_and_a_changed_label_is_set_in_place() {
    let cluster = memory_pool();
    let desired = NodeScheduling::of(&cluster.spec, "memory", Role::Worker, "pve2");
    let name = NodeName::from("w1");
    let mut observed = node(&desired);
    observed
        .labels
        .insert("owner".to_owned(), "someone-else".to_owned());
    assert_eq!(relabel(&name, &desired, &observed), None);

    let mut changed = memory_pool();
    let pool = changed.spec.workers.last_mut().expect("pool");
    pool.labels
        .insert("workload-class".to_owned(), "cpu".to_owned());
    let wanted = NodeScheduling::of(&changed.spec, "memory", Role::Worker, "pve2");
    let change = relabel(&name, &wanted, &observed).expect("a change");
    assert_eq!(
        change.set_labels,
        BTreeMap::from([("workload-class".to_owned(), "cpu".to_owned())])
    );
    assert!(change.remove_labels.is_empty() && !change.changes_taints());
    change.apply_to(&mut observed);
    assert_eq!(observed.labels["owner"], "someone-else", "not capstan's");
    assert_eq!(relabel(&name, &wanted, &observed), None);
}

#[test]
fn a_dropped_key_capstan_set_is_removed_and_one_it_did_not_set_stays() {
    let cluster = memory_pool();
    let before = NodeScheduling::of(&cluster.spec, "memory", Role::Worker, "pve2");
    let mut observed = node(&before);
    observed.labels.insert("hand".to_owned(), "made".to_owned());
    observed.taints.push(Taint {
        key: "hand".to_owned(),
        value: None,
        effect: "PreferNoSchedule".to_owned(),
    });
    let mut after = memory_pool();
    let pool = after.spec.workers.last_mut().expect("pool");
    pool.labels.remove("workload-class");
    pool.taints.clear();
    let wanted = NodeScheduling::of(&after.spec, "memory", Role::Worker, "pve2");
    let name = NodeName::from("w1");
    let change = relabel(&name, &wanted, &observed).expect("a change");
    assert_eq!(change.remove_labels, ["workload-class"]);
    assert_eq!(change.remove_taints, ["dedicated:NoSchedule"]);
    change.apply_to(&mut observed);
    assert_eq!(observed.labels["hand"], "made");
    assert_eq!(observed.taints.len(), 1, "{:?}", observed.taints);
    assert!(!observed.managed.labels.contains("workload-class"));
}

#[test]
fn a_node_registered_without_capstans_record_gets_the_record_only() {
    let cluster = memory_pool();
    let desired = NodeScheduling::of(&cluster.spec, "memory", Role::Worker, "pve2");
    let mut observed = node(&desired);
    observed.managed = ManagedKeys::default();
    let change = relabel(&NodeName::from("w1"), &desired, &observed).expect("the record");
    assert!(!change.changes_labels() && !change.changes_taints());
    assert_eq!(change.managed, desired.managed());
}

#[test]
fn the_record_reads_back_what_it_wrote_and_ignores_what_it_cannot_read() {
    let cluster = memory_pool();
    let managed = NodeScheduling::of(&cluster.spec, "memory", Role::Worker, "pve2").managed();
    let [(labels_name, labels), (taints_name, taints)] = managed.annotations();
    assert_eq!(labels_name, MANAGED_LABELS_ANNOTATION);
    assert_eq!(taints_name, MANAGED_TAINTS_ANNOTATION);
    assert_eq!(taints, r#"["dedicated:NoSchedule"]"#);
    assert_eq!(
        ManagedKeys::from_annotations(Some(&labels), Some(&taints)),
        managed
    );
    assert!(ManagedKeys::from_annotations(Some("workload-class"), None).is_empty());
}

#[test]
fn a_key_another_controller_owns_is_never_set_recorded_or_removed_and_is_reported() {
    let mut compact = memory_pool();
    compact.spec.control_plane.schedulable = Some(true);
    let before = NodeScheduling::of(&memory_pool().spec, "cp", Role::ControlPlane, "pve1");
    // A control plane whose machine config let Talos set (and own) its taint.
    let mut observed = node(&before);
    observed.managed.taints.clear();
    observed.owned_elsewhere = OwnedElsewhere::from_annotations(
        None,
        Some(r#"["node-role.kubernetes.io/control-plane"]"#),
    );
    let wanted = NodeScheduling::of(&compact.spec, "cp", Role::ControlPlane, "pve1");
    assert_eq!(relabel(&NodeName::from("cp"), &wanted, &observed), None);
    assert_eq!(
        held_elsewhere(&wanted, &observed),
        ["node-role.kubernetes.io/control-plane"]
    );
    assert!(held_elsewhere(&before, &observed).is_empty(), "as declared");
}

#[test]
fn the_quick_check_agrees_with_the_change_on_every_kind_of_difference() {
    let cluster = memory_pool();
    let spec = &cluster.spec;
    for (pool, role) in [("memory", Role::Worker), ("cp", Role::ControlPlane)] {
        let desired = NodeScheduling::of(spec, pool, role, "pve2");
        let declared = Declared::of(spec, pool, role, "pve2");
        let as_desired = node(&desired);
        let mut variants = vec![as_desired.clone()];
        let mut changed = as_desired.clone();
        changed
            .labels
            .insert("workload-class".to_owned(), "cpu".to_owned());
        variants.push(changed);
        let mut unrecorded = as_desired.clone();
        unrecorded.managed = ManagedKeys::default();
        variants.push(unrecorded);
        let mut extra = as_desired.clone();
        extra.managed.labels.insert("gone".to_owned());
        extra.labels.insert("gone".to_owned(), String::new());
        variants.push(extra);
        let mut untainted = as_desired.clone();
        untainted.taints.clear();
        variants.push(untainted);
        let mut hand = as_desired.clone();
        hand.labels.insert("owner".to_owned(), "alice".to_owned());
        variants.push(hand);
        for (index, observed) in variants.iter().enumerate() {
            assert_eq!(
                declared.carried_by(observed),
                relabel(&NodeName::from("n"), &desired, observed).is_none(),
                "{pool} variant {index}"
            );
        }
    }
}
