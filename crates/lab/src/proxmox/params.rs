//! Parameters of the simulated API: how one is described ([`Spec`]), and the checks a real
//! host runs before a handler sees a call:
//! unknown parameter, missing parameter, wrong type, bounds, enumerations and formats, each a
//! 400 with a per-parameter `errors` object and the texts of `PVE::JSONSchema`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::state::ApiFail;

/// Why a real host refuses one parameter: each message is the text `PVE::JSONSchema` puts in
/// the per-parameter `errors` object of its 400, so clients matching on it see the same thing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Invalid {
    /// The endpoint has no such parameter.
    #[error(
        "property is not defined in schema and the schema does not allow additional properties"
    )]
    Undefined,
    /// A required parameter is absent.
    #[error("property is missing and it is not optional")]
    Missing,
    /// The value is not of the type and could not be shown (an array item that is no scalar).
    #[error("type check ('{expected}') failed")]
    Type { expected: &'static str },
    /// The value is a structure (`ARRAY`, `HASH`) where a scalar was expected.
    #[error("type check ('{expected}') failed - got {got}")]
    Structure {
        expected: &'static str,
        got: &'static str,
    },
    /// The scalar does not parse as the type.
    #[error("type check ('{expected}') failed - got '{got}'")]
    Scalar { expected: &'static str, got: String },
    /// The text is longer than the schema's `maxLength`.
    #[error("value may only be {max} characters long")]
    TooLong { max: usize },
    /// The number is below the schema's `minimum`.
    #[error("value must have a minimum value of {min}")]
    BelowMinimum { min: i64 },
    /// The number is above the schema's `maximum`.
    #[error("value must have a maximum value of {max}")]
    AboveMaximum { max: i64 },
    /// The value is not one of the schema's `enum`.
    #[error("value '{value}' does not have a value in the enumeration '{choices}'")]
    NotInEnumeration { value: String, choices: String },
    /// `pve-node` format.
    #[error("invalid format - value does not look like a valid node name")]
    NodeName,
    /// `dns-name` format.
    #[error("invalid format - value does not look like a valid DNS name")]
    DnsName,
    /// `pve-storage-id` format.
    #[error("invalid format - storage ID '{value}' contains illegal characters")]
    StorageId { value: String },
    /// `pve-poolid` format (`PVE::AccessControl::verify_poolname`).
    #[error("invalid format - pool name '{value}' contains invalid characters")]
    PoolName { value: String },
    /// `pve-tag-list` format: one tag is not a `pve-tag`.
    #[error("invalid format - invalid characters in tag '{tag}'")]
    Tag { tag: String },
    /// The `memory` property string's `current` is no integer of at least 16 MiB.
    #[error(
        "invalid format - format error\ncurrent: type check ('integer') failed - got '{current}'"
    )]
    Memory { current: String },
    /// `urlencoded` format.
    #[error("invalid format - value must be urlencoded")]
    NotUrlencoded,
    /// The value does not match the schema's `pattern`.
    #[error("value does not match the regex pattern")]
    Pattern,
    /// `pve-storage-content` format (`PVE::Storage::verify_content`).
    #[error("invalid format - invalid content type '{value}'")]
    Content { value: String },
    /// A property string (`net[n]`, `scsi[n]`, ...): the parser's error, or `format error` and
    /// one line per key at fault (see `formats`).
    #[error("invalid format - {detail}")]
    Format { detail: String },
}

/// A parameter's JSON Schema type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ty {
    Str,
    Int,
    Num,
    Bool,
    Array,
}

/// A format check: `Err(why)` when the value is not of the format.
type Check = fn(&str) -> Result<(), Invalid>;

/// A property-string check, given the parameter's name (`net1`) for its errors' paths.
type PropertyCheck = fn(&str, &str) -> Result<(), Invalid>;

/// One parameter.
#[derive(Debug, Clone)]
pub(super) struct Spec {
    pub name: &'static str,
    /// For `net[n]`-style families: the largest index.
    pub indexed: Option<u32>,
    pub ty: Ty,
    pub optional: bool,
    pub min: Option<i64>,
    pub max: Option<i64>,
    pub max_len: Option<usize>,
    pub choices: Option<Vec<String>>,
    pub check: Option<Check>,
    pub property: Option<PropertyCheck>,
}

