//! The rules a Talos cluster follows beyond kubeadm's: `spec.talos` names the Talos release,
//! which must run the cluster's Kubernetes release (Talos's support matrix, see
//! [`super::talos_versions`]), and the cluster's Proxmox connection names the ISO storage its
//! machines' configuration images are uploaded to (Talos reads its machine config from a NoCloud
//! volume; capstan never uses snippets, which the API cannot upload). Its VMs may take static
//! addresses from `network.nodeAddresses`, which must hold every machine a rollout can run at
//! once.

use std::net::IpAddr;

use super::diagnostic::{Diagnostic, SourceFile};
use super::limits::MAX_NAMESERVERS;
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
    node_addresses(out, spec, file);
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

/// Fields only a Talos cluster has: refused on kubeadm and K3s, whose nodes take DHCP leases.
pub fn without_talos_fields(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let network = &spec.network;
    let name = spec.kubernetes.distribution.name();
    let fields = [
        (
            "spec.network.nodeAddresses",
            network.node_addresses.is_some(),
        ),
        ("spec.network.gateway", network.gateway.is_some()),
        ("spec.network.nameservers", !network.nameservers.is_empty()),
    ];
    for (field, given) in fields {
        if given {
            out.push(
                file.error(field, format!("static node addresses are for Talos clusters, but the distribution is {name}"))
                    .with_hint("remove it: kubeadm and K3s nodes take their addresses from DHCP"),
            );
        }
    }
}

/// Rules of `network.nodeAddresses`, `network.gateway` and `network.nameservers`.
fn node_addresses(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let network = &spec.network;
    let Some(range) = network.node_addresses else {
        for (field, given) in [
            ("spec.network.gateway", network.gateway.is_some()),
            ("spec.network.nameservers", !network.nameservers.is_empty()),
        ] {
            if given {
                out.push(
                    file.error(field, "a gateway and nameservers are for static node addresses, but `network.nodeAddresses` is not set")
                        .with_hint("add `nodeAddresses: <first>-<last>` under `network`, or remove it (DHCP gives both)"),
                );
            }
        }
        return;
    };
    let field = "spec.network.nodeAddresses";
    let nodes = network.nodes;
    let inside = |address: IpAddr| {
        nodes.contains(&address) && address != nodes.network() && address != nodes.broadcast()
    };
    if !inside(range.first) || !inside(range.last) {
        out.push(
            file.error(
                field,
                format!("{range} is not within the host addresses of network.nodes {nodes}"),
            )
            .with_hint("the VMs live in network.nodes: pick a range of free addresses in it"),
        );
    }
    if let Some(reserved) = network
        .reserved
        .iter()
        .find(|r| r.first <= range.last && range.first <= r.last)
    {
        out.push(
            file.error(field, format!("{range} overlaps the reserved range {reserved}"))
                .with_hint("reserved addresses belong to something else (e.g. the MetalLB pool): pick a range outside them"),
        );
    }
    let endpoint = spec.endpoint.address;
    if range.contains(endpoint) {
        out.push(
            file.error(field, format!("{range} contains the endpoint address {endpoint}"))
                .with_hint("the control planes announce the endpoint as a VIP: keep it out of the nodes' range"),
        );
    }
    let needed = u128::from(spec.control_plane.replicas)
        + u128::from(spec.worker_replicas())
        + u128::from(spec.rollout.max_surge);
    let size = range_size(range.first, range.last);
    if size < needed {
        out.push(
            file.error(field, format!("{range} holds {size} addresses, but {needed} machines can run at once ({} control planes, {} workers, maxSurge {})", spec.control_plane.replicas, spec.worker_replicas(), spec.rollout.max_surge))
                .with_hint(format!("widen the range to at least {needed} addresses")),
        );
    }
    let gateway = network.gateway_or_default();
    if !inside(gateway) || range.contains(gateway) {
        out.push(
            file.error("spec.network.gateway", format!("the gateway {gateway} must be a host address of network.nodes {nodes} outside nodeAddresses {range}"))
                .with_hint("set `network.gateway` to the router of the VMs' subnet"),
        );
    }
    if network.nameservers.len() > MAX_NAMESERVERS {
        out.push(file.error(
            "spec.network.nameservers",
            format!(
                "{} nameservers: at most {MAX_NAMESERVERS} (the resolver reads no more)",
                network.nameservers.len()
            ),
        ));
    }
}

/// How many addresses `first..=last` holds (0 across families).
fn range_size(first: IpAddr, last: IpAddr) -> u128 {
    match (first, last) {
        (IpAddr::V4(first), IpAddr::V4(last)) => {
            u128::from(u32::from(last).saturating_sub(u32::from(first))) + 1
        }
        (IpAddr::V6(first), IpAddr::V6(last)) => u128::from(last)
            .saturating_sub(u128::from(first))
            .saturating_add(1),
        _ => 0,
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
