//! The cluster's health and its control plane in place: fencing dead nodes (rule 13), the
//! version upgrade (rule 7), certificate renewal (rule 10), Nodes whose VM is gone, and what
//! the cluster waits on.

use jiff::{SignedDuration, Timestamp};

use crate::model::{NodeName, Role};
use crate::plan::types::{
    Action, ActionKind, Finding, FindingKind, MachineRef, Resource, Target, Waiting,
};
use crate::plan::window::WindowState;
use crate::spec::validate::VM_NAME_PREFIX;

use super::{Ctx, Gate, Outcome, Quiet, View, add};
use crate::spec::ClusterNetwork;

impl<'a> Ctx<'a> {
    /// Rule 13: a node NotReady past `remediation.after` whose VM is stopped or whose guest
    /// agent is silent is fenced, then replaced like any stale machine.
    pub(super) fn fencing(&self, out: &mut Outcome) {
        if self.census.not_ready == 0 {
            return;
        }
        let remediation = &self.spec().remediation;
        if remediation.fence && self.remediation_held(out) {
            return;
        }
        let mut steps = Vec::new();
        for view in &self.views {
            let Some(node) = view.node else { continue };
            // A node waiting for its first CNI is not dead, however long Flux takes.
            if node.ready || node.awaiting_network || view.fenced || view.retiring {
                continue;
            }
            let dead = !view.machine.is_running() || !view.machine.guest_agent;
            let due = add(node.ready_since, remediation.after.0);
            if !remediation.fence || !dead {
                continue;
            }
            if self.input.now < due {
                let waiting = self.waiting(
                    ActionKind::FenceMachine,
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

    /// `remediation.maxUnhealthy`: when more nodes are NotReady than it allows and one of
    /// them would be fenced, nothing is, and the outcome says which nodes are down. Returns
    /// whether fencing is held.
    fn remediation_held(&self, out: &mut Outcome) -> bool {
        let remediation = &self.spec().remediation;
        let members = || {
            self.views
                .iter()
                .filter(|v| v.node.is_some() && !v.retiring)
        };
        let unhealthy: Vec<NodeName> = members()
            .filter(|v| {
                v.node
                    .is_some_and(|node| !node.ready && !node.awaiting_network)
            })
            .map(|v| v.name.clone())
            .collect();
        // A prediction keeps Ready workers aside (quiet): they are members all the same.
        let nodes = members().count() + self.input.quiet.map_or(0, Quiet::len);
        let max_unhealthy = remediation.max_unhealthy.of(nodes);
        if unhealthy.len() <= max_unhealthy {
            return false;
        }
        let would_fence = members().any(|v| {
            v.node.is_some_and(|node| {
                !node.ready
                    && !v.fenced
                    && (!v.machine.is_running() || !v.machine.guest_agent)
                    && self.input.now >= add(node.ready_since, remediation.after.0)
            })
        });
        if would_fence {
            out.remediation_held = Some(super::super::RemediationHeld {
                unhealthy,
                nodes,
                max_unhealthy,
            });
        }
        true
    }

    /// Control planes with a Node, in name order.
    pub(super) fn control_plane_members(&self) -> impl Iterator<Item = &View<'a>> {
        self.control_planes
            .iter()
            .map(|&index| &self.views[index])
            .filter(|v| v.node.is_some())
    }

    /// A control plane that is not fully there: NotReady, being removed, or retiring with its
    /// Node still present (rule 9 allows one at a time).
    /// With `cni: none`, a control plane NotReady only for want of a CNI is there: its join
    /// made it an etcd member with its API answering, and Flux installs the CNI later.
    pub(super) fn absent_control_planes(&self) -> impl Iterator<Item = &'a NodeName> + '_ {
        let awaits_cni = self.network().awaits_flux_cni();
        self.control_plane_members()
            .filter(move |v| {
                let present = v.is_ready() || (awaits_cni && v.awaits_network());
                !present || v.is_in_removal() || v.retiring
            })
            .map(|v| v.name)
    }

    /// The network the cluster runs on: the file's fields, else what it was built with, else
    /// its distribution's defaults.
    pub(super) fn network(&self) -> ClusterNetwork {
        let running = self.input.observed.control_plane.as_ref();
        self.spec()
            .cluster_network(running.and_then(|cp| cp.network.as_ref()))
    }

    /// Rule 7: the version moves in place on the control plane first. Returns whether an
    /// upgrade is pending (then no machine is created or joined: new machines run the new
    /// version, which the API server must run first).
    pub(super) fn upgrade(&self, out: &mut Outcome) -> bool {
        let Some(control_plane) = &self.input.observed.control_plane else {
            return false;
        };
        // A distribution without in-place upgrades (K3s) upgrades by replacement alone: the
        // machines' spec hash carries the version, so they are outdated and replaced (servers
        // first); there is no in-place step.
        if !self.capabilities().upgrades_in_place {
            return false;
        }
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
                ActionKind::UpgradeControlPlane,
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
        out.push_disruptive(step, &self.windows);
        true
    }

    /// Rule 10: certificates within `renewBefore` of expiry are renewed (then delivered).
    pub(super) fn renewal(&self, out: &mut Outcome) {
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
            .filter(|v| v.machine.is_running() && !v.retiring)
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
        let urgent = match &*self.windows.state(&step) {
            WindowState::Open => false,
            WindowState::Closed(hold) => hold.opens.is_none_or(|opens| opens >= expires),
        };
        if urgent {
            step.disruptive = true;
            step.reason
                .push_str("; the maintenance windows let it start too late, so it does not wait");
            out.push(step, Gate::Open);
        } else {
            out.push_disruptive(step, &self.windows);
        }
    }

    /// Nodes named like this cluster's VMs whose VM is gone.
    pub(super) fn ghost_nodes(&self, out: &mut Outcome) {
        let ours = |name: &NodeName| {
            name.as_str()
                .strip_prefix(VM_NAME_PREFIX)
                .and_then(|rest| rest.strip_prefix(self.name()))
                .is_some_and(|rest| rest.starts_with('-'))
        };
        let mut steps = Vec::new();
        for &name in &self.machineless_nodes {
            if !ours(name) {
                continue;
            }
            steps.push(Self::step(
                Action::DeleteNode {
                    node: name.clone(),
                    role: Role::Worker,
                    machine: None,
                },
                Target {
                    cluster: self.name().into(),
                    machine: Some(name.clone()),
                    ..Target::default()
                },
                "its VM is gone: delete the Node so its pods move".to_owned(),
            ));
        }
        for step in steps {
            out.push(step, Gate::Open);
        }
    }

    /// Waits on members that are not Ready, and cordons capstan did not make (a prediction,
    /// reading only steps, skips them).
    pub(super) fn report_nodes(&self, out: &mut Outcome) {
        if self.input.predicting {
            return;
        }
        let join_timeout = self.spec().rollout.join_timeout.0;
        let awaits_cni = self.network().awaits_flux_cni();
        let mut waiting = Vec::new();
        let mut findings = Vec::new();
        let mut without_cni = 0;
        for view in &self.views {
            let Some(node) = view.node else { continue };
            if view.retiring || view.fenced {
                continue;
            }
            if awaits_cni && view.awaits_network() {
                // One wait for them all: the CNI Flux installs, not each node.
                without_cni += 1;
                continue;
            }
            if !node.ready && self.input.now < add(view.machine.created, join_timeout) {
                waiting.push(self.waiting(
                    ActionKind::JoinNode,
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
                    cluster: self.name().into(),
                    machine: Some(view.name.clone()),
                    vm_id: Some(view.machine.vm_id),
                    message: format!(
                        "node {} is cordoned but not leaving: it is not counted as schedulable; uncordon it when done",
                        view.name
                    ),
                });
            }
        }
        if without_cni > 0 {
            waiting.push(Waiting {
                step: None,
                machine: None,
                resource: Resource::Cni {
                    nodes: without_cni,
                    flux: self
                        .input
                        .memo
                        .flux_target(self.name(), self.spec())
                        .map(|target| format!("{}/{}", target.namespace, target.secret_name)),
                },
                since: None,
            });
        }
        out.waiting.extend(waiting);
        out.findings.extend(findings);
    }
}
