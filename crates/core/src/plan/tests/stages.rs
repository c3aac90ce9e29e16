//! Staged rollouts (`rollout.after`, `rollout.soak` through [`Policy::stages`]): a follower's
//! disruptive steps wait until every cluster it follows has converged at this revision and
//! soaked; its other steps and the clusters followed go on.

use super::*;
use crate::spec::HumanDuration;

/// staging and prod, three workers each, both scaled down to two (a removal: its first step,
/// the cordon, is disruptive); prod follows staging with a soak of 30 minutes.
fn staged() -> (Desired, Observed) {
    let prod = Cluster::test("prod").with_workers("general", 3);
    let staging = Cluster::test("staging").with_workers("general", 3);
    let observed = built(&desired(vec![prod.clone(), staging.clone()]));
    let mut prod = prod.with_workers("general", 2);
    prod.spec.rollout.after = vec!["staging".to_owned()];
    prod.spec.rollout.soak = HumanDuration::minutes(30);
    let staging = staging.with_workers("general", 2);
    (desired(vec![prod, staging]), observed)
}

/// The policy at revision `r2`, staging reported as `facts`.
fn policy(desired: &Desired, facts: Option<StageFacts>) -> Policy {
    let mut policy = Policy::of(desired);
    policy.stages.revision = "r2".to_owned();
    if let Some(facts) = facts {
        policy.stages.clusters.insert("staging".to_owned(), facts);
    }
    policy
}

fn ready(revision: &str, since: Timestamp) -> Option<StageFacts> {
    Some(StageFacts {
        phase: Phase::Ready,
        converged: Some(Converged {
            revision: revision.to_owned(),
            since,
        }),
    })
}

/// What holds prod's steps, if anything does.
fn prod_held(plan: &Plan) -> Vec<Resource> {
    plan.cluster("prod")
        .expect("planned")
        .waiting_on
        .iter()
        .filter(|w| matches!(w.resource, Resource::Stage { .. }))
        .map(|w| w.resource.clone())
        .collect()
}

#[test]
fn a_follower_starts_no_disruptive_step_before_the_cluster_it_follows_converged() {
    let (desired, observed) = staged();
    let plan = plan(&desired, &observed, &policy(&desired, None), now());
    let prod = plan.cluster("prod").expect("planned");
    assert_eq!(prod.steps, vec![], "the cordon waits for staging");
    assert_eq!(prod.phase, Phase::Updating);
    assert_eq!(
        prod_held(&plan),
        vec![Resource::Stage {
            cluster: "staging".to_owned(),
            until: None,
            why: "no status yet: not converged at this revision".to_owned(),
        }]
    );
    assert_eq!(
        shape(&plan.cluster("staging").expect("planned").steps),
        vec![("cordon", staging_victim(&plan))],
        "staging goes first"
    );
    // The preview still plays prod's removal, each disruptive step saying what held it.
    assert!(prod.predicted.iter().filter(|s| s.disruptive).all(|s| {
        s.waits_on
            .as_ref()
            .is_some_and(|w| matches!(w.resource, Resource::Stage { .. }))
    }));
    assert!(!prod.predicted.is_empty());
}

/// The machine staging's first step works on.
fn staging_victim(plan: &Plan) -> String {
    plan.cluster("staging").expect("planned").steps[0]
        .target
        .machine
        .as_ref()
        .expect("a machine")
        .to_string()
}

#[test]
fn steps_that_disrupt_nothing_go_on_while_a_stage_holds() {
    let prod = Cluster::test("prod").with_workers("general", 2);
    let staging = Cluster::test("staging").with_workers("general", 2);
    let observed = built(&desired(vec![prod.clone(), staging.clone()]));
    let mut prod = prod.with_template("general", "debian13-k8s-v2");
    prod.spec.rollout.after = vec!["staging".to_owned()];
    let desired = desired(vec![
        prod,
        staging.with_template("general", "debian13-k8s-v2"),
    ]);
    let plan = plan(&desired, &observed, &policy(&desired, None), now());
    let prod = plan.cluster("prod").expect("planned");
    assert_eq!(
        prod.steps.iter().map(Step::name).collect::<Vec<_>>(),
        vec!["create-machine"],
        "the replacement is cloned; its cordon will wait"
    );
}

