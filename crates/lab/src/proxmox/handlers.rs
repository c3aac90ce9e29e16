//! What each simulated endpoint does, with the answers and error texts of a real Proxmox VE
//! 9.1 host (see `shared/reference/pve-wire-protocol-notes.md`). This module dispatches and
//! serves the cluster, node, storage, pool and task reads; VM actions live in `vm_handlers`,
//! the guest agent in `agent_handlers`.
//!
//! Numbers are emitted as a real host emits them: `nextid` as a numeric string, booleans as
//! integers `1`/`0`, false flags left out.

use std::sync::Arc;

use serde_json::{Value, json};

use super::endpoints::Route;
use super::params::Params;
use super::reply::Reply;
use super::state::{ApiFail, GIB, Shared, SimState};
use super::{agent_handlers, hardware_api, storage, upload, vm_handlers};

const PVE_VERSION: &str = "9.1.3";
const PVE_REPOID: &str = "5e0d3b3a";

/// Serves one checked call.
pub(super) async fn dispatch(
    shared: &Arc<Shared>,
    route: Route,
    p: Params,
    user: &str,
) -> Result<Reply, ApiFail> {
    match route {
        Route::Version => Reply::data(json!({
            "version": PVE_VERSION,
            "release": "9.1",
            "repoid": PVE_REPOID,
        })),
        Route::ClusterResources => cluster_resources(shared, &p),
        Route::ClusterNextid => nextid(shared, &p),
        Route::ClusterStatus => cluster_status(shared),
        Route::Nodes => nodes(shared),
        Route::NodeStatus => node_status(shared, &p),
        Route::NodeQemu => node_qemu(shared, &p),
        Route::Clone => vm_handlers::clone_vm(shared, &p, user),
        Route::ConfigGet => vm_handlers::config_get(shared, &p),
        Route::ConfigPost => vm_handlers::config_set(shared, &p, user, true),
        Route::ConfigPut => vm_handlers::config_set(shared, &p, user, false),
        Route::StatusCurrent => vm_handlers::status_current(shared, &p),
        Route::Start => vm_handlers::start(shared, &p, user),
        Route::Stop => vm_handlers::stop(shared, &p, user),
        Route::Shutdown => vm_handlers::shutdown(shared, &p, user),
        Route::Reboot => vm_handlers::reboot(shared, &p, user),
        Route::Destroy => vm_handlers::destroy(shared, &p, user),
        Route::Resize => vm_handlers::resize(shared, &p, user),
        Route::AgentExec
        | Route::AgentExecStatus
        | Route::AgentNetwork
        | Route::AgentPing
        | Route::AgentFileWrite
        | Route::AgentOsinfo => agent_handlers::agent(shared, route, &p).await,
        Route::TaskStatus => task_status(shared, &p),
        Route::TaskLog => task_log(shared, &p),
        Route::NodeStorage => node_storage(shared, &p),
        Route::StorageStatus => storage_status(shared, &p),
        Route::StorageContent => storage::content_list(shared, &p),
        Route::StorageUpload => upload::upload(shared, &p, user),
        Route::DeleteVolume => storage::delete_volume(shared, &p, user),
        Route::Pools => pools(shared, &p),
        Route::PoolsCreate => hardware_api::create_pool(shared, &p),
        Route::PoolsUpdate => hardware_api::update_pool(shared, &p),
        Route::NodeNetwork => hardware_api::node_network(shared, &p),
        Route::PciMappings => hardware_api::pci_mappings(shared),
    }
}

pub(super) fn flag(on: bool) -> Value {
    Value::from(u8::from(on))
}

