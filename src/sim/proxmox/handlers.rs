//! What each simulated endpoint does, with the answers and error texts of a real Proxmox VE
//! 9.1 host (see `shared/reference/pve-wire-protocol-notes.md`): asynchronous actions check a
//! few things synchronously (HTTP 500) and fail everything else inside the task.
//!
//! Numbers are emitted as a real host emits them: `nextid` as a numeric string, booleans as
//! integers `1`/`0`, false flags left out.

use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::guest::PowerEvent;
use super::params::{Params, Route};
use super::state::{
    AgentState, ApiFail, ExecState, GIB, MIB, Shared, SimState, TaskEnd, format_size, parse_size,
    start_task,
};

/// A successful answer: `data`, and `total` for paged lists.
pub(super) struct Reply {
    pub data: Value,
    pub total: Option<usize>,
}

impl Reply {
    fn data(data: Value) -> Result<Reply, ApiFail> {
        Ok(Reply { data, total: None })
    }
}

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
        Route::Clone => clone_vm(shared, &p, user),
        Route::ConfigGet => config_get(shared, &p),
        Route::ConfigPost => config_set(shared, &p, user, true),
        Route::ConfigPut => config_set(shared, &p, user, false),
        Route::StatusCurrent => status_current(shared, &p),
        Route::Start => start(shared, &p, user),
        Route::Stop => stop(shared, &p, user),
        Route::Shutdown => shutdown(shared, &p, user),
        Route::Reboot => reboot(shared, &p, user),
        Route::Destroy => destroy(shared, &p, user),
        Route::Resize => resize(shared, &p, user),
        Route::AgentExec
        | Route::AgentExecStatus
        | Route::AgentNetwork
        | Route::AgentPing
        | Route::AgentFileWrite
        | Route::AgentOsinfo => agent(shared, route, &p).await,
        Route::TaskStatus => task_status(shared, &p),
        Route::TaskLog => task_log(shared, &p),
        Route::NodeStorage => node_storage(shared, &p),
        Route::StorageStatus => storage_status(shared, &p),
        Route::Pools => pools(shared, &p),
    }
}

