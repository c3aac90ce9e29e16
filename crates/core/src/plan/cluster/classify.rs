//! Every owned VM seen against the spec: which pool it belongs to, whether it counts toward the
//! pool's replicas, and whether it is stale (built from another template, size or version, or
//! drifted) and so must be replaced.

use std::cmp::Ordering;

use smol_str::format_smolstr;

use super::create::Tally;
use std::rc::Rc;

use smol_str::SmolStr;

use crate::model::{NodeName, Role};
use crate::observed::{ObservedMachine, ObservedNode};
use crate::plan::types::{Finding, FindingKind};
use crate::spec::validate::CONTROL_PLANE_POOL;
use crate::spec::{DriftPolicy, Machine, ReplacePolicy};

use super::{Ctx, DesiredPool, Outcome, Pool, View};
use crate::observed::VmConfig;

impl<'a> Ctx<'a> {
    /// Builds the pools and sees every owned VM against them.
    pub(super) fn classify(&mut self, out: &mut Outcome) {
        let spec = self.input.spec;
        let specs = self.input.memo.specs(spec, self.target_version);
        let desired = |index: usize, machine: &'a Machine| DesiredPool {
            machine,
            specs: Rc::clone(&specs),
            index,
        };
        self.pools.push(Pool {
            name: CONTROL_PLANE_POOL,
            role: Role::ControlPlane,
            replicas: spec.control_plane.replicas,
            desired: Some(desired(0, &spec.control_plane.machine)),
            tally: Tally::default(),
            members: Vec::new(),
            replace: spec.replace_policy(None),
            guarded: Default::default(),
        });
        for (index, pool) in spec.workers.iter().enumerate() {
            self.pools.push(Pool {
                name: &pool.pool,
                role: Role::Worker,
                replicas: pool.replicas,
                desired: Some(desired(index + 1, &pool.machine)),
                tally: Tally::default(),
                members: Vec::new(),
                replace: pool.replace.unwrap_or(spec.rollout.replace),
                guarded: Default::default(),
            });
        }
        let observed = self.input.observed;
        // Both maps are sorted by name: walk them side by side.
        let mut nodes = observed.nodes.iter().peekable();
        let mut previous_pool = 0;
        for (name, machine) in &observed.machines {
            // One comparison per node: those before this VM's name have no VM.
            let mut node = None;
            while let Some(&(node_name, observed_node)) = nodes.peek() {
                let order = node_name.cmp(name);
                if order == Ordering::Greater {
                    break;
                }
                nodes.next();
                if order == Ordering::Equal {
                    node = Some(observed_node);
                    break;
                }
                self.machineless_nodes.push(node_name);
            }
            let view = self.see(name, machine, node, &mut previous_pool, out);
            self.views.push(view);
        }
        self.machineless_nodes.extend(nodes.map(|(node, _)| node));
        self.guard_refusals(out);
    }

    /// Sees one VM against the pools (adding its pool when it is gone from the spec).
    /// `previous_pool`: the pool of the VM before, tried first (VM names start with the
    /// pool's, so a pool's VMs come one after another).
    fn see(
        &mut self,
        name: &'a NodeName,
        machine: &'a ObservedMachine,
        node: Option<&'a ObservedNode>,
        previous_pool: &mut usize,
        out: &mut Outcome,
    ) -> View<'a> {
        let ownership = &machine.ownership;
        let is_its_pool = |p: &Pool<'_>| p.role == ownership.role && p.name == ownership.pool;
        let found = if is_its_pool(&self.pools[*previous_pool]) {
            Some(*previous_pool)
        } else {
            self.pools.iter().position(is_its_pool)
        };
        let pool = match found {
            Some(index) => index,
            None => {
                self.pools.push(Pool {
                    name: &ownership.pool,
                    role: ownership.role,
                    replicas: 0,
                    desired: None,
                    tally: Tally::default(),
                    members: Vec::new(),
                    replace: ReplacePolicy::Allow,
                    guarded: Default::default(),
                });
                self.pools.len() - 1
            }
        };
        *previous_pool = pool;
        let fenced = node.is_some_and(ObservedNode::is_out_of_service) && !machine.is_running();
        let current = self.pools[pool]
            .desired
            .as_ref()
            .is_some_and(|d| *d.hash() == ownership.spec_hash);
        let mut view = View::of(
            name,
            machine,
            node,
            Facts {
                pool,
                fenced,
                retiring: machine.is_retiring(),
                prepared: machine.is_prepared(),
                current,
                stale: None,
                guarded: false,
            },
        );
        match self.staleness(&view, current, out) {
            Some(stale) if self.guards(&view, &stale) => {
                self.keep(&view, &stale);
                view.guarded = true;
            }
            stale => view.stale = stale,
        }
        view.fresh = (current || view.guarded) && view.stale.is_none();
        view
    }

    /// Why a member must be replaced (outdated, drifted with `onDrift: replace`, fenced), and
    /// the drift report. The words of an outdated member are written only when a step needs
    /// them ([`Self::stale_reason`]): a prediction classifies every member at every batch.
    /// `current`: the VM's spec hash is its pool's desired one.
    pub(super) fn staleness(
        &self,
        view: &View<'a>,
        current: bool,
        out: &mut Outcome,
    ) -> Option<Stale> {
        view.node?;
        let pool = &self.pools[view.pool];
        let Some(desired) = &pool.desired else {
            return Some(Stale::PoolRemoved);
        };
        if view.fenced {
            return Some(Stale::Fenced);
        }
        let machine = view.machine;
        if !current {
            return Some(Stale::Outdated);
        }
        let config = machine.config.as_ref()?;
        let wanted = desired.machine;
        let sized_as_wanted = config.cores == wanted.cores * wanted.sockets.unwrap_or(1)
            && config.memory_mib == wanted.memory_mib
            && config.disk_gib == wanted.disk_gib;
        // The hardware was read only for the pools that declare some.
        let built_as_wanted = config
            .hardware
            .as_ref()
            .is_none_or(|found| desired.spec().hardware.drift_from(found).is_empty());
        if sized_as_wanted && built_as_wanted {
            return None;
        }
        self.drift(view, config, out)
    }

    /// The drift of a member sized otherwise than its spec (rule 14): reported, and a reason
    /// to replace it with `onDrift: replace`. Rare, so kept out of [`Self::staleness`], which
    /// a prediction runs for every member at every batch.
    #[cold]
    fn drift(&self, view: &View<'a>, config: &VmConfig, out: &mut Outcome) -> Option<Stale> {
        let wanted = self.pools[view.pool].desired.as_ref()?.machine;
        let machine = view.machine;
        let mut drift = Vec::new();
        // Proxmox reports vCPUs (sockets × cores): with one socket, the cores.
        let vcpus = wanted.cores * wanted.sockets.unwrap_or(1);
        let label = if vcpus == wanted.cores {
            "cores"
        } else {
            "vCPUs"
        };
        if config.cores != vcpus {
            drift.push(format!("{label} {vcpus} → {}", config.cores));
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
        if let (Some(found), Some(desired)) = (&config.hardware, &self.pools[view.pool].desired) {
            drift.extend(desired.spec().hardware.drift_from(found));
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
        replace.then_some(Stale::Drifted(drift))
    }

    /// Why a stale member must be replaced, in words (the words of an outdated member are
    /// remembered: a prediction words them at every step that replaces it).
    pub(super) fn stale_reason(&self, view: &View<'_>) -> Option<SmolStr> {
        let reason = match view.stale.as_ref()? {
            Stale::PoolRemoved => format_smolstr!(
                "pool `{}` is no longer in the spec",
                view.machine.ownership.pool
            ),
            Stale::Fenced => SmolStr::new_static("fenced: hard-stopped and out of service"),
            Stale::Drifted(drift) => format_smolstr!("drifted: {drift}"),
            Stale::Outdated => {
                let desired = self.pools[view.pool].desired.as_ref()?;
                let machine = view.machine;
                let built = machine
                    .built_from
                    .as_ref()
                    .and_then(|built| self.input.memo.outdated(built, desired.spec()));
                match built {
                    Some(words) => words,
                    None => match view.node.and_then(|n| n.kubelet_version) {
                        Some(kubelet) if kubelet != desired.spec().kubernetes => format_smolstr!(
                            "outdated: kubernetes {kubelet} → {}",
                            desired.spec().kubernetes
                        ),
                        _ => format_smolstr!(
                            "outdated: spec hash {} → {}",
                            machine.ownership.spec_hash,
                            desired.hash()
                        ),
                    },
                }
            }
        };
        Some(reason)
    }
}

/// What classifying one VM found (the parts of a `View` that depend on that VM alone).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Index of its pool among the desired pools.
    pub pool: usize,
    pub fenced: bool,
    pub retiring: bool,
    pub prepared: bool,
    /// Its spec hash is its pool's desired one.
    pub current: bool,
    pub stale: Option<Stale>,
    /// Kept from being replaced by its pool's `replace: forbid`.
    pub guarded: bool,
}

/// Why a member must be replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stale {
    /// Its pool is gone from the spec.
    PoolRemoved,
    /// Hard-stopped and tainted out of service.
    Fenced,
    /// Built from another spec (template, size, version).
    Outdated,
    /// Changed outside capstan, with `onDrift: replace`: the differences.
    Drifted(String),
}
