//! Rule 14, drift.

use super::*;

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
