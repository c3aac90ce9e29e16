//! One desired cluster: classify what exists against the spec and list every step that could
//! come next, in priority order, each with what gates it. `mod.rs` picks the batch that may run
//! now; `simulate` replays batches to predict the rest.
//!
//! The order of concerns: the endpoint (rule 8) and the version (rule 7) are settled first; then
//! in-flight work is finished (retiring VMs, orphans, machines that never joined, fencing);
//! then the control plane moves in place (upgrade, renewal) and the kubeconfig is delivered;
//! then machines are created and joined; last, old machines leave, one at a time.

mod classify;
mod create;
mod filing;
mod fixed;
mod guard;
mod health;
mod join;
mod labels;
mod memo;
mod quiet;
mod removal;
mod version;

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;

use jiff::{SignedDuration, Timestamp};

use super::Policy;
use super::placement::{self, Capacity};
use super::types::{
    Action, ActionKind, Blocked, Finding, FindingKind, MachineRef, Resource, Rule, Step, Target,
    Waiting,
};
use super::window::{Need, WindowState};
use crate::model::{NodeName, Role};
use crate::observed::{MachineSpec, ObservedCluster, ObservedMachine, ObservedNode, StepDuration};
use crate::spec::{Capabilities, ClusterSpec, KubeVersion, Machine, ReplacePolicy};
pub(crate) use classify::Facts;
pub(crate) use filing::file_in_place;
use memo::PoolSpecs;
pub(crate) use memo::SpecMemo;
pub(crate) use quiet::Quiet;
use smol_str::SmolStr;

/// What gates a candidate step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gate {
    /// It may run now.
    Open,
    /// Held by what this resource says: a disruptive step by the maintenance windows (rule
    /// 11) or an earlier stage (`rollout.after`), any step of a suspended cluster by its
    /// suspension. A prediction runs it, with
    /// that wait recorded on it.
    Held(Resource),
    /// Something in the world must happen first.
    Wait(Waiting),
}

/// A step that could come next.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub step: Step,
    pub gate: Gate,
}

/// Everything the planner found about one cluster.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    pub candidates: Vec<Candidate>,
    pub blocked: Vec<Blocked>,
    pub waiting: Vec<Waiting>,
    pub findings: Vec<Finding>,
    /// Orphans: reported fleet-wide.
    pub orphans: Vec<Finding>,
    pub initialised: bool,
    /// In a prediction: the machines that may be kept aside ([`Quiet`]), with their facts.
    pub quiet: Vec<(NodeName, Facts)>,
    /// Fencing held back by `remediation.maxUnhealthy`.
    pub remediation_held: Option<super::RemediationHeld>,
}

/// The inputs of one cluster's plan.
pub(crate) struct Input<'a> {
    pub name: &'a str,
    pub spec: &'a ClusterSpec,
    pub observed: &'a ObservedCluster,
    /// How long steps took, by action name, as the daemon measured them: a disruptive step
    /// starts only where its measured duration fits in the maintenance windows.
    pub durations: &'a BTreeMap<String, StepDuration>,
    pub policy: &'a Policy,
    pub now: Timestamp,
    /// Desired machine specs already computed for this cluster's spec.
    pub memo: &'a SpecMemo,
    /// A predicted batch: only the candidate steps are read, so work that could only add to
    /// the reports (blocked, waiting, findings) may be skipped.
    pub predicting: bool,
    /// The machines a prediction keeps aside, counted with the state ([`Quiet`]); `None`
    /// outside predictions.
    pub quiet: Option<&'a Quiet>,
    /// The caller's stop flag (a preview's deadline), read inside the maintenance-window
    /// search so that it interrupts even a long one; `None`: never stopped.
    pub stop: Option<&'a AtomicBool>,
    /// Every Node carries what its pool declares (see `labels`): a prediction past its first
    /// batch, since only steps' effects change Nodes then, and they leave them as declared.
    pub labels_settled: bool,
}

