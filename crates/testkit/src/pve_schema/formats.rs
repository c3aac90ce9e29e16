//! Named value formats, checked as their PVE verifiers check them (`PVE::JSONSchema`,
//! `PVE::AccessControl`, `PVE::Tools::split_list`): `-list` formats split at commas,
//! semicolons and spaces and check each item, `-opt` formats accept the empty string. A format
//! not listed here is refused: the judge never passes what it cannot read.

use std::net::{Ipv4Addr, Ipv6Addr};

use capstan_lab::proxmox::pattern::perl_pattern_matches;

/// `PVE::JSONSchema::is_integer`.
pub(super) fn is_integer(value: &str) -> bool {
    let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `PVE::JSONSchema::is_number`.
pub(super) fn is_number(value: &str) -> bool {
    perl_pattern_matches(r"[+-]?(\d+\.\d+|\d+\.|\.\d+|\d+)([eE][+-]?\d+)?", value).unwrap_or(false)
}

/// Checks `value` against the named format `name`.
///
/// # Errors
/// The verifier's words.
pub(super) fn check_named(name: &str, value: &str) -> Result<(), String> {
    if let Some(base) = name.strip_suffix("-list") {
        // `split_list`: commas and semicolons are spaces; an empty list is allowed.
        let items = value.replace([',', ';'], " ");
        return items
            .split_whitespace()
            .try_for_each(|item| check_one(base, item));
    }
    if let Some(base) = name.strip_suffix("-opt") {
        return if value.is_empty() {
            Ok(())
        } else {
            check_one(base, value)
        };
    }
    check_one(name, value)
}

fn matches(pattern: &str, value: &str) -> bool {
    perl_pattern_matches(pattern, value).unwrap_or(false)
}

const DNS_LABEL: &str = "([a-zA-Z0-9]([a-zA-Z0-9\\-]*[a-zA-Z0-9])?)";

fn check_one(name: &str, value: &str) -> Result<(), String> {
    match name {
        "pve-tag" => matches(r"(?i)[a-z0-9_][a-z0-9_\-\+\.]*", value)
            .then_some(())
            .ok_or("invalid characters in tag".to_owned()),
        "pve-node" => matches(r"[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?", value)
            .then_some(())
            .ok_or("value does not look like a valid node name".to_owned()),
        "dns-name" => matches(&format!(r"({DNS_LABEL}\.)*{DNS_LABEL}"), value)
            .then_some(())
            .ok_or("value does not look like a valid DNS name".to_owned()),
        "pve-configid" => matches(r"(?i)[a-z][a-z0-9_-]+", value)
            .then_some(())
            .ok_or(format!("invalid configuration ID '{value}'")),
        "pve-bridge-id" => matches(r"[-_.\w\d]+", value)
            .then_some(())
            .ok_or(format!("invalid bridge ID '{value}'")),
        "pve-storage-id" => {
            if value.chars().count() < 2 {
                Err(format!(
                    "storage ID '{value}' cannot be shorter than 2 characters"
                ))
            } else if matches(r"(?i)[a-z][a-z0-9\-\_\.]*[a-z0-9]", value) {
                Ok(())
            } else {
                Err(format!("storage ID '{value}' contains illegal characters"))
            }
        }
        "pve-poolid" => {
            if value.split('/').count() > 3 {
                Err(format!(
                    "pool name '{value}' nested too deeply (max levels = 3)"
                ))
            } else if matches(r"[A-Za-z0-9\.\-_]+(?:/[A-Za-z0-9\.\-_]+){0,2}", value) {
                Ok(())
            } else {
                Err(format!("pool name '{value}' contains invalid characters"))
            }
        }
        "pve-vmid" => matches(r"[1-9][0-9]{2,8}", value)
            .then_some(())
            .ok_or("value does not look like a valid VM ID".to_owned()),
        "urlencoded" => matches(r"[-%a-zA-Z0-9_.!~*'()]*", value)
            .then_some(())
            .ok_or(format!("invalid urlencoded string: {value}")),
        "mac-addr" => matches(r"(?i)[a-f0-9][02468ace](?::[a-f0-9]{2}){5}", value)
            .then_some(())
            .ok_or("value does not look like a valid unicast MAC address".to_owned()),
        "ipv4" => value
            .parse::<Ipv4Addr>()
            .map(drop)
            .map_err(|_| "value does not look like a valid IPv4 address".to_owned()),
        "ipv6" => value
            .parse::<Ipv6Addr>()
            .map(drop)
            .map_err(|_| "value does not look like a valid IPv6 address".to_owned()),
        "ip" => (value.parse::<Ipv4Addr>().is_ok() || value.parse::<Ipv6Addr>().is_ok())
            .then_some(())
            .ok_or("value does not look like a valid IP address".to_owned()),
        "address" => (value.parse::<std::net::IpAddr>().is_ok()
            || matches(&format!(r"({DNS_LABEL}\.)*{DNS_LABEL}"), value))
        .then_some(())
        .ok_or(format!("value does not look like a valid address: {value}")),
        "CIDRv4" => is_cidr_v4(value)
            .then_some(())
            .ok_or("value does not look like a valid IPv4 CIDR network".to_owned()),
        "pve-ipv4-config" => (matches("dhcp|manual", value) || is_cidr_v4(value))
            .then_some(())
            .ok_or("value does not look like a valid ipv4 network configuration".to_owned()),
        "pve-ipv6-config" => (matches("dhcp|auto|manual", value) || is_cidr_v6(value))
            .then_some(())
            .ok_or("value does not look like a valid ipv6 network configuration".to_owned()),
        "disk-size" => matches(r"(\d+(\.\d+)?)([KMGT](?:iB)?)?", value)
            .then_some(())
            .ok_or(format!(
                "value does not look like a valid disk size: {value}"
            )),
        "pve-volume-id" => is_volume_id(value)
            .then_some(())
            .ok_or(format!("unable to parse volume ID '{value}'")),
        "pve-volume-id-or-qm-path" => {
            (matches("none|cdrom", value) || value.starts_with('/') || is_volume_id(value))
                .then_some(())
                .ok_or(format!("unable to parse volume ID '{value}'"))
        }
        "pve-volume-id-or-absolute-path" => (value.starts_with('/') || is_volume_id(value))
            .then_some(())
            .ok_or(format!("unable to parse volume ID '{value}'")),
        "pve-storage-content" => [
            "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import",
        ]
        .contains(&value)
        .then_some(())
        .ok_or(format!("invalid content type '{value}'")),
        other => Err(format!(
            "format `{other}` is not one this judge knows: teach it `{other}` before trusting it"
        )),
    }
}

fn is_cidr_v4(value: &str) -> bool {
    let Some((address, prefix)) = value.split_once('/') else {
        return false;
    };
    address.parse::<Ipv4Addr>().is_ok() && prefix.parse::<u8>().is_ok_and(|p| (8..=32).contains(&p))
}

fn is_cidr_v6(value: &str) -> bool {
    let Some((address, prefix)) = value.split_once('/') else {
        return false;
    };
    address.parse::<Ipv6Addr>().is_ok()
        && prefix.parse::<u8>().is_ok_and(|p| (8..=128).contains(&p))
}

/// `STORAGE:VOLNAME` with a storage id PVE accepts.
fn is_volume_id(value: &str) -> bool {
    matches(r"(?i)[a-z][a-z0-9\-\_\.]*[a-z0-9]:.+", value)
}
