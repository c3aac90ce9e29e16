//! The status branch's files, rendered from the daemon's [`FleetStatus`] (pure: no I/O, no
//! clock): `clusters/<name>.yaml` per cluster and a `README.md` table of them all, and the
//! commit message that says what changed. Read back into a [`FleetStatus`] for
//! `capstan status --repo`. When to write them is [`debounce`]'s to say; the daemon's writer
//! (`capstan::status_branch`) commits and pushes them.
//!
//! # Guarantees
//! - Nothing that merely ticks is rendered: no ages, no "observed at", no transition times, no
//!   time a step ended. An unchanged fleet renders byte-identical files. The one time of day
//!   kept, since when a cluster is converged (what staged rollouts' soaks count from), changes
//!   only when the cluster becomes Ready, and a restarted daemon reads it back.
//! - Only fingerprints of kubeconfigs are rendered, never a kubeconfig (the guard in
//!   [`guard`] checks the result anyway).

pub mod debounce;
pub mod guard;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::spec::KubeVersion;
use crate::status::{
    ClusterStatus, Condition, FleetStatus, NodeStatus, Phase, Refusal, StepRecord, WaitingOn,
};

/// The folder of the cluster files on the status branch.
pub const CLUSTERS_DIR: &str = "clusters";
/// The table of every cluster.
pub const README: &str = "README.md";
/// `apiVersion` of a status file.
pub const API_VERSION: &str = "capstan.dev/v1alpha1";
/// `kind` of a status file.
pub const KIND: &str = "ClusterStatus";
/// The trailer naming the revision of the tracked branch the status was computed at.
pub const REVISION_TRAILER: &str = "Capstan-Revision";

/// Whether capstan owns `path` on the status branch: `README.md` and every
/// `clusters/*.yaml`. Every other file belongs to someone else and is kept as it is.
pub fn is_capstan_file(path: &str) -> bool {
    path == README
        || path
            .strip_prefix(CLUSTERS_DIR)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|name| !name.contains('/') && name.ends_with(".yaml"))
}

/// The path of `cluster`'s file.
pub fn cluster_path(cluster: &str) -> String {
    format!("{CLUSTERS_DIR}/{cluster}.yaml")
}

/// Whether capstan may write `path`: `README.md`, or `clusters/<name>.yaml` where `name` is
/// a DNS-1123 label. Cluster names in a status may come from a Proxmox tag; a name that is
/// not a label never becomes a path (it could climb out of `clusters/` or break the tree).
pub fn is_writable_path(path: &str) -> bool {
    path == README
        || path
            .strip_prefix(CLUSTERS_DIR)
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(|name| name.strip_suffix(".yaml"))
            .is_some_and(crate::spec::values::is_dns1123_label)
}

/// One cluster's file on the status branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterFile {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// Always [`KIND`].
    pub kind: String,
    /// The cluster.
    pub name: String,
    /// Where the cluster is.
    pub phase: Phase,
    /// Which revisions of the tracked branch it was acted on at and converged at.
    pub revisions: Revisions,
    /// The control plane's Kubernetes version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<KubeVersion>,
    /// When the certificates expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificates_expire: Option<Timestamp>,
    /// The fingerprint of the cluster's admin kubeconfig, what Flux is given (never the
    /// kubeconfig).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_fingerprint: Option<String>,
    /// The fingerprint of the kubeconfig Flux's Secret holds (never the kubeconfig).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flux_kubeconfig_fingerprint: Option<String>,
    /// Nodes Ready.
    pub nodes_ready: u32,
    /// Nodes the cluster file declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes_declared: Option<u32>,
    /// Machines and their nodes.
    #[serde(default)]
    pub nodes: Vec<NodeStatus>,
    /// Conditions with reasons (no transition times: they would change on a restart).
    #[serde(default)]
    pub conditions: Vec<FileCondition>,
    /// What the cluster waits on, and since when.
    #[serde(default)]
    pub waiting_on: Vec<WaitingOn>,
    /// The steps that run next.
    #[serde(default)]
    pub next_steps: Vec<String>,
    /// The last step and how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_step: Option<FileStep>,
    /// What the planner refuses, with its rule.
    #[serde(default)]
    pub refusals: Vec<Refusal>,
    /// Its suspensions, Git's first: where each was set and, at runtime, who set it, when
    /// and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suspended: Vec<crate::plan::Suspension>,
}

