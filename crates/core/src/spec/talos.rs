//! The rules a Talos cluster follows beyond kubeadm's: `spec.talos` names the Talos release,
//! which must run the cluster's Kubernetes release (Talos's support matrix, see
//! [`super::talos_versions`]), and the cluster's Proxmox connection names the ISO storage its
//! machines' configuration images are uploaded to (Talos reads its machine config from a NoCloud
//! volume; capstan never uses snippets, which the API cannot upload).

use super::diagnostic::{Diagnostic, SourceFile};
use super::talos_versions::check_support;
use super::types::{ClusterSpec, Fleet};

/// Rules of `spec.talos` and of the connection a Talos cluster needs.
pub fn cluster(out: &mut Vec<Diagnostic>, fleet: &Fleet, spec: &ClusterSpec, file: &SourceFile) {
    let Some(talos) = &spec.talos else {
        out.push(
            file.error(
                "spec.kubernetes.distribution",
                "a Talos cluster names its Talos release",
            )
            .with_hint(
                "add `talos: {version: v1.13.9}` under `spec` (the release the templates run)",
            ),
        );
        return;
    };
    // A K3s build is refused on its own (without_k3s_fields).
    let kubernetes = spec.kubernetes.version;
    if kubernetes.k3s_release.is_none()
        && let Err(unsupported) = check_support(talos.version, kubernetes)
    {
        out.push(
            file.error("spec.talos.version", unsupported.to_string())
                .with_hint("pick a Kubernetes release the Talos release supports, or another Talos release"),
        );
    }
    if let Some(image) = &talos.installer_image
        && !is_image_reference(image)
    {
        out.push(
            file.error(
                "spec.talos.installerImage",
                format!(
                    "`{}` is not an image reference",
                    image.chars().take(80).collect::<String>()
                ),
            )
            .with_hint("e.g. `factory.talos.dev/installer/<schematic id>:v1.13.9`"),
        );
    }
    extensions(out, file, &talos.extensions);
    let connection = fleet.proxmox.get(&spec.proxmox);
    if connection.is_some_and(|c| c.iso_storage.is_none()) {
        out.push(
            file.error(
                "spec.proxmox",
                format!(
                    "Talos machines get their config from an ISO image, but the Proxmox connection `{}` names no `isoStorage`",
                    spec.proxmox
                ),
            )
            .with_hint(format!(
                "add `isoStorage: <a storage with content type iso, e.g. local>` under `proxmox.{}` in capstan.yaml",
                spec.proxmox
            )),
        );
    }
}

/// `isoStorage` of a Proxmox connection (at `path`): a Proxmox VE storage id.
/// `spec.talos.extensions`: each named once, as Image Factory names extensions
/// (`<owner>/<name>`, lower case).
fn extensions(out: &mut Vec<Diagnostic>, file: &SourceFile, extensions: &[String]) {
    let mut seen = std::collections::BTreeSet::new();
    for (index, name) in extensions.iter().enumerate() {
        let field = format!("spec.talos.extensions[{index}]");
        let shown: String = name.chars().take(80).collect();
        if !is_extension_name(name) {
            out.push(
                file.error(&field, format!("`{shown}` is not an extension name"))
                    .with_hint("name it as Image Factory does, e.g. `siderolabs/iscsi-tools`"),
            );
        } else if !seen.insert(name.as_str()) {
            out.push(file.error(&field, format!("`{shown}` is listed twice")));
        }
    }
}

/// `<owner>/<name>`: lower-case letters, digits, `-`, `_` and `.` on each side, at most 128.
fn is_extension_name(name: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c))
    };
    name.len() <= 128
        && name
            .split_once('/')
            .is_some_and(|(owner, rest)| part(owner) && part(rest))
}

pub fn iso_storage(out: &mut Vec<Diagnostic>, file: &SourceFile, path: &str, storage: &str) {
    if !super::values::is_storage_id(storage) {
        out.push(
            file.error(
                path,
                format!(
                    "`{}` is not a Proxmox storage id",
                    storage.chars().take(64).collect::<String>()
                ),
            )
            .with_hint("a storage id as Datacenter → Storage lists it, e.g. `local`"),
        );
    }
}

/// Whether `image` looks like `registry/path:tag` (or `@sha256:` digest): printable, no
/// spaces, bounded. Talos checks the rest when it pulls.
fn is_image_reference(image: &str) -> bool {
    (1..=255).contains(&image.len())
        && image.bytes().all(|b| b.is_ascii_graphic())
        && (image.contains(':') || image.contains('@'))
}

#[cfg(test)]
mod tests {
    use super::super::{RepoFiles, SourceText, load};

    const FLEET: &str = include_str!("../../../../examples-repo/capstan.yaml");
    const TALOS: &str = include_str!("../../../../examples-repo/clusters/talos.yaml");
    const VERSION: &str = "    version: v1.13.9\n";

    /// The findings about `spec.talos.extensions` of the example with `extensions` declared.
    fn extension_findings(extensions: &str) -> Vec<String> {
        let declared = format!("{VERSION}    extensions: {extensions}\n");
        let text = TALOS.replacen(VERSION, &declared, 1);
        let source = |path: &str, text: &str| SourceText {
            path: path.to_owned(),
            text: text.to_owned(),
        };
        let loaded = load(&RepoFiles {
            fleet: source("capstan.yaml", FLEET),
            clusters: vec![source("clusters/c.yaml", &text)],
        });
        loaded
            .diagnostics
            .0
            .iter()
            .filter(|d| {
                d.field
                    .as_deref()
                    .is_some_and(|f| f.starts_with("spec.talos"))
            })
            .map(|d| {
                let field = d.field.as_deref().unwrap_or("");
                format!("{}:{field}: {}", d.line.unwrap_or(0), d.message)
            })
            .collect()
    }

    #[test]
    fn extensions_are_named_as_image_factory_names_them_once_each() {
        let line = 1 + TALOS[..TALOS.find(VERSION).expect("the version line")]
            .lines()
            .count();
        assert_eq!(
            extension_findings("[siderolabs/iscsi-tools, siderolabs/util-linux-tools]"),
            Vec::<String>::new()
        );
        assert_eq!(
            extension_findings("[iscsi-tools, siderolabs/iscsi-tools, siderolabs/iscsi-tools]"),
            vec![
                format!(
                    "{}:spec.talos.extensions[0]: `iscsi-tools` is not an extension name",
                    line + 1
                ),
                format!(
                    "{}:spec.talos.extensions[2]: `siderolabs/iscsi-tools` is listed twice",
                    line + 1
                ),
            ]
        );
    }
}
