//! A pull-request preview: what merging `head` into `base` would make capstan do to the live
//! fleet. Both revisions are planned against the same observed state with the pure planner;
//! the head's steps that the base's plan holds too are "already pending", the rest are "added
//! by this change".
//!
//! Pure: revisions' files, an observed state and a time in, a [`Preview`] out ([`render`]
//! prints it, [`comment`] fits it in a pull-request comment). No I/O, no clock: the daemon
//! keeps the time ([`build_within`]'s `stop`) and posts the comment.
//!
//! # Guarantees
//! - Refusals come first: every validation error of the head (with file:line:column) and every
//!   refusal of the head's plan, each with its rule and a fix. A preview with any refusal is
//!   [`Preview::is_refused`].
//! - The head is held to the operator's limits (an [`Admit`]: the daemon's admission): a
//!   connection it changes or adds, or a secret source the daemon does not allow, is a
//!   refusal, and nothing the head names is read or connected to (this module does no I/O).
//! - Whoever opens a pull request chooses its head: planning it stays within [`Limits`] (time
//!   and predicted steps), and a head past them is a refusal that says which limit, never a
//!   crash or a hang. Everything after planning is linear in the steps predicted.
//! - Nothing secret is shown: cluster files hold no secrets (tokens are references in
//!   `capstan.yaml`), and diff lines that look like a literal secret are redacted.

mod changes;
pub mod comment;
mod configs;
mod drains;
mod estimate;
mod network;
pub mod render;
mod stages;
mod summary;
mod windows;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;

use crate::observed::Observed;
use crate::plan::{
    self, Blocked, Budget, ClusterPlan, Exceeded, Plan, Policy, Rule, Step, WindowSearch,
};
use crate::spec::{self, Cluster, Diagnostic, Loaded, RepoFiles};

pub use changes::FieldChange;
pub use drains::{BLOCKED_DRAIN, DrainBlock, DrainForecast};
pub use estimate::Estimate;
pub use stages::Stage;
pub use windows::{MAX_WINDOWS, WindowsNeeded};

/// How a revision's files become its desired state: parsed, validated, and held to the
/// operator's limits on secrets and connections. The daemon's `secrets::Admission` is the one
/// capstan uses; it does no I/O either, so a preview stays pure.
pub trait Admit: Sized {
    /// Parses, validates and admits `files` (a refused file is a validation error).
    fn load(&self, files: &RepoFiles) -> Loaded;
    /// How the head of a preview is admitted, its base having loaded as `base` (without the
    /// daemon's pins, the head is held to its base's connections).
    fn for_head(&self, base: &Loaded) -> Self;
}

/// One revision's files, as read from Git.
#[derive(Debug, Clone)]
pub struct RevisionFiles {
    /// `feature@sha1:<hex>`.
    pub revision: String,
    /// Its files.
    pub files: RepoFiles,
}

/// The whole preview.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    /// The base revision.
    pub base: String,
    /// The head revision.
    pub head: String,
    /// The time both plans were made for.
    pub now: Timestamp,
    /// One line: per cluster what the change does (`prod: +1 worker; platform: unchanged`).
    pub summary: String,
    /// The stages of a staged rollout (`rollout.after`) in the head, in order; empty when no
    /// cluster follows another.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<Stage>,
    /// Every refusal of the head, fleet-wide.
    pub refusals: Vec<Refusal>,
    /// The unified diff of `capstan.yaml` (empty when unchanged).
    pub fleet_diff: String,
    /// Clusters whose file or plan this change touches, by name.
    pub clusters: Vec<ClusterPreview>,
}

impl Preview {
    /// Whether merging would be refused (the preview fails).
    pub fn is_refused(&self) -> bool {
        !self.refusals.is_empty()
    }

