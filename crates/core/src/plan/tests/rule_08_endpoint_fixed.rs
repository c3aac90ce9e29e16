//! Rule 8, the endpoint never changes after init.

use super::*;

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
