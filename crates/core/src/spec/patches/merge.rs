//! Merging one YAML value onto another, the way each distribution documents it: maps merge key
//! by key, a patch's scalar replaces the base's, and a list is appended, replaced or merged by
//! a key, as the rules of the distribution say for that field ([`ListRule`]). A map value
//! `{$patch: delete}` removes the key (Talos's strategic merge).

use serde_json::{Map, Value};

/// The key of Talos's patch directives.
pub const DIRECTIVE: &str = "$patch";

/// What a patch's list does to the base's list at the same field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListRule {
    /// The patch's items follow the base's.
    Append,
    /// The patch's list is the result.
    Replace,
    /// The patch's value is the result, whatever it is (a map too).
    ReplaceWhole,
    /// Items with the same value of this key are merged; the others follow.
    MergeBy(&'static str),
}

/// Whether `value` is `{$patch: delete}` (with or without other keys).
pub fn is_delete(value: &Value) -> bool {
    value
        .as_object()
        .and_then(|map| map.get(DIRECTIVE))
        .and_then(Value::as_str)
        == Some("delete")
}

/// `value` without `$patch` directives anywhere in it (what a patch adds where the base has
/// nothing).
pub fn without_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| key.as_str() != DIRECTIVE)
                .map(|(key, value)| (key.clone(), without_directives(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_directives).collect()),
        other => other.clone(),
    }
}

/// Merges `patch` onto `base`; `rule` says what a list at a field path (keys from the document's
/// root, list indexes left out) does, and whether a map at a path is replaced whole
/// ([`ListRule::ReplaceWhole`]).
pub fn merge(
    base: &mut Value,
    patch: &Value,
    path: &mut Vec<String>,
    rule: &dyn Fn(&[String]) -> ListRule,
) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            if rule(path) == ListRule::ReplaceWhole {
                *base = strip(patch);
                return;
            }
            merge_maps(base, patch, path, rule);
        }
        (Value::Array(base), Value::Array(patch)) => match rule(path) {
            ListRule::Append => base.extend(patch.iter().map(without_directives)),
            ListRule::Replace | ListRule::ReplaceWhole => {
                *base = patch.iter().map(without_directives).collect();
            }
            ListRule::MergeBy(key) => {
                for item in patch {
                    let found = item
                        .get(key)
                        .and_then(|wanted| base.iter_mut().find(|b| b.get(key) == Some(wanted)));
                    match found {
                        Some(existing) => merge(existing, item, path, rule),
                        None => base.push(without_directives(item)),
                    }
                }
            }
        },
        (base, patch) => *base = without_directives(patch),
    }
}

fn strip(map: &Map<String, Value>) -> Map<String, Value> {
    match without_directives(&Value::Object(map.clone())) {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn merge_maps(
    base: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
    rule: &dyn Fn(&[String]) -> ListRule,
) {
    for (key, value) in patch {
        if key == DIRECTIVE {
            continue;
        }
        if is_delete(value) {
            base.remove(key);
            continue;
        }
        path.push(key.clone());
        match base.get_mut(key) {
            Some(existing) => merge(existing, value, path, rule),
            None => {
                base.insert(key.clone(), without_directives(value));
            }
        }
        path.pop();
    }
}

/// Writes `value` with its map keys sorted at every depth, as JSON: two values that differ only
/// in key order write the same text (what a digest is taken of).
pub fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn append(_: &[String]) -> ListRule {
        ListRule::Append
    }

    #[test]
    fn maps_merge_lists_append_scalars_replace_and_delete_removes() {
        let mut base = json!({"a": {"b": 1, "c": [1]}, "d": "x", "gone": {"k": 1}});
        let patch = json!({"a": {"c": [2], "e": true}, "d": "y", "gone": {"$patch": "delete"}});
        merge(&mut base, &patch, &mut Vec::new(), &append);
        assert_eq!(
            base,
            json!({"a": {"b": 1, "c": [1, 2], "e": true}, "d": "y"})
        );
    }

    #[test]
    fn a_list_merged_by_name_replaces_the_entry_of_that_name_and_appends_the_others() {
        let mut base = json!({"args": [{"name": "v", "value": "1"}]});
        let patch = json!({"args": [{"name": "v", "value": "5"}, {"name": "x", "value": "y"}]});
        merge(&mut base, &patch, &mut Vec::new(), &|_| {
            ListRule::MergeBy("name")
        });
        assert_eq!(
            base,
            json!({"args": [{"name": "v", "value": "5"}, {"name": "x", "value": "y"}]})
        );
    }

    #[test]
    fn the_canonical_text_ignores_key_order() {
        let (mut a, mut b) = (String::new(), String::new());
        canonical(&json!({"b": 1, "a": [{"y": 1, "x": 2}]}), &mut a);
        canonical(&json!({"a": [{"x": 2, "y": 1}], "b": 1}), &mut b);
        assert_eq!(a, b);
        assert_eq!(a, r#"{"a":[{"x":2,"y":1}],"b":1}"#);
    }
}
