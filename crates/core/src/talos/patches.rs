//! Talos patches judged at validation time: for the control plane and each pool, the machine
//! config capstan would render (from placeholder secrets: the schema judges shapes, and no
//! secret exists before the cluster does) with the level's patches merged, each document
//! judged by Talos's published schema (`reference/config.schema.json`). A finding names the
//! patch field that made the document invalid, in the schema's words; a bad patch is refused
//! in the repository, never found by a machine that does not boot.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;

use super::config::render_machine_config;
use super::facts::{ClusterFacts, MacAddress, MachineRole, NodeFacts};
use super::secrets::{BUNDLE_FORMAT, CertificateAuthority, SecretsBundle};
use crate::spec::diagnostic::{Diagnostic, SourceFile};
use crate::spec::patches::Located;
use crate::spec::patches::schema::{Definitions, SchemaFinding, join_path};
use crate::spec::patches::talos::{apply_one, kind_of};
use crate::spec::{ClusterSpec, Patch};

/// The most schema findings reported for one machine config.
const MAX_FINDINGS: usize = 10;

/// The schema definition of each document kind Talos 1.13 knows (`v1alpha1`: no kind).
fn definitions() -> &'static (Definitions, BTreeMap<String, String>) {
    static DEFINITIONS: OnceLock<(Definitions, BTreeMap<String, String>)> = OnceLock::new();
    DEFINITIONS.get_or_init(|| {
        let schema: Value = serde_json::from_str(include_str!("reference/config.schema.json"))
            .expect("Talos's schema built into capstan is JSON");
        // Each definition a document may be names its kind in `properties.kind.enum`.
        let mut by_kind = BTreeMap::new();
        if let Some(Value::Object(defs)) = schema.get("$defs") {
            for (name, def) in defs {
                let kinds = def
                    .pointer("/properties/kind/enum")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str);
                for kind in kinds {
                    by_kind.insert(kind.to_owned(), name.clone());
                }
            }
        }
        by_kind.insert(String::new(), "v1alpha1.Config".to_owned());
        let names: Vec<&str> = by_kind.values().map(String::as_str).collect();
        (Definitions::compile(&schema, &names), by_kind)
    })
}

/// What Talos's schema says of one document: unknown kinds are refused by name.
fn judge(document: &Value) -> Result<Vec<SchemaFinding>, String> {
    let (definitions, by_kind) = definitions();
    let kind = document.get("kind").and_then(Value::as_str).unwrap_or("");
    match by_kind.get(kind) {
        Some(name) => Ok(definitions.findings(name, document, MAX_FINDINGS)),
        None => Err(kind.to_owned()),
    }
}

/// Placeholders of the shape Talos requires: the schema judges shapes, not keys.
fn placeholder_bundle() -> SecretsBundle {
    let pem =
        |label: &str| format!("-----BEGIN {label}-----\nplaceholder\n-----END {label}-----\n");
    let authority = || CertificateAuthority {
        certificate_pem: pem("CERTIFICATE"),
        key_pem: pem("PRIVATE KEY"),
    };
    SecretsBundle {
        format: BUNDLE_FORMAT,
        cluster_id: "cGxhY2Vob2xkZXItcGxhY2Vob2xkZXItcGxhY2Vob2w=".into(),
        cluster_secret: "cGxhY2Vob2xkZXItcGxhY2Vob2xkZXItcGxhY2Vob2w=".into(),
        bootstrap_token: "abcdef.0123456789abcdef".into(),
        secretbox_encryption_secret: "cGxhY2Vob2xkZXItcGxhY2Vob2xkZXItcGxhY2Vob2w=".into(),
        trustd_token: "trustd.0123456789trustd".into(),
        os_ca: authority(),
        kubernetes_ca: authority(),
        etcd_ca: authority(),
        aggregator_ca: authority(),
        service_account_key_pem: pem("EC PRIVATE KEY"),
    }
}