fn flag(on: bool) -> Value {
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
                    "content": "images,rootdir",
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

fn check_unlocked(state: &SimState, node: &str, vmid: u32, p: &Params) -> Result<(), ApiFail> {
    let vm = state.vm_on(node, vmid)?;
    match vm.lock() {
        Some(lock) if p.flag("skiplock") != Some(true) => {
            Err(ApiFail::die(format!("VM is locked ({lock})")))
        }
        _ => Ok(()),
    }
}

fn clone_vm(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let node = p.node().to_owned();
    let source_id = p.vmid();
    let newid = u32::try_from(p.int("newid").unwrap_or(0)).unwrap_or(0);
    check_unlocked(&state, &node, source_id, p)?;
    let source = state.vm_on(&node, source_id)?;
    let (source_disk, size) = source.disk().unwrap_or_else(|| ("scsi0".into(), GIB));
    let source_storage = source
        .config
        .get(&source_disk)
        .and_then(|d| d.split(':').next())
        .unwrap_or("local-lvm")
        .to_owned();
    let is_template = source.is_template();
    let mut config = source.config.clone();
    let source_name = source.name();
    if state.vms.contains_key(&newid) {
        return Err(ApiFail::die(format!(
            "unable to create VM {newid}: config file already exists"
        )));
    }
    let full = p.flag("full").unwrap_or(!is_template);
    if !full && p.text("storage").is_some() {
        return Err(ApiFail::die(
            "parameter 'storage' not allowed for linked clones",
        ));
    }
    let target = p.text("target").unwrap_or(&node).to_owned();
    match state.nodes.get(&target) {
        None => return Err(ApiFail::die(format!("no such cluster node '{target}'"))),
        Some(n) if !n.online => {
            return Err(ApiFail::die(format!(
                "target node '{target}' is not online"
            )));
        }
        Some(_) => {}
    }
    let storage = p.text("storage").unwrap_or(&source_storage).to_owned();
    let Some(storage_state) = state.storages.get(&storage) else {
        return Err(ApiFail::die(format!("storage '{storage}' does not exist")));
    };
    if target != node && !storage_state.shared {
        return Err(ApiFail::die(format!(
            "can't clone VM to node '{target}' (VM uses local storage)"
        )));
    }
    let pool = p.text("pool").map(str::to_owned);
    if let Some(pool) = &pool
        && !state.pools.contains_key(pool)
    {
        return Err(ApiFail::die(format!("pool '{pool}' does not exist")));
    }
    let now = shared.unix_now();
    config.remove("template");
    config.insert(
        "name".into(),
        p.text("name")
            .map(str::to_owned)
            .unwrap_or_else(|| format!("Copy-of-VM-{source_name}")),
    );
    match p.text("description") {
        Some(description) => config.insert("description".into(), description.to_owned()),
        None => config.remove("description"),
    };
    config.insert(
        source_disk.clone(),
        format!(
            "{storage}:vm-{newid}-disk-0,iothread=1,size={}",
            format_size(size)
        ),
    );
    config.insert(
        "ide2".into(),
        format!("{storage}:vm-{newid}-cloudinit,media=cdrom"),
    );
    config.insert(
        "net0".into(),
        format!("virtio={},bridge=vmbr0", state.new_mac()),
    );
    config.insert("meta".into(), format!("creation-qemu=9.2.0,ctime={now}"));
    config.insert("lock".into(), "clone".into());
    state.insert_vm(newid, &target, config, false, pool);
    let first_log = vec![
        format!(
            "create full clone of drive {source_disk} ({source_storage}:base-{source_id}-disk-0)"
        ),
        format!("  Logical volume \"vm-{newid}-disk-0\" created."),
    ];
    let memory_needed = state
        .vms
        .get(&newid)
        .map(|vm| vm.memory_bytes())
        .unwrap_or(0);
    let upid = start_task(
        shared,
        &mut state,
        &node,
        "qmclone",
        &source_id.to_string(),
        user,
        shared.durations.clone,
        first_log,
        Box::new(move |state, injected| {
            let fail = |state: &mut SimState, message: String| {
                state.vms.remove(&newid);
                TaskEnd::failed(message)
            };
            if let Some(message) = injected {
                return fail(state, message);
            }
            let capacity = state
                .nodes
                .get(&target)
                .map(|n| n.memory_bytes)
                .unwrap_or(0);
            let committed = state.committed_memory(&target, Some(newid));
            if committed + memory_needed > capacity {
                return fail(
                    state,
                    format!(
                        "clone failed: not enough memory on node '{target}': {} MiB needed, {} MiB free",
                        memory_needed / MIB,
                        capacity.saturating_sub(committed) / MIB
                    ),
                );
            }
            let storage_size = state
                .storages
                .get(&storage)
                .map(|s| s.size_bytes)
                .unwrap_or(0);
            let used = state.storage_used(&storage, &target);
            if used > storage_size {
                return fail(
                    state,
                    format!(
                        "clone failed: no space left on storage '{storage}' ({} GiB needed, {} GiB free)",
                        size / GIB,
                        storage_size.saturating_sub(used - size) / GIB
                    ),
                );
            }
            if let Some(vm) = state.vms.get_mut(&newid) {
                vm.config.remove("lock");
            }
            TaskEnd {
                log: vec![format!(
                    "transferred {0:.1} GiB of {0:.1} GiB (100.00%)",
                    size as f64 / GIB as f64
                )],
                ..TaskEnd::default()
            }
        }),
    );
    Reply::data(Value::from(upid))
}

/// Config keys a real host answers as integers (the rest are strings).
const INT_KEYS: &[&str] = &[
    "cores",
    "sockets",
    "vcpus",
    "balloon",
    "shares",
    "cpuunits",
    "migrate_speed",
    "acpi",
    "onboot",
    "template",
    "protection",
    "numa",
    "tablet",
    "kvm",
    "localtime",
    "freeze",
    "autostart",
    "reboot",
    "tdf",
    "ciupgrade",
    "keephugepages",
];
const FLOAT_KEYS: &[&str] = &["cpulimit", "migrate_downtime"];

fn config_get(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let vm = state.vm_on(p.node(), p.vmid())?;
    let mut map = Map::new();
    for (key, value) in &vm.config {
        let typed = if INT_KEYS.contains(&key.as_str()) {
            value
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or_else(|_| Value::from(value.clone()))
        } else if FLOAT_KEYS.contains(&key.as_str()) {
            value
                .parse::<f64>()
                .map(Value::from)
                .unwrap_or_else(|_| Value::from(value.clone()))
        } else {
            Value::from(value.clone())
        };
        map.insert(key.clone(), typed);
    }
    map.insert("digest".into(), Value::from(vm.digest()));
    Reply::data(Value::Object(map))
}

/// Parameters of a config call that are not config keys.
const NOT_CONFIG: &[&str] = &[
    "node",
    "vmid",
    "digest",
    "delete",
    "revert",
    "skiplock",
    "background_delay",
    "force",
];

fn config_set(
    shared: &Arc<Shared>,
    p: &Params,
    user: &str,
    asynchronous: bool,
) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let (node, vmid) = (p.node().to_owned(), p.vmid());
    check_unlocked(&state, &node, vmid, p)?;
    let vm = state.vm_on(&node, vmid)?;
    if let Some(digest) = p.text("digest")
        && digest != vm.digest()
    {
        return Err(ApiFail::die(
            "detected modified configuration - file changed by other user? Try again.",
        ));
    }
    let changes: Vec<(String, String)> =
        p.0.iter()
            .filter(|(key, _)| !NOT_CONFIG.contains(&key.as_str()))
            .map(|(key, value)| {
                let text = value
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| value.to_string());
                (key.clone(), text)
            })
            .collect();
    let deletions: Vec<String> = p
        .text("delete")
        .map(|list| {
            list.split([',', ';', ' '])
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let apply = move |state: &mut SimState| {
        if let Some(vm) = state.vms.get_mut(&vmid) {
            for key in &deletions {
                vm.config.remove(key);
            }
            for (key, value) in &changes {
                vm.config.insert(key.clone(), value.clone());
            }
        }
    };
    if !asynchronous {
        apply(&mut state);
        return Reply::data(Value::Null);
    }
    let upid = start_task(
        shared,
        &mut state,
        &node,
        "qmconfig",
        &vmid.to_string(),
        user,
        shared.durations.config,
        vec![format!(
            "update VM {vmid}: {}",
            p.0.keys().cloned().collect::<Vec<_>>().join(" ")
        )],
        Box::new(move |state, injected| {
            if let Some(message) = injected {
                return TaskEnd::failed(message);
            }
            apply(state);
            TaskEnd::default()
        }),
    );
    Reply::data(Value::from(upid))
}

fn status_current(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let vmid = p.vmid();
    let vm = state.vm_on(p.node(), vmid)?;
    let now = shared.unix_now();
    let mut entry = json!({
        "vmid": vmid,
        "name": vm.name(),
        "status": if vm.running { "running" } else { "stopped" },
        "qmpstatus": if vm.running { "running" } else { "stopped" },
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
        "ha": {"managed": 0},
    });
    if vm.agent_enabled() {
        entry["agent"] = Value::from(1);
    }
    if vm.running {
        entry["pid"] = Value::from(10_000 + vmid);
        entry["running-qemu"] = Value::from("9.2.0");
        entry["running-machine"] = Value::from("pc-i440fx-9.2+pve1");
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
    Reply::data(entry)
}

fn start(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let (node, vmid) = (p.node().to_owned(), p.vmid());
    check_unlocked(&state, &node, vmid, p)?;
    let boot = shared.durations.boot;
    let now = shared.unix_now();
    let task_node = node.clone();
    let upid = start_task(
        shared,
        &mut state,
        &task_node,
        "qmstart",
        &vmid.to_string(),
        user,
        shared.durations.start,
        vec![],
        Box::new(move |state, injected| {
            if let Some(message) = injected {
                return TaskEnd::failed(message);
            }
            let Some(vm) = state.vms.get(&vmid) else {
                return TaskEnd::failed(format!(
                    "Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist"
                ));
            };
            if vm.is_template() {
                return TaskEnd::failed("you can't start a vm if it's a template");
            }
            if vm.running {
                return TaskEnd::failed(format!("VM {vmid} already running"));
            }
            let needed = vm.memory_bytes();
            let capacity = state.nodes.get(&node).map(|n| n.memory_bytes).unwrap_or(0);
            if state.running_memory(&node) + needed > capacity {
                return TaskEnd {
                    log: vec![
                        "kvm: cannot set up guest memory 'pc.ram': Cannot allocate memory".into(),
                    ],
                    error: Some("start failed: QEMU exited with code 1".into()),
                    events: vec![],
                };
            }
            state.lease(vmid);
            if let Some(vm) = state.vms.get_mut(&vmid) {
                vm.running = true;
                vm.started_unix = Some(now);
                vm.agent_ready_at = Some(tokio::time::Instant::now() + boot);
            }
            TaskEnd {
                events: state
                    .identity(vmid)
                    .map(|id| vec![(id, PowerEvent::Started)])
                    .unwrap_or_default(),
                ..TaskEnd::default()
            }
        }),
    );
    Reply::data(Value::from(upid))
}

/// Marks a VM stopped; returns the event to report.
fn power_off(state: &mut SimState, vmid: u32, event: PowerEvent) -> TaskEnd {
    let identity = state.identity(vmid);
    match state.vms.get_mut(&vmid) {
        Some(vm) if vm.running => {
            vm.running = false;
            vm.started_unix = None;
            vm.agent_ready_at = None;
            vm.execs.clear();
            TaskEnd {
                events: identity.map(|id| vec![(id, event)]).unwrap_or_default(),
                ..TaskEnd::default()
            }
        }
        _ => TaskEnd::default(),
    }
}

fn stop(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let (node, vmid) = (p.node().to_owned(), p.vmid());
    check_unlocked(&state, &node, vmid, p)?;
    let upid = start_task(
        shared,
        &mut state,
        &node,
        "qmstop",
        &vmid.to_string(),
        user,
        shared.durations.stop,
        vec![],
        Box::new(move |state, injected| match injected {
            Some(message) => TaskEnd::failed(message),
            None => power_off(state, vmid, PowerEvent::HardStopped),
        }),
    );
    Reply::data(Value::from(upid))
}

fn shutdown(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let (node, vmid) = (p.node().to_owned(), p.vmid());
    check_unlocked(&state, &node, vmid, p)?;
    let vm = state.vm_on(&node, vmid)?;
    let hung = super::state::selects(&state.faults.hung, vmid, &vm.name()) && vm.running;
    let force = p.flag("forceStop") == Some(true);
    let timeout = std::time::Duration::from_secs(p.int("timeout").unwrap_or(180).max(0) as u64);
    let duration = if hung {
        timeout
    } else {
        shared.durations.shutdown
    };
    let upid = start_task(
        shared,
        &mut state,
        &node,
        "qmshutdown",
        &vmid.to_string(),
        user,
        duration,
        vec![],
        Box::new(move |state, injected| {
            if let Some(message) = injected {
                return TaskEnd::failed(message);
            }
            if hung {
                if force {
                    let mut end = power_off(state, vmid, PowerEvent::HardStopped);
                    end.log
                        .push("VM still running - terminating now with SIGTERM".into());
                    return end;
                }
                return TaskEnd::failed("VM quit/powerdown failed - got timeout");
            }
            power_off(state, vmid, PowerEvent::ShutDown)
        }),
    );
    Reply::data(Value::from(upid))
}

fn reboot(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let (node, vmid) = (p.node().to_owned(), p.vmid());
    check_unlocked(&state, &node, vmid, p)?;
    let boot = shared.durations.boot;
    let upid = start_task(
        shared,
        &mut state,
        &node,
        "qmreboot",
        &vmid.to_string(),
        user,
        shared.durations.shutdown + shared.durations.start,
        vec![],
        Box::new(move |state, injected| {
            if let Some(message) = injected {
                return TaskEnd::failed(message);
            }
            if !state.vms.get(&vmid).is_some_and(|vm| vm.running) {
                return TaskEnd::failed(format!("VM {vmid} not running"));
            }
            let mut end = power_off(state, vmid, PowerEvent::ShutDown);
            if let Some(vm) = state.vms.get_mut(&vmid) {
                vm.running = true;
                vm.agent_ready_at = Some(tokio::time::Instant::now() + boot);
            }
            end.events
                .extend(state.identity(vmid).map(|id| (id, PowerEvent::Started)));
            end
        }),
    );
    Reply::data(Value::from(upid))
}

fn destroy(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let (node, vmid) = (p.node().to_owned(), p.vmid());
    check_unlocked(&state, &node, vmid, p)?;
    if state.vm_on(&node, vmid)?.running {
        return Err(ApiFail::die(format!(
            "VM {vmid} is running - destroy failed"
        )));
    }
    let upid = start_task(
        shared,
        &mut state,
        &node,
        "qmdestroy",
        &vmid.to_string(),
        user,
        shared.durations.destroy,
        vec![format!(
            "  Logical volume \"vm-{vmid}-disk-0\" successfully removed."
        )],
        Box::new(move |state, injected| {
            if let Some(message) = injected {
                return TaskEnd::failed(message);
            }
            if state.vms.get(&vmid).is_some_and(|vm| vm.running) {
                return TaskEnd::failed(format!("VM {vmid} is running - destroy failed"));
            }
            let identity = state.identity(vmid);
            state.vms.remove(&vmid);
            state.leases.remove(&vmid);
            TaskEnd {
                events: identity
                    .map(|id| vec![(id, PowerEvent::Destroyed)])
                    .unwrap_or_default(),
                ..TaskEnd::default()
            }
        }),
    );
    Reply::data(Value::from(upid))
}

fn resize(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let (node, vmid) = (p.node().to_owned(), p.vmid());
    check_unlocked(&state, &node, vmid, p)?;
    let vm = state.vm_on(&node, vmid)?;
    let disk = p.text("disk").unwrap_or_default().to_owned();
    let Some(current_value) = vm.config.get(&disk).cloned() else {
        return Err(ApiFail::die(format!("disk '{disk}' does not exist")));
    };
    let current = current_value
        .split(',')
        .find_map(|part| part.strip_prefix("size="))
        .and_then(parse_size)
        .unwrap_or(0);
    let size_text = p.text("size").unwrap_or_default();
    let amount = parse_size(size_text.trim_start_matches('+')).unwrap_or(0);
    let wanted = if size_text.starts_with('+') {
        current + amount
    } else {
        amount
    };
    if wanted < current {
        return Err(ApiFail::die("shrinking disks is not supported"));
    }
    let upid = start_task(
        shared,
        &mut state,
        &node,
        "resize",
        &vmid.to_string(),
        user,
        shared.durations.resize,
        vec![format!(
            "  Size of logical volume pve/vm-{vmid}-disk-0 changed from {} to {}.",
            format_size(current),
            format_size(wanted)
        )],
        Box::new(move |state, injected| {
            if let Some(message) = injected {
                return TaskEnd::failed(message);
            }
            if let Some(vm) = state.vms.get_mut(&vmid)
                && let Some(value) = vm.config.get_mut(&disk)
            {
                let rest: Vec<&str> = value
                    .split(',')
                    .filter(|part| !part.starts_with("size="))
                    .collect();
                *value = format!("{},size={}", rest.join(","), format_size(wanted));
            }
            TaskEnd::default()
        }),
    );
    Reply::data(Value::from(upid))
}

async fn agent(shared: &Arc<Shared>, route: Route, p: &Params) -> Result<Reply, ApiFail> {
    let (node, vmid) = (p.node().to_owned(), p.vmid());
    let command = match route {
        Route::AgentExec => "exec",
        Route::AgentExecStatus => "exec-status",
        Route::AgentNetwork => "network-get-interfaces",
        Route::AgentFileWrite => "file-write",
        Route::AgentOsinfo => "get-osinfo",
        _ => "ping",
    };
    let agent_state = shared.lock().agent_check(&node, vmid)?;
    if let AgentState::Hung = agent_state {
        tokio::time::sleep(shared.durations.agent_timeout).await;
        return Err(ApiFail::die(format!(
            "VM {vmid} qmp command 'guest-{command}' failed - got timeout"
        )));
    }
    match route {
        Route::AgentPing => Reply::data(json!({"result": {}})),
        Route::AgentOsinfo => Reply::data(json!({"result": {
            "id": "debian",
            "name": "Debian GNU/Linux",
            "pretty-name": "Debian GNU/Linux 13 (trixie)",
            "version": "13 (trixie)",
            "version-id": "13",
            "kernel-release": "6.12.48+deb13-amd64",
            "kernel-version": "#1 SMP PREEMPT_DYNAMIC Debian 6.12.48-1",
            "machine": "x86_64",
        }})),
        Route::AgentNetwork => {
            let state = shared.lock();
            let vm = state.vm_on(&node, vmid)?;
            let mac = vm
                .config
                .get("net0")
                .and_then(|net| net.split(',').next())
                .and_then(|model| model.split_once('=').map(|(_, mac)| mac.to_lowercase()))
                .unwrap_or_else(|| "bc:24:11:00:00:00".into());
            let mut eth = json!({
                "name": "eth0",
                "hardware-address": mac,
                "ip-addresses": [],
                "statistics": {"rx-bytes": 1_048_576, "rx-packets": 1024, "rx-errs": 0, "rx-dropped": 0,
                               "tx-bytes": 524_288, "tx-packets": 512, "tx-errs": 0, "tx-dropped": 0},
            });
            let mut addresses = Vec::new();
            if let Some(ip) = state.leases.get(&vmid) {
                addresses.push(json!({"ip-address": ip.to_string(), "ip-address-type": "ipv4", "prefix": state.prefix_len}));
            }
            addresses.push(json!({"ip-address": format!("fe80::be24:11ff:fe00:{vmid:x}"), "ip-address-type": "ipv6", "prefix": 64}));
            eth["ip-addresses"] = Value::Array(addresses);
            Reply::data(json!({"result": [
                {
                    "name": "lo",
                    "hardware-address": "00:00:00:00:00:00",
                    "ip-addresses": [
                        {"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8},
                        {"ip-address": "::1", "ip-address-type": "ipv6", "prefix": 128},
                    ],
                    "statistics": {"rx-bytes": 0, "rx-packets": 0, "rx-errs": 0, "rx-dropped": 0,
                                   "tx-bytes": 0, "tx-packets": 0, "tx-errs": 0, "tx-dropped": 0},
                },
                eth,
            ]}))
        }
        Route::AgentExec => {
            let argv = p.list("command");
            if argv.is_empty() {
                return Err(ApiFail::param("command", "no command specified"));
            }
            let input = p.text("input-data").map(str::to_owned);
            let (pid, identity) = {
                let mut state = shared.lock();
                let identity = state.identity(vmid);
                let vm = state.vm_on_mut(&node, vmid)?;
                vm.next_exec_pid += 1;
                let pid = vm.next_exec_pid;
                vm.execs.insert(pid, ExecState::Running);
                (pid, identity)
            };
            let Some(identity) = identity else {
                return Err(super::state::missing_config(&node, vmid));
            };
            let future = shared.guest.exec(&identity, &argv, input.as_deref());
            let shared = shared.clone();
            tokio::spawn(async move {
                let outcome = future.await;
                let mut state = shared.lock();
                if let Some(vm) = state.vms.get_mut(&vmid)
                    && let Some(entry) = vm.execs.get_mut(&pid)
                {
                    *entry = ExecState::Done(outcome);
                }
            });
            Reply::data(json!({"pid": pid}))
        }
        Route::AgentExecStatus => {
            let pid = p.int("pid").unwrap_or(-1);
            let mut state = shared.lock();
            let vm = state.vm_on_mut(&node, vmid)?;
            let pid = u64::try_from(pid).unwrap_or(u64::MAX);
            match vm.execs.get(&pid) {
                None => Err(ApiFail::die("Agent error: Invalid parameter 'pid'")),
                Some(ExecState::Running) => Reply::data(json!({"exited": 0})),
                Some(ExecState::Done(_)) => {
                    // The guest agent forgets a process once its end has been read.
                    let Some(ExecState::Done(outcome)) = vm.execs.remove(&pid) else {
                        return Err(ApiFail::die("Agent error: Invalid parameter 'pid'"));
                    };
                    let mut reply = json!({"exited": 1, "exitcode": outcome.exit_code});
                    if !outcome.stdout.is_empty() {
                        reply["out-data"] = Value::from(outcome.stdout);
                    }
                    if !outcome.stderr.is_empty() {
                        reply["err-data"] = Value::from(outcome.stderr);
                    }
                    Reply::data(reply)
                }
            }
        }
        Route::AgentFileWrite => {
            let content = p.text("content").unwrap_or_default();
            let bytes = if p.flag("encode") == Some(false) {
                base64::engine::general_purpose::STANDARD
                    .decode(content)
                    .map_err(|_| ApiFail::die("Agent error: Base64 data is invalid"))?
            } else {
                content.as_bytes().to_vec()
            };
            let file = p.text("file").unwrap_or_default().to_owned();
            let identity = shared.lock().identity(vmid);
            if let Some(identity) = identity {
                shared.guest.file_written(&identity, &file, &bytes);
            }
            Reply::data(Value::Null)
        }
        _ => Err(ApiFail::die(format!("Method '{command}' not implemented"))),
    }
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
        "content": "images,rootdir",
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
    let list = state
        .storages
        .keys()
        .filter(|name| {
            p.text("storage")
                .is_none_or(|wanted| wanted == name.as_str())
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
        .ok_or_else(|| ApiFail::die(format!("storage '{name}' does not exist")))?;
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
