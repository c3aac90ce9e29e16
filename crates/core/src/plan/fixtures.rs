//! Builders for planner tests: clusters (`Cluster::test("prod").with_workers(..)`), fleets, and
//! worlds played forward to convergence with the planner's own expected effects. Built for
//! core's own tests, and for other crates' tests with the `fixtures` feature (the test kit,
//! crates/testkit, turns it on).

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::{Plan, Policy, expected_effect, plan};
use crate::model::{NodeName, Role, VmId};
use crate::observed::{MachineSpec, Observed, ObservedCluster, ProxmoxNode};
use crate::spec::{
    ApiVersion, Certificates, Cluster, ClusterKind, ClusterSpec, Delivery, Desired, Distribution,
    Endpoint, Fleet, FleetKind, FluxDelivery, HumanDuration, KubernetesSpec, Machine, Maintenance,
    MaintenanceWindow, Metadata, Network, Remediation, Rollout, StatusSettings, WorkerPool,
};

/// The time every test plans at: Wednesday 2026-04-29 12:00 UTC.
pub fn now() -> Timestamp {
    "2026-04-29T12:00:00Z".parse().expect("time")
}

/// `now` plus (or minus, when negative) some minutes.
pub fn minutes(delta: i64) -> Timestamp {
    now()
        .checked_add(jiff::SignedDuration::from_mins(delta))
        .expect("in range")
}

/// A machine on `template` with `cores` and `memory_mib`, 50 GiB, over pve1 and pve2.
pub fn machine(template: &str, cores: u32, memory_mib: u32) -> Machine {
    Machine {
        template: template.to_owned(),
        cores,
        memory_mib,
        disk_gib: 50,
        placement: vec!["pve1".to_owned(), "pve2".to_owned()],
        cpu: "x86-64-v2-AES".to_owned(),
        storage: None,
        sockets: None,
        disks: Vec::new(),
        networks: Vec::new(),
        pci: Vec::new(),
        tags: Vec::new(),
        pool: None,
    }
}

impl Cluster {
    /// One control plane and pool `general` of 3 workers, 1.36.2, delivered to Flux.
    pub fn test(name: &str) -> Cluster {
        Cluster {
            api_version: ApiVersion::V1alpha1,
            kind: ClusterKind::Cluster,
            metadata: Metadata {
                name: name.to_owned(),
            },
            spec: ClusterSpec {
                suspend: false,
                proxmox: "homelab".to_owned(),
                kubernetes: KubernetesSpec {
                    version: "1.36.2".parse().expect("version"),
                    distribution: Distribution::Kubeadm,
                    datastore: None,
                    registries: Default::default(),
                    authentication: None,
                },
                talos: None,
                endpoint: Endpoint {
                    host: format!("k8s-{name}.lab.example"),
                    address: "192.168.1.23".parse().expect("ip"),
                    port: 6443,
                },
                network: Network {
                    // Unset, as most files leave them: kubeadm's defaults.
                    cni: None,
                    kube_proxy: None,
                    pods: None,
                    services: None,
                    nodes: "192.168.1.0/24".parse().expect("net"),
                    reserved: Vec::new(),
                    node_addresses: None,
                    gateway: None,
                    nameservers: Vec::new(),
                    search_domain: None,
                },
                control_plane: crate::spec::ControlPlane {
                    replicas: 1,
                    replace: None,
                    machine: machine("debian13-k8s", 2, 6144),
                    schedulable: None,
                    labels: BTreeMap::new(),
                    taints: Vec::new(),
                    patches: Vec::new(),
                },
                workers: vec![WorkerPool {
                    pool: "general".to_owned(),
                    replicas: 3,
                    replace: None,
                    machine: machine("debian13-k8s", 4, 8192),
                    labels: BTreeMap::new(),
                    taints: Vec::new(),
                    patches: Vec::new(),
                }],
                rollout: Rollout::default(),
                maintenance: Maintenance::default(),
                certificates: Certificates::default(),
                remediation: Remediation::default(),
                delivery: Delivery {
                    flux: Some(FluxDelivery {
                        cluster: "management".to_owned(),
                        namespace: "flux-system".to_owned(),
                        secret_name: None,
                    }),
                },
                patches: Vec::new(),
            },
        }
    }

    /// Sets the number of control planes.
    pub fn with_control_planes(mut self, replicas: u32) -> Self {
        self.spec.control_plane.replicas = replicas;
        self
    }

    /// Sets (or adds) a worker pool's size.
    pub fn with_workers(mut self, pool: &str, replicas: u32) -> Self {
        match self.spec.workers.iter_mut().find(|p| p.pool == pool) {
            Some(existing) => existing.replicas = replicas,
            None => self.spec.workers.push(WorkerPool {
                pool: pool.to_owned(),
                replicas,
                replace: None,
                machine: machine("debian13-k8s", 4, 8192),
                labels: BTreeMap::new(),
                taints: Vec::new(),
                patches: Vec::new(),
            }),
        }
        self
    }

