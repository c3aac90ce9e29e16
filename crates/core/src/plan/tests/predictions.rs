//! Predictions keep quiet machines aside ([`super::cluster::Quiet`]) and hand out names from a
//! floor: each batch costs what it touches. These tests hold them to the prediction made the
//! slow way, planning every machine at every batch, step for step (reasons included), on
//! clusters big enough for most machines to sit still through most batches, and to a budget.

use std::sync::atomic::AtomicBool;

use proptest::prelude::*;

use super::super::cluster::{Input, SpecMemo};
use super::super::placement::Capacity;
use super::super::simulate::predict_by_replanning;
use super::*;
use crate::observed::ObservedNode;

/// 3 control planes, pools `general` (12) and `big` (8), with a maxSurge of `surge`.
fn medium(surge: u32) -> Cluster {
    Cluster::test("mid")
        .with_control_planes(3)
        .with_workers("general", 12)
        .with_workers("big", 8)
        .with_max_surge(surge)
}

/// `cluster` with pool `general` labelled and tainted.
fn labelled(mut cluster: Cluster) -> Cluster {
    let pool = cluster
        .spec
        .workers
        .iter_mut()
        .find(|p| p.pool == "general")
        .expect("pool");
    pool.labels
        .insert("workload-class".to_owned(), "cpu".to_owned());
    pool.taints.push(crate::spec::NodeTaint {
        key: "dedicated".to_owned(),
        value: None,
        effect: crate::spec::TaintEffect::NoSchedule,
    });
    cluster
}

/// Asserts that each cluster's prediction in the plan of `observed` is the one made by
/// planning every batch from scratch.
fn assert_predicted_as_by_replanning(desired: &Desired, observed: &Observed) {
    let plan = plan_at(desired, observed, now());
    let policy = Policy::of(desired);
    let empty = crate::observed::ObservedCluster::default();
    for cluster in &plan.clusters {
        let Some(spec) = desired.clusters.get(&cluster.name).map(|c| &c.spec) else {
            continue;
        };
        let memo = SpecMemo::default();
        let input = Input {
            name: &cluster.name,
            spec,
            observed: observed.clusters.get(&cluster.name).unwrap_or(&empty),
            durations: &observed.step_durations,
            policy: &policy,
            now: now(),
            memo: &memo,
            predicting: false,
            quiet: None,
            stop: None,
            labels_settled: false,
        };
        let slow = predict_by_replanning(&input, &Capacity::of(observed));
        let fast = &cluster.predicted;
        let differs = (0..fast.len().max(slow.len())).find(|&i| fast.get(i) != slow.get(i));
        if let Some(index) = differs {
            panic!(
                "{}: the prediction differs from planning every batch at step {index} of {}/{}:\nbefore {:?}\nfast {:#?}\nslow {:#?}",
                cluster.name,
                fast.len(),
                slow.len(),
                shape(&slow[index.saturating_sub(3)..index.min(slow.len())]),
                fast.get(index),
                slow.get(index)
            );
        }
    }
}

#[test]
fn predictions_are_those_of_planning_every_batch_from_scratch() {
    let built_world = built(&desired(vec![medium(1)]));
    let changes: Vec<(&str, Cluster)> = vec![
        ("from nothing", medium(1)),
        (
            "template of one pool",
            medium(1).with_template("general", "debian13-k8s-v2"),
        ),
        (
            "templates of every pool, surge 3",
            medium(3)
                .with_template("cp", "debian13-k8s-v2")
                .with_template("general", "debian13-k8s-v2")
                .with_template("big", "debian13-k8s-v2"),
        ),
        ("scale down", medium(1).with_workers("general", 3)),
        ("scale up", medium(2).with_workers("big", 15)),
        ("a pool removed", medium(1).without_pool("big")),
        (
            "a pool removed and another changed",
            medium(1)
                .without_pool("general")
                .with_template("big", "debian13-k8s-v2"),
        ),
        ("patch upgrade", medium(1).with_version("1.36.4")),
        (
            "drift replaced, in a window",
            medium(1).with_drift_replace().with_window(),
        ),
        (
            "labels of a pool with its template",
            labelled(medium(1).with_template("general", "debian13-k8s-v2")),
        ),
        ("labels of nodes built before them", medium(1)),
    ];
    for (what, cluster) in changes {
        let desired = desired(vec![cluster]);
        let observed = if what == "from nothing" {
            Observed::nothing()
        } else {
            built_world.clone()
        };
        let mut observed = observed;
        if what == "labels of nodes built before them" {
            for node in cluster_mut(&mut observed, "mid").nodes.values_mut() {
                node.labels.clear();
                node.managed = Default::default();
            }
        }
        if what.starts_with("drift") {
            let state = cluster_mut(&mut observed, "mid");
            for vm in state.machines.values_mut().skip(4).step_by(3) {
                if let Some(config) = &mut vm.config {
                    config.cores += 2;
                }
            }
        }
        assert_predicted_as_by_replanning(&desired, &observed);
        let predicted = &plan_at(&desired, &observed, now()).clusters[0].predicted;
        assert!(!predicted.is_empty(), "{what}: something to predict");
    }
}

