//! The words of a preview: one phrase per cluster for the summary line (`+1 worker, 3 workers
//! replaced (new before old), upgrade 1.36.2 → 1.36.3 — held for the maintenance window`),
//! and what each changed field causes (`template ... : replaces 3 workers`).
//!
//! Pure: counts the steps this change adds (not those already pending on the base).

use std::collections::BTreeMap;

use crate::plan::Action;

use super::{DrainForecast, FieldChange, PreviewStep, Refusal};

/// The pool name the planner gives control-plane machines.
const CONTROL_PLANE_POOL: &str = "cp";

/// What the summary of one cluster is made from.
pub(super) struct Facts<'a> {
    pub file_changed: bool,
    pub added: bool,
    pub removed: bool,
    /// The head's file has errors: nothing of it is applied.
    pub invalid: bool,
    pub predicted: &'a [PreviewStep],
    pub refused: &'a [Refusal],
    pub drains: &'a [DrainForecast],
}

/// This cluster's phrase of the summary line.
pub(super) fn cluster(facts: &Facts<'_>) -> String {
    let added: Vec<&PreviewStep> = facts
        .predicted
        .iter()
        .filter(|s| !s.pending_on_base)
        .collect();
    let mut parts = Vec::new();
    if facts.added {
        parts.push("new cluster".to_owned());
    }
    if facts.removed {
        if added.is_empty() {
            parts.push("file removed: its VMs are kept (prune is off)".to_owned());
        } else {
            parts.push("file removed: the cluster is deleted".to_owned());
        }
    }
    parts.extend(machine_phrases(&added));
    parts.extend(storage_phrases(&added));
    parts.extend(in_place_phrases(&added));
    for step in &added {
        if let Action::UpgradeControlPlane { from, to, .. } = &step.step.action {
            parts.push(format!("upgrade {from} → {to}"));
        }
    }
    let mut text = if parts.is_empty() && facts.invalid {
        "its file has errors: the cluster is left as it is".to_owned()
    } else if parts.is_empty() {
        let pending = facts.predicted.len();
        match (facts.file_changed, pending) {
            (true, 0) => "no change to machines".to_owned(),
            (true, n) => format!("no change to machines ({n} step(s) already pending)"),
            (false, 0) => "unchanged".to_owned(),
            (false, n) => format!("unchanged ({n} step(s) already pending)"),
        }
    } else {
        parts.join(", ")
    };
    let held = added.iter().find_map(|s| {
        s.step
            .waits_on
            .as_ref()
            .and_then(|wait| wait.resource.hold_phrase())
    });
    if let Some(held) = held {
        text.push_str(" — ");
        text.push_str(&held);
    }
    let mut blockers: Vec<&str> = facts
        .drains
        .iter()
        .filter(|d| !d.pending_on_base)
        .flat_map(|d| d.blocked_by.iter().map(|b| b.budget.as_str()))
        .collect();
    blockers.sort_unstable();
    blockers.dedup();
    if !blockers.is_empty() {
        text.push_str(&format!(
            "; drains will block on PodDisruptionBudget {}",
            blockers.join(", ")
        ));
    }
    let new_refusals = facts.refused.iter().filter(|r| !r.on_base).count();
    if new_refusals > 0 {
        text = format!("REFUSED ({new_refusals}), {text}");
    } else if !facts.refused.is_empty() {
        text = format!("{text} (still refused as on the base)");
    }
    text
}

/// `+1 worker`, `3 workers replaced (new before old)`, `−1 worker`, per role.
fn machine_phrases(added: &[&PreviewStep]) -> Vec<String> {
    // (created, destroyed) per pool.
    let mut pools: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for step in added {
        let pool = step.step.target.pool.clone().unwrap_or_default();
        match &step.step.action {
            Action::CreateMachine { .. } => pools.entry(pool.to_string()).or_default().0 += 1,
            Action::DestroyMachine { .. } => pools.entry(pool.to_string()).or_default().1 += 1,
            _ => {}
        }
    }
    let (mut plus, mut minus, mut replaced) = ([0usize; 2], [0usize; 2], [0usize; 2]);
    for (pool, (created, destroyed)) in &pools {
        let role = usize::from(pool == CONTROL_PLANE_POOL);
        let both = (*created).min(*destroyed);
        replaced[role] += both;
        plus[role] += created - both;
        minus[role] += destroyed - both;
    }
    let mut out = Vec::new();
    for (role, noun) in [(1, "control plane"), (0, "worker")] {
        if plus[role] > 0 {
            out.push(format!("+{} {}", plus[role], plural(noun, plus[role])));
        }
        if replaced[role] > 0 {
            out.push(format!(
                "{} {} replaced (new before old)",
                replaced[role],
                plural(noun, replaced[role])
            ));
        }
        if minus[role] > 0 {
            out.push(format!("−{} {}", minus[role], plural(noun, minus[role])));
        }
    }
    out
}

