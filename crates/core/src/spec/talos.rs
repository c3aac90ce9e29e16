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
