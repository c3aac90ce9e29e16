//! What the daemon reports about each cluster: phase, conditions, nodes with versions,
//! certificate expiry, and what it waits on (the step, the resource, since when). Served as
//! JSON on `/status`, printed by `capstan status`, committed to the status branch
//! ([`branch`]: its files, when to write them, the last check for secrets).
//!
//! Built by pure functions from the plan and the observation, so it is tested without a
//! server. Never holds a secret: kubeconfigs are referred to by fingerprint, and every message
//! passes the daemon's redactor ([`FleetStatus::map_messages`]) before it is served.
//! Condition types and reasons are spelled in [`conditions`] only.

pub mod branch;
pub mod conditions;

pub use conditions::reasons;

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::model::{NodeName, Role};
use crate::observed::ObservedCluster;
pub use crate::plan::Phase;
use crate::plan::{ActionKind, ClusterPlan, Rule, Suspension, SuspensionSource};
use crate::spec::KubeVersion;

/// Every cluster's status.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetStatus {
    /// The repository revision acted on.
    pub revision: Option<String>,
    /// When this status was computed.
    pub updated: Option<Timestamp>,
    /// Errors of the repository itself (invalid files): nothing new is applied meanwhile.
    #[serde(default)]
    pub repository_errors: Vec<String>,
    /// Each cluster's status, by name.
    #[serde(default)]
    pub clusters: BTreeMap<String, ClusterStatus>,
    /// Facts about the fleet (orphans, removed clusters) and its clusters (a VM changed outside
    /// capstan: drift, rule 14).
    #[serde(default)]
    pub findings: Vec<String>,
    /// Conditions of the fleet itself ([`conditions::SOURCE_AVAILABLE`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Recent events of the source, newest last (e.g. a force-push, naming both revisions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    /// This replica's role under leader election (`--leader-elect`); absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leadership: Option<LeadershipStatus>,
}

/// This replica's role under leader election (`--leader-elect`), as `/status` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeadershipStatus {
    /// `leader` or `standby`.
    pub role: String,
    /// This replica's identity (the Lease's holder while it leads).
    pub identity: String,
    /// Who holds the Lease, as last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// The Lease, `namespace/name`.
    pub lease: String,
}

impl FleetStatus {
    /// This status with `clean` applied to every message in it (errors, events, findings,
    /// conditions, refusals, waits, steps): the daemon passes its redactor, which also caps.
    #[must_use]
    pub fn map_messages(mut self, clean: impl Fn(&str) -> String) -> Self {
        let clean = |text: &mut String| *text = clean(text);
        self.repository_errors.iter_mut().for_each(clean);
        self.findings.iter_mut().for_each(clean);
        self.events.iter_mut().for_each(clean);
        self.conditions
            .iter_mut()
            .for_each(|c| clean(&mut c.message));
        for cluster in self.clusters.values_mut() {
            cluster
                .conditions
                .iter_mut()
                .for_each(|c| clean(&mut c.message));
            cluster
                .refusals
                .iter_mut()
                .for_each(|r| clean(&mut r.message));
            cluster
                .waiting_on
                .iter_mut()
                .for_each(|w| clean(&mut w.resource));
            cluster.next_steps.iter_mut().for_each(clean);
            cluster
                .suspended
                .iter_mut()
                .filter_map(|s| s.reason.as_mut())
                .for_each(clean);
            if let Some(step) = &mut cluster.last_step {
                clean(&mut step.message);
            }
        }
        self
    }

    /// What the clusters that follow others (`rollout.after`) need to know of them, for a plan
    /// made at `revision`: each cluster's phase and convergence as this status reports them.
    pub fn stages(&self, revision: &str) -> crate::plan::Stages {
        crate::plan::Stages {
            revision: revision.to_owned(),
            clusters: self
                .clusters
                .iter()
                .map(|(name, status)| {
                    let facts = crate::plan::StageFacts {
                        phase: status.phase,
                        converged: status.converged.clone(),
                    };
                    (name.clone(), facts)
                })
                .collect(),
        }
    }

    /// Whether every cluster is Ready and the repository valid.
    pub fn all_ready(&self) -> bool {
        self.repository_errors.is_empty()
            && !self.clusters.is_empty()
            && self.clusters.values().all(|c| c.phase == Phase::Ready)
    }
}

