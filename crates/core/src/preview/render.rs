//! A [`Preview`] as Markdown (the pull-request comment: refusals first, one collapsed section
//! per changed cluster), plain text (a terminal) and JSON (`summary`, `refusals`, and per
//! cluster `name`, `diff`, `changes`, `predicted` as `capstan plan` prints steps, with
//! `pendingOnBase`, and `refused`).

use std::fmt::Write as _;

use crate::plan::render::{code, escape, fence};
use crate::plan::{Action, Step};

use super::{ClusterPreview, Preview, PreviewStep, Refusal};

/// The preview as a Markdown pull-request comment.
pub fn markdown(preview: &Preview) -> String {
    markdown_collapsing(preview, &|_| false)
}

/// [`markdown`], with the clusters `collapsed` names (by index in `preview.clusters`) shown
/// as their summary line only, and the `capstan.yaml` diff left out when `collapsed(usize::MAX)`.
pub(super) fn markdown_collapsing(preview: &Preview, collapsed: &dyn Fn(usize) -> bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### capstan preview\n");
    let _ = writeln!(out, "**{}**\n", escape(&preview.summary));
    let _ = writeln!(
        out,
        "{} → {}, planned at {} against the observed state.\n",
        code(&preview.base),
        code(&preview.head),
        preview.now
    );
    if !preview.stages.is_empty() {
        let _ = writeln!(out, "Stages in order: {}\n", escape(&stages_line(preview)));
    }
    if preview.is_refused() {
        let _ = writeln!(
            out,
            "#### Refused: merging this change is refused until these are fixed\n"
        );
        for refusal in &preview.refusals {
            let _ = writeln!(out, "- {}", refusal_markdown(refusal));
        }
        let _ = writeln!(out);
    }
    out.push_str(&fleet_section(preview, collapsed(usize::MAX)));
    for (index, cluster) in preview.clusters.iter().enumerate() {
        if collapsed(index) {
            collapsed_cluster_markdown(&mut out, cluster);
        } else {
            cluster_markdown(&mut out, cluster);
        }
    }
    if preview.clusters.is_empty() {
        let _ = writeln!(out, "No cluster changes.");
    }
    out
}

/// One refusal as a Markdown line (without its list marker).
pub(super) fn refusal_markdown(refusal: &Refusal) -> String {
    let mut line = format!("**{}**", escape(&refusal.rule));
    if let Some(location) = &refusal.location {
        let _ = write!(line, " {}", code(location));
    } else if let Some(cluster) = &refusal.cluster {
        let _ = write!(line, " {}", code(cluster));
    }
    if let Some(field) = &refusal.field {
        let _ = write!(line, " {}", code(field));
    }
    let _ = write!(line, ": {}", escape(&refusal.message));
    if let Some(fix) = &refusal.fix {
        let _ = write!(line, " **Fix:** {}", escape(fix));
    }
    if refusal.on_base {
        line.push_str(" *(refused on the base too)*");
    }
    line
}

/// The `capstan.yaml` diff's section, `collapsed` to a line or whole (empty without a diff).
pub(super) fn fleet_section(preview: &Preview, collapsed: bool) -> String {
    let mut out = String::new();
    if preview.fleet_diff.is_empty() {
        return out;
    }
    if collapsed {
        let _ = writeln!(
            out,
            "<details><summary><b>capstan.yaml</b> changes (collapsed to fit this comment)</summary></details>\n"
        );
    } else {
        let _ = writeln!(
            out,
            "<details><summary><b>capstan.yaml</b> changes</summary>\n"
        );
        write_diff(&mut out, &preview.fleet_diff);
        let _ = writeln!(out, "</details>\n");
    }
    out
}

/// A cluster's collapsed section, as [`markdown_collapsing`] writes it.
pub(super) fn collapsed_cluster_section(cluster: &ClusterPreview) -> String {
    let mut out = String::new();
    collapsed_cluster_markdown(&mut out, cluster);
    out
}

/// A cluster's section as its summary line and refusals only (the comment would be too long).
fn collapsed_cluster_markdown(out: &mut String, cluster: &ClusterPreview) {
    let _ = writeln!(
        out,
        "<details><summary><b>{}</b>: {} (collapsed to fit this comment)</summary>\n",
        html(&cluster.name),
        html(&cluster.summary)
    );
    for refusal in &cluster.refused {
        let _ = writeln!(out, "> **Refused:** {}\n", refusal_markdown(refusal));
    }
    let _ = writeln!(out, "</details>\n");
}

