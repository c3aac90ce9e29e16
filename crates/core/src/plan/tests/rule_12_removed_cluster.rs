//! Rule 12, removed cluster files.

use super::*;

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
