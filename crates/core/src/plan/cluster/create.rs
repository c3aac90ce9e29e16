//! New machines: how many each pool needs (the deficit, or one spare while its machines are
//! replaced), where they go (rule 15), and the kubeconfig delivery that follows a built or
//! changed control plane (rule 10).

use std::collections::BTreeMap;

use smol_str::SmolStr;

use crate::model::{NodeName, Ownership, Role};
use crate::plan::placement::Capacity;
use crate::plan::types::{Action, Blocked, Rule, Step, Target};
use crate::spec::Machine;

use super::{Ctx, DesiredPool, Gate, Outcome, Pool, Quiet, View};
use crate::plan::hardware_fit::HardwareNeeds;
use crate::plan::placement::{NoNodeFits, NodeRefused};
use crate::plan::types::PREDICTED;

/// Counts one more VM of a pool on `node` (borrowed: a prediction asks at every batch).
fn count_on<'n>(spread: &mut BTreeMap<&'n str, u32>, node: &'n str) {
    *spread.entry(node).or_default() += 1;
}

/// A pool's members, counted once per plan (the creates and the delivery ask per pool).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Tally {
    /// Its fresh machines that count toward its replicas (`View::in_pool`), and of those the
    /// Ready ones.
    pub fresh: usize,
    pub fresh_ready: usize,
    /// Members to be replaced (not retiring), and of those the ones carrying workloads and
    /// the fenced ones.
    pub stale: usize,
    pub stale_counted: usize,
    pub stale_fenced: usize,
    /// Members carrying workloads ([`View::is_counted`]), fresh or not.
    pub counted: usize,
    /// How many of its fresh machines carrying workloads are surplus: the first ones by name
    /// (those not carrying workloads are marked surplus first, `View::surplus`).
    pub surplus: usize,
}

impl<'a> Ctx<'a> {
    /// The nodes of `machine`'s placement a clone of it can go to (rule 15: its template is
    /// there or can be cloned there, its network settings can reach it, its bridges, storages,
    /// PCI mappings and resource pool exist); why none can, naming the field.
    fn placement_of(&self, capacity: &Capacity, machine: &Machine) -> Result<Vec<String>, String> {
        let placement = capacity
            .clone_targets(
                &machine.template,
                machine.storage.as_deref(),
                &machine.placement,
                self.spec().kubernetes.distribution,
            )
            .map_err(|why| why.to_string())?;
        if let Some(why) = self.cloud_init_missing(capacity, machine) {
            return Err(why);
        }
        let create_pools = self
            .input
            .policy
            .pool_creating_connections
            .contains(&self.spec().proxmox);
        crate::plan::hardware_fit::fitting(capacity.offer(), machine, &placement, create_pools)
    }

    /// Why a machine built from `machine` could not take its network settings, when its
    /// distribution takes them from Proxmox's cloud-init (kubeadm, K3s) and the cluster
    /// declares static addresses or the machine declares cards, but no copy of its template
    /// has a cloud-init drive (its clones would boot without them).
    fn cloud_init_missing(&self, capacity: &Capacity, machine: &Machine) -> Option<String> {
        let spec = self.spec();
        let capabilities = spec.kubernetes.distribution.capabilities();
        let wanted = spec.network.node_addresses.is_some() || !machine.networks.is_empty();
        if !capabilities.cloud_init_network
            || !wanted
            || !capacity.lacks_cloud_init_drive(&machine.template)
        {
            return None;
        }
        let what = if spec.network.node_addresses.is_some() {
            "its static address (network.nodeAddresses)"
        } else {
            "its network cards (machine.networks)"
        };
        Some(format!(
            "machine.template: template {} has no cloud-init drive, through which {} nodes get {what}: add one to the template (Hardware → Add → CloudInit Drive, or `qm set <vmid> --ide2 <storage>:cloudinit`) and make sure cloud-init is installed in it",
            machine.template, capabilities.tool
        ))
    }