/// A cluster's full section, as [`markdown`] writes it.
pub(super) fn cluster_section(cluster: &ClusterPreview) -> String {
    let mut out = String::new();
    cluster_markdown(&mut out, cluster);
    out
}

fn cluster_markdown(out: &mut String, cluster: &ClusterPreview) {
    let _ = writeln!(
        out,
        "<details><summary><b>{}</b>: {}</summary>\n",
        html(&cluster.name),
        html(&cluster.summary)
    );
    for refusal in &cluster.refused {
        let _ = writeln!(out, "> **Refused:** {}\n", refusal_markdown(refusal));
    }
    if !cluster.changes.is_empty() {
        let _ = writeln!(out, "**Changes**\n");
        for change in &cluster.changes {
            let _ = writeln!(out, "- {}", escape(change));
        }
        let _ = writeln!(out);
    }
    write_diff(out, &cluster.diff);
    if !cluster.config_diffs.is_empty() {
        let _ = writeln!(
            out,
            "**Rendered configuration** that changes (secrets redacted):\n"
        );
        for diff in &cluster.config_diffs {
            write_diff(out, diff);
        }
    }
    if cluster.predicted.is_empty() {
        let _ = writeln!(out, "No steps: the head converges with nothing to do.\n");
    } else {
        let _ = writeln!(
            out,
            "**Predicted steps** against the observed state, in order:\n"
        );
        for (index, step) in cluster.predicted.iter().enumerate() {
            let _ = writeln!(out, "{}. {}", index + 1, step_markdown(step));
        }
        let _ = writeln!(out);
    }
    if let Some(estimate) = &cluster.estimate {
        let _ = writeln!(
            out,
            "**Estimated duration**: {}\n",
            escape(&estimate.explanation)
        );
    }
    drains_markdown(out, cluster);
    let _ = writeln!(out, "</details>\n");
}

fn drains_markdown(out: &mut String, cluster: &ClusterPreview) {
    if cluster.drains.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "**Drains** simulated against the observed pods and PodDisruptionBudgets:\n"
    );
    for drain in &cluster.drains {
        let evicts: Vec<String> = drain.evicts.iter().map(|p| code(p)).collect();
        let evicts = if evicts.is_empty() {
            "nothing to evict".to_owned()
        } else {
            format!("evicts {}", evicts.join(", "))
        };
        let _ = writeln!(out, "- {}: {evicts}", code(drain.node.as_str()));
        for block in &drain.blocked_by {
            let pods: Vec<String> = block.pods.iter().map(|p| code(p)).collect();
            let _ = writeln!(
                out,
                "  - **{}**: {} allows {} disruption(s) now; guards {}",
                // Made of a DNS-1123 name and numbers: its backticks are meant as code.
                block.message,
                code(&block.budget),
                block.allowed,
                pods.join(", ")
            );
        }
    }
    let _ = writeln!(out);
}

fn write_diff(out: &mut String, diff: &str) {
    if diff.is_empty() {
        return;
    }
    let fence = fence(diff);
    let _ = writeln!(out, "{fence}diff\n{diff}{fence}\n");
}

fn step_markdown(step: &PreviewStep) -> String {
    let inner = &step.step;
    let mut line = format!("`{}` **{}**", inner.name(), escape(&target(inner)));
    if let Some(node) = proxmox_node(inner) {
        let _ = write!(line, " on {}", code(node));
    }
    let _ = write!(line, " — {}", escape(&inner.reason));
    if inner.disruptive {
        line.push_str(" · disruptive");
    }
    if let Some(wait) = &inner.waits_on {
        let _ = write!(line, " · waits on {}", escape(&wait.resource.to_string()));
    }
    line.push_str(if step.pending_on_base {
        " · *already pending on the base*"
    } else {
        " · **added by this change**"
    });
    line
}

