//! One patch of `patches` (on the cluster, the control plane or a pool): a YAML mapping in the
//! distribution's own language, judged by `spec::patches`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most patches one level (the cluster, the control plane, a pool) may hold.
pub const MAX_PATCHES: usize = 16;
/// The largest patch, in bytes of JSON: configs are read, hashed and diffed at every pass.
pub const MAX_PATCH_BYTES: usize = 64 * 1024;

/// One patch: a YAML mapping in the distribution's own language (see `spec.patches`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Patch(pub serde_json::Map<String, serde_json::Value>);
