//! Members leaving: stale or surplus machines go one at a time (rule 4), only once their
//! replacement is Ready (rule 1), never below `rollout.minWorkers` (rule 3) or control-plane
//! quorum (rule 9), through cordon, a drain with a deadline (rule 5) and the Node's deletion.

use super::create::DeviceBound;
use smol_str::SmolStr;

use crate::model::Role;
use crate::plan::types::{Action, ActionKind, Blocked, Resource, Rule, Target, Wait};

use super::{Ctx, Gate, Outcome, View, add};

impl<'a> Ctx<'a> {
    /// A member capstan is taking out (a fenced machine is not: it is dead already, and its
    /// replacement may have to wait for an upgrade).
    pub(super) fn removal_in_flight(&self) -> bool {
        self.views
            .iter()
            .any(|v| v.retiring || (self.is_leaving(v) && v.is_in_removal()))
    }

    /// Whether a member is to leave: stale, or surplus of its pool.
    pub(super) fn is_leaving(&self, view: &View<'_>) -> bool {
        if view.node.is_none() || view.retiring {
            return false;
        }
        if view.stale.is_some() {
            return true;
        }
        self.is_surplus(view)
    }

    /// Members that may leave, in order: the control plane first, then worker pools in spec
    /// order, then removed pools; within a pool, the one already in removal, then those not
    /// carrying workloads, then by name. Of a pool's members carrying workloads only the first
    /// by name is listed: they are all held or let go alike (`removal_hold` asks nothing of
    /// them but their pool's counts), and a rollout of thousands would list them all at each
    /// of its batches. With `workers_kept` (the spec asks for fewer workers than the minimum),
    /// surplus workers do not leave.
    pub(super) fn leaving(&self, workers_kept: bool) -> Vec<View<'a>> {
        let mut leaving: Vec<View<'a>> = Vec::new();
        for (index, pool) in self.pools.iter().enumerate() {
            let surplus_leaves = !(workers_kept && pool.role == Role::Worker);
            let allowed = |v: &View<'a>| surplus_leaves || v.stale.is_some();
            let members = pool.members.iter().map(|&i| &self.views[i]);
            let start = leaving.len();
            leaving.extend(
                members
                    .clone()
                    .filter(|v| !v.is_counted() && self.is_leaving(v) && allowed(v))
                    .cloned(),
            );
            // `views` are in name order and the sort is stable: ties stay by name.
            leaving[start..].sort_by_key(|v| !v.is_in_removal());
            let quiet = self
                .input
                .quiet
                .and_then(|quiet| Some((quiet, quiet.pool(index)?)));
            let stale = members
                .clone()
                .find(|v| v.is_counted() && v.stale.is_some());
            let quiet_stale = quiet.and_then(|(quiet, pool)| quiet.view(pool.stale.first()?));
            let mut first = earliest(stale.cloned(), quiet_stale);
            if pool.tally.surplus > 0 && surplus_leaves {
                let fresh = members
                    .clone()
                    .find(|v| v.is_counted() && v.in_pool && !v.guarded);
                let quiet_fresh = quiet.and_then(|(quiet, pool)| quiet.view(pool.fresh.first()?));
                first = earliest(first, earliest(fresh.cloned(), quiet_fresh));
            }
            leaving.extend(first);
        }
        leaving
    }

    /// Surplus machines that never joined are destroyed right away (no workload on them).
    pub(super) fn surplus_unjoined(&self, out: &mut Outcome) {
        if self.census.unjoined == 0 {
            return;
        }
        let mut steps = Vec::new();
        for view in &self.views {
            if view.node.is_none()
                && view.fresh
                && !view.retiring
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

    /// Workers carrying workloads.
    pub(super) fn counted_workers(&self) -> u32 {
        let count: usize = self
            .pools
            .iter()
            .filter(|p| p.role == Role::Worker)
            .map(|p| p.tally.counted)
            .sum();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// Why `view` may not start leaving now (rules 1, 3, 9), as a wait or a refusal.
    pub(super) fn removal_hold(
        &self,
        out: &Outcome,
        view: &View<'a>,
        device_bound: &DeviceBound,
    ) -> Option<Hold> {
        let pool = &self.pools[view.pool];
        let replicas = pool.replicas as usize;
        // The pool's other members carrying workloads.
        let others = pool.tally.counted - usize::from(view.is_counted());
        if view.role() == Role::ControlPlane {
            let absent = self.absent_control_planes().find(|n| *n != view.name);
            if let Some(other) = absent {
                return Some(Hold::Wait(Resource::Node {
                    name: (*other).clone(),
                    condition: "Ready (one control plane absent at a time)".to_owned(),
                }));
            }
            if view.is_counted() && others < replicas {
                return Some(Hold::Replacement);
            }
            return None;
        }
        if others < replicas && !self.leaves_first(view, others, device_bound) {
            return Some(Hold::Replacement);
        }
        let minimum = self.spec().min_workers();
        let ready = self.counted_workers();
        if view.is_counted() && ready.saturating_sub(1) < minimum {
            let incoming = self.census.incoming_workers > 0 || out.candidates.iter().any(|c| {
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

    /// Whether stale `view` of a pool replaced old before new (its PCI devices all held)
    /// leaves before its replacement exists: one member at a time, once every fresh member
    /// of the pool carries workloads, `others` of them staying.
    fn leaves_first(&self, view: &View<'a>, others: usize, device_bound: &DeviceBound) -> bool {
        let pool = &self.pools[view.pool];
        device_bound.contains_key(&view.pool)
            && view.stale.is_some()
            && others + 1 >= pool.replicas as usize
            && !pool
                .members
                .iter()
                .any(|&i| self.views[i].fresh && !self.views[i].is_counted())
    }

    pub(super) fn replacement_hold(&self, view: &View<'a>) -> Hold {
        let pending = self.pools[view.pool]
            .members
            .iter()
            .map(|&i| &self.views[i])
            .find(|v| v.fresh && !v.is_counted());
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
    pub(super) fn removals(&self, out: &mut Outcome, upgrading: bool, device_bound: &DeviceBound) {
        self.surplus_unjoined(out);
        let spec_too_small = self.spec().worker_replicas() < self.spec().min_workers();
        if spec_too_small {
            out.blocked.push(Blocked {
                rule: Rule::MinWorkers,
                message: format!(
                    "the spec asks for {} worker(s), below rollout.minWorkers {}: add a worker first; no worker is removed until then",
                    self.spec().worker_replicas(),
                    self.spec().min_workers()
                ),
            });
        }
        if self.census.retiring > 0 {
            return;
        }
        let leaving = self.leaving(spec_too_small);
        let in_flight = leaving.iter().find(|v| v.is_in_removal() || v.fenced);
        let chosen = match in_flight {
            Some(view) => Some(view),
            None if upgrading => None,
            None => {
                let mut chosen = None;
                let mut first_hold = None;
                for view in &leaving {
                    match self.removal_hold(out, view, device_bound) {
                        None => {
                            chosen = Some(view);
                            break;
                        }
                        Some(hold) => {
                            if first_hold.is_none() {
                                first_hold = Some((view, hold));
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
            && let Some(hold) = self.removal_hold(out, view, device_bound)
        {
            self.hold(out, view, hold);
            return;
        }
        self.remove(out, view, device_bound.get(&view.pool));
    }

    /// Reports why `view` does not leave yet (a prediction, reading only steps, skips it).
    pub(super) fn hold(&self, out: &mut Outcome, view: &View<'a>, hold: Hold) {
        if self.input.predicting {
            return;
        }
        match hold {
            Hold::Wait(resource) => {
                let waiting = self.waiting(ActionKind::Cordon, Some(view.name), resource, None);
                out.waiting.push(waiting);
            }
            Hold::Refuse(rule, message) => out.blocked.push(Blocked { rule, message }),
            Hold::Replacement => self.hold(out, view, self.replacement_hold(view)),
        }
    }

    /// What a leaving control plane's etcd member does, and the quorum that stays, for the
    /// delete step's reason ("; it leaves etcd ...: 3 of 4 members stay, 3 healthy, 2 needed
    /// for quorum"); empty for a worker or a distribution without etcd.
    fn etcd_leave(&self, view: &View<'a>, dead: bool) -> String {
        let capabilities = self.capabilities();
        if view.role() != Role::ControlPlane || !capabilities.etcd_quorum {
            return String::new();
        }
        let (alive_words, dead_words) = capabilities.etcd_leave;
        let members: Vec<&View<'a>> = self.control_plane_members().collect();
        let stay = members.len().saturating_sub(1);
        let healthy = members
            .iter()
            .filter(|m| m.name != view.name && m.is_ready())
            .count();
        format!(
            "; {}: {stay} of {} members stay, {healthy} healthy, {} needed for quorum",
            if dead { dead_words } else { alive_words },
            members.len(),
            stay / 2 + 1
        )
    }

    /// Why `view` leaves; `held_mapping` names the PCI mapping whose devices are all held
    /// when it leaves before its replacement.
    fn leaving_reason(&self, view: &View<'a>, held_mapping: Option<&String>) -> SmolStr {
        match self.stale_reason(view) {
            Some(stale) => match held_mapping {
                Some(mapping) => smol_str::format_smolstr!(
                    "{stale}; old before new: every device of PCI mapping {mapping} is held, so it leaves first and its replacement takes the device it gives back"
                ),
                None => stale,
            },
            None => smol_str::format_smolstr!(
                "surplus: pool {} wants {}",
                view.machine.ownership.pool,
                self.pools[view.pool].replicas
            ),
        }
    }

    /// The next step of one leaving member; `held_mapping` names the PCI mapping whose
    /// devices are all held when it leaves before its replacement.
    pub(super) fn remove(&self, out: &mut Outcome, view: &View<'a>, held_mapping: Option<&String>) {
        let Some(node) = view.node else { return };
        let why = self.leaving_reason(view, held_mapping);
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
                    "{why}: its replacement is Ready; delete the Node (no drain: it is dead){}",
                    self.etcd_leave(view, true)
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
                why.to_string(),
            );
            out.push_disruptive(step, &self.windows);
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
            out.push_disruptive(step, &self.windows);
            return;
        };
        if drain.remaining_pods.is_empty() {
            let step = delete([why.as_str(), ": drained", &self.etcd_leave(view, false)].concat());
            if role == Role::ControlPlane {
                out.push_disruptive(step, &self.windows);
            } else {
                out.push(step, Gate::Open);
            }
            return;
        }
        self.drain_on(out, view, drain, &why, target);
    }

    /// The drain of leaving `view` under way (`drain`, pods left): continued within its
    /// deadline, started again once nothing refuses eviction, or blocked past it.
    fn drain_on(
        &self,
        out: &mut Outcome,
        view: &View<'a>,
        drain: &crate::observed::DrainObserved,
        why: &str,
        target: Target,
    ) {
        let timeout = self.spec().rollout.drain_timeout;
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
            // A pod with no refusal would be evicted now: whatever blocked the drain (a
            // budget, a pod stuck terminating) was fixed, so the drain resumes with a fresh
            // deadline instead of staying blocked on a cause that is gone.
            if drain.remaining_pods.iter().all(|pod| pod.reason.is_none()) {
                let step = Self::step(
                    Action::Drain {
                        node: view.name.clone(),
                        deadline: add(self.input.now, timeout.0),
                    },
                    target,
                    format!(
                        "{why}: the drain passed rollout.drainTimeout {timeout}, but nothing refuses eviction any more ({} pod(s) left: {}): drain again",
                        pods.len(),
                        pods.join(", ")
                    ),
                );
                out.push_disruptive(step, &self.windows);
                return;
            }
            out.blocked.push(Blocked {
                rule: Rule::DrainTimeout,
                message: format!(
                    "drain of {} timed out after rollout.drainTimeout {timeout} (started {}): {} refused eviction. The node stays cordoned and VM {} is kept; fix what blocks the eviction and the drain resumes (or remove the annotation {} from the node to give it a fresh deadline)",
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
                ActionKind::Drain,
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
        out.push_disruptive(step, &self.windows);
    }
}

/// Why a member may not start leaving now.
pub(super) enum Hold {
    Wait(Resource),
    Refuse(Rule, String),
    /// Waiting for its replacement ([`Ctx::replacement_hold`] names it): worded only when
    /// reported, as most holds found while choosing who leaves are dropped.
    Replacement,
}

/// The view of the two whose machine comes first by name.
fn earliest<'a>(a: Option<View<'a>>, b: Option<View<'a>>) -> Option<View<'a>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.name < a.name { b } else { a }),
        (a, b) => a.or(b),
    }
}
