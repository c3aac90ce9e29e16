//! K3s: the air-gapped install a template carries (nothing to prepare), servers installed
//! with the cluster token and the datastore DSN, agents with the token, no etcd member to
//! remove (servers share one datastore), the uninstall scripts, `k3s certificate rotate`,
//! upgrades by replacement only; the admin credentials are `k3s.yaml` (whose server is the
//! node's loopback), and the version is what the servers' kubelets report.
//!
//! # Guarantees
//! - The token and the datastore user's password are generated once and kept in the
//!   management cluster ([`k3s_records`]), whose record names the database capstan provisions
//!   (for the cluster's deletion); the datastore is provisioned (idempotently)
//!   before every server install, so a server always starts with a DSN that works.
//! - A datastore that refuses the admin stops the cluster's first clone with the server's
//!   own error text (no password in it).

use crate::connect::Providers;
use crate::execute::{
    ExecuteError, Executor, StepContext, fenced, kubeadm_failed, node_target, registries,
    require_spec, run_steps,
};
use crate::model::{NodeName, Role};
use crate::plan::{ActionKind, MachineRef};
use crate::providers::k3s::{self as commands, ServerJoin};
use crate::providers::kubeadm::NodeStep;
use crate::records::k3s::{self as k3s_records, K3sSecrets, ProvisionedDatabase};
use crate::scheduling::{NodeScheduling, Registration};
use crate::spec::{ClusterSpec, Endpoint, KubeVersion};

use super::{AdminSource, Distribution, VersionSource};
use datastore::Datastore;

mod datastore;

/// The template `machine` was cloned from: its pool's, as the spec names it (named when the
/// template turns out to carry no K3s).
fn template_of<'a>(ctx: StepContext<'_>, spec: &'a ClusterSpec, machine: &MachineRef) -> &'a str {
    let pool = ctx
        .observed
        .machines
        .get(&machine.name)
        .map(|observed| observed.ownership.pool.as_str());
    spec.workers
        .iter()
        .find(|workers| Some(workers.pool.as_str()) == pool)
        .map_or(&spec.control_plane.machine.template, |workers| {
            &workers.machine.template
        })
}

/// K3s servers and agents, on the embedded SQLite or an external datastore (kine).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct K3s;

