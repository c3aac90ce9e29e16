//! A template change replaces every machine of the pool immutably: a new machine joins and is
//! Ready before an old one is cordoned, old machines leave one at a time, and at the end every
//! worker VM is built from the new template.

use capstan::model::Role;
use capstan::observed::MachineSpec;
use capstan::spec::{RepoFiles, SourceText};
use capstan_testkit::{World, cluster_yaml, fleet_yaml, ready};

const CLUSTER: &str = "tmpl";

fn spec(template: &str) -> String {
    cluster_yaml(CLUSTER, 31, "1.36.2", 2, template)
}

/// The spec hash a worker of the test cluster built from `template` carries.
fn worker_hash(template: &str) -> String {
    let files = RepoFiles {
        fleet: SourceText {
            path: "capstan.yaml".into(),
            text: fleet_yaml(&["1.36"], false),
        },
        clusters: vec![SourceText {
            path: format!("clusters/{CLUSTER}.yaml"),
            text: spec(template),
        }],
    };
    let desired = capstan::spec::load(&files).desired.expect("valid");
    let cluster = &desired.clusters[CLUSTER].spec;
    MachineSpec::new(
        &cluster.workers[0].machine,
        cluster.kubernetes.version,
        cluster.kubernetes.distribution,
        Role::Worker,
    )
    .spec_hash()
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_change_replaces_every_worker_new_before_old_one_at_a_time() {
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, spec("debian13-k8s"))],
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    let old: Vec<String> = world
        .vm_views(CLUSTER)
        .into_iter()
        .filter(|vm| vm.is_worker())
        .map(|vm| vm.name)
        .collect();
    assert_eq!(old.len(), 2);

    let recorder = world.record(CLUSTER);
    world.write_cluster(CLUSTER, &spec("debian13-k8s-v2"));
    world
        .wait_for("every worker replaced", |s| {
            ready(s, &[CLUSTER])
                && s.clusters[CLUSTER]
                    .nodes
                    .iter()
                    .filter(|n| n.role == Role::Worker)
                    .all(|n| !old.iter().any(|o| o == n.name.as_str()))
        })
        .await;
    let timeline = recorder.finish().await;
    let is_old = |name: &str| old.iter().any(|o| o == name);

    // New before old: when the k-th old worker starts leaving, k new workers are Ready and
    // schedulable (each replacement joined before the machine it replaces leaves).
    let mut cordons: Vec<(usize, &String)> = old
        .iter()
        .map(|name| {
            let at = timeline
                .first(|s| s.node(name).is_none_or(|n| n.cordoned))
                .unwrap_or_else(|| panic!("{name} leaves:\n{}", timeline.dump()));
            (at, name)
        })
        .collect();
    cordons.sort();
    for (k, (at, old_name)) in cordons.iter().enumerate() {
        let sample = &timeline.0[*at];
        let new_serving = sample
            .nodes
            .iter()
            .filter(|n| !n.control_plane && !is_old(&n.name) && n.is_serving())
            .count();
        assert!(
            new_serving > k,
            "{old_name} (old worker {}) is cordoned only once {} new worker(s) are Ready, saw {new_serving}:\n{}\n\ntimeline:\n{}",
            k + 1,
            k + 1,
            sample.summary(),
            timeline.dump()
        );
    }
    let mut old_out_seen = false;
    for sample in &timeline.0 {
        // An old machine is out from its cordon until its VM is gone.
        let out: Vec<&str> = old
            .iter()
            .filter(|name| sample.vms.iter().any(|vm| &vm.name == *name))
            .filter(|name| {
                sample.node(name).is_none_or(|n| n.cordoned || !n.ready)
                    || sample
                        .vms
                        .iter()
                        .any(|vm| &vm.name == *name && vm.is_retiring())
            })
            .map(String::as_str)
            .collect();
        old_out_seen |= !out.is_empty();
        assert!(
            out.len() <= 1,
            "at most one old worker out at a time, saw {out:?} at\n{}\n\ntimeline:\n{}",
            sample.summary(),
            timeline.dump()
        );
        assert!(
            sample.serving_workers() >= 2,
            "the pool keeps its two serving workers throughout:\n{}",
            timeline.dump()
        );
        let building = sample
            .vms
            .iter()
            .filter(|vm| vm.is_worker() && !is_old(&vm.name))
            .filter(|vm| sample.node(&vm.name).is_none_or(|n| !n.is_serving()))
            .count();
        assert!(
            building <= 1,
            "one new machine at a time is being built:\n{}",
            timeline.dump()
        );
    }
    assert!(old_out_seen, "the old workers were seen leaving");

    let v2 = worker_hash("debian13-k8s-v2");
    let workers: Vec<_> = world
        .vm_views(CLUSTER)
        .into_iter()
        .filter(|vm| vm.is_worker())
        .collect();
    assert_eq!(workers.len(), 2);
    for vm in &workers {
        assert_eq!(
            vm.spec_hash(),
            Some(v2.as_str()),
            "{} is built from debian13-k8s-v2",
            vm.name
        );
    }
    world.kill_daemon().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_says_which_field_changed() {
    let mut world = World::new(
        &fleet_yaml(&["1.36"], false),
        &[(CLUSTER, spec("debian13-k8s"))],
    )
    .await;
    world.start_until_ready(&[CLUSTER]).await;
    world.kill_daemon().await;
    world.write_cluster(CLUSTER, &spec("debian13-k8s-v2"));
    let plan = world.observe_and_plan().await;
    let cluster = plan.cluster(CLUSTER).expect("planned");
    let reasons: Vec<&str> = cluster
        .predicted
        .iter()
        .map(|step| step.reason.as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("outdated: template debian13-k8s → debian13-k8s-v2")),
        "the reason names the field, read back from the VMs' descriptions: {reasons:#?}"
    );
}
