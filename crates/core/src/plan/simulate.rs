//! The expected effect of each step on the observed state, and the prediction: apply a batch's
//! effects to a copy, plan again, until nothing is left or the cluster is blocked.
//!
//! Effects are the happy path: a created VM boots and its guest agent answers, a joined node
//! becomes Ready, a drain evicts everything. The prediction is what merging a change would do
//! if nothing fails; the plan's `waitingOn` and `blocked` say what stands in the way now.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};

use super::cluster::{self, Candidate, Gate, Input, Quiet};
use super::placement::Capacity;
use super::types::{Action, PREDICTED, Step, Wait};
use super::{Budget, Exceeded};
use crate::model::{NodeName, Role, VmId};
use crate::observed::{
    DrainObserved, FluxSecret, OUT_OF_SERVICE_TAINT, ObservedCluster, ObservedControlPlane,
    ObservedMachine, ObservedNode, PREPARED_TAG, PowerState, RETIRING_TAG, Taint, VmConfig,
};
use crate::scheduling::NodeScheduling;
use crate::spec::{ClusterSpec, KubeVersion};

/// Predictions stop after this many batches per machine (and [`MIN_BATCHES`] more): far more
/// than any real convergence needs (about six per machine replaced), and a guard against a
/// plan that never settles.
const BATCHES_PER_MACHINE: usize = 16;
const MIN_BATCHES: usize = 64;

/// Steps to replace one machine: create, prepare, join, cordon, drain, delete its Node, reset,
/// destroy.
const STEPS_PER_REPLACEMENT: usize = 8;

/// Steps reserved ahead at most: a replacement of every machine of a cluster at the bound
/// (5,000 machines); a bigger prediction grows as it goes.
const MAX_RESERVED_STEPS: usize = 5_000 * STEPS_PER_REPLACEMENT;

/// The VM id of a VM the prediction creates: Proxmox assigns ids from 100.
const UNASSIGNED: VmId = VmId(0);

/// kubeadm's certificates last a year.
const CERTIFICATE_LIFETIME: SignedDuration = SignedDuration::from_hours(365 * 24);

/// Picks the batch that may run: every open non-disruptive step, or else the first open
/// disruptive one alone (rule 2). In a prediction, steps held only by the maintenance window
/// or a suspension count as open, with that wait recorded on them.
pub(crate) fn select(candidates: Vec<cluster::Candidate>, predict: bool) -> Vec<Step> {
    let mut batch = Vec::new();
    select_into(candidates, predict, &mut batch);
    batch
}

/// [`select`] into `batch` (emptied first): a prediction reuses one batch for all.
fn select_into(candidates: Vec<cluster::Candidate>, predict: bool, batch: &mut Vec<Step>) {
    let runnable = |candidate: &cluster::Candidate| match &candidate.gate {
        Gate::Open => true,
        Gate::Held(_) => predict,
        Gate::Wait(_) => false,
    };
    let with_wait = |candidate: cluster::Candidate| {
        let mut step = candidate.step;
        if let Gate::Held(resource) = candidate.gate {
            step.waits_on = Some(Wait {
                resource,
                since: None,
            });
        }
        step
    };
    batch.clear();
    let calm = candidates.iter().any(|c| runnable(c) && !c.step.disruptive);
    // Chosen in place: a candidate is large, and most are not chosen.
    let mut chosen = candidates;
    chosen.retain(|c| runnable(c) && c.step.disruptive != calm);
    if !calm {
        // Rule 2: a disruptive step runs alone.
        chosen.truncate(1);
    }
    batch.extend(chosen.into_iter().map(with_wait));
}

