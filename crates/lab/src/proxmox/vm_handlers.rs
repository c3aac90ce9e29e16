//! The simulated VM endpoints: clone, config, status, power (start, stop, shutdown, reboot),
//! destroy and resize. Asynchronous actions check a few things synchronously (HTTP 500, as a
//! real host does before forking its worker) and fail everything else inside the task.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::guest::PowerEvent;
use super::params::Params;
use super::reply::Reply;
use super::state::{ApiFail, GIB, MIB, Shared, SimState, format_size, parse_size};
use super::tasks::{TaskEnd, start_task};

fn check_unlocked(state: &SimState, node: &str, vmid: u32, p: &Params) -> Result<(), ApiFail> {
    let vm = state.vm_on(node, vmid)?;
    match vm.lock() {
        Some(lock) if p.flag("skiplock") != Some(true) => {
            Err(ApiFail::die(format!("VM is locked ({lock})")))
        }
        _ => Ok(()),
    }
}

pub(super) fn clone_vm(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let node = p.node().to_owned();
    let source_id = p.vmid();
    let newid = u32::try_from(p.int("newid").unwrap_or(0)).unwrap_or(0);
    // The checks run in qemu-server's order (`API2/Qemu.pm` clone_vm): target node, target
    // storage, lock, linked-clone parameters, the source's storage, the new VMID.
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
    if let Some(storage) = p.text("storage") {
        let Some(storage_state) = state.storages.get(storage) else {
            return Err(ApiFail::die(format!("storage '{storage}' does not exist")));
        };
        if target != node && !storage_state.shared {
            return Err(ApiFail::die(format!(
                "can't clone to non-shared storage '{storage}'"
            )));
        }
    }
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
    let image = source.image();
    let (mut config, source_config) = (source.config.clone(), source.config.clone());
    let source_name = source.name();
    let full = p.flag("full").unwrap_or(!is_template);
    if !full && p.text("storage").is_some() {
        return Err(ApiFail::die(
            "parameter 'storage' not allowed for linked clones",
        ));
    }
    // Whatever storage the copy goes to, the source's volumes must be reachable from the
    // target node: all on shared storage.
    if target != node && !state.volumes_shared(&config) {
        return Err(ApiFail::die(format!(
            "can't clone VM to node '{target}' (VM uses local storage)"
        )));
    }
    if state.vms.contains_key(&newid) {
        return Err(ApiFail::die(format!(
            "unable to create VM {newid}: config file already exists"
        )));
    }
    let storage = p.text("storage").unwrap_or(&source_storage).to_owned();
    if !state.storages.contains_key(&storage) {
        return Err(ApiFail::die(format!("storage '{storage}' does not exist")));
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
    if config.contains_key("ide2") {
        config.insert(
            "ide2".into(),
            format!("{storage}:vm-{newid}-cloudinit,media=cdrom"),
        );
    }
    super::hardware::new_macs(&mut state, &source_config, &mut config);
    config.insert("meta".into(), format!("creation-qemu=9.2.0,ctime={now}"));
    config.insert("lock".into(), "clone".into());
    state.insert_vm(newid, &target, config, false, pool);
    if let Some(clone) = state.vms.get_mut(&newid) {
        clone.take_image(image);
    }
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

pub(super) fn config_get(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
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

pub(super) fn config_set(
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
    let (changes, disks) = super::hardware::prepare_changes(&mut state, changes)?;
    let apply = move |state: &mut SimState| -> Result<Vec<String>, String> {
        let mut changes = changes.clone();
        let log = super::hardware::allocate(state, vmid, &disks, &mut changes)?;
        if let Some(vm) = state.vms.get_mut(&vmid) {
            for key in &deletions {
                vm.config.remove(key);
            }
            for (key, value) in &changes {
                vm.config.insert(key.clone(), value.clone());
            }
        }
        Ok(log)
    };
    if !asynchronous {
        apply(&mut state).map_err(ApiFail::die)?;
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
            match apply(state) {
                Ok(log) => TaskEnd {
                    log,
                    ..TaskEnd::default()
                },
                Err(message) => TaskEnd::failed(message),
            }
        }),
    );
    Reply::data(Value::from(upid))
}

pub(super) fn status_current(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
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

pub(super) fn start(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let (node, vmid) = (p.node().to_owned(), p.vmid());
    check_unlocked(&state, &node, vmid, p)?;
    let boot = shared.durations.boot;
    let now = shared.unix_now();
    let guest = Arc::clone(&shared.guest);
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
            if let Err((log, error)) = super::hardware::start_check(state, vmid) {
                return TaskEnd {
                    log,
                    error: Some(error),
                    ..TaskEnd::default()
                };
            }
            let Some(vm) = state.vms.get(&vmid) else {
                return TaskEnd::failed("the VM went away");
            };
            let needed = vm.memory_bytes();
            let capacity = state.nodes.get(&node).map(|n| n.memory_bytes).unwrap_or(0);
            if state.running_memory(&node) + needed > capacity {
                return TaskEnd {
                    log: vec![
                        "kvm: cannot set up guest memory 'pc.ram': Cannot allocate memory".into(),
                    ],
                    error: Some("start failed: QEMU exited with code 1".into()),
                    ..TaskEnd::default()
                };
            }
            state.take_devices(vmid);
            state.address_at_start(vmid, guest.as_ref());
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

/// Marks a VM stopped (its mapped devices freed); returns the event to report.
fn power_off(state: &mut SimState, vmid: u32, event: PowerEvent) -> TaskEnd {
    let identity = state.identity(vmid);
    state.held_devices.remove(&vmid);
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

pub(super) fn stop(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
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

pub(super) fn shutdown(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
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

pub(super) fn reboot(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
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

pub(super) fn destroy(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
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
            state.release_addresses(vmid);
            state.held_devices.remove(&vmid);
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

pub(super) fn resize(shared: &Arc<Shared>, p: &Params, user: &str) -> Result<Reply, ApiFail> {
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