fn vm_resource(state: &SimState, vmid: u32, now: i64) -> Option<Value> {
    let vm = state.vms.get(&vmid)?;
    let online = state.nodes.get(&vm.node).is_some_and(|n| n.online);
    let status = match (online, vm.running) {
        (false, _) => "unknown",
        (true, true) => "running",
        (true, false) => "stopped",
    };
    let mut entry = json!({
        "id": format!("qemu/{vmid}"),
        "type": "qemu",
        "vmid": vmid,
        "node": vm.node,
        "name": vm.name(),
        "status": status,
        "template": flag(vm.is_template()),
        "maxcpu": vm.cores(),
        "maxmem": vm.memory_bytes(),
        "mem": if vm.running { vm.memory_bytes() / 2 } else { 0 },
        "cpu": if vm.running { 0.02 } else { 0.0 },
        "maxdisk": vm.disk().map(|(_, size)| size).unwrap_or(0),
        "disk": 0,
        "uptime": vm.started_unix.map(|s| (now - s).max(0)).unwrap_or(0),
        "netin": 0,
        "netout": 0,
        "diskread": 0,
        "diskwrite": 0,
    });
    if let Some(tags) = vm.config.get("tags") {
        entry["tags"] = Value::from(tags.clone());
    }
    if let Some(lock) = vm.lock() {
        entry["lock"] = Value::from(lock.clone());
    }
    if let Some(pool) = &vm.pool {
        entry["pool"] = Value::from(pool.clone());
    }
    Some(entry)
}

fn cluster_resources(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let now = shared.unix_now();
    let kind = p.text("type");
    let mut list = Vec::new();
    if kind.is_none_or(|k| k == "node") {
        for (name, node) in &state.nodes {
            let mut entry = json!({
                "id": format!("node/{name}"),
                "type": "node",
                "node": name,
                "status": if node.online { "online" } else { "offline" },
                "maxcpu": node.cores,
                "maxmem": node.memory_bytes,
            });
            if node.online {
                let used = state.running_memory(name) + 2 * GIB;
                entry["mem"] = Value::from(used.min(node.memory_bytes));
                entry["cpu"] = Value::from(0.03);
                entry["uptime"] = Value::from(86_400 * u64::from(node.index));
                entry["level"] = Value::from("");
                entry["cgroup-mode"] = Value::from(2);
                entry["maxdisk"] = Value::from(100 * GIB);
                entry["disk"] = Value::from(8 * GIB);
            }
            list.push(entry);
        }
    }
    if kind.is_none_or(|k| k == "vm") {
        for vmid in state.vms.keys() {
            list.extend(vm_resource(&state, *vmid, now));
        }
    }
    if kind.is_none_or(|k| k == "storage") {
        for node in state.nodes.keys() {
            for (name, storage) in &state.storages {
                list.push(json!({
                    "id": format!("storage/{node}/{name}"),
                    "type": "storage",
                    "node": node,
                    "storage": name,
                    "status": "available",
                    "plugintype": storage.kind,
                    "content": storage::content_text(&storage.content),
                    "shared": flag(storage.shared),
                    "maxdisk": storage.size_bytes,
                    "disk": state.storage_used(name, node),
                }));
            }
        }
    }
    if kind.is_none() {
        for pool in state.pools.keys() {
            list.push(json!({"id": format!("/pool/{pool}"), "type": "pool", "pool": pool}));
        }
    }
    Reply::data(Value::Array(list))
}

fn nextid(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    if let Some(wanted) = p.int("vmid") {
        let wanted = u32::try_from(wanted).unwrap_or(u32::MAX);
        if state.vms.contains_key(&wanted) {
            return Err(ApiFail::param(
                "vmid",
                format!("VM {wanted} already exists"),
            ));
        }
        return Reply::data(Value::from(wanted.to_string()));
    }
    let id = state.next_free_vmid();
    if state.faults.steal_next_vmid > 0 {
        // Someone else's clone takes the id right after we answered: the race CAPMOX #842
        // describes, made deterministic.
        state.faults.steal_next_vmid -= 1;
        let node = state
            .nodes
            .iter()
            .find(|(_, n)| n.online)
            .map(|(name, _)| name.clone())
            .unwrap_or_default();
        let config = state.base_config(
            id,
            &format!("other-{id}"),
            1,
            512,
            "local-lvm",
            GIB,
            shared.unix_now(),
        );
        state.insert_vm(id, &node, config, false, None);
    }
    // A real host answers the id as a string: `{"data":"100"}`.
    Reply::data(Value::from(id.to_string()))
}