/// The predicted sequence of a desired cluster, from `observed` to convergence. `listed` are
/// the candidates the plan found in `observed`: when the world needs no settling, they are the
/// prediction's first batch too (most plans of a converged fleet end there).
///
/// Each batch costs what it touches: the machines that sit still are kept aside ([`Quiet`])
/// and counted, so a rollout of N machines is predicted in time linear in N.
///
/// # Errors
/// When `budget` is spent or stopped.
pub(crate) fn predict(
    start: &Input<'_>,
    capacity: &Capacity,
    listed: &[Candidate],
    budget: &Budget<'_>,
) -> Result<Vec<Step>, Exceeded> {
    let (spec, now) = (start.spec, start.now);
    let changes = settling(start.observed, spec, now);
    let mut first = changes.is_empty().then(|| select(listed.to_vec(), true));
    if first.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let mut state = planned_part(start.observed);
    settle(&mut state, changes, now);
    let mut capacity = capacity.clone();
    let machines = machines_of(&state, spec);
    // Room for a replacement of every machine (steps are large: growing by doubling would
    // copy them over and over), within the budget and a cap that a spec built without
    // validation cannot turn into an abort; what is left over goes back at the end.
    let room = machines
        .saturating_mul(STEPS_PER_REPLACEMENT)
        .min(budget.room())
        .min(MAX_RESERVED_STEPS);
    let mut sequence = Vec::with_capacity(room);
    let mut batch = Vec::new();
    let mut quiet = Quiet::default();
    for batch_index in 0..max_batches(machines) {
        let mut sleepers = Vec::new();
        match first.take() {
            Some(listed) => batch = listed,
            None => {
                let input = Input {
                    observed: &state,
                    predicting: true,
                    quiet: Some(&quiet),
                    // Past the first batch, Nodes change only by steps' effects (a join
                    // registers a Node as declared, label-nodes makes it so).
                    labels_settled: batch_index > 0,
                    ..*start
                };
                let outcome = cluster::candidates(&input, &capacity);
                sleepers = outcome.quiet;
                select_into(outcome.candidates, true, &mut batch);
            }
        }
        if batch.is_empty() {
            break;
        }
        budget.spend(batch.len())?;
        let touched: BTreeSet<NodeName> = batch.iter().flat_map(machines_named).collect();
        if batch.iter().any(changes_every_machine) {
            // The facts kept aside hold for one version and one cluster.
            quiet.wake_all(&mut state);
            sleepers.clear();
        }
        for name in &touched {
            quiet.wake(&mut state, name);
        }
        for mut step in batch.drain(..) {
            apply(&mut state, &mut capacity, &step, now, batch_index);
            forget_predicted_ids(&mut step);
            sequence.push(step);
        }
        for name in &touched {
            if !state.machines.contains_key(name) && !state.nodes.contains_key(name) {
                start.memo.freed(name);
            }
        }
        for (name, facts) in sleepers {
            if !touched.contains(&name) {
                quiet.sleep(&mut state, &name, facts);
            }
        }
    }
    sequence.shrink_to_fit();
    Ok(sequence)
}

/// What of an observed cluster the planner reads (pods and disruption budgets are for drain
/// forecasts, not plans): the state a prediction plays forward.
fn planned_part(observed: &ObservedCluster) -> ObservedCluster {
    ObservedCluster {
        machines: observed.machines.clone(),
        nodes: observed.nodes.clone(),
        control_plane: observed.control_plane.clone(),
        flux: observed.flux.clone(),
        pods: BTreeMap::new(),
        disruption_budgets: Vec::new(),
        records: observed.records.clone(),
    }
}

/// The machines a prediction may have to deal with: those that exist and those declared.
fn machines_of(state: &ObservedCluster, spec: &ClusterSpec) -> usize {
    let declared = spec.control_plane.replicas as usize + spec.worker_replicas() as usize;
    state.machines.len() + declared
}

fn max_batches(machines: usize) -> usize {
    MIN_BATCHES.saturating_add(machines.saturating_mul(BATCHES_PER_MACHINE))
}

/// Every machine (VM or Node) `step` names.
fn machines_named(step: &Step) -> Vec<NodeName> {
    let mut names: Vec<NodeName> = step.target.machine.iter().cloned().collect();
    match &step.action {
        Action::CreateMachine { name, .. } => names.push(name.clone()),
        Action::Cordon { node } | Action::Drain { node, .. } => names.push(node.clone()),
        Action::DeleteNode { node, machine, .. } => {
            names.push(node.clone());
            names.extend(machine.iter().map(|m| m.name.clone()));
        }
        Action::FenceMachine { machine, node } => {
            names.push(machine.name.clone());
            names.push(node.clone());
        }
        Action::InitControlPlane { machine, .. }
        | Action::PrepareNode { machine, .. }
        | Action::JoinNode { machine, .. }
        | Action::ResetNode { machine }
        | Action::DestroyMachine { machine, .. }
        | Action::UpgradeControlPlane { machine, .. } => names.push(machine.name.clone()),
        Action::RenewCertificates { machines } | Action::DeleteCluster { machines, .. } => {
            names.extend(machines.iter().map(|m| m.name.clone()));
        }
        Action::DeliverKubeconfig { .. } => {}
        Action::LabelNodes { nodes } => names.extend(nodes.iter().map(|n| n.node.clone())),
        Action::TagMachines { machines } => {
            names.extend(machines.iter().map(|f| f.machine.name.clone()));
        }
    }
    names
}