/// One cluster's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Where the cluster is.
    pub phase: Phase,
    /// Conditions, in a fixed order.
    pub conditions: Vec<Condition>,
    /// The control plane's version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<KubeVersion>,
    /// When the certificates expire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate_expiry: Option<Timestamp>,
    /// Fingerprint of the admin kubeconfig (never the kubeconfig).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubeconfig_fingerprint: Option<String>,
    /// Fingerprint of the kubeconfig Flux's Secret holds (never the kubeconfig).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flux_kubeconfig_fingerprint: Option<String>,
    /// Machines and their nodes.
    pub nodes: Vec<NodeStatus>,
    /// Nodes the cluster file declares (control planes and workers), when its file is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_nodes: Option<u32>,
    /// What the planner refuses, with the rule that refuses it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<Refusal>,
    /// What the cluster waits on now.
    pub waiting_on: Vec<WaitingOn>,
    /// The steps that run next, as `action target`.
    pub next_steps: Vec<String>,
    /// The last step that ran and how it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_step: Option<StepRecord>,
    /// Its suspensions, Git's first: where each was set and, at runtime, who set it, when
    /// and why. No step starts while there is one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suspended: Vec<Suspension>,
    /// Since when it is Ready with nothing to do, and the last revision it was so at: what
    /// the clusters that follow it (`rollout.after`) wait on. Absent while it is not Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converged: Option<crate::plan::Converged>,
}

/// A status condition, as Kubernetes spells them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// One of [`conditions::TYPES`].
    #[serde(rename = "type")]
    pub kind: String,
    /// [`conditions::TRUE`] or [`conditions::FALSE`].
    pub status: String,
    /// One of [`reasons::ALL`].
    pub reason: String,
    /// In plain words.
    pub message: String,
    /// When `status` last changed.
    pub last_transition_time: Timestamp,
}

/// A machine and its node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// VM = Node name.
    pub name: NodeName,
    /// Role.
    pub role: Role,
    /// Pool.
    pub pool: String,
    /// Proxmox VM id.
    pub vm_id: u32,
    /// Proxmox node.
    pub proxmox_node: String,
    /// Whether the Node is Ready (`None`: no Node yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// kubelet version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<KubeVersion>,
    /// Cordoned.
    pub cordoned: bool,
}

/// What a cluster waits on, where to look, since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitingOn {
    /// The step that waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<ActionKind>,
    /// The resource, in plain words (a Proxmox task, a VM, a node, a pod).
    pub resource: String,
    /// Since when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
}

/// A planner rule refusing something.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    /// The rule's number.
    pub rule: u8,
    /// The rule's title.
    pub title: String,
    /// What is refused and what to do, in plain words.
    pub message: String,
}

/// A step that ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRecord {
    /// The action.
    pub action: ActionKind,
    /// Its target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<NodeName>,
    /// What it did, or why it failed.
    pub message: String,
    /// Whether it succeeded.
    pub succeeded: bool,
    /// Failures in a row so far (0 after a success).
    pub failures: u32,
    /// When it ended.
    pub at: Timestamp,
    /// The repository revision it was decided at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// For a failure no retry can lift (a record refused: [`reasons::RECORD_REFUSED`]), the
    /// `Blocked` reason it reports at once, without waiting for `failures_to_block`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
}

/// Everything [`cluster_status`] reads.
pub struct StatusInput<'a> {
    /// The cluster's plan.
    pub plan: &'a ClusterPlan,
    /// What was observed of it (`None`: nothing exists).
    pub observed: Option<&'a ObservedCluster>,
    /// Whether the cluster file has a Flux delivery.
    pub delivers_to_flux: bool,
    /// Nodes the cluster file declares.
    pub declared_nodes: Option<u32>,
    /// The last step and its outcome.
    pub last_step: Option<&'a StepRecord>,
    /// Failures in a row before a failing step blocks the cluster.
    pub failures_to_block: u32,
    /// The previous status, to keep transition times.
    pub previous: Option<&'a ClusterStatus>,
    /// Why the API does not answer, when the observer found out (a K3s datastore down).
    pub api_down_because: Option<&'a str>,
    /// Now.
    pub now: Timestamp,
}

