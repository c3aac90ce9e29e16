//! Server-side apply (`PATCH` with `Content-Type: application/apply-patch+yaml`): each field
//! manager's fields are recorded in `metadata.managedFields` (operation `Apply`, `FieldsV1`),
//! an apply that would change a field another manager owns is refused with the real 409
//! (`Apply failed with N conflict(s)`, causes of reason `FieldManagerConflict`) unless
//! `force=true` (which moves the ownership), fields a manager stops applying are removed when
//! no other manager owns them, and an apply of an absent object creates it.
//!
//! The subset, compared with the real structured-merge-diff:
//! - every list is atomic (owned and replaced whole, as `x-kubernetes-list-type: atomic`), so
//!   `FieldsV1` never holds `k:`/`v:`/`i:` keys; an entry written by a real server with such
//!   keys is read as owning the whole list;
//! - a map is owned through its fields; an applied empty map is owned as a leaf;
//! - only apply records ownership: create, update and the other patch types keep the
//!   managedFields they find (unless the body sets them) and add no `Update` entries, so they
//!   never cause conflicts;
//! - `apiVersion`, `kind` and the identity fields of `metadata` are never owned.

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::status::ApiError;
use super::store::rfc3339;

/// The media type of an apply patch.
const APPLY_MEDIA_TYPE: &str = "application/apply-patch+yaml";

/// `metadata` fields the server owns: never recorded as a manager's.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
];

/// A field, as the map keys leading to it from the object's root. Owned fields are leaves:
/// scalars, lists (atomic) and empty maps.
type FieldPath = Vec<String>;

/// Whether a `Content-Type` is an apply patch.
pub(crate) fn is_apply(content_type: &str) -> bool {
    content_type.split(';').next().unwrap_or_default().trim() == APPLY_MEDIA_TYPE
}

/// Parses an apply body (YAML, of which JSON is a subset).
///
/// # Errors
/// BadRequest when the body is not a YAML mapping, or sets `managedFields`.
pub(crate) fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::bad_request("the apply patch is not UTF-8"))?;
    let applied: Value = serde_saphyr::from_str(text)
        .map_err(|err| ApiError::bad_request(format!("error decoding YAML: {err}")))?;
    if !applied.is_object() {
        return Err(ApiError::bad_request(
            "an apply patch must be a YAML mapping",
        ));
    }
    if !applied["metadata"]["managedFields"].is_null() {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    Ok(applied)
}

/// One apply request's options.
pub(crate) struct Apply<'a> {
    /// `fieldManager`.
    pub manager: &'a str,
    /// `force=true`: take conflicting fields from their managers.
    pub force: bool,
    /// The apiVersion recorded in the manager's entry.
    pub api_version: &'a str,
    /// The entry's `time`.
    pub now: Timestamp,
}

impl Apply<'_> {
    /// The object after applying `applied` onto `current` (an empty object when absent), with
    /// its managedFields updated.
    ///
    /// # Errors
    /// Conflict (409) when another manager owns a field whose value the apply changes and
    /// `force` is not set.
    pub fn merge(&self, current: Option<&Value>, applied: &Value) -> Result<Value, ApiError> {
        let base = current.cloned().unwrap_or_else(|| json!({"metadata": {}}));
        let mut entries = entries_of(&base);
        let applied_fields = leaves(applied);
        let mine = entries
            .iter()
            .position(|e| e.manager == self.manager && e.operation == "Apply");
        let previous = mine
            .map(|index| entries[index].fields.clone())
            .unwrap_or_default();

        let mut merged = base.clone();
        for path in &applied_fields {
            if let Some(value) = lookup(applied, path) {
                set(&mut merged, path, value.clone());
            }
        }
        for path in previous.difference(&applied_fields) {
            let owned_elsewhere = entries
                .iter()
                .enumerate()
                .filter(|(index, _)| Some(*index) != mine)
                .any(|(_, e)| e.fields.iter().any(|q| overlaps(q, path)));
            let reapplied = applied_fields.iter().any(|q| overlaps(q, path));
            if !owned_elsewhere && !reapplied {
                remove(&mut merged, path);
            }
        }

        let mut conflicts = Vec::new();
        for (index, entry) in entries.iter_mut().enumerate() {
            if Some(index) == mine {
                continue;
            }
            let taken: Vec<FieldPath> = entry
                .fields
                .iter()
                .filter(|q| applied_fields.iter().any(|p| overlaps(p, q)))
                .filter(|q| lookup(&base, q) != lookup(&merged, q))
                .cloned()
                .collect();
            for path in taken {
                conflicts.push((entry.manager.clone(), display(&path)));
                if self.force {
                    entry.fields.remove(&path);
                }
            }
        }
        if !conflicts.is_empty() && !self.force {
            return Err(ApiError::apply_conflict(&conflicts));
        }

        // An apply that changes nothing leaves the object as it was (no new time, so no new
        // resourceVersion), as on the real server.
        let unchanged = merged == base && mine.is_some_and(|i| entries[i].fields == applied_fields);
        let time = match mine {
            Some(index) if unchanged => entries[index].time.clone(),
            _ => Some(rfc3339(self.now)),
        };
        let own = Entry {
            manager: self.manager.to_owned(),
            operation: "Apply".to_owned(),
            api_version: self.api_version.to_owned(),
            time,
            fields: applied_fields,
        };
        match mine {
            Some(index) => entries[index] = own,
            None => entries.push(own),
        }
        entries.retain(|e| !e.fields.is_empty());
        merged["metadata"]["managedFields"] =
            Value::Array(entries.iter().map(Entry::to_json).collect());
        Ok(merged)
    }
}

