//! Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`),
//! decoded to the JSON the rest of the server works on.
//!
//! kubectl's typed commands (`kubectl create deployment|pdb|secret|configmap|namespace|...`)
//! send protobuf and nothing else, so the simulated server must read it. Only the kinds and
//! fields those commands fill are described here (field numbers from k8s.io/api's
//! `generated.proto`); unknown fields are skipped, unknown kinds answer 415.
//!
//! Wire format: the 4-byte magic `k8s\0`, then a `runtime.Unknown` message whose field 1 is
//! the TypeMeta (apiVersion, kind) and field 2 the object's own message. gogo-protobuf writes
//! zero values of non-pointer fields, so zero scalars are dropped unless a field is a pointer
//! in Go (`keep`), matching JSON's `omitempty`.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::status::ApiError;

const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    Bool,
    Message(&'static [Field]),
    /// Fields of an embedded Go struct that JSON inlines (Volume's VolumeSource).
    Inline(&'static [Field]),
    MapStr,
    MapBytes,
    MapQuantity,
    IntOrString,
    Quantity,
    Time,
}

#[derive(Clone, Copy)]
struct Field {
    number: u64,
    name: &'static str,
    kind: Kind,
    repeated: bool,
    keep: bool,
}

const fn f(number: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        number,
        name,
        kind,
        repeated: false,
        keep: false,
    }
}

const fn list(number: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        repeated: true,
        ..f(number, name, kind)
    }
}

const fn keep(number: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        keep: true,
        ..f(number, name, kind)
    }
}

use Kind::{
    Bool, Inline, Int, IntOrString, MapBytes, MapQuantity, MapStr, Message, Quantity, Str, Time,
};

const OWNER_REFERENCE: &[Field] = &[
    f(1, "kind", Str),
    f(3, "name", Str),
    f(4, "uid", Str),
    f(5, "apiVersion", Str),
    keep(6, "controller", Bool),
    keep(7, "blockOwnerDeletion", Bool),
];

const OBJECT_META: &[Field] = &[
    f(1, "name", Str),
    f(2, "generateName", Str),
    f(3, "namespace", Str),
    f(5, "uid", Str),
    f(6, "resourceVersion", Str),
    f(7, "generation", Int),
    f(8, "creationTimestamp", Time),
    f(11, "labels", MapStr),
    f(12, "annotations", MapStr),
    list(13, "ownerReferences", Message(OWNER_REFERENCE)),
    list(14, "finalizers", Str),
];

const SELECTOR_REQUIREMENT: &[Field] = &[
    f(1, "key", Str),
    f(2, "operator", Str),
    list(3, "values", Str),
];

const LABEL_SELECTOR: &[Field] = &[
    f(1, "matchLabels", MapStr),
    list(2, "matchExpressions", Message(SELECTOR_REQUIREMENT)),
];

const EMPTY_DIR: &[Field] = &[f(1, "medium", Str), f(2, "sizeLimit", Quantity)];
const NAMED_SOURCE: &[Field] = &[f(1, "secretName", Str), f(3, "defaultMode", Int)];
const CONFIG_MAP_SOURCE: &[Field] = &[f(1, "name", Str), f(3, "defaultMode", Int)];
const HOST_PATH: &[Field] = &[f(1, "path", Str), f(2, "type", Str)];
const CLAIM_SOURCE: &[Field] = &[f(1, "claimName", Str), f(2, "readOnly", Bool)];

const VOLUME_SOURCE: &[Field] = &[
    f(1, "hostPath", Message(HOST_PATH)),
    f(2, "emptyDir", Message(EMPTY_DIR)),
    f(6, "secret", Message(NAMED_SOURCE)),
    f(10, "persistentVolumeClaim", Message(CLAIM_SOURCE)),
    f(19, "configMap", Message(CONFIG_MAP_SOURCE)),
];

const VOLUME: &[Field] = &[f(1, "name", Str), f(2, "", Inline(VOLUME_SOURCE))];

const CONTAINER_PORT: &[Field] = &[
    f(1, "name", Str),
    f(2, "hostPort", Int),
    f(3, "containerPort", Int),
    f(4, "protocol", Str),
];

const ENV_VAR: &[Field] = &[f(1, "name", Str), f(2, "value", Str)];
const RESOURCES: &[Field] = &[f(1, "limits", MapQuantity), f(2, "requests", MapQuantity)];
const VOLUME_MOUNT: &[Field] = &[
    f(1, "name", Str),
    f(2, "readOnly", Bool),
    f(3, "mountPath", Str),
];