/// Whether `step` changes what every machine is judged by: the version the machines are
/// built at, or the cluster as a whole.
fn changes_every_machine(step: &Step) -> bool {
    step.kind().changes().every_machine
}

/// [`predict`] the way it was first written, planning every machine at every batch: what
/// the tests compare the prediction with.
#[cfg(test)]
pub(crate) fn predict_by_replanning(start: &Input<'_>, capacity: &Capacity) -> Vec<Step> {
    let mut state = start.observed.clone();
    settle(
        &mut state,
        settling(start.observed, start.spec, start.now),
        start.now,
    );
    let mut capacity = capacity.clone();
    let mut sequence = Vec::new();
    for batch_index in 0..max_batches(machines_of(&state, start.spec)) {
        // A memo per batch: new names are found from the first ordinal each time.
        let memo = cluster::SpecMemo::default();
        let input = Input {
            observed: &state,
            predicting: true,
            quiet: None,
            memo: &memo,
            ..*start
        };
        let batch = select(cluster::candidates(&input, &capacity).candidates, true);
        if batch.is_empty() {
            break;
        }
        for mut step in batch {
            apply(&mut state, &mut capacity, &step, start.now, batch_index);
            forget_predicted_ids(&mut step);
            sequence.push(step);
        }
    }
    sequence
}

/// VM ids of VMs the prediction made up ([`UNASSIGNED`]) are unknown until Proxmox assigns
/// them: the steps say none.
fn forget_predicted_ids(step: &mut Step) {
    let forget = |vm_id: &mut Option<VmId>| {
        if *vm_id == Some(UNASSIGNED) {
            *vm_id = None;
        }
    };
    forget(&mut step.target.vm_id);
    match &mut step.action {
        Action::InitControlPlane { machine, .. }
        | Action::JoinNode { machine, .. }
        | Action::PrepareNode { machine, .. }
        | Action::ResetNode { machine }
        | Action::DestroyMachine { machine, .. }
        | Action::UpgradeControlPlane { machine, .. }
        | Action::FenceMachine { machine, .. }
        | Action::DeleteNode {
            machine: Some(machine),
            ..
        } => forget(&mut machine.vm_id),
        Action::RenewCertificates { machines } => {
            machines.iter_mut().for_each(|m| forget(&mut m.vm_id));
        }
        _ => {}
    }
}

/// One thing the world does on its own if all goes well (see [`settling`]).
enum Settling {
    /// A VM's task ends: a VM on its way in (not retiring) is then up.
    TaskEnds { machine: NodeName, up: bool },
    /// A young VM that runs and has not joined answers through its guest agent.
    AgentAnswers(NodeName),
    /// A young node becomes Ready.
    NodeReady(NodeName),
    /// A drain within its deadline evicts its last pods.
    DrainFinishes(NodeName),
    /// The API server answers again.
    ApiAnswers,
}

/// What the world does on its own if all goes well: tasks finish, booting VMs answer, new
/// nodes become Ready, drains in progress finish before their deadline, the API answers again.
/// Dead nodes do not come back and timed-out drains stay stuck.
fn settling(state: &ObservedCluster, spec: &ClusterSpec, now: Timestamp) -> Vec<Settling> {
    let join_timeout =
        SignedDuration::try_from(spec.rollout.join_timeout.0).unwrap_or(SignedDuration::MAX);
    let drain_timeout =
        SignedDuration::try_from(spec.rollout.drain_timeout.0).unwrap_or(SignedDuration::MAX);
    let before = |start: Timestamp, timeout: SignedDuration| {
        start
            .saturating_add(timeout)
            .is_ok_and(|deadline| now < deadline)
    };
    let mut changes = Vec::new();
    for (name, machine) in &state.machines {
        // A task on a VM on its way in is its creation: it ends with the VM up.
        let up = machine.task.is_some() && !machine.is_retiring();
        if machine.task.is_some() {
            changes.push(Settling::TaskEnds {
                machine: name.clone(),
                up,
            });
        }
        let young = before(machine.created, join_timeout);
        let node = state.nodes.get(name);
        let running = up || machine.is_running();
        if running && !machine.guest_agent && node.is_none() && young {
            changes.push(Settling::AgentAnswers(name.clone()));
        }
        if node.is_some_and(|node| !node.ready && young && !node.is_out_of_service()) {
            changes.push(Settling::NodeReady(name.clone()));
        }
    }
    for (name, node) in &state.nodes {
        if let Some(drain) = &node.drain
            && !drain.remaining_pods.is_empty()
            && before(drain.started, drain_timeout)
        {
            changes.push(Settling::DrainFinishes(name.clone()));
        }
    }
    if state
        .control_plane
        .as_ref()
        .is_some_and(|cp| cp.unreachable_since.is_some())
    {
        changes.push(Settling::ApiAnswers);
    }
    changes
}