/// The stages, numbered, with their estimated starts: `1. staging (starts now); 2. prod-a
/// (after staging, soak 30m), prod-b (...) (starts about Sat 2026-05-02 01:40 UTC)`.
fn stages_line(preview: &Preview) -> String {
    preview
        .stages
        .iter()
        .enumerate()
        .map(|(index, stage)| {
            let starts = match stage.starts {
                Some(at) if at <= preview.now => " (starts now)".to_owned(),
                Some(at) => format!(
                    " (starts about {} UTC)",
                    crate::plan::day_and_time(at, "UTC")
                ),
                None => String::new(),
            };
            format!("{}. {}{starts}", index + 1, stage.clusters.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The preview as text for a terminal.
pub fn text(preview: &Preview) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", preview.summary);
    let _ = writeln!(
        out,
        "preview of {} → {} at {}",
        preview.base, preview.head, preview.now
    );
    if !preview.stages.is_empty() {
        let _ = writeln!(out, "stages in order: {}", stages_line(preview));
    }
    if preview.is_refused() {
        let _ = writeln!(out, "\nREFUSED:");
        for refusal in &preview.refusals {
            let _ = writeln!(out, "  - {}", refusal_text(refusal));
        }
    }
    if !preview.fleet_diff.is_empty() {
        let _ = writeln!(out, "\ncapstan.yaml:");
        for line in preview.fleet_diff.lines() {
            let _ = writeln!(out, "  | {line}");
        }
    }
    for cluster in &preview.clusters {
        let _ = writeln!(out, "\n{}: {}", cluster.name, cluster.summary);
        for change in &cluster.changes {
            let _ = writeln!(out, "  change: {change}");
        }
        for line in cluster.diff.lines() {
            let _ = writeln!(out, "  | {line}");
        }
        if !cluster.predicted.is_empty() {
            let _ = writeln!(out, "  predicted steps:");
        }
        for (index, step) in cluster.predicted.iter().enumerate() {
            let _ = writeln!(out, "    {:>2}. {}", index + 1, step_text(step));
        }
        if let Some(estimate) = &cluster.estimate {
            let _ = writeln!(out, "  estimated duration: {}", estimate.explanation);
        }
        for drain in &cluster.drains {
            let _ = writeln!(
                out,
                "  drain {}: evicts {}",
                drain.node,
                if drain.evicts.is_empty() {
                    "nothing".to_owned()
                } else {
                    drain.evicts.join(", ")
                }
            );
            for block in &drain.blocked_by {
                let _ = writeln!(
                    out,
                    "    {} ({} allows {} now; guards {})",
                    block.message,
                    block.budget,
                    block.allowed,
                    block.pods.join(", ")
                );
            }
        }
    }
    out
}

fn refusal_text(refusal: &Refusal) -> String {
    let mut line = refusal.rule.clone();
    if let Some(location) = &refusal.location {
        let _ = write!(line, " {location}");
    } else if let Some(cluster) = &refusal.cluster {
        let _ = write!(line, " {cluster}");
    }
    if let Some(field) = &refusal.field {
        let _ = write!(line, " {field}");
    }
    let _ = write!(line, ": {}", refusal.message);
    if let Some(fix) = &refusal.fix {
        let _ = write!(line, "\n      fix: {fix}");
    }
    if refusal.on_base {
        line.push_str(" (refused on the base too)");
    }
    line
}

fn step_text(step: &PreviewStep) -> String {
    let inner = &step.step;
    let mut line = format!("{} {}", inner.name(), target(inner));
    if let Some(node) = proxmox_node(inner) {
        let _ = write!(line, " on {node}");
    }
    let _ = write!(line, ": {}", inner.reason);
    if inner.disruptive {
        line.push_str(" [disruptive]");
    }
    if let Some(wait) = &inner.waits_on {
        let _ = write!(line, " [waits on {}]", wait.resource);
    }
    line.push_str(if step.pending_on_base {
        " [already pending on the base]"
    } else {
        " [added by this change]"
    });
    line
}

/// The preview as JSON.
pub fn json(preview: &Preview) -> String {
    let value = serde_json::to_value(preview).unwrap_or_default();
    format!("{value:#}\n")
}

fn target(step: &Step) -> String {
    let mut text = match &step.target.machine {
        Some(machine) => machine.to_string(),
        None => format!("cluster {}", step.target.cluster),
    };
    if let Some(vm_id) = step.target.vm_id {
        let _ = write!(text, " (VM {vm_id})");
    }
    text
}

/// The Proxmox node a step acts on, when it acts on one VM.
fn proxmox_node(step: &Step) -> Option<&str> {
    match &step.action {
        Action::CreateMachine { proxmox_node, .. } => Some(proxmox_node),
        Action::InitControlPlane { machine, .. }
        | Action::PrepareNode { machine, .. }
        | Action::JoinNode { machine, .. }
        | Action::ResetNode { machine }
        | Action::DestroyMachine { machine, .. }
        | Action::UpgradeControlPlane { machine, .. }
        | Action::FenceMachine { machine, .. } => Some(&machine.proxmox_node),
        Action::DeleteNode {
            machine: Some(machine),
            ..
        } => Some(&machine.proxmox_node),
        _ => None,
    }
}

/// Escapes text for HTML inside `<summary>`: a blank line there would end the HTML block
/// and start Markdown, so control characters are written as escapes too.
fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => crate::spec::diagnostic::push_printable(&mut out, c),
        }
    }
    out
}
