//! Property tests: random clusters built one way and changed another, with random damage
//! (missing nodes, dead nodes, stale kubeconfigs, expiring certificates). Every plan along the
//! way keeps rules 1–4, 7 and 9; the executed steps are exactly the predicted sequence; and
//! the end state is the desired one, on which the plan is empty. Under `replace: forbid` (rule
//! 16), no machine of a forbidding pool that was live at the start ever leaves.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::fixtures::*;
use super::*;
use crate::model::{NodeName, Role};
use crate::observed::{MachineSpec, Observed, ObservedCluster, PowerState};
use crate::spec::{Cluster, Desired, KubeVersion};

#[derive(Debug, Clone)]
struct Shape {
    control_planes: u32,
    general: u32,
    big: u32,
    min_workers: u32,
    fence: bool,
    max_surge: u32,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        prop_oneof![Just(1u32), Just(3u32)],
        1u32..=4,
        0u32..=2,
        1u32..=2,
        any::<bool>(),
        1u32..=2,
    )
        .prop_map(
            |(control_planes, general, big, min_workers, fence, max_surge)| Shape {
                control_planes,
                general,
                big,
                min_workers: min_workers.min(general + big),
                fence,
                max_surge,
            },
        )
}

fn cluster(shape: &Shape, version: &str, templates: [bool; 3]) -> Cluster {
    let mut cluster = Cluster::test("prop")
        .with_control_planes(shape.control_planes)
        .with_workers("general", shape.general)
        .with_min_workers(shape.min_workers)
        .with_max_surge(shape.max_surge)
        .with_version(version);
    if shape.big > 0 {
        cluster = cluster.with_workers("big", shape.big);
    }
    if shape.fence {
        cluster = cluster.with_fencing();
    }
    for (pool, changed) in ["cp", "general", "big"].into_iter().zip(templates) {
        if changed && (pool != "big" || shape.big > 0) {
            cluster = cluster.with_template(pool, "debian13-k8s-v2");
        }
    }
    cluster
}

#[derive(Debug, Clone)]
struct Change {
    before: Shape,
    after: Shape,
    version: &'static str,
    approve_next_minor: bool,
    templates: [bool; 3],
    damage: Vec<(u8, usize)>,
}

fn change() -> impl Strategy<Value = Change> {
    (
        shape(),
        shape(),
        prop_oneof![
            Just("1.36.2"),
            Just("1.36.4"),
            Just("1.37.0"),
            Just("1.38.0")
        ],
        any::<bool>(),
        any::<[bool; 3]>(),
        prop::collection::vec((0u8..5, 0usize..16), 0..3),
    )
        .prop_map(
            |(before, after, version, approve_next_minor, templates, damage)| Change {
                before,
                after,
                version,
                approve_next_minor,
                templates,
                damage,
            },
        )
}

fn fleet(cluster: Cluster, approve_next_minor: bool) -> Desired {
    let mut desired = desired(vec![cluster]);
    if approve_next_minor {
        desired
            .fleet
            .approved_minors
            .push("1.37".parse().expect("minor"));
    }
    desired
}

/// Breaks the built world a little, in ways the planner must repair.
fn damage(observed: &mut Observed, damage: &[(u8, usize)], fence: bool) {
    let cluster = cluster_mut(observed, "prop");
    let control_planes = cluster
        .machines
        .values()
        .filter(|vm| vm.ownership.role == Role::ControlPlane)
        .count();
    let names: Vec<NodeName> = cluster.machines.keys().cloned().collect();
    let mut dead_control_planes = 0;
    for &(kind, index) in damage {
        let name = &names[index % names.len()];
        match kind {
            // A node that has not joined yet (its VM was just created).
            0 if cluster.machines[name].ownership.role == Role::Worker => {
                cluster.nodes.remove(name);
                if let Some(vm) = cluster.machines.get_mut(name) {
                    vm.created = now();
                }
            }
            // A dead node, where fencing can repair it: a lone control plane cannot be (its
            // cluster is down with it), nor a second dead control plane of three (etcd has
            // lost its quorum: a restore, not a plan).
            1 if fence
                && (cluster.machines[name].ownership.role == Role::Worker
                    || (control_planes >= 3 && dead_control_planes == 0)) =>
            {
                if cluster.machines[name].ownership.role == Role::ControlPlane {
                    dead_control_planes += 1;
                }
                if let Some(node) = cluster.nodes.get_mut(name) {
                    node.ready = false;
                    node.ready_since = minutes(-30);
                }
                if let Some(vm) = cluster.machines.get_mut(name) {
                    vm.power = PowerState::Stopped;
                    vm.guest_agent = false;
                }
            }
            2 => {
                if let Some(flux) = &mut cluster.flux {
                    flux.kubeconfig = "sha256:00000000000000ff".to_owned();
                }
            }
            3 => {
                if let Some(cp) = &mut cluster.control_plane {
                    cp.certificates_expire = Some(minutes(60 * 24 * 7));
                }
            }
            _ => {}
        }
    }
}