/// Applies what [`settling`] found to `state`.
fn settle(state: &mut ObservedCluster, changes: Vec<Settling>, now: Timestamp) {
    for change in changes {
        match change {
            Settling::TaskEnds { machine, up } => {
                if let Some(vm) = state.machines.get_mut(&machine) {
                    vm.task = None;
                    if up {
                        vm.power = PowerState::Running;
                    }
                }
            }
            Settling::AgentAnswers(machine) => {
                if let Some(vm) = state.machines.get_mut(&machine) {
                    vm.guest_agent = true;
                }
            }
            Settling::NodeReady(name) => {
                if let Some(node) = state.nodes.get_mut(&name) {
                    node.ready = true;
                    node.ready_since = now;
                }
            }
            Settling::DrainFinishes(name) => {
                if let Some(drain) = state.nodes.get_mut(&name).and_then(|n| n.drain.as_mut()) {
                    drain.remaining_pods.clear();
                }
            }
            Settling::ApiAnswers => {
                if let Some(control_plane) = &mut state.control_plane {
                    control_plane.unreachable_since = None;
                }
            }
        }
    }
}

/// A node that registered with `scheduling` (the rest set through the API by its step) and
/// turned Ready.
fn ready_node(
    now: Timestamp,
    version: Option<KubeVersion>,
    scheduling: &NodeScheduling,
) -> ObservedNode {
    ObservedNode {
        ready: true,
        ready_since: now,
        kubelet_version: version,
        unschedulable: false,
        taints: scheduling
            .taints
            .iter()
            .map(|t| Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: t.effect.as_str().to_owned(),
            })
            .collect(),
        drain: None,
        pod_cidr: None,
        awaiting_network: false,
        labels: scheduling.labels.clone(),
        managed: scheduling.managed(),
        owned_elsewhere: Default::default(),
    }
}

fn renewed(now: Timestamp) -> Option<Timestamp> {
    now.saturating_add(CERTIFICATE_LIFETIME).ok()
}

/// A `create-machine` step's effect: the VM runs, built as the step says, its memory, data
/// disks and devices taken on its node.
fn created(state: &mut ObservedCluster, capacity: &mut Capacity, step: &Step, now: Timestamp) {
    let Action::CreateMachine {
        name,
        ownership,
        machine,
        proxmox_node,
        storage,
        tags,
        pool,
    } = &step.action
    else {
        return;
    };
    capacity.reserve(proxmox_node, machine.memory_mib);
    capacity.reserve_hardware(
        proxmox_node,
        &crate::plan::hardware_fit::HardwareNeeds::of_parts(&machine.hardware, storage.as_deref()),
    );
    // Finishing an interrupted creation starts the VM that is there, id and all.
    let vm_id = state.machines.get(name).map_or(UNASSIGNED, |vm| vm.vm_id);
    state.machines.insert(
        name.clone(),
        ObservedMachine {
            vm_id,
            proxmox_node: proxmox_node.clone(),
            ownership: ownership.clone(),
            tags: tags.iter().map(|t| t.as_str().into()).collect(),
            power: PowerState::Running,
            created: now,
            guest_agent: true,
            built_from: Some((**machine).clone()),
            config: Some(VmConfig {
                cores: machine.cores * machine.hardware.sockets(),
                memory_mib: machine.memory_mib,
                disk_gib: machine.disk_gib,
                hardware: (!machine.hardware.is_default()).then(|| machine.hardware.clone()),
            }),
            task: None,
            pool: pool.as_deref().map(Into::into),
            recorded_tags: (!tags.is_empty())
                .then(|| tags.iter().map(|t| t.as_str().into()).collect()),
        },
    );
}