    /// Gives each machine of a pool one device of PCI mapping `mapping`, placed on
    /// `placement`.
    pub fn with_pci(mut self, pool: &str, mapping: &str, placement: &[&str]) -> Self {
        let machine = self.machine_mut(pool);
        machine.pci = vec![crate::spec::hardware::PciDevice {
            mapping: mapping.to_owned(),
        }];
        machine.placement = placement.iter().map(|node| (*node).to_owned()).collect();
        self
    }

    /// Removes a worker pool.
    pub fn without_pool(mut self, pool: &str) -> Self {
        self.spec.workers.retain(|p| p.pool != pool);
        self
    }

    /// Sets the template of a pool (`cp` for the control plane).
    pub fn with_template(mut self, pool: &str, template: &str) -> Self {
        self.machine_mut(pool).template = template.to_owned();
        self
    }

    fn machine_mut(&mut self, pool: &str) -> &mut Machine {
        if pool == "cp" {
            return &mut self.spec.control_plane.machine;
        }
        &mut self
            .spec
            .workers
            .iter_mut()
            .find(|p| p.pool == pool)
            .expect("pool exists")
            .machine
    }

    /// Sets the Kubernetes version (`1.36.3`).
    pub fn with_version(mut self, version: &str) -> Self {
        self.spec.kubernetes.version = version.parse().expect("version");
        self
    }

    /// Sets `rollout.minWorkers`.
    pub fn with_min_workers(mut self, minimum: u32) -> Self {
        self.spec.rollout.min_workers = minimum;
        self
    }

    /// Sets `rollout.maxSurge`.
    pub fn with_max_surge(mut self, surge: u32) -> Self {
        self.spec.rollout.max_surge = surge;
        self
    }

    /// Saturdays 01:00 UTC for four hours.
    pub fn with_window(mut self) -> Self {
        self.spec.rollout.maintenance_window = Some(MaintenanceWindow {
            schedule: "0 0 1 * * Sat".parse().expect("cron"),
            duration: HumanDuration::minutes(240),
        });
        self
    }

    /// A deny window: `schedule` for `hours`, read in `time_zone`.
    pub fn with_deny(mut self, schedule: &str, hours: u64, time_zone: &str) -> Self {
        self.spec.maintenance.time_zone = time_zone.parse().expect("zone");
        self.spec.maintenance.deny.push(MaintenanceWindow {
            schedule: schedule.parse().expect("cron"),
            duration: HumanDuration::minutes(hours * 60),
        });
        self
    }

    /// A Talos cluster at `release` (`v1.13.9`).
    pub fn with_talos(mut self, release: &str) -> Self {
        self.spec.kubernetes.distribution = Distribution::Talos;
        self.spec.talos = Some(crate::spec::TalosSpec {
            version: release.parse().expect("a Talos release"),
            installer_image: None,
            extensions: Vec::new(),
        });
        self
    }

    /// Fences unhealthy machines (`remediation.fence`).
    pub fn with_fencing(mut self) -> Self {
        self.spec.remediation.fence = true;
        self
    }

    /// Sets `replace` on a pool (`cp` for the control plane), or on `spec.rollout` (`None`).
    pub fn with_replace(mut self, pool: Option<&str>, policy: crate::spec::ReplacePolicy) -> Self {
        match pool {
            None => self.spec.rollout.replace = policy,
            Some("cp") => self.spec.control_plane.replace = Some(policy),
            Some(name) => {
                self.spec
                    .workers
                    .iter_mut()
                    .find(|p| p.pool == name)
                    .expect("pool exists")
                    .replace = Some(policy);
            }
        }
        self
    }

    /// Replaces drifted machines (`rollout.onDrift: Replace`).
    pub fn with_drift_replace(mut self) -> Self {
        self.spec.rollout.on_drift = crate::spec::DriftPolicy::Replace;
        self
    }

    /// The spec hash of a pool's machines at the spec's version.
    pub fn hash(&self, pool: &str) -> smol_str::SmolStr {
        self.machine_spec(pool).spec_hash()
    }

    /// What a pool's machines are made from (`cp` for the control plane).
    pub fn machine_spec(&self, pool: &str) -> MachineSpec {
        let (machine, role, level) = if pool == "cp" {
            (&self.spec.control_plane.machine, Role::ControlPlane, None)
        } else {
            let pool = self
                .spec
                .workers
                .iter()
                .find(|p| p.pool == pool)
                .expect("pool exists");
            (&pool.machine, Role::Worker, Some(pool.pool.as_str()))
        };
        MachineSpec::for_cluster(
            &self.spec,
            level,
            machine,
            self.spec.kubernetes.version,
            role,
        )
    }