/// One `managedFields` entry.
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    fields: BTreeSet<FieldPath>,
}

impl Entry {
    fn to_json(&self) -> Value {
        let mut entry = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_v1(&self.fields),
        });
        if let Some(time) = &self.time {
            entry["time"] = json!(time);
        }
        entry
    }
}

fn entries_of(object: &Value) -> Vec<Entry> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| {
            let mut fields = BTreeSet::new();
            read_fields_v1(&entry["fieldsV1"], &mut Vec::new(), &mut fields);
            Entry {
                manager: entry["manager"].as_str().unwrap_or_default().to_owned(),
                operation: entry["operation"].as_str().unwrap_or_default().to_owned(),
                api_version: entry["apiVersion"].as_str().unwrap_or_default().to_owned(),
                time: entry["time"].as_str().map(str::to_owned),
                fields,
            }
        })
        .collect()
}

/// The owned leaves of an applied object.
fn leaves(applied: &Value) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    let Some(root) = applied.as_object() else {
        return out;
    };
    for (key, value) in root {
        if key == "apiVersion" || key == "kind" {
            continue;
        }
        if key == "metadata" {
            for (field, value) in value.as_object().into_iter().flatten() {
                if !SERVER_METADATA.contains(&field.as_str()) {
                    collect(value, vec!["metadata".to_owned(), field.clone()], &mut out);
                }
            }
            continue;
        }
        collect(value, vec![key.clone()], &mut out);
    }
    out
}

fn collect(value: &Value, path: FieldPath, out: &mut BTreeSet<FieldPath>) {
    match value.as_object() {
        Some(map) if !map.is_empty() => {
            for (key, child) in map {
                let mut child_path = path.clone();
                child_path.push(key.clone());
                collect(child, child_path, out);
            }
        }
        _ => {
            out.insert(path);
        }
    }
}

/// `FieldsV1`: `{"f:spec": {"f:replicas": {}}}`.
fn fields_v1(fields: &BTreeSet<FieldPath>) -> Value {
    let mut root = Map::new();
    for path in fields {
        let mut node = &mut root;
        for key in path {
            node = node
                .entry(format!("f:{key}"))
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("FieldsV1 nodes are objects");
        }
    }
    Value::Object(root)
}

/// Reads `FieldsV1`: a node with no `f:` children (or with `.`, or with the real server's
/// `k:`/`v:`/`i:` list keys) is owned as a whole.
fn read_fields_v1(node: &Value, path: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
    let Some(map) = node.as_object() else {
        return;
    };
    let mut children = false;
    for (key, child) in map {
        if let Some(field) = key.strip_prefix("f:") {
            children = true;
            path.push(field.to_owned());
            read_fields_v1(child, path, out);
            path.pop();
        } else if !path.is_empty() {
            out.insert(path.clone());
        }
    }
    if !children && !path.is_empty() {
        out.insert(path.clone());
    }
}

/// Whether one field contains the other (or they are the same).
fn overlaps(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `.spec.replicas`, as structured-merge-diff prints a path.
fn display(path: &[String]) -> String {
    path.iter().map(|key| format!(".{key}")).collect()
}

fn lookup<'v>(object: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(object, |node, key| node.get(key))
}

fn set(object: &mut Value, path: &[String], value: Value) {
    let mut node = object;
    for key in &path[..path.len().saturating_sub(1)] {
        if !node[key.as_str()].is_object() {
            node[key.as_str()] = json!({});
        }
        node = &mut node[key.as_str()];
    }
    if let Some(last) = path.last() {
        // An applied empty map says the map exists; it does not clear other managers' fields.
        let keeps_map =
            value.as_object().is_some_and(Map::is_empty) && node[last.as_str()].is_object();
        if !keeps_map {
            node[last.as_str()] = value;
        }
    }
}

