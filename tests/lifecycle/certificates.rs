//! Certificate renewal on the lab: moving the lab clock to 20 days before the certificates
//! expire (inside the default `renewBefore` of 30 days) makes the daemon renew them on the
//! control plane and re-deliver the kubeconfig to Flux; no machine is replaced.

use std::time::Duration;

use capstan::clock::Clock as _;
use capstan_testkit::judge::{self, Judge};
use capstan_testkit::{World, cluster_yaml, fleet_yaml, kubectl_with, ready};

const CLUSTER: &str = "certs";
const DAY: Duration = Duration::from_secs(86_400);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_days_before_expiry_the_certificates_are_renewed_and_redelivered() {
    if !judge::present(&[Judge::Kubectl]) {
        return;
    }
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(
            CLUSTER,
            cluster_yaml(CLUSTER, 34, "1.36.2", 2, "debian13-k8s"),
        )],
    )
    .await;
    world.start_daemon().await;
    let status = world
        .wait_for("the cluster Ready", |s| ready(s, &[CLUSTER]))
        .await;
    let expiry = status.clusters[CLUSTER]
        .certificate_expiry
        .expect("status reports the certificate expiry");
    let now = world.lab.clock().now();
    let lifetime = now.duration_until(expiry);
    assert!(
        lifetime > jiff::SignedDuration::from_hours(24 * 364),
        "kubeadm's certificates last a year: {lifetime:?}"
    );
    let delivered = world.flux_kubeconfig(CLUSTER).expect("delivered");
    let vms = world.vm_views(CLUSTER);
    assert_eq!(world.steps_ok("renew-certificates"), 0);

    // To 20 days before expiry.
    let to_go = Duration::try_from(lifetime).expect("positive") - 20 * DAY;
    let recorder = world.record(CLUSTER);
    world.lab.clock().advance(to_go);
    let status = world
        .wait_for(
            "the certificates renewed and Flux holding the new kubeconfig",
            |s| {
                let now = world.lab.clock().now();
                s.clusters.get(CLUSTER).is_some_and(|c| {
                    c.phase == capstan::status::Phase::Ready
                        && c.certificate_expiry.is_some_and(|e| {
                            now.duration_until(e) > jiff::SignedDuration::from_hours(24 * 364)
                        })
                })
            },
        )
        .await;
    let timeline = recorder.finish().await;
    assert_eq!(world.steps_ok("renew-certificates"), 1, "renewed once");

    let renewed = status.clusters[CLUSTER].certificate_expiry.expect("expiry");
    let ahead = world.lab.clock().now().duration_until(renewed);
    assert!(
        ahead > jiff::SignedDuration::from_hours(24 * 364)
            && ahead <= jiff::SignedDuration::from_hours(24 * 365),
        "the new certificates last a year from the lab clock: {ahead:?}"
    );
    assert!(
        renewed.duration_since(expiry) >= jiff::SignedDuration::from_hours(24 * 344),
        "the expiry moved ahead by the time the clock moved: {expiry} → {renewed}"
    );

    // Flux holds the renewed kubeconfig, and it works.
    let redelivered = world.flux_kubeconfig(CLUSTER).expect("delivered");
    assert_ne!(redelivered, delivered, "the Flux Secret's content changes");
    let condition = status.clusters[CLUSTER]
        .conditions
        .iter()
        .find(|c| c.kind == capstan::status::conditions::KUBECONFIG_DELIVERED)
        .expect("condition");
    assert_eq!(condition.status, "True", "{condition:?}");
    let file = world.state.path().join("certs-from-flux.kubeconfig");
    std::fs::write(&file, &redelivered).expect("write");
    let nodes = kubectl_with(&file, &["get", "nodes", "-o", "name"]);
    assert_eq!(nodes.lines().count(), 3);
    let certificate = capstan::providers::kube::client_certificate_expiry(&redelivered)
        .expect("parses")
        .expect("a client certificate");
    assert_eq!(
        certificate, renewed,
        "Flux's kubeconfig carries the renewed certificate"
    );

    // Renewal is in place: no machine moved, nothing was cordoned.
    assert_eq!(world.vm_views(CLUSTER), vms, "no machine replaced");
    for sample in &timeline.0 {
        assert!(
            sample.nodes.iter().all(|n| n.is_serving()),
            "nothing is cordoned or NotReady:\n{}",
            timeline.dump()
        );
    }
    world.kill_daemon().await;
}