    /// Marks each pool's fresh machines (`View::in_pool`) and, among them, the surplus
    /// ones: those beyond the replicas, taken unjoined first, then being removed, then not
    /// counted, then by name. Counts each pool's members ([`Tally`]), the quiet machines of a
    /// prediction included ([`Quiet`]).
    pub(super) fn mark_fresh(&mut self) {
        for index in 0..self.views.len() {
            let view = &self.views[index];
            let in_pool = view.fresh && !view.retiring && !self.is_stuck(view);
            let stale = view.stale.is_some() && !view.retiring;
            let (ready, counted, fenced, pool) =
                (view.is_ready(), view.is_counted(), view.fenced, view.pool);
            let census = &mut self.census;
            census.retiring += usize::from(view.retiring);
            census.unjoined += usize::from(view.node.is_none() && !view.retiring);
            census.not_ready += usize::from(view.node.is_some_and(|n| !n.ready) && !view.retiring);
            census.incoming_workers += usize::from(
                view.role() == Role::Worker && view.fresh && !counted && !view.retiring,
            );
            if view.role() == Role::ControlPlane {
                self.control_planes.push(index);
            }
            self.views[index].in_pool = in_pool;
            let pool = &mut self.pools[pool];
            pool.members.push(index);
            let tally = &mut pool.tally;
            tally.fresh += usize::from(in_pool);
            tally.fresh_ready += usize::from(in_pool && ready);
            tally.stale += usize::from(stale);
            tally.stale_counted += usize::from(stale && counted);
            tally.stale_fenced += usize::from(stale && fenced);
            tally.counted += usize::from(counted);
        }
        if let Some(quiet) = self.input.quiet {
            for (index, pool) in self.pools.iter_mut().enumerate() {
                let Some(sleeping) = quiet.pool(index).filter(|_| pool.desired.is_some()) else {
                    continue;
                };
                // Quiet machines are Ready and carry workloads (`quiet::is_quiet`).
                let (fresh, stale) = (sleeping.fresh.len(), sleeping.stale.len());
                let tally = &mut pool.tally;
                tally.fresh += fresh;
                tally.fresh_ready += fresh;
                tally.stale += stale;
                tally.stale_counted += stale;
                tally.counted += fresh + stale;
            }
        }
        let mut fresh = Vec::new();
        for pool in 0..self.pools.len() {
            let replicas = self.pools[pool].replicas as usize;
            let Some(surplus) = self.pools[pool].tally.fresh.checked_sub(replicas) else {
                continue;
            };
            // Those carrying workloads come last: `Tally::surplus` counts the ones taken
            // among them, by name (`leaving` finds the first).
            fresh.clear();
            fresh.extend(self.pools[pool].members.iter().copied().filter(|&i| {
                let v = &self.views[i];
                // The guard's machines are kept: a surplus is taken among the others.
                v.in_pool && !v.is_counted() && !v.guarded
            }));
            // `views` are in name order and the sort is stable: ties stay by name.
            fresh.sort_by_key(|&i| {
                let v = &self.views[i];
                (v.node.is_some(), !v.is_in_removal())
            });
            let marked = surplus.min(fresh.len());
            for &index in &fresh[..marked] {
                self.views[index].surplus = true;
            }
            self.pools[pool].tally.surplus = surplus - marked;
        }
    }

    /// Whether `view`, not carrying workloads, is one of its pool's surplus fresh machines
    /// (see [`Self::mark_fresh`]; those carrying workloads are found by `leaving`).
    pub(super) fn is_surplus(&self, view: &View<'_>) -> bool {
        view.surplus
    }

    pub(super) fn is_surplus_unjoined(&self, view: &View<'_>) -> bool {
        view.node.is_none() && self.is_surplus(view)
    }