    /// Marks the head as one the daemon will not apply (commit verification refused it,
    /// `why`): a refusal above all others, and the summary line says so first.
    pub fn refuse_unverified(&mut self, why: &str) {
        self.refusals.insert(
            0,
            Refusal {
                cluster: None,
                rule: "verified commits".to_owned(),
                location: None,
                field: None,
                message: format!("{why}: capstan will not apply this revision"),
                fix: Some(
                    "sign the commits with a key the daemon allows (`git commit -S`; source.verify in its configuration) and push them again"
                        .to_owned(),
                ),
                on_base: false,
            },
        );
        self.summary = format!("not applied (unverified commits); {}", self.summary);
    }

    /// Whether planning a revision went past its [`Limits`] (then nothing else was planned).
    pub fn is_over_limits(&self) -> bool {
        self.refusals.iter().any(|r| r.rule == PLANNING_LIMITS)
    }

    /// The head's commit id (the revision is `ref@sha1:<commit>`), where a commit status goes.
    pub fn head_commit(&self) -> &str {
        self.head
            .rsplit_once("@sha1:")
            .map_or(self.head.as_str(), |(_, commit)| commit)
    }
}

/// Something the head asks for that capstan refuses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    /// The cluster, when the refusal is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// `validation`, or the planner's rule (`rule 8: the endpoint is fixed`).
    pub rule: String,
    /// `clusters/prod.yaml:12:14`, for a validation error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The field path, for a validation error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What is refused.
    pub message: String,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The base is refused for the same reason: this change did not cause it.
    pub on_base: bool,
}

/// One changed cluster.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPreview {
    /// `metadata.name` (or, for a file too broken to name its cluster, the file).
    pub name: String,
    /// Its file in the head (or the base, when removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// This cluster's part of the summary line.
    pub summary: String,
    /// The unified diff of its file.
    pub diff: String,
    /// The fields of its spec that change (`workers.general.replicas 3 → 4`).
    pub changes: Vec<String>,
    /// What changed patches do to each level's rendered configuration, as unified diffs
    /// (secret-named lines redacted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub config_diffs: Vec<String>,
    /// The head's predicted steps against the observed state, in order.
    pub predicted: Vec<PreviewStep>,
    /// Refusals about this cluster.
    pub refused: Vec<Refusal>,
    /// Every drain of `predicted`, simulated against the observed pods and budgets.
    pub drains: Vec<DrainForecast>,
    /// How long `predicted` will take from the daemon's measured step durations, and when it
    /// can start; `null` when nothing was measured.
    pub estimate: Option<Estimate>,
}

/// A predicted step, and whether the base's plan holds it already.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviewStep {
    /// The step, as `capstan plan` shows it.
    #[serde(flatten)]
    pub step: Step,
    /// The base's plan holds it too: it happens whether or not this change is merged.
    pub pending_on_base: bool,
}

/// The rule of a refusal for a revision that could not be planned within [`Limits`].
pub const PLANNING_LIMITS: &str = "planning limits";

/// What planning one preview may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// For both revisions' plans (the daemon keeps it, raising [`build_within`]'s `stop`).
    pub time: Duration,
    /// Steps each revision's predictions may hold in all (each takes some hundreds of bytes).
    pub max_predicted_steps: usize,
}

impl Default for Limits {
    /// 30 s, and 50,000 steps: a replacement of every machine of a cluster at the bound
    /// (5,000 machines, 8 steps each) fits, in some 40 MB.
    fn default() -> Self {
        Limits {
            time: Duration::from_secs(30),
            max_predicted_steps: 50_000,
        }
    }
}

/// Builds the preview of merging `head` into `base`, both planned against `observed` at `now`
/// and admitted as `admission` says (`run --previews`: the daemon's own policy and pins;
/// `capstan preview` in CI: the head held to its base), so a head the daemon would refuse is
/// refused here, with the same words.
pub fn build(
    base: &RevisionFiles,
    head: &RevisionFiles,
    observed: &Observed,
    now: Timestamp,
    admission: &impl Admit,
) -> Preview {
    let unlimited = Limits {
        time: Duration::MAX,
        max_predicted_steps: usize::MAX,
    };
    let never = AtomicBool::new(false);
    build_within(base, head, observed, now, admission, &unlimited, &never)
}