impl Distribution for K3s {
    /// Nothing: the template boots as it is and the node is configured once it answers.
    /// Before a VM is cloned: the provisioned datastore must accept the admin, a DSN given
    /// whole its own user.
    async fn preflight<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
    ) -> Result<(), ExecuteError> {
        let Some(spec) = ctx.spec else {
            return Ok(());
        };
        let action = ActionKind::CreateMachine;
        Datastore::of(ex.providers(), ctx.cluster, spec, action)?
            .preflight(ctx.cluster)
            .await
    }

    /// Nothing to run: a K3s template carries everything (the air-gapped binary).
    /// A K3s template carries K3s: preparing is its hardware's part alone (its static address
    /// checked, its data disks mounted).
    async fn prepare<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        version: KubeVersion,
    ) -> Result<String, ExecuteError> {
        let settled = ex.settle_hardware(ctx, machine).await?;
        let settled = if settled.is_empty() {
            String::new()
        } else {
            format!(", {settled}")
        };
        Ok(format!("K3s {version} is in its template{settled}"))
    }

    /// The first K3s server: kube-vip and the install, then the bootstrap record.
    async fn init<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        endpoint: &Endpoint,
        version: KubeVersion,
        scheduling: &NodeScheduling,
    ) -> Result<String, ExecuteError> {
        let action = ActionKind::InitControlPlane;
        let mut spec = require_spec(ctx, action)?.clone();
        spec.endpoint = endpoint.clone();
        spec.kubernetes.version = version;
        let target = node_target(machine)?;
        let address = ex.address(ctx, &target).await?;
        let join = server_join(ex, ctx, &spec, action).await?;
        let network = ctx.network().ok_or(ExecuteError::NoSpec { action })?;
        let nodes = ex.nodes(ctx)?;
        let registration = registration(&spec, scheduling);
        let steps =
            commands::install_server(&spec, &network, &join, &target.name, address, &registration);
        let steps = commands::with_patches(steps, &spec, None, target.name.as_str())
            .and_then(|steps| {
                commands::authentication::with_authentication(steps, &spec, target.name.as_str())
            })
            .map_err(kubeadm_failed(action.name()))?;
        let steps =
            commands::registries::before(steps, &registries(ex.providers(), ctx, &spec, action)?);
        commands::install(
            &nodes,
            action.name(),
            &target,
            template_of(ctx, &spec, machine),
            &steps,
        )
        .await
        .map_err(kubeadm_failed(action.name()))?;
        let read = nodes
            .checked("read k3s.yaml", &target, &commands::read_kubeconfig())
            .await
            .map_err(kubeadm_failed(action.name()))?
            .stdout;
        crate::redact::remember_kubeconfig(&read);
        let kubeconfig = ex.admit(ctx, &spec, &target, &read).await?;
        ex.mark_bootstrapped(ctx, &kubeconfig).await?;
        let labelled = ex
            .settle_node(ctx, &kubeconfig, &target.name, scheduling)
            .await;
        Ok(format!(
            "K3s server {} started (endpoint {}:{}, {}){labelled}",
            target.name,
            endpoint.host,
            endpoint.port,
            datastore::words(&spec)
        ))
    }

    /// A later server (same install as the first: they share the datastore) or an agent.
    async fn join<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        role: Role,
        scheduling: &NodeScheduling,
    ) -> Result<String, ExecuteError> {
        let action = ActionKind::JoinNode;
        let mut spec = require_spec(ctx, action)?.clone();
        spec.kubernetes.version = join_version(ctx, &spec);
        let spec = &spec;
        let target = node_target(machine)?;
        let address = ex.address(ctx, &target).await?;
        let nodes = ex.nodes(ctx)?;
        let registration = registration(spec, scheduling);
        let steps = match role {
            Role::ControlPlane => {
                let join = server_join(ex, ctx, spec, action).await?;
                let network = ctx.network().ok_or(ExecuteError::NoSpec { action })?;
                commands::install_server(
                    spec,
                    &network,
                    &join,
                    &target.name,
                    address,
                    &registration,
                )
            }
            Role::Worker => {
                let token = secrets(ex, ctx, spec, action).await?.token;
                commands::install_agent(spec, &token, &target.name, address, &registration)
            }
        };
        let node = target.name.as_str();
        let steps = commands::with_patches(steps, spec, scheduling.worker_pool(), node)
            .and_then(|steps| match role {
                Role::ControlPlane => {
                    commands::authentication::with_authentication(steps, spec, node)
                }
                Role::Worker => Ok(steps),
            })
            .map_err(kubeadm_failed(action.name()))?;
        let steps =
            commands::registries::before(steps, &registries(ex.providers(), ctx, spec, action)?);
        if role == Role::ControlPlane {
            let running = ex.join_through(ctx, &target.name)?;
            commands::same_critical_values(&nodes, &running, spec, target.name.as_str())
                .await
                .map_err(kubeadm_failed(action.name()))?;
        }
        commands::install(
            &nodes,
            action.name(),
            &target,
            template_of(ctx, spec, machine),
            &steps,
        )
        .await
        .map_err(kubeadm_failed(action.name()))?;
        let what = match role {
            Role::ControlPlane => "server",
            Role::Worker => "agent",
        };
        let labelled = match ctx.access.kubeconfig.as_ref() {
            Some(kubeconfig) => {
                ex.settle_node(ctx, kubeconfig, &target.name, scheduling)
                    .await
            }
            None => "",
        };
        Ok(format!(
            "{} joined as a K3s {what} (v{}) through {}:{}{labelled}",
            target.name, spec.kubernetes.version, spec.endpoint.host, spec.endpoint.port
        ))
    }

    /// K3s servers share a datastore: there is no etcd member to remove.
    async fn leave<Pr: Providers>(
        &self,
        _: &Executor<Pr>,
        _: StepContext<'_>,
        _: &NodeName,
        _: Role,
    ) -> Result<(), ExecuteError> {
        Ok(())
    }

    /// The uninstall script of a K3s server or agent.
    async fn reset<Pr: Providers>(
        &self,
        ex: &Executor<Pr>,
        ctx: StepContext<'_>,
        machine: &MachineRef,
    ) -> Result<(), ExecuteError> {
        let target = node_target(machine)?;
        let server = role_of(ctx, &machine.name) == Some(Role::ControlPlane);
        let steps = commands::uninstall(server);
        run_steps(&ex.nodes(ctx)?, ActionKind::ResetNode, &target, &steps).await
    }

    /// Refused: K3s upgrades by replacing its machines (`Capabilities::upgrades_in_place`).
    async fn upgrade_in_place<Pr: Providers>(
        &self,
        _: &Executor<Pr>,
        _: StepContext<'_>,
        _: &MachineRef,
        _: KubeVersion,
    ) -> Result<String, ExecuteError> {
        Err(ExecuteError::NotInPlace {
            action: ActionKind::UpgradeControlPlane,
            tool: crate::spec::Distribution::K3s.capabilities().tool,
        })
    }

    /// `k3s certificate rotate` on each server, one after the other.
    fn certificate_renewal(&self) -> Vec<NodeStep> {
        commands::rotate_certificates()
    }

    fn renewed(&self, count: usize) -> String {
        format!("K3s certificates rotated on {count} server(s)")
    }

    fn admin_kubeconfig_source(&self) -> AdminSource {
        AdminSource::Node(commands::read_kubeconfig())
    }

    /// K3s keeps no kubeadm-config: its servers' kubelets report the release.
    fn version_source(&self) -> VersionSource {
        VersionSource::ServerKubelets
    }

    /// A K3s cluster whose API does not answer may have lost its datastore.
    async fn unreachable_because<Pr: Providers>(
        &self,
        providers: &Pr,
        name: &str,
        spec: &ClusterSpec,
    ) -> Option<String> {
        datastore::down(providers, name, spec).await
    }
}

