//! The executor's K3s branches: a K3s cluster's steps differ from kubeadm's in how nodes are
//! built and taken apart (the air-gap install with the cluster token and the datastore DSN,
//! the uninstall scripts, `k3s certificate rotate`), in the absence of etcd members to remove,
//! and in a datastore that must answer before any VM is cloned.
//!
//! # Guarantees
//! - The token and the datastore user's password are generated once and kept in the
//!   management cluster ([`cluster_secrets`]); the datastore is provisioned (idempotently)
//!   before every server install, so a server always starts with a DSN that works.
//! - A datastore that refuses the admin stops the cluster's first clone with the server's
//!   own error text (no password in it).

use crate::connect::Providers;
use crate::model::{NodeName, Role};
use crate::plan::{ActionKind, MachineRef};
use crate::providers::cluster_secrets::{self, K3sSecrets};
use crate::providers::datastore::{AdminAccess, DatastoreError, KineEndpoint};
use crate::providers::k3s::{self, ServerJoin};
use crate::spec::{ClusterSpec, DatastoreChoice, Distribution, Endpoint, KubeVersion};

use super::{ExecuteError, Executor, StepContext, fenced, kubeadm_failed, node_target, run_steps};

/// Whether the step's cluster is a K3s cluster (a removed cluster, whose file is gone, is
/// taken apart the kubeadm way, whose failures are tolerated there).
pub(super) fn is_k3s(ctx: StepContext<'_>) -> bool {
    ctx.spec
        .is_some_and(|spec| spec.kubernetes.distribution == Distribution::K3s)
}

/// The template `machine` was cloned from: its pool's, as the spec names it.
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

impl<Pr: Providers> Executor<Pr> {
    /// Before a VM of a K3s cluster is cloned: its provisioned datastore must accept the admin,
    /// a DSN given whole its own user. Nothing to check for kubeadm or the embedded SQLite.
    pub(super) async fn k3s_preflight(&self, ctx: StepContext<'_>) -> Result<(), ExecuteError> {
        let Some(spec) = ctx.spec.filter(|_| is_k3s(ctx)) else {
            return Ok(());
        };
        let action = ActionKind::CreateMachine;
        match self.datastore(ctx.cluster, spec, action)? {
            Datastore::Provisioned { server, admin, .. } => {
                let version = admin
                    .preflight()
                    .await
                    .map_err(datastore_failed(action, server))?;
                tracing::debug!(cluster = ctx.cluster, server, version, "datastore answers");
            }
            Datastore::Given(endpoint) => {
                endpoint
                    .check()
                    .await
                    .map_err(datastore_failed(action, GIVEN))?;
                tracing::debug!(cluster = ctx.cluster, %endpoint, "datastore answers");
            }
            Datastore::Embedded => {}
        }
        Ok(())
    }

    /// The first K3s server: kube-vip and the install, then the bootstrap record.
    pub(super) async fn k3s_init(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        endpoint: &Endpoint,
        version: KubeVersion,
    ) -> Result<String, ExecuteError> {
        let mut spec = spec_of(ctx, ActionKind::InitControlPlane)?.clone();
        spec.endpoint = endpoint.clone();
        spec.kubernetes.version = version;
        let target = node_target(machine)?;
        let address = self.address(ctx, &target).await?;
        let join = self
            .server_join(ctx, &spec, ActionKind::InitControlPlane)
            .await?;
        let nodes = self.kubeadm(ctx)?;
        let steps = k3s::install_server(&spec, &join, &target.name, address);
        let action = ActionKind::InitControlPlane;
        let template = template_of(ctx, &spec, machine);
        k3s::install(&nodes, action.name(), &target, template, &steps)
            .await
            .map_err(kubeadm_failed(action.name()))?;
        let read = nodes
            .checked("read k3s.yaml", &target, &k3s::read_kubeconfig())
            .await
            .map_err(kubeadm_failed(ActionKind::InitControlPlane.name()))?
            .stdout;
        crate::redact::remember_kubeconfig(&read);
        let kubeconfig = self.admit(ctx, &spec, &target, &read).await?;
        self.mark_bootstrapped(ctx, &kubeconfig).await?;
        Ok(format!(
            "K3s server {} started (endpoint {}:{}, {})",
            target.name,
            endpoint.host,
            endpoint.port,
            datastore_words(&spec)
        ))
    }

