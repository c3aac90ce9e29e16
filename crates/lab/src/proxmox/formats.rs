//! Property strings of the simulated API, read as `PVE::JSONSchema::parse_property_string`
//! reads them and checked as `check_object` checks them, with PVE's words: the formats of
//! `net[n]` (qemu-server's `$net_fmt`), of the drives (`scsi[n]`, `sata[n]`, `virtio[n]`,
//! `ide[n]`), of `ipconfig[n]` (`pve-qm-ipconfig`) and of `hostpci[n]` (`pve-qm-hostpci`).
//!
//! A refusal is the per-parameter text of PVE's 400: `invalid format - ` and either the
//! parser's error (`invalid key in comma-separated list property: vlan`) or `format error`
//! and one `<param>.<key>: <why>` line per key at fault, as `PVE::Exception` prints its
//! errors.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::params::Invalid;
use super::pattern::perl_pattern_matches;

/// What a key's value must be.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Text,
    Int {
        min: Option<i64>,
        max: Option<i64>,
    },
    Num,
    Bool,
    Choice(&'static [&'static str]),
    /// A named format's verifier: `Err(why)` in PVE's words.
    Verified(fn(&str) -> Result<(), String>),
}

/// One key of a format.
#[derive(Debug, Clone, Copy)]
struct Key {
    name: &'static str,
    kind: Kind,
    optional: bool,
    default_key: bool,
    /// `alias` (the key it stands for) and, with `keyAlias`, the key its own name is put in.
    alias: Option<(&'static str, Option<&'static str>)>,
}

const fn key(name: &'static str, kind: Kind) -> Key {
    Key {
        name,
        kind,
        optional: true,
        default_key: false,
        alias: None,
    }
}

const fn int(name: &'static str, min: Option<i64>, max: Option<i64>) -> Key {
    key(name, Kind::Int { min, max })
}

const fn alias(name: &'static str, to: &'static str) -> Key {
    Key {
        alias: Some((to, None)),
        ..key(name, Kind::Text)
    }
}

const NIC_MODELS: &[&str] = &[
    "e1000",
    "e1000-82540em",
    "e1000-82544gc",
    "e1000-82545em",
    "e1000e",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "virtio",
    "vmxnet3",
];

fn net_keys() -> Vec<Key> {
    let mut keys = vec![
        Key {
            optional: false,
            default_key: true,
            ..key("model", Kind::Choice(NIC_MODELS))
        },
        key("bridge", Kind::Verified(bridge_id)),
        key("firewall", Kind::Bool),
        key("link_down", Kind::Bool),
        key("host-tunnel", Kind::Bool),
        key("macaddr", Kind::Verified(mac_address)),
        int("mtu", Some(1), Some(65520)),
        int("queues", Some(0), Some(64)),
        key("rate", Kind::Num),
        int("tag", Some(1), Some(4094)),
        key("trunks", Kind::Verified(trunks)),
    ];
    keys.extend(NIC_MODELS.iter().map(|model| Key {
        alias: Some(("macaddr", Some("model"))),
        ..key(model, Kind::Text)
    }));
    keys
}

fn drive_keys() -> Vec<Key> {
    let limited = |name| int(name, Some(1), None);
    let plain_int = |name| int(name, None, None);
    vec![
        Key {
            optional: false,
            default_key: true,
            ..key("file", Kind::Verified(volume_or_path))
        },
        alias("volume", "file"),
        key("aio", Kind::Choice(&["native", "threads", "io_uring"])),
        key("backup", Kind::Bool),
        plain_int("bps"),
        limited("bps_max_length"),
        plain_int("bps_rd"),
        alias("bps_rd_length", "bps_rd_max_length"),
        limited("bps_rd_max_length"),
        plain_int("bps_wr"),
        alias("bps_wr_length", "bps_wr_max_length"),
        limited("bps_wr_max_length"),
        key(
            "cache",
            Kind::Choice(&["none", "writethrough", "writeback", "unsafe", "directsync"]),
        ),
        key("detect_zeroes", Kind::Bool),
        key("discard", Kind::Choice(&["ignore", "on"])),
        key(
            "format",
            Kind::Choice(&["raw", "qcow", "qed", "qcow2", "vmdk", "cloop"]),
        ),
        key("import-from", Kind::Verified(volume_or_path)),
        plain_int("iops"),
        plain_int("iops_max"),
        limited("iops_max_length"),
        plain_int("iops_rd"),
        alias("iops_rd_length", "iops_rd_max_length"),
        plain_int("iops_rd_max"),
        limited("iops_rd_max_length"),
        plain_int("iops_wr"),
        alias("iops_wr_length", "iops_wr_max_length"),
        plain_int("iops_wr_max"),
        limited("iops_wr_max_length"),
        key("iothread", Kind::Bool),
        key("mbps", Kind::Num),
        key("mbps_max", Kind::Num),
        key("mbps_rd", Kind::Num),
        key("mbps_rd_max", Kind::Num),
        key("mbps_wr", Kind::Num),
        key("mbps_wr_max", Kind::Num),
        key("media", Kind::Choice(&["cdrom", "disk"])),
        key("product", Kind::Text),
        int("queues", Some(2), None),
        key("replicate", Kind::Bool),
        key("rerror", Kind::Choice(&["ignore", "report", "stop"])),
        key("ro", Kind::Bool),
        key("scsiblock", Kind::Bool),
        key("serial", Kind::Verified(serial)),
        key("shared", Kind::Bool),
        key("size", Kind::Verified(disk_size)),
        key("snapshot", Kind::Bool),
        key("ssd", Kind::Bool),
        key("vendor", Kind::Text),
        key(
            "werror",
            Kind::Choice(&["enospc", "ignore", "report", "stop"]),
        ),
        key("wwn", Kind::Text),
    ]
}