fn counted(cluster: &ObservedCluster, name: &NodeName) -> bool {
    let Some(machine) = cluster.machines.get(name) else {
        return false;
    };
    cluster.nodes.get(name).is_some_and(|node| {
        node.ready
            && !node.unschedulable
            && node.drain.is_none()
            && (!node.is_out_of_service() || machine.is_running())
    }) && !machine.is_retiring()
}

fn replicas(cluster: &Cluster, pool: &str) -> u32 {
    if pool == "cp" {
        return cluster.spec.control_plane.replicas;
    }
    cluster
        .spec
        .workers
        .iter()
        .find(|p| p.pool == pool)
        .map_or(0, |p| p.replicas)
}

/// Members being taken out or absent (in removal, retiring with a Node, NotReady).
fn in_removal(cluster: &ObservedCluster) -> usize {
    cluster
        .machines
        .iter()
        .filter(|(name, vm)| {
            vm.is_retiring()
                || cluster
                    .nodes
                    .get(*name)
                    .is_some_and(|n| n.unschedulable || n.drain.is_some())
        })
        .count()
}

fn absent_control_planes(cluster: &ObservedCluster) -> usize {
    cluster
        .machines
        .iter()
        .filter(|(name, vm)| {
            vm.ownership.role == Role::ControlPlane
                && cluster.nodes.get(*name).is_some_and(|n| {
                    !n.ready || n.unschedulable || n.drain.is_some() || vm.is_retiring()
                })
        })
        .count()
}

/// Rules 1–4, 7 and 9 on one plan of one state.
fn check_rules(spec: &Cluster, desired: &Desired, state: &ObservedCluster, steps: &[Step]) {
    // Rule 2: one disruptive step, alone.
    let disruptive = steps.iter().filter(|s| s.disruptive).count();
    assert!(
        disruptive == 0 || steps.len() == 1,
        "rule 2: {:?}",
        shape_of(steps)
    );
    let workers: Vec<&NodeName> = state
        .machines
        .iter()
        .filter(|(_, vm)| vm.ownership.role == Role::Worker)
        .map(|(n, _)| n)
        .collect();
    let counted_workers = workers.iter().filter(|n| counted(state, n)).count() as u32;
    for step in steps {
        match &step.action {
            Action::Cordon { node } => {
                let vm = &state.machines[node];
                let pool = &vm.ownership.pool;
                let others = state
                    .machines
                    .iter()
                    .filter(|(n, m)| *n != node && &m.ownership.pool == pool && counted(state, n))
                    .count() as u32;
                let is_counted = counted(state, node);
                let wanted = replicas(spec, pool);
                if vm.ownership.role == Role::ControlPlane {
                    // Rule 9: quorum; one absent at a time.
                    assert!(
                        !is_counted || others >= wanted,
                        "rule 9: {node} leaves early"
                    );
                    assert!(
                        absent_control_planes(state) == 0,
                        "rule 9: another control plane is absent"
                    );
                } else {
                    // Rule 1: the pool keeps its replicas serving; rule 3: the minimum.
                    assert!(
                        others >= wanted,
                        "rule 1: {node} cordoned before its replacement is Ready"
                    );
                    if is_counted {
                        assert!(
                            counted_workers > spec.spec.rollout.min_workers,
                            "rule 3: {node} would leave too few workers"
                        );
                    }
                }
                // Rule 4: nothing else is being removed.
                assert_eq!(in_removal(state), 0, "rule 4: a removal is in flight");
            }
            Action::JoinNode {
                role: Role::ControlPlane,
                ..
            } => {
                assert_eq!(
                    absent_control_planes(state),
                    0,
                    "rule 9: join while one is absent"
                );
            }
            Action::UpgradeControlPlane { from, to, .. } => {
                assert!(to > from, "rule 7: never a downgrade");
                assert_eq!(to.major, from.major);
                assert!(to.minor <= from.minor + 1, "rule 7: one minor at a time");
                assert!(
                    desired.fleet.approved_minors.contains(&to.minor_version()),
                    "rule 7: approved minors only"
                );
            }
            Action::CreateMachine { machine, .. } => {
                if let Some(cp) = &state.control_plane {
                    assert!(
                        machine.kubernetes <= cp.version,
                        "rule 7: a node newer than its control plane"
                    );
                }
            }
            _ => {}
        }
    }
    // Rule 4 also holds between plans.
    assert!(
        in_removal(state) <= 1,
        "rule 4: {} removals at once",
        in_removal(state)
    );
    assert!(
        absent_control_planes(state) <= 1,
        "rule 9: two control planes absent"
    );
}

