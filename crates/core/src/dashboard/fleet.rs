//! The fleet page: the source, leadership, one card per cluster and the Proxmox nodes.

use std::collections::BTreeMap;

use maud::{Markup, html};

use super::{View, header, page, phase_badge, revision, since, time, waits};
use crate::plan::Action;
use crate::status::{ClusterStatus, conditions};

/// `GET /`: the fleet.
pub fn fleet_page(view: &View<'_>) -> String {
    let status = view.status;
    let main = html! {
        h1 { "Fleet" }
        (source(view))
        section aria-labelledby="clusters-title" {
            h2 #clusters-title { "Clusters" }
            @if status.clusters.is_empty() {
                p { "No cluster yet: no pass has completed, or the repository declares none." }
            } @else {
                ul.cards {
                    @for (name, cluster) in &status.clusters {
                        li { (card(view, name, cluster)) }
                    }
                }
            }
        }
        (super::preview::list(view))
        (proxmox_nodes(view))
    };
    page("Fleet", view.generation, &main)
}

/// The source: revision, `SourceAvailable`, errors, leadership.
fn source(view: &View<'_>) -> Markup {
    let status = view.status;
    let available = status
        .conditions
        .iter()
        .find(|c| c.kind == conditions::SOURCE_AVAILABLE);
    html! {
        section aria-labelledby="source-title" {
            h2 #source-title { "Source" }
            dl.facts {
                dt { "Revision" }
                dd {
                    @match &status.revision {
                        Some(rev) => (revision(rev, view.links)),
                        None => "none read yet",
                    }
                }
                @if let Some(condition) = available {
                    dt { "Source available" }
                    dd {
                        @if condition.is_true() { span.ok { "✓ yes" } } @else { span.bad { "✕ no" } }
                        " (" (condition.reason) ") " (condition.message)
                        ", since " (since(condition.last_transition_time, view.now))
                    }
                }
                @if let Some(updated) = status.updated {
                    dt { "Status computed" }
                    dd { (time(updated)) }
                }
                @if let Some(leadership) = &status.leadership {
                    dt { "Leadership" }
                    dd {
                        "this replica (" code { (leadership.identity) } ") is "
                        strong { (leadership.role) }
                        @if let Some(leader) = &leadership.leader {
                            "; the Lease " code { (leadership.lease) } " is held by " code { (leader) }
                        }
                    }
                }
            }
            @if !status.repository_errors.is_empty() {
                div.alert role="alert" {
                    h3 { "✕ The repository has errors: nothing new is applied" }
                    ul { @for error in &status.repository_errors { li { (error) } } }
                }
            }
            @if !status.events.is_empty() {
                h3 { "Source events" }
                ul { @for event in &status.events { li { (event) } } }
            }
        }
    }
}

/// One cluster's card.
fn card(view: &View<'_>, name: &str, cluster: &ClusterStatus) -> Markup {
    let ready = cluster
        .nodes
        .iter()
        .filter(|n| n.ready == Some(true))
        .count();
    let distribution = view
        .desired
        .and_then(|d| d.clusters.get(name))
        .map(|c| c.spec.kubernetes.distribution.name());
    let acted_on = cluster
        .last_step
        .as_ref()
        .and_then(|s| s.revision.as_deref())
        .or(cluster.converged.as_ref().map(|c| c.revision.as_str()));
    let blocked = cluster
        .conditions
        .iter()
        .find(|c| c.kind == conditions::BLOCKED && c.is_true());
    let joining: Vec<&str> = cluster
        .nodes
        .iter()
        .filter(|n| n.ready != Some(true))
        .map(|n| n.name.as_str())
        .collect();
    html! {
        article.card aria-labelledby=(format!("card-{name}")) data-cluster=(name) data-phase=(format!("{}", cluster.phase)) {
            h3 #(format!("card-{name}")) { a href=(format!("/clusters/{name}")) { (name) } }
            p { (phase_badge(cluster.phase)) }
            dl.facts {
                dt { "Nodes Ready" }
                dd.nodes {
                    (ready) " of "
                    @match cluster.declared_nodes {
                        Some(declared) => { (declared) " declared" },
                        None => { (cluster.nodes.len()) " present" },
                    }
                    @if !joining.is_empty() {
                        " · not Ready yet: "
                        @for (i, node) in joining.iter().enumerate() {
                            @if i > 0 { ", " }
                            code { (node) }
                        }
                    }
                }
                dt { "Version" }
                dd { @match cluster.version { Some(v) => { "v" (v) }, None => "not initialised" } }
                @if let Some(distribution) = distribution {
                    dt { "Distribution" }
                    dd { (distribution) }
                }
                dt { "Revision acted on" }
                dd { @match acted_on { Some(rev) => (revision(rev, view.links)), None => "none yet" } }
                dt { "Waiting on" }
                dd { (waits(&cluster.waiting_on, view.now)) }
                @if let Some(step) = cluster.next_steps.first() {
                    dt { "Next step" }
                    dd { code { (step) } @if cluster.next_steps.len() > 1 { " and " (cluster.next_steps.len() - 1) " more" } }
                }
            }
            @if let Some(blocked) = blocked {
                div.alert role="note" {
                    strong { "✕ Blocked (" (blocked.reason) "): " }
                    (blocked.message)
                }
            }
            @for refusal in &cluster.refusals {
                div.alert role="note" {
                    strong { "Refused by rule " (refusal.rule) " (" (refusal.title) "): " }
                    (refusal.message)
                }
            }
            @for suspension in &cluster.suspended {
                p.note { "⏸ Suspended" @if let Some(reason) = &suspension.reason { ": " (reason) } }
            }
        }
    }
}

/// The Proxmox nodes: memory used, and reserved by the clones the plans still predict.
fn proxmox_nodes(view: &View<'_>) -> Markup {
    let Some(nodes) = view.observed.and_then(|o| o.proxmox_nodes.as_ref()) else {
        return html! {};
    };
    let mut reserved: BTreeMap<&str, u64> = BTreeMap::new();
    for step in view
        .plan
        .iter()
        .flat_map(|p| &p.clusters)
        .flat_map(|c| &c.predicted)
    {
        if let Action::CreateMachine {
            machine,
            proxmox_node,
            ..
        } = &step.action
        {
            *reserved.entry(proxmox_node.as_str()).or_default() += u64::from(machine.memory_mib);
        }
    }
    html! {
        section aria-labelledby="proxmox-title" {
            h2 #proxmox-title { "Proxmox nodes" }
            div.scroll {
                table {
                    caption { "Memory in MiB; reserved: planned clones not made yet" }
                    (header(&["Node", "Online", "VMs", "Used", "Reserved", "Total"]))
                    tbody {
                        @for (name, node) in nodes {
                            tr {
                                th scope="row" { (name) }
                                td { @if node.online { "✓ yes" } @else { "✕ no" } }
                                td { (node.vm_count) }
                                td { (node.memory_used_mib) }
                                td { (reserved.get(name.as_str()).copied().unwrap_or(0)) }
                                td { (node.memory_total_mib) }
                            }
                        }
                    }
                }
            }
        }
    }
}
