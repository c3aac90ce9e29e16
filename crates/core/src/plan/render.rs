//! Rendering a [`Plan`] for people and programs: plain text (a terminal), Markdown (what a
//! pull-request comment shows) and JSON (the plan's serde form plus the repository findings).
//!
//! Every refusal is printed in plain words with the rule that made it; every cluster says what
//! it waits on and since when. Nothing here reads a secret: fingerprints only.

use std::fmt::Write as _;

use crate::plan::{ClusterPlan, Finding, Plan, Step, Waiting};
use crate::spec::{Diagnostics, Severity};

/// The plan as text for a terminal.
pub fn text(plan: &Plan, diagnostics: &Diagnostics) -> String {
    let mut out = String::new();
    if !diagnostics.0.is_empty() {
        let _ = writeln!(out, "{diagnostics}");
    }
    let _ = writeln!(out, "plan at {}", plan.now);
    for cluster in &plan.clusters {
        let _ = writeln!(out, "\n{}", summary(cluster));
        if !cluster.steps.is_empty() {
            let _ = writeln!(out, "  may run now:");
            for step in &cluster.steps {
                let _ = writeln!(out, "    - {}", step_line(step));
            }
        }
        if !cluster.predicted.is_empty() {
            let _ = writeln!(out, "  predicted, to convergence:");
            for (index, step) in cluster.predicted.iter().enumerate() {
                let _ = writeln!(out, "    {:>2}. {}", index + 1, step_line(step));
            }
        }
        for blocked in &cluster.blocked {
            let _ = writeln!(
                out,
                "  BLOCKED (rule {}, {}): {}",
                blocked.rule.number(),
                blocked.rule.title(),
                blocked.message
            );
        }
        for waiting in &cluster.waiting_on {
            let _ = writeln!(out, "  waiting on: {}", waiting_line(waiting));
        }
        for finding in &cluster.findings {
            let _ = writeln!(out, "  note: {}", finding.message);
        }
    }
    if !plan.findings.is_empty() {
        let _ = writeln!(out, "\nfleet:");
        for finding in &plan.findings {
            let _ = writeln!(out, "  - {}", finding_line(finding));
        }
    }
    out
}

/// The plan as a Markdown pull-request comment: a summary line per cluster, the steps in
/// order, every refusal in plain words.
pub fn markdown(plan: &Plan, diagnostics: &Diagnostics) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### capstan plan\n");
    let _ = writeln!(out, "Planned at {} against the observed state.\n", plan.now);
    let errors: Vec<_> = diagnostics
        .0
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    if !errors.is_empty() {
        let _ = writeln!(
            out,
            "**The repository has {} error(s)**: the clusters they concern are left out, and nothing is deleted for being absent.\n",
            errors.len()
        );
        for diagnostic in errors {
            let _ = writeln!(
                out,
                "- `{}`: {}",
                diagnostic.file,
                escape(&diagnostic.message)
            );
        }
        let _ = writeln!(out);
    }
    for cluster in &plan.clusters {
        let _ = writeln!(out, "#### {}\n", summary_markdown(cluster));
        for blocked in &cluster.blocked {
            let _ = writeln!(
                out,
                "> **Refused (rule {}, {}):** {}\n",
                blocked.rule.number(),
                blocked.rule.title(),
                escape(&blocked.message)
            );
        }
        if !cluster.predicted.is_empty() {
            for (index, step) in cluster.predicted.iter().enumerate() {
                let runs_now = index < cluster.steps.len() && cluster.steps.contains(step);
                let _ = writeln!(
                    out,
                    "{}. {}{}",
                    index + 1,
                    step_markdown(step),
                    if runs_now { " — *runs now*" } else { "" }
                );
            }
            let _ = writeln!(out);
        }
        if !cluster.waiting_on.is_empty() {
            let _ = writeln!(out, "Waiting on:\n");
            for waiting in &cluster.waiting_on {
                let _ = writeln!(out, "- {}", escape(&waiting_line(waiting)));
            }
            let _ = writeln!(out);
        }
        for finding in &cluster.findings {
            let _ = writeln!(out, "- Note: {}", escape(&finding.message));
        }
        if !cluster.findings.is_empty() {
            let _ = writeln!(out);
        }
    }
    if !plan.findings.is_empty() {
        let _ = writeln!(out, "#### Fleet\n");
        for finding in &plan.findings {
            let _ = writeln!(out, "- {}", escape(&finding_line(finding)));
        }
    }
    out
}

/// The plan as JSON: `now`, `valid`, `diagnostics`, `clusters` (each with `phase`, `steps`,
/// `predicted`, `blocked`, `waitingOn`, `findings`) and fleet `findings`.
pub fn json(plan: &Plan, diagnostics: &Diagnostics) -> String {
    let value = serde_json::json!({
        "now": plan.now,
        "valid": !diagnostics.has_errors(),
        "diagnostics": diagnostics.0,
        "clusters": plan.clusters,
        "findings": plan.findings,
    });
    format!("{value:#}\n")
}

