//! What an operator may ask a running daemon to do without a commit: suspend clusters,
//! resume them, reconcile now (`capstan suspend`, `resume`, `reconcile`, through the
//! authenticated `POST /actions/...` of the daemon's endpoint).
//!
//! A runtime suspension is recorded in the management cluster's `capstan-system` namespace, a
//! Secret per cluster (`capstan-suspend-<cluster>`, beside the CA pins and K3s tokens), so it
//! survives restarts, `kill -9` and a change of leader: every replica reads the records at
//! every pass and hands them to the planner ([`crate::plan::Policy::suspended`]), which holds
//! the cluster's steps. A fleet without a management cluster keeps them in the daemon's memory:
//! they last until it restarts.
//!
//! # Guarantees
//! - A record is a `suspension` record of its cluster ([`crate::records`]): suspending writes
//!   only over the cluster's own suspension record, resuming deletes only it.
//! - Fail closed: a suspension record that does not parse, or is not a suspension record of
//!   the cluster it names, holds that cluster as suspended
//!   ([`crate::plan::SuspensionSource::Unreadable`], reason `SuspensionUnreadable`, naming the
//!   record); a broken record never lifts an operator's suspension.
//! - A record says who (a client certificate's subject, or `bearer token` and the user name the
//!   client declared, marked declared), when, and why (at most [`MAX_REASON`] characters,
//!   redacted before it is kept).
//! - While the management cluster does not answer, the records this daemon read last stand in:
//!   a suspended cluster stays suspended.
//! - A step already running is never stopped: suspension only holds the steps the planner
//!   lists from the next pass on.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Notify, watch};

use crate::plan::{Suspension, SuspensionSource};
use crate::providers::kube::{ClusterClient, ClusterError, ListedSecret, SecretRecord};
use crate::records::{
    ClusterRecords, Expected, IdentityCheck, NAMESPACE, OWNER_ANNOTATION,
    RecordError as StoreError, RecordKind, delete_owned, judge,
};
use crate::source::PollTrigger;

/// The longest reason kept, in characters: a sentence and an incident link.
pub const MAX_REASON: usize = 512;

/// The longest user name a client may declare, in characters.
pub const MAX_USER: usize = 64;

/// The label marking a suspension record.
pub const SUSPENSION_LABEL: &str = "capstan.dev/suspension";

/// The annotation earlier capstans named the suspended cluster with (now
/// [`crate::records::OWNER_ANNOTATION`]).
pub const CLUSTER_ANNOTATION: &str = "capstan.dev/suspended-cluster";

/// The record's key holding the suspension (JSON).
pub const RECORD_KEY: &str = "suspension.json";

/// The record's name for `cluster`.
pub fn record_name(cluster: &str) -> String {
    format!("capstan-suspend-{cluster}")
}

/// A boxed future: the store is used behind `dyn` by the HTTP endpoint.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where runtime suspensions are kept.
pub trait SuspensionStore: Send + Sync {
    /// Every suspension, by cluster (an unreadable record as
    /// [`SuspensionSource::Unreadable`]).
    fn list(&self) -> BoxFuture<'_, Result<BTreeMap<String, Suspension>, ClusterError>>;
    /// Records `suspension` of `cluster`, replacing one already there.
    fn put<'a>(
        &'a self,
        cluster: &'a str,
        suspension: &'a Suspension,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Removes the suspension of `cluster`; returns whether there was one.
    fn remove<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;
}

/// Suspensions kept in this daemon's memory (a fleet without a management cluster).
#[derive(Debug, Default)]
pub struct InMemory(Mutex<BTreeMap<String, Suspension>>);

impl SuspensionStore for InMemory {
    fn list(&self) -> BoxFuture<'_, Result<BTreeMap<String, Suspension>, ClusterError>> {
        let all = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Box::pin(async move { Ok(all) })
    }

    fn put<'a>(
        &'a self,
        cluster: &'a str,
        suspension: &'a Suspension,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(cluster.to_owned(), suspension.clone());
        Box::pin(async { Ok(()) })
    }

    fn remove<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        let was = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(cluster)
            .is_some();
        Box::pin(async move { Ok(was) })
    }
}

/// Suspensions kept as Secrets in a management cluster's `capstan-system` namespace.
#[derive(Debug, Clone)]
pub struct InCluster<C>(pub C);

