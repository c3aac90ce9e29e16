//! One desired cluster: classify what exists against the spec and list every step that could
//! come next, in priority order, each with what gates it. `mod.rs` picks the batch that may run
//! now; `simulate` replays batches to predict the rest.
//!
//! The order of concerns: the endpoint (rule 8) and the version (rule 7) are settled first; then
//! in-flight work is finished (retiring VMs, orphans, machines that never joined, fencing);
//! then the control plane moves in place (upgrade, renewal) and the kubeconfig is delivered;
//! then machines are created and joined; last, old machines leave, one at a time.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};

use super::Policy;
use super::placement::{self, Capacity};
use super::types::{
    Action, Blocked, Finding, FindingKind, MachineRef, Resource, Rule, Step, Target, Wait, Waiting,
};
use super::window::{self, WindowState};
use crate::model::{NodeName, Ownership, Role};
use crate::observed::{FluxTarget, MachineSpec, ObservedCluster, ObservedMachine, ObservedNode};
use crate::spec::validate::{CONTROL_PLANE_POOL, VM_NAME_PREFIX};
use crate::spec::{ClusterSpec, DriftPolicy, KubeVersion, Machine};

/// What gates a candidate step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gate {
    /// It may run now.
    Open,
    /// Disruptive, outside the maintenance window (rule 11).
    Window(Option<Timestamp>),
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
}

/// The inputs of one cluster's plan.
pub(crate) struct Input<'a> {
    pub name: &'a str,
    pub spec: &'a ClusterSpec,
    pub observed: &'a ObservedCluster,
    pub policy: &'a Policy,
    pub now: Timestamp,
}

/// A pool: desired (the control plane first, then the worker pools in spec order) or removed
/// (found on VMs, gone from the spec: replicas 0).
struct Pool<'a> {
    name: &'a str,
    role: Role,
    replicas: u32,
    desired: Option<DesiredPool<'a>>,
}

struct DesiredPool<'a> {
    machine: &'a Machine,
    spec: MachineSpec,
    hash: String,
}

/// One owned VM seen against the spec.
struct View<'a> {
    name: &'a NodeName,
    machine: &'a ObservedMachine,
    node: Option<&'a ObservedNode>,
    pool: usize,
    /// Built from the pool's current spec (and not to be replaced for drift or fencing).
    fresh: bool,
    /// Hard-stopped and tainted out-of-service.
    fenced: bool,
    /// Why it must be replaced, when it must.
    stale: Option<String>,
}

impl View<'_> {
    fn role(&self) -> Role {
        self.machine.ownership.role
    }

    /// Ready, schedulable, not being removed: it carries workloads.
    fn is_counted(&self) -> bool {
        self.node.is_some_and(|node| {
            node.ready && !node.unschedulable && node.drain.is_none() && !self.fenced
        }) && !self.machine.is_retiring()
    }

    fn is_ready(&self) -> bool {
        self.node.is_some_and(|node| node.ready) && !self.fenced
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
    views: Vec<View<'a>>,
    target_version: KubeVersion,
    window: WindowState,
    initialised: bool,
}

impl Outcome {
    fn push(&mut self, step: Step, gate: Gate) {
        self.candidates.push(Candidate { step, gate });
    }

    /// Pushes a disruptive step, gated by the maintenance window (rule 11).
    fn push_disruptive(&mut self, mut step: Step, window: WindowState) {
        step.disruptive = true;
        let gate = match window {
            WindowState::Open => Gate::Open,
            WindowState::Closed { opens } => Gate::Window(opens),
        };
        self.push(step, gate);
    }
}

/// Lists the candidate steps of a desired cluster. `capacity` is what the Proxmox nodes have
/// left once earlier clusters' steps are taken into account.
pub(crate) fn candidates(input: &Input<'_>, capacity: &Capacity) -> Outcome {
    let observed = input.observed;
    let mut out = Outcome {
        initialised: observed.control_plane.is_some(),
        ..Outcome::default()
    };
    if let Some(blocked) = endpoint_changed(input) {
        out.blocked.push(blocked);
        return out;
    }
    let (target_version, refusal) = super::version::resolve(input);
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
    let mut ctx = Ctx {
        input,
        pools: Vec::new(),
        views: Vec::new(),
        target_version,
        window: window::state(input.spec.rollout.maintenance_window.as_ref(), input.now),
        initialised: out.initialised,
    };
    ctx.classify(&mut out);
    ctx.plan(capacity, &mut out);
    out
}