fn cluster_status(shared: &Arc<Shared>) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let mut list = vec![json!({
        "type": "cluster",
        "id": "cluster",
        "name": state.cluster_name,
        "nodes": state.nodes.len(),
        "quorate": 1,
        "version": state.nodes.len() + 1,
    })];
    for (position, (name, node)) in state.nodes.iter().enumerate() {
        list.push(json!({
            "type": "node",
            "id": format!("node/{name}"),
            "name": name,
            "ip": format!("10.10.10.{}", node.index),
            "level": "",
            "local": flag(position == 0),
            "nodeid": node.index,
            "online": flag(node.online),
        }));
    }
    Reply::data(Value::Array(list))
}

fn nodes(shared: &Arc<Shared>) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let list = state
        .nodes
        .iter()
        .map(|(name, node)| {
            if !node.online {
                return json!({"node": name, "status": "offline"});
            }
            json!({
                "node": name,
                "status": "online",
                "cpu": 0.03,
                "maxcpu": node.cores,
                "mem": (state.running_memory(name) + 2 * GIB).min(node.memory_bytes),
                "maxmem": node.memory_bytes,
                "uptime": 86_400 * u64::from(node.index),
                "level": "",
                "ssl_fingerprint": shared.fingerprint,
            })
        })
        .collect();
    Reply::data(Value::Array(list))
}

fn node_status(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let node = state
        .nodes
        .get(p.node())
        .ok_or_else(|| ApiFail::die(format!("no such node '{}'", p.node())))?;
    let used = (state.running_memory(p.node()) + 2 * GIB).min(node.memory_bytes);
    Reply::data(json!({
        "cpu": 0.03,
        "cpuinfo": {"cores": node.cores, "cpus": node.cores, "model": "QEMU Virtual CPU (lab)", "sockets": 1},
        "memory": {
            "total": node.memory_bytes,
            "used": used,
            "free": node.memory_bytes - used,
            "available": node.memory_bytes - used,
        },
        "loadavg": ["0.12", "0.08", "0.05"],
        "pveversion": format!("pve-manager/{PVE_VERSION}/{PVE_REPOID}"),
        "rootfs": {"total": 100 * GIB, "used": 8 * GIB, "free": 92 * GIB, "avail": 92 * GIB},
        "boot-info": {"mode": "efi", "secureboot": 0},
        "current-kernel": {
            "machine": "x86_64",
            "release": "6.14.11-4-pve",
            "sysname": "Linux",
            "version": "#1 SMP PREEMPT_DYNAMIC PMX 6.14.11-4",
        },
        "uptime": 86_400 * u64::from(node.index),
    }))
}

fn node_qemu(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let now = shared.unix_now();
    let list = state
        .vms
        .iter()
        .filter(|(_, vm)| vm.node == p.node())
        .map(|(vmid, vm)| {
            let mut entry = json!({
                "vmid": vmid,
                "name": vm.name(),
                "status": if vm.running { "running" } else { "stopped" },
                "cpus": vm.cores(),
                "maxmem": vm.memory_bytes(),
                "mem": if vm.running { vm.memory_bytes() / 2 } else { 0 },
                "maxdisk": vm.disk().map(|(_, size)| size).unwrap_or(0),
                "cpu": 0,
                "uptime": vm.started_unix.map(|s| (now - s).max(0)).unwrap_or(0),
                "netin": 0,
                "netout": 0,
                "diskread": 0,
                "diskwrite": 0,
            });
            if vm.running {
                entry["pid"] = Value::from(10_000 + vmid);
            }
            if vm.is_template() {
                entry["template"] = Value::from(1);
            }
            if let Some(tags) = vm.config.get("tags") {
                entry["tags"] = Value::from(tags.clone());
            }
            if let Some(lock) = vm.lock() {
                entry["lock"] = Value::from(lock.clone());
            }
            if p.flag("full") == Some(true) {
                entry["qmpstatus"] = Value::from(if vm.running { "running" } else { "stopped" });
            }
            entry
        })
        .collect();
    Reply::data(Value::Array(list))
}

