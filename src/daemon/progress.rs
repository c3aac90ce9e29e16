//! Progress on the terminal: one line per cluster whenever its phase, its next step or what
//! it waits on changes, so a person watching sees what happens and what it waits for.

use std::collections::BTreeMap;
use std::io::Write;

use crate::status::{ClusterStatus, FleetStatus};

/// Prints changes of the fleet's status.
pub(super) struct Progress {
    out: Box<dyn Write + Send>,
    last: BTreeMap<String, String>,
    last_errors: Vec<String>,
}

impl Progress {
    pub(super) fn new(out: Box<dyn Write + Send>) -> Self {
        Progress {
            out,
            last: BTreeMap::new(),
            last_errors: Vec::new(),
        }
    }

    /// Prints a line for each cluster whose summary changed since the last report.
    pub(super) fn report(&mut self, status: &FleetStatus) {
        if status.repository_errors != self.last_errors {
            for error in &status.repository_errors {
                self.print(&format!("repository  {error}"));
            }
            self.last_errors.clone_from(&status.repository_errors);
        }
        for (name, cluster) in &status.clusters {
            let line = summary(name, cluster);
            if self.last.get(name) != Some(&line) {
                self.print(&line);
                self.last.insert(name.clone(), line);
            }
        }
    }

    fn print(&mut self, line: &str) {
        // The terminal going away is no reason to stop reconciling.
        let _ = writeln!(self.out, "{line}");
        let _ = self.out.flush();
    }
}

/// `prod        Provisioning  join-node capstan-prod-general-1a2b3 · waiting on ...`
pub(super) fn summary(name: &str, cluster: &ClusterStatus) -> String {
    let ready = cluster
        .nodes
        .iter()
        .filter(|n| n.ready == Some(true))
        .count();
    let mut line = format!(
        "{name:<12} {:<12} {ready}/{} nodes Ready",
        cluster.phase.to_string(),
        cluster.nodes.len()
    );
    if let Some(version) = cluster.version {
        line.push_str(&format!(", v{version}"));
    }
    if !cluster.next_steps.is_empty() {
        line.push_str(&format!(" · {}", cluster.next_steps.join(", ")));
    }
    if let Some(wait) = cluster.waiting_on.first() {
        line.push_str(&format!(" · waiting on {}", wait.resource));
    }
    if let Some(blocked) = cluster
        .conditions
        .iter()
        .find(|c| c.kind == crate::status::conditions::BLOCKED && c.is_true())
    {
        line.push_str(&format!(" · BLOCKED: {}", blocked.message));
    }
    line
}