fn ipconfig_keys() -> Vec<Key> {
    vec![
        key("ip", Kind::Verified(ipv4_config)),
        key("gw", Kind::Verified(ipv4)),
        key("ip6", Kind::Verified(ipv6_config)),
        key("gw6", Kind::Verified(ipv6)),
    ]
}

fn hostpci_keys() -> Vec<Key> {
    vec![
        Key {
            default_key: true,
            ..key("host", Kind::Text)
        },
        key("mapping", Kind::Verified(config_id)),
        key("rombar", Kind::Bool),
        key("romfile", Kind::Text),
        key("pcie", Kind::Bool),
        key("x-vga", Kind::Bool),
        key("legacy-igd", Kind::Bool),
        key("mdev", Kind::Text),
        key("vendor-id", Kind::Text),
        key("device-id", Kind::Text),
        key("sub-vendor-id", Kind::Text),
        key("sub-device-id", Kind::Text),
        key("driver", Kind::Choice(&["vfio", "keep"])),
    ]
}

/// `net[n]`'s check (`name` is the parameter, `net1`).
pub(super) fn check_net(name: &str, value: &str) -> Result<(), Invalid> {
    check(&net_keys(), name, value)
}

/// The drives' check (`scsi[n]`, `sata[n]`, `virtio[n]`, `ide[n]`).
pub(super) fn check_drive(name: &str, value: &str) -> Result<(), Invalid> {
    check(&drive_keys(), name, value)
}

/// `ipconfig[n]`'s check.
pub(super) fn check_ipconfig(name: &str, value: &str) -> Result<(), Invalid> {
    check(&ipconfig_keys(), name, value)?;
    // `parse_ipconfig`: a gateway needs its address.
    let parsed = parse(&ipconfig_keys(), value).unwrap_or_default();
    let has = |k: &str| parsed.iter().any(|(key, _)| key == k);
    if has("gw") && !has("ip") {
        return Err(Invalid::Format {
            detail: format!("format error\n{name}.ip: missing property required by '{name}.gw'"),
        });
    }
    Ok(())
}

/// `hostpci[n]`'s check.
pub(super) fn check_hostpci(name: &str, value: &str) -> Result<(), Invalid> {
    check(&hostpci_keys(), name, value)
}

/// `value` parsed as PVE does (`key` → value, aliases resolved).
fn parse(keys: &[Key], value: &str) -> Result<Vec<(String, String)>, String> {
    let find = |name: &str| keys.iter().find(|k| k.name == name);
    let mut parsed: Vec<(String, String)> = Vec::new();
    let has = |parsed: &[(String, String)], k: &str| parsed.iter().any(|(key, _)| key == k);
    let mut default_seen = false;
    for part in value.split(',') {
        if part.trim().is_empty() {
            continue;
        }
        match part.split_once('=') {
            Some((name, value)) if !name.is_empty() && !value.is_empty() => {
                if has(&parsed, name) {
                    return Err(format!(
                        "duplicate key in comma-separated list property: {name}"
                    ));
                }
                let mut name = name;
                if let Some((target, key_alias)) = find(name).and_then(|k| k.alias) {
                    if let Some(key_alias) = key_alias {
                        if has(&parsed, key_alias) {
                            return Err(format!("key alias '{key_alias}' is already defined"));
                        }
                        parsed.push((key_alias.to_owned(), name.to_owned()));
                    }
                    name = target;
                    if has(&parsed, name) {
                        return Err(format!("key '{name}' is already defined (via alias)"));
                    }
                }
                let Some(found) = find(name) else {
                    return Err(format!(
                        "invalid key in comma-separated list property: {name}"
                    ));
                };
                parsed.push((name.to_owned(), boolean_read(found, value)));
            }
            None => {
                let Some(default) = keys.iter().find(|k| k.default_key) else {
                    return Err(
                        "value without key, but schema does not define a default key".into(),
                    );
                };
                if default_seen || has(&parsed, default.name) {
                    return Err(format!(
                        "duplicate key in comma-separated list property: {}",
                        default.name
                    ));
                }
                default_seen = true;
                parsed.push((default.name.to_owned(), boolean_read(default, part)));
            }
            Some(_) => return Err("missing key in comma-separated list property".into()),
        }
    }
    Ok(parsed)
}