fn task_status(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let upid = p.text("upid").unwrap_or_default();
    let task = state
        .tasks
        .get(upid)
        .filter(|task| task.node == p.node())
        .ok_or_else(|| ApiFail::param("upid", "no such task"))?;
    let mut reply = json!({
        "upid": upid,
        "node": task.node,
        "pid": task.pid,
        "pstart": task.pstart,
        "starttime": task.starttime,
        "type": task.kind,
        "id": task.id,
        "user": task.user,
        "status": if task.exitstatus.is_some() { "stopped" } else { "running" },
    });
    if let Some(exitstatus) = &task.exitstatus {
        reply["exitstatus"] = Value::from(exitstatus.clone());
    }
    Reply::data(reply)
}

fn task_log(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let upid = p.text("upid").unwrap_or_default();
    let task = state
        .tasks
        .get(upid)
        .filter(|task| task.node == p.node())
        .ok_or_else(|| ApiFail::param("upid", "no such task"))?;
    let start = p.int("start").unwrap_or(0).max(0) as usize;
    let limit = p.int("limit").unwrap_or(50).max(0) as usize;
    let lines: Vec<Value> = task
        .log
        .iter()
        .enumerate()
        .skip(start)
        .take(limit)
        .map(|(index, line)| json!({"n": index + 1, "t": line}))
        .collect();
    Ok(Reply {
        data: Value::Array(lines),
        total: Some(task.log.len()),
    })
}

fn storage_entry(state: &SimState, node: &str, name: &str) -> Option<Value> {
    let storage = state.storages.get(name)?;
    let used = state.storage_used(name, node);
    Some(json!({
        "storage": name,
        "type": storage.kind,
        "content": storage::content_text(&storage.content),
        "active": 1,
        "enabled": 1,
        "shared": flag(storage.shared),
        "total": storage.size_bytes,
        "used": used,
        "avail": storage.size_bytes.saturating_sub(used),
    }))
}

fn node_storage(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    if let Some(wanted) = p.text("storage")
        && !state.storages.contains_key(wanted)
    {
        return Err(ApiFail::param("storage", "No such storage."));
    }
    let list = state
        .storages
        .keys()
        .filter(|name| {
            p.text("storage")
                .is_none_or(|wanted| wanted == name.as_str())
        })
        .filter(|name| {
            // `content=iso,vztmpl`: stores that hold any of them.
            p.text("content").is_none_or(|wanted| {
                state.storages.get(*name).is_some_and(|s| {
                    wanted
                        .split([',', ';', ' '])
                        .any(|c| s.content.iter().any(|held| held == c))
                })
            })
        })
        .filter_map(|name| {
            let mut entry = storage_entry(&state, p.node(), name)?;
            let total = entry["total"].as_f64().unwrap_or(1.0).max(1.0);
            entry["used_fraction"] = Value::from(entry["used"].as_f64().unwrap_or(0.0) / total);
            Some(entry)
        })
        .collect();
    Reply::data(Value::Array(list))
}

fn storage_status(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let name = p.text("storage").unwrap_or_default();
    let mut entry = storage_entry(&state, p.node(), name)
        .ok_or_else(|| ApiFail::param("storage", "No such storage."))?;
    if let Some(map) = entry.as_object_mut() {
        map.remove("storage");
    }
    Reply::data(entry)
}

fn pools(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let wanted = p.text("poolid");
    let list = state
        .pools
        .iter()
        .filter(|(pool, _)| wanted.is_none_or(|w| w == pool.as_str()))
        .map(|(pool, comment)| {
            let mut entry = json!({"poolid": pool});
            if !comment.is_empty() {
                entry["comment"] = Value::from(comment.clone());
            }
            if wanted.is_some() {
                let members: Vec<Value> = state
                    .vms
                    .iter()
                    .filter(|(_, vm)| vm.pool.as_deref() == Some(pool.as_str()))
                    .map(|(vmid, vm)| {
                        json!({"id": format!("qemu/{vmid}"), "node": vm.node, "type": "qemu", "vmid": vmid, "name": vm.name()})
                    })
                    .collect();
                entry["members"] = Value::Array(members);
            }
            entry
        })
        .collect();
    Reply::data(Value::Array(list))
}