/// The machine configs of `spec` (control plane, then each pool) rendered with their patches,
/// each document judged by Talos's schema. Renders nothing when the facts are not valid (their
/// own rules report that).
pub fn check(out: &mut Vec<Diagnostic>, name: &str, spec: &ClusterSpec, file: &SourceFile) {
    if spec.all_patches().is_empty() && spec.kubernetes.registries.is_empty() {
        return;
    }
    let Some(talos) = &spec.talos else { return };
    let cluster = ClusterFacts {
        cluster_name: name.to_owned(),
        endpoint_host: spec.endpoint.host.clone(),
        endpoint_address: spec.endpoint.address,
        endpoint_port: spec.endpoint.port,
        kubernetes_version: spec.kubernetes.version,
        talos_version: talos.version,
        installer_image: talos.installer_image.clone(),
        network: spec.cluster_network(None),
        authentication: spec.kubernetes.authentication.clone(),
    };
    let targets = std::iter::once((None, MachineRole::ControlPlane)).chain(
        spec.workers
            .iter()
            .map(|pool| (Some(pool.pool.as_str()), MachineRole::Worker)),
    );
    let mut seen = std::collections::BTreeSet::new();
    for (pool, role) in targets {
        let node = NodeFacts {
            role,
            hostname: format!("{name}-{}-00000", pool.unwrap_or("cp")),
            install_disk: "/dev/sda".to_owned(),
            mac_address: MacAddress([0xbc, 0x24, 0x11, 0, 0, 1]),
            static_address: None,
            register_with_taints: Vec::new(),
            patches: Vec::new(),
            links: Vec::new(),
            volumes: Vec::new(),
        };
        let Some(config) = with_registries(
            render_machine_config(&cluster, &node, &placeholder_bundle()).ok(),
            spec,
        ) else {
            return;
        };
        let Ok(mut documents): Result<Vec<Value>, _> = serde_saphyr::from_str_multiple(&config)
        else {
            return;
        };
        for finding in judge_registries(&documents, file) {
            if seen.insert((finding.field.clone(), finding.message.clone())) {
                out.push(finding);
            }
        }
        let patches = spec.patches_of(pool);
        for (index, located) in patches.iter().enumerate() {
            apply_one(&mut documents, &located.value());
            for finding in judge_all(&documents, &patches[..=index], file) {
                if seen.insert((finding.field.clone(), finding.message.clone())) {
                    out.push(finding);
                }
            }
        }
    }
}

/// The findings of every document, each at the patch field that made it so.
fn judge_all(documents: &[Value], applied: &[Located<'_>], file: &SourceFile) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for document in documents {
        match judge(document) {
            Ok(findings) => {
                for finding in findings {
                    let field = locate(document, &finding.path, applied);
                    out.push(
                        file.error(&field, finding.message)
                            .with_hint("Talos v1.13's machine-config schema refuses it (crates/core/src/talos/reference/config.schema.json): fix the patch's value"),
                    );
                }
            }
            Err(kind) => {
                let at = applied
                    .iter()
                    .rev()
                    .find(|l| kind_of(&l.value()) == Some(kind.as_str()))
                    .map(|l| format!("{}.kind", l.path()));
                if let Some(at) = at {
                    out.push(
                        file.error(&at, format!("`{kind}` is not a document kind of Talos v1.13"))
                            .with_hint("see Talos's configuration reference for the document kinds of the release"),
                    );
                }
            }
        }
    }
    out
}