/// A cluster's status from its plan and observation. Pure.
pub fn cluster_status(input: &StatusInput<'_>) -> ClusterStatus {
    let plan = input.plan;
    let observed = input.observed;
    let control_plane = observed.and_then(|o| o.control_plane.as_ref());
    let failing = input
        .last_step
        .filter(|s| !s.succeeded && (s.failures >= input.failures_to_block || s.refusal.is_some()));
    let phase = if failing.is_some() {
        Phase::Blocked
    } else {
        plan.phase
    };
    let blocked_message = plan
        .blocked
        .iter()
        .map(|b| {
            format!(
                "rule {} ({}): {}",
                b.rule.number(),
                b.rule.title(),
                b.message
            )
        })
        .chain(failing.map(|s| {
            format!(
                "{} keeps failing ({} times): {}",
                s.action, s.failures, s.message
            )
        }))
        .collect::<Vec<_>>()
        .join("; ");
    let mut conditions = vec![ready_condition(plan, phase)];
    conditions.push(match control_plane {
        None => condition(
            conditions::API_AVAILABLE,
            false,
            reasons::NOT_INITIALISED,
            "the first control plane is not initialised yet",
        ),
        Some(cp) if cp.unreachable_since.is_some() => match input.api_down_because {
            Some(why) => condition(
                conditions::API_AVAILABLE,
                false,
                reasons::DATASTORE_UNAVAILABLE,
                &format!(
                    "{}:{} does not answer: {why}",
                    cp.endpoint.host, cp.endpoint.port
                ),
            ),
            None => condition(
                conditions::API_AVAILABLE,
                false,
                reasons::UNREACHABLE,
                &format!("{}:{} does not answer", cp.endpoint.host, cp.endpoint.port),
            ),
        },
        Some(cp) => condition(
            conditions::API_AVAILABLE,
            true,
            reasons::ANSWERING,
            &format!(
                "{}:{} answers (v{})",
                cp.endpoint.host, cp.endpoint.port, cp.version
            ),
        ),
    });
    let admin = control_plane.and_then(|cp| cp.admin_kubeconfig.clone());
    let held = observed
        .and_then(|o| o.flux.as_ref())
        .map(|f| f.kubeconfig.clone());
    conditions.push(if !input.delivers_to_flux {
        condition(
            conditions::KUBECONFIG_DELIVERED,
            false,
            reasons::NOT_CONFIGURED,
            "no delivery.flux in the cluster file",
        )
    } else if admin.is_some() && admin == held {
        condition(
            conditions::KUBECONFIG_DELIVERED,
            true,
            reasons::CURRENT,
            &format!("Flux holds {}", held.unwrap_or_default()),
        )
    } else {
        condition(
            conditions::KUBECONFIG_DELIVERED,
            false,
            reasons::OUTDATED,
            &format!("Flux holds {}", held.as_deref().unwrap_or("nothing")),
        )
    });
    conditions.push(if blocked_message.is_empty() {
        condition(conditions::BLOCKED, false, reasons::CLEAR, "nothing blocks")
    } else {
        let reason = if let Some(failing) = failing {
            match failing.refusal.as_deref() {
                Some(reasons::RECORD_REFUSED) => reasons::RECORD_REFUSED,
                _ => reasons::STEP_FAILING,
            }
        } else if plan.blocked.iter().all(|b| b.rule == Rule::ReplaceGuard) {
            reasons::REPLACEMENT_FORBIDDEN
        } else {
            reasons::REFUSED
        };
        condition(conditions::BLOCKED, true, reason, &blocked_message)
    });
    if let Some(held) = &plan.remediation_held {
        conditions.push(condition(
            conditions::REMEDIATION_HELD,
            true,
            reasons::TOO_MANY_UNHEALTHY,
            &held.message(),
        ));
    }
    if let Some(first) = plan.suspended.first() {
        let reason = match first.source {
            SuspensionSource::Git => reasons::SUSPENDED_IN_GIT,
            SuspensionSource::Runtime => reasons::SUSPENDED_AT_RUNTIME,
            SuspensionSource::Unreadable => reasons::SUSPENSION_UNREADABLE,
        };
        let message = plan
            .suspended
            .iter()
            .map(|s| s.message(&plan.name))
            .collect::<Vec<_>>()
            .join("; ");
        conditions.push(condition(conditions::SUSPENDED, true, reason, &message));
    }
    for condition in &mut conditions {
        condition.last_transition_time = transition_time(input.previous, condition, input.now);
    }
    ClusterStatus {
        phase,
        conditions,
        version: control_plane.map(|cp| cp.version),
        certificate_expiry: control_plane.and_then(|cp| cp.certificates_expire),
        kubeconfig_fingerprint: admin,
        flux_kubeconfig_fingerprint: observed
            .and_then(|o| o.flux.as_ref())
            .map(|f| f.kubeconfig.clone()),
        nodes: observed.map(node_statuses).unwrap_or_default(),
        declared_nodes: input.declared_nodes,
        refusals: plan
            .blocked
            .iter()
            .map(|b| Refusal {
                rule: b.rule.number(),
                title: b.rule.title().to_owned(),
                message: b.message.clone(),
            })
            .collect(),
        waiting_on: plan
            .waiting_on
            .iter()
            .map(|w| WaitingOn {
                step: w.step,
                resource: w.resource.to_string(),
                since: w.since,
            })
            .collect(),
        next_steps: plan
            .steps
            .iter()
            .map(|s| match &s.target.machine {
                Some(machine) => format!("{} {machine}", s.name()),
                None => s.name().to_owned(),
            })
            .collect(),
        last_step: input.last_step.cloned(),
        suspended: plan.suspended.clone(),
        // Kept by the caller, which knows the revision ([`crate::plan::converged`]).
        converged: None,
    }
}

