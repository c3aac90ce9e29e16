//! Reading Proxmox wire values leniently, as Proxmox writes them: numbers as JSON numbers or
//! numeric strings, booleans as `1`/`0` (false often left out), disk sizes as `32G` (pure).

use serde_json::Value;

use super::VmRef;
use super::api::segment;
use super::ownership::{self, RefusedOwner, VmOwner};
use crate::model::VmId;

pub(super) const MIB: u64 = 1024 * 1024;
pub(super) const GIB: u64 = 1024 * MIB;

pub(super) fn vm_path(vm: &VmRef, suffix: &str) -> String {
    format!("/nodes/{}/qemu/{}{suffix}", segment(&vm.node.0), vm.vmid)
}

/// Ownership from a VM config: tags first, the description as the fallback (not read when
/// the tags were refused).
pub(super) fn owner_of(vmid: VmId, config: &Value) -> Option<VmOwner> {
    let tags = text(config, "tags")
        .map(|raw| ownership::split_tags(&raw))
        .unwrap_or_default();
    match ownership::parse_tags(&tags) {
        Ok(None) => accepted(
            vmid,
            text(config, "description").map_or(Ok(None), |d| ownership::parse_description(&d)),
        ),
        parsed => accepted(vmid, parsed),
    }
}

/// `parsed`, or no owner when it was refused: whoever may tag the VM in Proxmox wrote a value
/// capstan never writes, so the VM is nobody's (never adopted, changed or destroyed), with a
/// warning naming the VM and the tag.
pub(super) fn accepted(
    vmid: VmId,
    parsed: Result<Option<VmOwner>, RefusedOwner>,
) -> Option<VmOwner> {
    parsed.unwrap_or_else(|refused| {
        tracing::warn!(
            vm = %vmid,
            %refused,
            "vm ignored: its ownership tag holds a value capstan never writes"
        );
        None
    })
}

/// The boot disk's key and size in bytes: the first of scsi0, virtio0, sata0, ide0 that is not
/// a CD-ROM.
pub(super) fn boot_disk(config: &Value) -> Option<(String, u64)> {
    ["scsi0", "virtio0", "sata0", "ide0"]
        .iter()
        .find_map(|key| {
            let value = text(config, key)?;
            if value.contains("media=cdrom") {
                return None;
            }
            let size = value
                .split(',')
                .find_map(|part| part.strip_prefix("size="))
                .and_then(parse_size)?;
            Some(((*key).to_owned(), size))
        })
}

/// Parses a Proxmox disk size: `32G`, `512M`, `1T`, `10K` or plain bytes.
pub(super) fn parse_size(text: &str) -> Option<u64> {
    let (number, unit) = match text.char_indices().last()? {
        (at, c) if c.is_ascii_alphabetic() => (&text[..at], c.to_ascii_uppercase()),
        _ => (text, 'B'),
    };
    let value: f64 = number.parse().ok()?;
    let factor = match unit {
        'B' => 1.0,
        'K' => 1024.0,
        'M' => MIB as f64,
        'G' => GIB as f64,
        'T' => (GIB * 1024) as f64,
        _ => return None,
    };
    Some((value * factor).round() as u64)
}

pub(super) fn as_u64(value: &Value) -> Option<u64> {
    match value {
        Value::Number(number) => number
            .as_u64()
            .or_else(|| number.as_f64().map(|f| f as u64)),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

pub(super) fn text(value: &Value, key: &str) -> Option<String> {
    match value.get(key)? {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

pub(super) fn uint(value: &Value, key: &str) -> Option<u64> {
    as_u64(value.get(key)?)
}

pub(super) fn uint_signed(value: &Value, key: &str) -> Option<i32> {
    match value.get(key)? {
        Value::Number(number) => number.as_i64().and_then(|n| i32::try_from(n).ok()),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

pub(super) fn float(value: &Value, key: &str) -> Option<f64> {
    match value.get(key)? {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// A Proxmox boolean: `1`, `"1"` or `true` (absent means false).
pub(super) fn flag(value: &Value, key: &str) -> bool {
    match value.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_i64().is_some_and(|n| n != 0),
        Some(Value::String(s)) => s == "1",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn disk_sizes_parse_in_proxmox_units() {
        assert_eq!(parse_size("32G"), Some(32 * GIB));
        assert_eq!(parse_size("512M"), Some(512 * MIB));
        assert_eq!(parse_size("1T"), Some(1024 * GIB));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("2.5G"), Some(5 * GIB / 2));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn the_boot_disk_skips_cdroms() {
        let config = json!({
            "ide0": "local-lvm:vm-100-cloudinit,media=cdrom,size=4M",
            "scsi0": "local-lvm:vm-100-disk-0,iothread=1,size=20G",
        });
        assert_eq!(boot_disk(&config), Some(("scsi0".into(), 20 * GIB)));
        assert_eq!(boot_disk(&json!({"ide2": "none,media=cdrom"})), None);
    }

    #[test]
    fn wire_values_are_read_leniently() {
        let value = json!({"a": "100", "b": 7, "t": 1, "f": "0", "x": true});
        assert_eq!(uint(&value, "a"), Some(100));
        assert_eq!(uint(&value, "b"), Some(7));
        assert!(flag(&value, "t") && flag(&value, "x"));
        assert!(!flag(&value, "f") && !flag(&value, "missing"));
        assert_eq!(as_u64(&json!("101")), Some(101));
    }
}
