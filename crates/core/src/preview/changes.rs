//! What changed in a cluster's file between two revisions: the unified diff of its text and a
//! semantic summary of its spec (`workers.general.replicas 3 → 4`).
//!
//! Pure: texts and parsed specs in, strings out.
//!
//! # Guarantees
//! - A diff line whose key names a secret (`token`, `password`, `secret`, ...) with a literal
//!   value is shown with `***` instead of the value: a credential pasted into a file never
//!   reaches a pull-request comment. References (`{env: ...}`, `{file: ...}`) are kept.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::spec::Cluster;

/// The unified diff of `base` → `head` under the name `path`, three lines of context, secrets
/// redacted. Empty when the texts are equal.
pub fn unified_diff(path: &str, base: Option<&str>, head: Option<&str>) -> String {
    let old = base.unwrap_or("");
    let new = head.unwrap_or("");
    if old == new {
        return String::new();
    }
    let old_name = if base.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_owned()
    };
    let new_name = if head.is_some() {
        format!("b/{path}")
    } else {
        "/dev/null".to_owned()
    };
    let diff = similar::TextDiff::from_lines(old, new);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&old_name, &new_name)
        .to_string();
    text.lines().map(redact_line).collect::<Vec<_>>().join("\n") + "\n"
}

/// Key names whose literal values are secrets.
const SECRET_KEYS: [&str; 6] = [
    "token",
    "password",
    "secret",
    "privatekey",
    "apikey",
    "credentials",
];

fn redact_line(line: &str) -> String {
    let Some((key, value)) = line.split_once(':') else {
        return line.to_owned();
    };
    let bare = key
        .trim_start_matches(['+', '-', ' '])
        .trim()
        .trim_start_matches("- ")
        .trim_matches(['"', '\''])
        .to_ascii_lowercase()
        .replace(['_', '-'], "");
    let value = value.trim();
    let is_secret_key = SECRET_KEYS.iter().any(|secret| bare.ends_with(secret))
        && !bare.ends_with("from")
        && !bare.ends_with("id")
        && !bare.ends_with("name")
        && !bare.ends_with("ref");
    if is_secret_key && !value.is_empty() && !value.starts_with('{') && !value.starts_with('#') {
        format!("{key}: ***")
    } else {
        line.to_owned()
    }
}

/// One changed field: its path, the old and the new value (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldChange {
    /// `workers.general.replicas`.
    pub path: String,
    /// The base's value.
    pub from: Option<String>,
    /// The head's value.
    pub to: Option<String>,
}

impl std::fmt::Display for FieldChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.from, &self.to) {
            (Some(from), Some(to)) => write!(f, "{} {from} → {to}", self.path),
            (None, Some(to)) => write!(f, "{} added: {to}", self.path),
            (Some(from), None) => write!(f, "{} removed (was {from})", self.path),
            (None, None) => write!(f, "{}", self.path),
        }
    }
}

/// The fields of the spec that differ between `base` and `head`, after defaults, in path
/// order. Worker pools are keyed by their name (`workers.general.replicas`), so reordering
/// pools changes nothing.
pub fn field_changes(base: &Cluster, head: &Cluster) -> Vec<FieldChange> {
    let mut old = BTreeMap::new();
    let mut new = BTreeMap::new();
    flatten("", &spec_value(base), &mut old);
    flatten("", &spec_value(head), &mut new);
    let paths: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    paths
        .into_iter()
        .filter(|path| old.get(*path) != new.get(*path))
        .map(|path| FieldChange {
            path: path.clone(),
            from: old.get(path).cloned(),
            to: new.get(path).cloned(),
        })
        .collect()
}

fn spec_value(cluster: &Cluster) -> Value {
    let mut value = serde_json::to_value(&cluster.spec).unwrap_or(Value::Null);
    if let Some(workers) = value.get_mut("workers")
        && let Value::Array(pools) = workers.take()
    {
        let keyed = pools
            .into_iter()
            .map(|mut pool| {
                let name = pool
                    .get("pool")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                if let Value::Object(fields) = &mut pool {
                    fields.remove("pool");
                }
                (name, pool)
            })
            .collect();
        *workers = Value::Object(keyed);
    }
    value
}

fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&path, field, out);
            }
        }
        Value::Null => {}
        Value::String(text) => {
            out.insert(prefix.to_owned(), text.clone());
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_token_in_a_diff_is_redacted_and_a_reference_is_kept() {
        let diff = unified_diff(
            "capstan.yaml",
            Some("a: 1\n"),
            Some(
                "a: 1\ntoken: hunter22\napiToken: 's3cr3t'\ntokenFrom: {env: TOKEN}\ntokenId: capstan@pve!r\n",
            ),
        );
        assert!(!diff.contains("hunter22"), "{diff}");
        assert!(!diff.contains("s3cr3t"), "{diff}");
        assert!(diff.contains("+token: ***"), "{diff}");
        assert!(diff.contains("+tokenFrom: {env: TOKEN}"), "{diff}");
        assert!(diff.contains("+tokenId: capstan@pve!r"), "{diff}");
    }

    #[test]
    fn equal_texts_have_no_diff_and_a_new_file_diffs_from_dev_null() {
        assert_eq!(unified_diff("x.yaml", Some("a\n"), Some("a\n")), "");
        let diff = unified_diff("x.yaml", None, Some("a\n"));
        assert!(diff.starts_with("--- /dev/null\n+++ b/x.yaml\n"), "{diff}");
    }

    fn platform(text: &str) -> Cluster {
        let files = crate::spec::RepoFiles {
            fleet: crate::spec::SourceText {
                path: "capstan.yaml".to_owned(),
                text: include_str!("../../../../examples-repo/capstan.yaml").to_owned(),
            },
            clusters: vec![crate::spec::SourceText {
                path: "clusters/platform.yaml".to_owned(),
                text: text.to_owned(),
            }],
        };
        let loaded = crate::spec::load(&files);
        loaded
            .desired
            .and_then(|d| d.clusters.get("platform").cloned())
            .expect("a valid cluster")
    }

    #[test]
    fn pools_are_compared_by_name_so_only_the_changed_field_is_reported() {
        let text = include_str!("../../../../examples-repo/clusters/platform.yaml");
        let base = platform(text);
        let mut head = platform(text);
        head.spec.workers.reverse();
        head.spec.workers[1].replicas += 1;
        let pool = head.spec.workers[1].pool.clone();
        let before = base
            .spec
            .workers
            .iter()
            .find(|p| p.pool == pool)
            .expect("pool")
            .replicas;
        let changes: Vec<String> = field_changes(&base, &head)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            changes,
            [format!("workers.{pool}.replicas {before} → {}", before + 1)]
        );
    }
}