/// [`build`] within `limits`, stopped as soon as `stop` is raised (the caller keeps the
/// time): a revision whose plan goes past them makes the preview a refusal that says which
/// limit.
pub fn build_within(
    base: &RevisionFiles,
    head: &RevisionFiles,
    observed: &Observed,
    now: Timestamp,
    admission: &impl Admit,
    limits: &Limits,
    stop: &AtomicBool,
) -> Preview {
    let base_loaded = admission.load(&base.files);
    let head_loaded = admission.for_head(&base_loaded).load(&head.files);
    let plan_within = |loaded: &Loaded, revision: &'static str| {
        let budget = Budget::new(limits.max_predicted_steps, stop);
        plan_of(loaded, observed, now, &budget).map_err(|why| (revision, why))
    };
    let plans = plan_within(&base_loaded, "base")
        .and_then(|base_plan| Ok((base_plan, plan_within(&head_loaded, "head")?)));
    let (base_plan, head_plan) = match plans {
        Ok(plans) => plans,
        Err((revision, why)) => {
            return over_limits(base, head, &head_loaded, now, limits, revision, why);
        }
    };
    let base_files = files_by_cluster(&base.files, &BTreeMap::new());
    // A head file too broken to name its cluster is still the cluster the base's file at that
    // path named.
    let base_names: BTreeMap<String, String> = base_files
        .iter()
        .map(|(name, file)| (file.path.clone(), name.clone()))
        .collect();
    let head_files = files_by_cluster(&head.files, &base_names);
    let base_refusals = refusals(&base_loaded, base_plan.as_ref(), &base_files);
    let mut all = refusals(&head_loaded, head_plan.as_ref(), &head_files);
    for refusal in &mut all {
        refusal.on_base = base_refusals.iter().any(|b| same_refusal(b, refusal));
    }

    let names: BTreeSet<&String> = base_files
        .keys()
        .chain(head_files.keys())
        .chain(
            head_plan
                .iter()
                .flat_map(|p| p.clusters.iter().map(|c| &c.name)),
        )
        .collect();
    let mut clusters = Vec::new();
    let mut parts = Vec::new();
    // Drains that would block now, refused with `rollout.blockedDrain: fail`.
    let mut blocked_drains = Vec::new();
    for name in names {
        let base_file = base_files.get(name);
        let head_file = head_files.get(name);
        let path = head_file.or(base_file).map(|f| f.path.clone());
        let diff = changes::unified_diff(
            path.as_deref().unwrap_or(name),
            base_file.map(|f| f.text.as_str()),
            head_file.map(|f| f.text.as_str()),
        );
        let base_cluster = cluster_of(&base_loaded, name);
        let head_cluster = cluster_of(&head_loaded, name);
        let field_changes = match (base_cluster, head_cluster) {
            (Some(base), Some(head)) => changes::field_changes(base, head),
            _ => Vec::new(),
        };
        let head_steps = cluster_plan(head_plan.as_ref(), name);
        let base_steps = cluster_plan(base_plan.as_ref(), name);
        let predicted = mark_pending(
            head_steps.map(|c| c.predicted.as_slice()).unwrap_or(&[]),
            base_steps.map(|c| c.predicted.as_slice()).unwrap_or(&[]),
        );
        let drains = observed
            .clusters
            .get(name)
            .map(|seen| drains::forecast(&predicted, seen))
            .unwrap_or_default();
        let fail_on_blocked =
            head_cluster.is_some_and(|c| c.spec.rollout.blocked_drain == spec::BlockedDrain::Fail);
        if fail_on_blocked {
            blocked_drains.extend(drains::refusals(name, &drains));
        }
        let refused: Vec<Refusal> = all
            .iter()
            .chain(&blocked_drains)
            .filter(|r| r.cluster.as_deref() == Some(name.as_str()))
            .cloned()
            .collect();
        let facts = summary::Facts {
            file_changed: !diff.is_empty(),
            added: base_file.is_none() && head_file.is_some(),
            removed: base_file.is_some() && head_file.is_none(),
            invalid: head_file.is_some() && head_cluster.is_none(),
            predicted: &predicted,
            refused: &refused,
            drains: &drains,
        };
        let summary = summary::cluster(&facts);
        let touched = !diff.is_empty()
            || predicted.iter().any(|s| !s.pending_on_base)
            || refused.iter().any(|r| !r.on_base);
        if touched {
            parts.insert(clusters.len(), format!("{name}: {summary}"));
        } else {
            parts.push(format!("{name}: {summary}"));
        }
        if touched {
            clusters.push(ClusterPreview {
                name: name.clone(),
                file: path,
                summary,
                diff,
                config_diffs: configs::config_diffs(base_cluster, head_cluster),
                changes: changes_of(
                    name,
                    &field_changes,
                    &predicted,
                    head_cluster,
                    observed,
                    head_steps,
                ),
                estimate: estimate::estimate(&predicted, &observed.step_durations).map(|e| {
                    e.with_windows(head_cluster.and_then(|c| {
                        let rounds = estimate::rounds(&predicted);
                        let search = WindowSearch::new(Some(stop));
                        windows::needed(rounds, &c.spec, &observed.step_durations, now, &search)
                    }))
                }),
                predicted,
                refused,
                drains,
            });
        }
    }
    all.extend(blocked_drains);
    let stages = stage_order(&head_loaded, &clusters, observed, now, stop);
    if stop.load(Ordering::Relaxed) {
        // The windows' search was cut short: what it found is not a promise.
        return over_limits(
            base,
            head,
            &head_loaded,
            now,
            limits,
            "head",
            Exceeded::Stopped,
        );
    }
    let fleet_refused = all.iter().any(|r| r.cluster.is_none());
    if fleet_refused {
        parts.insert(0, "capstan.yaml: refused".to_owned());
    }
    Preview {
        base: base.revision.clone(),
        head: head.revision.clone(),
        now,
        summary: parts.join("; "),
        stages,
        refusals: all,
        fleet_diff: changes::unified_diff(
            &head.files.fleet.path,
            Some(&base.files.fleet.text),
            Some(&head.files.fleet.text),
        ),
        clusters,
    }
}