/// Removes a field, then the maps it leaves empty (but never `metadata`).
fn remove(object: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let Some(parent) = parents
        .iter()
        .try_fold(&mut *object, |node, key| node.get_mut(key.as_str()))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    parent.remove(last.as_str());
    if parent.is_empty() && parents != ["metadata"] {
        remove(object, parents);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(manager: &str, force: bool) -> Apply<'_> {
        Apply {
            manager,
            force,
            api_version: "v1",
            now: Timestamp::UNIX_EPOCH,
        }
    }

    fn config_map(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
    }

    #[test]
    fn an_apply_records_its_fields_in_the_fields_v1_shape() {
        let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"app": "x"}}, "data": {"a": "1"}});
        let merged = apply("alice", false).merge(None, &applied).expect("apply");
        assert_eq!(
            merged["metadata"]["managedFields"],
            json!([{"manager": "alice", "operation": "Apply", "apiVersion": "v1",
                "time": "1970-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}}])
        );
    }

    #[test]
    fn changing_another_managers_field_conflicts_unless_forced() {
        let first = apply("alice", false)
            .merge(None, &config_map(json!({"a": "1"})))
            .expect("alice");
        let err = apply("bob", false)
            .merge(Some(&first), &config_map(json!({"a": "2"})))
            .expect_err("conflict");
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            "Apply failed with 1 conflict: conflict with \"alice\": .data.a"
        );
        let forced = apply("bob", true)
            .merge(Some(&first), &config_map(json!({"a": "2"})))
            .expect("forced");
        assert_eq!(forced["data"]["a"], "2");
        let managers: Vec<&str> = forced["metadata"]["managedFields"]
            .as_array()
            .expect("entries")
            .iter()
            .filter_map(|e| e["manager"].as_str())
            .collect();
        assert_eq!(managers, ["bob"], "alice lost her only field");
    }

    #[test]
    fn applying_the_same_value_shares_the_field() {
        let first = apply("alice", false)
            .merge(None, &config_map(json!({"a": "1"})))
            .expect("alice");
        let shared = apply("bob", false)
            .merge(Some(&first), &config_map(json!({"a": "1"})))
            .expect("same value");
        assert_eq!(
            shared["metadata"]["managedFields"].as_array().map(Vec::len),
            Some(2)
        );
        let alice_gone = apply("alice", false)
            .merge(Some(&shared), &json!({"metadata": {"name": "c"}}))
            .expect("alice drops a");
        assert_eq!(alice_gone["data"]["a"], "1", "bob still owns it");
    }

    #[test]
    fn a_field_no_longer_applied_is_removed_when_nobody_else_owns_it() {
        let first = apply("alice", false)
            .merge(None, &config_map(json!({"a": "1", "b": "2"})))
            .expect("alice");
        let second = apply("alice", false)
            .merge(Some(&first), &config_map(json!({"a": "1"})))
            .expect("alice again");
        assert_eq!(second["data"], json!({"a": "1"}));
    }

    #[test]
    fn applying_the_same_config_again_changes_nothing() {
        let first = apply("alice", false)
            .merge(None, &config_map(json!({"a": "1"})))
            .expect("alice");
        let later = Apply {
            now: Timestamp::from_second(3600).expect("time"),
            ..apply("alice", false)
        };
        let again = later
            .merge(Some(&first), &config_map(json!({"a": "1"})))
            .expect("again");
        assert_eq!(again, first);
        let changed = later
            .merge(Some(&first), &config_map(json!({"a": "2"})))
            .expect("changed");
        assert_eq!(
            changed["metadata"]["managedFields"][0]["time"],
            "1970-01-01T01:00:00Z"
        );
    }

    #[test]
    fn lists_are_owned_and_replaced_whole() {
        let applied = json!({"spec": {"ports": [{"port": 80}]}});
        let first = apply("alice", false).merge(None, &applied).expect("alice");
        assert_eq!(
            first["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:spec": {"f:ports": {}}})
        );
        let err = apply("bob", false)
            .merge(Some(&first), &json!({"spec": {"ports": [{"port": 81}]}}))
            .expect_err("conflict");
        assert_eq!(
            err.details.expect("details")["causes"][0],
            json!({"reason": "FieldManagerConflict", "message": "conflict with \"alice\"", "field": ".spec.ports"})
        );
    }
}