fn boolean_read(key: &Key, value: &str) -> String {
    if !matches!(key.kind, Kind::Bool) {
        return value.to_owned();
    }
    match value.to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => "1".into(),
        "0" | "off" | "no" | "false" => "0".into(),
        _ => value.to_owned(),
    }
}

fn check(keys: &[Key], name: &str, value: &str) -> Result<(), Invalid> {
    let parsed = parse(keys, value).map_err(|detail| Invalid::Format { detail })?;
    let mut errors = Vec::new();
    for key in keys.iter().filter(|k| k.alias.is_none()) {
        let at = format!("{name}.{}", key.name);
        let Some((_, value)) = parsed.iter().find(|(k, _)| k == key.name) else {
            if !key.optional {
                errors.push(format!("{at}: property is missing and it is not optional"));
            }
            continue;
        };
        if let Err(why) = check_key(key, value) {
            errors.push(format!("{at}: {why}"));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Invalid::Format {
            detail: format!("format error\n{}", errors.join("\n")),
        })
    }
}

fn check_key(key: &Key, value: &str) -> Result<(), String> {
    match key.kind {
        Kind::Text => Ok(()),
        Kind::Bool if value == "0" || value == "1" => Ok(()),
        Kind::Bool => Err(format!("type check ('boolean') failed - got '{value}'")),
        Kind::Int { min, max } => {
            let number: i64 = value
                .parse()
                .map_err(|_| format!("type check ('integer') failed - got '{value}'"))?;
            if let Some(max) = max
                && number > max
            {
                return Err(format!("value must have a maximum value of {max}"));
            }
            if let Some(min) = min
                && number < min
            {
                return Err(format!("value must have a minimum value of {min}"));
            }
            Ok(())
        }
        Kind::Num => value
            .parse::<f64>()
            .ok()
            .filter(|n| *n >= 0.0)
            .map(drop)
            .ok_or_else(|| format!("type check ('number') failed - got '{value}'")),
        Kind::Choice(choices) if choices.contains(&value) => Ok(()),
        Kind::Choice(choices) => Err(format!(
            "value '{value}' does not have a value in the enumeration '{}'",
            choices.join(", ")
        )),
        Kind::Verified(verify) => verify(value).map_err(|why| format!("invalid format - {why}")),
    }
}

fn bridge_id(value: &str) -> Result<(), String> {
    match perl_pattern_matches(r"[-_.\w\d]+", value) {
        Ok(true) => Ok(()),
        _ => Err(format!("invalid bridge ID '{value}'")),
    }
}

fn mac_address(value: &str) -> Result<(), String> {
    match perl_pattern_matches(r"(?i)[a-f0-9][02468ace](?::[a-f0-9]{2}){5}", value) {
        Ok(true) => Ok(()),
        _ => Err("value does not look like a valid unicast MAC address".into()),
    }
}

fn trunks(value: &str) -> Result<(), String> {
    match perl_pattern_matches(r"\d+(?:-\d+)?(?:;\d+(?:-\d+)?)*", value) {
        Ok(true) => Ok(()),
        _ => Err("value does not match the regex pattern".into()),
    }
}

fn volume_or_path(value: &str) -> Result<(), String> {
    let volume =
        perl_pattern_matches(r"(?i)[a-z][a-z0-9\-\_\.]*[a-z0-9]:.+", value).unwrap_or(false);
    if value == "none" || value == "cdrom" || value.starts_with('/') || volume {
        Ok(())
    } else {
        Err(format!("unable to parse volume ID '{value}'"))
    }
}

fn serial(value: &str) -> Result<(), String> {
    let encoded = perl_pattern_matches(r"[-%a-zA-Z0-9_.!~*'()]*", value).unwrap_or(false);
    if !encoded {
        return Err(format!("invalid urlencoded string: {value}"));
    }
    if value.len() > 60 {
        return Err("value may only be 60 characters long".into());
    }
    Ok(())
}

