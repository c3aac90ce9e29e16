//! A VM's hardware in the simulated Proxmox, derived from its config alone: its disks (a new
//! `scsi<n>: <storage>:<GiB>` allocated as a volume, as `PVE::API2::Qemu` `create_disks`
//! does), its cards (a card without a MAC address given one, as `add_random_macs` does), the
//! checks a start makes in `config_to_command` and `vm_start_nolock` (each PCI mapping must
//! have a free device on the node, each bridge must exist and take the card's MTU). The
//! endpoints that list bridges, PCI mappings and pools, and make and fill pools, are in
//! `hardware_api`.

use super::addresses::cards;
use super::state::{ApiFail, GIB, SimState, VmState, format_size, parse_size};

impl VmState {
    /// Its disk volumes (not CD-ROMs): (key, storage, size in bytes).
    pub(super) fn volumes(&self) -> Vec<(String, String, u64)> {
        self.config
            .iter()
            .filter(|(key, _)| super::storage::is_volume_key(key))
            .filter(|(_, value)| !value.contains("media=cdrom"))
            .filter_map(|(key, value)| {
                let volume = value.split(',').next()?;
                let (storage, _) = volume.split_once(':')?;
                let size = value
                    .split(',')
                    .find_map(|part| part.strip_prefix("size="))
                    .and_then(parse_size)?;
                Some((key.clone(), storage.to_owned(), size))
            })
            .collect()
    }
}

/// A disk a config call allocates: (key, storage, bytes).
pub(super) type NewDisk = (String, String, u64);

/// A config call's changes: (key, value).
type Changes = Vec<(String, String)>;

/// A start's refusal: the task log so far and the error.
type StartRefusal = (Vec<String>, String);

/// A new disk a config call asks for (`local-lvm:32,ssd=1`): its storage and size, GiB.
fn new_disk(value: &str) -> Option<(&str, u64)> {
    let volume = value.split(',').next()?;
    let (storage, size) = volume.split_once(':')?;
    let gib: f64 = size.parse().ok()?;
    (gib > 0.0).then_some((storage, (gib * GIB as f64) as u64))
}

/// Rewrites a config call's changes as Proxmox stores them, checking what the API checks
/// before it forks its worker: a card is given a MAC when it has none (its model written
/// `model=MAC`); a new disk's storage must exist and hold disk images (else the 400 Proxmox
/// gives, on parameter `storage`). Returns the changes and the new disks to allocate:
/// (key, storage, bytes).
pub(super) fn prepare_changes(
    state: &mut SimState,
    changes: Vec<(String, String)>,
) -> Result<(Changes, Vec<NewDisk>), ApiFail> {
    let mut prepared = Vec::new();
    let mut disks = Vec::new();
    for (key, value) in changes {
        if key.starts_with("net") && key[3..].bytes().all(|b| b.is_ascii_digit()) {
            prepared.push((key, with_mac(state, &value)));
            continue;
        }
        if super::storage::is_volume_key(&key)
            && let Some((storage, bytes)) = new_disk(&value)
        {
            let Some(found) = state.storages.get(storage) else {
                return Err(ApiFail::die(format!("storage '{storage}' does not exist")));
            };
            if !found.content.iter().any(|c| c == "images") {
                return Err(ApiFail::param(
                    "storage",
                    format!("storage '{storage}' does not support vm images"),
                ));
            }
            disks.push((key.clone(), storage.to_owned(), bytes));
            prepared.push((key, value));
            continue;
        }
        prepared.push((key, value));
    }
    Ok((prepared, disks))
}

/// Gives each card of a clone's config (copied from `source`) a new MAC address, the rest of
/// it kept, as a clone does.
pub(super) fn new_macs(
    state: &mut SimState,
    source: &std::collections::BTreeMap<String, String>,
    config: &mut std::collections::BTreeMap<String, String>,
) {
    for card in cards(source) {
        let key = format!("net{}", card.index);
        let rest: Vec<&str> = source
            .get(&key)
            .map(|value| value.split(',').skip(1).collect())
            .unwrap_or_default();
        let mut value = format!("{}={}", card.model, state.new_mac());
        for part in rest {
            value.push(',');
            value.push_str(part);
        }
        config.insert(key, value);
    }
}