/// Revisions of the tracked branch.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Revisions {
    /// The revision the last step was decided at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acted_on: Option<String>,
    /// The revision at which the cluster last became Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converged: Option<String>,
    /// Since when it is Ready with nothing to do, without a break (what the soaks of the
    /// clusters that follow it count from): a restarted daemon reads it back. It changes only
    /// when the cluster becomes Ready again, never while it stays so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converged_since: Option<Timestamp>,
}

/// A condition as the status branch holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileCondition {
    /// Its type.
    #[serde(rename = "type")]
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// One CamelCase word saying why the condition has its status.
    pub reason: String,
    /// In plain words.
    pub message: String,
}

/// The last step as the status branch holds it (without the time it ended).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileStep {
    /// Action name.
    pub action: crate::plan::ActionKind,
    /// Its target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<crate::model::NodeName>,
    /// `succeeded` or `failed`.
    pub result: String,
    /// Failures in a row.
    pub failures: u32,
    /// What it did, or why it failed.
    pub message: String,
    /// The revision it was decided at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// The files capstan owns on the branch, by path.
pub type Files = BTreeMap<String, String>;

/// The cluster files among `files`, parsed (files that do not parse are left out: they are
/// rewritten).
pub fn parse_clusters(files: &Files) -> BTreeMap<String, ClusterFile> {
    files
        .iter()
        .filter(|(path, _)| path.starts_with(CLUSTERS_DIR) && path.ends_with(".yaml"))
        .filter_map(|(_, text)| serde_saphyr::from_str::<ClusterFile>(text).ok())
        .map(|file| (file.name.clone(), file))
        .collect()
}

/// The clusters of `status` that get no file: their name is not a DNS-1123 label (the writer
/// says so in its log).
pub fn unwritable_clusters(status: &FleetStatus) -> impl Iterator<Item = &str> {
    status
        .clusters
        .keys()
        .map(String::as_str)
        .filter(|name| !crate::spec::values::is_dns1123_label(name))
}

/// Every cluster's file, from `status`, but for [`unwritable_clusters`]. `previous` (the files
/// on the branch) gives each cluster's converged revision while it stays Ready.
pub fn cluster_files(
    status: &FleetStatus,
    previous: &BTreeMap<String, ClusterFile>,
) -> BTreeMap<String, ClusterFile> {
    status
        .clusters
        .iter()
        .filter(|(name, _)| crate::spec::values::is_dns1123_label(name))
        .map(|(name, cluster)| {
            let before = previous.get(name);
            let converged = match before {
                Some(before) if before.phase == Phase::Ready && cluster.phase == Phase::Ready => {
                    before.revisions.converged.clone()
                }
                _ if cluster.phase == Phase::Ready => status.revision.clone(),
                Some(before) => before.revisions.converged.clone(),
                None => None,
            };
            let mut file = cluster_file(name, cluster, converged);
            // A restarted daemon has run no step yet: the branch keeps saying which ran last.
            if file.last_step.is_none()
                && let Some(before) = before
            {
                file.last_step.clone_from(&before.last_step);
                file.revisions
                    .acted_on
                    .clone_from(&before.revisions.acted_on);
            }
            (name.clone(), file)
        })
        .collect()
}

fn cluster_file(name: &str, cluster: &ClusterStatus, converged: Option<String>) -> ClusterFile {
    ClusterFile {
        api_version: API_VERSION.to_owned(),
        kind: KIND.to_owned(),
        name: name.to_owned(),
        phase: cluster.phase,
        revisions: Revisions {
            acted_on: cluster.last_step.as_ref().and_then(|s| s.revision.clone()),
            converged,
            converged_since: cluster.converged.as_ref().map(|c| c.since),
        },
        kubernetes_version: cluster.version,
        certificates_expire: cluster.certificate_expiry,
        kubeconfig_fingerprint: cluster.kubeconfig_fingerprint.clone(),
        flux_kubeconfig_fingerprint: cluster.flux_kubeconfig_fingerprint.clone(),
        nodes_ready: ready_count(&cluster.nodes),
        nodes_declared: cluster.declared_nodes,
        nodes: cluster.nodes.clone(),
        conditions: cluster
            .conditions
            .iter()
            .map(|c| FileCondition {
                kind: c.kind.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
            })
            .collect(),
        waiting_on: cluster.waiting_on.clone(),
        next_steps: cluster.next_steps.clone(),
        last_step: cluster.last_step.as_ref().map(|s| FileStep {
            action: s.action,
            machine: s.machine.clone(),
            result: if s.succeeded { "succeeded" } else { "failed" }.to_owned(),
            failures: s.failures,
            message: s.message.clone(),
            revision: s.revision.clone(),
        }),
        refusals: cluster.refusals.clone(),
        suspended: cluster.suspended.clone(),
    }
}

