//! Rule 4, several removals in one change go one at a time.

use super::*;

#[test]
fn rule_4_several_removals_go_one_at_a_time() {
    let before = Cluster::test("prod").with_workers("general", 4);
    let observed = built(&desired(vec![before.clone()]));
    let plan = plan_at(
        &desired(vec![before.with_workers("general", 2)]),
        &observed,
        now(),
    );
    let cluster = plan.cluster("prod").expect("planned");
    let old = machines_of(&observed, "prod", "general");
    assert_eq!(shape(&cluster.steps), vec![s("cordon", &old[0])]);
    assert_eq!(cluster.steps[0].reason, "surplus: pool general wants 2");
    let mut expected = removal(&old[0]);
    expected.extend(removal(&old[1]));
    assert_eq!(shape(&cluster.predicted), expected);
}