/// A card's property string with a MAC address (`virtio` → `virtio=BC:24:11:..`).
fn with_mac(state: &mut SimState, value: &str) -> String {
    let mut parts = value.split(',');
    let first = parts.next().unwrap_or_default();
    let has_mac = first.contains('=') && !first.starts_with("model=")
        || value.split(',').any(|p| p.starts_with("macaddr="));
    if has_mac {
        return value.to_owned();
    }
    let model = first.strip_prefix("model=").unwrap_or(first);
    let mut rest: Vec<&str> = parts.collect();
    rest.sort_unstable();
    let mut out = format!("{model}={}", state.new_mac());
    for part in rest {
        out.push(',');
        out.push_str(part);
    }
    out
}

/// Allocates the new disks of a config call on `vmid` (`vm-<id>-disk-<n>` on each storage),
/// as its worker does; refuses when the storage has not the room.
pub(super) fn allocate(
    state: &mut SimState,
    vmid: u32,
    disks: &[(String, String, u64)],
    changes: &mut [(String, String)],
) -> Result<Vec<String>, String> {
    let mut log = Vec::new();
    let node = state
        .vms
        .get(&vmid)
        .map(|vm| vm.node.clone())
        .unwrap_or_default();
    for (key, storage, bytes) in disks {
        let size = state.storages.get(storage).map_or(0, |s| s.size_bytes);
        let used = state.storage_used(storage, &node);
        if used + bytes > size {
            return Err(format!(
                "unable to create VM {vmid} - no space left on storage '{storage}' ({} GiB needed, {} GiB free)",
                bytes / GIB,
                size.saturating_sub(used) / GIB
            ));
        }
        let index = (0..)
            .find(|n| {
                let name = format!("{storage}:vm-{vmid}-disk-{n}");
                let used = state.vms.get(&vmid).is_some_and(|vm| {
                    vm.config
                        .values()
                        .any(|v| v.split(',').next() == Some(name.as_str()))
                }) || changes
                    .iter()
                    .any(|(_, v)| v.split(',').next() == Some(name.as_str()));
                !used
            })
            .unwrap_or(0);
        let volume = format!("{storage}:vm-{vmid}-disk-{index}");
        if let Some((_, value)) = changes.iter_mut().find(|(k, _)| k == key) {
            let mut options: Vec<&str> = value.split(',').skip(1).collect();
            let size = format!("size={}", format_size(*bytes));
            options.push(&size);
            options.sort_unstable();
            *value = std::iter::once(volume.as_str())
                .chain(options)
                .collect::<Vec<_>>()
                .join(",");
        }
        log.push(format!("{key}: successfully created disk '{volume}'"));
    }
    Ok(log)
}

/// What a start refuses, in the order `vm_start_nolock` meets it: a PCI mapping with no device
/// on the node, a bridge the node lacks or whose MTU is smaller than the card's, a mapped
/// device another running VM holds. `Err((log, error))`.
pub(super) fn start_check(state: &SimState, vmid: u32) -> Result<(), StartRefusal> {
    let Some(vm) = state.vms.get(&vmid) else {
        return Ok(());
    };
    let node = vm.node.as_str();
    let devices = pci_devices(state, vm)?;
    let bridges = state.nodes.get(node).map(|n| &n.bridges);
    for card in cards(&vm.config) {
        let Some(mtu) = bridges.and_then(|b| b.get(&card.bridge)) else {
            return Err((
                Vec::new(),
                format!("bridge '{}' does not exist", card.bridge),
            ));
        };
        if card.model == "virtio"
            && let Some(wanted) = card.mtu.filter(|m| *m > 1)
            && wanted > *mtu
        {
            return Err((
                Vec::new(),
                format!(
                    "netdev net{}: MTU '{wanted}' is bigger than the bridge MTU '{mtu}' - adjust the MTU for the network device in the VM configuration, while ensuring that the bridge is configured as desired.",
                    card.index
                ),
            ));
        }
    }
    for (path, holder) in devices {
        if let Some(holder) = holder {
            return Err((
                Vec::new(),
                format!("PCI device '{path}' already in use by VMID '{holder}'"),
            ));
        }
    }
    Ok(())
}