impl Spec {
    pub(super) fn new(name: &'static str, ty: Ty) -> Self {
        Spec {
            name,
            indexed: None,
            ty,
            optional: true,
            min: None,
            max: None,
            max_len: None,
            choices: None,
            check: None,
            property: None,
        }
    }
    pub(super) fn required(mut self) -> Self {
        self.optional = false;
        self
    }
    pub(super) fn min(mut self, min: i64) -> Self {
        self.min = Some(min);
        self
    }
    pub(super) fn max(mut self, max: i64) -> Self {
        self.max = Some(max);
        self
    }
    pub(super) fn max_len(mut self, len: usize) -> Self {
        self.max_len = Some(len);
        self
    }
    pub(super) fn choices(mut self, choices: &[&str]) -> Self {
        self.choices = Some(choices.iter().map(|c| (*c).to_owned()).collect());
        self
    }
    pub(super) fn check(mut self, check: Check) -> Self {
        self.check = Some(check);
        self
    }
    pub(super) fn property(mut self, check: PropertyCheck) -> Self {
        self.property = Some(check);
        self
    }
    pub(super) fn family(mut self, max_index: u32) -> Self {
        self.indexed = Some(max_index);
        self
    }

    /// The JSON Schema type name.
    pub fn type_name(&self) -> &'static str {
        type_name(self.ty)
    }

    /// The name the schema uses (`net[n]` for families).
    pub fn schema_name(&self) -> String {
        match self.indexed {
            Some(_) => format!("{}[n]", self.name),
            None => self.name.to_owned(),
        }
    }
}

/// Checked parameters, with values normalised to their types (integers and booleans as JSON
/// numbers, arrays as arrays of strings).
#[derive(Debug, Clone, Default)]
pub(super) struct Params(pub BTreeMap<String, Value>);

impl Params {
    pub fn text(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }
    pub fn int(&self, key: &str) -> Option<i64> {
        self.0.get(key).and_then(Value::as_i64)
    }
    pub fn flag(&self, key: &str) -> Option<bool> {
        self.int(key).map(|v| v != 0)
    }
    pub fn list(&self, key: &str) -> Vec<String> {
        self.0
            .get(key)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
    pub fn vmid(&self) -> u32 {
        self.int("vmid")
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0)
    }
    pub fn node(&self) -> &str {
        self.text("node").unwrap_or_default()
    }
}

/// Checks raw parameters against an endpoint's parameter specs, as `PVE::JSONSchema::validate`
/// does.
pub(super) fn validate(specs: &[Spec], raw: &BTreeMap<String, Value>) -> Result<Params, ApiFail> {
    let mut errors = BTreeMap::new();
    let mut checked = BTreeMap::new();
    for (key, value) in raw {
        if key == "_dc" {
            continue;
        }
        let Some(spec) = find_spec(specs, key) else {
            errors.insert(key.clone(), Invalid::Undefined.to_string());
            continue;
        };
        match check_value(spec, key, value) {
            Ok(value) => {
                checked.insert(key.clone(), value);
            }
            Err(why) => {
                errors.insert(key.clone(), why.to_string());
            }
        }
    }
    for spec in specs {
        if !spec.optional && spec.indexed.is_none() && !raw.contains_key(spec.name) {
            errors.insert(spec.name.to_owned(), Invalid::Missing.to_string());
        }
    }
    if errors.is_empty() {
        Ok(Params(checked))
    } else {
        Err(ApiFail {
            status: 400,
            message: "Parameter verification failed.".into(),
            errors,
        })
    }
}

fn find_spec<'a>(specs: &'a [Spec], key: &str) -> Option<&'a Spec> {
    specs.iter().find(|spec| match spec.indexed {
        None => spec.name == key,
        Some(max) => key
            .strip_prefix(spec.name)
            .filter(|index| !index.is_empty() && index.chars().all(|c| c.is_ascii_digit()))
            .and_then(|index| index.parse::<u32>().ok())
            .is_some_and(|index| index <= max),
    })
}

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(true) => Some("1".into()),
        Value::Bool(false) => Some("0".into()),
        _ => None,
    }
}