/// `data disks +300 GiB on local-lvm`: the GiB of data disks the machines this change creates
/// take, per storage (a disk that names no storage goes to the machine's, else the
/// template's). What a replaced machine gives back when destroyed is not subtracted: new
/// machines are made before old ones go.
fn storage_phrases(added: &[&PreviewStep]) -> Vec<String> {
    let mut by_storage: BTreeMap<String, u64> = BTreeMap::new();
    for step in added {
        if let Action::CreateMachine {
            machine, storage, ..
        } = &step.step.action
        {
            for (name, gib) in machine.hardware.disk_gib_by_storage(storage.as_deref()) {
                *by_storage.entry(name).or_default() += gib;
            }
        }
    }
    by_storage
        .into_iter()
        .map(|(storage, gib)| {
            if storage == "template" {
                format!("data disks +{gib} GiB on the template's storage")
            } else {
                format!("data disks +{gib} GiB on {storage}")
            }
        })
        .collect()
}

/// `labels change in place on 3 nodes`, `taints change in place on 1 node`, `tags or
/// resource pool change in place on 2 VMs`: what the `label-nodes` and `tag-machines` steps
/// this change adds do.
fn in_place_phrases(added: &[&PreviewStep]) -> Vec<String> {
    let relabelled: Vec<&crate::scheduling::Relabel> = added
        .iter()
        .filter_map(|s| match &s.step.action {
            Action::LabelNodes { nodes } => Some(nodes),
            _ => None,
        })
        .flatten()
        .collect();
    let labels = relabelled.iter().filter(|n| n.changes_labels()).count();
    let taints = relabelled.iter().filter(|n| n.changes_taints()).count();
    let mut out: Vec<String> = [("labels", labels), ("taints", taints)]
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .map(|(what, count)| {
            format!(
                "{what} change in place on {count} {}",
                plural("node", count)
            )
        })
        .collect();
    let filed = filed_vms(added);
    if filed > 0 {
        out.push(format!(
            "tags or resource pool change in place on {filed} {}",
            plural("VM", filed)
        ));
    }
    out
}

/// How many VMs the `tag-machines` steps among `steps` file in place.
fn filed_vms<'a>(steps: impl IntoIterator<Item = &'a &'a PreviewStep>) -> usize {
    steps
        .into_iter()
        .filter_map(|s| match &s.step.action {
            Action::TagMachines { machines } => Some(machines.len()),
            _ => None,
        })
        .sum()
}

/// Whether a changed field is a machine's `tags` or `pool`, which apply in place.
fn files_in_place(path: &str) -> bool {
    path.ends_with(".machine.tags") || path.ends_with(".machine.pool")
}

/// `replaces 3 workers: workers.storage.patches changed` for a change of a level's patches
/// (their rendered difference is the preview's configuration diff, not the JSON of the field).
fn patches_changed(change: &FieldChange, predicted: &[PreviewStep]) -> Option<String> {
    let pool = match change.path.as_str() {
        "patches" => None,
        "controlPlane.patches" => Some(CONTROL_PLANE_POOL),
        path => Some(path.strip_prefix("workers.")?.strip_suffix(".patches")?),
    };
    let destroyed = predicted
        .iter()
        .filter(|s| matches!(s.step.action, Action::DestroyMachine { .. }))
        .filter(|s| pool.is_none() || s.step.target.pool.as_deref() == pool)
        .count();
    let noun = match pool {
        Some(CONTROL_PLANE_POOL) => "control plane",
        Some(_) => "worker",
        None => "machine",
    };
    let cause = format!("{} changed", change.path);
    Some(if destroyed == 0 {
        format!("replaces no machine now: {cause}")
    } else {
        format!("replaces {destroyed} {}: {cause}", plural(noun, destroyed))
    })
}

