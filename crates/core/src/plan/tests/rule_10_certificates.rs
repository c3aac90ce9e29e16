//! Rule 10, certificates and kubeconfig delivery.

use super::*;

#[test]
fn rule_10_certificates_near_expiry_are_renewed_then_delivered() {
    let prod = Cluster::test("prod");
    let desired = desired(vec![prod]);
    let mut observed = built(&desired);
    cluster_mut(&mut observed, "prod")
        .control_plane
        .as_mut()
        .expect("initialised")
        .certificates_expire = Some("2026-05-20T00:00:00Z".parse().expect("time"));
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(shape(&cluster.steps), vec![c("renew-certificates")]);
    assert_eq!(
        cluster.steps[0].reason,
        "certificates expire at 2026-05-20T00:00:00Z, within certificates.renewBefore 30days"
    );
    assert_eq!(
        shape(&cluster.predicted),
        vec![c("renew-certificates"), c("deliver-kubeconfig")]
    );
    assert_eq!(
        cluster.predicted[1].reason,
        "the admin kubeconfig changes with renew-certificates"
    );
}

#[test]
fn rule_10_a_kubeconfig_that_differs_from_fluxs_is_redelivered() {
    let desired = desired(vec![Cluster::test("prod")]);
    let mut observed = built(&desired);
    cluster_mut(&mut observed, "prod").flux = Some(FluxSecret {
        target: FluxTarget {
            cluster: "management".into(),
            namespace: "flux-system".into(),
            secret_name: "prod-kubeconfig".into(),
        },
        kubeconfig: "sha256:00000000000000bb".into(),
    });
    let plan = plan_at(&desired, &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    assert_eq!(
        cluster.steps,
        vec![Step {
            action: Action::DeliverKubeconfig {
                flux: FluxTarget {
                    cluster: "management".into(),
                    namespace: "flux-system".into(),
                    secret_name: "prod-kubeconfig".into(),
                }
            },
            target: Target {
                cluster: "prod".into(),
                ..Target::default()
            },
            reason: "Flux holds kubeconfig sha256:00000000000000bb, the cluster's admin kubeconfig is sha256:00000000000000aa".into(),
            disruptive: false,
            waits_on: None,
        }]
    );
}