fn counts(cluster: &ClusterPlan) -> String {
    match (cluster.predicted.len(), cluster.steps.len()) {
        (0, _) if cluster.waiting_on.is_empty() => "nothing to do".to_owned(),
        (0, _) => "nothing to do until what it waits on changes".to_owned(),
        (total, 0) => format!("{total} step(s) to converge, none may run now"),
        (total, now) => format!("{total} step(s) to converge, {now} may run now"),
    }
}

fn summary(cluster: &ClusterPlan) -> String {
    format!("{}: {} — {}", cluster.name, cluster.phase, counts(cluster))
}

fn summary_markdown(cluster: &ClusterPlan) -> String {
    format!(
        "`{}` — {}: {}",
        cluster.name,
        cluster.phase,
        counts(cluster)
    )
}

fn target(step: &Step) -> String {
    let target = &step.target;
    let mut text = match &target.machine {
        Some(machine) => machine.to_string(),
        None => format!("cluster {}", target.cluster),
    };
    if let Some(vm_id) = target.vm_id {
        let _ = write!(text, " (VM {vm_id})");
    }
    text
}

fn step_line(step: &Step) -> String {
    let mut line = format!("{} {}: {}", step.name(), target(step), step.reason);
    if step.disruptive {
        line.push_str(" [disruptive]");
    }
    if let Some(wait) = &step.waits_on {
        let _ = write!(line, " [waits on {}]", wait.resource);
    }
    line
}

fn step_markdown(step: &Step) -> String {
    let mut line = format!(
        "`{}` **{}** — {}",
        step.name(),
        escape(&target(step)),
        escape(&step.reason)
    );
    if step.disruptive {
        line.push_str(" · **disruptive**");
    }
    if let Some(wait) = &step.waits_on {
        let _ = write!(line, " · waits on {}", escape(&wait.resource.to_string()));
    }
    line
}

fn waiting_line(waiting: &Waiting) -> String {
    let mut line = String::new();
    if let Some(step) = waiting.step {
        let _ = write!(line, "{step}");
        if let Some(machine) = &waiting.machine {
            let _ = write!(line, " {machine}");
        }
        line.push_str(" waits on ");
    }
    let _ = write!(line, "{}", waiting.resource);
    if let Some(since) = waiting.since {
        let _ = write!(line, ", since {since}");
    }
    line
}

fn finding_line(finding: &Finding) -> String {
    finding.message.clone()
}

/// Keeps Markdown from reading `*`, `_`, `<` or `|` in names and messages as markup, and
/// from reading a line break in them as a new block (a fake heading): control characters are
/// written as escapes (`\n`).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '_' | '<' | '>' | '|' | '`' | '[' | ']') {
            out.push('\\');
        }
        crate::spec::diagnostic::push_printable(&mut out, c);
    }
    out
}

/// `text` as a Markdown code span it cannot leave: delimited by one more backtick than its
/// longest run of them (CommonMark's rule), padded with a space where it starts or ends with
/// one, control characters written as escapes.
pub(crate) fn code(text: &str) -> String {
    let mut inner = String::with_capacity(text.len());
    for c in text.chars() {
        crate::spec::diagnostic::push_printable(&mut inner, c);
    }
    let ticks = "`".repeat(longest_backtick_run(&inner) + 1);
    let pad = if inner.starts_with('`') || inner.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{inner}{pad}{ticks}")
}

/// A code fence for a block holding `text`: at least three backticks, one more than its
/// longest run of them, so no line of `text` closes it.
pub(crate) fn fence(text: &str) -> String {
    "`".repeat((longest_backtick_run(text) + 1).max(3))
}

fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_escapes_what_would_render_as_markup() {
        assert_eq!(escape("a_b *c* <d>"), "a\\_b \\*c\\* \\<d\\>");
    }

    #[test]
    fn an_escaped_value_stays_on_its_line() {
        assert_eq!(
            escape("tmpl\n### capstan preview\r\n"),
            "tmpl\\n### capstan preview\\r\\n"
        );
    }

    #[test]
    fn a_code_span_is_longer_than_any_backtick_run_it_holds() {
        assert_eq!(code("debian13"), "`debian13`");
        assert_eq!(code("a`b``c"), "```a`b``c```");
        assert_eq!(code("`x"), "`` `x ``");
        assert_eq!(code("a\nb"), "`a\\nb`");
        assert_eq!(fence("+a\n+````\n"), "`````");
        assert_eq!(fence("+a"), "```");
    }
}
