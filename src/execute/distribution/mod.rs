//! Distributions behind one interface: how a cluster's nodes are built, joined and taken
//! apart, where its admin credentials come from, and how its version is observed. kubeadm
//! ([`kubeadm`]), K3s ([`k3s`]) and Talos ([`talos`]) implement [`Distribution`]; [`of`] chooses one per cluster,
//! from its spec. No code outside this module (and the node commands of `providers::kubeadm`
//! and `providers::k3s`) asks which distribution a cluster runs: the executor and the observer
//! call the interface, the planner reads [`capstan_core::spec::Capabilities`].
//!
//! # Guarantees
//! Each step method is idempotent, as the executor's steps are (see [`crate::execute`]): it
//! may run again after a crash or a cancellation, and every change it makes is fenced.
//!
//! # Adding a distribution
//! A variant of `spec::Distribution` with its `Capabilities` (core), a module here
//! implementing [`Distribution`] and an arm of [`Chosen`] and [`of`]; its node commands in
//! `providers/<name>/`.

use std::future::Future;

use crate::connect::Providers;
use crate::execute::{ExecuteError, Executor, StepContext};
use crate::model::{NodeName, Role};
use crate::plan::MachineRef;
use crate::providers::kubeadm::NodeStep;
use crate::providers::node_exec::Command;
use crate::providers::proxmox::VmRef;
use crate::scheduling::NodeScheduling;
use crate::spec::{self, ClusterSpec, Endpoint, KubeVersion};

pub mod k3s;
pub mod kubeadm;
pub mod talos;

/// What a distribution does, step by step, and what it tells the observer.
///
/// # Errors
/// The step methods fail with [`ExecuteError`], naming the operation.
pub trait Distribution: Sync {
    /// Checks made before a machine of the cluster is cloned (K3s: its datastore answers;
    /// by default none).
    fn preflight<Pr: Providers>(
        &self,
        _: &Executor<Pr>,
        _: StepContext<'_>,
    ) -> impl Future<Output = Result<(), ExecuteError>> + Send {
        async { Ok(()) }
    }

    /// Gives a new machine, cloned and configured but not yet started, what it must hold at
    /// its first boot (Talos: its machine config on a NoCloud ISO, with its static address, its
    /// cards' links, its data volumes and the taints its Node registers with); says what, when
    /// anything. kubeadm and K3s get their address and cards through Proxmox's cloud-init,
    /// set with the VM's config (by default nothing is delivered).
    fn deliver_config<Pr: Providers>(
        &self,
        _: &Executor<Pr>,
        _: StepContext<'_>,
        _: &NewMachine<'_>,
    ) -> impl Future<Output = Result<Option<String>, ExecuteError>> + Send {
        async { Ok(None) }
    }

    /// Prepares a new machine for `version` (kubeadm installs CRI-O and Kubernetes; a K3s
    /// template carries everything); says what the machine now holds.
    fn prepare<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        version: KubeVersion,
    ) -> impl Future<Output = Result<String, ExecuteError>> + Send;

    /// Starts the cluster's first control plane on `machine`, its Node registering with what
    /// the distribution's configuration can give of `scheduling` (the rest through the API,
    /// [`Executor::settle_node`]), admits (and pins) the admin kubeconfig it writes and
    /// records the bootstrap; says what started.
    fn init<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        endpoint: &Endpoint,
        version: KubeVersion,
        scheduling: &NodeScheduling,
    ) -> impl Future<Output = Result<String, ExecuteError>> + Send;

    /// Joins `machine` to the cluster as `role`, its Node labelled and tainted as for
    /// [`Distribution::init`]; says how.
    fn join<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        role: Role,
        scheduling: &NodeScheduling,
    ) -> impl Future<Output = Result<String, ExecuteError>> + Send;

    /// What a member leaving the cluster takes with it before its Node is deleted (kubeadm:
    /// a control plane's etcd member; K3s servers share a datastore: nothing).
    fn leave<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        node: &NodeName,
        role: Role,
    ) -> impl Future<Output = Result<(), ExecuteError>> + Send;

    /// Undoes the node on `machine` before its VM shuts down.
    fn reset<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
    ) -> impl Future<Output = Result<(), ExecuteError>> + Send;

    /// Moves the control plane on `machine` to `to` in place; says what ran. A distribution
    /// whose `Capabilities::upgrades_in_place` is false refuses (the planner never asks it).
    fn upgrade_in_place<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        to: KubeVersion,
    ) -> impl Future<Output = Result<String, ExecuteError>> + Send;

    /// The commands that renew one control plane's certificates.
    fn certificate_renewal(&self) -> Vec<NodeStep>;

    /// What renewing the certificates of `count` control planes did, in a few words.
    fn renewed(&self, count: usize) -> String;

    /// Where the admin kubeconfig comes from.
    fn admin_kubeconfig_source(&self) -> AdminSource;

    /// Where the control plane's version is observed.
    fn version_source(&self) -> VersionSource;

    /// Why the API of cluster `name` does not answer, when this distribution can tell
    /// (K3s: its datastore is down), with the server's own words and no secret.
    fn unreachable_because<Pr: Providers>(
        &self,
        providers: &Pr,
        name: &str,
        spec: &ClusterSpec,
    ) -> impl Future<Output = Option<String>> + Send;
}