/// A pool: desired (the control plane first, then the worker pools in spec order) or removed
/// (found on VMs, gone from the spec: replicas 0).
struct Pool<'a> {
    name: &'a str,
    role: Role,
    replicas: u32,
    desired: Option<DesiredPool<'a>>,
    /// Its members, counted by `mark_fresh`.
    tally: create::Tally,
    /// Indices of its members in `Ctx::views` (name order), set by `mark_fresh`.
    members: Vec<usize>,
    /// Whether a change may replace its live machines (a removed pool: allow).
    replace: ReplacePolicy,
    /// Its live members `replace: forbid` keeps from being replaced ([`guard`]).
    guarded: guard::Guarded,
}

struct DesiredPool<'a> {
    machine: &'a Machine,
    /// Every pool's desired spec and hash (from [`SpecMemo`]), and which is this pool's.
    specs: PoolSpecs,
    index: usize,
}

impl DesiredPool<'_> {
    fn spec(&self) -> &MachineSpec {
        &self.specs[self.index].0
    }

    fn hash(&self) -> &SmolStr {
        &self.specs[self.index].1
    }
}

/// One owned VM seen against the spec.
#[derive(Clone)]
pub(crate) struct View<'a> {
    name: &'a NodeName,
    machine: &'a ObservedMachine,
    node: Option<&'a ObservedNode>,
    pool: usize,
    /// Built from the pool's current spec (and not to be replaced for drift or fencing).
    fresh: bool,
    /// Hard-stopped and tainted out-of-service.
    fenced: bool,
    /// Tagged retiring, and prepared ([`ObservedMachine::is_retiring`], `is_prepared`): read
    /// once, as every concern asks.
    retiring: bool,
    prepared: bool,
    /// Its spec hash is its pool's desired one.
    current: bool,
    /// Fresh, not retiring, not stuck: it counts toward its pool (set by `mark_fresh`).
    in_pool: bool,
    /// One of its pool's fresh machines beyond the replicas, among those not carrying
    /// workloads (set by `mark_fresh`; for those carrying workloads, see `Tally::surplus`).
    surplus: bool,
    /// Why it must be replaced, when it must.
    stale: Option<classify::Stale>,
    /// Built from another spec, but kept by its pool's `replace: forbid` ([`guard`]): it
    /// counts as fresh and never leaves for being outdated.
    guarded: bool,
}

impl<'a> View<'a> {
    /// The view of a VM whose facts are known.
    fn of(
        name: &'a NodeName,
        machine: &'a ObservedMachine,
        node: Option<&'a ObservedNode>,
        facts: Facts,
    ) -> Self {
        View {
            name,
            machine,
            node,
            pool: facts.pool,
            fresh: (facts.current || facts.guarded) && facts.stale.is_none(),
            fenced: facts.fenced,
            retiring: facts.retiring,
            prepared: facts.prepared,
            current: facts.current,
            in_pool: false,
            surplus: false,
            stale: facts.stale,
            guarded: facts.guarded,
        }
    }

    /// What a prediction keeps of it while it is quiet ([`Quiet`]).
    fn facts(&self) -> Facts {
        Facts {
            pool: self.pool,
            fenced: self.fenced,
            retiring: self.retiring,
            prepared: self.prepared,
            current: self.current,
            stale: self.stale.clone(),
            guarded: self.guarded,
        }
    }

    fn role(&self) -> Role {
        self.machine.ownership.role
    }

    /// Ready, schedulable, not being removed: it carries workloads.
    fn is_counted(&self) -> bool {
        self.node.is_some_and(|node| {
            node.ready && !node.unschedulable && node.drain.is_none() && !self.fenced
        }) && !self.retiring
    }

    fn is_ready(&self) -> bool {
        self.node.is_some_and(|node| node.ready) && !self.fenced
    }

    /// NotReady only for want of a CNI, never Ready yet ([`ObservedNode::awaiting_network`]).
    fn awaits_network(&self) -> bool {
        self.node.is_some_and(|node| node.awaiting_network) && !self.fenced
    }

    /// capstan (or someone) started taking it out of service.
    fn is_in_removal(&self) -> bool {
        self.node
            .is_some_and(|node| node.unschedulable || node.drain.is_some())
    }

    fn machine_ref(&self) -> MachineRef {
        MachineRef {
            name: self.name.clone(),
            vm_id: Some(self.machine.vm_id),
            proxmox_node: self.machine.proxmox_node.clone(),
        }
    }
}