/// `replaces 1 control plane: kubernetes.authentication changed`: the API server's
/// configuration reaches the control planes only.
fn authentication_changed(change: &FieldChange, predicted: &[PreviewStep]) -> Option<String> {
    if !change.path.starts_with("kubernetes.authentication") {
        return None;
    }
    let destroyed = predicted
        .iter()
        .filter(|s| matches!(s.step.action, Action::DestroyMachine { .. }))
        .filter(|s| s.step.target.pool.as_deref() == Some(CONTROL_PLANE_POOL))
        .count();
    let cause = format!("{} changed", change.path);
    Some(if destroyed == 0 {
        format!("replaces no machine now: {cause}")
    } else {
        format!(
            "replaces {destroyed} {}: {cause}",
            plural("control plane", destroyed)
        )
    })
}

/// Whether a changed field is one that applies in place (labels, taints, `schedulable`).
fn applies_in_place(path: &str) -> bool {
    let field = path
        .strip_prefix("controlPlane.")
        .or_else(|| {
            path.strip_prefix("workers.")
                .and_then(|rest| rest.split_once('.'))
                .map(|(_, field)| field)
        })
        .unwrap_or_default();
    field == "taints" || field == "schedulable" || field.starts_with("labels.")
}

fn plural(noun: &str, count: usize) -> String {
    if count == 1 {
        noun.to_owned()
    } else {
        format!("{noun}s")
    }
}

/// A changed field and what it causes: `workers.general.machine.template debian13-k8s →
/// debian13-k8s-v2: replaces 3 workers`.
pub(super) fn explain(change: &FieldChange, predicted: &[PreviewStep]) -> String {
    if let Some(words) =
        patches_changed(change, predicted).or_else(|| authentication_changed(change, predicted))
    {
        return words;
    }
    let text = change.to_string();
    let pool = if change.path.starts_with("controlPlane.machine.") {
        Some(CONTROL_PLANE_POOL)
    } else {
        change
            .path
            .strip_prefix("workers.")
            .and_then(|rest| rest.split_once(".machine."))
            .map(|(pool, _)| pool)
    };
    if files_in_place(&change.path) {
        let steps: Vec<&PreviewStep> = predicted.iter().collect();
        let count = filed_vms(&steps);
        return format!(
            "{text}: applies in place on {count} {} (tag-machines), replaces no machine",
            plural("VM", count)
        );
    }
    // Every replacement the head holds, also those the base would make for another reason:
    // with this change they are built from the new spec.
    let destroyed_in = |pool: Option<&str>| {
        predicted
            .iter()
            .filter(|s| matches!(s.step.action, Action::DestroyMachine { .. }))
            .filter(|s| pool.is_none() || s.step.target.pool.as_deref() == pool)
            .count()
    };
    if let Some(pool) = pool {
        let count = destroyed_in(Some(pool));
        let noun = if pool == CONTROL_PLANE_POOL {
            "control plane"
        } else {
            "worker"
        };
        return if count == 0 {
            format!("{text}: replaces no machine now")
        } else {
            format!("{text}: replaces {count} {}", plural(noun, count))
        };
    }
    if applies_in_place(&change.path) {
        let count: usize = predicted
            .iter()
            .filter_map(|s| match &s.step.action {
                Action::LabelNodes { nodes } => Some(nodes.len()),
                _ => None,
            })
            .sum();
        return format!(
            "{text}: applies in place on {count} {} (label-nodes), replaces no machine",
            plural("node", count)
        );
    }
    if change.path.starts_with("kubernetes.registries") {
        let count = destroyed_in(None);
        return format!(
            "{text}: replaces {count} {} (a runtime reads its registries as it starts)",
            plural("machine", count)
        );
    }
    if change.path == "talos.version" {
        let count = destroyed_in(None);
        return format!(
            "{text}: replaces {count} {} (each machine runs its template's release)",
            plural("machine", count)
        );
    }
    if change.path == "kubernetes.version" {
        let count = destroyed_in(None);
        let in_place = predicted
            .iter()
            .any(|s| matches!(s.step.action, Action::UpgradeControlPlane { .. }));
        // K3s and Talos move a version by replacing machines alone.
        return if in_place {
            format!(
                "{text}: upgraded in place on the control plane, then {count} {} replaced",
                plural("node", count)
            )
        } else {
            format!("{text}: replaces {count} {}", plural("node", count))
        };
    }
    text
}