#[test]
fn a_follower_waits_out_the_soak_then_starts() {
    let (desired, observed) = staged();
    let since = minutes(-10);
    let facts = ready("r2", since);
    let held = plan(&desired, &observed, &policy(&desired, facts.clone()), now());
    let until = minutes(20);
    assert_eq!(
        prod_held(&held),
        vec![Resource::Stage {
            cluster: "staging".to_owned(),
            until: Some(until),
            why: format!("Ready at this revision since {since}, soaking until {until}"),
        }]
    );
    assert_eq!(held.cluster("prod").expect("planned").steps, vec![]);
    let later = plan(&desired, &observed, &policy(&desired, facts), minutes(20));
    assert_eq!(prod_held(&later), vec![]);
    assert_eq!(
        later.cluster("prod").expect("planned").steps[0].name(),
        "cordon",
        "soaked: prod starts"
    );
}

#[test]
fn a_cluster_blocked_during_its_soak_holds_its_followers() {
    let (desired, observed) = staged();
    // Its status lost its record when it went Blocked, however long it had been Ready.
    let facts = Some(StageFacts {
        phase: Phase::Blocked,
        converged: converged(Phase::Blocked, None, "r2", now()),
    });
    let blocked = plan(&desired, &observed, &policy(&desired, facts), minutes(60));
    assert_eq!(
        prod_held(&blocked),
        vec![Resource::Stage {
            cluster: "staging".to_owned(),
            until: None,
            why: "Blocked: the clusters after it wait until it is Ready again and has soaked"
                .to_owned(),
        }]
    );
    assert_eq!(blocked.cluster("prod").expect("planned").steps, vec![]);
    // Unhealthy (Updating again, say a node NotReady) holds it too.
    let facts = Some(StageFacts {
        phase: Phase::Updating,
        converged: None,
    });
    let plan = plan(&desired, &observed, &policy(&desired, facts), minutes(60));
    assert_eq!(
        prod_held(&plan)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "stage staging: Updating: not converged at this revision (a soak starts once it is Ready)"
        ]
    );
}

#[test]
fn convergence_at_an_earlier_revision_holds_and_a_later_one_counts() {
    let (desired, observed) = staged();
    let earlier = plan(
        &desired,
        &observed,
        &policy(&desired, ready("r1", minutes(-600))),
        now(),
    );
    assert_eq!(
        prod_held(&earlier)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec!["stage staging: last converged at revision r1, not yet at this one"]
    );
    // prod rolls out r1's change; staging converged at r2, which came since: that counts, and
    // a revision that changed nothing of staging kept its soak running.
    let record = converged(
        Phase::Ready,
        converged(Phase::Ready, None, "r1", minutes(-600)).as_ref(),
        "r2",
        now(),
    );
    assert_eq!(
        record,
        Some(Converged {
            revision: "r2".to_owned(),
            since: minutes(-600)
        })
    );
    let later = plan(
        &desired,
        &observed,
        &policy(
            &desired,
            Some(StageFacts {
                phase: Phase::Ready,
                converged: record,
            }),
        ),
        now(),
    );
    assert_eq!(prod_held(&later), vec![]);
    assert!(!later.cluster("prod").expect("planned").steps.is_empty());
}

#[test]
fn a_suspension_still_holds_a_follower_whose_stages_are_done() {
    let (mut desired, observed) = staged();
    desired.clusters.get_mut("prod").expect("prod").spec.suspend = true;
    let plan = plan(
        &desired,
        &observed,
        &policy(&desired, ready("r2", minutes(-600))),
        now(),
    );
    assert_eq!(plan.cluster("prod").expect("planned").steps, vec![]);
    assert_eq!(prod_held(&plan), vec![]);
}
