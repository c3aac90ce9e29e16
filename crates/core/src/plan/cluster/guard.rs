//! Rule 16, the replacement guard: a pool whose `replace` is `forbid` (its own, or the
//! cluster's `rollout.replace`) keeps its live machines. A member built from another spec
//! (outdated, or drifted with `onDrift: replace`) that is neither dead nor fenced is not
//! replaced: it counts as fresh, so no replacement is cloned and nothing is cordoned or
//! drained for it, and the cluster is refused with the fields that cause the replacement. A
//! dead or fenced member is replaced as ever: a repair, not a change. A version change, which
//! replaces every machine, is refused whole while a pool that forbids it has a live member.

use super::classify::Stale;
use crate::model::Role;
use crate::observed::{ObservedMachine, ObservedNode};
use crate::plan::types::{Blocked, Rule};
use crate::spec::validate::CONTROL_PLANE_POOL;
use crate::spec::{ClusterSpec, KubeVersion, ReplacePolicy};

use super::{Ctx, DesiredPool, Input, Outcome, View};

/// The members of one pool the guard keeps.
#[derive(Debug, Clone, Default)]
pub(super) struct Guarded {
    count: usize,
    /// Why the first one would be replaced, by field (words are not written in predictions).
    why: Option<String>,
}

/// Its Node NotReady, and its VM stopped or its guest agent silent: what fencing acts on.
fn is_dead(node: Option<&ObservedNode>, machine: &ObservedMachine) -> bool {
    node.is_some_and(|node| !node.ready) && (!machine.is_running() || !machine.guest_agent)
}

/// The path of a pool in the cluster file's spec.
fn pool_path(role: Role, pool: &str) -> String {
    match role {
        Role::ControlPlane => "controlPlane".to_owned(),
        Role::Worker => format!("workers.{pool}"),
    }
}

/// The field that says `forbid` for a pool: its own `replace`, or the cluster's.
fn forbidding_field(spec: &ClusterSpec, role: Role, pool: &str) -> String {
    let own = match role {
        Role::ControlPlane => spec.control_plane.replace,
        Role::Worker => spec
            .workers
            .iter()
            .find(|p| p.pool == pool)
            .and_then(|p| p.replace),
    };
    match own {
        Some(_) => format!("{}.replace", pool_path(role, pool)),
        None => "rollout.replace".to_owned(),
    }
}

/// A difference of two machine specs (`template a → b`) with its field's path
/// (`workers.general.machine.template a → b`).
fn with_path(pool: &str, difference: &str) -> String {
    let (field, change) = difference.split_once(' ').unwrap_or((difference, ""));
    let path = match field {
        "kubernetes" => "kubernetes.version".to_owned(),
        "distribution" => "kubernetes.distribution".to_owned(),
        machine_field => format!("{pool}.machine.{machine_field}"),
    };
    format!("{path} {change}")
}

/// The version the cluster stays at, and the refusal, when `target` would replace the live
/// members of a pool that forbids it (every machine's spec carries the version).
pub(super) fn version(input: &Input<'_>, target: KubeVersion) -> Option<(KubeVersion, Blocked)> {
    let current = input.observed.control_plane.as_ref()?.version;
    if target == current {
        return None;
    }
    let spec = input.spec;
    let pools = std::iter::once((Role::ControlPlane, CONTROL_PLANE_POOL))
        .chain(spec.workers.iter().map(|p| (Role::Worker, p.pool.as_str())));
    let forbidding: Vec<(usize, Role, &str)> = pools
        .enumerate()
        .filter(|(_, (role, pool))| {
            let pool = (*role == Role::Worker).then_some(*pool);
            spec.replace_policy(pool) == ReplacePolicy::Forbid
        })
        .map(|(index, (role, pool))| (index, role, pool))
        .collect();
    if forbidding.is_empty() {
        return None;
    }
    // A prediction keeps quiet members aside (they are live by definition).
    let quiet = forbidding.iter().find(|(index, ..)| {
        input
            .quiet
            .and_then(|quiet| quiet.pool(*index))
            .is_some_and(|pool| !pool.fresh.is_empty() || !pool.stale.is_empty())
    });
    let observed = input.observed;
    let kept = quiet.or_else(|| {
        observed.machines.iter().find_map(|(name, machine)| {
            let ownership = &machine.ownership;
            let node = observed.nodes.get(name);
            let live = node.is_some() && !machine.is_retiring() && !is_dead(node, machine);
            let pool = forbidding
                .iter()
                .find(|(_, role, pool)| *role == ownership.role && *pool == ownership.pool)?;
            live.then_some(pool)
        })
    })?;
    let (_, role, pool) = *kept;
    let field = forbidding_field(spec, role, pool);
    let message = format!(
        "{field}: forbid refuses kubernetes.version {current} → {target}: it would replace the live machines of {}; the cluster stays at {current} and nothing of the upgrade starts. Put kubernetes.version back to {current}, or set {field}: allow to let the machines be replaced",
        pool_path(role, pool)
    );
    Some((
        current,
        Blocked {
            rule: Rule::ReplaceGuard,
            message,
        },
    ))
}

