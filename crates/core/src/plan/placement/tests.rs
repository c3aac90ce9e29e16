//! Unit tests of placement: memory, template sites and hardware.

use super::*;
use crate::observed::ProxmoxNode;

#[test]
fn names_are_deterministic_dns_labels_with_five_base36_chars() {
    let name = machine_name("prod", "general", "0123456789ab", 0);
    assert_eq!(name, machine_name("prod", "general", "0123456789ab", 0));
    assert_ne!(name, machine_name("prod", "general", "0123456789ab", 1));
    let suffix = name
        .as_str()
        .strip_prefix("capstan-prod-general-")
        .expect("prefix");
    assert_eq!(suffix.len(), 5);
    assert!(
        suffix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    );
}

#[test]
fn placement_spreads_then_prefers_free_memory_and_explains_refusals() {
    let node = |online, used| ProxmoxNode {
        online,
        memory_total_mib: 65536,
        memory_used_mib: used,
        vm_count: 0,
        bridges: None,
    };
    let observed = Observed {
        clusters: BTreeMap::new(),
        proxmox_nodes: Some(BTreeMap::from([
            ("pve1".to_owned(), node(true, 60000)),
            ("pve2".to_owned(), node(true, 10000)),
            ("pve3".to_owned(), node(false, 0)),
        ])),
        ..Observed::default()
    };
    let capacity = Capacity::of(&observed);
    let placement: Vec<String> = ["pve1", "pve2", "pve3"].map(String::from).to_vec();
    assert_eq!(
        capacity.choose(
            &placement,
            4096,
            &BTreeMap::new(),
            &HardwareNeeds::default()
        ),
        Ok("pve2")
    );
    let spread = BTreeMap::from([("pve2", 1)]);
    assert_eq!(
        capacity.choose(&placement, 4096, &spread, &HardwareNeeds::default()),
        Ok("pve1")
    );
    assert_eq!(
        capacity.choose(
            &placement,
            60000,
            &BTreeMap::new(),
            &HardwareNeeds::default()
        ),
        Err(NoNodeFits::Refused(vec![
            NodeRefused::Memory {
                node: "pve1".into(),
                free_mib: 5536,
            },
            NodeRefused::Memory {
                node: "pve2".into(),
                free_mib: 55536,
            },
            NodeRefused::Offline {
                node: "pve3".into(),
            },
        ]))
    );
    assert_eq!(
        capacity
            .choose(
                &placement,
                60000,
                &BTreeMap::new(),
                &HardwareNeeds::default()
            )
            .expect_err("no room")
            .to_string(),
        "pve1 has 5536 MiB free, pve2 has 55536 MiB free, pve3 is offline"
    );
}

fn with_templates(copies: &[(&str, &str, bool)]) -> Capacity {
    let mut templates: BTreeMap<String, Vec<ObservedTemplate>> = BTreeMap::new();
    for (index, (name, node, shared)) in copies.iter().enumerate() {
        templates
            .entry((*name).to_owned())
            .or_default()
            .push(ObservedTemplate {
                proxmox_node: (*node).to_owned(),
                vm_id: crate::model::VmId(9000 + u32::try_from(index).expect("small")),
                shared_storage: *shared,
                distributions: Vec::new(),
                memory_hotplug: false,
                without_cloud_init_drive: false,
            });
    }
    Capacity::of(&Observed {
        proxmox_templates: Some(templates),
        proxmox_storages: Some(BTreeMap::from([
            (
                "local-lvm".to_owned(),
                ObservedStorage {
                    shared: false,
                    nodes: BTreeMap::new(),
                },
            ),
            (
                "ceph".to_owned(),
                ObservedStorage {
                    shared: true,
                    nodes: BTreeMap::new(),
                },
            ),
        ])),
        ..Observed::default()
    })
}

#[test]
fn clones_go_where_the_template_is_or_anywhere_from_shared_storage() {
    let placement: Vec<String> = ["pve1", "pve2", "pve3"].map(String::from).to_vec();
    let local = with_templates(&[("debian", "pve2", false), ("debian", "pve3", false)]);
    assert_eq!(
        local.clone_targets("debian", None, &placement, Distribution::Kubeadm),
        Ok(vec!["pve2".to_owned(), "pve3".to_owned()])
    );
    let shared = with_templates(&[("debian", "pve2", true)]);
    assert_eq!(
        shared.clone_targets("debian", Some("ceph"), &placement, Distribution::Kubeadm),
        Ok(placement.clone())
    );
    // A full clone to another node must also write to shared storage.
    assert_eq!(
        shared.clone_targets(
            "debian",
            Some("local-lvm"),
            &placement,
            Distribution::Kubeadm
        ),
        Ok(vec!["pve2".to_owned()])
    );
    let unobserved = Capacity::of(&Observed::default());
    assert_eq!(
        unobserved.clone_targets("debian", None, &placement, Distribution::Kubeadm),
        Ok(placement.clone())
    );
}