/// `rollout.maxSurge`: the creates of a batch never take the cluster above its declared count
/// plus the surge (a create that finishes an existing VM adds none). Fenced VMs (hard-stopped, their replacement a repair) and orphans kept
/// because prune is off do not count.
fn check_surge(spec: &Cluster, state: &ObservedCluster, steps: &[Step], findings: &[Finding]) {
    // A create that finishes a VM an interrupted creation left (it exists, never started)
    // adds none.
    let creates = steps
        .iter()
        .filter(|s| matches!(s.action, Action::CreateMachine { .. }))
        .filter(|s| {
            s.target
                .machine
                .as_ref()
                .is_none_or(|name| !state.machines.contains_key(name))
        })
        .count();
    if creates == 0 {
        return;
    }
    let fenced = |name: &NodeName| {
        state.nodes.get(name).is_some_and(|n| n.is_out_of_service())
            && !state.machines[name].is_running()
    };
    if state.machines.keys().any(fenced) {
        return;
    }
    let orphan = |name: &NodeName| {
        findings
            .iter()
            .any(|f| f.kind == FindingKind::Orphan && f.machine.as_ref() == Some(name))
    };
    let existing = state.machines.keys().filter(|n| !orphan(n)).count();
    let declared = spec.spec.control_plane.replicas
        + spec.spec.workers.iter().map(|p| p.replicas).sum::<u32>();
    let limit = (declared + spec.spec.rollout.max_surge) as usize;
    assert!(
        existing + creates <= limit,
        "maxSurge {}: {existing} VMs and {creates} created, above {declared} declared: {:?}",
        spec.spec.rollout.max_surge,
        shape_of(steps)
    );
}

fn shape_of(steps: &[Step]) -> Vec<(&'static str, String)> {
    super::fixtures::shape(steps)
}

