//! The endpoints of what the simulated Proxmox offers a VM's hardware: each node's bridges
//! (`GET /nodes/{node}/network`), the PCI resource mappings (`GET /cluster/mapping/pci`), and
//! resource pools (`POST /pools`, `PUT /pools`).

use std::sync::Arc;

use serde_json::{Value, json};

use super::params::Params;
use super::reply::Reply;
use super::state::{ApiFail, Shared};

/// `GET /nodes/{node}/network`: the node's bridges (with `type`), as `ifupdown2` reports them.
pub(super) fn node_network(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let wanted = p.text("type");
    let Some(node) = state.nodes.get(p.node()) else {
        return Err(ApiFail::die(format!("no such node '{}'", p.node())));
    };
    let bridges_wanted = wanted.is_none_or(|t| matches!(t, "bridge" | "any_bridge"));
    let list: Vec<Value> = node
        .bridges
        .iter()
        .filter(|_| bridges_wanted)
        .map(|(name, mtu)| {
            json!({
                "iface": name,
                "type": "bridge",
                "active": 1,
                "autostart": 1,
                "method": "manual",
                "method6": "manual",
                "families": ["inet"],
                "bridge_ports": "",
                "bridge_stp": "off",
                "bridge_fd": "0",
                "mtu": mtu.to_string(),
                "priority": 3,
            })
        })
        .collect();
    Reply::data(Value::Array(list))
}

/// `GET /cluster/mapping/pci`: each mapping with its devices (`map`, one property string per
/// device).
pub(super) fn pci_mappings(shared: &Arc<Shared>) -> Result<Reply, ApiFail> {
    let state = shared.lock();
    let list: Vec<Value> = state
        .pci_mappings
        .iter()
        .map(|(id, devices)| {
            let map: Vec<String> = devices
                .iter()
                .map(|(node, path)| format!("id=10de:2235,iommugroup=42,node={node},path={path}"))
                .collect();
            json!({"id": id, "map": map, "type": "pci", "description": ""})
        })
        .collect();
    Reply::data(Value::Array(list))
}

/// `POST /pools`: a new pool (`pool '<id>' already exists` when it does).
pub(super) fn create_pool(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let pool = p.text("poolid").unwrap_or_default().to_owned();
    if state.pools.contains_key(&pool) {
        return Err(ApiFail::die(format!("pool '{pool}' already exists")));
    }
    let comment = p.text("comment").unwrap_or_default().to_owned();
    state.pools.insert(pool, comment);
    Reply::data(Value::Null)
}

/// `PUT /pools`: adds (or with `delete`, removes) guests; a guest in another pool moves only
/// with `allow-move`.
pub(super) fn update_pool(shared: &Arc<Shared>, p: &Params) -> Result<Reply, ApiFail> {
    let mut state = shared.lock();
    let pool = p.text("poolid").unwrap_or_default().to_owned();
    if !state.pools.contains_key(&pool) {
        return Err(ApiFail::die(format!("pool '{pool}' does not exist")));
    }
    let delete = p.flag("delete") == Some(true);
    let allow_move = p.flag("allow-move") == Some(true);
    let vmids: Vec<u32> = p
        .text("vms")
        .unwrap_or_default()
        .split([',', ';', ' '])
        .filter_map(|id| id.trim().parse().ok())
        .collect();
    for vmid in vmids {
        let Some(vm) = state.vms.get_mut(&vmid) else {
            return Err(ApiFail::die(format!("VM {vmid} does not exist")));
        };
        if delete {
            if vm.pool.as_deref() == Some(pool.as_str()) {
                vm.pool = None;
            }
            continue;
        }
        match &vm.pool {
            Some(current) if *current == pool => {}
            Some(current) if !allow_move => {
                return Err(ApiFail::die(format!(
                    "VM {vmid} belongs already to pool '{current}' and 'allow-move' is not set"
                )));
            }
            _ => vm.pool = Some(pool.clone()),
        }
    }
    Reply::data(Value::Null)
}