/// A machine just cloned and configured, before its first start.
#[derive(Debug, Clone, Copy)]
pub struct NewMachine<'a> {
    /// Its VM.
    pub vm: &'a VmRef,
    /// Its name (the hostname and Node name).
    pub name: &'a NodeName,
    /// Control plane or worker.
    pub role: Role,
    /// What its Node carries.
    pub scheduling: &'a NodeScheduling,
    /// Its static address, when the cluster declares `network.nodeAddresses` (tagged on the VM
    /// already).
    pub address: Option<&'a capstan_core::talos::StaticAddress>,
    /// Its sockets, data disks, cards and PCI devices, as the file declares them.
    pub hardware: &'a capstan_core::spec::hardware::MachineHardware,
}

/// Where a cluster's admin kubeconfig comes from.
#[derive(Debug, Clone)]
pub enum AdminSource {
    /// A control plane prints it (through its guest agent) with this command.
    Node(Command),
    /// It is computed from the cluster's secrets bundle (Talos), once the cluster is
    /// bootstrapped.
    Bundle,
}

/// Where a control plane's version is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionSource {
    /// kubeadm's `ClusterConfiguration` in `kube-system/kubeadm-config`, with the endpoint.
    ClusterConfiguration,
    /// The oldest release the control planes' kubelets report (the cluster's version while an
    /// upgrade by replacement is under way).
    ServerKubelets,
}

/// The distribution of one cluster, chosen by [`of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chosen {
    /// kubeadm.
    Kubeadm(kubeadm::Kubeadm),
    /// K3s.
    K3s(k3s::K3s),
    /// Talos Linux.
    Talos(talos::Talos),
}

/// The distribution `spec` asks for; a removed cluster (no spec) is taken apart the default
/// (kubeadm) way, whose failures are tolerated there.
pub fn of(spec: Option<&ClusterSpec>) -> Chosen {
    match spec.map(|s| s.kubernetes.distribution).unwrap_or_default() {
        spec::Distribution::Kubeadm => Chosen::Kubeadm(kubeadm::Kubeadm),
        spec::Distribution::K3s => Chosen::K3s(k3s::K3s),
        spec::Distribution::Talos => Chosen::Talos(talos::Talos),
    }
}

/// Calls `$call` on the chosen distribution.
macro_rules! each {
    ($self:expr, $d:ident => $call:expr) => {
        match $self {
            Chosen::Kubeadm($d) => $call,
            Chosen::K3s($d) => $call,
            Chosen::Talos($d) => $call,
        }
    };
}

impl Distribution for Chosen {
    async fn preflight<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
    ) -> Result<(), ExecuteError> {
        each!(self, d => d.preflight(ex, ctx).await)
    }

    async fn deliver_config<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &NewMachine<'_>,
    ) -> Result<Option<String>, ExecuteError> {
        each!(self, d => d.deliver_config(ex, ctx, machine).await)
    }

    async fn prepare<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        version: KubeVersion,
    ) -> Result<String, ExecuteError> {
        each!(self, d => d.prepare(ex, ctx, machine, version).await)
    }

    async fn init<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        endpoint: &Endpoint,
        version: KubeVersion,
        scheduling: &NodeScheduling,
    ) -> Result<String, ExecuteError> {
        each!(self, d => d.init(ex, ctx, machine, endpoint, version, scheduling).await)
    }

    async fn join<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        role: Role,
        scheduling: &NodeScheduling,
    ) -> Result<String, ExecuteError> {
        each!(self, d => d.join(ex, ctx, machine, role, scheduling).await)
    }

    async fn leave<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        node: &NodeName,
        role: Role,
    ) -> Result<(), ExecuteError> {
        each!(self, d => d.leave(ex, ctx, node, role).await)
    }

    async fn reset<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
    ) -> Result<(), ExecuteError> {
        each!(self, d => d.reset(ex, ctx, machine).await)
    }

    async fn upgrade_in_place<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        to: KubeVersion,
    ) -> Result<String, ExecuteError> {
        each!(self, d => d.upgrade_in_place(ex, ctx, machine, to).await)
    }

    fn certificate_renewal(&self) -> Vec<NodeStep> {
        each!(self, d => d.certificate_renewal())
    }

    fn renewed(&self, count: usize) -> String {
        each!(self, d => d.renewed(count))
    }

    fn admin_kubeconfig_source(&self) -> AdminSource {
        each!(self, d => d.admin_kubeconfig_source())
    }

    fn version_source(&self) -> VersionSource {
        each!(self, d => d.version_source())
    }

    async fn unreachable_because<Pr: Providers>(
        &self,
        providers: &Pr,
        name: &str,
        spec: &ClusterSpec,
    ) -> Option<String> {
        each!(self, d => d.unreachable_because(providers, name, spec).await)
    }
}
