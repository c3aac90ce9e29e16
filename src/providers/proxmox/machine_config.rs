//! The config parameters of a VM's hardware (pure): sockets, data disks, network cards, PCI
//! devices and cloud-init, written as the property strings of Proxmox VE's schema (`scsi[n]`,
//! `net[n]`, `hostpci[n]`, `ipconfig[n]`), computed against the VM's config as it is, so a
//! retry after a crash changes nothing already right.
//!
//! # Guarantees
//! - A data disk is allocated once: it carries the serial `capstan-disk<i>` (what the guest
//!   finds it by, `/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_capstan-disk<i>`), and a disk with
//!   that serial already in the config is left as it is. New disks take the first free `scsi`
//!   slots after the template's own disks.
//! - A network card keeps the MAC address its slot already has (Proxmox gives a new card a
//!   random one); cards past the declared ones are removed.
//! - A VM with a PCI device has ballooning off (`balloon: 0`): a passed-through device pins all
//!   guest memory, which the balloon driver cannot give back.

use capstan_core::spec::hardware::{DataDisk, MachineHardware, NetworkCard};
use serde_json::Value;

use super::api::Params;
use super::wire::text;

/// The serial of the `index`-th data disk (0-based), as the guest sees it.
pub fn disk_serial(index: usize) -> String {
    format!("capstan-disk{}", index + 1)
}

/// The highest `scsi` slot of a VM (`scsi0` to `scsi30`).
const MAX_SCSI: usize = 30;

/// The parameters that give the VM `config` the hardware `hardware`: data disks (on
/// `default_storage` when they name none), network cards, PCI devices and ballooning. Sockets
/// are set by the caller with the cores.
pub(super) fn hardware_params(
    config: &Value,
    hardware: &MachineHardware,
    default_storage: &str,
) -> Params {
    let mut params: Params = Vec::new();
    disks(config, &hardware.disks, default_storage, &mut params);
    if !hardware.networks.is_empty() {
        cards(config, &hardware.networks, &mut params);
    }
    for (index, device) in hardware.pci.iter().enumerate() {
        params.push((
            format!("hostpci{index}"),
            format!("mapping={}", device.mapping),
        ));
    }
    if !hardware.pci.is_empty() {
        params.push(("balloon".into(), "0".into()));
    }
    params
}

/// The serial a disk's property string carries, if any.
fn serial_of(value: &str) -> Option<&str> {
    value
        .split(',')
        .find_map(|part| part.strip_prefix("serial="))
}

fn disks(config: &Value, disks: &[DataDisk], default_storage: &str, params: &mut Params) {
    let slot_value = |slot: usize| text(config, &format!("scsi{slot}"));
    // The template's own disks: occupied slots without one of our serials.
    let template_last = (0..=MAX_SCSI)
        .filter(|slot| {
            slot_value(*slot)
                .is_some_and(|v| !serial_of(&v).is_some_and(|s| s.starts_with("capstan-disk")))
        })
        .max()
        .unwrap_or(0);
    let mut next = template_last + 1;
    for (index, disk) in disks.iter().enumerate() {
        let serial = disk_serial(index);
        let present = (0..=MAX_SCSI)
            .any(|slot| slot_value(slot).is_some_and(|v| serial_of(&v) == Some(serial.as_str())));
        if present {
            continue;
        }
        while next <= MAX_SCSI && slot_value(next).is_some() {
            next += 1;
        }
        if next > MAX_SCSI {
            // Validation bounds the disks; a template with thirty disks leaves no slot, and
            // Proxmox refuses the parameter, naming it.
            next = MAX_SCSI + 1;
        }
        let storage = disk.storage.as_deref().unwrap_or(default_storage);
        let mut value = format!("{storage}:{}", disk.size_gib);
        if disk.ssd {
            value.push_str(",ssd=1");
        }
        if disk.discard {
            value.push_str(",discard=on");
        }
        if disk.iothread {
            value.push_str(",iothread=1");
        }
        if let Some(cache) = disk.cache {
            value.push_str(&format!(",cache={}", cache.as_str()));
        }
        value.push_str(&format!(",serial={serial}"));
        params.push((format!("scsi{next}"), value));
        next += 1;
    }
}