/// `Ready`: converged, reconciling, or waiting for the CNI Flux installs (`cni: none`).
fn ready_condition(plan: &ClusterPlan, phase: Phase) -> Condition {
    if phase == Phase::Ready {
        return condition(conditions::READY, true, reasons::CONVERGED, "phase Ready");
    }
    let cni = plan
        .waiting_on
        .iter()
        .find(|w| matches!(w.resource, crate::plan::Resource::Cni { .. }));
    match cni {
        Some(wait) if phase != Phase::Blocked => condition(
            conditions::READY,
            false,
            reasons::WAITING_FOR_CNI,
            &format!("waiting for {}", wait.resource),
        ),
        _ => condition(
            conditions::READY,
            false,
            reasons::RECONCILING,
            &format!("phase {phase}"),
        ),
    }
}

impl Condition {
    /// Whether the condition holds (its status is [`conditions::TRUE`]).
    pub fn is_true(&self) -> bool {
        self.status == conditions::TRUE
    }
}

fn condition(kind: &str, status: bool, reason: &str, message: &str) -> Condition {
    Condition {
        kind: kind.to_owned(),
        status: if status {
            conditions::TRUE
        } else {
            conditions::FALSE
        }
        .to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        last_transition_time: Timestamp::UNIX_EPOCH,
    }
}

/// The fleet's `SourceAvailable` condition: True while the source answers, False with the
/// (redacted) error while it does not. The transition time is kept from `previous` while the
/// status stays the same.
pub fn source_condition(
    unavailable: Option<&str>,
    previous: &[Condition],
    now: Timestamp,
) -> Condition {
    let condition = match unavailable {
        None => condition(
            conditions::SOURCE_AVAILABLE,
            true,
            reasons::FOLLOWING,
            "the source answers",
        ),
        Some(error) => condition(
            conditions::SOURCE_AVAILABLE,
            false,
            reasons::SOURCE_UNREACHABLE,
            &format!("{error}; still reconciling the last revision read"),
        ),
    };
    keep_fleet_transition(condition, previous, now)
}

/// The fleet's `SourceVerified` condition (commit verification): True with `Ok(message)`,
/// False with `Err((reason, message))`. The transition time is kept from `previous` while the
/// status stays the same.
pub fn source_verified_condition(
    outcome: Result<&str, (&str, &str)>,
    previous: &[Condition],
    now: Timestamp,
) -> Condition {
    let condition = match outcome {
        Ok(message) => condition(
            conditions::SOURCE_VERIFIED,
            true,
            reasons::VERIFIED,
            message,
        ),
        Err((reason, message)) => condition(conditions::SOURCE_VERIFIED, false, reason, message),
    };
    keep_fleet_transition(condition, previous, now)
}

/// The fleet's `StatusPushed` condition: True with `Ok(message)`, False with
/// `Err((reason, message))`. The transition time is kept from `previous` while the status
/// stays the same.
pub fn status_pushed_condition(
    outcome: Result<&str, (&str, &str)>,
    previous: &[Condition],
    now: Timestamp,
) -> Condition {
    let condition = match outcome {
        Ok(message) => condition(conditions::STATUS_PUSHED, true, reasons::PUSHED, message),
        Err((reason, message)) => condition(
            conditions::STATUS_PUSHED,
            false,
            reason,
            &format!("{message}; still reconciling"),
        ),
    };
    keep_fleet_transition(condition, previous, now)
}