/// Applies the expected effect of `step` to `state` (one cluster) and `capacity`. `batch`
/// makes predicted fingerprints distinct.
pub(crate) fn apply(
    state: &mut ObservedCluster,
    capacity: &mut Capacity,
    step: &Step,
    now: Timestamp,
    batch: usize,
) {
    // Each change gives a fingerprint unlike the one before (and so unlike Flux's).
    let new_admin = |control_plane: Option<&ObservedControlPlane>| {
        let previous = control_plane
            .and_then(|cp| cp.admin_kubeconfig.as_deref())
            .and_then(|fingerprint| fingerprint.rsplit_once("(#"))
            .and_then(|(_, number)| number.trim_end_matches(')').parse::<usize>().ok());
        let serial = previous.map_or(batch, |previous| batch.max(previous + 1));
        Some(format!("{PREDICTED}{} (#{serial})", step.name()))
    };
    match &step.action {
        Action::CreateMachine { .. } => created(state, capacity, step, now),
        Action::InitControlPlane {
            machine,
            endpoint,
            version,
            scheduling,
            ..
        } => {
            // Certificates and the admin kubeconfig are new: see below.
            let admin_kubeconfig = state
                .control_plane
                .take()
                .and_then(|cp| cp.admin_kubeconfig);
            state.control_plane = Some(ObservedControlPlane {
                endpoint: endpoint.clone(),
                version: *version,
                unreachable_since: None,
                certificates_expire: None,
                admin_kubeconfig,
                bootstrap_incomplete: false,
                network: None,
                api_service_address: None,
            });
            state.nodes.insert(
                machine.name.clone(),
                ready_node(now, Some(*version), scheduling),
            );
        }
        Action::PrepareNode { machine, .. } => {
            if let Some(vm) = state.machines.get_mut(&machine.name)
                && !vm.is_prepared()
            {
                vm.tags.push(PREPARED_TAG.into());
            }
        }
        Action::JoinNode {
            machine,
            scheduling,
            ..
        } => {
            let version = state
                .machines
                .get(&machine.name)
                .and_then(|m| m.built_from.as_ref())
                .map(|spec| spec.kubernetes);
            state
                .nodes
                .insert(machine.name.clone(), ready_node(now, version, scheduling));
        }
        Action::LabelNodes { nodes } => {
            for change in nodes {
                if let Some(node) = state.nodes.get_mut(&change.node) {
                    change.apply_to(node);
                }
            }
        }
        Action::TagMachines { machines } => {
            for filing in machines {
                let vm = state.machines.get_mut(&filing.machine.name);
                vm.into_iter()
                    .for_each(|vm| super::cluster::file_in_place(vm, filing));
            }
        }
        Action::Cordon { node } => {
            if let Some(node) = state.nodes.get_mut(node) {
                node.unschedulable = true;
            }
        }
        Action::Drain { node, .. } => {
            if let Some(node) = state.nodes.get_mut(node) {
                node.unschedulable = true;
                node.drain = Some(DrainObserved {
                    started: now,
                    remaining_pods: Vec::new(),
                });
            }
        }
        Action::DeleteNode { node, role, .. } => {
            state.nodes.remove(node);
            if let Some(machine) = state.machines.get_mut(node)
                && !machine.is_retiring()
            {
                machine.tags.push(RETIRING_TAG.into());
            }
            // The admin kubeconfig is read from a remaining control plane from now on.
            if *role == Role::ControlPlane
                && let Some(control_plane) = &mut state.control_plane
            {
                control_plane.admin_kubeconfig = new_admin(Some(control_plane));
            }
        }
        Action::ResetNode { machine } => {
            if let Some(vm) = state.machines.get_mut(&machine.name) {
                if vm.is_running() {
                    release(capacity, vm);
                }
                vm.power = PowerState::Stopped;
            }
        }
        Action::DestroyMachine { machine, .. } => {
            if let Some(vm) = state.machines.remove(&machine.name)
                && vm.is_running()
            {
                release(capacity, &vm);
            }
        }
        Action::UpgradeControlPlane { to, .. } => {
            if let Some(control_plane) = &mut state.control_plane {
                control_plane.version = *to;
            }
        }
        // Its certificates and admin kubeconfig: below.
        Action::RenewCertificates { .. } => {}
        Action::DeliverKubeconfig { flux } => {
            let kubeconfig = state
                .control_plane
                .as_ref()
                .and_then(|cp| cp.admin_kubeconfig.clone())
                .unwrap_or_default();
            state.flux = Some(FluxSecret {
                target: flux.clone(),
                kubeconfig,
            });
        }
        Action::FenceMachine { machine, node } => {
            if let Some(vm) = state.machines.get_mut(&machine.name) {
                if vm.is_running() {
                    release(capacity, vm);
                }
                vm.power = PowerState::Stopped;
            }
            if let Some(node) = state.nodes.get_mut(node)
                && !node.is_out_of_service()
            {
                node.taints.push(Taint {
                    key: OUT_OF_SERVICE_TAINT.to_owned(),
                    value: Some("nodeshutdown".to_owned()),
                    effect: "NoExecute".to_owned(),
                });
            }
        }
        Action::DeleteCluster { .. } => {
            for vm in state.machines.values().filter(|vm| vm.is_running()) {
                release(capacity, vm);
            }
            *state = ObservedCluster::default();
        }
    }
    let changes = step.kind().changes();
    if let Some(control_plane) = &mut state.control_plane {
        if changes.certificates {
            control_plane.certificates_expire = renewed(now);
        }
        if changes.admin_credentials {
            control_plane.admin_kubeconfig = new_admin(Some(control_plane));
        }
    }
}