fn disk_size(value: &str) -> Result<(), String> {
    match perl_pattern_matches(r"(\d+(\.\d+)?)([KMGT](?:iB)?)?", value) {
        Ok(true) => Ok(()),
        _ => Err(format!(
            "value does not look like a valid disk size: {value}"
        )),
    }
}

fn config_id(value: &str) -> Result<(), String> {
    match perl_pattern_matches(r"(?i)[a-z][a-z0-9_-]+", value) {
        Ok(true) => Ok(()),
        _ => Err(format!("invalid configuration ID '{value}'")),
    }
}

fn ipv4(value: &str) -> Result<(), String> {
    value
        .parse::<Ipv4Addr>()
        .map(drop)
        .map_err(|_| "value does not look like a valid IPv4 address".into())
}

fn ipv6(value: &str) -> Result<(), String> {
    value
        .parse::<Ipv6Addr>()
        .map(drop)
        .map_err(|_| "value does not look like a valid IPv6 address".into())
}

fn ipv4_config(value: &str) -> Result<(), String> {
    let cidr = value.split_once('/').is_some_and(|(address, prefix)| {
        address.parse::<Ipv4Addr>().is_ok()
            && prefix.parse::<u8>().is_ok_and(|p| (8..=32).contains(&p))
    });
    if value == "dhcp" || value == "manual" || cidr {
        Ok(())
    } else {
        Err("value does not look like a valid ipv4 network configuration".into())
    }
}

fn ipv6_config(value: &str) -> Result<(), String> {
    let cidr = value.split_once('/').is_some_and(|(address, prefix)| {
        address.parse::<Ipv6Addr>().is_ok()
            && prefix.parse::<u8>().is_ok_and(|p| (8..=128).contains(&p))
    });
    if ["dhcp", "auto", "manual"].contains(&value) || cidr {
        Ok(())
    } else {
        Err("value does not look like a valid ipv6 network configuration".into())
    }
}

/// Every key the lab knows of each format, with its JSON Schema type name, for the fidelity
/// test to compare with the published schema: (parameter family, key, type).
pub fn known_keys() -> Vec<(&'static str, &'static str, &'static str)> {
    let typed = |family: &'static str, keys: Vec<Key>| {
        keys.into_iter()
            .filter(move |k| k.alias.is_none() || family == "net[n]")
            .map(move |k| {
                let ty = match k.kind {
                    Kind::Int { .. } => "integer",
                    Kind::Num => "number",
                    Kind::Bool => "boolean",
                    Kind::Text | Kind::Choice(_) | Kind::Verified(_) => "string",
                };
                (family, k.name, ty)
            })
    };
    typed("net[n]", net_keys())
        .chain(typed("scsi[n]", drive_keys()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_are_refused_with_pves_words() {
        assert_eq!(
            check_net("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
            Ok(())
        );
        assert_eq!(
            check_net("net1", "virtio,bridge=vmbr1,tag=30,mtu=9000"),
            Ok(())
        );
        assert_eq!(
            check_net("net1", "virtio,bridge=vmbr0,tag=4095")
                .expect_err("out of range")
                .to_string(),
            "invalid format - format error\nnet1.tag: value must have a maximum value of 4094"
        );
        assert_eq!(
            check_net("net1", "virtio,bridge=vmbr0,vlan=20")
                .expect_err("unknown key")
                .to_string(),
            "invalid format - invalid key in comma-separated list property: vlan"
        );
        assert_eq!(
            check_net("net0", "bridge=vmbr0")
                .expect_err("no model")
                .to_string(),
            "invalid format - format error\nnet0.model: property is missing and it is not optional"
        );
    }

    #[test]
    fn drives_addresses_and_pci_devices_are_checked() {
        assert_eq!(
            check_drive(
                "scsi1",
                "local-lvm:32,ssd=1,discard=on,iothread=1,serial=capstan-disk1"
            ),
            Ok(())
        );
        assert!(
            check_drive("scsi1", "local-lvm:32,cache=fast")
                .expect_err("enum")
                .to_string()
                .contains("scsi1.cache: value 'fast' does not have a value in the enumeration")
        );
        assert_eq!(
            check_ipconfig("ipconfig0", "ip=10.0.0.5/24,gw=10.0.0.1"),
            Ok(())
        );
        assert!(check_ipconfig("ipconfig0", "gw=10.0.0.1").is_err());
        assert!(check_ipconfig("ipconfig0", "ip=10.0.0.5/4").is_err());
        assert_eq!(check_hostpci("hostpci0", "mapping=gpu-a40"), Ok(()));
        assert!(check_hostpci("hostpci0", "mapping=9gpu").is_err());
    }
}
