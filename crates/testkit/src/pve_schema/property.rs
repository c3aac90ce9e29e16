//! Property strings, read as `PVE::JSONSchema::parse_property_string` reads them and checked as
//! `check_object` checks the hash it makes; and the keys of a format given by reference, read
//! from the `typetext` PVE renders from it.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::check_value;

/// Parses `data` with the format `keys` (key → schema) as PVE does: pairs split at commas, a
/// bare value for the `default_key`, aliases resolved (`virtio=MAC` sets `model` and
/// `macaddr`), booleans read by `parse_boolean`.
///
/// # Errors
/// PVE's words: an invalid, duplicate or missing key, or a bare value without a default key.
pub fn parse_property_string(
    keys: &Map<String, Value>,
    data: &str,
) -> Result<BTreeMap<String, String>, String> {
    let mut parsed: BTreeMap<String, String> = BTreeMap::new();
    let mut default_key: Option<&str> = None;
    for part in data.split(',') {
        if part.trim().is_empty() {
            continue;
        }
        match part.split_once('=') {
            Some((key, value)) if !key.is_empty() && !value.is_empty() => {
                if parsed.contains_key(key) {
                    return Err(format!(
                        "duplicate key in comma-separated list property: {key}"
                    ));
                }
                let mut key = key;
                let mut schema = keys.get(key);
                if let Some(alias) = schema.and_then(|s| s["alias"].as_str()) {
                    if let Some(key_alias) = schema.and_then(|s| s["keyAlias"].as_str()) {
                        if parsed.contains_key(key_alias) {
                            return Err(format!("key alias '{key_alias}' is already defined"));
                        }
                        parsed.insert(key_alias.to_owned(), key.to_owned());
                    }
                    key = alias;
                    schema = keys.get(key);
                    if parsed.contains_key(key) {
                        return Err(format!("key '{key}' is already defined (via alias)"));
                    }
                }
                let Some(schema) = schema else {
                    return Err(format!(
                        "invalid key in comma-separated list property: {key}"
                    ));
                };
                parsed.insert(key.to_owned(), boolean_read(schema, value));
            }
            None => {
                if let Some(key) = default_key {
                    return Err(format!(
                        "duplicate key in comma-separated list property: {key}"
                    ));
                }
                let Some((key, schema)) = keys.iter().find(|(_, s)| is_default_key(s)) else {
                    return Err(
                        "value without key, but schema does not define a default key".into(),
                    );
                };
                default_key = Some(key);
                if parsed.contains_key(key.as_str()) {
                    return Err(format!(
                        "duplicate key in comma-separated list property: {key}"
                    ));
                }
                parsed.insert(key.clone(), boolean_read(schema, part));
            }
            Some(_) => return Err("missing key in comma-separated list property".into()),
        }
    }
    Ok(parsed)
}

fn is_default_key(schema: &Value) -> bool {
    schema["default_key"] == 1 || schema["default_key"] == true
}

fn is_optional(schema: &Value) -> bool {
    schema["optional"] == 1 || schema["optional"] == true
}

/// A boolean key's value as `parse_boolean` reads it (`on` → `1`); anything else as given.
fn boolean_read(schema: &Value, value: &str) -> String {
    if schema["type"] != "boolean" {
        return value.to_owned();
    }
    match value.to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => "1".into(),
        "0" | "off" | "no" | "false" => "0".into(),
        _ => value.to_owned(),
    }
}

