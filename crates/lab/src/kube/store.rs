//! The object store of one simulated cluster: every object as JSON, keyed by resource,
//! namespace and name, with one cluster-wide `resourceVersion` counter (as etcd's revision) and
//! a bounded history of changes that watches replay from.
//!
//! Invariants: every stored object carries `apiVersion`, `kind`, `metadata.uid`,
//! `metadata.resourceVersion` (the revision of its last change) and `creationTimestamp`; each
//! change bumps the revision by one and is broadcast to watchers exactly once.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::resources::ResourceType;
use super::status::ApiError;

/// How many past changes watches can resume from; older resourceVersions answer 410.
const HISTORY: usize = 4096;

/// Where an object lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Key {
    /// Plural resource name.
    pub resource: &'static str,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl Key {
    /// The key of a namespaced (`Some`) or cluster-scoped (`None`) object.
    pub fn new(resource: &ResourceType, namespace: Option<&str>, name: &str) -> Self {
        Key {
            resource: resource.plural,
            namespace: namespace.unwrap_or_default().to_owned(),
            name: name.to_owned(),
        }
    }
}

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

impl EventKind {
    /// The watch event `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

/// One change, as watches see it.
#[derive(Debug)]
pub(crate) struct Event {
    /// The revision of the change.
    pub revision: u64,
    /// What happened.
    pub kind: EventKind,
    /// Resource and namespace of the object.
    pub key: Key,
    /// The object after the change (before it, for a deletion, with the deletion's revision).
    pub object: Value,
    /// For a change, the object before it: a watch with a selector reports an object that
    /// starts or stops matching as ADDED or DELETED, as the real server does.
    pub previous: Option<Value>,
}

/// Where a watch receives changes as they happen.
pub(crate) type EventReceiver = broadcast::Receiver<Arc<Event>>;

/// The objects of one cluster.
pub(crate) struct Store {
    objects: BTreeMap<Key, Value>,
    revision: u64,
    history: VecDeque<Arc<Event>>,
    events: broadcast::Sender<Arc<Event>>,
    counter: u64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Objects include Secrets: show how many there are, not what they hold.
        f.debug_struct("Store")
            .field("objects", &self.objects.len())
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

impl Default for Store {
    fn default() -> Self {
        Store {
            objects: BTreeMap::new(),
            revision: 1,
            history: VecDeque::new(),
            events: broadcast::channel(1024).0,
            counter: 0,
        }
    }
}

impl Store {
    /// The current revision (a list's `resourceVersion`).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// A fresh number, for uids, generated names and pod IPs.
    pub fn next_number(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// One object.
    pub fn get(&self, key: &Key) -> Option<&Value> {
        self.objects.get(key)
    }

    /// Objects of a resource, in one namespace or all.
    pub fn list(&self, resource: &str, namespace: Option<&str>) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|(key, _)| {
                key.resource == resource && namespace.is_none_or(|ns| key.namespace == ns)
            })
            .map(|(_, object)| object)
            .collect()
    }

    /// Stores a new object: fills uid, resourceVersion, creationTimestamp, generation and
    /// `generateName`. With `dry_run`, returns what would be stored and changes nothing.
    ///
    /// # Errors
    /// AlreadyExists, or Invalid for an object with neither name nor generateName.
    pub fn create(
        &mut self,
        resource: &ResourceType,
        namespace: Option<&str>,
        mut object: Value,
        now: Timestamp,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        if !object["metadata"].is_object() {
            object["metadata"] = json!({});
        }
        let mut name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if name.is_empty() {
            let prefix = object["metadata"]["generateName"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    resource,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
            let number = self.next_number();
            name = format!("{prefix}{}", random_suffix(number));
        }
        let key = Key::new(resource, namespace, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(resource, &name));
        }
        let uid = self.next_number();
        let metadata = &mut object["metadata"];
        metadata["name"] = json!(name);
        if let Some(ns) = namespace {
            metadata["namespace"] = json!(ns);
        }
        metadata["uid"] = json!(uid_of(uid));
        metadata["creationTimestamp"] = json!(rfc3339(now));
        if has_spec(&object) {
            object["metadata"]["generation"] = json!(1);
        }
        object["apiVersion"] = json!(resource.api_version());
        object["kind"] = json!(resource.kind);
        if dry_run {
            object["metadata"]["resourceVersion"] = json!(self.revision.to_string());
            return Ok(object);
        }
        Ok(self.commit(key, object, EventKind::Added, None))
    }