const CONTAINER: &[Field] = &[
    f(1, "name", Str),
    f(2, "image", Str),
    list(3, "command", Str),
    list(4, "args", Str),
    f(5, "workingDir", Str),
    list(6, "ports", Message(CONTAINER_PORT)),
    list(7, "env", Message(ENV_VAR)),
    f(8, "resources", Message(RESOURCES)),
    list(9, "volumeMounts", Message(VOLUME_MOUNT)),
    f(13, "terminationMessagePath", Str),
    f(14, "imagePullPolicy", Str),
    f(20, "terminationMessagePolicy", Str),
];

const TOLERATION: &[Field] = &[
    f(1, "key", Str),
    f(2, "operator", Str),
    f(3, "value", Str),
    f(4, "effect", Str),
    f(5, "tolerationSeconds", Int),
];

const POD_SPEC: &[Field] = &[
    list(1, "volumes", Message(VOLUME)),
    list(2, "containers", Message(CONTAINER)),
    f(3, "restartPolicy", Str),
    keep(4, "terminationGracePeriodSeconds", Int),
    f(6, "dnsPolicy", Str),
    f(7, "nodeSelector", MapStr),
    f(8, "serviceAccountName", Str),
    f(10, "nodeName", Str),
    f(14, "securityContext", Message(&[])),
    f(19, "schedulerName", Str),
    list(20, "initContainers", Message(CONTAINER)),
    list(22, "tolerations", Message(TOLERATION)),
];

const POD_TEMPLATE: &[Field] = &[
    f(1, "metadata", Message(OBJECT_META)),
    f(2, "spec", Message(POD_SPEC)),
];

const ROLLING_UPDATE: &[Field] = &[
    f(1, "maxUnavailable", IntOrString),
    f(2, "maxSurge", IntOrString),
];

const STRATEGY: &[Field] = &[
    f(1, "type", Str),
    f(2, "rollingUpdate", Message(ROLLING_UPDATE)),
];

const DEPLOYMENT_SPEC: &[Field] = &[
    keep(1, "replicas", Int),
    f(2, "selector", Message(LABEL_SELECTOR)),
    f(3, "template", Message(POD_TEMPLATE)),
    f(4, "strategy", Message(STRATEGY)),
    f(5, "minReadySeconds", Int),
    keep(6, "revisionHistoryLimit", Int),
    f(7, "paused", Bool),
    keep(9, "progressDeadlineSeconds", Int),
];

const PDB_SPEC: &[Field] = &[
    f(1, "minAvailable", IntOrString),
    f(2, "selector", Message(LABEL_SELECTOR)),
    f(3, "maxUnavailable", IntOrString),
    f(4, "unhealthyPodEvictionPolicy", Str),
];

const SERVICE_PORT: &[Field] = &[
    f(1, "name", Str),
    f(2, "protocol", Str),
    f(3, "port", Int),
    f(4, "targetPort", IntOrString),
    f(5, "nodePort", Int),
];

const SERVICE_SPEC: &[Field] = &[
    list(1, "ports", Message(SERVICE_PORT)),
    f(2, "selector", MapStr),
    f(3, "clusterIP", Str),
    f(4, "type", Str),
];

const NAMESPACE_SPEC: &[Field] = &[list(1, "finalizers", Str)];

const fn with_meta(spec: &'static [Field]) -> [Field; 2] {
    [
        f(1, "metadata", Message(OBJECT_META)),
        f(2, "spec", Message(spec)),
    ]
}

const DEPLOYMENT: &[Field] = &with_meta(DEPLOYMENT_SPEC);
const PDB: &[Field] = &with_meta(PDB_SPEC);
const SERVICE: &[Field] = &with_meta(SERVICE_SPEC);
const NAMESPACE: &[Field] = &with_meta(NAMESPACE_SPEC);
const SECRET: &[Field] = &[
    f(1, "metadata", Message(OBJECT_META)),
    f(2, "data", MapBytes),
    f(3, "type", Str),
    f(4, "stringData", MapStr),
    keep(5, "immutable", Bool),
];
const CONFIG_MAP: &[Field] = &[
    f(1, "metadata", Message(OBJECT_META)),
    f(2, "data", MapStr),
    f(3, "binaryData", MapBytes),
    keep(4, "immutable", Bool),
];
const SERVICE_ACCOUNT: &[Field] = &[f(1, "metadata", Message(OBJECT_META))];

