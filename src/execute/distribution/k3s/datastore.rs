//! A K3s cluster's datastore: the embedded SQLite of a single server, a database capstan
//! provisions on a server of the fleet, or a kine DSN the user gives whole; checked before a
//! clone, provisioned before a server install, and asked when the API does not answer.

use crate::connect::Providers;
use crate::execute::{ExecuteError, StepContext, fenced};
use crate::plan::ActionKind;
use crate::providers::datastore::{AdminAccess, DatastoreError, KineEndpoint};
use crate::spec::{ClusterSpec, DatastoreChoice};

/// How a K3s cluster's datastore is reached.
pub(super) enum Datastore<'s> {
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

impl<'s> Datastore<'s> {
    /// The cluster's datastore: the admin access of the server it is provisioned on, or the
    /// DSN given whole (read from its variable or file now, as the fleet's secrets are).
    pub(super) fn of<Pr: Providers>(
        providers: &'s Pr,
        cluster: &str,
        spec: &'s ClusterSpec,
        action: ActionKind,
    ) -> Result<Self, ExecuteError> {
        let no_datastore = |reason: String| ExecuteError::NoDatastore { action, reason };
        match spec.kubernetes.datastore.as_ref().and_then(|d| d.choice()) {
            None => Ok(Datastore::Embedded),
            Some(DatastoreChoice::Provisioned { server, database }) => providers
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
                let dsn = providers
                    .kine_dsn(cluster, source)
                    .map_err(|err| no_datastore(crate::errors::error_chain(&err)))?;
                KineEndpoint::parse(&dsn)
                    .map(Datastore::Given)
                    .map_err(datastore_failed(action, GIVEN))
            }
        }
    }

    /// Checks that the datastore accepts the admin (a provisioned one) or its own user (one
    /// given whole). Nothing to check for the embedded SQLite.
    pub(super) async fn preflight(&self, cluster: &str) -> Result<(), ExecuteError> {
        let action = ActionKind::CreateMachine;
        match self {
            Datastore::Provisioned { server, admin, .. } => {
                let version = admin
                    .preflight()
                    .await
                    .map_err(datastore_failed(action, server))?;
                tracing::debug!(cluster, server, version, "datastore answers");
            }
            Datastore::Given(endpoint) => {
                endpoint
                    .check()
                    .await
                    .map_err(datastore_failed(action, GIVEN))?;
                tracing::debug!(cluster, %endpoint, "datastore answers");
            }
            Datastore::Embedded => {}
        }
        Ok(())
    }

    /// The DSN a server starts with (`None` on the embedded SQLite), the database provisioned
    /// first (idempotently) with the user's `password`.
    pub(super) async fn server_dsn(
        self,
        ctx: StepContext<'_>,
        password: &str,
        action: ActionKind,
    ) -> Result<Option<String>, ExecuteError> {
        match self {
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
                    .provision(database, password)
                    .await
                    .map_err(datastore_failed(action, server))?;
                Ok(Some(endpoint.dsn()))
            }
            Datastore::Given(endpoint) => Ok(Some(endpoint.dsn())),
            Datastore::Embedded => Ok(None),
        }
    }
}

/// Whether the datastore of K3s cluster `name` is down (its servers answer 503 without it):
/// the admin preflight of a provisioned one, the user's own connection for a DSN given whole,
/// with the server's words.
pub(super) async fn down<Pr: Providers>(
    providers: &Pr,
    name: &str,
    spec: &ClusterSpec,
) -> Option<String> {
    match spec.kubernetes.datastore.as_ref()?.choice()? {
        DatastoreChoice::Provisioned { server, database } => {
            let admin = providers.datastore(server)?;
            let err = admin.preflight().await.err()?;
            Some(format!(
                "its K3s datastore `{server}` (database `{database}`) is unavailable: {err}"
            ))
        }
        DatastoreChoice::Given(source) => {
            let dsn = providers.kine_dsn(name, source).ok()?;
            let endpoint = KineEndpoint::parse(&dsn).ok()?;
            let err = endpoint.check().await.err()?;
            Some(format!(
                "its K3s datastore given by endpointFrom (database `{}`) is unavailable: {err}",
                endpoint.database
            ))
        }
    }
}

/// How a server's message names its datastore.
pub(super) fn words(spec: &ClusterSpec) -> String {
    match spec.kubernetes.datastore.as_ref().and_then(|d| d.choice()) {
        Some(DatastoreChoice::Provisioned { database, .. }) => {
            format!("datastore database `{database}`")
        }
        Some(DatastoreChoice::Given(_)) => "the datastore given by endpointFrom".to_owned(),
        None => "embedded SQLite".to_owned(),
    }
}

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
