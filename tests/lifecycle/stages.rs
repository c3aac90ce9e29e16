//! Staged rollouts on the lab: `staging`, then `prod-a` and `prod-b` (`rollout.after:
//! [staging]`, `soak: 4s`), one commit changing the workers' template of all three. No Node of
//! the prods is cordoned and no old VM of theirs destroyed before staging has converged; a
//! staging made Blocked during its soak holds them (their status says so), and once staging is
//! Ready again they start only after a new soak.

use std::collections::BTreeSet;
use std::time::Duration;

use capstan::plan::Phase;
use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};

const STAGING: &str = "staging";
const PRODS: [&str; 2] = ["prod-a", "prod-b"];
const SOAK: Duration = Duration::from_secs(4);
/// How often the test looks at the world: a cordon lasts at least a drain, far longer.
const LOOK: Duration = Duration::from_millis(20);

/// A lab cluster on `template`; a prod follows staging.
fn spec(name: &str, octet: u8, template: &str) -> String {
    let yaml = cluster_yaml(name, octet, "1.36.2", 2, template);
    if name == STAGING {
        return yaml;
    }
    yaml.replace(
        "joinTimeout: 2m}",
        "joinTimeout: 2m, after: [staging], soak: 4s}",
    )
}

fn octet(name: &str) -> u8 {
    match name {
        STAGING => 50,
        "prod-a" => 51,
        _ => 52,
    }
}

fn write(world: &World, name: &str, template: &str) {
    world.write_cluster(name, &spec(name, octet(name), template));
}

/// Whether a disruptive step of a prod has started: one of its Nodes is cordoned, or one of
/// its VMs from before the change is gone.
fn prods_disrupted(world: &World, old: &BTreeSet<String>) -> Option<String> {
    let vms: BTreeSet<String> = world.vms().into_iter().map(|vm| vm.name).collect();
    for prod in PRODS {
        if let Some(node) = world.nodes_of(prod).iter().find(|n| n.cordoned) {
            return Some(format!("{} cordoned", node.name));
        }
        let prefix = format!("capstan-{prod}-");
        if let Some(gone) = old
            .iter()
            .find(|name| name.starts_with(&prefix) && !vms.contains(*name))
        {
            return Some(format!("{gone} destroyed"));
        }
    }
    None
}

/// What the status says prod-a waits on.
fn prod_waits(world: &World) -> Vec<String> {
    world
        .status()
        .clusters
        .get("prod-a")
        .map(|c| c.waiting_on.iter().map(|w| w.resource.clone()).collect())
        .unwrap_or_default()
}

/// Looks at the world until `done`, asserting at each look that no prod was disrupted.
async fn until_undisrupted(
    world: &World,
    old: &BTreeSet<String>,
    what: &str,
    done: impl Fn(&World) -> bool,
) {
    capstan_testkit::wait::on(what)
        .every(LOOK)
        .until_true(|| {
            if let Some(disruption) = prods_disrupted(world, old) {
                panic!(
                    "{disruption} while waiting for {what}; prod-a waits on {:?}",
                    prod_waits(world)
                );
            }
            done(world)
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prods_start_their_disruptive_steps_after_staging_converged_and_soaked() {
    let clusters: Vec<(&str, String)> = [STAGING, PRODS[0], PRODS[1]]
        .into_iter()
        .map(|name| (name, spec(name, octet(name), "debian13-k8s")))
        .collect();
    let mut world = World::new(&fleet_yaml(&["1.36"], false), &clusters).await;
    world
        .start_until_ready(&[STAGING, PRODS[0], PRODS[1]])
        .await;
    let old: BTreeSet<String> = world
        .vms()
        .into_iter()
        .map(|vm| vm.name)
        .filter(|name| !name.contains("-cp-"))
        .collect();
    assert_eq!(old.len(), 6, "two workers each: {old:?}");

    // One commit: all three on the new template.
    for name in [STAGING, PRODS[0], PRODS[1]] {
        write(&world, name, "debian13-k8s-v2");
    }
    let staging_old: Vec<String> = old
        .iter()
        .filter(|name| name.starts_with("capstan-staging-"))
        .cloned()
        .collect();
    until_undisrupted(&world, &old, "staging replaced and Ready", |world| {
        let vms: BTreeSet<String> = world.vms().into_iter().map(|vm| vm.name).collect();
        ready(&world.status(), &[STAGING]) && staging_old.iter().all(|n| !vms.contains(n))
    })
    .await;
    let waits = prod_waits(&world);
    assert!(
        waits.iter().any(|w| w.starts_with("stage staging: ")),
        "prod-a says it waits on staging: {waits:?}"
    );

    // Within its soak, staging goes Blocked (its file refused): the prods stay held.
    world.write_cluster(
        STAGING,
        &spec(STAGING, octet(STAGING), "debian13-k8s-v2").replace("1.36.2", "1.99.0"),
    );
    until_undisrupted(&world, &old, "staging Blocked", |world| {
        world
            .status()
            .clusters
            .get(STAGING)
            .is_some_and(|c| c.phase == Phase::Blocked)
    })
    .await;
    let blocked_since = tokio::time::Instant::now();
    until_undisrupted(&world, &old, "a soak's time with staging Blocked", |world| {
        blocked_since.elapsed() > SOAK + Duration::from_secs(1)
            && prod_waits(world).iter().any(|w| {
                w.starts_with("stage staging: Blocked: the clusters after it wait until it is Ready again")
            })
    })
    .await;

    // Fixed: staging is Ready at once (nothing to do); the prods wait a new soak, then go.
    write(&world, STAGING, "debian13-k8s-v2");
    let restored = tokio::time::Instant::now();
    capstan_testkit::wait::on("a prod's first disruptive step")
        .every(LOOK)
        .until_true(|| prods_disrupted(&world, &old).is_some())
        .await;
    assert!(
        restored.elapsed() >= SOAK,
        "the prods waited a new soak after staging was Ready again"
    );
    world
        .wait_for("every worker replaced", |status| {
            let vms: BTreeSet<String> = world.vms().into_iter().map(|vm| vm.name).collect();
            ready(status, &[STAGING, PRODS[0], PRODS[1]]) && old.iter().all(|n| !vms.contains(n))
        })
        .await;
    world.kill_daemon().await;
}