/// What is known while planning one cluster; the findings go into an [`Outcome`] passed
/// alongside, so reading the views and writing the outcome never conflict.
struct Ctx<'a> {
    input: &'a Input<'a>,
    pools: Vec<Pool<'a>>,
    /// Every owned VM, in name order (the order of `observed.machines`): sorts rely on it.
    views: Vec<View<'a>>,
    target_version: KubeVersion,
    windows: Windows<'a>,
    initialised: bool,
    /// Nodes with no VM of their name, in name order (found by `classify`'s walk).
    machineless_nodes: Vec<&'a NodeName>,
    /// How many views are in the states most concerns act on (taken by `mark_fresh`).
    census: Census,
    /// The control plane `init-control-plane` runs on (see `first_control_plane`), found
    /// once after `classify`: every unjoined machine's deadline asks for it.
    first_control_plane: Option<&'a NodeName>,
    /// Indices in `views` of every control-plane VM (of the `cp` pool or a removed one).
    control_planes: Vec<usize>,
}

/// How many views are retiring, unjoined or NotReady: a concern about such members skips its
/// walk over every view when there are none (a prediction plans at every batch).
#[derive(Debug, Clone, Copy, Default)]
struct Census {
    /// Tagged retiring.
    retiring: usize,
    /// Without a Node, not retiring.
    unjoined: usize,
    /// With a NotReady Node, not retiring.
    not_ready: usize,
    /// Fresh workers not carrying workloads yet (and not retiring): new workers on their way.
    incoming_workers: usize,
}

impl Outcome {
    fn push(&mut self, step: Step, gate: Gate) {
        self.candidates.push(Candidate { step, gate });
    }

    /// Pushes a disruptive step, gated by the maintenance windows (rule 11).
    fn push_disruptive(&mut self, mut step: Step, windows: &Windows<'_>) {
        step.disruptive = true;
        let gate = windows.gate(&step);
        self.push(step, gate);
    }
}

/// The maintenance windows as they gate one cluster's disruptive steps: each by its action's
/// measured duration, when the daemon measured it.
#[derive(Clone, Copy)]
struct Windows<'a> {
    input: &'a Input<'a>,
}

impl Windows<'_> {
    /// The windows' state for `step`.
    fn state(&self, step: &Step) -> Rc<WindowState> {
        let needs = self.input.durations.get(step.name()).and_then(|measured| {
            Some(Need {
                duration: measured.high()?,
                samples: measured.samples,
            })
        });
        self.input
            .memo
            .window(self.input.spec, self.input.now, needs, self.input.stop)
    }

    fn gate(&self, step: &Step) -> Gate {
        match &*self.state(step) {
            WindowState::Open => Gate::Open,
            WindowState::Closed(hold) => {
                // Only a hold for the step's duration names it (a prediction holds many).
                let label = match &step.target.machine {
                    _ if hold.fit.is_none() => String::new(),
                    Some(machine) => format!("{} of {machine}", step.name()),
                    None => step.name().to_owned(),
                };
                Gate::Held(hold.resource(&label))
            }
        }
    }
}

/// Lists the candidate steps of a desired cluster. `capacity` is what the Proxmox nodes have
/// left once earlier clusters' steps are taken into account.
pub(crate) fn candidates(input: &Input<'_>, capacity: &Capacity) -> Outcome {
    let observed = input.observed;
    let mut out = Outcome {
        initialised: observed
            .control_plane
            .as_ref()
            .is_some_and(|cp| !cp.bootstrap_incomplete),
        ..Outcome::default()
    };
    if let Some(blocked) = fixed::endpoint_changed(input).or_else(|| fixed::network_changed(input))
    {
        out.blocked.push(blocked);
        return out;
    }
    let (mut target_version, refusal) = version::resolve(input);
    if let Some(message) = refusal {
        out.blocked.push(Blocked {
            rule: Rule::Upgrades,
            message,
        });
        if observed.control_plane.is_none() {
            // Nothing to build with: the version the spec asks for may not run at all.
            return out;
        }
    }
    if let Some((current, blocked)) = guard::version(input, target_version) {
        // Kept at its version, as a refused upgrade is: nothing of it starts.
        target_version = current;
        out.blocked.push(blocked);
    }
    let mut ctx = Ctx {
        input,
        pools: Vec::new(),
        views: Vec::with_capacity(input.observed.machines.len()),
        target_version,
        windows: Windows { input },
        initialised: out.initialised,
        machineless_nodes: Vec::new(),
        census: Census::default(),
        first_control_plane: None,
        control_planes: Vec::new(),
    };
    ctx.classify(&mut out);
    ctx.first_control_plane = ctx.find_first_control_plane();
    ctx.mark_fresh();
    ctx.plan(capacity, &mut out);
    if input.quiet.is_some() && ctx.initialised() {
        out.quiet = ctx.quiet_facts();
    }
    hold_for_stages(input, &mut out);
    hold_if_suspended(input, &mut out);
    out
}

