//! K3s patches: keys of `/etc/rancher/k3s/config.yaml`, each a flag of `k3s server` or `k3s
//! agent` without its dashes (`reference/k3s-flags.json`, from K3s's CLI reference). A server
//! reads the cluster's and the control plane's keys, an agent the cluster's and its pool's
//! (a key only servers read is refused on a pool); a later level's key replaces an earlier
//! one's. K3s's *critical configuration values* (`cluster-cidr`, `disable: servicelb`, ...)
//! must be equal on every server, and K3s does not refuse a mismatch on an external datastore:
//! capstan accepts them on the cluster level only, so every server gets the same.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{Level, Located};
use crate::spec::diagnostic::{Diagnostic, SourceFile};
use crate::spec::types::ClusterSpec;

/// One flag of the reference data.
#[derive(Debug, Deserialize)]
pub struct Flag {
    /// `bool` (a switch), `string` (a value) or `list` (a repeatable value).
    pub value: String,
    /// `server`, `agent`: which of them read it.
    pub roles: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Reference {
    flags: BTreeMap<String, Flag>,
    critical: Vec<String>,
}

fn reference() -> &'static Reference {
    static REFERENCE: OnceLock<Reference> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        serde_json::from_str(include_str!("reference/k3s-flags.json"))
            .expect("the K3s flag reference built into capstan is JSON of its shape")
    })
}

const SECRETS: &str =
    "nothing: capstan makes the cluster token and reads the datastore's from its secret source";
const ENDPOINT: &str = "`spec.endpoint`: capstan starts every server and agent with it";
const NODE_NAME: &str = "nothing: capstan names every node (its VM's name)";

/// Keys capstan sets, and what to use instead.
pub const OWNED: &[(&str, &str)] = &[
    ("token", SECRETS),
    ("token-file", SECRETS),
    ("agent-token", SECRETS),
    ("agent-token-file", SECRETS),
    ("server", ENDPOINT),
    ("https-listen-port", ENDPOINT),
    ("tls-san", ENDPOINT),
    ("datastore-endpoint", "`spec.kubernetes.datastore`"),
    ("datastore-cafile", "`spec.kubernetes.datastore`"),
    ("datastore-certfile", "`spec.kubernetes.datastore`"),
    ("datastore-keyfile", "`spec.kubernetes.datastore`"),
    ("cluster-init", "`spec.kubernetes.datastore`"),
    ("cluster-reset", "`spec.kubernetes.datastore`"),
    ("cluster-cidr", "`spec.network.pods`"),
    ("service-cidr", "`spec.network.services`"),
    (
        "cluster-dns",
        "`spec.network.services` (the DNS service's address is its tenth)",
    ),
    ("flannel-backend", "`spec.network.cni`"),
    ("disable-network-policy", "`spec.network.cni`"),
    ("disable-kube-proxy", "`spec.network.kubeProxy`"),
    ("node-name", NODE_NAME),
    ("with-node-id", NODE_NAME),
    (
        "node-ip",
        "`spec.network.nodes`: capstan passes the node's own address",
    ),
    ("node-external-ip", "`spec.network.nodes`"),
    (
        "node-label",
        "`labels` of the control plane or the pool (they change in place)",
    ),
    (
        "node-taint",
        "`taints` (and `spec.controlPlane.schedulable`)",
    ),
    (
        "disable-agent",
        "`spec.controlPlane.schedulable`: every K3s server runs an agent here",
    ),
    (
        "write-kubeconfig",
        "nothing: capstan reads the admin kubeconfig where K3s writes it by default",
    ),
    (
        "private-registry",
        "spec.kubernetes.registries: capstan writes the runtime's registry configuration from it (mirrors, CAs, and credentials from secret sources, never from Git)",
    ),
    (
        "system-default-registry",
        "spec.kubernetes.registries: capstan writes the runtime's registry configuration from it (mirrors, CAs, and credentials from secret sources, never from Git)",
    ),
    ("config", "nothing: this is the config file"),
];

/// What to use instead of an API server argument capstan writes itself.
const AUTHENTICATION: &str = "`spec.kubernetes.authentication`: capstan writes the API server's AuthenticationConfiguration from it";

/// The first `kube-apiserver-arg` of `value` that is capstan's (`authentication-config`,
/// `oidc-*`: the API server refuses the latter beside the former).
fn owned_apiserver_arg<'a>(key: &str, value: &'a Value) -> Option<&'a str> {
    if key != "kube-apiserver-arg" {
        return None;
    }
    let args: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    args.into_iter().filter_map(Value::as_str).find(|arg| {
        let name = arg.trim_start_matches('-');
        name.starts_with("authentication-config") || name.starts_with("oidc-")
    })
}