/// Parses and checks `data` against `keys`; `path` prefixes each key in the errors
/// (`net1.tag`), as `check_object` does.
///
/// # Errors
/// `format error` and one line per key at fault, or the parser's error.
pub(super) fn check_property_string(
    keys: &Map<String, Value>,
    data: &str,
    path: &str,
) -> Result<(), String> {
    let parsed = parse_property_string(keys, data)?;
    let mut errors = Vec::new();
    for (key, schema) in keys {
        // Aliases are remapped to their target, never checked themselves.
        if schema.get("alias").is_some() {
            continue;
        }
        let at = format!("{path}.{key}");
        match parsed.get(key) {
            None if !is_optional(schema) => {
                errors.push(format!("{at}: property is missing and it is not optional"));
            }
            None => {}
            Some(value) => {
                if let Err(why) = check_value(schema, &at, value) {
                    errors.push(why);
                }
                if let Some(required) = schema["requires"].as_str()
                    && !parsed.contains_key(required)
                {
                    errors.push(format!(
                        "{path}.{required}: missing property required by '{at}'"
                    ));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("format error\n{}", errors.join("\n")))
    }
}

/// The keys of a named format that is a hash (`pve-qm-ipconfig`, `pve-qm-hostpci`,
/// `pve-vm-cpu-conf`), read from the `typetext` PVE renders from it; `None` for a format that
/// is a verifier of a plain value (`pve-tag-list`, `mac-addr`, ...), whose typetext is a single
/// `<...>`.
pub(super) fn keys_of_named(typetext: Option<&str>) -> Option<Map<String, Value>> {
    let typetext = typetext?.trim();
    if !typetext.contains('=') {
        return None;
    }
    let mut keys = Map::new();
    for item in top_level_items(typetext) {
        let optional = item.starts_with('[') && item.ends_with(']');
        let body = if optional {
            &item[1..item.len() - 1]
        } else {
            item.as_str()
        };
        let body = body.trim_start_matches(',');
        // `[key=]<hint>`: the default key.
        let (key, hint, default_key) = if let Some(rest) = body.strip_prefix('[') {
            let (key, hint) = rest.split_once("=]")?;
            (key, hint, true)
        } else {
            let (key, hint) = body.split_once('=')?;
            (key, hint, false)
        };
        let hint = hint.trim_start_matches('<').trim_end_matches('>');
        let mut schema = schema_of_hint(hint);
        if default_key {
            schema["default_key"] = json!(1);
        }
        if optional {
            schema["optional"] = json!(1);
        }
        keys.insert(key.to_owned(), schema);
    }
    // A hash format names at least one key.
    (!keys.is_empty()).then_some(keys)
}

/// The items of a typetext at the top level: split at spaces outside `[...]` and `<...>`.
fn top_level_items(typetext: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut current = String::new();
    let (mut brackets, mut angles) = (0i32, 0i32);
    for c in typetext.chars() {
        match c {
            '<' => angles += 1,
            '>' => angles -= 1,
            '[' if angles == 0 => brackets += 1,
            ']' if angles == 0 => brackets -= 1,
            ' ' if brackets == 0 && angles == 0 => {
                if !current.is_empty() {
                    items.push(std::mem::take(&mut current));
                }
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.is_empty() {
        items.push(current);
    }
    items
}

/// The schema a typetext value hint stands for: `1|0` a boolean, `a|b` an enumeration,
/// `integer`, `number`, and the format descriptions PVE's formats use for addresses, mapping
/// ids, volumes and hex ids; any other hint a free string.
fn schema_of_hint(hint: &str) -> Value {
    let is_word = |w: &str| {
        !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b))
    };
    match hint {
        "1|0" => json!({"type": "boolean"}),
        "integer" => json!({"type": "integer"}),
        "number" => json!({"type": "number"}),
        "GatewayIPv4" => json!({"type": "string", "format": "ipv4"}),
        "GatewayIPv6" => json!({"type": "string", "format": "ipv6"}),
        "IPv4Format/CIDR" => json!({"type": "string", "format": "pve-ipv4-config"}),
        "IPv6Format/CIDR" => json!({"type": "string", "format": "pve-ipv6-config"}),
        "mapping-id" => json!({"type": "string", "format": "pve-configid"}),
        "volume" => json!({"type": "string", "format": "pve-volume-id-or-qm-path"}),
        "hex id" => json!({"type": "string", "pattern": "0x[0-9a-fA-F]{4}"}),
        _ if hint.contains('|') && hint.split('|').all(is_word) => {
            json!({"type": "string", "enum": hint.split('|').collect::<Vec<_>>()})
        }
        _ => json!({"type": "string"}),
    }
}
