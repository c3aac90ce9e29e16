//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and the subset of strategic
//! merge patch that kubectl and capstan send (maps merged, lists of known fields merged by
//! their merge key, the `$patch`, `$setElementOrder`, `$retainKeys` and
//! `$deleteFromPrimitiveList` directives understood).

use serde_json::{Map, Value};

use super::status::ApiError;

/// The patch formats a client can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/json-patch+json`.
    Json,
}

impl PatchKind {
    /// The kind a `Content-Type` names.
    ///
    /// # Errors
    /// 415 for anything else (server-side apply is answered by `apply`, before this).
    pub fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/merge-patch+json" => Ok(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
            "application/json-patch+json" => Ok(PatchKind::Json),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

/// Applies `patch` to `target`.
///
/// # Errors
/// BadRequest when the body does not fit the format.
pub(crate) fn apply(kind: PatchKind, target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    match kind {
        PatchKind::Merge => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(target, patch);
            Ok(())
        }
        PatchKind::Strategic => {
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "a strategic merge patch must be a JSON object",
                ));
            }
            strategic_merge(target, patch);
            Ok(())
        }
        PatchKind::Json => {
            let operations: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|err| ApiError::bad_request(format!("invalid JSON patch: {err}")))?;
            json_patch::patch(target, &operations)
                .map_err(|err| ApiError::bad_request(format!("cannot apply JSON patch: {err}")))
        }
    }
}

/// The merge key of list fields that strategic merge patch merges element by element (from
/// the `patchMergeKey` tags of the Kubernetes types); other lists are replaced whole.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets" => "name",
        "volumeMounts" => "mountPath",
        "ports" => "containerPort",
        "conditions" | "addresses" => "type",
        "ownerReferences" => "uid",
        _ => return None,
    })
}

/// Lists of scalars merged as sets (`patchStrategy: merge` without a key).
fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

fn strategic_merge(target: &mut Value, patch: &Value) {
    let Some(patch) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replacement = patch.clone();
        replacement.remove("$patch");
        *target = Value::Object(replacement);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(target) = target.as_object_mut() else {
        return;
    };
    for (field, value) in patch {
        if field.starts_with("$setElementOrder/") || field == "$retainKeys" || field == "$patch" {
            continue;
        }
        if let Some(list_field) = field.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(remove)) =
                (target.get_mut(list_field), value.as_array())
            {
                list.retain(|item| !remove.contains(item));
            }
            continue;
        }
        match value {
            Value::Null => {
                target.remove(field);
            }
            Value::Array(items) => {
                if let Some(key) = merge_key(field) {
                    let list = target
                        .entry(field.clone())
                        .or_insert_with(|| Value::Array(Vec::new()));
                    merge_list(list, items, key);
                } else if is_set_list(field) {
                    let list = target
                        .entry(field.clone())
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if let Value::Array(existing) = list {
                        for item in items {
                            if !existing.contains(item) {
                                existing.push(item.clone());
                            }
                        }
                    }
                } else {
                    target.insert(field.clone(), value.clone());
                }
            }
            Value::Object(_) => {
                let entry = target.entry(field.clone()).or_insert(Value::Null);
                strategic_merge(entry, value);
            }
            scalar => {
                target.insert(field.clone(), scalar.clone());
            }
        }
    }
}

fn merge_list(list: &mut Value, items: &[Value], key: &str) {
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    let Value::Array(existing) = list else {
        return;
    };
    for item in items {
        let id = item.get(key);
        let position = id.and_then(|id| existing.iter().position(|e| e.get(key) == Some(id)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(index), true) => {
                existing.remove(index);
            }
            (None, true) => {}
            (Some(index), false) => strategic_merge(&mut existing[index], item),
            (None, false) => {
                let mut fresh = Value::Null;
                strategic_merge(&mut fresh, item);
                existing.push(fresh);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_patches_merge_keyed_lists_and_replace_others() {
        let mut node = json!({
            "metadata": {"labels": {"a": "1"}, "finalizers": ["x"]},
            "spec": {"taints": [{"key": "k1", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        });
        let patch = json!({
            "metadata": {"labels": {"a": null, "b": "2"}, "finalizers": ["y"]},
            "spec": {"unschedulable": true, "taints": [{"key": "k2", "effect": "NoExecute"}],
                     "$setElementOrder/taints": [{"key": "k2"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"},
                                      {"type": "Extra", "status": "True"}]},
        });
        apply(PatchKind::Strategic, &mut node, &patch).expect("patch");
        assert_eq!(node["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(node["metadata"]["finalizers"], json!(["x", "y"]));
        assert_eq!(node["spec"]["unschedulable"], true);
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "k2", "effect": "NoExecute"}])
        );
        assert_eq!(node["status"]["conditions"][0]["status"], "False");
        assert_eq!(node["status"]["conditions"][1]["type"], "Extra");
    }

    #[test]
    fn merge_and_json_patches_follow_their_rfcs() {
        let mut secret = json!({"data": {"value": "YQ==", "old": "Yg=="}});
        apply(
            PatchKind::Merge,
            &mut secret,
            &json!({"data": {"old": null, "value": "Yw=="}}),
        )
        .expect("merge");
        assert_eq!(secret, json!({"data": {"value": "Yw=="}}));
        apply(
            PatchKind::Json,
            &mut secret,
            &json!([{"op": "add", "path": "/data/new", "value": "ZA=="}]),
        )
        .expect("json patch");
        assert_eq!(secret["data"]["new"], "ZA==");
        assert_eq!(
            PatchKind::from_content_type("application/apply-patch+yaml")
                .expect_err("apply")
                .code,
            415
        );
    }
}