#[test]
fn a_template_no_node_of_placement_can_clone_is_refused_with_its_nodes_and_a_fix() {
    let capacity = with_templates(&[("debian", "pve1", false)]);
    let placement: Vec<String> = ["pve2", "pve3"].map(String::from).to_vec();
    let refusal = capacity
        .clone_targets("debian", None, &placement, Distribution::Kubeadm)
        .expect_err("refused");
    assert!(matches!(refusal, Unclonable::OffPlacement { .. }));
    assert_eq!(
        refusal.to_string(),
        "template debian is on pve1 (VM 9000, local storage) and cannot be cloned to placement pve2, pve3 (a template on local storage can only be cloned on its own node); add pve1 to placement, copy the template to a node of placement, or put it on shared storage"
    );
    let missing = capacity
        .clone_targets("ubuntu", None, &placement, Distribution::Kubeadm)
        .expect_err("refused");
    assert!(
        missing
            .to_string()
            .starts_with("template ubuntu exists on no Proxmox node"),
        "{missing}"
    );
}

#[test]
fn a_template_built_for_another_distribution_is_no_source_for_a_clone() {
    let placement: Vec<String> = ["pve1", "pve2"].map(String::from).to_vec();
    let mut capacity = Observed {
        proxmox_templates: Some(BTreeMap::from([(
            "debian13-k8s".to_owned(),
            ["pve1", "pve2"]
                .iter()
                .zip(9000..)
                .map(|(node, vm_id)| ObservedTemplate {
                    proxmox_node: (*node).to_owned(),
                    vm_id: crate::model::VmId(vm_id),
                    shared_storage: false,
                    distributions: vec![Distribution::Kubeadm],
                    memory_hotplug: false,
                    without_cloud_init_drive: false,
                })
                .collect(),
        )])),
        ..Observed::default()
    };
    let refusal = Capacity::of(&capacity)
        .clone_targets("debian13-k8s", None, &placement, Distribution::K3s)
        .expect_err("refused");
    assert_eq!(
        refusal.to_string(),
        "template debian13-k8s is built for kubeadm (its tags or description say so), not k3s: its clones could not run k3s; name a k3s template in machine.template, or tag this one k3s once it carries k3s"
    );
    assert_eq!(
        Capacity::of(&capacity).clone_targets(
            "debian13-k8s",
            None,
            &placement,
            Distribution::Kubeadm
        ),
        Ok(placement.clone())
    );
    // The copy on pve2 says it carries both: only it is a source.
    if let Some(copies) = capacity
        .proxmox_templates
        .as_mut()
        .and_then(|t| t.get_mut("debian13-k8s"))
    {
        copies[1].distributions = vec![Distribution::Kubeadm, Distribution::K3s];
    }
    assert_eq!(
        Capacity::of(&capacity).clone_targets("debian13-k8s", None, &placement, Distribution::K3s),
        Ok(vec!["pve2".to_owned()])
    );
}

#[test]
fn a_template_declares_its_distributions_in_its_tags_or_its_description() {
    let declared = |tags: &[&str], description: &str| {
        ObservedTemplate::declared_distributions(tags.iter().copied(), description)
    };
    assert_eq!(declared(&["debian", "K3s"], ""), vec![Distribution::K3s]);
    assert_eq!(
        declared(
            &["kubeadm"],
            "Debian 13 with CRI-O\nDistribution: k3s, kubeadm\n"
        ),
        vec![Distribution::Kubeadm, Distribution::K3s]
    );
    assert_eq!(declared(&[], "built 2026-05-01"), Vec::new());
    assert_eq!(
        declared(&["talos"], "distribution: talos"),
        vec![Distribution::Talos]
    );
}

#[test]
fn a_template_with_memory_hotplug_is_no_source_for_a_talos_clone() {
    let placement: Vec<String> = ["pve1", "pve2"].map(String::from).to_vec();
    let mut capacity = Observed {
        proxmox_templates: Some(BTreeMap::from([(
            "talos-v1.13.9".to_owned(),
            ["pve1", "pve2"]
                .iter()
                .zip(9400..)
                .map(|(node, vm_id)| ObservedTemplate {
                    proxmox_node: (*node).to_owned(),
                    vm_id: crate::model::VmId(vm_id),
                    shared_storage: false,
                    distributions: vec![Distribution::Talos],
                    memory_hotplug: true,
                    without_cloud_init_drive: false,
                })
                .collect(),
        )])),
        ..Observed::default()
    };
    let refusal = Capacity::of(&capacity)
        .clone_targets("talos-v1.13.9", None, &placement, Distribution::Talos)
        .expect_err("refused");
    assert_eq!(
        refusal.to_string(),
        "template talos-v1.13.9 has memory hotplug enabled: Talos sees only the memory present at boot; remove `memory` from the template's Hotplug option (Hardware → Hotplug)"
    );
    // The copy on pve2 without it is the only source.
    if let Some(copies) = capacity
        .proxmox_templates
        .as_mut()
        .and_then(|t| t.get_mut("talos-v1.13.9"))
    {
        copies[1].memory_hotplug = false;
    }
    assert_eq!(
        Capacity::of(&capacity).clone_targets(
            "talos-v1.13.9",
            None,
            &placement,
            Distribution::Talos
        ),
        Ok(vec!["pve2".to_owned()])
    );
}