    /// The first member of a pool to be replaced (not already retiring) by name, quiet or
    /// not.
    pub(super) fn first_stale(&self, pool: usize) -> Option<View<'a>> {
        let planned = self.pools[pool]
            .members
            .iter()
            .map(|&i| &self.views[i])
            .find(|v| v.stale.is_some() && !v.retiring);
        let quiet = self.input.quiet.and_then(|quiet| {
            let name = quiet.pool(pool)?.stale.first()?;
            quiet.view(name)
        });
        match (planned, quiet) {
            (Some(planned), Some(quiet)) if quiet.name < planned.name => Some(quiet),
            (Some(planned), _) => Some(planned.clone()),
            (None, quiet) => quiet,
        }
    }

    /// How many fresh machines a pool should have now: all replicas, or while stale members
    /// remain, enough that `rollout.maxSurge` spares replace them (a replacement is created
    /// before the old machine is removed, rule 1).
    pub(super) fn fresh_wanted(&self, pool: usize) -> usize {
        let replicas = self.pools[pool].replicas as usize;
        let tally = self.pools[pool].tally;
        if tally.stale == 0 {
            return replicas;
        }
        let counted = tally.stale_counted;
        (replicas + self.max_surge())
            .saturating_sub(counted)
            .min(replicas)
    }

    pub(super) fn max_surge(&self) -> usize {
        self.spec().rollout.max_surge as usize
    }

    /// How many VMs may still be created: the declared count plus `rollout.maxSurge`, less
    /// the VMs that exist (retiring ones included: they hold memory until destroyed). Fenced
    /// VMs are hard-stopped, and orphans kept because prune is off are not this cluster's
    /// machines: neither counts.
    pub(super) fn surge_budget(&self) -> usize {
        let declared: usize = self.pools.iter().map(|p| p.replicas as usize).sum();
        let counts = |v: &&View<'_>| !v.fenced && (self.input.policy.prune || !self.is_orphan(v));
        // Quiet machines are neither fenced nor orphans.
        let quiet = self.input.quiet.map_or(0, Quiet::len);
        let existing = self.views.iter().filter(counts).count() + quiet;
        (declared + self.max_surge()).saturating_sub(existing)
    }

    /// Whether the control plane pool is complete: every replica joined and Ready, nothing to
    /// replace.
    pub(super) fn control_plane_complete(&self) -> bool {
        let tally = self.pools[0].tally;
        tally.fresh_ready >= self.pools[0].replicas as usize
            && tally.fresh_ready == tally.fresh
            && tally.stale == 0
    }

    /// Creates machines: the deficit of each pool (all at once, workers alongside the control
    /// planes) and spares for the pools being replaced, pool after pool. All
    /// the VMs the cluster still needs must fit before any is cloned (rule 15), except the
    /// replacements of a worker pool whose PCI devices are all held: that pool is replaced
    /// old before new, and the pools are returned for [`Self::removals`].
    pub(super) fn creates(&self, out: &mut Outcome, capacity: &Capacity) -> DeviceBound {
        let repairing = |pool: &Pool<'_>| pool.tally.stale_fenced > 0;
        if self.input.predicting && self.surge_budget() == 0 && !self.pools.iter().any(repairing) {
            // Nothing may be created now, and a prediction reads only what runs now.
            return DeviceBound::new();
        }
        let demand = self.demand();
        if demand.iter().all(|(_, now, later)| now + later == 0) {
            return DeviceBound::new();
        }
        // The VMs created later must fit too (rule 15), but with none created now, checking
        // them could only add a refusal, which a prediction does not read.
        if self.input.predicting && demand.iter().all(|(_, now, _)| *now == 0) {
            return DeviceBound::new();
        }
        let placing = self.place(capacity, demand);
        if !placing.unclonable.is_empty() {
            let mut unclonable = placing.unclonable;
            unclonable.dedup();
            out.blocked.push(Blocked {
                rule: Rule::Capacity,
                message: format!(
                    "no Proxmox node in placement can receive a clone: {}; nothing is cloned until every pool can be placed",
                    unclonable.join("; ")
                ),
            });
            return placing.device_bound;
        }
        if !placing.refused.is_empty() {
            let mut refused = placing.refused;
            refused.dedup();
            out.blocked
                .push(no_room(&refused, placing.short_of_hardware));
            return placing.device_bound;
        }
        for step in self.creation_steps(capacity, placing.planned) {
            out.push(step, Gate::Open);
        }
        placing.device_bound
    }

    /// What each pool needs created: `(pool, now, later)`, the deficit at once, replacements
    /// in their turn, within `rollout.maxSurge` (a repair does not wait for the budget).
    fn demand(&self) -> Vec<(usize, usize, usize)> {
        let initialised = self.initialised();
        let control_plane_complete = initialised && self.control_plane_complete();
        let repairing = |pool: &Pool<'_>| pool.tally.stale_fenced > 0;
        let mut earlier_pools_stale = false;
        let mut demand: Vec<(usize, usize, usize)> = Vec::with_capacity(self.pools.len());
        for pool in 0..self.pools.len() {
            if self.pools[pool].desired.is_none() {
                continue;
            }
            let fresh = self.pools[pool].tally.fresh;
            let wanted = self.fresh_wanted(pool);
            let replicas = self.pools[pool].replicas as usize;
            let stale = self.pools[pool].tally.stale;
            let deficit = replicas.saturating_sub(fresh + stale);
            let total = wanted.saturating_sub(fresh).max(deficit);
            // A fenced machine is a repair, not a rollout: its replacement waits for nothing.
            let repairing = repairing(&self.pools[pool]);
            let allowed = if pool == 0 || repairing {
                true
            } else if !control_plane_complete {
                false
            } else {
                stale == 0 || !earlier_pools_stale
            };
            // Missing machines are cloned at once, workers with the control planes: they
            // prepare while the control plane is built. Replacements wait their turn.
            let now = if allowed { total } else { deficit };
            demand.push((pool, now, total.saturating_sub(now)));
            earlier_pools_stale |= stale > 0 || pool == 0 && self.pools[0].tally.stale > 0;
        }
        // rollout.maxSurge: what does not fit the budget now is created later (it still has
        // to fit in memory). A repair does not wait: the dead machine holds up every removal.
        let mut budget = self.surge_budget();
        for (_, now, later) in demand
            .iter_mut()
            .filter(|(pool, ..)| !repairing(&self.pools[*pool]))
        {
            let held = now.saturating_sub(budget);
            *now -= held;
            *later += held;
            budget -= *now;
        }
        demand
    }

    /// Chooses a Proxmox node for each VM of `demand`, reserving what each takes.
    fn place(&self, capacity: &Capacity, demand: Vec<(usize, usize, usize)>) -> Placing {
        let mut scratch = capacity.clone();
        let mut placing = Placing::default();
        for (pool, now, later) in demand {
            let Some(desired) = &self.pools[pool].desired else {
                continue;
            };
            if now + later == 0 {
                continue;
            }
            let placement = match self.placement_of(capacity, desired.machine) {
                Ok(placement) => placement,
                Err(why) => {
                    let name = self.pools[pool].name;
                    placing.unclonable.push(format!("pool {name}: {why}"));
                    continue;
                }
            };
            let needs = HardwareNeeds::of(desired.machine);
            let mut spread: BTreeMap<&str, u32> = BTreeMap::new();
            for &index in &self.pools[pool].members {
                count_on(&mut spread, &self.views[index].machine.proxmox_node);
            }
            let quiet = self.input.quiet.and_then(|quiet| quiet.pool(pool));
            for (node, count) in quiet.iter().flat_map(|quiet| &quiet.spread) {
                *spread.entry(node).or_default() += count;
            }
            let memory_mib = desired.machine.memory_mib;
            for index in 0..now + later {
                match scratch.choose(&placement, memory_mib, &spread, &needs) {
                    Ok(node) => {
                        scratch.reserve(node, memory_mib);
                        scratch.reserve_hardware(node, &needs);
                        count_on(&mut spread, node);
                        if index < now {
                            placing.planned.push((pool, SmolStr::new(node)));
                        }
                    }
                    Err(why) => match self.held_devices(pool, &why) {
                        Some(mapping) => {
                            placing.device_bound.insert(pool, mapping);
                        }
                        None => {
                            placing.short_of_hardware |= why.is_hardware();
                            placing.refused.push(format!(
                                "a {memory_mib} MiB {} of pool {} ({why})",
                                self.pools[pool].role, self.pools[pool].name
                            ));
                        }
                    },
                }
            }
        }
        placing
    }

    /// The PCI mapping whose devices are all held, when that is why no node takes a new VM of
    /// worker pool `pool` while some of its members are still to be replaced: those give
    /// their devices back as they leave, old before new.
    fn held_devices(&self, pool: usize, why: &NoNodeFits) -> Option<String> {
        let pool = &self.pools[pool];
        if pool.role != Role::Worker || pool.tally.stale == 0 {
            return None;
        }
        let NoNodeFits::Refused(refusals) = why else {
            return None;
        };
        let mut mappings = refusals.iter().map(|refused| match refused {
            NodeRefused::Device { mapping, .. } => Some(mapping),
            _ => None,
        });
        let first = mappings.next().flatten()?.clone();
        mappings.all(|m| m.is_some()).then_some(first)
    }

    /// The create steps of the VMs `planned` on their nodes, in name order per pool.
    fn creation_steps(&self, capacity: &Capacity, planned: Vec<(usize, SmolStr)>) -> Vec<Step> {
        let mut planned_per_pool: BTreeMap<usize, usize> = BTreeMap::new();
        for (pool, _) in &planned {
            *planned_per_pool.entry(*pool).or_default() += 1;
        }
        let observed = self.input.observed;
        let exists = |name: &NodeName| {
            observed.machines.contains_key(name)
                || observed.nodes.contains_key(name)
                || self.input.quiet.is_some_and(|quiet| quiet.contains(name))
        };
        let mut steps = Vec::new();
        // Per pool: its new names, and why its machines are replaced (asked once: the words
        // are the same for every replacement of a batch).
        let mut names: BTreeMap<usize, (std::vec::IntoIter<NodeName>, Option<SmolStr>)> =
            BTreeMap::new();
        let mut made: BTreeMap<usize, usize> = BTreeMap::new();
        for (pool, node) in planned {
            let Some(desired) = &self.pools[pool].desired else {
                continue;
            };
            let (pool_names, old) = names.entry(pool).or_insert_with(|| {
                let count = planned_per_pool.get(&pool).copied().unwrap_or(0);
                let names = self.input.memo.new_names(
                    self.name(),
                    self.pools[pool].name,
                    desired.hash(),
                    count,
                    exists,
                );
                let old = self
                    .first_stale(pool)
                    .and_then(|view| self.stale_reason(&view));
                (names.into_iter(), old)
            });
            let Some(name) = pool_names.next() else {
                continue;
            };
            let earlier = made.entry(pool).or_default();
            let ordinal = self.pools[pool].tally.fresh + *earlier + 1;
            *earlier += 1;
            let reason = self.creation_reason(pool, ordinal, old.as_deref());
            let memory_note = if capacity.is_known() {
                ""
            } else {
                "; Proxmox memory not observed"
            };
            let reason = format!("{reason}; on {node}{memory_note}");
            steps.push(self.create_step((pool, desired), name, &node, reason));
        }
        steps
    }

    /// Why the `ordinal`-th fresh machine of `pool` is created; `old` says why its members are
    /// replaced, when they are.
    fn creation_reason(&self, pool: usize, ordinal: usize, old: Option<&str>) -> String {
        let (pool_name, role) = (self.pools[pool].name, self.pools[pool].role);
        let tally = self.pools[pool].tally;
        let replicas = self.pools[pool].replicas;
        let initialised = self.initialised();
        match old {
            // A member already left for it: its PCI device was needed (old before new).
            Some(old)
                if tally.fresh + tally.stale < replicas as usize && self.needs_devices(pool) =>
            {
                format!(
                    "replacement for pool {pool_name} ({} to replace; {old}): old before new, it takes the PCI device the member that left gave back",
                    tally.stale
                )
            }
            Some(old) => format!(
                "replacement for pool {pool_name} ({} to replace; {old}): created before the old one leaves, at most {} VM(s) above the declared count (rollout.maxSurge)",
                tally.stale,
                self.max_surge()
            ),
            None if !initialised && role == Role::ControlPlane => {
                format!("bootstrap: control plane {ordinal} of {replicas}")
            }
            None if !initialised => format!(
                "bootstrap: {role} {ordinal} of {replicas} of pool {pool_name}, cloned with the control plane"
            ),
            None => format!("pool {pool_name}: {role} {ordinal} of {replicas}"),
        }
    }

    /// Whether `pool`'s machines take PCI devices.
    fn needs_devices(&self, pool: usize) -> bool {
        self.pools[pool]
            .desired
            .as_ref()
            .is_some_and(|desired| !desired.machine.pci.is_empty())
    }

    /// The step that clones a new machine `name` of `pool` on `node`.
    fn create_step(
        &self,
        (pool, desired): (usize, &DesiredPool<'_>),
        name: NodeName,
        node: &str,
        reason: String,
    ) -> Step {
        let (pool_name, role) = (self.pools[pool].name, self.pools[pool].role);
        Self::step(
            Action::CreateMachine {
                name: name.clone(),
                ownership: Ownership {
                    cluster: self.name().into(),
                    role,
                    pool: pool_name.into(),
                    spec_hash: desired.hash().clone(),
                },
                machine: Box::new(desired.spec().clone()),
                proxmox_node: node.into(),
                storage: desired.machine.storage.clone(),
                tags: desired.machine.tags.clone(),
                pool: desired.machine.pool.clone(),
            },
            Target {
                cluster: self.name().into(),
                machine: Some(name),
                vm_id: None,
                pool: Some(pool_name.into()),
                role: Some(role),
            },
            reason,
        )
    }

    /// Rule 10: deliver the admin kubeconfig when Flux's differs; the first delivery waits for
    /// the whole cluster to be built.
    /// Returns whether a re-delivery (Flux holding an older kubeconfig) was planned: machines
    /// wait for it, so after an upgrade or a renewal Flux has the new kubeconfig before any
    /// machine moves.
    pub(super) fn delivery(&self, out: &mut Outcome) -> bool {
        let Some(target) = self.input.memo.flux_target(self.name(), self.spec()) else {
            return false;
        };
        let Some(admin) = self
            .input
            .observed
            .control_plane
            .as_ref()
            .and_then(|cp| cp.admin_kubeconfig.as_ref())
        else {
            return false;
        };
        let reason = match &self.input.observed.flux {
            // Without a CNI from capstan, Flux installs it: it needs the kubeconfig as soon as
            // the API answers (the nodes are Ready only once the CNI runs).
            None if self.network().awaits_flux_cni() => format!(
                "first delivery: the API answers and cni is none; Flux gets its kubeconfig in {}/{} to install the CNI",
                target.namespace, target.secret_name
            ),
            None => {
                let built = (0..self.pools.len()).all(|pool| {
                    let tally = self.pools[pool].tally;
                    tally.fresh_ready >= self.pools[pool].replicas as usize && tally.stale == 0
                });
                if !built {
                    return false;
                }
                format!(
                    "first delivery: the cluster is built; Flux gets its kubeconfig in {}/{}",
                    target.namespace, target.secret_name
                )
            }
            Some(held) if &held.target != target => format!(
                "the Flux Secret moved from {}/{} to {}/{}",
                held.target.namespace,
                held.target.secret_name,
                target.namespace,
                target.secret_name
            ),
            Some(held) if &held.kubeconfig != admin => match admin.strip_prefix(PREDICTED) {
                Some(cause) => format!(
                    "the admin kubeconfig changes with {}",
                    cause.split(" (#").next().unwrap_or(cause)
                ),
                None => format!(
                    "Flux holds kubeconfig {}, the cluster's admin kubeconfig is {admin}",
                    held.kubeconfig
                ),
            },
            Some(_) => return false,
        };
        let step = Self::step(
            Action::DeliverKubeconfig {
                flux: target.clone(),
            },
            self.cluster_target(),
            reason,
        );
        out.push(step, Gate::Open);
        self.input.observed.flux.is_some()
    }
}

/// The worker pools replaced old before new, with the PCI mapping whose devices are all held:
/// a stale member leaves before its replacement is created.
pub(super) type DeviceBound = BTreeMap<usize, String>;

/// Where a plan's new VMs go, or why they cannot.
#[derive(Default)]
struct Placing {
    /// (pool, Proxmox node) of each VM created now.
    planned: Vec<(usize, SmolStr)>,
    /// Why VMs fit no node.
    refused: Vec<String>,
    short_of_hardware: bool,
    /// Pools no node of placement can receive a clone of.
    unclonable: Vec<String>,
    device_bound: DeviceBound,
}

/// The refusal of a plan whose new VMs fit no node of their placement (rule 15): `refused`
/// says why for each, `hardware` whether storage space or devices are short too.
fn no_room(refused: &[String], hardware: bool) -> Blocked {
    let (lacking, free) = if hardware {
        ("memory, storage space or devices", "them")
    } else {
        ("memory", "memory")
    };
    Blocked {
        rule: Rule::Capacity,
        message: format!(
            "no Proxmox node in placement has the {lacking} for {}: nothing is cloned until the VMs this cluster still needs fit; free {free} or add nodes to placement",
            refused.join("; ")
        ),
    }
}