/// The head's stages in order, each with its estimated start: a cluster finishes when its
/// predicted steps are estimated to end, from when its stage starts, in the windows they
/// need (a cluster this change does not touch counts as finished at once).
fn stage_order(
    head: &Loaded,
    clusters: &[ClusterPreview],
    observed: &Observed,
    now: Timestamp,
    stop: &AtomicBool,
) -> Vec<Stage> {
    let finish = |name: &str, from: Timestamp| {
        let Some(cluster) = clusters.iter().find(|c| c.name == name) else {
            return Some(from);
        };
        if cluster.predicted.is_empty() {
            return Some(from);
        }
        let estimate = cluster.estimate.as_ref()?;
        let spec = &cluster_of(head, name)?.spec;
        let rounds = estimate::rounds(&cluster.predicted);
        let search = WindowSearch::new(Some(stop));
        match windows::needed(rounds, spec, &observed.step_durations, from, &search) {
            Some(needed) if needed.never || needed.more => None,
            Some(needed) => Some(needed.ends),
            None => {
                let begins = estimate.starts.map_or(from, |starts| starts.max(from));
                let seconds = i64::try_from(estimate.seconds).unwrap_or(i64::MAX);
                begins
                    .checked_add(jiff::SignedDuration::from_secs(seconds))
                    .ok()
            }
        }
    };
    stages::order(head.desired.as_ref(), now, finish)
}

fn plan_of(
    loaded: &Loaded,
    observed: &Observed,
    now: Timestamp,
    budget: &Budget<'_>,
) -> Result<Option<Plan>, Exceeded> {
    let Some(desired) = loaded.desired.as_ref() else {
        return Ok(None);
    };
    plan::plan_within(desired, observed, &Policy::of(desired), now, budget).map(Some)
}

