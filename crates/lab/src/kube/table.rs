//! Server-side printing: the `meta.k8s.io/v1` `Table` that `kubectl get` asks for
//! (`Accept: application/json;as=Table;...`), with the columns the real server prints for
//! nodes, pods, deployments and the other kinds (wide columns at priority 1).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::resources::ResourceType;

struct Column {
    name: &'static str,
    kind: &'static str,
    priority: u8,
}

const fn column(name: &'static str, kind: &'static str, priority: u8) -> Column {
    Column {
        name,
        kind,
        priority,
    }
}

/// Builds the table for `objects`. `include` is the request's `includeObject` (`None`,
/// `Object`, default `Metadata`).
pub(crate) fn table(
    resource: &ResourceType,
    objects: &[Value],
    revision: u64,
    include: &str,
    now: Timestamp,
) -> Value {
    let columns = columns(resource.plural);
    let definitions: Vec<Value> = columns
        .iter()
        .map(|c| {
            let mut definition = json!({
                "name": c.name, "type": c.kind, "format": "", "description": "", "priority": c.priority,
            });
            if c.name == "Name" {
                definition["format"] = json!("name");
            }
            definition
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut row = json!({"cells": cells(resource.plural, object, now)});
            match include {
                "None" => {}
                "Object" => row["object"] = object.clone(),
                _ => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": object["metadata"],
                    });
                }
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": revision.to_string()},
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

fn columns(plural: &str) -> Vec<Column> {
    match plural {
        "nodes" => vec![
            column("Name", "string", 0),
            column("Status", "string", 0),
            column("Roles", "string", 0),
            column("Age", "string", 0),
            column("Version", "string", 0),
            column("Internal-IP", "string", 1),
            column("External-IP", "string", 1),
            column("OS-Image", "string", 1),
            column("Kernel-Version", "string", 1),
            column("Container-Runtime", "string", 1),
        ],
        "pods" => vec![
            column("Name", "string", 0),
            column("Ready", "string", 0),
            column("Status", "string", 0),
            column("Restarts", "string", 0),
            column("Age", "string", 0),
            column("IP", "string", 1),
            column("Node", "string", 1),
            column("Nominated Node", "string", 1),
            column("Readiness Gates", "string", 1),
        ],
        "deployments" => vec![
            column("Name", "string", 0),
            column("Ready", "string", 0),
            column("Up-to-date", "integer", 0),
            column("Available", "integer", 0),
            column("Age", "string", 0),
        ],
        "daemonsets" => vec![
            column("Name", "string", 0),
            column("Desired", "integer", 0),
            column("Current", "integer", 0),
            column("Ready", "integer", 0),
            column("Up-to-date", "integer", 0),
            column("Available", "integer", 0),
            column("Age", "string", 0),
        ],
        "poddisruptionbudgets" => vec![
            column("Name", "string", 0),
            column("Min Available", "string", 0),
            column("Max Unavailable", "string", 0),
            column("Allowed Disruptions", "integer", 0),
            column("Age", "string", 0),
        ],
        "secrets" => vec![
            column("Name", "string", 0),
            column("Type", "string", 0),
            column("Data", "string", 0),
            column("Age", "string", 0),
        ],
        "namespaces" => vec![
            column("Name", "string", 0),
            column("Status", "string", 0),
            column("Age", "string", 0),
        ],
        _ => vec![column("Name", "string", 0), column("Age", "string", 0)],
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "<none>".to_owned(),
        other => other.to_string(),
    }
}

fn cells(plural: &str, object: &Value, now: Timestamp) -> Vec<Value> {
    let name = json!(object["metadata"]["name"]);
    let age = json!(age(&object["metadata"]["creationTimestamp"], now));
    let status = &object["status"];
    let spec = &object["spec"];
    let count = |v: &Value| json!(v.as_i64().unwrap_or(0));
    match plural {
        "nodes" => {
            let ready = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Ready")
                .is_some_and(|c| c["status"] == "True");
            let mut state = if ready { "Ready" } else { "NotReady" }.to_owned();
            if spec["unschedulable"] == true {
                state.push_str(",SchedulingDisabled");
            }
            let mut roles: Vec<&str> = object["metadata"]["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
                .collect();
            roles.sort_unstable();
            let roles = if roles.is_empty() {
                "<none>".to_owned()
            } else {
                roles.join(",")
            };
            let address = |kind: &str| {
                status["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|a| a["type"] == kind)
                    .map_or("<none>".to_owned(), |a| text(&a["address"]))
            };
            let info = &status["nodeInfo"];
            vec![
                name,
                json!(state),
                json!(roles),
                age,
                json!(text(&info["kubeletVersion"])),
                json!(address("InternalIP")),
                json!(address("ExternalIP")),
                json!(text(&info["osImage"])),
                json!(text(&info["kernelVersion"])),
                json!(text(&info["containerRuntimeVersion"])),
            ]
        }
        "pods" => {
            let containers = spec["containers"].as_array().map_or(0, Vec::len);
            let ready = status["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["ready"] == true)
                .count();
            let phase = if object["metadata"]["deletionTimestamp"].is_string() {
                "Terminating".to_owned()
            } else {
                text(&status["phase"])
            };
            vec![
                name,
                json!(format!("{ready}/{containers}")),
                json!(phase),
                json!("0"),
                age,
                json!(text(&status["podIP"])),
                json!(text(&spec["nodeName"])),
                json!("<none>"),
                json!("<none>"),
            ]
        }
        "deployments" => vec![
            name,
            json!(format!(
                "{}/{}",
                status["readyReplicas"].as_i64().unwrap_or(0),
                spec["replicas"].as_i64().unwrap_or(1)
            )),
            count(&status["updatedReplicas"]),
            count(&status["availableReplicas"]),
            age,
        ],
        "daemonsets" => vec![
            name,
            count(&status["desiredNumberScheduled"]),
            count(&status["currentNumberScheduled"]),
            count(&status["numberReady"]),
            count(&status["updatedNumberScheduled"]),
            count(&status["numberAvailable"]),
            age,
        ],
        "poddisruptionbudgets" => vec![
            name,
            json!(as_text_or_na(&spec["minAvailable"])),
            json!(as_text_or_na(&spec["maxUnavailable"])),
            count(&status["disruptionsAllowed"]),
            age,
        ],
        "secrets" => vec![
            name,
            json!(text(&object["type"])),
            json!(
                object["data"]
                    .as_object()
                    .map_or(0, serde_json::Map::len)
                    .to_string()
            ),
            age,
        ],
        "namespaces" => vec![name, json!("Active"), age],
        _ => vec![name, age],
    }
}

fn as_text_or_na(value: &Value) -> String {
    if value.is_null() {
        "N/A".to_owned()
    } else {
        text(value)
    }
}

/// kubectl's short age (`45s`, `3m12s`, `5h`, `12d`), from a creationTimestamp.
fn age(created: &Value, now: Timestamp) -> String {
    let Some(created) = created.as_str().and_then(|t| t.parse::<Timestamp>().ok()) else {
        return "<unknown>".to_owned();
    };
    let seconds = now.duration_since(created).as_secs().max(0);
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86_400);
    if seconds < 120 {
        format!("{seconds}s")
    } else if minutes < 10 {
        with_rest(minutes, "m", seconds % 60, "s")
    } else if hours < 3 {
        format!("{minutes}m")
    } else if hours < 8 {
        with_rest(hours, "h", minutes % 60, "m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if days < 8 {
        with_rest(days, "d", hours % 24, "h")
    } else if days < 730 {
        format!("{days}d")
    } else {
        format!("{}y{}d", days / 365, days % 365)
    }
}

/// `3m12s`, or `3m` when the rest is zero (as Kubernetes' HumanDuration writes it).
fn with_rest(major: i64, major_unit: &str, rest: i64, rest_unit: &str) -> String {
    if rest == 0 {
        format!("{major}{major_unit}")
    } else {
        format!("{major}{major_unit}{rest}{rest_unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        let now: Timestamp = "2026-01-10T12:00:00Z".parse().expect("now");
        let at = |s: &str| age(&json!(s), now);
        assert_eq!(at("2026-01-10T11:59:15Z"), "45s");
        assert_eq!(at("2026-01-10T11:56:48Z"), "3m12s");
        assert_eq!(at("2026-01-10T07:00:00Z"), "5h");
        assert_eq!(at("2026-01-01T12:00:00Z"), "9d");
    }
}
