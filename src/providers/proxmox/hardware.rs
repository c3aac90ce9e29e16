//! What a VM's configuration says of its hardware: as far as a guest that cannot be asked
//! (Talos has no shell) must be told, the MAC address Proxmox VE gave each network card and
//! whether memory is hot-pluggable (Talos then sees only its boot memory); and, for drift
//! (rule 14), the sockets, data disks, cards and PCI devices capstan gave it, read back as the
//! file declares them, with the operator's tags capstan recorded.

use capstan_core::spec::hardware::{
    DataDisk, DiskCache, MachineHardware, NetworkCard, NicModel, PciDevice,
};
use serde_json::Value;

use super::ownership;

/// The hardware facts of one VM's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VmHardware {
    /// The MAC address of `net0` (`virtio=BC:24:11:00:00:01,bridge=vmbr0`), lowercase.
    pub mac_address: Option<String>,
    /// The MAC address of each card `net0`, `net1`, ... in order, lowercase (a gap ends it).
    pub mac_addresses: Vec<String>,
    /// Whether `hotplug` includes `memory`.
    pub memory_hotplug: bool,
    /// What the config holds of what `machine` declares (data disks by their capstan
    /// serial, cards, PCI mappings, sockets; mounts and `primary` are not in a config).
    pub declared: MachineHardware,
    /// The operator's tags capstan recorded as set on it (its description's record).
    pub recorded_tags: Vec<String>,
    /// Whether the VM has a cloud-init drive (`cloudinit` on a CD-ROM slot).
    pub cloud_init_drive: bool,
}

impl VmHardware {
    /// Reads `GET /nodes/{node}/qemu/{vmid}/config`'s answer; what is missing or malformed
    /// reads as absent.
    pub fn from_config(config: &Value) -> Self {
        let text = |key: &str| config.get(key).and_then(Value::as_str).unwrap_or_default();
        let mac_address = text("net0").split(',').find_map(|pair| {
            let (_, value) = pair.split_once('=')?;
            let is_mac = value.len() == 17
                && value
                    .split(':')
                    .all(|part| part.len() == 2 && part.bytes().all(|b| b.is_ascii_hexdigit()));
            is_mac.then(|| value.to_ascii_lowercase())
        });
        let memory_hotplug = text("hotplug").split(',').any(|item| item == "memory");
        let mac_addresses = (0..32)
            .map_while(|index| {
                let card = text(&format!("net{index}"));
                (!card.is_empty()).then(|| mac_of(card).unwrap_or_default())
            })
            .collect();
        let cloud_init_drive = ["ide0", "ide1", "ide2", "ide3", "sata0", "scsi0"]
            .iter()
            .chain(["scsi1", "scsi2", "sata1", "sata2"].iter())
            .any(|key| {
                text(key)
                    .split(',')
                    .next()
                    .is_some_and(|v| v.contains("cloudinit"))
            });
        VmHardware {
            mac_address,
            mac_addresses,
            memory_hotplug,
            declared: declared(config),
            recorded_tags: ownership::recorded_tags(text("description")),
            cloud_init_drive,
        }
    }
}

/// The MAC address of a card's property string, lowercase.
fn mac_of(card: &str) -> Option<String> {
    card.split(',').find_map(|pair| {
        let (_, value) = pair.split_once('=')?;
        let is_mac = value.len() == 17
            && value
                .split(':')
                .all(|part| part.len() == 2 && part.bytes().all(|b| b.is_ascii_hexdigit()));
        is_mac.then(|| value.to_ascii_lowercase())
    })
}

/// One `key=value` of a property string.
fn option<'a>(value: &'a str, key: &str) -> Option<&'a str> {
    value
        .split(',')
        .find_map(|part| part.strip_prefix(key)?.strip_prefix('='))
}

