//! A judge of Proxmox VE parameters, from the schema Proxmox publishes (`tests/data/
//! pve-apidata.js`, `proxmox/pve-docs` `api-viewer/apidata.js` for PVE 9.1): every parameter
//! capstan sends is checked as `PVE::JSONSchema` checks it, property strings included.
//!
//! - A parameter must exist for the endpoint and method (`net3` is an instance of `net[n]`),
//!   with a value of its type, inside its `minimum`/`maximum`, `maxLength`, `enum` and
//!   `pattern`, and of its `format`.
//! - A property string (`net[n]`, `scsi[n]`, `ipconfig[n]`, `hostpci[n]`, `cpu`, ...) is read
//!   as `parse_property_string` reads it: `key=value` pairs split at commas, a bare value for
//!   the format's `default_key` (`virtio` in `net0: virtio,bridge=vmbr0`), `alias` with
//!   `keyAlias` (`virtio=BC:24:11:00:00:01` sets `model` to `virtio` and `macaddr` to the
//!   address), booleans as `parse_boolean` reads them; an unknown or repeated key is refused,
//!   each value is checked against its key's schema, and a required key must be there.
//! - A format given by reference (`ipconfig[n]` is `pve-qm-ipconfig`, `hostpci[n]`
//!   `pve-qm-hostpci`) is not expanded in the published file: its keys are read from the
//!   parameter's `typetext`, which PVE renders from the same format (`[gw=<GatewayIPv4>]
//!   [,ip=<IPv4Format/CIDR>]`, `[[host=]<...>]` marking the default key, `<1|0>` a boolean,
//!   `<a|b>` an enumeration). Named value formats (`pve-tag-list`, `mac-addr`,
//!   `pve-bridge-id`, ...) are checked as their PVE verifiers check them; one this judge does
//!   not know is a violation, never a pass.
//!
//! [`World`](crate::World) checks every parameter its lab received when it is dropped, so the
//! whole integration suite is judged; `tests/proxmox/schema.rs` proves the judge on
//! hand-written strings.

mod formats;
mod property;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;

pub use property::parse_property_string;

/// The published schema: every endpoint's methods, by path template.
#[derive(Debug)]
pub struct PveSchema {
    /// `path` → its `info` (`GET`, `POST`, ... → method schema).
    endpoints: BTreeMap<String, Value>,
}

/// The schema of `tests/data/pve-apidata.js`, read once per test binary.
///
/// # Panics
/// When the file is missing or is not the published schema.
pub fn schema() -> &'static PveSchema {
    static SCHEMA: OnceLock<PveSchema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/pve-apidata.js");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        PveSchema::from_apidata(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    })
}

impl PveSchema {
    /// Reads `apidata.js` (`const apiSchema = [ ... ];`): the JSON array between the first `[`
    /// and the last `]`.
    ///
    /// # Errors
    /// When it holds no such array.
    pub fn from_apidata(text: &str) -> Result<Self, String> {
        let start = text.find('[').ok_or("no `[` in apidata")?;
        let end = text.rfind(']').ok_or("no `]` in apidata")?;
        let tree: Value = serde_json::from_str(&text[start..=end]).map_err(|e| e.to_string())?;
        let mut endpoints = BTreeMap::new();
        let mut pending: Vec<&Value> = tree.as_array().into_iter().flatten().collect();
        while let Some(node) = pending.pop() {
            if let (Some(path), Some(info)) = (node["path"].as_str(), node.get("info")) {
                endpoints.insert(path.to_owned(), info.clone());
            }
            pending.extend(node["children"].as_array().into_iter().flatten());
        }
        if endpoints.is_empty() {
            return Err("apidata holds no endpoint".into());
        }
        Ok(PveSchema { endpoints })
    }

    /// Whether the published schema has `method` on `template`.
    pub fn has_method(&self, template: &str, method: &str) -> bool {
        self.endpoints
            .get(template)
            .is_some_and(|info| info.get(method).is_some())
    }

    /// The schema of parameter `name` of `method` on `template`: the property of that name, or
    /// of its family (`net3` → `net[n]`).
    pub fn parameter(&self, template: &str, method: &str, name: &str) -> Option<&Value> {
        let properties = self.endpoints.get(template)?.get(method)?["parameters"]
            .get("properties")?
            .as_object()?;
        properties.get(name).or_else(|| {
            let family = name.trim_end_matches(|c: char| c.is_ascii_digit());
            (family.len() < name.len())
                .then(|| properties.get(&format!("{family}[n]")))
                .flatten()
        })
    }