    /// Replaces an object. A `resourceVersion` in `object` must match the stored one (409
    /// otherwise); an empty one means "whatever is there" (an unconditional update). Identity
    /// fields (uid, creationTimestamp) are kept; `generation` moves when `spec` changes.
    /// An update that changes nothing bumps nothing, as on the real server.
    ///
    /// # Errors
    /// NotFound or Conflict.
    pub fn update(
        &mut self,
        resource: &ResourceType,
        key: &Key,
        mut object: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let current = self
            .objects
            .get(key)
            .ok_or_else(|| ApiError::not_found(resource, &key.name))?;
        let expected = object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        if !expected.is_empty() && expected != current["metadata"]["resourceVersion"] {
            return Err(ApiError::conflict(resource, &key.name));
        }
        for field in ["uid", "creationTimestamp", "name", "namespace"] {
            match current["metadata"].get(field) {
                Some(value) => object["metadata"][field] = value.clone(),
                None => {
                    if let Some(metadata) = object["metadata"].as_object_mut() {
                        metadata.remove(field);
                    }
                }
            }
        }
        // As on the real server, an update that leaves managedFields out keeps them.
        if object["metadata"]["managedFields"].is_null()
            && let Some(fields) = current["metadata"].get("managedFields")
        {
            object["metadata"]["managedFields"] = fields.clone();
        }
        object["apiVersion"] = json!(resource.api_version());
        object["kind"] = json!(resource.kind);
        let generation = current["metadata"]["generation"].as_i64();
        if let Some(generation) = generation {
            let moved = object["spec"] != current["spec"];
            object["metadata"]["generation"] = json!(generation + i64::from(moved));
        }
        object["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        if object == *current || dry_run {
            return Ok(object);
        }
        let previous = Some(current.clone());
        Ok(self.commit(key.clone(), object, EventKind::Modified, previous))
    }

    /// Removes an object and returns it.
    ///
    /// # Errors
    /// NotFound.
    pub fn delete(
        &mut self,
        resource: &ResourceType,
        key: &Key,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let current = self
            .objects
            .get(key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(resource, &key.name))?;
        if dry_run {
            return Ok(current);
        }
        self.objects.remove(key);
        self.revision += 1;
        let mut object = current;
        object["metadata"]["resourceVersion"] = json!(self.revision.to_string());
        self.record(Event {
            revision: self.revision,
            kind: EventKind::Deleted,
            key: key.clone(),
            object: object.clone(),
            previous: None,
        });
        Ok(object)
    }

    fn commit(
        &mut self,
        key: Key,
        mut object: Value,
        kind: EventKind,
        previous: Option<Value>,
    ) -> Value {
        self.revision += 1;
        object["metadata"]["resourceVersion"] = json!(self.revision.to_string());
        self.objects.insert(key.clone(), object.clone());
        self.record(Event {
            revision: self.revision,
            kind,
            key,
            object: object.clone(),
            previous,
        });
        object
    }

    fn record(&mut self, event: Event) {
        let event = Arc::new(event);
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(event.clone());
        // No receiver is fine: nobody watches.
        let _ = self.events.send(event);
    }

    /// Changes after `revision` and a receiver for the ones to come, taken together so no
    /// change falls between them.
    ///
    /// # Errors
    /// Expired when `revision` is older than the kept history.
    pub fn watch_from(&self, revision: u64) -> Result<(Vec<Arc<Event>>, EventReceiver), ApiError> {
        if let Some(oldest) = self.history.front()
            && oldest.revision > revision + 1
            && self.history.len() == HISTORY
        {
            return Err(ApiError::expired(revision));
        }
        let past = self
            .history
            .iter()
            .filter(|event| event.revision > revision)
            .cloned()
            .collect();
        Ok((past, self.events.subscribe()))
    }
}

fn has_spec(object: &Value) -> bool {
    object.get("spec").is_some()
}

/// A uid in the usual 8-4-4-4-12 form, unique within the cluster.
fn uid_of(number: u64) -> String {
    let hex = format!("{number:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Five characters from the alphabet Kubernetes uses for generated names, derived from a
/// counter (scrambled so consecutive names do not look alike).
pub(crate) fn random_suffix(number: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut value = number.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
    let mut suffix = String::new();
    for _ in 0..5 {
        suffix.push(char::from(ALPHABET[(value % 27) as usize]));
        value /= 27;
    }
    suffix
}

/// RFC 3339 with second precision, as Kubernetes writes timestamps.
pub(crate) fn rfc3339(time: Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::resources::by_plural;

    fn node(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {}})
    }

    #[test]
    fn stale_updates_conflict_and_fresh_ones_bump_the_revision() {
        let nodes = by_plural("nodes").expect("nodes");
        let mut store = Store::default();
        let created = store
            .create(nodes, None, node("n1"), Timestamp::now(), false)
            .expect("create");
        let key = Key::new(nodes, None, "n1");
        let mut changed = created.clone();
        changed["spec"]["unschedulable"] = json!(true);
        let updated = store
            .update(nodes, &key, changed.clone(), false)
            .expect("update");
        assert_ne!(
            updated["metadata"]["resourceVersion"],
            created["metadata"]["resourceVersion"]
        );
        assert_eq!(updated["metadata"]["generation"], 2);
        let stale = store
            .update(nodes, &key, changed, false)
            .expect_err("stale");
        assert_eq!((stale.code, stale.reason), (409, "Conflict"));
    }

    #[test]
    fn watches_replay_changes_after_a_revision() {
        let nodes = by_plural("nodes").expect("nodes");
        let mut store = Store::default();
        let start = store.revision();
        store
            .create(nodes, None, node("n1"), Timestamp::now(), false)
            .expect("create");
        store
            .delete(nodes, &Key::new(nodes, None, "n1"), false)
            .expect("delete");
        let (past, _) = store.watch_from(start).expect("watch");
        let kinds: Vec<_> = past.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [EventKind::Added, EventKind::Deleted]);
    }
}