/// The MAC address of a card's property string (`virtio=BC:24:11:...` or `macaddr=...`).
fn mac_of(value: &str) -> Option<String> {
    value.split(',').find_map(|part| {
        let (key, mac) = part.split_once('=')?;
        let is_mac = mac.len() == 17 && mac.split(':').count() == 6;
        (is_mac && key != "bridge").then(|| mac.to_owned())
    })
}

fn cards(config: &Value, cards: &[NetworkCard], params: &mut Params) {
    for (index, card) in cards.iter().enumerate() {
        let key = format!("net{index}");
        let model = card.model.as_str();
        let mut value = match text(config, &key).as_deref().and_then(mac_of) {
            Some(mac) => format!("{model}={mac}"),
            None => model.to_owned(),
        };
        value.push_str(&format!(",bridge={}", card.bridge));
        if card.firewall {
            value.push_str(",firewall=1");
        }
        if let Some(mtu) = card.mtu {
            value.push_str(&format!(",mtu={mtu}"));
        }
        if let Some(vlan) = card.vlan {
            value.push_str(&format!(",tag={vlan}"));
        }
        params.push((key, value));
    }
    let extra: Vec<String> = (cards.len()..32)
        .map(|index| format!("net{index}"))
        .filter(|key| text(config, key).is_some())
        .collect();
    if !extra.is_empty() {
        params.push(("delete".into(), extra.join(",")));
    }
}

/// The storage of the VM's boot disk (`local-lvm` in `local-lvm:vm-105-disk-0,size=50G`).
pub(super) fn boot_storage(config: &Value) -> Option<String> {
    let (key, _) = super::wire::boot_disk(config)?;
    let value = text(config, &key)?;
    let (storage, _) = value.split_once(':')?;
    Some(storage.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hardware(json: Value) -> MachineHardware {
        serde_json::from_value(json).expect("hardware")
    }

    #[test]
    fn new_disks_take_the_slots_after_the_templates_and_carry_their_serial() {
        let config = json!({
            "scsi0": "local-lvm:vm-105-disk-0,iothread=1,size=50G",
            "scsi1": "local-lvm:vm-105-disk-1,size=4G",
            "net0": "virtio=BC:24:11:00:00:07,bridge=vmbr0",
        });
        let wanted = hardware(json!({"disks": [
            {"sizeGiB": 100, "ssd": true, "discard": true, "iothread": true, "cache": "none"},
            {"sizeGiB": 20, "storage": "ceph"},
        ]}));
        assert_eq!(
            hardware_params(&config, &wanted, "local-lvm"),
            vec![
                (
                    "scsi2".to_owned(),
                    "local-lvm:100,ssd=1,discard=on,iothread=1,cache=none,serial=capstan-disk1"
                        .to_owned()
                ),
                (
                    "scsi3".to_owned(),
                    "ceph:20,serial=capstan-disk2".to_owned()
                ),
            ]
        );
        // A retry finds the first disk made: only the second is asked for.
        let mut made = config.clone();
        made["scsi2"] = json!("local-lvm:vm-105-disk-2,serial=capstan-disk1,size=100G");
        assert_eq!(
            hardware_params(&made, &wanted, "local-lvm"),
            vec![(
                "scsi3".to_owned(),
                "ceph:20,serial=capstan-disk2".to_owned()
            )]
        );
    }

    #[test]
    fn cards_keep_their_mac_and_extra_cards_go() {
        let config = json!({
            "net0": "virtio=BC:24:11:00:00:07,bridge=vmbr0,firewall=1",
            "net2": "virtio=BC:24:11:00:00:09,bridge=vmbr9",
        });
        let wanted = hardware(json!({"networks": [
            {"bridge": "vmbr0", "vlan": 20},
            {"bridge": "vmbr1", "vlan": 30, "mtu": 9000, "firewall": true},
        ], "pci": [{"mapping": "gpu-a40"}]}));
        assert_eq!(
            hardware_params(&config, &wanted, "local-lvm"),
            vec![
                (
                    "net0".to_owned(),
                    "virtio=BC:24:11:00:00:07,bridge=vmbr0,tag=20".to_owned()
                ),
                (
                    "net1".to_owned(),
                    "virtio,bridge=vmbr1,firewall=1,mtu=9000,tag=30".to_owned()
                ),
                ("delete".to_owned(), "net2".to_owned()),
                ("hostpci0".to_owned(), "mapping=gpu-a40".to_owned()),
                ("balloon".to_owned(), "0".to_owned()),
            ]
        );
    }
}
