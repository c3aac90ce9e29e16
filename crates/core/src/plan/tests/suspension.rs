//! Suspended clusters (`spec.suspend`, or `capstan suspend` through [`Policy::suspended`]):
//! every step is held by the suspension, as a deny window holds a disruptive one, and the
//! other clusters go on.

use super::*;

/// prod and staging, both built, then both given a new template: a rolling replacement each.
fn rolling(suspend_prod_in_git: bool) -> (Desired, Observed) {
    let prod = Cluster::test("prod").with_workers("general", 2);
    let staging = Cluster::test("staging").with_workers("general", 2);
    let observed = built(&desired(vec![prod.clone(), staging.clone()]));
    let mut prod = prod.with_template("general", "debian13-k8s-v2");
    prod.spec.suspend = suspend_prod_in_git;
    let staging = staging.with_template("general", "debian13-k8s-v2");
    (desired(vec![prod, staging]), observed)
}

fn runtime() -> Suspension {
    Suspension {
        source: SuspensionSource::Runtime,
        by: Some("CN=alice,O=ops".to_owned()),
        declared: false,
        at: Some(minutes(-5)),
        reason: Some("incident 42".to_owned()),
    }
}

#[test]
fn a_cluster_suspended_in_git_starts_no_step_and_the_others_go_on() {
    let (desired, observed) = rolling(true);
    let plan = plan_at(&desired, &observed, now());
    let prod = plan.cluster("prod").expect("planned");
    assert_eq!(prod.steps, vec![], "nothing starts on a suspended cluster");
    assert_eq!(prod.suspended, vec![Suspension::git()]);
    let held = Resource::Suspended(Suspension::git());
    // The step that would start now is held by the suspension (the cordon still waits on
    // the replacement first).
    let on_suspension: Vec<_> = prod
        .waiting_on
        .iter()
        .filter(|w| w.resource == held)
        .map(|w| w.step)
        .collect();
    assert_eq!(
        on_suspension,
        vec![Some(ActionKind::CreateMachine)],
        "{:?}",
        prod.waiting_on
    );
    assert_eq!(prod.phase, Phase::Updating);
    // The preview still says what would run, each step held by the suspension.
    assert!(!prod.predicted.is_empty());
    assert!(prod.predicted.iter().all(|s| s.waits_on
        == Some(Wait {
            resource: held.clone(),
            since: None
        })));
    assert_eq!(
        held.hold_phrase().as_deref(),
        Some("suspended: no step starts (suspended in Git (spec.suspend: true))")
    );
    let staging = plan.cluster("staging").expect("planned");
    assert!(!staging.steps.is_empty(), "staging goes on");
    assert_eq!(staging.suspended, vec![]);
}

#[test]
fn a_cluster_suspended_at_runtime_is_held_with_who_when_and_why() {
    let (desired, observed) = rolling(false);
    let mut policy = Policy::of(&desired);
    policy.suspended.insert("prod".to_owned(), runtime());
    let plan = plan(&desired, &observed, &policy, now());
    let prod = plan.cluster("prod").expect("planned");
    assert_eq!(prod.steps, vec![]);
    assert_eq!(prod.suspended, vec![runtime()]);
    assert!(
        prod.waiting_on
            .iter()
            .any(|w| w.resource == Resource::Suspended(runtime())),
        "{:?}",
        prod.waiting_on
    );
    assert_eq!(
        Resource::Suspended(runtime()).to_string(),
        format!(
            "suspended at runtime by CN=alice,O=ops at {}: incident 42",
            minutes(-5)
        )
    );
    assert!(!plan.cluster("staging").expect("planned").steps.is_empty());
    // Resumed: the same world plans the replacement again.
    let resumed = plan_at(&desired, &observed, now());
    assert!(!resumed.cluster("prod").expect("planned").steps.is_empty());
}

#[test]
fn a_suspension_in_git_and_at_runtime_are_both_listed_git_first() {
    let (desired, observed) = rolling(true);
    let mut policy = Policy::of(&desired);
    policy.suspended.insert("prod".to_owned(), runtime());
    let plan = plan(&desired, &observed, &policy, now());
    let prod = plan.cluster("prod").expect("planned");
    assert_eq!(prod.suspended, vec![Suspension::git(), runtime()]);
    assert_eq!(prod.steps, vec![]);
}

#[test]
fn a_step_already_waiting_on_the_world_still_says_so_when_suspended() {
    // A new worker was created and its VM has not booted yet: the join waits on the VM
    // first, whether the cluster is suspended or not; nothing is undone.
    let (desired, mut observed) = rolling(true);
    let unsuspended = {
        let mut d = desired.clone();
        d.clusters.get_mut("prod").expect("prod").spec.suspend = false;
        d
    };
    let first = plan_at(&unsuspended, &observed, now());
    let create = first.cluster("prod").expect("planned").steps[0].clone();
    assert_eq!(create.name(), "create-machine");
    expected_effect(&mut observed, &create, now());
    let new = create.target.machine.clone().expect("a machine");
    cluster_mut(&mut observed, "prod")
        .machines
        .get_mut(&new)
        .expect("created")
        .guest_agent = false;
    let plan = plan_at(&desired, &observed, now());
    let prod = plan.cluster("prod").expect("planned");
    assert_eq!(prod.steps, vec![]);
    assert!(
        prod.waiting_on
            .iter()
            .any(|w| matches!(&w.resource, Resource::Vm { name, .. } if *name == new)),
        "{:?}",
        prod.waiting_on
    );
    // The machine that was built stays: no step removes or stops it.
    assert!(
        prod.predicted
            .iter()
            .all(|s| s.target.machine.as_ref() != Some(&new) || s.name() != "destroy-machine")
    );
}

#[test]
fn a_converged_suspended_cluster_is_ready_and_says_it_is_suspended() {
    let mut prod = Cluster::test("prod").with_workers("general", 2);
    let observed = built(&desired(vec![prod.clone()]));
    prod.spec.suspend = true;
    let plan = plan_at(&desired(vec![prod]), &observed, now());
    let prod = plan.cluster("prod").expect("planned");
    assert_eq!(prod.phase, Phase::Ready);
    assert_eq!(prod.suspended, vec![Suspension::git()]);
    assert_eq!(prod.waiting_on, vec![]);
}