/// The field of the latest patch that reaches `path` of `document`, as deep as it goes;
/// the last patch on that document when none does.
fn locate(document: &Value, path: &[String], applied: &[Located<'_>]) -> String {
    let kind = document.get("kind").and_then(Value::as_str);
    let mut best: Option<(usize, String)> = None;
    for located in applied.iter().rev() {
        let patch = located.value();
        if kind_of(&patch) != kind {
            continue;
        }
        let depth = reach(document, &patch, path);
        if depth > 0 && best.as_ref().is_none_or(|(d, _)| depth > *d) {
            best = Some((
                depth,
                join_path(
                    &located.path(),
                    &patch_path(document, &patch, &path[..depth]),
                ),
            ));
        }
    }
    match best {
        Some((_, field)) => field,
        None => applied
            .iter()
            .rev()
            .find(|l| kind_of(&l.value()) == kind)
            .map_or_else(|| "spec.patches".to_owned(), Located::path),
    }
}

/// How many segments of `path` (in the merged document) the patch holds.
fn reach(document: &Value, patch: &Value, path: &[String]) -> usize {
    let (mut merged, mut mine) = (document, patch);
    for (depth, segment) in path.iter().enumerate() {
        let next = match (merged, mine) {
            (Value::Object(m), Value::Object(p)) => m.get(segment).zip(p.get(segment)),
            (Value::Array(m), Value::Array(p)) => segment.parse::<usize>().ok().and_then(|i| {
                // The patch's items were appended after the base's.
                let offset = m.len().checked_sub(p.len())?;
                let j = i.checked_sub(offset)?;
                m.get(i).zip(p.get(j))
            }),
            _ => None,
        };
        match next {
            Some((m, p)) => (merged, mine) = (m, p),
            None => return depth,
        }
    }
    path.len()
}

/// `path` of the merged document as indexes into the patch's own lists.
fn patch_path(document: &Value, patch: &Value, path: &[String]) -> Vec<String> {
    let (mut merged, mut mine) = (document, patch);
    let mut out = Vec::new();
    for segment in path {
        match (merged, mine) {
            (Value::Array(m), Value::Array(p)) => {
                let i = segment.parse::<usize>().unwrap_or(0);
                let j = i.saturating_sub(m.len().saturating_sub(p.len()));
                out.push(j.to_string());
                match m.get(i).zip(p.get(j)) {
                    Some((a, b)) => (merged, mine) = (a, b),
                    None => break,
                }
            }
            (Value::Object(m), Value::Object(p)) => {
                out.push(segment.clone());
                match m.get(segment).zip(p.get(segment)) {
                    Some((a, b)) => (merged, mine) = (a, b),
                    None => break,
                }
            }
            _ => break,
        }
    }
    out
}

/// The machine config of `pool`'s machines (`None`: a control plane) of cluster `name`,
/// rendered with their patches from placeholder secrets (what a preview diffs: no secret is
/// read to show a change); `None` when the facts are not valid.
pub fn rendered_config(name: &str, spec: &ClusterSpec, pool: Option<&str>) -> Option<String> {
    let talos = spec.talos.as_ref()?;
    let cluster = ClusterFacts {
        cluster_name: name.to_owned(),
        endpoint_host: spec.endpoint.host.clone(),
        endpoint_address: spec.endpoint.address,
        endpoint_port: spec.endpoint.port,
        kubernetes_version: spec.kubernetes.version,
        talos_version: talos.version,
        installer_image: talos.installer_image.clone(),
        network: spec.cluster_network(None),
        authentication: spec.kubernetes.authentication.clone(),
    };
    let node = NodeFacts {
        role: match pool {
            None => MachineRole::ControlPlane,
            Some(_) => MachineRole::Worker,
        },
        hostname: format!("{name}-{}-00000", pool.unwrap_or("cp")),
        install_disk: "/dev/sda".to_owned(),
        mac_address: MacAddress([0xbc, 0x24, 0x11, 0, 0, 1]),
        static_address: None,
        register_with_taints: Vec::new(),
        patches: patches_for(spec, pool),
        // The pool's cards and user volumes are rendered at the step; validation judges the
        // patches against the rest of the configuration.
        links: Vec::new(),
        volumes: Vec::new(),
    };
    with_registries(
        render_machine_config(&cluster, &node, &placeholder_bundle()).ok(),
        spec,
    )
}

/// `config` with the registry documents of `spec` (their passwords placeholders).
fn with_registries(config: Option<String>, spec: &ClusterSpec) -> Option<String> {
    let mut config = config?;
    let registries =
        crate::spec::registries::ResolvedRegistries::placeholders(&spec.kubernetes.registries);
    super::registries::append(&mut config, &registries).ok()?;
    Some(config)
}

/// Talos's schema on the registry documents capstan renders from `kubernetes.registries`: a
/// finding names the field of the file (its own rules refuse what Talos would; this is the
/// proof they agree).
fn judge_registries(documents: &[Value], file: &SourceFile) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for document in documents {
        let kind = document.get("kind").and_then(Value::as_str).unwrap_or("");
        if !kind.starts_with("Registry") {
            continue;
        }
        for finding in judge(document).unwrap_or_default() {
            out.push(
                file.error("spec.kubernetes.registries", finding.message)
                    .with_hint("Talos v1.13's machine-config schema refuses the registry document capstan renders from this field"),
            );
        }
    }
    out
}

/// The patches of `level` for `pool`, as the renderer takes them.
pub fn patches_for(spec: &ClusterSpec, pool: Option<&str>) -> Vec<Patch> {
    spec.patches_of(pool)
        .iter()
        .map(|l| l.patch.clone())
        .collect()
}