/// Whether `key` with `value` is one of K3s's critical values.
fn is_critical(key: &str, value: &Value) -> bool {
    let critical = &reference().critical;
    if key == "disable" {
        let names: Vec<&str> = match value {
            Value::String(text) => text.split(',').map(str::trim).collect(),
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        return names
            .iter()
            .any(|name| critical.iter().any(|c| *c == format!("disable={name}")));
    }
    critical.iter().any(|c| c == key)
}

/// The critical values (K3s's list; of `disable`, only `servicelb`) on which a running server's
/// configuration (`running`, its `config.yaml`) and a new server's (`new`) differ, by key: a
/// new server is refused when any does (K3s itself does not refuse it on an external
/// datastore). Values compare as written in the file (a list and a comma-separated string
/// naming the same components are equal).
pub fn critical_differences(running: &Map<String, Value>, new: &Map<String, Value>) -> Vec<String> {
    let critical = &reference().critical;
    let mut keys: Vec<&String> = running.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|key| *key == "disable" || critical.iter().any(|c| c == *key))
        .filter(|key| {
            let (a, b) = (running.get(*key), new.get(*key));
            if *key == "disable" {
                let servicelb = |v: Option<&Value>| v.is_some_and(|v| is_critical("disable", v));
                servicelb(a) != servicelb(b)
            } else {
                a != b
            }
        })
        .cloned()
        .collect()
}

/// The keys `pool`'s machines (`None`: the servers) read, merged in order: a later level's key
/// replaces an earlier one's; keys the role does not read are left out.
pub fn settings(spec: &ClusterSpec, pool: Option<&str>) -> Map<String, Value> {
    let role = if pool.is_none() { "server" } else { "agent" };
    let flags = &reference().flags;
    let mut out = Map::new();
    for located in spec.patches_of(pool) {
        for (key, value) in &located.patch.0 {
            if flags
                .get(key)
                .is_some_and(|flag| flag.roles.iter().any(|r| r == role))
            {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

/// What reaches `pool`'s machines, for their digest.
pub fn reaching(spec: &ClusterSpec, pool: Option<&str>) -> Vec<Value> {
    let settings = settings(spec, pool);
    if settings.is_empty() {
        Vec::new()
    } else {
        vec![Value::Object(settings)]
    }
}

/// Each key is a flag of the level's role with a value of its kind, not one capstan owns, and
/// critical values are on the cluster level only.
pub fn check(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let flags = &reference().flags;
    for located in spec.all_patches() {
        let path = located.path();
        for (key, value) in &located.patch.0 {
            let at = format!("{path}.{key}");
            let Some(flag) = flags.get(key) else {
                let near = strsim_nearest(key, flags.keys());
                out.push(
                    file.error(&at, format!("`{key}` is not a flag of `k3s server` or `k3s agent`"))
                        .with_hint(match near {
                            Some(near) => format!("did you mean `{near}`? A key of config.yaml is a flag without its dashes"),
                            None => "a key of config.yaml is a flag without its dashes, as `k3s server --help` lists them".to_owned(),
                        }),
                );
                continue;
            };
            if let Some((_, instead)) = OWNED.iter().find(|(k, _)| k == key) {
                out.push(
                    file.error(&at, format!("`{key}` is capstan's to set, not a patch's"))
                        .with_hint(format!("use {instead}")),
                );
                continue;
            }
            if let Some(problem) = value_problem(flag, value) {
                out.push(file.error(&at, format!("`{key}` {problem}")));
                continue;
            }
            if let Some(arg) = owned_apiserver_arg(key, value) {
                let name = arg.split('=').next().unwrap_or(arg);
                out.push(
                    file.error(&at, format!("`{name}` is capstan's to set, not a patch's"))
                        .with_hint(format!("use {AUTHENTICATION}")),
                );
                continue;
            }
            level_rules(out, file, &located, key, value, flag);
        }
    }
}

fn level_rules(
    out: &mut Vec<Diagnostic>,
    file: &SourceFile,
    located: &Located<'_>,
    key: &str,
    value: &Value,
    flag: &Flag,
) {
    let at = format!("{}.{key}", located.path());
    let server_only = !flag.roles.iter().any(|r| r == "agent");
    let agent_only = !flag.roles.iter().any(|r| r == "server");
    match located.level {
        Level::Pool if server_only => out.push(
            file.error(&at, format!("`{key}` is read by K3s servers only, and a pool's machines are agents"))
                .with_hint("move it to `spec.patches` (every machine) or `spec.controlPlane.patches` (the servers)"),
        ),
        Level::ControlPlane if agent_only => out.push(
            file.error(&at, format!("`{key}` is read by K3s agents only, and control planes are servers"))
                .with_hint("move it to a pool's `patches`"),
        ),
        Level::ControlPlane | Level::Pool if is_critical(key, value) => out.push(
            file.error(&at, format!("`{key}` is one of K3s's critical values: every server must have the same, and K3s does not refuse a mismatch on an external datastore"))
                .with_hint("set it in `spec.patches`, where capstan gives every server the same value"),
        ),
        _ => {}
    }
}

fn value_problem(flag: &Flag, value: &Value) -> Option<&'static str> {
    let ok = match flag.value.as_str() {
        "bool" => value.is_boolean(),
        "list" => {
            value.is_string()
                || value
                    .as_array()
                    .is_some_and(|items| items.iter().all(Value::is_string))
        }
        _ => value.is_string() || value.is_number(),
    };
    (!ok).then_some(match flag.value.as_str() {
        "bool" => "is a switch: write `true` or `false`",
        "list" => "takes a string or a list of strings",
        _ => "takes a string or a number",
    })
}

fn strsim_nearest<'a>(key: &str, names: impl Iterator<Item = &'a String>) -> Option<&'a str> {
    names
        .map(|name| (strsim::levenshtein(key, name), name))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, name)| name.as_str())
}