/// The mapped PCI devices `vm` gets on its node, each with the running VM already holding it.
fn pci_devices(state: &SimState, vm: &VmState) -> Result<Vec<(String, Option<u32>)>, StartRefusal> {
    let mut chosen: Vec<(String, Option<u32>)> = Vec::new();
    for index in 0..16 {
        let Some(value) = vm.config.get(&format!("hostpci{index}")) else {
            continue;
        };
        let Some(mapping) = value
            .split(',')
            .find_map(|part| part.strip_prefix("mapping="))
        else {
            continue;
        };
        let on_node: Vec<&String> = state
            .pci_mappings
            .get(mapping)
            .into_iter()
            .flatten()
            .filter(|(node, _)| *node == vm.node)
            .map(|(_, path)| path)
            .collect();
        if on_node.is_empty() {
            return Err((
                Vec::new(),
                format!("PCI device mapping not found for '{mapping}'"),
            ));
        }
        // One of the mapping's devices that no running VM holds, else the first (its holder
        // named).
        let holder_of = |path: &str| holder(state, &vm.node, mapping, path);
        let pick = on_node
            .iter()
            .find(|path| holder_of(path).is_none() && !chosen.iter().any(|(p, _)| p == **path))
            .or(on_node.first())
            .map(|path| ((*path).clone(), holder_of(path)));
        chosen.extend(pick);
    }
    Ok(chosen)
}

/// The running VM on `node` holding device `path` of `mapping`.
fn holder(state: &SimState, node: &str, mapping: &str, path: &str) -> Option<u32> {
    state
        .vms
        .iter()
        .filter(|(_, vm)| vm.running && vm.node == node)
        .find(|(vmid, _)| {
            state
                .held_devices
                .get(vmid)
                .is_some_and(|held| held.iter().any(|(m, p)| m == mapping && p == path))
        })
        .map(|(vmid, _)| *vmid)
}

impl SimState {
    /// What `vmid`'s guest sees: its disks in slot order (`sda`, `sdb`, ...; CD-ROMs and the
    /// cloud-init drive left out) and its cards with their MTU and address.
    pub(super) fn guest_hardware(&self, vmid: u32) -> super::guest::GuestHardware {
        let Some(vm) = self.vms.get(&vmid) else {
            return super::guest::GuestHardware::default();
        };
        let mut slots: Vec<(u8, u32, String)> = vm
            .config
            .iter()
            .filter(|(key, value)| {
                super::storage::is_volume_key(key) && !value.contains("media=cdrom")
            })
            .filter_map(|(key, value)| {
                let (bus, index) = ["scsi", "sata", "virtio", "ide"]
                    .iter()
                    .enumerate()
                    .find_map(|(rank, bus)| {
                        Some((rank as u8, key.strip_prefix(bus)?.parse().ok()?))
                    })?;
                Some((bus, index, value.clone()))
            })
            .collect();
        slots.sort();
        let disks = slots
            .into_iter()
            .enumerate()
            .map(|(position, (_, _, value))| super::guest::GuestDisk {
                name: format!(
                    "sd{}",
                    char::from(b'a' + u8::try_from(position % 26).unwrap_or(0))
                ),
                serial: value
                    .split(',')
                    .find_map(|part| part.strip_prefix("serial="))
                    .map(str::to_owned),
                size_bytes: value
                    .split(',')
                    .find_map(|part| part.strip_prefix("size="))
                    .and_then(parse_size)
                    .unwrap_or(0),
            })
            .collect();
        let bridges = self.nodes.get(&vm.node).map(|n| &n.bridges);
        let addresses = self.card_addresses(vmid);
        let cards = cards(&vm.config)
            .into_iter()
            .map(|card| super::guest::GuestCard {
                name: format!("eth{}", card.index),
                mtu: card
                    .mtu
                    .filter(|m| *m > 1)
                    .or_else(|| bridges.and_then(|b| b.get(&card.bridge)).copied())
                    .unwrap_or(1500),
                address: addresses
                    .iter()
                    .find(|(index, _)| *index == card.index)
                    .map(|(_, a)| *a),
                mac: card.mac,
            })
            .collect();
        super::guest::GuestHardware {
            disks,
            cards,
            cloud_init: vm.cloud_init,
        }
    }

    /// Records the mapped devices `vmid` holds once started (each mapping's first free one).
    pub(super) fn take_devices(&mut self, vmid: u32) {
        let Some(vm) = self.vms.get(&vmid) else {
            return;
        };
        let Ok(devices) = pci_devices(self, vm) else {
            return;
        };
        let mappings: Vec<String> = (0..16)
            .filter_map(|i| vm.config.get(&format!("hostpci{i}")))
            .filter_map(|v| v.split(',').find_map(|p| p.strip_prefix("mapping=")))
            .map(str::to_owned)
            .collect();
        let held = mappings
            .into_iter()
            .zip(devices.into_iter().map(|(path, _)| path))
            .collect();
        self.held_devices.insert(vmid, held);
    }
}
