//! `patches`: what a distribution can say that capstan has no field for, written in the
//! distribution's own language, on the cluster (`spec.patches`), the control plane
//! (`spec.controlPlane.patches`) and each worker pool (`spec.workers[].patches`), applied in
//! that order (the cluster's, then the machine's own).
//!
//! - Talos: strategic-merge patches ([`talos`]), each resulting machine config judged by Talos's
//!   schema (by `talos::patches`, which renders them);
//! - kubeadm: configuration documents merged onto capstan's by kind ([`kubeadm`]), each judged
//!   by its published API (`reference/kubeadm.schema.json`);
//! - K3s: keys of `/etc/rancher/k3s/config.yaml` ([`k3s`]), judged by K3s's flags, its
//!   critical values set for every server alike.
//!
//! Every distribution refuses what capstan owns (naming the field to use instead) and any value
//! that looks like a secret ([`secrets`]). A patch is part of the machine spec hash of the
//! machines whose configuration it reaches ([`digest`]): a change replaces those and no other.

pub mod k3s;
pub mod kubeadm;
pub mod merge;
pub mod schema;
pub mod secrets;
pub mod talos;

use serde_json::Value;

use super::diagnostic::{Diagnostic, SourceFile};
use super::patch::Patch;
pub use super::patch::{MAX_PATCH_BYTES, MAX_PATCHES};
use super::types::{ClusterSpec, Distribution};
/// The most findings one patch level reports (a hostile patch could hold thousands).
const MAX_FINDINGS: usize = 20;

/// Where the secrets a machine needs come from, for a refusal's hint.
pub const SECRET_SOURCES_HINT: &str = "patches are in Git and in previews, so they never carry a secret: capstan generates the cluster's keys, tokens and CAs itself, and a secret you provide comes from a secret source read at run time (`{env: NAME}` or `{file: /path}` under a field ending in `From`)";

/// Which machines a level's patches are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `spec.patches`: every machine.
    Cluster,
    /// `spec.controlPlane.patches`: the control planes.
    ControlPlane,
    /// `spec.workers[].patches`: one pool's workers.
    Pool,
}

/// A patch and where it is written.
#[derive(Debug, Clone, Copy)]
pub struct Located<'a> {
    /// Its field path (`spec.workers[1].patches[0]`).
    pub index: usize,
    /// Its level.
    pub level: Level,
    /// The pool's position in `spec.workers` for a pool's patch.
    pub pool: Option<usize>,
    /// The patch.
    pub patch: &'a Patch,
}

impl Located<'_> {
    /// The patch's field path in the cluster file.
    pub fn path(&self) -> String {
        match (self.level, self.pool) {
            (Level::Cluster, _) => format!("spec.patches[{}]", self.index),
            (Level::ControlPlane, _) => format!("spec.controlPlane.patches[{}]", self.index),
            (Level::Pool, pool) => {
                format!(
                    "spec.workers[{}].patches[{}]",
                    pool.unwrap_or(0),
                    self.index
                )
            }
        }
    }

    /// The patch as a JSON value.
    pub fn value(&self) -> Value {
        Value::Object(self.patch.0.clone())
    }
}

/// The patches of one level.
fn level<'a>(patches: &'a [Patch], level: Level, pool: Option<usize>) -> Vec<Located<'a>> {
    patches
        .iter()
        .enumerate()
        .map(|(index, patch)| Located {
            index,
            level,
            pool,
            patch,
        })
        .collect()
}

impl ClusterSpec {
    /// The patches a machine of `pool` takes (`None`: a control plane), in the order they
    /// apply: the cluster's, then its own level's.
    pub fn patches_of(&self, pool: Option<&str>) -> Vec<Located<'_>> {
        let mut out = level(&self.patches, Level::Cluster, None);
        match pool {
            None => out.extend(level(
                &self.control_plane.patches,
                Level::ControlPlane,
                None,
            )),
            Some(name) => {
                if let Some((index, pool)) = self
                    .workers
                    .iter()
                    .enumerate()
                    .find(|(_, p)| p.pool == name)
                {
                    out.extend(level(&pool.patches, Level::Pool, Some(index)));
                }
            }
        }
        out
    }

    /// Every patch of the file, each level once.
    pub fn all_patches(&self) -> Vec<Located<'_>> {
        let mut out = level(&self.patches, Level::Cluster, None);
        out.extend(level(
            &self.control_plane.patches,
            Level::ControlPlane,
            None,
        ));
        for (index, pool) in self.workers.iter().enumerate() {
            out.extend(level(&pool.patches, Level::Pool, Some(index)));
        }
        out
    }
}