fn schema(kind: &str) -> Option<&'static [Field]> {
    Some(match kind {
        "Deployment" => DEPLOYMENT,
        "PodDisruptionBudget" => PDB,
        "Secret" => SECRET,
        "ConfigMap" => CONFIG_MAP,
        "Namespace" => NAMESPACE,
        "ServiceAccount" => SERVICE_ACCOUNT,
        "Service" => SERVICE,
        _ => return None,
    })
}

/// Whether a `Content-Type` is Kubernetes protobuf.
pub(crate) fn is_protobuf(content_type: &str) -> bool {
    content_type.starts_with("application/vnd.kubernetes.protobuf")
}

/// Decodes a protobuf request body to JSON (with `apiVersion` and `kind`).
///
/// # Errors
/// BadRequest for a malformed body; UnsupportedMediaType for a kind not described here.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let malformed = || ApiError::bad_request("malformed protobuf body");
    let envelope = body.strip_prefix(MAGIC).ok_or_else(malformed)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (number, value) in fields(envelope).ok_or_else(malformed)? {
        match (number, value) {
            (1, Wire::Bytes(type_meta)) => {
                for (n, v) in fields(type_meta).ok_or_else(malformed)? {
                    if let Wire::Bytes(text) = v {
                        let text = String::from_utf8_lossy(text).into_owned();
                        match n {
                            1 => api_version = text,
                            2 => kind = text,
                            _ => {}
                        }
                    }
                }
            }
            (2, Wire::Bytes(bytes)) => raw = bytes,
            _ => {}
        }
    }
    let schema = schema(&kind).ok_or_else(|| {
        ApiError::unsupported_media_type(&format!("application/vnd.kubernetes.protobuf for {kind}"))
    })?;
    let mut object = message(raw, schema).ok_or_else(malformed)?;
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    Ok(object)
}

enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

fn fields(bytes: &[u8]) -> Option<Vec<(u64, Wire<'_>)>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let key = varint(bytes, &mut at)?;
        let wire = match key & 7 {
            0 => Wire::Varint(varint(bytes, &mut at)?),
            2 => {
                let length = usize::try_from(varint(bytes, &mut at)?).ok()?;
                let end = at.checked_add(length).filter(|end| *end <= bytes.len())?;
                let slice = &bytes[at..end];
                at = end;
                Wire::Bytes(slice)
            }
            1 => {
                at += 8;
                Wire::Fixed
            }
            5 => {
                at += 4;
                Wire::Fixed
            }
            _ => return None,
        };
        out.push((key >> 3, wire));
    }
    (at == bytes.len()).then_some(out)
}

