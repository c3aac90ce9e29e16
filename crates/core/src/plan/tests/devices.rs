//! PCI devices in a replacement: new before old while a node has a free device of the pool's
//! mapping; old before new when every device is held (one per node, as GPU hosts have), the
//! old machine leaving first and its replacement taking the device it gives back.

use super::*;

const MAPPING: &str = "gpu-a40";

/// Pool `gpu` (two workers, each with a device of [`MAPPING`], on pve1 and pve2) beside the
/// default pool; built, then its template changed. `devices` lists the node of each device
/// the mapping has.
fn gpu_rollout(devices: &[&str]) -> (crate::spec::Desired, Observed, Vec<NodeName>) {
    let before =
        Cluster::test("prod")
            .with_workers("gpu", 2)
            .with_pci("gpu", MAPPING, &["pve1", "pve2"]);
    let mut observed = built(&desired(vec![before.clone()]));
    let nodes = devices.iter().map(|node| (*node).to_owned()).collect();
    observed.pci_mappings = Some(BTreeMap::from([(MAPPING.to_owned(), nodes)]));
    let after = before.with_template("gpu", "debian13-k8s-v2");
    let old = machines_of(&observed, "prod", "gpu");
    (desired(vec![after]), observed, old)
}

#[test]
fn with_every_device_held_the_old_machine_leaves_first_and_the_preview_says_why() {
    let (desired, observed, old) = gpu_rollout(&["pve1", "pve2"]);
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert!(cluster.blocked.is_empty(), "{:?}", cluster.blocked);
    assert_eq!(shape(&cluster.steps), vec![s("cordon", &old[0])]);
    assert_eq!(
        cluster.steps[0].reason,
        "outdated: template debian13-k8s → debian13-k8s-v2; old before new: every device of PCI mapping gpu-a40 is held, so it leaves first and its replacement takes the device it gives back"
    );
    // One old machine at a time: the second leaves only once the first one's replacement,
    // on the node whose device it took, is Ready.
    let predicted = shape(&cluster.predicted);
    let old_node = |name: &NodeName| {
        observed.clusters["prod"].machines[name]
            .proxmox_node
            .clone()
    };
    let creates: Vec<&Step> = cluster
        .predicted
        .iter()
        .filter(|step| step.name() == "create-machine")
        .collect();
    assert_eq!(creates.len(), 2, "{predicted:?}");
    for (create, old) in creates.iter().zip(&old) {
        let Action::CreateMachine { proxmox_node, .. } = &create.action else {
            unreachable!("filtered")
        };
        assert_eq!(
            *proxmox_node,
            old_node(old),
            "takes the device {old} gave back"
        );
    }
    assert!(
        creates[0]
            .reason
            .contains("old before new, it takes the PCI device the member that left gave back"),
        "{}",
        creates[0].reason
    );
    let position = |action: &'static str, name: &NodeName| {
        predicted
            .iter()
            .position(|step| *step == s(action, name))
            .unwrap_or_else(|| panic!("{action} {name} in {predicted:?}"))
    };
    let new_first = creates[0].target.machine.clone().expect("named");
    assert!(position("destroy-machine", &old[0]) < position("create-machine", &new_first));
    assert!(position("join-node", &new_first) < position("cordon", &old[1]));
}

#[test]
fn with_a_free_device_the_replacement_comes_first_as_always() {
    let (desired, observed, old) = gpu_rollout(&["pve1", "pve1", "pve2"]);
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let shape = shape(&cluster.steps);
    assert_eq!(shape.len(), 1, "{shape:?}");
    assert_eq!(shape[0].0, "create-machine");
    assert!(
        cluster.steps[0]
            .reason
            .contains("created before the old one leaves"),
        "{}",
        cluster.steps[0].reason
    );
    let Action::CreateMachine { proxmox_node, .. } = &cluster.steps[0].action else {
        unreachable!("a create")
    };
    assert_eq!(proxmox_node.as_str(), "pve1", "where the free device is");
    assert!(!old.is_empty());
}

#[test]
fn a_new_machine_without_a_member_to_give_a_device_back_is_refused_naming_the_mapping() {
    let (_, observed, _) = gpu_rollout(&["pve1", "pve2"]);
    let grown =
        Cluster::test("prod")
            .with_workers("gpu", 3)
            .with_pci("gpu", MAPPING, &["pve1", "pve2"]);
    let plan = plan_at(&desired(vec![grown]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert!(cluster.steps.is_empty(), "{:?}", shape(&cluster.steps));
    let blocked: Vec<&str> = cluster.blocked.iter().map(|b| b.message.as_str()).collect();
    assert!(
        blocked
            .iter()
            .any(|m| m
                .contains("every device of PCI mapping gpu-a40 on pve1 is held by a running VM")),
        "{blocked:?}"
    );
}