fn role_of(ctx: StepContext<'_>, name: &NodeName) -> Option<Role> {
    ctx.observed
        .machines
        .get(name)
        .map(|machine| machine.ownership.role)
}

/// The token, and the DSN of the cluster's datastore (provisioned here, or given whole).
async fn server_join<Pr: Providers>(
    ex: &Executor<Pr>,
    ctx: StepContext<'_>,
    spec: &ClusterSpec,
    action: ActionKind,
) -> Result<ServerJoin, ExecuteError> {
    let secrets = secrets(ex, ctx, spec, action).await?;
    let datastore_endpoint = Datastore::of(ex.providers(), ctx.cluster, spec, action)?
        .server_dsn(ctx, &secrets.datastore_password, action)
        .await?;
    Ok(ServerJoin {
        token: secrets.token,
        datastore_endpoint,
    })
}

async fn secrets<Pr: Providers>(
    ex: &Executor<Pr>,
    ctx: StepContext<'_>,
    spec: &ClusterSpec,
    action: ActionKind,
) -> Result<K3sSecrets, ExecuteError> {
    let preferred = spec.delivery.flux.as_ref().map(|f| f.cluster.as_str());
    let management =
        ex.providers()
            .management(preferred)
            .ok_or_else(|| ExecuteError::NoManagement {
                name: preferred.unwrap_or("(none in capstan.yaml)").to_owned(),
            })?;
    // May generate and store the cluster's token.
    fenced(ctx, "reading or creating the cluster's K3s secrets")?;
    let database = match spec.kubernetes.datastore.as_ref().and_then(|d| d.choice()) {
        Some(crate::spec::DatastoreChoice::Provisioned { server, database }) => {
            Some(ProvisionedDatabase {
                server: server.to_owned(),
                database: database.to_owned(),
            })
        }
        _ => None,
    };
    // A record an earlier capstan made is adopted only for a cluster whose API was seen: a
    // new cluster's first server (its VMs just made) must not take a deleted one's token.
    let live = ctx.observed.control_plane.is_some();
    k3s_records::k3s_secrets(management, ctx.cluster, database.as_ref(), live)
        .await
        .map_err(|source| ExecuteError::Secrets {
            action,
            source: Box::new(source),
        })
}

/// The release a joining node installs: the desired one, unless the planner refuses the move
/// to it from what the servers run (a downgrade, another major, more than one minor), when the
/// machines are built at the servers' release (the planner's rule 7, as kubeadm joins follow).
fn join_version(ctx: StepContext<'_>, spec: &ClusterSpec) -> KubeVersion {
    let desired = spec.kubernetes.version;
    match ctx.observed.control_plane.as_ref().map(|cp| cp.version) {
        Some(current)
            if desired < current
                || desired.major != current.major
                || desired.minor > current.minor + 1 =>
        {
            current
        }
        _ => desired,
    }
}

/// What of `scheduling` the node registers with (K3s: `--node-label` for the labels a kubelet
/// may set on itself, `--node-taint` for every taint).
fn registration(spec: &ClusterSpec, scheduling: &NodeScheduling) -> Registration {
    scheduling.registration(&spec.kubernetes.distribution.capabilities().scheduling)
}