fn message(bytes: &[u8], schema: &[Field]) -> Option<Value> {
    let mut object = Map::new();
    for (number, wire) in fields(bytes)? {
        let Some(field) = schema.iter().find(|f| f.number == number) else {
            continue;
        };
        if let (Kind::Inline(inner), Wire::Bytes(inlined)) = (field.kind, &wire) {
            if let Value::Object(inlined) = message(inlined, inner)? {
                object.extend(inlined);
            }
            continue;
        }
        let Some(value) = value_of(&wire, field)? else {
            continue;
        };
        match field.kind {
            Kind::MapStr | Kind::MapBytes | Kind::MapQuantity => {
                let entry = object
                    .entry(field.name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let (Value::Object(map), Value::Object(pair)) = (entry, value) {
                    map.extend(pair);
                }
            }
            _ if field.repeated => {
                let entry = object
                    .entry(field.name)
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(items) = entry {
                    items.push(value);
                }
            }
            _ => {
                object.insert(field.name.to_owned(), value);
            }
        }
    }
    Some(Value::Object(object))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One field's JSON value: `None` for a malformed body, `Some(None)` for a zero value JSON
/// would omit.
fn value_of(wire: &Wire<'_>, field: &Field) -> Option<Option<Value>> {
    let keep = field.keep || field.repeated;
    let value = match (field.kind, wire) {
        (Kind::Str, Wire::Bytes(b)) => (keep || !b.is_empty()).then(|| json!(text(b))),
        // int32/int64 travel as two's-complement varints; the cast restores the sign.
        (Kind::Int, Wire::Varint(v)) => (keep || *v != 0).then(|| json!(*v as i64)),
        (Kind::Bool, Wire::Varint(v)) => (keep || *v != 0).then(|| json!(*v != 0)),
        (Kind::Message(inner), Wire::Bytes(b)) => Some(message(b, inner)?),
        (Kind::MapStr | Kind::MapBytes | Kind::MapQuantity, Wire::Bytes(b)) => {
            let mut key = String::new();
            let mut value = Value::Null;
            for (number, wire) in fields(b)? {
                match (number, wire, field.kind) {
                    (1, Wire::Bytes(k), _) => key = text(k),
                    (2, Wire::Bytes(v), Kind::MapStr) => value = json!(text(v)),
                    (2, Wire::Bytes(v), Kind::MapBytes) => {
                        value = json!(base64::engine::general_purpose::STANDARD.encode(v));
                    }
                    (2, Wire::Bytes(v), _) => value = quantity(v)?,
                    _ => {}
                }
            }
            if value.is_null() {
                value = json!("");
            }
            Some(json!({ key: value }))
        }
        (Kind::IntOrString, Wire::Bytes(b)) => {
            let mut is_string = false;
            let mut int = 0i64;
            let mut string = String::new();
            for (number, wire) in fields(b)? {
                match (number, wire) {
                    (1, Wire::Varint(v)) => is_string = v == 1,
                    (2, Wire::Varint(v)) => int = v as i64,
                    (3, Wire::Bytes(s)) => string = text(s),
                    _ => {}
                }
            }
            Some(if is_string { json!(string) } else { json!(int) })
        }
        (Kind::Quantity, Wire::Bytes(b)) => Some(quantity(b)?),
        (Kind::Time, Wire::Bytes(b)) => {
            let mut seconds = 0i64;
            for (number, wire) in fields(b)? {
                if let (1, Wire::Varint(v)) = (number, wire) {
                    {
                        seconds = v as i64;
                    }
                }
            }
            if seconds == 0 {
                None
            } else {
                let time = jiff::Timestamp::from_second(seconds).ok()?;
                Some(json!(super::store::rfc3339(time)))
            }
        }
        // A wire type that does not fit the field: ignore it, as an unknown field.
        _ => None,
    };
    Some(value)
}

fn quantity(bytes: &[u8]) -> Option<Value> {
    let mut value = String::new();
    for (number, wire) in fields(bytes)? {
        if let (1, Wire::Bytes(s)) = (number, wire) {
            value = text(s);
        }
    }
    Some(json!(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(number: u64, wire: u64) -> Vec<u8> {
        encode_varint((number << 3) | wire)
    }

    fn encode_varint(mut value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = u8::try_from(value & 0x7f).expect("seven bits");
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    fn bytes_field(number: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = tag(number, 2);
        out.extend(encode_varint(payload.len() as u64));
        out.extend(payload);
        out
    }

    fn map_entry(number: u64, key: &str, value: &[u8]) -> Vec<u8> {
        let mut entry = bytes_field(1, key.as_bytes());
        entry.extend(bytes_field(2, value));
        bytes_field(number, &entry)
    }

    #[test]
    fn a_secret_from_kubectl_create_decodes_to_json() {
        // What `kubectl create secret generic s1 --from-literal=value=hello` sends: empty
        // strings for unset metadata, data as raw bytes.
        let mut meta = bytes_field(1, b"s1");
        meta.extend(bytes_field(2, b""));
        meta.extend(tag(7, 0));
        meta.push(0);
        meta.extend(bytes_field(8, b""));
        let mut secret = bytes_field(1, &meta);
        secret.extend(map_entry(2, "value", b"hello"));
        secret.extend(bytes_field(3, b""));
        let mut type_meta = bytes_field(1, b"v1");
        type_meta.extend(bytes_field(2, b"Secret"));
        let mut body = MAGIC.to_vec();
        body.extend(bytes_field(1, &type_meta));
        body.extend(bytes_field(2, &secret));
        let object = decode(&body).expect("decode");
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"},
                   "data": {"value": "aGVsbG8="}})
        );
    }

    #[test]
    fn int_or_string_and_inlined_volume_sources_decode() {
        let mut min_available = tag(1, 0);
        min_available.push(1);
        min_available.extend(bytes_field(3, b"50%"));
        let spec = bytes_field(1, &min_available);
        let object = message(&bytes_field(2, &spec), PDB).expect("pdb");
        assert_eq!(object["spec"]["minAvailable"], "50%");
        let mut volume = bytes_field(1, b"scratch");
        volume.extend(bytes_field(2, &bytes_field(2, b"")));
        let decoded = message(&volume, VOLUME).expect("volume");
        assert_eq!(decoded, json!({"name": "scratch", "emptyDir": {}}));
    }

    #[test]
    fn unknown_kinds_are_unsupported_media() {
        let mut type_meta = bytes_field(1, b"v1");
        type_meta.extend(bytes_field(2, b"Pod"));
        let mut body = MAGIC.to_vec();
        body.extend(bytes_field(1, &type_meta));
        assert_eq!(decode(&body).expect_err("pod").code, 415);
    }
}