impl<'a> Ctx<'a> {
    /// Whether the guard keeps `view`, to be replaced for `stale`: its pool forbids
    /// replacement, and it is outdated or drifted, not dead nor fenced.
    pub(super) fn guards(&self, view: &View<'a>, stale: &Stale) -> bool {
        matches!(stale, Stale::Outdated | Stale::Drifted(_))
            && self.pools[view.pool].replace == ReplacePolicy::Forbid
            && !view.fenced
            && !is_dead(view.node, view.machine)
    }

    /// Counts `view` as kept by the guard; for the first of its pool, says why it would have
    /// been replaced.
    pub(super) fn keep(&mut self, view: &View<'a>, stale: &Stale) {
        let first = self.pools[view.pool].guarded.count == 0;
        let why = (first && !self.input.predicting).then(|| self.replaced_fields(view, stale));
        let guarded = &mut self.pools[view.pool].guarded;
        guarded.count += 1;
        if why.is_some() {
            guarded.why = why;
        }
    }

    /// The fields that make `view` stale, with their paths in the cluster file.
    fn replaced_fields(&self, view: &View<'a>, stale: &Stale) -> String {
        let pool = &self.pools[view.pool];
        let path = pool_path(pool.role, pool.name);
        if let Stale::Drifted(drift) = stale {
            return format!(
                "its Proxmox config was changed outside capstan ({drift}) and rollout.onDrift is replace"
            );
        }
        let desired = pool.desired.as_ref().map(DesiredPool::spec);
        let differences = view
            .machine
            .built_from
            .as_ref()
            .zip(desired)
            .map(|(built, desired)| built.differences(desired))
            .unwrap_or_default();
        if differences.is_empty() {
            // Built before capstan recorded the spec: the hash alone tells it apart.
            return format!(
                "{path}.machine (spec hash {} → {})",
                view.machine.ownership.spec_hash,
                pool.desired.as_ref().map_or("?", |d| d.hash().as_str())
            );
        }
        differences
            .iter()
            .map(|difference| with_path(&path, difference))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// One refusal per pool whose live members the guard keeps.
    pub(super) fn guard_refusals(&self, out: &mut Outcome) {
        if self.input.predicting {
            return;
        }
        for pool in self.pools.iter().filter(|p| p.guarded.count > 0) {
            let field = forbidding_field(self.spec(), pool.role, pool.name);
            let why = pool.guarded.why.as_deref().unwrap_or("another spec");
            out.blocked.push(Blocked {
                rule: Rule::ReplaceGuard,
                message: format!(
                    "{field}: forbid refuses replacing {} live machine(s) of {}, caused by {why}; none is cloned, cordoned or drained for it (dead and fenced machines are still replaced). Put those fields back, or set {field}: allow to let the machines be replaced",
                    pool.guarded.count,
                    pool_path(pool.role, pool.name),
                ),
            });
        }
    }
}