fn check_value(spec: &Spec, name: &str, value: &Value) -> Result<Value, Invalid> {
    if spec.ty == Ty::Array {
        return match value {
            Value::Array(items) => items
                .iter()
                .map(|item| {
                    scalar_text(item)
                        .map(Value::String)
                        .ok_or(Invalid::Type { expected: "string" })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            other => scalar_text(other)
                .map(|text| Value::Array(vec![Value::String(text)]))
                .ok_or(Invalid::Type { expected: "array" }),
        };
    }
    let text = match value {
        Value::Array(_) => {
            return Err(Invalid::Structure {
                expected: type_name(spec.ty),
                got: "ARRAY",
            });
        }
        Value::Object(_) => {
            return Err(Invalid::Structure {
                expected: type_name(spec.ty),
                got: "HASH",
            });
        }
        Value::Bool(flag) if spec.ty == Ty::Bool => return Ok(Value::from(u8::from(*flag))),
        other => scalar_text(other).unwrap_or_default(),
    };
    let typed = match spec.ty {
        Ty::Int => {
            let parsed = text.trim().parse::<i64>().map_err(|_| Invalid::Scalar {
                expected: "integer",
                got: text.clone(),
            })?;
            check_bounds(spec, parsed as f64)?;
            Value::from(parsed)
        }
        Ty::Num => {
            let parsed = text
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .ok_or_else(|| Invalid::Scalar {
                    expected: "number",
                    got: text.clone(),
                })?;
            check_bounds(spec, parsed)?;
            Value::from(parsed)
        }
        Ty::Bool => match text.as_str() {
            "1" => Value::from(1),
            "0" => Value::from(0),
            _ => {
                return Err(Invalid::Scalar {
                    expected: "boolean",
                    got: text,
                });
            }
        },
        Ty::Str | Ty::Array => {
            if let Some(max) = spec.max_len
                && text.chars().count() > max
            {
                return Err(Invalid::TooLong { max });
            }
            Value::String(text.clone())
        }
    };
    if let Some(choices) = &spec.choices
        && !choices.contains(&text)
    {
        return Err(Invalid::NotInEnumeration {
            value: text,
            choices: choices.join(", "),
        });
    }
    if let Some(check) = spec.check {
        check(&text)?;
    }
    if let Some(check) = spec.property {
        check(name, &text)?;
    }
    Ok(typed)
}

fn check_bounds(spec: &Spec, value: f64) -> Result<(), Invalid> {
    if let Some(min) = spec.min
        && value < min as f64
    {
        return Err(Invalid::BelowMinimum { min });
    }
    if let Some(max) = spec.max
        && value > max as f64
    {
        return Err(Invalid::AboveMaximum { max });
    }
    Ok(())
}

fn type_name(ty: Ty) -> &'static str {
    match ty {
        Ty::Str => "string",
        Ty::Int => "integer",
        Ty::Num => "number",
        Ty::Bool => "boolean",
        Ty::Array => "array",
    }
}

fn is_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-')
}

pub(super) fn check_node(value: &str) -> Result<(), Invalid> {
    if is_label(value) {
        Ok(())
    } else {
        Err(Invalid::NodeName)
    }
}

pub(super) fn check_dns_name(value: &str) -> Result<(), Invalid> {
    if !value.is_empty() && value.split('.').all(is_label) {
        Ok(())
    } else {
        Err(Invalid::DnsName)
    }
}

pub(super) fn check_storage(value: &str) -> Result<(), Invalid> {
    let bytes = value.as_bytes();
    let ok = bytes.len() >= 2
        && bytes[0].is_ascii_lowercase()
        && (bytes[bytes.len() - 1].is_ascii_lowercase() || bytes[bytes.len() - 1].is_ascii_digit())
        && bytes
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Invalid::StorageId {
            value: value.to_owned(),
        })
    }
}

pub(super) fn check_pool(value: &str) -> Result<(), Invalid> {
    let levels: Vec<&str> = value.split('/').collect();
    if levels.len() <= 3
        && levels.iter().all(|level| {
            !level.is_empty()
                && level
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        })
    {
        Ok(())
    } else {
        Err(Invalid::PoolName {
            value: value.to_owned(),
        })
    }
}

/// `pve-tag-list`: tags separated by `;`, `,` or spaces, each matching PVE's `pve-tag` pattern
/// `(?^i:[a-z0-9_][a-z0-9_\-\+\.]*)` (PVE/JSONSchema.pm).
pub(super) fn check_tag_list(value: &str) -> Result<(), Invalid> {
    let is_pve_tag = |tag: &str| {
        let mut chars = tag.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.'))
    };
    for tag in value.split([';', ',', ' ']).filter(|t| !t.is_empty()) {
        if !is_pve_tag(tag) {
            return Err(Invalid::Tag {
                tag: tag.to_owned(),
            });
        }
    }
    Ok(())
}

pub(super) fn check_memory(value: &str) -> Result<(), Invalid> {
    let current = super::state::property_default(value, "current").unwrap_or_default();
    match current.parse::<u64>() {
        Ok(mib) if mib >= 16 => Ok(()),
        _ => Err(Invalid::Memory {
            current: current.to_owned(),
        }),
    }
}

pub(super) fn check_urlencoded(value: &str) -> Result<(), Invalid> {
    if value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-%_.!~*'()".contains(c))
    {
        Ok(())
    } else {
        Err(Invalid::NotUrlencoded)
    }
}

/// `pve-storage-content`: one content type.
pub(super) fn check_content(value: &str) -> Result<(), Invalid> {
    if crate::world::STORAGE_CONTENT_TYPES.contains(&value) {
        Ok(())
    } else {
        Err(Invalid::Content {
            value: value.to_owned(),
        })
    }
}

/// `pve-storage-content-list`: content types separated by commas.
pub(super) fn check_content_list(value: &str) -> Result<(), Invalid> {
    value
        .split([',', ';', ' '])
        .filter(|c| !c.is_empty())
        .try_for_each(check_content)
}