/// A cluster that follows others (`rollout.after`) starts no disruptive step before they
/// converged and soaked: each is held by the first stage not done, as a closed window holds
/// it (the stage says more: the window is only looked at once the stage is done).
fn hold_for_stages(input: &Input<'_>, out: &mut Outcome) {
    if input.spec.rollout.after.is_empty() || !out.candidates.iter().any(|c| c.step.disruptive) {
        return;
    }
    let Some(held) = super::stages::holding(input.spec, &input.policy.stages, input.now) else {
        return;
    };
    for candidate in &mut out.candidates {
        if candidate.step.disruptive && !matches!(candidate.gate, Gate::Wait(_)) {
            candidate.gate = Gate::Held(held.clone());
        }
    }
}

/// A suspended cluster starts no step: every step that could start is held by the suspension
/// instead (one waiting on the world still waits on it first).
fn hold_if_suspended(input: &Input<'_>, out: &mut Outcome) {
    let Some(first) = super::suspension::of(input.name, input.spec, input.policy)
        .into_iter()
        .next()
    else {
        return;
    };
    let held = Resource::Suspended(first);
    for candidate in &mut out.candidates {
        if !matches!(candidate.gate, Gate::Wait(_)) {
            candidate.gate = Gate::Held(held.clone());
        }
    }
}

fn add(at: Timestamp, duration: std::time::Duration) -> Timestamp {
    let duration = SignedDuration::try_from(duration).unwrap_or(SignedDuration::MAX);
    at.saturating_add(duration).unwrap_or(Timestamp::MAX)
}