#[test]
fn a_minor_upgrade_with_dead_and_unready_nodes_is_predicted_as_by_replanning() {
    let cluster = medium(2).with_fencing();
    let mut observed = built(&desired(vec![cluster.clone()]));
    let state = cluster_mut(&mut observed, "mid");
    let names: Vec<NodeName> = state.machines.keys().cloned().collect();
    let workers: Vec<&NodeName> = names
        .iter()
        .filter(|n| state.machines[*n].ownership.role == Role::Worker)
        .collect();
    // A dead worker (fenced, then replaced) and one still booting.
    let dead = workers[2];
    let node = state.nodes.get_mut(dead).expect("node");
    node.ready = false;
    node.ready_since = minutes(-30);
    let vm = state.machines.get_mut(dead).expect("vm");
    vm.power = PowerState::Stopped;
    vm.guest_agent = false;
    let young = workers[7];
    state.machines.get_mut(young).expect("vm").created = minutes(-2);
    state.nodes.get_mut(young).expect("node").ready = false;
    let mut desired = desired(vec![cluster.with_version("1.37.0")]);
    desired
        .fleet
        .approved_minors
        .push("1.37".parse().expect("minor"));
    assert_predicted_as_by_replanning(&desired, &observed);
}

#[test]
fn a_rollout_of_hundreds_of_machines_is_predicted_to_its_end() {
    // A prediction used to stop after 2,000 batches: some 330 replacements, silently.
    let cluster = |template| {
        Cluster::test("big")
            .with_workers("general", 600)
            .with_template("general", template)
    };
    let observed = built(&desired(vec![cluster("debian13-k8s")]));
    let changed = desired(vec![cluster("debian13-k8s-v2")]);
    let plan = plan_at(&changed, &observed, now());
    let predicted = &plan.clusters[0].predicted;
    assert_eq!(
        predicted.len(),
        600 * 8,
        "create, prepare, join and 5 removal steps each"
    );
    let replaced = machines_of(&observed, "big", "general");
    let destroyed: Vec<&NodeName> = predicted
        .iter()
        .filter(|s| s.name() == "destroy-machine")
        .filter_map(|s| s.target.machine.as_ref())
        .collect();
    assert_eq!(destroyed.len(), 600);
    assert!(replaced.iter().all(|old| destroyed.contains(&old)));
}

#[test]
fn a_prediction_past_its_budget_is_refused_and_never_partial() {
    let observed = built(&desired(vec![medium(1)]));
    let desired = desired(vec![medium(1).with_template("general", "debian13-k8s-v2")]);
    let policy = Policy::of(&desired);
    let full = plan_at(&desired, &observed, now());
    let steps = full.clusters[0].predicted.len();
    let never = AtomicBool::new(false);
    let enough = Budget::new(steps, &never);
    assert_eq!(
        plan_within(&desired, &observed, &policy, now(), &enough),
        Ok(full)
    );
    let short = Budget::new(steps - 1, &never);
    assert_eq!(
        plan_within(&desired, &observed, &policy, now(), &short),
        Err(Exceeded::Steps { limit: steps - 1 })
    );
    let stopped = AtomicBool::new(true);
    assert_eq!(
        plan_within(
            &desired,
            &observed,
            &policy,
            now(),
            &Budget::new(usize::MAX, &stopped)
        ),
        Err(Exceeded::Stopped)
    );
}

#[derive(Debug, Clone)]
struct Change {
    general: (u32, u32),
    big: (u32, u32),
    surge: u32,
    templates: [bool; 3],
    patch: bool,
    unready: Vec<usize>,
}

fn change() -> impl Strategy<Value = Change> {
    (
        (0u32..=16, 0u32..=16),
        (0u32..=6, 0u32..=6),
        1u32..=3,
        any::<[bool; 3]>(),
        any::<bool>(),
        prop::collection::vec(0usize..40, 0..3),
    )
        .prop_map(|(general, big, surge, templates, patch, unready)| Change {
            general: (general.0.max(2), general.1.max(2)),
            big,
            surge,
            templates,
            patch,
            unready,
        })
}

fn shaped(general: u32, big: u32, surge: u32) -> Cluster {
    let cluster = Cluster::test("mid")
        .with_control_planes(3)
        .with_workers("general", general)
        .with_max_surge(surge);
    if big > 0 {
        cluster.with_workers("big", big)
    } else {
        cluster
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_changes_of_bigger_clusters_are_predicted_as_by_replanning(change in change()) {
        let before = shaped(change.general.0, change.big.0, 1);
        let mut observed = built(&desired(vec![before]));
        let state = cluster_mut(&mut observed, "mid");
        let names: Vec<NodeName> = state.nodes.keys().cloned().collect();
        for index in &change.unready {
            let node: &mut ObservedNode = state.nodes.get_mut(&names[index % names.len()]).expect("node");
            node.ready = false;
        }
        let mut after = shaped(change.general.1, change.big.1, change.surge);
        for (pool, changed) in ["cp", "general", "big"].into_iter().zip(change.templates) {
            if changed && (pool != "big" || change.big.1 > 0) {
                after = after.with_template(pool, "debian13-k8s-v2");
            }
        }
        if change.patch {
            after = after.with_version("1.36.4");
        }
        assert_predicted_as_by_replanning(&desired(vec![after]), &observed);
    }
}