/// The refusal of a change whose `revision` (`head` or `base`) could not be planned within
/// `limits`, after the head's validation errors.
fn over_limits(
    base: &RevisionFiles,
    head: &RevisionFiles,
    head_loaded: &Loaded,
    now: Timestamp,
    limits: &Limits,
    revision: &str,
    why: Exceeded,
) -> Preview {
    let limit = match why {
        Exceeded::Steps { limit } => format!("{limit} predicted steps"),
        Exceeded::Stopped => humantime::format_duration(limits.time).to_string(),
    };
    let message = format!("planning the {revision} revision exceeded {limit}: refused");
    let head_files = files_by_cluster(&head.files, &BTreeMap::new());
    let mut refusals = refusals(head_loaded, None, &head_files);
    refusals.push(Refusal {
        cluster: None,
        rule: PLANNING_LIMITS.to_owned(),
        location: None,
        field: None,
        message: message.clone(),
        fix: Some("change fewer machines at once (split the pull request), or ask the operator to raise --preview-timeout or --preview-max-steps".to_owned()),
        on_base: false,
    });
    Preview {
        base: base.revision.clone(),
        head: head.revision.clone(),
        now,
        summary: format!("refused: {message}"),
        stages: Vec::new(),
        refusals,
        fleet_diff: changes::unified_diff(
            &head.files.fleet.path,
            Some(&base.files.fleet.text),
            Some(&head.files.fleet.text),
        ),
        clusters: Vec::new(),
    }
}

/// What each changed field of cluster `name` causes, then the CNI notes of its head.
fn changes_of(
    name: &str,
    field_changes: &[changes::FieldChange],
    predicted: &[PreviewStep],
    head: Option<&Cluster>,
    observed: &Observed,
    head_steps: Option<&ClusterPlan>,
) -> Vec<String> {
    let running = observed
        .clusters
        .get(name)
        .and_then(|o| o.control_plane.as_ref()?.network.as_ref());
    field_changes
        .iter()
        .map(|c| summary::explain(c, predicted))
        .chain(network::cni_notes(name, head, running, head_steps))
        .collect()
}

fn cluster_plan<'a>(plan: Option<&'a Plan>, name: &str) -> Option<&'a ClusterPlan> {
    plan?.cluster(name)
}

fn cluster_of<'a>(loaded: &'a Loaded, name: &str) -> Option<&'a Cluster> {
    loaded.desired.as_ref()?.clusters.get(name)
}

/// Cluster files by the name they declare; a file too broken to declare one by the name in
/// `names_by_path`, else by its path.
fn files_by_cluster(
    files: &RepoFiles,
    names_by_path: &BTreeMap<String, String>,
) -> BTreeMap<String, spec::SourceText> {
    files
        .clusters
        .iter()
        .map(|file| {
            let name = spec::declared_name(&file.text)
                .or_else(|| names_by_path.get(&file.path).cloned())
                .unwrap_or_else(|| file.path.clone());
            (name, file.clone())
        })
        .collect()
}

/// The head's steps in order, each marked when the base's plan holds the same step (same
/// action on the same machine), matching each base step at most once, the earliest first.
/// Steps are matched by key, not each against each: a prediction holds tens of thousands.
fn mark_pending(head: &[Step], base: &[Step]) -> Vec<PreviewStep> {
    let mut unmatched: HashMap<StepKey<'_>, VecDeque<usize>> = HashMap::new();
    for (index, step) in base.iter().enumerate() {
        unmatched
            .entry(step_key(step))
            .or_default()
            .push_back(index);
    }
    head.iter()
        .map(|step| {
            let pending_on_base = unmatched
                .get_mut(&step_key(step))
                .and_then(VecDeque::pop_front)
                .is_some();
            PreviewStep {
                step: step.clone(),
                pending_on_base,
            }
        })
        .collect()
}

/// What makes two steps the same: the action, the cluster, the machine, the pool, for an
/// upgrade its version and for `label-nodes` what it changes. A machine that does not exist yet is named after the spec it is
/// built from, so the base and the head name it differently: its creation and join match by
/// pool instead. (Both plans see the same observed state, so a machine is new in both or in
/// neither.)
type StepKey<'a> = (
    &'static str,
    &'a str,
    Option<&'a crate::model::NodeName>,
    Option<&'a str>,
    Option<crate::spec::KubeVersion>,
    Option<String>,
);

