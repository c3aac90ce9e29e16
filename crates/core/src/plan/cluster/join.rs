//! New machines joining: the bootstrap's first control plane (`kubeadm init`), the prepare
//! script as soon as a new VM answers, and joins (control planes one at a time, workers as
//! soon as a control plane runs).

use crate::model::Role;
use crate::plan::placement::Capacity;
use crate::plan::types::{Action, ActionKind, Resource};

use super::{Ctx, Gate, Outcome, View};

impl<'a> Ctx<'a> {
    /// Before `init-control-plane`: create the control planes, then initialise the first.
    pub(super) fn bootstrap(&self, out: &mut Outcome, capacity: &Capacity) {
        self.creates(out, capacity);
        self.prepares(out);
        let Some(first) = self.first_control_plane else {
            return;
        };
        let Some(view) = self.views.iter().find(|v| v.name == first) else {
            return;
        };
        if self.is_stuck(view) {
            return;
        }
        if let Some(step) = self.finish_creation(view) {
            out.push(step, Gate::Open);
            return;
        }
        if !view.prepared {
            // `prepares` runs its prepare script first.
            return;
        }
        let gate = self.vm_gate(ActionKind::InitControlPlane, view);
        let spec = self.spec();
        let network = self.network();
        let step = Self::step(
            Action::InitControlPlane {
                machine: view.machine_ref(),
                endpoint: spec.endpoint.clone(),
                version: self.target_version,
                pod_network: network.pods.to_string(),
                service_network: network.services.to_string(),
                scheduling: self.scheduling_of(view),
            },
            self.target(view),
            format!(
                "bootstrap: {} on the first of {} control plane(s), endpoint {} ({}:{})",
                self.capabilities().init,
                spec.control_plane.replicas,
                spec.endpoint.host,
                spec.endpoint.address,
                spec.endpoint.port
            ),
        );
        out.push(step, gate);
    }

    /// Rule: a new VM is prepared (CRI-O and the packages, the longest phase) as soon as its
    /// guest agent answers, whatever it waits for to join: `kubeadm init`, or its turn among
    /// the control planes. The VM's tag records it. A machine that joins on its own (Talos)
    /// is prepared even once its Node exists: preparing it checks what it runs and removes
    /// what it was configured from.
    pub(super) fn prepares(&self, out: &mut Outcome) {
        let joins_on_its_own = self.capabilities().joins_on_its_own;
        if self.census.unjoined == 0 && !joins_on_its_own {
            return;
        }
        let mut steps = Vec::new();
        for view in &self.views {
            let machine = view.machine;
            if (view.node.is_some() && !joins_on_its_own)
                || !view.fresh
                || view.retiring
                || view.prepared
                || (!machine.is_running() && machine.task.is_none())
                || self.is_stuck(view)
                || self.is_surplus_unjoined(view)
            {
                continue;
            }
            let version = machine
                .built_from
                .as_ref()
                .map_or(self.target_version, |built| built.kubernetes);
            let gate = self.vm_gate(ActionKind::PrepareNode, view);
            let step = Self::step(
                Action::PrepareNode {
                    machine: view.machine_ref(),
                    version,
                },
                self.target(view),
                [
                    "new ",
                    view.role().as_str(),
                    ": ",
                    &self.capabilities().prepare(version),
                    " while it waits to join",
                ]
                .concat(),
            );
            steps.push((step, gate));
        }
        for (step, gate) in steps {
            out.push(step, gate);
        }
    }

    /// Fresh machines without a Node join: control planes one at a time while every other
    /// control plane is present (rule 9), workers together.
    pub(super) fn joins(&self, out: &mut Outcome) {
        if self.census.unjoined == 0 {
            return;
        }
        let mut control_plane_joining = false;
        let mut steps = Vec::new();
        let mut names: Vec<&View<'a>> = self
            .views
            .iter()
            .filter(|v| v.node.is_none() && v.fresh && !v.retiring && !self.is_stuck(v))
            .filter(|v| !self.is_surplus_unjoined(v))
            .collect();
        // A control plane whose prepare script ran joins before one still preparing; `views`
        // are in name order and the sort is stable, so ties stay by name.
        names.sort_by_key(|v| (v.role() != Role::ControlPlane, !v.prepared));
        // A node joins through a control plane (its join token is made there): one whose Node
        // is registered, which `kubeadm init` leaves behind with the API answering, before
        // the CNI makes it Ready (the executor prefers a Ready one).
        let join_through = self
            .control_plane_members()
            .find(|v| v.machine.is_running() && !v.retiring)
            .map(|v| v.name);
        let first_member = self.control_plane_members().next();
        for view in names {
            let role = view.role();
            if role == Role::ControlPlane {
                if control_plane_joining {
                    continue;
                }
                control_plane_joining = true;
                if let Some(other) = self.absent_control_planes().next() {
                    let waiting = self.waiting(
                        ActionKind::JoinNode,
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
            if let Some(step) = self.finish_creation(view) {
                steps.push((Some(step), Gate::Open));
                continue;
            }
            if join_through.is_none() {
                if let Some(first) = first_member {
                    let waiting = self.waiting(
                        ActionKind::JoinNode,
                        Some(view.name),
                        Resource::Node {
                            name: first.name.clone(),
                            condition: "back (nodes join through a running control plane)"
                                .to_owned(),
                        },
                        None,
                    );
                    steps.push((None, Gate::Wait(waiting)));
                }
                continue;
            }
            if !view.prepared {
                // `prepares` runs its prepare script first (or waits for the VM to answer).
                continue;
            }
            let gate = self.vm_gate(ActionKind::JoinNode, view);
            let count = self.pools[view.pool].replicas;
            let step = Self::step(
                Action::JoinNode {
                    machine: view.machine_ref(),
                    role,
                    endpoint: self.spec().endpoint.clone(),
                    scheduling: self.scheduling_of(view),
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
}