    /// Whether `method` `template` takes parameter `name` with `value` (as sent: a scalar's
    /// text), as PVE would check it.
    ///
    /// # Errors
    /// What PVE would say, prefixed with the parameter (`net1.tag: value must have a maximum
    /// value of 4094`).
    pub fn check(
        &self,
        template: &str,
        method: &str,
        name: &str,
        value: &str,
    ) -> Result<(), String> {
        let Some(schema) = self.parameter(template, method, name) else {
            return Err(format!(
                "{method} {template}: `{name}` is not a parameter of the published schema"
            ));
        };
        check_value(schema, name, value).map_err(|why| format!("{method} {template}: {why}"))
    }
}

/// Checks one value against its schema, as `check_prop` does for a scalar; `path` names it in
/// the error.
///
/// # Errors
/// The first problem, prefixed with `path`.
pub fn check_value(schema: &Value, path: &str, value: &str) -> Result<(), String> {
    let fail = |why: String| Err(format!("{path}: {why}"));
    match schema["type"].as_str().unwrap_or("string") {
        "integer" if !formats::is_integer(value) => {
            return fail(format!("type check ('integer') failed - got '{value}'"));
        }
        "number" if !formats::is_number(value) => {
            return fail(format!("type check ('number') failed - got '{value}'"));
        }
        "boolean" if value != "0" && value != "1" => {
            return fail(format!("type check ('boolean') failed - got '{value}'"));
        }
        _ => {}
    }
    match schema.get("format") {
        Some(Value::Object(keys)) => {
            property::check_property_string(keys, value, path)
                .map_err(|why| format!("{path}: invalid format - {why}"))?;
        }
        Some(Value::String(name)) => {
            let typetext = schema["typetext"].as_str();
            match property::keys_of_named(typetext) {
                Some(keys) => property::check_property_string(&keys, value, path)
                    .map_err(|why| format!("{path}: invalid format - {why}"))?,
                None => formats::check_named(name, value)
                    .map_err(|why| format!("{path}: invalid format - {why}"))?,
            }
        }
        _ => {}
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        match capstan_lab::proxmox::pattern::perl_pattern_matches(pattern, value) {
            Ok(true) => {}
            Ok(false) => return fail("value does not match the regex pattern".into()),
            Err(why) => return fail(why),
        }
    }
    if let Some(max) = schema["maxLength"].as_u64()
        && value.chars().count() as u64 > max
    {
        return fail(format!("value may only be {max} characters long"));
    }
    if formats::is_number(value)
        && let Ok(number) = value.parse::<f64>()
    {
        if let Some(max) = schema["maximum"].as_f64()
            && number > max
        {
            return fail(format!("value must have a maximum value of {max}"));
        }
        if let Some(min) = schema["minimum"].as_f64()
            && number < min
        {
            return fail(format!("value must have a minimum value of {min}"));
        }
    }
    if let Some(choices) = schema["enum"].as_array()
        && !choices.iter().any(|choice| choice.as_str() == Some(value))
    {
        let listed: Vec<&str> = choices.iter().filter_map(Value::as_str).collect();
        return fail(format!(
            "value '{value}' does not have a value in the enumeration '{}'",
            listed.join(", ")
        ));
    }
    Ok(())
}

/// One parameter as it was sent: endpoint, method, name and value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SentParameter {
    /// HTTP method.
    pub method: String,
    /// Path template (`/nodes/{node}/qemu/{vmid}/config`).
    pub template: String,
    /// Parameter name.
    pub name: String,
    /// Its value, as text.
    pub value: String,
}

/// Every violation of the published schema among `sent`, one line each.
pub fn violations<'a>(sent: impl IntoIterator<Item = &'a SentParameter>) -> Vec<String> {
    let schema = schema();
    sent.into_iter()
        .filter_map(|p| {
            schema
                .check(&p.template, &p.method, &p.name, &p.value)
                .err()
                .map(|why| format!("{why} (sent `{}`)", p.value.escape_debug()))
        })
        .collect()
}