fn step_key(step: &Step) -> StepKey<'_> {
    let is_new_machine = step.target.vm_id.is_none()
        && matches!(
            step.action,
            plan::Action::CreateMachine { .. }
                | plan::Action::JoinNode { .. }
                | plan::Action::InitControlPlane { .. }
        );
    let upgrade_to = match &step.action {
        plan::Action::UpgradeControlPlane { to, .. } => Some(*to),
        _ => None,
    };
    let changes = match &step.action {
        plan::Action::LabelNodes { nodes } => serde_json::to_string(nodes).ok(),
        _ => None,
    };
    (
        step.name(),
        step.target.cluster.as_str(),
        step.target.machine.as_ref().filter(|_| !is_new_machine),
        step.target.pool.as_deref(),
        upgrade_to,
        changes,
    )
}

fn same_refusal(a: &Refusal, b: &Refusal) -> bool {
    a.cluster == b.cluster && a.rule == b.rule && a.field == b.field && a.message == b.message
}

/// Every refusal of a revision: validation errors, then the plan's refusals.
fn refusals(
    loaded: &Loaded,
    plan: Option<&Plan>,
    files: &BTreeMap<String, spec::SourceText>,
) -> Vec<Refusal> {
    let cluster_of_file = |path: &str| {
        files
            .iter()
            .find(|(_, file)| file.path == path)
            .map(|(name, _)| name.clone())
    };
    let mut out: Vec<Refusal> = loaded
        .diagnostics
        .0
        .iter()
        .filter(|d| d.is_error())
        .map(|d| Refusal {
            cluster: cluster_of_file(&d.file),
            rule: "validation".to_owned(),
            location: Some(location(d)),
            field: d.field.clone(),
            message: d.message.clone(),
            fix: d.hint.clone(),
            on_base: false,
        })
        .collect();
    for cluster in plan.iter().flat_map(|p| &p.clusters) {
        out.extend(
            cluster
                .blocked
                .iter()
                .map(|blocked| planner_refusal(&cluster.name, blocked)),
        );
    }
    out
}

fn location(diagnostic: &Diagnostic) -> String {
    match (diagnostic.line, diagnostic.column) {
        (Some(line), Some(column)) => format!("{}:{line}:{column}", diagnostic.file),
        (Some(line), None) => format!("{}:{line}", diagnostic.file),
        _ => diagnostic.file.clone(),
    }
}

fn planner_refusal(cluster: &str, blocked: &Blocked) -> Refusal {
    Refusal {
        cluster: Some(cluster.to_owned()),
        rule: format!("rule {}: {}", blocked.rule.number(), blocked.rule.title()),
        location: None,
        field: None,
        message: blocked.message.clone(),
        fix: Some(fix_for(blocked.rule).to_owned()),
        on_base: false,
    }
}

/// What to do about a refusal of the planner, in a line.
fn fix_for(rule: Rule) -> &'static str {
    match rule {
        Rule::EndpointFixed => {
            "put spec.endpoint back as it was; a new endpoint needs a new cluster"
        }
        Rule::Upgrades => {
            "approve the minor in capstan.yaml's approvedMinors and move one minor at a time, never down"
        }
        Rule::MinWorkers => "add a worker first: keep at least rollout.minWorkers workers",
        Rule::Capacity => {
            "free memory on the Proxmox nodes of placement, add nodes to placement or make the machines smaller"
        }
        Rule::ReplaceGuard => {
            "put back the fields the message names, or let the machines be replaced with `replace: allow` (on the pool, the control plane or spec.rollout)"
        }
        Rule::NetworkFixed => {
            "put spec.network back as the cluster runs it, or remove the field to keep it; another network or CNI needs a new cluster (or Flux, for the CNI)"
        }
        Rule::DrainTimeout => {
            "find what the drain could not evict (its PodDisruptionBudget) and let it move; the node stays cordoned"
        }
        _ => "see the message: the cluster proceeds once it no longer applies",
    }
}

#[cfg(test)]
mod tests;