/// What a config holds of a machine's declared hardware.
fn declared(config: &Value) -> MachineHardware {
    let text = |key: &str| config.get(key).and_then(Value::as_str).map(str::to_owned);
    let sockets = config
        .get("sockets")
        .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
        .and_then(|v| u32::try_from(v).ok())
        .filter(|s| *s != 1);
    let mut disks: Vec<(usize, DataDisk)> = (0..=30)
        .filter_map(|slot| text(&format!("scsi{slot}")))
        .filter_map(|value| {
            let serial = option(&value, "serial")?;
            let index: usize = serial.strip_prefix("capstan-disk")?.parse().ok()?;
            let size = option(&value, "size").and_then(super::wire::parse_size)?;
            let flag = |key: &str| option(&value, key).is_some_and(|v| v == "1" || v == "on");
            let disk = DataDisk {
                size_gib: u32::try_from(size / super::wire::GIB).unwrap_or(u32::MAX),
                storage: value.split_once(':').map(|(s, _)| s.to_owned()),
                ssd: flag("ssd"),
                discard: flag("discard"),
                iothread: flag("iothread"),
                cache: option(&value, "cache")
                    .and_then(|c| serde_json::from_value::<DiskCache>(Value::from(c)).ok()),
                mount: None,
            };
            Some((index, disk))
        })
        .collect();
    disks.sort_by_key(|(index, _)| *index);
    let networks = (0..32)
        .map_while(|index| text(&format!("net{index}")))
        .map(|value| NetworkCard {
            bridge: option(&value, "bridge").unwrap_or_default().to_owned(),
            vlan: option(&value, "tag").and_then(|v| v.parse().ok()),
            mtu: option(&value, "mtu").and_then(|v| v.parse().ok()),
            model: value
                .split([',', '='])
                .next()
                .and_then(|m| serde_json::from_value::<NicModel>(Value::from(m)).ok())
                .unwrap_or_default(),
            firewall: option(&value, "firewall").is_some_and(|v| v == "1"),
            primary: false,
        })
        .collect();
    let pci = (0..16)
        .filter_map(|index| text(&format!("hostpci{index}")))
        .filter_map(|value| {
            Some(PciDevice {
                mapping: option(&value, "mapping")?.to_owned(),
            })
        })
        .collect();
    MachineHardware {
        sockets,
        disks: disks.into_iter().map(|(_, disk)| disk).collect(),
        networks,
        pci,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_capstan_gave_a_vm_reads_back_as_the_file_declares_it() {
        let read = VmHardware::from_config(&json!({
            "sockets": 2,
            "scsi0": "local-lvm:vm-105-disk-0,iothread=1,size=50G",
            "scsi1": "local-lvm:vm-105-disk-1,size=4G",
            "scsi2": "local-lvm:vm-105-disk-2,discard=on,serial=capstan-disk1,size=100G,ssd=1",
            "net0": "virtio=BC:24:11:00:00:07,bridge=vmbr0,tag=20",
            "net1": "virtio=BC:24:11:00:00:08,bridge=vmbr1,firewall=1,mtu=9000,tag=30",
            "hostpci0": "mapping=gpu-a40",
            "ide2": "local-lvm:vm-105-cloudinit,media=cdrom",
            "description": "x\ncapstan.dev/tags: team-a;storage\n",
        }));
        let wanted: MachineHardware = serde_json::from_value(json!({
            "sockets": 2,
            "disks": [{"sizeGiB": 100, "storage": "local-lvm", "ssd": true, "discard": true}],
            "networks": [
                {"bridge": "vmbr0", "vlan": 20},
                {"bridge": "vmbr1", "vlan": 30, "mtu": 9000, "firewall": true},
            ],
            "pci": [{"mapping": "gpu-a40"}],
        }))
        .expect("hardware");
        assert_eq!(read.declared, wanted);
        assert_eq!(
            read.mac_addresses,
            vec!["bc:24:11:00:00:07", "bc:24:11:00:00:08"]
        );
        assert_eq!(read.recorded_tags, vec!["team-a", "storage"]);
        assert!(read.cloud_init_drive);
    }

    #[test]
    fn the_first_interface_mac_and_memory_hotplug_are_read_from_the_config() {
        let read = VmHardware::from_config(&json!({
            "net0": "virtio=BC:24:11:0A:00:01,bridge=vmbr0,firewall=1",
            "hotplug": "network,disk,memory",
        }));
        assert_eq!(read.mac_address.as_deref(), Some("bc:24:11:0a:00:01"));
        assert!(read.memory_hotplug);
        let plain = VmHardware::from_config(&json!({"net0": "bridge=vmbr0", "hotplug": "1"}));
        assert_eq!(plain.mac_address, None);
        assert!(!plain.memory_hotplug);
    }
}
