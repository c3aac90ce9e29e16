//! Figures for the simulated API servers (printed, not asserted: the machine is shared), with
//! assertions on what the measured work did. Run with `--nocapture` to see them.

use std::time::{Duration, Instant};

use crate::kube_support::{drain_world, lab, open_spare_workers};
use capstan::model::NodeName;
use capstan::providers::kube::{ClusterClient, DrainOptions, KubeClusterClient};

#[tokio::test]
async fn sequential_writes_each_bump_the_revision_once() {
    let started = Instant::now();
    let lab = lab(&drain_world(false)).await;
    let lab_start = started.elapsed();
    let prod = lab.cluster("prod").expect("prod");
    let client = KubeClusterClient::connect(&prod.admin_kubeconfig())
        .await
        .expect("client");
    let w1 = NodeName::from("w1");
    let revision = |cluster: &capstan_lab::kube::SimCluster| -> u64 {
        cluster.object("nodes", None, "w1").expect("w1")["metadata"]["resourceVersion"]
            .as_str()
            .expect("rv")
            .parse()
            .expect("number")
    };
    let rounds = 200u64;
    // The revision is cluster-wide: start from a write to this node, so nothing else moved it.
    client
        .annotate(&w1, "capstan.dev/round", Some("start"))
        .await
        .expect("annotate");
    let before = revision(&prod);
    let started = Instant::now();
    for round in 0..rounds {
        client
            .annotate(&w1, "capstan.dev/round", Some(&round.to_string()))
            .await
            .expect("annotate");
    }
    let writes = started.elapsed();
    assert_eq!(revision(&prod) - before, rounds, "one revision per write");
    let started = Instant::now();
    for _ in 0..rounds {
        client.nodes().await.expect("nodes");
    }
    let reads = started.elapsed();
    open_spare_workers(&prod);
    let started = Instant::now();
    let report = client
        .drain(
            &w1,
            &DrainOptions {
                timeout: Duration::from_secs(10),
                retry_interval: Duration::from_millis(100),
                ..DrainOptions::new(Duration::ZERO)
            },
        )
        .await
        .expect("drain");
    let drain = started.elapsed();
    assert_eq!(report.evicted.len(), 2);
    let per = |total: Duration| total.as_secs_f64() * 1000.0 / rounds as f64;
    println!("lab start (management + prod, 7 nodes): {lab_start:?}");
    println!(
        "node annotate (strategic merge patch): {:.2} ms/request",
        per(writes)
    );
    println!("list nodes: {:.2} ms/request", per(reads));
    println!("drain of 2 pods (cordon, list, 2 evictions, re-list): {drain:?}");
}