impl<C: ClusterClient + Sync> SuspensionStore for InCluster<C> {
    fn list(&self) -> BoxFuture<'_, Result<BTreeMap<String, Suspension>, ClusterError>> {
        Box::pin(async move {
            let listed = self
                .0
                .secrets_labelled(&format!("{SUSPENSION_LABEL}=true"))
                .await?;
            let mut all = BTreeMap::new();
            for secret in listed.into_iter().filter(|s| s.namespace == NAMESPACE) {
                let Some(cluster) = suspended_cluster(&secret) else {
                    tracing::warn!(
                        secret = %format!("{NAMESPACE}/{}", secret.name),
                        "a suspension record that names no cluster is ignored; delete it"
                    );
                    continue;
                };
                let suspension = read_suspension(&cluster, &secret).unwrap_or_else(|why| {
                    let why = format!(
                        "its runtime suspension record {NAMESPACE}/{} {why}",
                        secret.name
                    );
                    tracing::warn!(cluster = %cluster, "{why}: the cluster stays suspended");
                    Suspension::unreadable(why)
                });
                all.insert(cluster, suspension);
            }
            Ok(all)
        })
    }

    fn put<'a>(
        &'a self,
        cluster: &'a str,
        suspension: &'a Suspension,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let name = record_name(cluster);
            let records = ClusterRecords::new(&self.0, cluster, true);
            let existing = records
                .read(NAMESPACE, &name, RecordKind::Suspension)
                .await?;
            let record = SecretRecord {
                data: BTreeMap::from([(
                    RECORD_KEY.to_owned(),
                    serde_json::to_vec(suspension).unwrap_or_default(),
                )]),
                labels: BTreeMap::from([(SUSPENSION_LABEL.to_owned(), "true".to_owned())]),
                annotations: BTreeMap::from([(CLUSTER_ANNOTATION.to_owned(), cluster.to_owned())]),
                resource_version: None,
            };
            records
                .put(
                    NAMESPACE,
                    &name,
                    RecordKind::Suspension,
                    record,
                    existing.as_ref(),
                )
                .await
                .map(drop)
        })
    }

    fn remove<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let kind = RecordKind::Suspension.name();
            delete_owned(&self.0, NAMESPACE, &record_name(cluster), kind, cluster).await
        })
    }
}

/// The cluster a Secret labelled as a suspension names: its owner, as an earlier capstan
/// annotated it, or as its name says.
fn suspended_cluster(secret: &ListedSecret) -> Option<String> {
    let annotations = &secret.record.annotations;
    annotations
        .get(OWNER_ANNOTATION)
        .or_else(|| annotations.get(CLUSTER_ANNOTATION))
        .cloned()
        .or_else(|| {
            secret
                .name
                .strip_prefix(&record_name(""))
                .filter(|name| !name.is_empty())
                .map(str::to_owned)
        })
}

/// The runtime suspension `secret` records for `cluster`, or why it cannot be read (words
/// that follow "its runtime suspension record NAME").
fn read_suspension(cluster: &str, secret: &ListedSecret) -> Result<Suspension, String> {
    let expected = Expected {
        kind: RecordKind::Suspension,
        owner: cluster,
        identity: IdentityCheck::Any,
    };
    judge(&secret.namespace, &secret.name, &secret.record, &expected)
        .map_err(|refusal| format!("is not one: it is {}", refusal.found))?;
    if secret.name != record_name(cluster) {
        return Err(format!("is not named {}", record_name(cluster)));
    }
    let bytes = secret
        .record
        .data
        .get(RECORD_KEY)
        .ok_or_else(|| format!("holds no `{RECORD_KEY}`"))?;
    let suspension: Suspension = serde_json::from_slice(bytes)
        .map_err(|err| format!("does not parse ({})", json_failure(&err)))?;
    if suspension.source != SuspensionSource::Runtime {
        return Err("does not hold a runtime suspension".to_owned());
    }
    Ok(suspension)
}

/// What kind of JSON failure `err` is, in words that quote nothing of the record.
fn json_failure(err: &serde_json::Error) -> &'static str {
    match err.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "not a suspension",
        serde_json::error::Category::Eof => "cut short",
    }
}