/// Memory a VM takes on its Proxmox node: its observed config, else what it was built with.
/// Gives back what running `vm` held on its node: its memory and its PCI devices (Proxmox
/// reserves a device for a running VM only).
fn release(capacity: &mut Capacity, vm: &ObservedMachine) {
    capacity.release(&vm.proxmox_node, memory_of(vm));
    let devices = vm.config.as_ref().and_then(|c| c.hardware.as_ref());
    for device in devices.map(|h| h.pci.as_slice()).unwrap_or_default() {
        capacity.release_device(&vm.proxmox_node, &device.mapping);
    }
}

fn memory_of(vm: &ObservedMachine) -> u32 {
    vm.config
        .as_ref()
        .map(|c| c.memory_mib)
        .or_else(|| vm.built_from.as_ref().map(|b| b.memory_mib))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::{PodRef, ProxmoxTask};
    use crate::plan::fixtures::{built, desired, minutes, now};
    use crate::spec::Cluster;

    /// `settling` finds what is in flight and nothing else, so a settled world (the usual
    /// one) lets `predict` start from the plan's own candidates without a copy.
    #[test]
    fn settling_finishes_what_is_in_flight_and_then_finds_nothing() {
        let desired = desired(vec![Cluster::test("prod")]);
        let spec = &desired.clusters["prod"].spec;
        let mut state = built(&desired).clusters["prod"].clone();
        assert!(settling(&state, spec, now()).is_empty(), "a built cluster");
        let names: Vec<NodeName> = state.machines.keys().cloned().collect();
        let (booting, silent, joining, draining) = (&names[0], &names[1], &names[2], &names[3]);
        let vm = state.machines.get_mut(booting).expect("vm");
        vm.power = PowerState::Stopped;
        vm.task = Some(ProxmoxTask {
            upid: "UPID:pve1:1".to_owned(),
            kind: "qmstart".to_owned(),
            started: minutes(-1),
        });
        // Young: created within rollout.joinTimeout (older ones are dead, and stay so).
        state.nodes.remove(silent);
        let vm = state.machines.get_mut(silent).expect("vm");
        vm.guest_agent = false;
        vm.created = minutes(-1);
        state.machines.get_mut(joining).expect("vm").created = minutes(-1);
        state.nodes.get_mut(joining).expect("node").ready = false;
        state.nodes.get_mut(draining).expect("node").drain = Some(DrainObserved {
            started: minutes(-1),
            remaining_pods: vec![PodRef {
                namespace: "shop".to_owned(),
                name: "web-0".to_owned(),
                reason: None,
            }],
        });
        if let Some(control_plane) = &mut state.control_plane {
            control_plane.unreachable_since = Some(minutes(-2));
        }

        let changes = settling(&state, spec, now());
        assert_eq!(changes.len(), 5);
        settle(&mut state, changes, now());
        let vm = &state.machines[booting];
        assert!(vm.is_running() && vm.task.is_none());
        assert!(state.machines[silent].guest_agent);
        assert!(state.nodes[joining].ready);
        let drain = state.nodes[draining].drain.as_ref().expect("drain");
        assert!(drain.remaining_pods.is_empty());
        let control_plane = state.control_plane.as_ref().expect("control plane");
        assert_eq!(control_plane.unreachable_since, None);
        assert!(settling(&state, spec, now()).is_empty(), "settled");
    }
}
