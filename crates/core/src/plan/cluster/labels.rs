//! Labels and taints follow the file in place: every running Node whose labels, taints or
//! capstan's record of them differ from what its pool declares gets its change in one
//! `label-nodes` step, through the API, with no machine created or destroyed (they are not
//! part of a machine's spec hash). See `crate::scheduling` for what a node carries and whose
//! keys capstan touches.

use crate::observed::ObservedNode;
use crate::plan::types::{Action, Finding, FindingKind};

use super::{Ctx, Gate, Outcome, View};
use crate::scheduling::{
    Declared, NodeScheduling, OWNED_ELSEWHERE_ANNOTATIONS, Relabel, held_elsewhere,
    in_place_summary, relabel,
};

impl<'a> Ctx<'a> {
    /// What `view`'s Node carries: its pool's labels and taints, capstan's own labels (the
    /// Proxmox node its VM runs on among them).
    pub(super) fn scheduling_of(&self, view: &View<'_>) -> std::sync::Arc<NodeScheduling> {
        self.input.memo.scheduling(
            self.spec(),
            &view.machine.ownership.pool,
            view.role(),
            &view.machine.proxmox_node,
        )
    }

    /// Whether `view`'s Node is one whose labels capstan keeps now: joined, of a desired
    /// pool, neither retiring, fenced nor being drained away.
    fn is_labelled(&self, view: &View<'_>) -> bool {
        view.node.is_some_and(|node| node.drain.is_none())
            && !view.retiring
            && !view.fenced
            && self.pools[view.pool].desired.is_some()
    }

    /// The change `view`'s Node needs, when it needs one.
    pub(super) fn relabel_of(&self, view: &View<'_>) -> Option<Relabel> {
        let node = view.node.filter(|_| self.is_labelled(view))?;
        if self.carries_its_own(view, node) {
            return None;
        }
        relabel(view.name, &self.scheduling_of(view), node)
    }

    /// Whether `node` carries what its pool declares and capstan's record says so, checked
    /// without copying anything (every node, every plan), when no other controller owns a key
    /// on it.
    fn carries_its_own(&self, view: &View<'_>, node: &ObservedNode) -> bool {
        let declared = Declared::of(
            self.spec(),
            &view.machine.ownership.pool,
            view.role(),
            &view.machine.proxmox_node,
        );
        node.owned_elsewhere.is_empty() && declared.carried_by(node)
    }

    /// Keys the file declares for `view`'s Node whose value there differs, which another
    /// controller owns on it: capstan leaves them, and says so.
    fn held_elsewhere(
        &self,
        view: &View<'_>,
        desired: &NodeScheduling,
        node: &ObservedNode,
    ) -> Option<Finding> {
        let keys = held_elsewhere(desired, node);
        (!keys.is_empty()).then(|| Finding {
            kind: FindingKind::OwnedElsewhere,
            cluster: self.name().into(),
            machine: Some(view.name.clone()),
            vm_id: Some(view.machine.vm_id),
            message: format!(
                "node {}: {} owned by another controller on it ({} or {}, e.g. Talos's from the machine's config): capstan leaves them as they are; the file's values take effect when the machine is replaced",
                view.name,
                keys.join(", "),
                OWNED_ELSEWHERE_ANNOTATIONS.0,
                OWNED_ELSEWHERE_ANNOTATIONS.1
            ),
        })
    }

    /// Rule: one `label-nodes` step for every Node that differs from the file, never gated by
    /// a maintenance window (it disturbs no workload that runs).
    pub(super) fn relabels(&self, out: &mut Outcome) {
        if self.input.labels_settled {
            return;
        }
        let mut nodes = Vec::new();
        for view in self.views.iter().filter(|v| self.is_labelled(v)) {
            let Some(node) = view.node else { continue };
            if self.carries_its_own(view, node) {
                continue;
            }
            let desired = &*self.scheduling_of(view);
            nodes.extend(relabel(view.name, desired, node));
            if !self.input.predicting {
                out.findings
                    .extend(self.held_elsewhere(view, desired, node));
            }
        }
        if nodes.is_empty() {
            return;
        }
        let reason = in_place_summary(&nodes);
        out.push(
            Self::step(Action::LabelNodes { nodes }, self.cluster_target(), reason),
            Gate::Open,
        );
    }
}