fn ready_count(nodes: &[NodeStatus]) -> u32 {
    u32::try_from(nodes.iter().filter(|n| n.ready == Some(true)).count()).unwrap_or(u32::MAX)
}

/// The files of the branch: one per cluster and the README.
pub fn render(clusters: &BTreeMap<String, ClusterFile>, status: &FleetStatus) -> Files {
    let mut files = Files::new();
    for (name, file) in clusters {
        let yaml = serde_saphyr::to_string(file)
            .expect("a status file is plain data: strings, numbers, lists and string-keyed maps");
        files.insert(
            cluster_path(name),
            format!(
                "# The live state of cluster {name}, written by capstan on every material change.\n\
                 # Do not edit: capstan rewrites this file. Its desired state is in the tracked branch.\n{yaml}"
            ),
        );
    }
    files.insert(README.to_owned(), readme(clusters, status));
    files
}

fn readme(clusters: &BTreeMap<String, ClusterFile>, status: &FleetStatus) -> String {
    let mut out = String::from(
        "# capstan status\n\n\
         The live state of every cluster, written by capstan when it changes. capstan rewrites \
         this file and `clusters/*.yaml`; other files on this branch are kept.\n\n\
         | cluster | phase | version | nodes Ready/declared | certificates expire | waiting on |\n\
         |---|---|---|---|---|---|\n",
    );
    for (name, file) in clusters {
        let version = file
            .kubernetes_version
            .map_or_else(|| "—".to_owned(), |v| format!("v{v}"));
        let expire = file
            .certificates_expire
            .map_or_else(|| "—".to_owned(), |e| e.strftime("%Y-%m-%d").to_string());
        let waiting = if file.waiting_on.is_empty() {
            "—".to_owned()
        } else {
            file.waiting_on
                .iter()
                .map(|w| escape(&w.resource))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let _ = writeln!(
            out,
            "| [{name}]({}) | {} | {version} | {} | {expire} | {waiting} |",
            cluster_path(name),
            file.phase,
            node_counts(file),
        );
    }
    if !status.repository_errors.is_empty() {
        out.push_str("\n## Repository errors\n\n");
        for error in &status.repository_errors {
            let _ = writeln!(out, "- {}", escape(error));
        }
    }
    if !status.findings.is_empty() {
        out.push_str("\n## Findings\n\n");
        for finding in &status.findings {
            let _ = writeln!(out, "- {}", escape(finding));
        }
    }
    out
}

fn node_counts(file: &ClusterFile) -> String {
    let declared = file
        .nodes_declared
        .unwrap_or_else(|| u32::try_from(file.nodes.len()).unwrap_or(u32::MAX));
    format!("{}/{declared}", file.nodes_ready)
}

/// Keeps `|` and newlines from breaking a Markdown table.
fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The commit message for going from `before` to `after`: one line per changed cluster
/// (`prod: Updating → Ready (4/4 nodes, v1.36.3)`; the subject when it is the only one,
/// under a subject naming them when there are several), `[skip ci]` when asked, and the
/// [`REVISION_TRAILER`].
pub fn commit_message(
    before: &BTreeMap<String, ClusterFile>,
    after: &BTreeMap<String, ClusterFile>,
    revision: Option<&str>,
    skip_ci: bool,
) -> String {
    let mut lines = Vec::new();
    for (name, file) in after {
        let summary = summary(file);
        match before.get(name) {
            None => lines.push(format!("{name}: {} ({summary})", file.phase)),
            Some(old) if old == file => {}
            Some(old) if old.phase != file.phase => {
                lines.push(format!(
                    "{name}: {} → {} ({summary})",
                    old.phase, file.phase
                ));
            }
            Some(_) => lines.push(format!("{name}: {} ({summary})", file.phase)),
        }
    }
    for name in before.keys().filter(|name| !after.contains_key(*name)) {
        lines.push(format!("{name}: no longer declared"));
    }
    // Git shows the first paragraph as the subject: one line, or a summary of several.
    let mut subject = match lines.as_slice() {
        [] => "capstan status".to_owned(),
        [only] => only.clone(),
        several => {
            let names: Vec<&str> = several
                .iter()
                .filter_map(|line| line.split_once(':').map(|(name, _)| name))
                .collect();
            format!("{} clusters changed: {}", several.len(), names.join(", "))
        }
    };
    if skip_ci {
        subject.push_str(" [skip ci]");
    }
    let mut message = subject;
    if lines.len() > 1 {
        message.push_str("\n\n");
        message.push_str(&lines.join("\n"));
    }
    if let Some(revision) = revision {
        let _ = write!(message, "\n\n{REVISION_TRAILER}: {revision}");
    }
    message.push('\n');
    message
}

fn summary(file: &ClusterFile) -> String {
    let mut text = format!("{} nodes", node_counts(file));
    if let Some(version) = file.kubernetes_version {
        let _ = write!(text, ", v{version}");
    }
    text
}

/// Whether going from `before` to `after` moves a cluster into Blocked or Ready: written at
/// once, not debounced.
pub fn is_urgent(
    before: &BTreeMap<String, ClusterFile>,
    after: &BTreeMap<String, ClusterFile>,
) -> bool {
    after.iter().any(|(name, file)| {
        matches!(file.phase, Phase::Blocked | Phase::Ready)
            && before.get(name).is_none_or(|old| old.phase != file.phase)
    })
}

/// The fleet status the branch holds, for `capstan status --repo`: what it does not keep
/// (transition times, when steps ended, the fleet's conditions and events) is left empty.
pub fn fleet_status(files: &Files, revision: Option<String>) -> FleetStatus {
    FleetStatus {
        clusters: parse_clusters(files)
            .into_iter()
            .map(|(name, file)| (name, cluster_status(file, revision.as_deref())))
            .collect(),
        revision,
        ..FleetStatus::default()
    }
}

/// The status a cluster's file tells, the status having been computed at `revision`.
fn cluster_status(file: ClusterFile, revision: Option<&str>) -> ClusterStatus {
    // Ready in a status computed at a revision: converged at that revision, since the time
    // the file keeps (a file without it, from an older capstan, tells no record).
    let converged = match (file.phase, file.revisions.converged_since) {
        (Phase::Ready, Some(since)) => revision
            .map(str::to_owned)
            .or_else(|| file.revisions.converged.clone())
            .map(|revision| crate::plan::Converged { revision, since }),
        _ => None,
    };
    ClusterStatus {
        phase: file.phase,
        conditions: file
            .conditions
            .into_iter()
            .map(|c| Condition {
                kind: c.kind,
                status: c.status,
                reason: c.reason,
                message: c.message,
                last_transition_time: Timestamp::UNIX_EPOCH,
            })
            .collect(),
        version: file.kubernetes_version,
        certificate_expiry: file.certificates_expire,
        kubeconfig_fingerprint: file.kubeconfig_fingerprint,
        flux_kubeconfig_fingerprint: file.flux_kubeconfig_fingerprint,
        nodes: file.nodes,
        declared_nodes: file.nodes_declared,
        refusals: file.refusals,
        waiting_on: file.waiting_on,
        next_steps: file.next_steps,
        last_step: file.last_step.map(|s| StepRecord {
            succeeded: s.result == "succeeded",
            action: s.action,
            machine: s.machine,
            message: s.message,
            failures: s.failures,
            at: Timestamp::UNIX_EPOCH,
            revision: s.revision,
            refusal: None,
        }),
        suspended: file.suspended,
        converged,
    }
}

/// The revision named by `message`'s [`REVISION_TRAILER`].
pub fn revision_of(message: &str) -> Option<String> {
    message.lines().rev().find_map(|line| {
        line.strip_prefix(REVISION_TRAILER)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(|rest| rest.trim().to_owned())
    })
}

#[cfg(test)]
mod tests;
