//! What a VM's configuration says of its hardware, as far as a guest that cannot be asked
//! (Talos has no shell) must be told: the MAC address Proxmox VE gave its first network
//! interface, and whether memory is hot-pluggable (Talos then sees only its boot memory).

use serde_json::Value;

/// The hardware facts of one VM's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VmHardware {
    /// The MAC address of `net0` (`virtio=BC:24:11:00:00:01,bridge=vmbr0`), lowercase.
    pub mac_address: Option<String>,
    /// Whether `hotplug` includes `memory`.
    pub memory_hotplug: bool,
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
        VmHardware {
            mac_address,
            memory_hotplug,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_interface_mac_and_memory_hotplug_are_read_from_the_config() {
        let read = VmHardware::from_config(&json!({
            "net0": "virtio=BC:24:11:0A:00:01,bridge=vmbr0,firewall=1",
            "hotplug": "network,disk,memory",
        }));
        assert_eq!(read.mac_address.as_deref(), Some("bc:24:11:0a:00:01"));
        assert!(read.memory_hotplug);
        let plain = VmHardware::from_config(&json!({"net0": "bridge=vmbr0", "hotplug": "1"}));
        assert_eq!(plain, VmHardware::default());
    }
}
