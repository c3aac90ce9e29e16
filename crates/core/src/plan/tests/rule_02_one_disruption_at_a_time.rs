//! Rule 2, one disruptive step at a time per cluster; clusters are independent.

use super::*;

#[test]
fn rule_2_a_batch_holds_one_disruptive_step_and_clusters_do_not_wait_for_each_other() {
    let prod = Cluster::test("prod").with_workers("general", 3);
    let staging = Cluster::test("staging");
    let before = desired(vec![prod.clone(), staging.clone()]);
    let observed = built(&before);
    // Every general worker is surplus: three removals are possible, one is planned.
    let after = desired(vec![
        prod.clone().with_workers("general", 1).with_min_workers(1),
        staging.clone().with_version("1.36.3"),
    ]);
    let plan = plan_at(&after, &observed, now());
    let prod_plan = plan.cluster("prod").expect("planned");
    assert_eq!(prod_plan.steps.len(), 1);
    assert!(prod_plan.steps[0].disruptive);
    assert_eq!(prod_plan.steps[0].name(), "cordon");
    let staging_plan = plan.cluster("staging").expect("planned");
    assert_eq!(shape(&staging_plan.steps), vec![c("upgrade-control-plane")]);
    // Each cluster's plan is the plan it gets alone.
    let alone = plan_at(
        &desired(vec![staging.with_version("1.36.3")]),
        &observed,
        now(),
    );
    assert_eq!(alone.cluster("staging"), Some(staging_plan));
}
