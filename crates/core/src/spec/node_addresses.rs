//! Static node addresses of one cluster (`network.nodeAddresses`, every distribution): the
//! range holds every machine a rollout can run at once, inside `network.nodes` and outside what
//! belongs to something else; a gateway, nameservers and a search domain come only with it.

use std::net::IpAddr;

use super::diagnostic::{Diagnostic, SourceFile};
use super::limits::MAX_NAMESERVERS;
use super::types::ClusterSpec;

/// Rules of `network.nodeAddresses`, `network.gateway` and `network.nameservers`.
pub fn within(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let network = &spec.network;
    let Some(range) = network.node_addresses else {
        for (field, given) in [
            ("spec.network.gateway", network.gateway.is_some()),
            ("spec.network.nameservers", !network.nameservers.is_empty()),
            ("spec.network.searchDomain", network.search_domain.is_some()),
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
    if let Some(domain) = network
        .search_domain
        .as_deref()
        .filter(|d| !super::values::is_dns1123_subdomain(d))
    {
        out.push(
            file.error(
                "spec.network.searchDomain",
                format!(
                    "`{}` is not a DNS domain",
                    domain
                        .chars()
                        .take(64)
                        .flat_map(char::escape_debug)
                        .collect::<String>()
                ),
            )
            .with_hint("lowercase labels joined by dots, e.g. `lab.example`"),
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
