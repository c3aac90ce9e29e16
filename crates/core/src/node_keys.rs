//! The label and taint keys recorded on a Node, read back every pass: capstan's record of the
//! keys it set ([`MANAGED_LABELS_ANNOTATION`], [`MANAGED_TAINTS_ANNOTATION`]), so a restarted
//! daemon or a new leader removes only those, and another controller's record of the keys it
//! owns ([`OWNED_ELSEWHERE_ANNOTATIONS`]), which capstan leaves alone. Observed facts, apart
//! from the rules that use them (`scheduling`), so the observed state depends on no rule.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Node annotation: the label keys capstan set on the Node, a JSON array (as Talos records
/// its own in `talos.dev/owned-labels`).
pub const MANAGED_LABELS_ANNOTATION: &str = "capstan.dev/managed-labels";
/// Node annotation: the taints capstan set on the Node, a JSON array of `key:Effect`.
pub const MANAGED_TAINTS_ANNOTATION: &str = "capstan.dev/managed-taints";

/// Node annotations in which another controller records the label and taint keys it owns
/// and reconciles (Talos: the keys of its machine config's `machine.nodeLabels` and
/// `machine.nodeTaints`, and the control-plane taint it sets itself; JSON arrays of keys).
/// capstan never sets, records or removes such a key: the other controller would put back
/// its own value.
pub const OWNED_ELSEWHERE_ANNOTATIONS: (&str, &str) =
    ("talos.dev/owned-labels", "talos.dev/owned-taints");

/// How many keys an annotation may record: a Node annotation written by someone else is
/// read no further (a pool declares at most 64 labels and 32 taints).
const MAX_RECORDED_KEYS: usize = 256;

/// The label and taint keys capstan set on a Node, as its annotations record them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedKeys {
    /// Label keys ([`MANAGED_LABELS_ANNOTATION`]).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub labels: BTreeSet<String>,
    /// Taints, `key:Effect` ([`MANAGED_TAINTS_ANNOTATION`]).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub taints: BTreeSet<String>,
}

impl ManagedKeys {
    /// Whether capstan recorded nothing.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.taints.is_empty()
    }

    /// Reads the two annotations' values. A value that is no JSON array of strings records
    /// nothing (someone else wrote it): capstan then claims only what the file declares.
    pub fn from_annotations(labels: Option<&str>, taints: Option<&str>) -> Self {
        fn keys(value: Option<&str>) -> BTreeSet<String> {
            value
                .and_then(|text| serde_json::from_str::<Vec<String>>(text).ok())
                .unwrap_or_default()
                .into_iter()
                .take(MAX_RECORDED_KEYS)
                .collect()
        }
        ManagedKeys {
            labels: keys(labels),
            taints: keys(taints),
        }
    }

    /// The annotations that record these keys, by name.
    pub fn annotations(&self) -> [(&'static str, String); 2] {
        let json = |keys: &BTreeSet<String>| {
            serde_json::to_string(keys).unwrap_or_else(|_| "[]".to_owned())
        };
        [
            (MANAGED_LABELS_ANNOTATION, json(&self.labels)),
            (MANAGED_TAINTS_ANNOTATION, json(&self.taints)),
        ]
    }
}

/// The label and taint keys another controller owns on a Node
/// ([`OWNED_ELSEWHERE_ANNOTATIONS`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OwnedElsewhere {
    /// Label keys.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub labels: BTreeSet<String>,
    /// Taint keys (every effect).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub taints: BTreeSet<String>,
}

impl OwnedElsewhere {
    /// Whether another controller owns nothing.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.taints.is_empty()
    }

    /// Reads the annotations' values (unreadable ones: nothing).
    pub fn from_annotations(labels: Option<&str>, taints: Option<&str>) -> Self {
        let ManagedKeys { labels, taints } = ManagedKeys::from_annotations(labels, taints);
        OwnedElsewhere { labels, taints }
    }
}
