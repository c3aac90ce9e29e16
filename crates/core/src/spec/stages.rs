//! Staged rollouts across clusters (`rollout.after`): every name a cluster follows is a
//! cluster of the repository, never itself, at most once, and the clusters following one
//! another form no cycle (a cycle would hold each of its clusters forever). Checked across
//! files, as unique names are: each finding is on the entry of `after` that causes it.

use std::collections::{BTreeMap, VecDeque};

use super::diagnostic::Diagnostic;
use super::limits::MAX_FOLLOWED;
use super::validate::Checked;

/// The findings about `rollout.after`, each with the index (in `clusters`) of the file it is
/// about.
pub fn across(clusters: &[Checked<'_>]) -> Vec<(usize, Diagnostic)> {
    let mut out = Vec::new();
    // The first file of a name is the cluster (a duplicate is refused on its own).
    let mut index_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, checked) in clusters.iter().enumerate() {
        index_of
            .entry(checked.cluster.metadata.name.as_str())
            .or_insert(index);
    }
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); clusters.len()];
    for (index, checked) in clusters.iter().enumerate() {
        let Checked { cluster, file, .. } = checked;
        let after = &cluster.spec.rollout.after;
        if after.len() > MAX_FOLLOWED {
            out.push((
                index,
                file.error(
                    "spec.rollout.after",
                    format!("{} clusters: at most {MAX_FOLLOWED}", after.len()),
                )
                .with_hint("follow the last stage before this one; it follows the earlier ones"),
            ));
            continue;
        }
        for (position, name) in after.iter().enumerate() {
            let field = format!("spec.rollout.after[{position}]");
            if *name == cluster.metadata.name {
                out.push((
                    index,
                    file.error(&field, format!("cluster `{name}` cannot follow itself"))
                        .with_hint("name the clusters that roll out before this one"),
                ));
            } else if after[..position].contains(name) {
                out.push((
                    index,
                    file.error(&field, format!("`{name}` is listed twice")),
                ));
            } else if let Some(&target) = index_of.get(name.as_str()) {
                edges[index].push(target);
            } else {
                out.push((
                    index,
                    file.error(&field, format!("no cluster `{name}` in this repository"))
                        .with_hint(known(&index_of)),
                ));
            }
        }
    }
    for (index, checked) in clusters.iter().enumerate() {
        if index_of.get(checked.cluster.metadata.name.as_str()) != Some(&index) {
            continue;
        }
        if let Some(cycle) = cycle_through(index, &edges) {
            let names: Vec<&str> = cycle
                .iter()
                .map(|&i| clusters[i].cluster.metadata.name.as_str())
                .collect();
            let next = names.get(1).copied().unwrap_or_default();
            let position = checked
                .cluster
                .spec
                .rollout
                .after
                .iter()
                .position(|name| name == next)
                .unwrap_or_default();
            out.push((
                index,
                checked
                    .file
                    .error(
                        &format!("spec.rollout.after[{position}]"),
                        format!("the stages make a cycle: {}", names.join(" → ")),
                    )
                    .with_hint("each cluster of a cycle would wait on itself: remove one `after`"),
            ));
        }
    }
    out
}

/// A shortest cycle from `start` back to it along `edges` (`start` first and last), if one
/// exists. Breadth-first: linear in the clusters and their `after` entries.
fn cycle_through(start: usize, edges: &[Vec<usize>]) -> Option<Vec<usize>> {
    let mut parent: Vec<Option<usize>> = vec![None; edges.len()];
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &next in &edges[node] {
            if next == start {
                let mut cycle = vec![start, node];
                let mut at = node;
                while let Some(before) = parent[at] {
                    cycle.push(before);
                    at = before;
                }
                // Walked backwards from the end: `start`, last, ..., first, `start`.
                cycle.reverse();
                return Some(cycle);
            }
            if parent[next].is_none() && next != start {
                parent[next] = Some(node);
                queue.push_back(next);
            }
        }
    }
    None
}

/// The clusters a name may be, for a hint.
fn known(index_of: &BTreeMap<&str, usize>) -> String {
    const SHOWN: usize = 10;
    let names: Vec<&str> = index_of.keys().take(SHOWN).copied().collect();
    let more = if index_of.len() > SHOWN { ", …" } else { "" };
    format!("clusters here: {}{more}", names.join(", "))
}

#[cfg(test)]
mod tests;