    /// The `ordinal`-th machine name of a pool at the current spec.
    pub fn name_of(&self, pool: &str, ordinal: u32) -> NodeName {
        super::placement::machine_name(&self.metadata.name, pool, &self.hash(pool), ordinal)
    }
}

/// A fleet of `clusters`, approving 1.36.
pub fn desired(clusters: Vec<Cluster>) -> Desired {
    Desired {
        fleet: Fleet {
            api_version: ApiVersion::V1alpha1,
            kind: FleetKind::Fleet,
            clusters_dir: "clusters".into(),
            proxmox: BTreeMap::new(),
            management_clusters: BTreeMap::new(),
            datastores: BTreeMap::new(),
            approved_minors: vec!["1.36".parse().expect("minor")],
            prune: false,
            status: StatusSettings::default(),
            poll_interval: HumanDuration::minutes(1),
            notifications: crate::spec::Notifications::default(),
        },
        clusters: clusters
            .into_iter()
            .map(|c| (c.metadata.name.clone(), c))
            .collect(),
        incomplete: false,
        invalid: BTreeMap::new(),
    }
}

/// The plan of `desired` against `observed` at `now`, under the fleet's policy.
pub fn plan_at(desired: &Desired, observed: &Observed, now: Timestamp) -> Plan {
    plan(desired, observed, &Policy::of(desired), now)
}

/// Plays plans forward from `observed` (running every cluster's `steps` with their expected
/// effects) until no cluster has a step, and numbers new VMs from 100. Panics if it does not
/// settle.
pub fn play(desired: &Desired, mut observed: Observed) -> Observed {
    for _ in 0..500 {
        let plan = plan_at(desired, &observed, now());
        let steps: Vec<_> = plan.clusters.iter().flat_map(|c| c.steps.clone()).collect();
        if steps.is_empty() {
            renumber(&mut observed);
            return observed;
        }
        for step in &steps {
            expected_effect(&mut observed, step, now());
        }
    }
    panic!("the plan does not settle");
}

fn renumber(observed: &mut Observed) {
    let mut next = 100
        + observed
            .clusters
            .values()
            .flat_map(|c| c.machines.values())
            .map(|m| m.vm_id.0)
            .max()
            .unwrap_or(0);
    for cluster in observed.clusters.values_mut() {
        for machine in cluster.machines.values_mut() {
            if machine.vm_id == VmId(0) {
                machine.vm_id = VmId(next);
                next += 1;
            }
        }
    }
}

/// The world once `desired` is built from nothing, with real-looking fingerprints and
/// certificates.
pub fn built(desired: &Desired) -> Observed {
    let mut observed = play(desired, Observed::nothing());
    let long_ago: Timestamp = "2026-01-05T09:00:00Z".parse().expect("time");
    for cluster in observed.clusters.values_mut() {
        for machine in cluster.machines.values_mut() {
            machine.created = long_ago;
        }
        for node in cluster.nodes.values_mut() {
            node.ready_since = long_ago;
        }
        if let Some(cp) = &mut cluster.control_plane {
            cp.admin_kubeconfig = Some("sha256:00000000000000aa".to_owned());
            cp.certificates_expire = Some("2027-04-01T00:00:00Z".parse().expect("time"));
        }
        if let Some(flux) = &mut cluster.flux {
            flux.kubeconfig = "sha256:00000000000000aa".to_owned();
        }
    }
    observed
}

/// A cluster of the observed world, to change in place.
pub fn cluster_mut<'a>(observed: &'a mut Observed, name: &str) -> &'a mut ObservedCluster {
    observed.clusters.get_mut(name).expect("cluster observed")
}

/// Proxmox nodes `pve1`, `pve2` with `free_mib` each.
pub fn proxmox(free_mib: &[(&str, u64)]) -> Option<BTreeMap<String, ProxmoxNode>> {
    Some(
        free_mib
            .iter()
            .map(|(name, free)| {
                (
                    (*name).to_owned(),
                    ProxmoxNode {
                        online: true,
                        memory_total_mib: 131_072,
                        memory_used_mib: 131_072 - free,
                        vm_count: 0,
                        bridges: None,
                    },
                )
            })
            .collect(),
    )
}

/// `(action, machine)` of each step: the shape of a plan, for whole-sequence assertions.
pub fn shape(steps: &[super::Step]) -> Vec<(&'static str, String)> {
    steps
        .iter()
        .map(|s| {
            (
                s.name(),
                s.target
                    .machine
                    .as_ref()
                    .map(|m| m.to_string())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// Machine names of a pool in the observed world, sorted.
pub fn machines_of(observed: &Observed, cluster: &str, pool: &str) -> Vec<NodeName> {
    observed.clusters[cluster]
        .machines
        .iter()
        .filter(|(_, m)| m.ownership.pool == pool)
        .map(|(n, _)| n.clone())
        .collect()
}
