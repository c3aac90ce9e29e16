//! A document judged by a published JSON Schema (Talos's, or the kubeadm reference data), its
//! findings as field paths and the schema's own words.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The validators of a schema's `$defs`, by definition name.
pub struct Definitions(BTreeMap<String, jsonschema::Validator>);

impl Definitions {
    /// Compiles a validator for each of `names` out of `schema`'s `$defs`.
    ///
    /// # Panics
    /// When the schema does not compile: it is reference data built into capstan, tested.
    pub fn compile(schema: &Value, names: &[&str]) -> Self {
        let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
        Definitions(
            names
                .iter()
                .map(|name| {
                    let root = json!({
                        "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "$ref": format!("#/$defs/{name}"),
                        "$defs": defs,
                    });
                    let validator = jsonschema::validator_for(&root)
                        .expect("the reference schema built into capstan compiles");
                    ((*name).to_owned(), validator)
                })
                .collect(),
        )
    }

    /// What the schema's `name` says is wrong with `document`: each finding's field path (map
    /// keys and list indexes from the document's root) and message, at most `limit` of them.
    pub fn findings(&self, name: &str, document: &Value, limit: usize) -> Vec<SchemaFinding> {
        let Some(validator) = self.0.get(name) else {
            return Vec::new();
        };
        validator
            .iter_errors(document)
            .take(limit)
            .map(|error| SchemaFinding {
                path: pointer_segments(error.instance_path().as_str()),
                message: error.to_string(),
            })
            .collect()
    }
}

/// One thing a schema refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaFinding {
    /// Map keys and list indexes (as their decimal text) from the document's root.
    pub path: Vec<String>,
    /// The schema validator's words.
    pub message: String,
}

/// `/a/b~1c/0` → `["a", "b/c", "0"]`.
pub fn pointer_segments(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|segment| segment.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// A field path under `base` in the cluster language's spelling: `base.a.b[0].c`.
pub fn join_path(base: &str, segments: &[String]) -> String {
    let mut out = base.to_owned();
    for segment in segments {
        if segment.parse::<usize>().is_ok() {
            out.push_str(&format!("[{segment}]"));
        } else {
            out.push('.');
            out.push_str(segment);
        }
    }
    out
}