/// `condition` with the transition time of its kind in `previous` (a fleet's conditions) while
/// its status stays the same, else `now`.
fn keep_fleet_transition(
    mut condition: Condition,
    previous: &[Condition],
    now: Timestamp,
) -> Condition {
    condition.last_transition_time = previous
        .iter()
        .find(|c| c.kind == condition.kind && c.status == condition.status)
        .map_or(now, |c| c.last_transition_time);
    condition
}

/// Keeps the previous transition time while the condition's status stays the same.
fn transition_time(
    previous: Option<&ClusterStatus>,
    condition: &Condition,
    now: Timestamp,
) -> Timestamp {
    previous
        .and_then(|p| p.conditions.iter().find(|c| c.kind == condition.kind))
        .filter(|p| p.status == condition.status)
        .map_or(now, |p| p.last_transition_time)
}

fn node_statuses(observed: &ObservedCluster) -> Vec<NodeStatus> {
    observed
        .machines
        .iter()
        .map(|(name, machine)| {
            let node = observed.nodes.get(name);
            NodeStatus {
                name: name.clone(),
                role: machine.ownership.role,
                pool: machine.ownership.pool.to_string(),
                vm_id: machine.vm_id.0,
                proxmox_node: machine.proxmox_node.to_string(),
                ready: node.map(|n| n.ready),
                version: node.and_then(|n| n.kubelet_version),
                cordoned: node.is_some_and(|n| n.unschedulable),
            }
        })
        .collect()
}

/// The status of a cluster that could not be observed this pass.
pub fn unobserved(reason: &str, previous: Option<&ClusterStatus>, now: Timestamp) -> ClusterStatus {
    blocked_as_before(reasons::OBSERVATION_FAILED, reason, previous, now)
}

/// The status of a cluster whose file has errors: nothing of it is planned, so it is Blocked
/// on the file (`message`), with its machines as `observed` now (or as last reported).
pub fn invalid_file(
    message: &str,
    observed: Option<&ObservedCluster>,
    previous: Option<&ClusterStatus>,
    now: Timestamp,
) -> ClusterStatus {
    let mut status = blocked_as_before(reasons::INVALID_FILE, message, previous, now);
    status.waiting_on.clear();
    if let Some(observed) = observed {
        status.nodes = node_statuses(observed);
        if let Some(control_plane) = &observed.control_plane {
            status.version = Some(control_plane.version);
            status.certificate_expiry = control_plane.certificates_expire;
            status.kubeconfig_fingerprint = control_plane.admin_kubeconfig.clone();
        }
        if let Some(flux) = &observed.flux {
            status.flux_kubeconfig_fingerprint = Some(flux.kubeconfig.clone());
        }
    }
    status
}

/// The previous status (or an empty one), Blocked for `reason`, with no next step and not
/// Ready.
fn blocked_as_before(
    reason: &str,
    message: &str,
    previous: Option<&ClusterStatus>,
    now: Timestamp,
) -> ClusterStatus {
    let mut status = previous.cloned().unwrap_or(ClusterStatus {
        phase: Phase::Blocked,
        conditions: Vec::new(),
        version: None,
        certificate_expiry: None,
        kubeconfig_fingerprint: None,
        flux_kubeconfig_fingerprint: None,
        nodes: Vec::new(),
        declared_nodes: None,
        refusals: Vec::new(),
        waiting_on: Vec::new(),
        next_steps: Vec::new(),
        last_step: None,
        suspended: Vec::new(),
        converged: None,
    });
    status.phase = Phase::Blocked;
    status.converged = None;
    status.next_steps.clear();
    let mut ready = condition(
        conditions::READY,
        false,
        reasons::RECONCILING,
        "phase Blocked",
    );
    ready.last_transition_time = transition_time(previous, &ready, now);
    let mut blocked = condition(conditions::BLOCKED, true, reason, message);
    blocked.last_transition_time = transition_time(previous, &blocked, now);
    status
        .conditions
        .retain(|c| c.kind != conditions::BLOCKED && c.kind != conditions::READY);
    status.conditions.insert(0, ready);
    status.conditions.push(blocked);
    status
}

#[cfg(test)]
mod tests;