impl<'a> Ctx<'a> {
    fn spec(&self) -> &'a ClusterSpec {
        self.input.spec
    }

    fn name(&self) -> &'a str {
        self.input.name
    }

    /// The cluster's distribution's rules, and its names for its operations (steps' reasons).
    fn capabilities(&self) -> &'static Capabilities {
        self.spec().kubernetes.distribution.capabilities()
    }

    fn initialised(&self) -> bool {
        self.initialised
    }

    fn target(&self, view: &View<'_>) -> Target {
        Target {
            cluster: self.name().into(),
            machine: Some(view.name.clone()),
            vm_id: Some(view.machine.vm_id),
            pool: Some(view.machine.ownership.pool.clone()),
            role: Some(view.role()),
        }
    }

    fn cluster_target(&self) -> Target {
        Target {
            cluster: self.name().into(),
            ..Target::default()
        }
    }

    fn step(action: Action, target: Target, reason: String) -> Step {
        Step {
            action,
            target,
            reason,
            disruptive: false,
            waits_on: None,
        }
    }

    fn waiting(
        &self,
        step: ActionKind,
        machine: Option<&NodeName>,
        resource: Resource,
        since: Option<Timestamp>,
    ) -> Waiting {
        Waiting {
            step: Some(step),
            machine: machine.cloned(),
            resource,
            since,
        }
    }

    /// The gate of a step that needs the VM up with its guest agent answering.
    fn vm_gate(&self, step: ActionKind, view: &View<'_>) -> Gate {
        let machine = view.machine;
        if let Some(task) = &machine.task {
            return Gate::Wait(self.waiting(
                step,
                Some(view.name),
                Resource::ProxmoxTask {
                    upid: task.upid.clone(),
                    task: task.kind.clone(),
                },
                Some(task.started),
            ));
        }
        if !machine.is_running() || !machine.guest_agent {
            let condition = if machine.is_running() {
                "guest agent to answer"
            } else {
                "to start"
            };
            return Gate::Wait(self.waiting(
                step,
                Some(view.name),
                Resource::Vm {
                    vm_id: machine.vm_id,
                    name: view.name.clone(),
                    condition: condition.to_owned(),
                },
                Some(machine.created),
            ));
        }
        Gate::Open
    }

    fn api_unreachable_since(&self) -> Option<Timestamp> {
        self.input
            .observed
            .control_plane
            .as_ref()
            .and_then(|cp| cp.unreachable_since)
    }

    fn plan(&self, capacity: &Capacity, out: &mut Outcome) {
        if let Some(since) = self.api_unreachable_since() {
            // Node facts are unknown: never mistake members for orphans or unjoined machines.
            let endpoint = format!(
                "{}:{}",
                self.spec().endpoint.host,
                self.spec().endpoint.port
            );
            out.waiting.push(Waiting {
                step: None,
                machine: None,
                resource: Resource::ApiEndpoint { endpoint },
                since: Some(since),
            });
            self.retiring(out, false);
            self.renewal(out);
            return;
        }
        self.retiring(out, true);
        self.unjoined_cleanup(out);
        self.fencing(out);
        let upgrading = self.upgrade(out);
        if !upgrading {
            self.renewal(out);
        }
        self.ghost_nodes(out);
        if !self.initialised() {
            self.bootstrap(out, capacity);
            return;
        }
        // After an upgrade or a renewal the kubeconfig goes out before any machine moves.
        let redelivering = self.delivery(out);
        let mut device_bound = create::DeviceBound::new();
        if !upgrading && !redelivering {
            self.prepares(out);
            self.joins(out);
            device_bound = self.creates(out, capacity);
        }
        self.removals(out, upgrading, &device_bound);
        self.relabels(out);
        self.filings(out);
        self.report_nodes(out);
    }

    /// Retiring VMs: their Node was (being) deleted; reset, then destroy.
    fn retiring(&self, out: &mut Outcome, api: bool) {
        if self.census.retiring == 0 {
            return;
        }
        let mut steps = Vec::new();
        for view in self.views.iter().filter(|v| v.retiring) {
            let target = self.target(view);
            let machine = view.machine_ref();
            if view.node.is_some() {
                if api {
                    let disruptive = view.role() == Role::ControlPlane && !view.fenced;
                    let step = Self::step(
                        Action::DeleteNode {
                            node: view.name.clone(),
                            role: view.role(),
                            machine: Some(machine),
                        },
                        target,
                        "retiring: finish deleting its Node".to_owned(),
                    );
                    steps.push((step, disruptive, Gate::Open));
                }
                continue;
            }
            if view.machine.task.is_some() {
                let gate = self.vm_gate(ActionKind::DestroyMachine, view);
                let step = Self::step(
                    Action::DestroyMachine {
                        machine,
                        ownership: view.machine.ownership.clone(),
                    },
                    target,
                    "retiring: its Node is deleted".to_owned(),
                );
                steps.push((step, false, gate));
            } else if view.machine.is_running() && view.machine.guest_agent {
                let step = Self::step(
                    Action::ResetNode { machine },
                    target,
                    [
                        "retiring: its Node is deleted; ",
                        self.capabilities().reset,
                        ", then shut down",
                    ]
                    .concat(),
                );
                steps.push((step, false, Gate::Open));
            } else {
                let reason = if view.machine.is_running() {
                    "retiring: its Node is deleted; guest agent silent, so no reset"
                } else {
                    "retiring: its Node is deleted and the VM is stopped"
                };
                let step = Self::step(
                    Action::DestroyMachine {
                        machine,
                        ownership: view.machine.ownership.clone(),
                    },
                    target,
                    reason.to_owned(),
                );
                steps.push((step, false, Gate::Open));
            }
        }
        for (step, disruptive, gate) in steps {
            if disruptive {
                out.push_disruptive(step, &self.windows);
            } else {
                out.push(step, gate);
            }
        }
    }

    /// Join deadline of an unjoined machine, when one applies: machines that wait for the
    /// first control plane to be initialised cannot join yet, so their clock has not started.
    fn join_deadline(&self, view: &View<'_>) -> Option<Timestamp> {
        if !self.initialised() && Some(view.name) != self.first_control_plane {
            return None;
        }
        Some(add(
            view.machine.created,
            self.spec().rollout.join_timeout.0,
        ))
    }

    /// The first fresh control plane by name, not retiring: `kubeadm init` runs there.
    fn find_first_control_plane(&self) -> Option<&'a NodeName> {
        self.views
            .iter()
            .filter(|v| v.fresh && v.role() == Role::ControlPlane && !v.retiring)
            .map(|v| v.name)
            .min()
    }

    /// The facts of each view a prediction may keep aside ([`quiet::is_quiet`]).
    fn quiet_facts(&self) -> Vec<(NodeName, Facts)> {
        self.views
            .iter()
            .filter(|v| quiet::is_quiet(v, self.pools[v.pool].desired.is_some()))
            // A Node whose labels change produces a step of its own.
            .filter(|v| self.input.labels_settled || self.relabel_of(v).is_none())
            .map(|v| (v.name.clone(), v.facts()))
            .collect()
    }

    fn is_stuck(&self, view: &View<'_>) -> bool {
        view.node.is_none()
            && !view.retiring
            && view.fresh
            && self
                .join_deadline(view)
                .is_some_and(|d| self.input.now >= d)
    }

    fn is_orphan(&self, view: &View<'_>) -> bool {
        view.node.is_none() && !view.retiring && !view.fresh
    }

    /// Rule 6: machines that never joined in time are destroyed (and created again by the
    /// pool's count); owned VMs that match no desired machine are orphans.
    fn unjoined_cleanup(&self, out: &mut Outcome) {
        if self.census.unjoined == 0 {
            return;
        }
        let mut steps = Vec::new();
        for view in &self.views {
            if self.is_stuck(view) {
                let reason = format!(
                    "created {}, never joined within rollout.joinTimeout {}: destroyed to be created again",
                    view.machine.created,
                    self.spec().rollout.join_timeout
                );
                steps.push(Self::step(
                    Action::DestroyMachine {
                        machine: view.machine_ref(),
                        ownership: view.machine.ownership.clone(),
                    },
                    self.target(view),
                    reason,
                ));
            } else if self.is_orphan(view) {
                let what = format!(
                    "VM {} {} (pool {}, spec {}) matches no desired machine of {}",
                    view.machine.vm_id,
                    view.name,
                    view.machine.ownership.pool,
                    view.machine.ownership.spec_hash,
                    self.name()
                );
                if self.input.policy.prune {
                    steps.push(Self::step(
                        Action::DestroyMachine {
                            machine: view.machine_ref(),
                            ownership: view.machine.ownership.clone(),
                        },
                        self.target(view),
                        format!("orphan: {what}; prune is on"),
                    ));
                } else {
                    out.orphans.push(Finding {
                        kind: FindingKind::Orphan,
                        cluster: self.name().into(),
                        machine: Some(view.name.clone()),
                        vm_id: Some(view.machine.vm_id),
                        message: format!("orphan: {what}; kept because prune is off"),
                    });
                }
            }
        }
        for step in steps {
            out.push(step, Gate::Open);
        }
    }

    /// A fresh machine that exists but is stopped and never joined: its creation was
    /// interrupted (a crash between the clone and the start). `create-machine` is idempotent
    /// (the clone finds the VM by name), so running it again finishes the creation now rather
    /// than waiting out the join timeout.
    fn finish_creation(&self, view: &View<'_>) -> Option<Step> {
        let machine = view.machine;
        if machine.is_running() || machine.task.is_some() || view.node.is_some() || view.retiring {
            return None;
        }
        let desired = self.pools[view.pool].desired.as_ref()?;
        Some(Self::step(
            Action::CreateMachine {
                name: view.name.clone(),
                ownership: machine.ownership.clone(),
                machine: Box::new(desired.spec().clone()),
                proxmox_node: machine.proxmox_node.clone(),
                storage: desired.machine.storage.clone(),
                tags: desired.machine.tags.clone(),
                pool: desired.machine.pool.clone(),
            },
            self.target(view),
            format!(
                "finish creating VM {}: it exists but was never started (an interrupted creation)",
                machine.vm_id
            ),
        ))
    }
}