fn endpoint_changed(input: &Input<'_>) -> Option<Blocked> {
    let observed = &input.observed.control_plane.as_ref()?.endpoint;
    let desired = &input.spec.endpoint;
    if observed == desired {
        return None;
    }
    let mut changes = Vec::new();
    if observed.host != desired.host {
        changes.push(format!("host {} → {}", observed.host, desired.host));
    }
    if observed.address != desired.address {
        changes.push(format!(
            "address {} → {}",
            observed.address, desired.address
        ));
    }
    if observed.port != desired.port {
        changes.push(format!("port {} → {}", observed.port, desired.port));
    }
    Some(Blocked {
        rule: Rule::EndpointFixed,
        message: format!(
            "the endpoint cannot change after init-control-plane ({}): kubeadm wrote {} ({}:{}) into every certificate, kubeconfig and join of this cluster; revert spec.endpoint to it. Nothing else of this cluster proceeds until then (a new endpoint needs a new cluster)",
            changes.join(", "),
            observed.host,
            observed.address,
            observed.port
        ),
    })
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

    fn initialised(&self) -> bool {
        self.initialised
    }

    /// Builds the pools and sees every owned VM against them.
    fn classify(&mut self, out: &mut Outcome) {
        let spec = self.input.spec;
        let version = self.target_version;
        let distribution = spec.kubernetes.distribution;
        let desired = |machine: &'a Machine, role: Role| {
            let machine_spec = MachineSpec::new(machine, version, distribution, role);
            let hash = machine_spec.spec_hash();
            DesiredPool {
                machine,
                spec: machine_spec,
                hash,
            }
        };
        self.pools.push(Pool {
            name: CONTROL_PLANE_POOL,
            role: Role::ControlPlane,
            replicas: spec.control_plane.replicas,
            desired: Some(desired(&spec.control_plane.machine, Role::ControlPlane)),
        });
        for pool in &spec.workers {
            self.pools.push(Pool {
                name: &pool.pool,
                role: Role::Worker,
                replicas: pool.replicas,
                desired: Some(desired(&pool.machine, Role::Worker)),
            });
        }
        let observed = self.input.observed;
        for (name, machine) in &observed.machines {
            let ownership = &machine.ownership;
            let pool = match self
                .pools
                .iter()
                .position(|p| p.name == ownership.pool && p.role == ownership.role)
            {
                Some(index) => index,
                None => {
                    self.pools.push(Pool {
                        name: &ownership.pool,
                        role: ownership.role,
                        replicas: 0,
                        desired: None,
                    });
                    self.pools.len() - 1
                }
            };
            let node = observed.nodes.get(name);
            let fenced = node.is_some_and(ObservedNode::is_out_of_service) && !machine.is_running();
            let mut view = View {
                name,
                machine,
                node,
                pool,
                fresh: false,
                fenced,
                stale: None,
            };
            view.stale = self.staleness(&view, out);
            view.fresh = self.pools[pool]
                .desired
                .as_ref()
                .is_some_and(|d| d.hash == ownership.spec_hash)
                && view.stale.is_none();
            self.views.push(view);
        }
    }

    /// Why a member must be replaced (outdated, drifted with `onDrift: replace`, fenced), and
    /// the drift report.
    fn staleness(&self, view: &View<'a>, out: &mut Outcome) -> Option<String> {
        let node = view.node?;
        let pool = &self.pools[view.pool];
        let Some(desired) = &pool.desired else {
            return Some(format!(
                "pool `{}` is no longer in the spec",
                view.machine.ownership.pool
            ));
        };
        if view.fenced {
            return Some("fenced: hard-stopped and out of service".to_owned());
        }
        let machine = view.machine;
        if machine.ownership.spec_hash != desired.hash {
            let differences = match &machine.built_from {
                Some(built) => built.differences(&desired.spec),
                None => Vec::new(),
            };
            let mut differences = differences;
            if differences.is_empty()
                && let Some(kubelet) = node.kubelet_version
                && kubelet != desired.spec.kubernetes
            {
                differences.push(format!(
                    "kubernetes {kubelet} → {}",
                    desired.spec.kubernetes
                ));
            }
            if differences.is_empty() {
                differences.push(format!(
                    "spec hash {} → {}",
                    machine.ownership.spec_hash, desired.hash
                ));
            }
            return Some(format!("outdated: {}", differences.join(", ")));
        }
        let config = machine.config.as_ref()?;
        let wanted = desired.machine;
        let mut drift = Vec::new();
        if config.cores != wanted.cores {
            drift.push(format!("cores {} → {}", wanted.cores, config.cores));
        }
        if config.memory_mib != wanted.memory_mib {
            drift.push(format!(
                "memoryMiB {} → {}",
                wanted.memory_mib, config.memory_mib
            ));
        }
        if config.disk_gib != wanted.disk_gib {
            drift.push(format!("diskGiB {} → {}", wanted.disk_gib, config.disk_gib));
        }
        if drift.is_empty() {
            return None;
        }
        let drift = drift.join(", ");
        let replace = self.input.spec.rollout.on_drift == DriftPolicy::Replace;
        out.findings.push(Finding {
            kind: FindingKind::Drift,
            cluster: self.input.name.to_owned(),
            machine: Some(view.name.clone()),
            vm_id: Some(machine.vm_id),
            message: format!(
                "VM {} {} drifted (changed outside capstan): {drift}; {}",
                machine.vm_id,
                view.name,
                if replace {
                    "rollout.onDrift is replace: it is replaced"
                } else {
                    "rollout.onDrift is report: left as is"
                }
            ),
        });
        replace.then(|| format!("drifted: {drift}"))
    }

    fn target(&self, view: &View<'_>) -> Target {
        Target {
            cluster: self.name().to_owned(),
            machine: Some(view.name.clone()),
            vm_id: Some(view.machine.vm_id),
            pool: Some(view.machine.ownership.pool.clone()),
            role: Some(view.role()),
        }
    }

    fn cluster_target(&self) -> Target {
        Target {
            cluster: self.name().to_owned(),
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
        step: &'static str,
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
    fn vm_gate(&self, step: &'static str, view: &View<'_>) -> Gate {
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
        self.delivery(out);
        if !upgrading {
            self.joins(out);
            self.creates(out, capacity);
        }
        self.removals(out, upgrading);
        self.report_nodes(out);
    }

    /// Retiring VMs: their Node was (being) deleted; reset, then destroy.
    fn retiring(&self, out: &mut Outcome, api: bool) {
        let mut steps = Vec::new();
        for view in self.views.iter().filter(|v| v.machine.is_retiring()) {
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
                let gate = self.vm_gate("destroy-machine", view);
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
                    "retiring: its Node is deleted; kubeadm reset, then shut down".to_owned(),
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
                out.push_disruptive(step, self.window);
            } else {
                out.push(step, gate);
            }
        }
    }

    /// Join deadline of an unjoined machine, when one applies: machines that wait for the
    /// first control plane to be initialised cannot join yet, so their clock has not started.
    fn join_deadline(&self, view: &View<'_>) -> Option<Timestamp> {
        if !self.initialised() && Some(view.name) != self.first_control_plane() {
            return None;
        }
        Some(add(
            view.machine.created,
            self.spec().rollout.join_timeout.0,
        ))
    }

    fn first_control_plane(&self) -> Option<&'a NodeName> {
        self.views
            .iter()
            .filter(|v| v.fresh && v.role() == Role::ControlPlane && !v.machine.is_retiring())
            .map(|v| v.name)
            .min()
    }

    fn is_stuck(&self, view: &View<'_>) -> bool {
        view.node.is_none()
            && !view.machine.is_retiring()
            && view.fresh
            && self
                .join_deadline(view)
                .is_some_and(|d| self.input.now >= d)
    }

    fn is_orphan(&self, view: &View<'_>) -> bool {
        view.node.is_none() && !view.machine.is_retiring() && !view.fresh
    }

    /// Rule 6: machines that never joined in time are destroyed (and created again by the
    /// pool's count); owned VMs that match no desired machine are orphans.
    fn unjoined_cleanup(&self, out: &mut Outcome) {
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
                        cluster: self.name().to_owned(),
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

    /// Rule 13: a node NotReady past `remediation.after` whose VM is stopped or whose guest
    /// agent is silent is fenced, then replaced like any stale machine.
    fn fencing(&self, out: &mut Outcome) {
        let remediation = &self.spec().remediation;
        let mut steps = Vec::new();
        for view in &self.views {
            let Some(node) = view.node else { continue };
            if node.ready || view.fenced || view.machine.is_retiring() {
                continue;
            }
            let dead = !view.machine.is_running() || !view.machine.guest_agent;
            let due = add(node.ready_since, remediation.after.0);
            if !remediation.fence || !dead {
                continue;
            }
            if self.input.now < due {
                let waiting = self.waiting(
                    "fence-machine",
                    Some(view.name),
                    Resource::Node {
                        name: view.name.clone(),
                        condition: format!("Ready (fenced at {due} otherwise)"),
                    },
                    Some(node.ready_since),
                );
                out.waiting.push(waiting);
                continue;
            }
            let state = if view.machine.is_running() {
                "VM running but its guest agent silent"
            } else {
                "VM stopped"
            };
            steps.push(Self::step(
                Action::FenceMachine {
                    machine: view.machine_ref(),
                    node: view.name.clone(),
                },
                self.target(view),
                format!(
                    "node NotReady since {} (over remediation.after {}), {state}: hard-stop it and taint it out-of-service so its volumes detach, then replace it",
                    node.ready_since, remediation.after
                ),
            ));
        }
        for step in steps {
            out.push(step, Gate::Open);
        }
    }

    fn control_plane_members(&self) -> impl Iterator<Item = &View<'a>> {
        self.views
            .iter()
            .filter(|v| v.role() == Role::ControlPlane && v.node.is_some())
    }

    /// A control plane that is not fully there: NotReady, being removed, or retiring with its
    /// Node still present (rule 9 allows one at a time).
    fn absent_control_planes(&self) -> Vec<&'a NodeName> {
        self.control_plane_members()
            .filter(|v| !v.is_ready() || v.is_in_removal() || v.machine.is_retiring())
            .map(|v| v.name)
            .collect()
    }

    /// Rule 7: the version moves in place on the control plane first. Returns whether an
    /// upgrade is pending (then no machine is created or joined: new machines run the new
    /// version, which the API server must run first).
    fn upgrade(&self, out: &mut Outcome) -> bool {
        let Some(control_plane) = &self.input.observed.control_plane else {
            return false;
        };
        let from = control_plane.version;
        let to = self.target_version;
        if from >= to {
            return false;
        }
        if self.removal_in_flight() {
            return true;
        }
        let kind = if from.minor == to.minor {
            "patch upgrade"
        } else {
            "minor upgrade"
        };
        let members: Vec<&View<'a>> = self.control_plane_members().collect();
        if let Some(view) = members.iter().find(|v| !v.is_ready()) {
            let waiting = self.waiting(
                "upgrade-control-plane",
                Some(view.name),
                Resource::Node {
                    name: view.name.clone(),
                    condition: "Ready".to_owned(),
                },
                view.node.map(|n| n.ready_since),
            );
            out.waiting.push(waiting);
            return true;
        }
        let Some(view) = members.iter().min_by_key(|v| v.name) else {
            return true;
        };
        let step = Self::step(
            Action::UpgradeControlPlane {
                machine: view.machine_ref(),
                from,
                to,
            },
            self.cluster_target(),
            format!(
                "{kind} {from} → {to}: kubeadm upgrade apply in place first; the machines are replaced after, control plane first"
            ),
        );
        out.push_disruptive(step, self.window);
        true
    }

    /// Rule 10: certificates within `renewBefore` of expiry are renewed (then delivered).
    fn renewal(&self, out: &mut Outcome) {
        let Some(control_plane) = &self.input.observed.control_plane else {
            return;
        };
        let Some(expires) = control_plane.certificates_expire else {
            return;
        };
        let renew_before = self.spec().certificates.renew_before;
        let due = expires
            .saturating_sub(SignedDuration::try_from(renew_before.0).unwrap_or(SignedDuration::MAX))
            .unwrap_or(Timestamp::MIN);
        if self.input.now < due {
            return;
        }
        let machines: Vec<MachineRef> = self
            .control_plane_members()
            .filter(|v| v.machine.is_running() && !v.machine.is_retiring())
            .map(View::machine_ref)
            .collect();
        if machines.is_empty() {
            return;
        }
        let mut step = Self::step(
            Action::RenewCertificates { machines },
            self.cluster_target(),
            format!(
                "certificates expire at {expires}, within certificates.renewBefore {renew_before}"
            ),
        );
        // Waiting for a window that opens after the certificates expire would break the
        // cluster: then renewal does not wait.
        let urgent = match self.window {
            WindowState::Open => false,
            WindowState::Closed { opens } => opens.is_none_or(|opens| opens >= expires),
        };
        if urgent {
            step.disruptive = true;
            step.reason
                .push_str("; the maintenance window opens too late, so it does not wait");
            out.push(step, Gate::Open);
        } else {
            out.push_disruptive(step, self.window);
        }
    }

    /// Nodes named like this cluster's VMs whose VM is gone.
    fn ghost_nodes(&self, out: &mut Outcome) {
        let prefix = format!("{VM_NAME_PREFIX}{}-", self.name());
        let mut steps = Vec::new();
        for name in self.input.observed.nodes.keys() {
            if name.as_str().starts_with(&prefix)
                && !self.input.observed.machines.contains_key(name)
            {
                steps.push(Self::step(
                    Action::DeleteNode {
                        node: name.clone(),
                        role: Role::Worker,
                        machine: None,
                    },
                    Target {
                        cluster: self.name().to_owned(),
                        machine: Some(name.clone()),
                        ..Target::default()
                    },
                    "its VM is gone: delete the Node so its pods move".to_owned(),
                ));
            }
        }
        for step in steps {
            out.push(step, Gate::Open);
        }
    }

    /// Before `init-control-plane`: create the control planes, then initialise the first.
    fn bootstrap(&self, out: &mut Outcome, capacity: &Capacity) {
        self.creates(out, capacity);
        let Some(first) = self.first_control_plane() else {
            return;
        };
        let Some(view) = self.views.iter().find(|v| v.name == first) else {
            return;
        };
        if self.is_stuck(view) {
            return;
        }
        let gate = self.vm_gate("init-control-plane", view);
        let spec = self.spec();
        let step = Self::step(
            Action::InitControlPlane {
                machine: view.machine_ref(),
                endpoint: spec.endpoint.clone(),
                version: self.target_version,
                pod_network: spec.network.pods.to_string(),
                service_network: spec.network.services.to_string(),
            },
            self.target(view),
            format!(
                "bootstrap: kubeadm init on the first of {} control plane(s), endpoint {} ({}:{})",
                spec.control_plane.replicas,
                spec.endpoint.host,
                spec.endpoint.address,
                spec.endpoint.port
            ),
        );
        out.push(step, gate);
    }

    /// Fresh machines without a Node join: control planes one at a time while every other
    /// control plane is present (rule 9), workers together.
    fn joins(&self, out: &mut Outcome) {
        let absent = self.absent_control_planes();
        let mut control_plane_joining = false;
        let mut steps = Vec::new();
        let mut names: Vec<&View<'a>> = self
            .views
            .iter()
            .filter(|v| {
                v.node.is_none() && v.fresh && !v.machine.is_retiring() && !self.is_stuck(v)
            })
            .filter(|v| !self.is_surplus_unjoined(v))
            .collect();
        names.sort_by_key(|v| (v.role() != Role::ControlPlane, v.name));
        for view in names {
            let role = view.role();
            if role == Role::ControlPlane {
                if control_plane_joining {
                    continue;
                }
                control_plane_joining = true;
                if let Some(other) = absent.first() {
                    let waiting = self.waiting(
                        "join-node",
                        Some(view.name),
                        Resource::Node {
                            name: (*other).clone(),
                            condition: "Ready (one control plane absent at a time)".to_owned(),
                        },
                        None,
                    );
                    steps.push((None, Gate::Wait(waiting)));
                    continue;
                }
            }
            let gate = self.vm_gate("join-node", view);
            let count = self.pools[view.pool].replicas;
            let step = Self::step(
                Action::JoinNode {
                    machine: view.machine_ref(),
                    role,
                    endpoint: self.spec().endpoint.clone(),
                },
                self.target(view),
                format!(
                    "new {} of pool {} ({count} wanted): join the cluster",
                    role, view.machine.ownership.pool
                ),
            );
            steps.push((Some(step), gate));
        }
        for (step, gate) in steps {
            match (step, gate) {
                (Some(step), gate) => out.push(step, gate),
                (None, Gate::Wait(waiting)) => out.waiting.push(waiting),
                (None, _) => {}
            }
        }
    }

    /// Fresh machines of each pool, in the order surplus ones go first: unjoined, being
    /// removed, not counted, then by name.
    fn fresh_of(&self, pool: usize) -> Vec<&View<'a>> {
        let mut fresh: Vec<&View<'a>> = self
            .views
            .iter()
            .filter(|v| v.pool == pool && v.fresh && !v.machine.is_retiring() && !self.is_stuck(v))
            .collect();
        fresh.sort_by_key(|v| (v.node.is_some(), !v.is_in_removal(), v.is_counted(), v.name));
        fresh
    }

    fn surplus_count(&self, pool: usize) -> usize {
        let fresh = self.fresh_of(pool).len();
        fresh.saturating_sub(self.pools[pool].replicas as usize)
    }

    fn is_surplus_unjoined(&self, view: &View<'_>) -> bool {
        let surplus = self.surplus_count(view.pool);
        self.fresh_of(view.pool)
            .iter()
            .take(surplus)
            .any(|v| v.name == view.name && v.node.is_none())
    }

    fn stale_of(&self, pool: usize) -> Vec<&View<'a>> {
        self.views
            .iter()
            .filter(|v| v.pool == pool && v.stale.is_some() && !v.machine.is_retiring())
            .collect()
    }

    /// How many fresh machines a pool should have now: all replicas, or while stale members
    /// remain, enough that one spare replaces them one at a time (a replacement is created
    /// before the old machine is removed, rule 1).
    fn fresh_wanted(&self, pool: usize) -> usize {
        let replicas = self.pools[pool].replicas as usize;
        let stale = self.stale_of(pool);
        if stale.is_empty() {
            return replicas;
        }
        let counted = stale.iter().filter(|v| v.is_counted()).count();
        (replicas + 1).saturating_sub(counted).min(replicas)
    }

    /// Whether the control plane pool is complete: every replica joined and Ready, nothing to
    /// replace.
    fn control_plane_complete(&self) -> bool {
        let fresh = self.fresh_of(0);
        fresh.iter().filter(|v| v.is_ready()).count() >= self.pools[0].replicas as usize
            && fresh.iter().all(|v| v.is_ready())
            && self.stale_of(0).is_empty()
    }

    /// Creates machines: the deficit of each pool (control plane first; workers once the
    /// control plane is complete) and one spare per pool being replaced, pool after pool. All
    /// the VMs the cluster still needs must fit before any is cloned (rule 15).
    fn creates(&self, out: &mut Outcome, capacity: &Capacity) {
        let initialised = self.initialised();
        let control_plane_complete = initialised && self.control_plane_complete();
        let mut earlier_pools_stale = false;
        // (pool, count now, count later)
        let mut demand: Vec<(usize, usize, usize)> = Vec::new();
        for pool in 0..self.pools.len() {
            if self.pools[pool].desired.is_none() {
                continue;
            }
            let fresh = self.fresh_of(pool).len();
            let wanted = self.fresh_wanted(pool);
            let replicas = self.pools[pool].replicas as usize;
            let stale = self.stale_of(pool).len();
            let deficit = replicas.saturating_sub(fresh + stale);
            let total = wanted.saturating_sub(fresh).max(deficit);
            // A fenced machine is a repair, not a rollout: its replacement waits for nothing.
            let repairing = self.stale_of(pool).iter().any(|v| v.fenced);
            let allowed = if pool == 0 || repairing {
                true
            } else if !control_plane_complete {
                false
            } else {
                stale == 0 || !earlier_pools_stale
            };
            let now = if allowed {
                total
            } else if pool == 0 || control_plane_complete {
                deficit
            } else {
                0
            };
            demand.push((pool, now, total.saturating_sub(now)));
            earlier_pools_stale |= stale > 0 || pool == 0 && !self.stale_of(0).is_empty();
        }
        if demand.iter().all(|(_, now, later)| now + later == 0) {
            return;
        }
        let mut taken: BTreeSet<NodeName> = self
            .input
            .observed
            .machines
            .keys()
            .chain(self.input.observed.nodes.keys())
            .cloned()
            .collect();
        let mut scratch = capacity.clone();
        let mut refused = Vec::new();
        let mut planned = Vec::new();
        for (pool, now, later) in demand {
            let Some(desired) = &self.pools[pool].desired else {
                continue;
            };
            let mut spread: BTreeMap<String, u32> = BTreeMap::new();
            for view in self.views.iter().filter(|v| v.pool == pool) {
                *spread.entry(view.machine.proxmox_node.clone()).or_default() += 1;
            }
            for index in 0..now + later {
                match scratch.choose(
                    &desired.machine.placement,
                    desired.machine.memory_mib,
                    &spread,
                ) {
                    Ok(node) => {
                        scratch.reserve(&node, desired.machine.memory_mib);
                        *spread.entry(node.clone()).or_default() += 1;
                        if index < now {
                            planned.push((pool, node));
                        }
                    }
                    Err(why) => {
                        refused.push(format!(
                            "a {} MiB {} of pool {} ({why})",
                            desired.machine.memory_mib,
                            self.pools[pool].role,
                            self.pools[pool].name
                        ));
                    }
                }
            }
        }
        if !refused.is_empty() {
            refused.dedup();
            out.blocked.push(Blocked {
                rule: Rule::Capacity,
                message: format!(
                    "no Proxmox node in placement has the memory for {}: nothing is cloned until the VMs this cluster still needs fit; free memory or add nodes to placement",
                    refused.join("; ")
                ),
            });
            return;
        }
        let mut steps = Vec::new();
        let mut made: BTreeMap<usize, usize> = BTreeMap::new();
        for (pool, node) in planned {
            let Some(desired) = &self.pools[pool].desired else {
                continue;
            };
            let pool_name = self.pools[pool].name;
            let role = self.pools[pool].role;
            let name = placement::next_name(self.name(), pool_name, &desired.hash, &mut taken);
            let earlier = made.entry(pool).or_default();
            let fresh = self.fresh_of(pool).len() + *earlier;
            *earlier += 1;
            let stale = self.stale_of(pool);
            let reason = if let Some(old) = stale.first().and_then(|v| v.stale.as_ref()) {
                format!(
                    "replacement for pool {pool_name} ({} to replace; {old}): created before the old one leaves",
                    stale.len()
                )
            } else if !initialised {
                format!(
                    "bootstrap: control plane {} of {}",
                    fresh + 1,
                    self.pools[pool].replicas
                )
            } else {
                format!(
                    "pool {pool_name}: {role} {} of {}",
                    fresh + 1,
                    self.pools[pool].replicas
                )
            };
            let memory_note = if capacity.is_known() {
                ""
            } else {
                "; Proxmox memory not observed"
            };
            steps.push(Self::step(
                Action::CreateMachine {
                    name: name.clone(),
                    ownership: Ownership {
                        cluster: self.name().to_owned(),
                        role,
                        pool: pool_name.to_owned(),
                        spec_hash: desired.hash.clone(),
                    },
                    machine: desired.spec.clone(),
                    proxmox_node: node.clone(),
                    storage: desired.machine.storage.clone(),
                },
                Target {
                    cluster: self.name().to_owned(),
                    machine: Some(name),
                    vm_id: None,
                    pool: Some(pool_name.to_owned()),
                    role: Some(role),
                },
                format!("{reason}; on {node}{memory_note}"),
            ));
        }
        // Clones of the same pool differ only by name; keep the batch in name order per pool.
        for step in steps {
            out.push(step, Gate::Open);
        }
    }

    /// Rule 10: deliver the admin kubeconfig when Flux's differs; the first delivery waits for
    /// the whole cluster to be built.
    fn delivery(&self, out: &mut Outcome) {
        let Some(flux) = &self.spec().delivery.flux else {
            return;
        };
        let Some(admin) = self
            .input
            .observed
            .control_plane
            .as_ref()
            .and_then(|cp| cp.admin_kubeconfig.as_ref())
        else {
            return;
        };
        let target = FluxTarget {
            cluster: flux.cluster.clone(),
            namespace: flux.namespace.clone(),
            secret_name: flux.secret_name_for(self.name()),
        };
        let reason = match &self.input.observed.flux {
            None => {
                let built = (0..self.pools.len()).all(|pool| {
                    let fresh = self.fresh_of(pool);
                    fresh.iter().filter(|v| v.is_ready()).count()
                        >= self.pools[pool].replicas as usize
                        && self.stale_of(pool).is_empty()
                });
                if !built {
                    return;
                }
                format!(
                    "first delivery: the cluster is built; Flux gets its kubeconfig in {}/{}",
                    target.namespace, target.secret_name
                )
            }
            Some(held) if held.target != target => format!(
                "the Flux Secret moved from {}/{} to {}/{}",
                held.target.namespace,
                held.target.secret_name,
                target.namespace,
                target.secret_name
            ),
            Some(held) if &held.kubeconfig != admin => {
                match admin.strip_prefix(super::simulate::PREDICTED) {
                    Some(cause) => format!(
                        "the admin kubeconfig changes with {}",
                        cause.split(" (#").next().unwrap_or(cause)
                    ),
                    None => format!(
                        "Flux holds kubeconfig {}, the cluster's admin kubeconfig is {admin}",
                        held.kubeconfig
                    ),
                }
            }
            Some(_) => return,
        };
        let step = Self::step(
            Action::DeliverKubeconfig { flux: target },
            self.cluster_target(),
            reason,
        );
        out.push(step, Gate::Open);
    }

    /// A member capstan is taking out (a fenced machine is not: it is dead already, and its
    /// replacement may have to wait for an upgrade).
    fn removal_in_flight(&self) -> bool {
        self.views
            .iter()
            .any(|v| v.machine.is_retiring() || (self.is_leaving(v) && v.is_in_removal()))
    }

    /// Whether a member is to leave: stale, or surplus of its pool.
    fn is_leaving(&self, view: &View<'_>) -> bool {
        if view.node.is_none() || view.machine.is_retiring() {
            return false;
        }
        if view.stale.is_some() {
            return true;
        }
        let surplus = self.surplus_count(view.pool);
        self.fresh_of(view.pool)
            .iter()
            .take(surplus)
            .any(|v| v.name == view.name)
    }

    /// Members that leave, in order: the control plane first, then worker pools in spec
    /// order, then removed pools; within a pool, the one already in removal, then those not
    /// carrying workloads, then by name.
    fn leaving(&self) -> Vec<&View<'a>> {
        let mut leaving: Vec<&View<'a>> =
            self.views.iter().filter(|v| self.is_leaving(v)).collect();
        leaving.sort_by_key(|v| (v.pool, !v.is_in_removal(), v.is_counted(), v.name));
        leaving
    }

    /// Surplus machines that never joined are destroyed right away (no workload on them).
    fn surplus_unjoined(&self, out: &mut Outcome) {
        let mut steps = Vec::new();
        for view in &self.views {
            if view.node.is_none()
                && view.fresh
                && !view.machine.is_retiring()
                && !self.is_stuck(view)
                && self.is_surplus_unjoined(view)
            {
                steps.push(Self::step(
                    Action::DestroyMachine {
                        machine: view.machine_ref(),
                        ownership: view.machine.ownership.clone(),
                    },
                    self.target(view),
                    format!(
                        "surplus: pool {} wants {}; this one never joined",
                        view.machine.ownership.pool, self.pools[view.pool].replicas
                    ),
                ));
            }
        }
        for step in steps {
            out.push(step, Gate::Open);
        }
    }

    fn counted_in_pool(&self, pool: usize, except: &NodeName) -> usize {
        self.views
            .iter()
            .filter(|v| v.pool == pool && v.name != except && v.is_counted())
            .count()
    }

    fn counted_workers(&self) -> u32 {
        let count = self
            .views
            .iter()
            .filter(|v| v.role() == Role::Worker && v.is_counted())
            .count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// Why `view` may not start leaving now (rules 1, 3, 9), as a wait or a refusal.
    fn removal_hold(&self, out: &Outcome, view: &View<'a>) -> Option<Hold> {
        let pool = &self.pools[view.pool];
        let replicas = pool.replicas as usize;
        let others = self.counted_in_pool(view.pool, view.name);
        if view.role() == Role::ControlPlane {
            let absent: Vec<&NodeName> = self
                .absent_control_planes()
                .into_iter()
                .filter(|n| *n != view.name)
                .collect();
            if let Some(other) = absent.first() {
                return Some(Hold::Wait(Resource::Node {
                    name: (*other).clone(),
                    condition: "Ready (one control plane absent at a time)".to_owned(),
                }));
            }
            if view.is_counted() && others < replicas {
                return Some(self.replacement_hold(view));
            }
            return None;
        }
        if others < replicas {
            return Some(self.replacement_hold(view));
        }
        let minimum = self.spec().rollout.min_workers;
        let ready = self.counted_workers();
        if view.is_counted() && ready.saturating_sub(1) < minimum {
            let incoming = self.views.iter().any(|v| {
                v.role() == Role::Worker && v.fresh && !v.is_counted() && !v.machine.is_retiring()
            }) || out.candidates.iter().any(|c| {
                matches!(&c.step.action, Action::CreateMachine { ownership, .. } if ownership.role == Role::Worker)
            });
            if incoming {
                return Some(Hold::Wait(Resource::NewWorker { ready, minimum }));
            }
            return Some(Hold::Refuse(
                Rule::MinWorkers,
                format!(
                    "removing {} would leave {} Ready, schedulable worker(s), below rollout.minWorkers {minimum}: add a worker first",
                    view.name,
                    ready.saturating_sub(1)
                ),
            ));
        }
        None
    }

    fn replacement_hold(&self, view: &View<'a>) -> Hold {
        let pending = self
            .views
            .iter()
            .filter(|v| v.pool == view.pool && v.fresh && !v.is_counted())
            .min_by_key(|v| v.name);
        match pending {
            Some(new) => Hold::Wait(Resource::Node {
                name: new.name.clone(),
                condition: "Ready (the replacement comes first)".to_owned(),
            }),
            None => Hold::Wait(Resource::Node {
                name: view.name.clone(),
                condition: "a replacement to be created first".to_owned(),
            }),
        }
    }

    /// Members leave one at a time (rule 4): cordon, drain (with a deadline, rule 5), delete
    /// the Node; `retiring` then resets and destroys the VM.
    fn removals(&self, out: &mut Outcome, upgrading: bool) {
        self.surplus_unjoined(out);
        let spec_too_small = self.spec().worker_replicas() < self.spec().rollout.min_workers;
        if spec_too_small {
            out.blocked.push(Blocked {
                rule: Rule::MinWorkers,
                message: format!(
                    "the spec asks for {} worker(s), below rollout.minWorkers {}: add a worker first; no worker is removed until then",
                    self.spec().worker_replicas(),
                    self.spec().rollout.min_workers
                ),
            });
        }
        if self.views.iter().any(|v| v.machine.is_retiring()) {
            return;
        }
        let leaving: Vec<&View<'a>> = self
            .leaving()
            .into_iter()
            .filter(|v| !(spec_too_small && v.role() == Role::Worker && v.stale.is_none()))
            .collect();
        let in_flight = leaving
            .iter()
            .find(|v| v.is_in_removal() || v.fenced)
            .copied();
        let chosen = match in_flight {
            Some(view) => Some(view),
            None if upgrading => None,
            None => {
                let mut chosen = None;
                let mut first_hold = None;
                for view in &leaving {
                    match self.removal_hold(out, view) {
                        None => {
                            chosen = Some(*view);
                            break;
                        }
                        Some(hold) => {
                            if first_hold.is_none() {
                                first_hold = Some((*view, hold));
                            }
                        }
                    }
                }
                if chosen.is_none()
                    && let Some((view, hold)) = first_hold
                {
                    self.hold(out, view, hold);
                }
                chosen
            }
        };
        let Some(view) = chosen else { return };
        if in_flight.is_some()
            && let Some(hold) = self.removal_hold(out, view)
        {
            self.hold(out, view, hold);
            return;
        }
        self.remove(out, view);
    }

    fn hold(&self, out: &mut Outcome, view: &View<'a>, hold: Hold) {
        match hold {
            Hold::Wait(resource) => {
                let waiting = self.waiting("cordon", Some(view.name), resource, None);
                out.waiting.push(waiting);
            }
            Hold::Refuse(rule, message) => out.blocked.push(Blocked { rule, message }),
        }
    }

    /// The next step of one leaving member.
    fn remove(&self, out: &mut Outcome, view: &View<'a>) {
        let Some(node) = view.node else { return };
        let why = match &view.stale {
            Some(stale) => stale.clone(),
            None => format!(
                "surplus: pool {} wants {}",
                view.machine.ownership.pool, self.pools[view.pool].replicas
            ),
        };
        let target = self.target(view);
        let role = view.role();
        let delete = |reason: String| {
            Self::step(
                Action::DeleteNode {
                    node: view.name.clone(),
                    role,
                    machine: Some(view.machine_ref()),
                },
                target.clone(),
                reason,
            )
        };
        if view.fenced {
            out.push(
                delete(format!(
                    "{why}: its replacement is Ready; delete the Node (no drain: it is dead)"
                )),
                Gate::Open,
            );
            return;
        }
        if !node.unschedulable {
            let step = Self::step(
                Action::Cordon {
                    node: view.name.clone(),
                },
                target,
                why,
            );
            out.push_disruptive(step, self.window);
            return;
        }
        let timeout = self.spec().rollout.drain_timeout;
        let Some(drain) = &node.drain else {
            let deadline = add(self.input.now, timeout.0);
            let step = Self::step(
                Action::Drain {
                    node: view.name.clone(),
                    deadline,
                },
                target,
                format!("{why}: evict its pods (rollout.drainTimeout {timeout})"),
            );
            out.push_disruptive(step, self.window);
            return;
        };
        if drain.remaining_pods.is_empty() {
            let step = delete(format!("{why}: drained"));
            if role == Role::ControlPlane {
                out.push_disruptive(step, self.window);
            } else {
                out.push(step, Gate::Open);
            }
            return;
        }
        let deadline = add(drain.started, timeout.0);
        let pods: Vec<String> = drain
            .remaining_pods
            .iter()
            .map(|pod| match &pod.reason {
                Some(reason) => format!("{}/{} ({reason})", pod.namespace, pod.name),
                None => format!("{}/{}", pod.namespace, pod.name),
            })
            .collect();
        if self.input.now >= deadline {
            out.blocked.push(Blocked {
                rule: Rule::DrainTimeout,
                message: format!(
                    "drain of {} timed out after rollout.drainTimeout {timeout} (started {}): {} refused eviction. The node stays cordoned and VM {} is kept; fix what blocks the eviction, then remove the annotation {} from the node to retry",
                    view.name,
                    drain.started,
                    pods.join(", "),
                    view.machine.vm_id,
                    crate::observed::DRAIN_STARTED_ANNOTATION
                ),
            });
            return;
        }
        for pod in &drain.remaining_pods {
            let waiting = self.waiting(
                "drain",
                Some(view.name),
                Resource::Pod {
                    pod: pod.clone(),
                    node: view.name.clone(),
                },
                Some(drain.started),
            );
            out.waiting.push(waiting);
        }
        let mut step = Self::step(
            Action::Drain {
                node: view.name.clone(),
                deadline,
            },
            target,
            format!(
                "{why}: drain in progress, {} pod(s) left: {}",
                pods.len(),
                pods.join(", ")
            ),
        );
        step.waits_on = drain.remaining_pods.first().map(|pod| Wait {
            resource: Resource::Pod {
                pod: pod.clone(),
                node: view.name.clone(),
            },
            since: Some(drain.started),
        });
        out.push_disruptive(step, self.window);
    }

    /// Waits on members that are not Ready, and cordons capstan did not make.
    fn report_nodes(&self, out: &mut Outcome) {
        let join_timeout = self.spec().rollout.join_timeout.0;
        let mut waiting = Vec::new();
        let mut findings = Vec::new();
        for view in &self.views {
            let Some(node) = view.node else { continue };
            if view.machine.is_retiring() || view.fenced {
                continue;
            }
            if !node.ready && self.input.now < add(view.machine.created, join_timeout) {
                waiting.push(self.waiting(
                    "join-node",
                    Some(view.name),
                    Resource::Node {
                        name: view.name.clone(),
                        condition: "Ready".to_owned(),
                    },
                    Some(view.machine.created),
                ));
            } else if !node.ready && !self.spec().remediation.fence {
                waiting.push(Waiting {
                    step: None,
                    machine: Some(view.name.clone()),
                    resource: Resource::Node {
                        name: view.name.clone(),
                        condition: "Ready (remediation.fence is off: look at it)".to_owned(),
                    },
                    since: Some(node.ready_since),
                });
            }
            if view.fresh && node.unschedulable && !self.is_leaving(view) {
                findings.push(Finding {
                    kind: FindingKind::Cordoned,
                    cluster: self.name().to_owned(),
                    machine: Some(view.name.clone()),
                    vm_id: Some(view.machine.vm_id),
                    message: format!(
                        "node {} is cordoned but not leaving: it is not counted as schedulable; uncordon it when done",
                        view.name
                    ),
                });
            }
        }
        out.waiting.extend(waiting);
        out.findings.extend(findings);
    }
}

enum Hold {
    Wait(Resource),
    Refuse(Rule, String),
}
