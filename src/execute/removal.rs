//! The executor's removal of a whole cluster: its VMs destroyed, their config ISOs deleted,
//! its Flux Secret withdrawn, the datastore database capstan provisioned for it dropped, and
//! every record capstan keeps of it deleted, its identity last.
//!
//! # Guarantees
//! - Nothing of the cluster outlives it for a new cluster of the same name to find: no
//!   secrets bundle, talosconfig, K3s token, pinned CA, suspension or identity, no config ISO
//!   (the sweep also takes those of VMs already gone), no K3s database or user capstan made.
//! - Records go after the VMs, and the identity after every other record: a deletion
//!   interrupted at any point is planned again from what remains (the records keep the
//!   cluster observed), and never leaves records whose identity is gone.
//! - Only the records observed as the cluster's are deleted, each checked again to be that
//!   record of that cluster ([`crate::records::delete_owned`]).

use crate::connect::Providers;
use crate::observed::{FluxTarget, ObservedRecord};
use crate::plan::{ActionKind, MachineRef};
use crate::providers::kube::ClusterClient as _;
use crate::providers::proxmox::ProxmoxProvider;
use crate::records::k3s::ProvisionedDatabase;
use crate::records::{Expected, IdentityCheck, RecordError, RecordKind, delete_owned, judge};

use super::access::{fenced, proxmox_failed};
use super::{ExecuteError, Executor, StepContext};

const ACTION: ActionKind = ActionKind::DeleteCluster;

impl<Pr: Providers> Executor<Pr> {
    pub(super) async fn delete_cluster(
        &self,
        ctx: StepContext<'_>,
        machines: &[MachineRef],
        flux: Option<&FluxTarget>,
        records: &[ObservedRecord],
    ) -> Result<String, ExecuteError> {
        // A cluster whose VMs are all gone already (a deletion interrupted after the last
        // destroy) may have no Proxmox connection left to name: only its records remain.
        if !machines.is_empty() {
            self.destroy_all(ctx, machines).await?;
            self.delete_config_isos(ctx, machines).await?;
        }
        if let Some(flux) = flux {
            self.withdraw_kubeconfig(ctx, flux).await?;
        }
        let dropped = self.drop_datastores(ctx, records).await?;
        // A new cluster of this name will have a CA of its own (the daemon's memory of the
        // pin goes too).
        fenced(ctx, "forgetting the cluster's pinned CA")?;
        self.providers
            .forget_ca(ctx.cluster, flux.map(|f| f.cluster.as_str()))
            .await
            .map_err(|source| ExecuteError::ForgetCa(Box::new(source)))?;
        let deleted = self.delete_records(ctx, records).await?;
        let mut summary = format!("cluster deleted: {} VM(s) destroyed", machines.len());
        if flux.is_some() {
            summary.push_str(", Flux Secret withdrawn");
        }
        for database in dropped {
            summary.push_str(&format!(
                ", datastore database `{}` and its user dropped on `{}`",
                database.database, database.server
            ));
        }
        summary.push_str(&format!(", {deleted} record(s) deleted (identity last)"));
        Ok(summary)
    }

    /// Destroys every VM of a removed cluster. No reset first: the whole cluster goes, so
    /// there is no membership to leave, and the VM's distribution is no longer known.
    async fn destroy_all(
        &self,
        ctx: StepContext<'_>,
        machines: &[MachineRef],
    ) -> Result<(), ExecuteError> {
        let proxmox = self.proxmox(ctx)?;
        for machine in machines {
            let expected = self.expected(ctx, machine)?;
            proxmox
                .destroy_vm(&expected)
                .await
                .map_err(proxmox_failed("destroy"))?;
        }
        Ok(())
    }

    /// Drops the datastore database (and its user) each K3s record of the cluster names:
    /// the ones capstan provisioned. A record that names none (the embedded SQLite, a DSN
    /// given whole: the user's own database, which capstan did not create) drops nothing.
    async fn drop_datastores(
        &self,
        ctx: StepContext<'_>,
        records: &[ObservedRecord],
    ) -> Result<Vec<ProvisionedDatabase>, ExecuteError> {
        let mut dropped = Vec::new();
        for record in records
            .iter()
            .filter(|r| r.kind == RecordKind::K3sSecrets.name())
        {
            let Some(database) = self.provisioned(ctx, record).await? else {
                continue;
            };
            let admin = self.providers.datastore(&database.server).ok_or_else(|| {
                ExecuteError::NoDatastore {
                    action: ACTION,
                    reason: format!(
                        "Secret {}/{} names database `{}` on datastore server `{}`, which capstan.yaml no longer declares: put the server back so capstan drops the database and its user, or drop them yourself and delete that Secret",
                        record.namespace, record.name, database.database, database.server
                    ),
                }
            })?;
            fenced(
                ctx,
                format_args!("dropping datastore database `{}`", database.database),
            )?;
            admin
                .drop_database(&database.database)
                .await
                .map_err(|source| ExecuteError::Datastore {
                    action: ACTION,
                    server: database.server.clone(),
                    source: Box::new(source),
                })?;
            tracing::info!(cluster = ctx.cluster, server = %database.server, database = %database.database, "dropped the deleted cluster's datastore database and user");
            dropped.push(database);
        }
        Ok(dropped)
    }

    /// The database the K3s record `record` names, read from the management cluster.
    async fn provisioned(
        &self,
        ctx: StepContext<'_>,
        record: &ObservedRecord,
    ) -> Result<Option<ProvisionedDatabase>, ExecuteError> {
        let client = self.management_of(record)?;
        let failed = |source| {
            record_failed(RecordError::Cluster {
                namespace: record.namespace.clone(),
                name: record.name.clone(),
                source: Box::new(source),
            })
        };
        let Some(secret) = client
            .secret(&record.namespace, &record.name)
            .await
            .map_err(failed)?
        else {
            return Ok(None);
        };
        let expected = Expected {
            kind: RecordKind::K3sSecrets,
            owner: ctx.cluster,
            identity: IdentityCheck::Any,
        };
        judge(&record.namespace, &record.name, &secret, &expected)
            .map_err(|refusal| record_failed(refusal.into()))?;
        Ok(ProvisionedDatabase::of(&secret))
    }

    /// Deletes `records`, the identity records last; returns how many existed.
    async fn delete_records(
        &self,
        ctx: StepContext<'_>,
        records: &[ObservedRecord],
    ) -> Result<usize, ExecuteError> {
        let identity = RecordKind::ClusterIdentity.name();
        let (identities, others): (Vec<&ObservedRecord>, Vec<&ObservedRecord>) =
            records.iter().partition(|r| r.kind == identity);
        let mut deleted = 0;
        for record in others.into_iter().chain(identities) {
            let client = self.management_of(record)?;
            fenced(
                ctx,
                format_args!("deleting record {}/{}", record.namespace, record.name),
            )?;
            let existed = delete_owned(
                client,
                &record.namespace,
                &record.name,
                &record.kind,
                ctx.cluster,
            )
            .await
            .map_err(record_failed)?;
            if existed {
                tracing::info!(cluster = ctx.cluster, record = %record, "deleted the deleted cluster's record");
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// The client of the management cluster a record is on.
    fn management_of(&self, record: &ObservedRecord) -> Result<&Pr::Cluster, ExecuteError> {
        self.providers
            .management(Some(&record.management))
            .ok_or_else(|| ExecuteError::NoManagement {
                name: record.management.clone(),
            })
    }
}

fn record_failed(source: RecordError) -> ExecuteError {
    ExecuteError::Record {
        action: ACTION,
        source: Box::new(source),
    }
}
