//! Rule 15, capacity.

use super::*;

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