/// Whether the world is what `spec` asks for at `version`.
/// Orphans (owned VMs matching no desired machine) stay, reported, while prune is off.
fn assert_converged(
    spec: &Cluster,
    version: KubeVersion,
    state: &ObservedCluster,
    orphans: &[Finding],
) {
    let cp = state.control_plane.as_ref().expect("initialised");
    assert_eq!(cp.version, version);
    let mut pools: BTreeMap<String, u32> = BTreeMap::new();
    let orphan = |name: &NodeName| {
        orphans
            .iter()
            .any(|f| f.kind == FindingKind::Orphan && f.machine.as_ref() == Some(name))
    };
    for (name, vm) in state.machines.iter().filter(|(name, _)| !orphan(name)) {
        let pool = &vm.ownership.pool;
        let (machine, role) = if pool == "cp" {
            (&spec.spec.control_plane.machine, Role::ControlPlane)
        } else {
            let pool = spec
                .spec
                .workers
                .iter()
                .find(|p| &p.pool == pool)
                .expect("desired pool");
            (&pool.machine, Role::Worker)
        };
        let level = (pool != "cp").then_some(pool.as_str());
        let wanted = MachineSpec::for_cluster(&spec.spec, level, machine, version, role);
        assert_eq!(
            vm.ownership.spec_hash,
            wanted.spec_hash(),
            "{name} is current"
        );
        assert!(counted(state, name) || role == Role::ControlPlane && state.nodes[name].ready);
        *pools.entry(pool.to_string()).or_default() += 1;
    }
    assert_eq!(
        pools.get("cp").copied(),
        Some(spec.spec.control_plane.replicas)
    );
    for pool in &spec.spec.workers {
        assert_eq!(
            pools.get(&pool.pool).copied().unwrap_or(0),
            pool.replicas,
            "{}",
            pool.pool
        );
    }
    let flux = state.flux.as_ref().expect("delivered");
    assert_eq!(Some(&flux.kubeconfig), cp.admin_kubeconfig.as_ref());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_plan_is_empty_when_the_world_matches_the_spec(shape in shape(), cp in any::<bool>()) {
        let spec = cluster(&shape, "1.36.2", [cp, false, false]);
        let desired = fleet(spec, false);
        let observed = built(&desired);
        let plan = plan_at(&desired, &observed, now());
        prop_assert_eq!(&plan.clusters[0].steps, &vec![]);
        prop_assert_eq!(&plan.clusters[0].predicted, &vec![]);
        prop_assert_eq!(plan.clusters[0].phase, Phase::Ready);
    }

    #[test]
    fn every_plan_keeps_the_rules_and_the_prediction_comes_true(change in change()) {
        let before = cluster(&change.before, "1.36.2", [false; 3]);
        let mut observed = built(&fleet(before, false));
        damage(&mut observed, &change.damage, change.before.fence);
        let mut after = cluster(&change.after, change.version, change.templates);
        if change.before.fence {
            after = after.with_fencing();
        }
        let desired = fleet(after.clone(), change.approve_next_minor);
        let first = plan_at(&desired, &observed, now());
        let predicted = first.clusters[0].predicted.clone();
        let mut executed = Vec::new();
        for _ in 0..400 {
            let plan = plan_at(&desired, &observed, now());
            let cluster = &plan.clusters[0];
            check_rules(&after, &desired, &observed.clusters["prop"], &cluster.steps);
            check_surge(&after, &observed.clusters["prop"], &cluster.steps, &plan.findings);
            if cluster.steps.is_empty() {
                break;
            }
            for step in &cluster.steps {
                expected_effect(&mut observed, step, now());
            }
            executed.extend(cluster.steps.iter().cloned());
        }
        // VM ids of new VMs are unknown to the prediction; compare the rest.
        prop_assert_eq!(shape_of(&executed), shape_of(&predicted));
        let last = plan_at(&desired, &observed, now());
        let cluster = &last.clusters[0];
        prop_assert_eq!(&cluster.predicted, &vec![]);
        if cluster.blocked.is_empty() {
            assert_converged(
                &after,
                after.spec.kubernetes.version,
                &observed.clusters["prop"],
                &last.findings,
            );
            prop_assert_eq!(cluster.phase, Phase::Ready);
        } else {
            // Only version refusals block these changes; the rest still converged.
            prop_assert!(cluster.blocked.iter().all(|b| b.rule == Rule::Upgrades), "{:?}", cluster.blocked);
            let current = observed.clusters["prop"].control_plane.as_ref().expect("cp").version;
            assert_converged(&after, current, &observed.clusters["prop"], &last.findings);
        }
    }
    #[test]
    fn under_replace_forbid_no_live_machine_of_a_forbidding_pool_leaves(
        change in change(),
        forbid in any::<[bool; 3]>(),
    ) {
        use crate::spec::ReplacePolicy::Forbid;
        let before = cluster(&change.before, "1.36.2", [false; 3]);
        let mut observed = built(&fleet(before, false));
        damage(&mut observed, &change.damage, change.before.fence);
        // The same shape: no pool shrinks, so nothing leaves for being surplus.
        let mut after = cluster(&change.before, change.version, change.templates);
        for (pool, on) in ["cp", "general", "big"].into_iter().zip(forbid) {
            if on && (pool != "big" || change.before.big > 0) {
                after = after.with_replace(Some(pool), Forbid);
            }
        }
        let desired = fleet(after.clone(), change.approve_next_minor);
        let start = &observed.clusters["prop"];
        let kept: Vec<NodeName> = start
            .machines
            .iter()
            .filter(|(name, vm)| {
                let pool = (vm.ownership.role == Role::Worker).then_some(vm.ownership.pool.as_str());
                after.spec.replace_policy(pool) == Forbid
                    && start.nodes.get(*name).is_some_and(|node| node.ready)
                    && vm.is_running()
                    && vm.guest_agent
            })
            .map(|(name, _)| name.clone())
            .collect();
        let predicted = plan_at(&desired, &observed, now()).clusters[0].predicted.clone();
        let mut executed = Vec::new();
        for _ in 0..400 {
            let plan = plan_at(&desired, &observed, now());
            let cluster = &plan.clusters[0];
            check_rules(&after, &desired, &observed.clusters["prop"], &cluster.steps);
            check_surge(&after, &observed.clusters["prop"], &cluster.steps, &plan.findings);
            if cluster.steps.is_empty() {
                break;
            }
            for step in &cluster.steps {
                expected_effect(&mut observed, step, now());
            }
            executed.extend(cluster.steps.iter().cloned());
        }
        prop_assert_eq!(shape_of(&executed), shape_of(&predicted));
        for step in &executed {
            let leaves = matches!(
                step.name(),
                "cordon" | "drain" | "delete-node" | "reset-node" | "destroy-machine"
            );
            let machine = step.target.machine.as_ref();
            prop_assert!(
                !(leaves && machine.is_some_and(|m| kept.contains(m))),
                "{} of a kept machine: {:?}",
                step.name(),
                shape_of(&executed)
            );
        }
        let last = plan_at(&desired, &observed, now());
        prop_assert_eq!(&last.clusters[0].predicted, &vec![]);
    }
}