    /// A later server (same install as the first: they share the datastore) or an agent.
    pub(super) async fn k3s_join(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
        role: Role,
    ) -> Result<String, ExecuteError> {
        let mut spec = spec_of(ctx, ActionKind::JoinNode)?.clone();
        spec.kubernetes.version = join_version(ctx, &spec);
        let spec = &spec;
        let target = node_target(machine)?;
        let address = self.address(ctx, &target).await?;
        let nodes = self.kubeadm(ctx)?;
        let steps = match role {
            Role::ControlPlane => {
                let join = self.server_join(ctx, spec, ActionKind::JoinNode).await?;
                k3s::install_server(spec, &join, &target.name, address)
            }
            Role::Worker => {
                let secrets = self.k3s_secrets(ctx, spec, ActionKind::JoinNode).await?;
                k3s::install_agent(spec, &secrets.token, &target.name, address)
            }
        };
        let action = ActionKind::JoinNode;
        k3s::install(
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
        Ok(format!(
            "{} joined as a K3s {what} (v{}) through {}:{}",
            target.name, spec.kubernetes.version, spec.endpoint.host, spec.endpoint.port
        ))
    }

    /// The uninstall script of a K3s server or agent.
    pub(super) async fn k3s_uninstall(
        &self,
        ctx: StepContext<'_>,
        machine: &MachineRef,
    ) -> Result<(), ExecuteError> {
        let target = node_target(machine)?;
        let server = self.role_of(ctx, &machine.name) == Some(Role::ControlPlane);
        run_steps(
            &self.kubeadm(ctx)?,
            ActionKind::ResetNode,
            &target,
            &k3s::uninstall(server),
        )
        .await
    }

    /// `k3s certificate rotate` on each server, one after the other.
    pub(super) async fn k3s_rotate(
        &self,
        ctx: StepContext<'_>,
        machines: &[MachineRef],
    ) -> Result<String, ExecuteError> {
        let nodes = self.kubeadm(ctx)?;
        for machine in machines {
            let target = node_target(machine)?;
            run_steps(
                &nodes,
                ActionKind::RenewCertificates,
                &target,
                &k3s::rotate_certificates(),
            )
            .await?;
        }
        Ok(format!(
            "K3s certificates rotated on {} server(s)",
            machines.len()
        ))
    }

    fn role_of(&self, ctx: StepContext<'_>, name: &NodeName) -> Option<Role> {
        ctx.observed
            .machines
            .get(name)
            .map(|machine| machine.ownership.role)
    }

    /// The token, and the DSN of the cluster's datastore (provisioned here, or given whole).
    async fn server_join(
        &self,
        ctx: StepContext<'_>,
        spec: &ClusterSpec,
        action: ActionKind,
    ) -> Result<ServerJoin, ExecuteError> {
        let secrets = self.k3s_secrets(ctx, spec, action).await?;
        let datastore_endpoint = match self.datastore(ctx.cluster, spec, action)? {
            Datastore::Provisioned {
                server,
                admin,
                database,
            } => {
                fenced(
                    ctx,
                    format_args!("provisioning datastore database `{database}`"),
                )?;
                let endpoint = admin
                    .provision(database, &secrets.datastore_password)
                    .await
                    .map_err(datastore_failed(action, server))?;
                Some(endpoint.dsn())
            }
            Datastore::Given(endpoint) => Some(endpoint.dsn()),
            Datastore::Embedded => None,
        };
        Ok(ServerJoin {
            token: secrets.token,
            datastore_endpoint,
        })
    }

    async fn k3s_secrets(
        &self,
        ctx: StepContext<'_>,
        spec: &ClusterSpec,
        action: ActionKind,
    ) -> Result<K3sSecrets, ExecuteError> {
        let preferred = spec.delivery.flux.as_ref().map(|f| f.cluster.as_str());
        let management =
            self.providers
                .management(preferred)
                .ok_or_else(|| ExecuteError::NoManagement {
                    name: preferred.unwrap_or("(none in capstan.yaml)").to_owned(),
                })?;
        // May generate and store the cluster's token.
        fenced(ctx, "reading or creating the cluster's K3s secrets")?;
        cluster_secrets::k3s_secrets(management, ctx.cluster)
            .await
            .map_err(|source| ExecuteError::Secrets {
                action,
                source: Box::new(source),
            })
    }

    /// The cluster's datastore: the admin access of the server it is provisioned on, or the
    /// DSN given whole (read from its variable or file now, as the fleet's secrets are).
    fn datastore<'s>(
        &'s self,
        cluster: &str,
        spec: &'s ClusterSpec,
        action: ActionKind,
    ) -> Result<Datastore<'s>, ExecuteError> {
        let no_datastore = |reason: String| ExecuteError::NoDatastore { action, reason };
        match spec.kubernetes.datastore.as_ref().and_then(|d| d.choice()) {
            None => Ok(Datastore::Embedded),
            Some(DatastoreChoice::Provisioned { server, database }) => self
                .providers
                .datastore(server)
                .map(|admin| Datastore::Provisioned {
                    server,
                    admin,
                    database,
                })
                .ok_or_else(|| {
                    no_datastore(format!(
                        "no datastore server `{server}` is configured (datastores in capstan.yaml)"
                    ))
                }),
            Some(DatastoreChoice::Given(source)) => {
                let dsn = self
                    .providers
                    .kine_dsn(cluster, source)
                    .map_err(|err| no_datastore(crate::errors::error_chain(&err)))?;
                KineEndpoint::parse(&dsn)
                    .map(Datastore::Given)
                    .map_err(datastore_failed(action, GIVEN))
            }
        }
    }
}

/// How a K3s cluster's datastore is reached.
enum Datastore<'s> {
    /// The embedded SQLite of a single server.
    Embedded,
    /// `database` on the fleet's datastore `server`, which capstan administers.
    Provisioned {
        server: &'s str,
        admin: &'s AdminAccess,
        database: &'s str,
    },
    /// The kine DSN the user gave whole (`endpointFrom`).
    Given(KineEndpoint),
}

/// How a datastore given whole is named in errors (it has no name in `capstan.yaml`).
const GIVEN: &str = "endpointFrom";

fn datastore_failed(
    action: ActionKind,
    server: &str,
) -> impl FnOnce(DatastoreError) -> ExecuteError + '_ {
    move |source| ExecuteError::Datastore {
        action,
        server: server.to_owned(),
        source: Box::new(source),
    }
}

fn spec_of(ctx: StepContext<'_>, action: ActionKind) -> Result<&ClusterSpec, ExecuteError> {
    ctx.spec.ok_or(ExecuteError::NoSpec { action })
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

fn datastore_words(spec: &ClusterSpec) -> String {
    match spec.kubernetes.datastore.as_ref().and_then(|d| d.choice()) {
        Some(DatastoreChoice::Provisioned { database, .. }) => {
            format!("datastore database `{database}`")
        }
        Some(DatastoreChoice::Given(_)) => "the datastore given by endpointFrom".to_owned(),
        None => "embedded SQLite".to_owned(),
    }
}