/// The rules of every patch of `spec`: bounds, secrets, fields capstan owns, and the
/// distribution's own (Talos's schema is judged by `talos::patches` on the rendered
/// configs).
pub fn check(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let counts = std::iter::once(("spec.patches".to_owned(), spec.patches.len()))
        .chain(std::iter::once((
            "spec.controlPlane.patches".to_owned(),
            spec.control_plane.patches.len(),
        )))
        .chain(
            spec.workers
                .iter()
                .enumerate()
                .map(|(i, pool)| (format!("spec.workers[{i}].patches"), pool.patches.len())),
        );
    for (path, count) in counts {
        if count > MAX_PATCHES {
            out.push(
                file.error(
                    &path,
                    format!("{count} patches: at most {MAX_PATCHES} per level"),
                )
                .with_hint("merge them: one patch may set many fields"),
            );
            return;
        }
    }
    let mut findings = Vec::new();
    for located in spec.all_patches() {
        let size = serde_json::to_string(&located.patch.0).map_or(usize::MAX, |t| t.len());
        if size > MAX_PATCH_BYTES {
            out.push(
                file.error(&located.path(), format!("this patch is {size} bytes: at most {MAX_PATCH_BYTES}"))
                    .with_hint("a large file belongs in the template or in a ConfigMap Flux applies, not in a machine's configuration"),
            );
            return;
        }
    }
    match spec.kubernetes.distribution {
        Distribution::Talos => talos::check(&mut findings, spec, file),
        Distribution::Kubeadm => kubeadm::check(&mut findings, spec, file),
        Distribution::K3s => k3s::check(&mut findings, spec, file),
    }
    for located in spec.all_patches() {
        let path = located.path();
        let mut secrets = Vec::new();
        for (key, value) in &located.patch.0 {
            secrets::find(value, &format!("{path}.{key}"), key, &mut secrets);
        }
        for (field, what) in secrets {
            // A field refused as capstan's is not refused twice.
            if findings.iter().any(|d: &Diagnostic| {
                d.field
                    .as_deref()
                    .is_some_and(|f| field.starts_with(f) || f.starts_with(&field))
            }) {
                continue;
            }
            findings.push(
                file.error(&field, format!("this value looks like {what}"))
                    .with_hint(SECRET_SOURCES_HINT),
            );
        }
    }
    findings.truncate(MAX_FINDINGS);
    out.extend(findings);
}

/// A field capstan owns, and what to use instead.
#[derive(Debug, Clone, Copy)]
pub struct Owned {
    /// The field's path in the document, `.`-separated; a segment ending in `*` matches every
    /// key with that prefix, and a list is looked into item by item.
    pub path: &'static str,
    /// What to write instead (a first-class field, or why it is capstan's).
    pub instead: &'static str,
}

/// Where `owned` is set in `value` (a document or a patch), as paths under `base`.
pub fn find_owned(value: &Value, owned: &Owned, base: &str) -> Vec<String> {
    let segments: Vec<&str> = owned.path.split('.').collect();
    let mut out = Vec::new();
    walk(value, &segments, base.to_owned(), &mut out);
    out
}

fn walk(value: &Value, segments: &[&str], path: String, out: &mut Vec<String>) {
    let Some((first, rest)) = segments.split_first() else {
        out.push(path);
        return;
    };
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let matches = match first.strip_suffix('*') {
                    Some(prefix) => key.starts_with(prefix),
                    None => key == first,
                };
                if matches && !merge::is_delete(child) {
                    walk(child, rest, format!("{path}.{key}"), out);
                }
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                walk(item, segments, format!("{path}[{index}]"), out);
            }
        }
        _ => {}
    }
}

/// The refusal of an owned field set at `path`.
pub fn owned_finding(file: &SourceFile, path: &str, owned: &Owned) -> Diagnostic {
    let field = path.rsplit(['.', ']']).next().unwrap_or(path);
    file.error(
        path,
        format!("`{field}` is capstan's to set, not a patch's"),
    )
    .with_hint(format!("use {}", owned.instead))
}

/// The digest of what `pool`'s machines (`None`: the control planes) take from patches: the
/// first 12 hex digits of a sha1 over the distribution's view of them for that role, `None`
/// when no patch reaches them (their spec hash is then the one they had without patches).
pub fn digest(spec: &ClusterSpec, pool: Option<&str>) -> Option<smol_str::SmolStr> {
    use sha1::{Digest, Sha1};
    let reaching: Vec<Value> = match spec.kubernetes.distribution {
        Distribution::Talos => spec.patches_of(pool).iter().map(Located::value).collect(),
        Distribution::Kubeadm => kubeadm::reaching(spec, pool),
        Distribution::K3s => k3s::reaching(spec, pool),
    };
    if reaching.is_empty() {
        return None;
    }
    let mut text = String::new();
    merge::canonical(&Value::Array(reaching), &mut text);
    let digest = Sha1::digest(text.as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    Some(hex.into())
}

/// What the patches make of the configuration of `pool`'s machines (`None`: the control
/// planes), as text a preview diffs: kubeadm's documents merged by kind (those that reach the
/// role), K3s's `config.yaml` keys the role reads; for Talos, the patches themselves (the
/// preview diffs the rendered machine config instead, `talos::patches::rendered_config`).
pub fn view(spec: &ClusterSpec, pool: Option<&str>) -> String {
    let documents: Vec<Value> = match spec.kubernetes.distribution {
        Distribution::Kubeadm => kubeadm::KINDS
            .iter()
            .filter(|(kind, _, _)| {
                pool.is_none() || matches!(*kind, "JoinConfiguration" | "KubeletConfiguration")
            })
            .filter_map(|(kind, api, _)| {
                let merged = kubeadm::merged(&spec.patches_of(pool), kind)?;
                let mut document = serde_json::json!({"apiVersion": api, "kind": kind});
                if let Value::Object(map) = &mut document {
                    map.extend(merged);
                }
                Some(document)
            })
            .collect(),
        Distribution::K3s => {
            let settings = k3s::settings(spec, pool);
            if settings.is_empty() {
                Vec::new()
            } else {
                vec![Value::Object(settings)]
            }
        }
        Distribution::Talos => spec.patches_of(pool).iter().map(Located::value).collect(),
    };
    let mut out = String::new();
    for document in documents {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&document).unwrap_or_default());
    }
    out
}

#[cfg(test)]
mod tests;
