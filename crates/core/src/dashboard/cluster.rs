//! A cluster's page: its facts, nodes, conditions, certificate expiry and rollout.

use std::collections::BTreeSet;

use maud::html;

use super::{
    View, duration, header, not_found_page, page, phase_badge, revision, since, time, timeline,
    waits,
};
use crate::plan::Action;
use crate::status::conditions;

/// `GET /clusters/NAME`: cluster `name`'s page, or the 404 page when the fleet has no such
/// cluster (`name` is only looked up, never used otherwise).
pub fn cluster_page(view: &View<'_>, name: &str) -> Result<String, String> {
    let Some((name, cluster)) = view.status.clusters.get_key_value(name) else {
        return Err(not_found_page("such cluster", view.generation));
    };
    let observed = view.observed.and_then(|o| o.clusters.get(name));
    let leaving: BTreeSet<String> = view
        .plan
        .and_then(|plan| plan.cluster(name))
        .map(|plan| plan.predicted.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(|step| match &step.action {
            Action::DestroyMachine { machine, .. } => Some(machine.name.to_string()),
            _ => None,
        })
        .collect();
    let distribution = view
        .desired
        .and_then(|d| d.clusters.get(name))
        .map(|c| c.spec.kubernetes.distribution.name());
    let ready = cluster
        .nodes
        .iter()
        .filter(|n| n.ready == Some(true))
        .count();
    let blocked = cluster
        .conditions
        .iter()
        .find(|c| c.kind == conditions::BLOCKED && c.is_true());
    let main = html! {
        nav aria-label="Breadcrumb" { a href="/" { "Fleet" } " › " (name) }
        h1 { (name) " " (phase_badge(cluster.phase)) }
        dl.facts {
            dt { "Nodes Ready" }
            dd.nodes {
                (ready) " of "
                @match cluster.declared_nodes { Some(d) => { (d) " declared" }, None => { (cluster.nodes.len()) " present" } }
            }
            dt { "Version" }
            dd { @match cluster.version { Some(v) => { "v" (v) }, None => "not initialised" } }
            @if let Some(distribution) = distribution { dt { "Distribution" } dd { (distribution) } }
            dt { "Certificates expire" }
            dd { @match cluster.certificate_expiry { Some(at) => (time(at)), None => "unknown (no control plane answers)" } }
            @if let Some(converged) = &cluster.converged {
                dt { "Converged" }
                dd { "at " (revision(&converged.revision, view.links)) ", since " (since(converged.since, view.now)) }
            }
            @if let Some(step) = &cluster.last_step {
                dt { "Last step" }
                dd {
                    code { (step.action.name()) } @if let Some(m) = &step.machine { " " code { (m) } }
                    @if step.succeeded { " ✓ succeeded" } @else { " ✕ failed (" (step.failures) " in a row)" }
                    ": " (step.message) " at " (time(step.at))
                    @if let Some(rev) = &step.revision { ", decided at " (revision(rev, view.links)) }
                }
            }
            dt { "Waiting on" }
            dd { (waits(&cluster.waiting_on, view.now)) }
        }
        @if let Some(blocked) = blocked {
            div.alert role="note" { strong { "✕ Blocked (" (blocked.reason) "): " } (blocked.message) }
        }
        @for refusal in &cluster.refusals {
            div.alert role="note" {
                strong { "Refused by rule " (refusal.rule) " (" (refusal.title) "): " }
                (refusal.message)
            }
        }
        (timeline::section(view, name))
        section aria-labelledby="nodes-title" {
            h2 #nodes-title { "Nodes" }
            div.scroll {
                table {
                    caption { "Machines and their Kubernetes nodes" }
                    (header(&["Name", "Role", "Ready", "Kubelet", "VM id", "Proxmox node", "Age"]))
                    tbody {
                        @for node in &cluster.nodes {
                            @let created = observed.and_then(|o| o.machines.get(&node.name)).map(|m| m.created);
                            tr data-node=(node.name.as_str()) {
                                th scope="row" {
                                    (node.name)
                                    @if leaving.contains(node.name.as_str()) { " " span.tag { "to be removed" } }
                                    @if node.cordoned { " " span.tag { "cordoned" } }
                                }
                                td { (node.role) }
                                td {
                                    @match node.ready {
                                        Some(true) => span.ok { "✓ Ready" },
                                        Some(false) => span.bad { "✕ NotReady" },
                                        None => span.pending { "… no Node yet" },
                                    }
                                }
                                td { @match node.version { Some(v) => { "v" (v) }, None => "–" } }
                                td { (node.vm_id) }
                                td { (node.proxmox_node) }
                                td {
                                    @match created {
                                        Some(at) => (duration(view.now.duration_since(at).unsigned_abs())),
                                        None => "–",
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="conditions-title" {
            h2 #conditions-title { "Conditions" }
            div.scroll {
                table {
                    caption { "Conditions, as Kubernetes spells them" }
                    (header(&["Type", "Status", "Reason", "Message", "Since"]))
                    tbody {
                        @for condition in &cluster.conditions {
                            tr {
                                th scope="row" { (condition.kind) }
                                td { (condition.status) }
                                td { (condition.reason) }
                                td { (condition.message) }
                                td { (time(condition.last_transition_time)) }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(page(name, view.generation, &main))
}
