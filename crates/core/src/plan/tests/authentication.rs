//! `kubernetes.authentication` reaches the API servers only: a change replaces the control
//! planes, one at a time, new before old, and no worker.

use super::*;
use crate::spec::authentication::{Authentication, ClaimMapping, ClaimMappings, JwtIssuer};

fn with_issuer(mut cluster: Cluster, url: &str) -> Cluster {
    cluster.spec.kubernetes.authentication = Some(Authentication {
        jwt: vec![JwtIssuer {
            url: url.to_owned(),
            audiences: vec!["kubernetes".to_owned()],
            certificate_authority: None,
            claim_mappings: ClaimMappings {
                username: ClaimMapping {
                    claim: "email".to_owned(),
                    prefix: "oidc:".to_owned(),
                },
                groups: None,
            },
        }],
    });
    cluster
}

#[test]
fn a_changed_issuer_replaces_the_control_planes_one_at_a_time_and_no_worker() {
    let before = Cluster::test("prod")
        .with_control_planes(3)
        .with_workers("general", 2);
    let observed = built(&desired(vec![before.clone()]));
    let after = with_issuer(before.clone(), "https://sso.example.com/realms/lab");
    assert_eq!(
        after.hash("general"),
        before.hash("general"),
        "not a worker's"
    );
    assert_ne!(after.hash("cp"), before.hash("cp"), "a control plane's");
    let plan = plan_at(&desired(vec![after.clone()]), &observed, now());
    let cluster = plan.cluster("prod").expect("planned");
    let old = machines_of(&observed, "prod", "cp");
    let new: Vec<NodeName> = (0..3).map(|i| after.name_of("cp", i)).collect();
    let mut expected = Vec::new();
    for (new, old) in new.iter().zip(&old) {
        expected.extend([
            s("create-machine", new),
            s("prepare-node", new),
            s("join-node", new),
        ]);
        expected.extend([
            s("cordon", old),
            s("drain", old),
            s("delete-node", old),
            s("reset-node", old),
        ]);
        expected.push(c("deliver-kubeconfig"));
        expected.push(s("destroy-machine", old));
    }
    let shape = shape(&cluster.predicted);
    assert_eq!(
        shape
            .iter()
            .filter(|(_, machine)| machine.contains("-general-"))
            .count(),
        0,
        "no worker is touched: {shape:#?}"
    );
    assert_eq!(
        shape
            .iter()
            .filter(|(action, _)| *action != "deliver-kubeconfig")
            .cloned()
            .collect::<Vec<_>>(),
        expected
            .into_iter()
            .filter(|(action, _)| *action != "deliver-kubeconfig")
            .collect::<Vec<_>>(),
        "one control plane at a time, the new one joined before the old one leaves"
    );
    let first = &cluster.steps[0];
    assert!(
        first.reason.contains("authentication changed"),
        "{}",
        first.reason
    );
}

#[test]
fn a_cluster_whose_control_planes_run_the_issuer_has_nothing_to_do() {
    let signed_on = with_issuer(Cluster::test("prod"), "https://sso.example.com");
    let desired = desired(vec![signed_on]);
    let observed = built(&desired);
    let plan = plan_at(&desired, &observed, now());
    assert!(plan.clusters[0].predicted.is_empty());
}