/// The `tmpfilename` of an upload: the pattern `/var/tmp/pveupload-[0-9a-f]+`.
pub(super) fn check_upload_tmpfile(value: &str) -> Result<(), Invalid> {
    match value.strip_prefix("/var/tmp/pveupload-") {
        Some(hex)
            if !hex.is_empty()
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) =>
        {
            Ok(())
        }
        _ => Err(Invalid::Pattern),
    }
}

pub(super) fn check_size(value: &str) -> Result<(), Invalid> {
    let body = value.strip_prefix('+').unwrap_or(value);
    let body = body.strip_suffix(['K', 'M', 'G', 'T']).unwrap_or(body);
    let mut parts = body.splitn(2, '.');
    let whole = parts.next().unwrap_or_default();
    let fraction = parts.next();
    let digits = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit());
    if digits(whole) && fraction.is_none_or(digits) {
        Ok(())
    } else {
        Err(Invalid::Pattern)
    }
}

#[cfg(test)]
mod tests {
    use super::super::endpoints::endpoints;
    use super::*;
    use serde_json::json;

    /// The parameter specs of an endpoint of the simulated API.
    fn endpoint(template: &str, method: &str) -> Vec<Spec> {
        endpoints()
            .into_iter()
            .find(|e| e.template == template && e.method == method)
            .expect("endpoint")
            .params
    }

    fn raw(value: Value) -> BTreeMap<String, Value> {
        value
            .as_object()
            .expect("object")
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    #[test]
    fn unknown_missing_and_mistyped_parameters_are_refused_per_parameter() {
        let clone = endpoint("/nodes/{node}/qemu/{vmid}/clone", "POST");
        let err = validate(
            &clone,
            &raw(json!({"node": "pve1", "vmid": "abc", "full": "true", "bogus": "1"})),
        )
        .expect_err("invalid");
        assert_eq!(err.status, 400);
        assert_eq!(err.message, "Parameter verification failed.");
        assert_eq!(
            err.errors["vmid"],
            "type check ('integer') failed - got 'abc'"
        );
        assert_eq!(
            err.errors["full"],
            "type check ('boolean') failed - got 'true'"
        );
        assert!(err.errors["bogus"].starts_with("property is not defined in schema"));
        assert_eq!(
            err.errors["newid"],
            "property is missing and it is not optional"
        );
    }

    #[test]
    fn json_booleans_numbers_and_families_are_accepted() {
        let config = endpoint("/nodes/{node}/qemu/{vmid}/config", "POST");
        let params = validate(
            &config,
            &raw(json!({"node": "pve1", "vmid": 101, "onboot": true, "ipconfig0": "ip=dhcp", "cores": "4"})),
        )
        .expect("valid");
        assert_eq!(params.flag("onboot"), Some(true));
        assert_eq!(params.int("cores"), Some(4));
        let err = validate(
            &config,
            &raw(json!({"node": "pve1", "vmid": 101, "ipconfig32": "ip=dhcp"})),
        )
        .expect_err("out of the family");
        assert!(err.errors.contains_key("ipconfig32"));
    }

    #[test]
    fn bounds_enumerations_and_formats_are_checked() {
        let resize = endpoint("/nodes/{node}/qemu/{vmid}/resize", "PUT");
        let err = validate(
            &resize,
            &raw(json!({"node": "pve1", "vmid": 50, "disk": "scsi99", "size": "big"})),
        )
        .expect_err("invalid");
        assert_eq!(err.errors["vmid"], "value must have a minimum value of 100");
        assert!(err.errors["disk"].contains("does not have a value in the enumeration"));
        assert_eq!(err.errors["size"], "value does not match the regex pattern");
        let config = endpoint("/nodes/{node}/qemu/{vmid}/config", "PUT");
        let err = validate(
            &config,
            &raw(json!({"node": "pve1", "vmid": 101, "tags": "ok;Not Valid!", "sshkeys": "ssh-ed25519 AAA"})),
        )
        .expect_err("invalid");
        assert!(err.errors["tags"].contains("invalid"));
        assert_eq!(
            err.errors["sshkeys"],
            "invalid format - value must be urlencoded"
        );
    }

    #[test]
    fn structures_and_property_strings_are_refused_with_the_hosts_texts() {
        let config = endpoint("/nodes/{node}/qemu/{vmid}/config", "POST");
        let err = validate(
            &config,
            &raw(json!({"node": "pve1", "vmid": 101, "cores": [4], "memory": "current=8"})),
        )
        .expect_err("invalid");
        assert_eq!(
            err.errors["cores"],
            "type check ('integer') failed - got ARRAY"
        );
        assert_eq!(
            err.errors["memory"],
            "invalid format - format error\ncurrent: type check ('integer') failed - got '8'"
        );
    }
}