/// The actions a running daemon takes from its HTTP endpoint, shared by the endpoint and the
/// reconcile loop.
pub struct Actions {
    store: Box<dyn SuspensionStore>,
    /// Whether `store` is the management cluster (else memory).
    durable: bool,
    /// The suspensions last read from the store.
    known: Mutex<BTreeMap<String, Suspension>>,
    /// Wakes the reconcile loop for a pass now.
    wake: Notify,
    /// The number of the last pass started.
    started: std::sync::atomic::AtomicU64,
    /// The number of the last pass completed, for a request waiting for one.
    passes: watch::Sender<u64>,
    /// Makes the next poll of the source happen now.
    trigger: Mutex<Option<Arc<PollTrigger>>>,
}

impl std::fmt::Debug for Actions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Actions")
            .field("durable", &self.durable)
            .finish_non_exhaustive()
    }
}

impl Default for Actions {
    fn default() -> Self {
        Actions::new(Box::new(InMemory::default()), false)
    }
}

/// Recording or removing a suspension failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot record the suspension of `{cluster}` in the management cluster ({NAMESPACE})")]
pub struct RecordError {
    /// The cluster.
    pub cluster: String,
    /// What the management cluster said, or why the Secret there is not its suspension
    /// record.
    #[source]
    pub source: StoreError,
}

impl Actions {
    /// Actions keeping suspensions in `store` (`durable` when it is a management cluster).
    pub fn new(store: Box<dyn SuspensionStore>, durable: bool) -> Self {
        Actions {
            store,
            durable,
            known: Mutex::default(),
            wake: Notify::new(),
            started: std::sync::atomic::AtomicU64::new(0),
            passes: watch::Sender::new(0),
            trigger: Mutex::default(),
        }
    }

    /// Whether suspensions outlive this process (kept in a management cluster).
    pub fn is_durable(&self) -> bool {
        self.durable
    }

    /// Polls of the source triggered by `reconcile` go through `trigger`.
    pub fn set_trigger(&self, trigger: Arc<PollTrigger>) {
        *self.trigger.lock().unwrap_or_else(PoisonError::into_inner) = Some(trigger);
    }

    /// The suspensions as the store holds them now; the last ones read when it does not
    /// answer.
    pub async fn suspended(&self) -> BTreeMap<String, Suspension> {
        match self.store.list().await {
            Ok(all) => {
                all.clone_into(&mut self.known.lock().unwrap_or_else(PoisonError::into_inner));
                all
            }
            Err(err) => {
                tracing::warn!(
                    "cannot read the runtime suspensions; the last ones read stand: {}",
                    crate::redact::redact(&crate::errors::error_chain(&err))
                );
                self.known
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
            }
        }
    }

    /// Suspends `cluster`.
    ///
    /// # Errors
    /// When the management cluster does not record it.
    pub async fn suspend(&self, cluster: &str, suspension: &Suspension) -> Result<(), RecordError> {
        self.store
            .put(cluster, suspension)
            .await
            .map_err(|source| RecordError {
                cluster: cluster.to_owned(),
                source,
            })?;
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(cluster.to_owned(), suspension.clone());
        tracing::info!(
            cluster,
            by = suspension.by.as_deref().unwrap_or(""),
            "suspended at runtime"
        );
        self.wake.notify_one();
        Ok(())
    }

    /// Resumes `cluster`; returns whether it was suspended at runtime.
    ///
    /// # Errors
    /// When the management cluster does not remove the record.
    pub async fn resume(&self, cluster: &str) -> Result<bool, RecordError> {
        let was = self
            .store
            .remove(cluster)
            .await
            .map_err(|source| RecordError {
                cluster: cluster.to_owned(),
                source,
            })?;
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(cluster);
        if was {
            tracing::info!(cluster, "resumed");
        }
        self.wake.notify_one();
        Ok(was)
    }

    /// Asks for a poll of the source and a pass now; completes when a pass that started
    /// after the request has completed.
    pub async fn reconcile(&self) {
        let mut passes = self.passes.subscribe();
        // A pass under way when asked may have read the source before: wait for the next.
        let next = self.started.load(Ordering::SeqCst) + 1;
        if let Some(trigger) = &*self.trigger.lock().unwrap_or_else(PoisonError::into_inner) {
            trigger.request();
        }
        self.wake.notify_one();
        let _ = passes.wait_for(|done| *done >= next).await;
    }

    /// Completes when an action asks for a pass.
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// The reconcile loop starts a pass; returns its number for [`Actions::pass_completed`].
    pub fn pass_started(&self) -> u64 {
        self.started.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The reconcile loop completed pass `number`.
    pub fn pass_completed(&self, number: u64) {
        self.passes.send_replace(number);
    }
}
