//! Fidelity: the real Proxmox VE 9.1 API schema (`tests/data/pve-api-subset.json`) judges both
//! sides of the wire.
//!
//! - Every request the client sends during a scenario that uses every operation (recorded by
//!   the simulated Proxmox) names an endpoint and method of the schema, and every parameter
//!   exists there with a value of the right type; required parameters are present.
//! - Every answer the simulated Proxmox gives to those requests matches the schema's `returns`
//!   shape: types, required properties, no invented properties.
//! - Every endpoint and parameter the simulated Proxmox accepts exists in the schema with the
//!   same type and optionality.
//!
//! The checker itself is tested on deliberate drift, so a drift makes this file fail.

use std::sync::Arc;
use std::time::Duration;

use crate::proxmox_support::{clone_request, created, expected, iso_world, ownership, start_with};
use capstan::model::Role;
use capstan::providers::proxmox::ownership::encode_description;
use capstan::providers::proxmox::{
    CloudInit, ProxmoxProvider, PveNode, StorageContent, VmRef, VmSettings,
};
use capstan_lab::proxmox::{DefaultShell, Exchange, accepted_parameters};
use capstan_lab::world::WorldVm;
use serde_json::{Value, json};

fn schema() -> Value {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pve-api-subset.json");
    let text = std::fs::read_to_string(&path).expect("tests/data/pve-api-subset.json");
    serde_json::from_str(&text).expect("schema is JSON")
}

/// The schema of one endpoint and method.
fn method_schema<'a>(schema: &'a Value, template: &str, method: &str) -> Option<&'a Value> {
    schema.get("endpoints")?.get(template)?.get(method)
}

/// The schema entry of a parameter: exact name, or an indexed family (`ipconfig0` →
/// `ipconfig[n]`).
fn param_schema<'a>(method: &'a Value, name: &str) -> Option<&'a Value> {
    let params = method.get("parameters")?.as_array()?;
    params.iter().find(|p| p["name"] == name).or_else(|| {
        let family = name.trim_end_matches(|c: char| c.is_ascii_digit());
        (family.len() < name.len())
            .then(|| params.iter().find(|p| p["name"] == format!("{family}[n]")))
            .flatten()
    })
}

fn path_params(template: &str) -> Vec<String> {
    template
        .split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(str::to_owned)
        .collect()
}

/// Whether a raw request value has the schema type (as form or JSON values come).
fn request_value_fits(ty: &str, value: &Value) -> bool {
    let scalar = match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1".into() } else { "0".into() }),
        _ => None,
    };
    match ty {
        "array" => value.is_array() || scalar.is_some(),
        "integer" => scalar.is_some_and(|s| s.parse::<i64>().is_ok()),
        "number" => scalar.is_some_and(|s| s.parse::<f64>().is_ok()),
        "boolean" => scalar.is_some_and(|s| s == "0" || s == "1"),
        "string" => value.is_string(),
        _ => true,
    }
}

/// Violations of the schema by one recorded request.
fn check_request(schema: &Value, exchange: &Exchange) -> Vec<String> {
    let at = format!("{} {}", exchange.method, exchange.template);
    let Some(method) = method_schema(schema, &exchange.template, &exchange.method) else {
        return vec![format!(
            "{at}: no such endpoint and method in the real schema"
        )];
    };
    let mut violations = Vec::new();
    for (name, value) in &exchange.params {
        let Some(param) = param_schema(method, name) else {
            violations.push(format!(
                "{at}: parameter `{name}` is not in the real schema"
            ));
            continue;
        };
        let ty = param["type"].as_str().unwrap_or("string");
        if !request_value_fits(ty, value) {
            violations.push(format!("{at}: parameter `{name}` = {value} is not a {ty}"));
        }
        if let (Some(choices), Some(text)) = (param["enum"].as_array(), value.as_str())
            && !choices.iter().any(|c| c == text)
        {
            violations.push(format!(
                "{at}: parameter `{name}` = {text} is not in its enum"
            ));
        }
    }
    let in_path = path_params(&exchange.template);
    for param in method["parameters"].as_array().into_iter().flatten() {
        let name = param["name"].as_str().unwrap_or_default();
        if param["optional"] == false
            && !in_path.iter().any(|p| p == name)
            && !exchange.params.contains_key(name)
        {
            violations.push(format!("{at}: required parameter `{name}` is missing"));
        }
    }
    violations
}

fn is_optional(schema: &Value) -> bool {
    schema["optional"] == 1 || schema["optional"] == true
}

/// Violations of a `returns` schema by an answer's `data`.
fn check_shape(schema: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    if value.is_null() && (is_optional(schema) || schema["type"] == "null") {
        return;
    }
    let numeric_string = |v: &Value| v.as_str().is_some_and(|s| s.parse::<f64>().is_ok());
    match schema["type"].as_str() {
        Some("object") => {
            let Some(map) = value.as_object() else {
                out.push(format!("{at}: expected an object, got {value}"));
                return;
            };
            let Some(properties) = schema["properties"].as_object() else {
                return;
            };
            let open =
                schema["additionalProperties"] == 1 || schema["additionalProperties"] == true;
            for (key, item) in map {
                let family = key.trim_end_matches(|c: char| c.is_ascii_digit());
                let property = properties
                    .get(key)
                    .or_else(|| properties.get(&format!("{family}[n]")));
                match property {
                    Some(property) => check_shape(property, item, &format!("{at}.{key}"), out),
                    None if open => {}
                    None => out.push(format!("{at}: property `{key}` is not in the real schema")),
                }
            }
            for (key, property) in properties {
                if !is_optional(property) && !key.ends_with("[n]") && !map.contains_key(key) {
                    out.push(format!("{at}: required property `{key}` is missing"));
                }
            }
        }
        Some("array") => {
            let Some(items) = value.as_array() else {
                out.push(format!("{at}: expected an array, got {value}"));
                return;
            };
            for (index, item) in items.iter().enumerate() {
                check_shape(&schema["items"], item, &format!("{at}[{index}]"), out);
            }
        }
        Some("string") => {
            if !value.is_string() {
                out.push(format!("{at}: expected a string, got {value}"));
            } else if let Some(choices) = schema["enum"].as_array()
                && !choices.contains(value)
            {
                out.push(format!("{at}: {value} is not in its enum"));
            }
        }
        // Numbers may come as numeric strings, as from a real host (`nextid`).
        Some("integer") if !(value.is_i64() || value.is_u64() || numeric_string(value)) => {
            out.push(format!("{at}: expected an integer, got {value}"));
        }
        Some("number") if !(value.is_number() || numeric_string(value)) => {
            out.push(format!("{at}: expected a number, got {value}"));
        }
        // Booleans are Perl integers 1/0 on the wire.
        Some("boolean") if !(value.is_boolean() || value == 0 || value == 1) => {
            out.push(format!("{at}: expected a boolean (1/0), got {value}"));
        }
        Some("null") => out.push(format!("{at}: expected null, got {value}")),
        _ => {}
    }
}

fn check_answer(schema: &Value, exchange: &Exchange) -> Vec<String> {
    let at = format!("{} {}", exchange.method, exchange.template);
    let mut out = Vec::new();
    if exchange.status != 200 {
        // Errors carry `data: null` and a message.
        if !exchange.body.is_null()
            && (exchange.body.get("data") != Some(&Value::Null)
                || !exchange.body["message"].is_string())
        {
            out.push(format!(
                "{at}: error body {} lacks data:null or message",
                exchange.body
            ));
        }
        return out;
    }
    let Some(method) = method_schema(schema, &exchange.template, &exchange.method) else {
        return vec![format!("{at}: no such endpoint in the real schema")];
    };
    let Some(data) = exchange.body.get("data") else {
        return vec![format!("{at}: no data envelope")];
    };
    check_shape(&method["returns"], data, &at, &mut out);
    out
}

/// Runs every client operation against a recording sim; returns what was exchanged.
async fn scenario() -> Vec<Exchange> {
    let setup = start_with(iso_world(), Arc::new(DefaultShell::new()), true).await;
    let client = &setup.client;
    setup
        .sim
        .handle()
        .add_vm(&WorldVm {
            vmid: 700,
            name: "capstan-prod-cp-old01".into(),
            node: "pve3".into(),
            cores: 2,
            memory_mib: 2048,
            disk_gib: 20,
            tags: None,
            description: Some(encode_description(
                &ownership("prod", Role::ControlPlane, "cp"),
                created(),
                None,
            )),
            running: true,
        })
        .expect("seed");
    client.inventory().await.expect("inventory");
    let mut request = clone_request("prod", "general", "fid01", "pve1");
    request.storage = Some("local-lvm".into());
    let vm = client.clone_vm(&request).await.expect("clone");
    client
        .configure_vm(
            &vm,
            &VmSettings {
                cores: 4,
                memory_mib: 4096,
                cpu_type: "host".into(),
                ownership: request.ownership.clone(),
                created: created(),
                cloud_init: Some(CloudInit {
                    ipconfigs: vec![(0, "ip=dhcp".into())],
                    user: Some("capstan".into()),
                    ssh_keys: Some("ssh-ed25519 AAAA key".into()),
                    ..CloudInit::default()
                }),
                built_from: Some("template=debian13-k8s cores=4".into()),
                hardware: Default::default(),
                disk_storage: None,
                tags: Vec::new(),
            },
        )
        .await
        .expect("configure");
    client.resize_disk(&vm, 30).await.expect("resize");
    client.vm_description(&vm).await.expect("description");
    client.start_vm(&vm).await.expect("start");
    capstan_testkit::wait::agent(client, &vm).await;
    let argv = vec!["echo".to_owned(), "fidelity".to_owned()];
    client
        .run_command(&vm, &argv, Some("stdin"), Duration::from_secs(5))
        .await
        .expect("run");
    client.vm_addresses(&vm).await.expect("addresses");
    client
        .write_file(&vm, "/etc/capstan", b"x")
        .await
        .expect("write");
    setup
        .sim
        .faults()
        .fail_tasks("qmstart", 1, "start failed: injected");
    let expected_vm = expected(&vm, &request);
    client
        .shutdown_vm(&expected_vm, Duration::from_secs(5))
        .await
        .expect("shutdown");
    client
        .start_vm(&vm)
        .await
        .expect_err("injected failure reads the task log");
    client.start_vm(&vm).await.expect("start");
    client
        .add_tag(&expected_vm, "capstan-retiring")
        .await
        .expect("tag");
    iso_calls(client, &vm).await;
    client.stop_vm(&expected_vm).await.expect("stop");
    client.destroy_vm(&expected_vm).await.expect("destroy");
    setup.sim.handle().exchanges()
}

/// A seed image's life: the storage checked, the image uploaded, listed, attached, detached
/// and deleted.
async fn iso_calls(client: &capstan::providers::proxmox::ProxmoxClient, vm: &VmRef) {
    let pve1 = PveNode::from("pve1");
    client
        .storage_content(&pve1, "local")
        .await
        .expect("content types");
    let volume = client
        .upload_iso(&pve1, "local", "fidelity.iso", b"seed")
        .await
        .expect("upload");
    client
        .storage_volumes(&pve1, "local", StorageContent::Iso)
        .await
        .expect("list");
    client.attach_cdrom(vm, &volume).await.expect("attach");
    client.detach_cdrom(vm, &volume).await.expect("detach");
    client.delete_volume(&pve1, &volume).await.expect("delete");
}

#[tokio::test]
async fn every_request_the_client_sends_and_every_answer_fit_the_real_schema() {
    let schema = schema();
    let exchanges = scenario().await;
    assert!(
        exchanges.len() > 30,
        "recorded {} exchanges",
        exchanges.len()
    );
    let mut violations = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for exchange in &exchanges {
        seen.insert(format!("{} {}", exchange.method, exchange.template));
        violations.extend(check_request(&schema, exchange));
        violations.extend(check_answer(&schema, exchange));
    }
    violations.sort();
    violations.dedup();
    assert!(
        violations.is_empty(),
        "drift from the real schema:\n{}",
        violations.join("\n")
    );
    // The scenario really covers what the client does.
    for endpoint in [
        "GET /cluster/resources",
        "GET /cluster/nextid",
        "POST /nodes/{node}/qemu/{vmid}/clone",
        "GET /nodes/{node}/qemu/{vmid}/config",
        "POST /nodes/{node}/qemu/{vmid}/config",
        "PUT /nodes/{node}/qemu/{vmid}/resize",
        "GET /nodes/{node}/qemu/{vmid}/status/current",
        "POST /nodes/{node}/qemu/{vmid}/status/start",
        "POST /nodes/{node}/qemu/{vmid}/status/shutdown",
        "POST /nodes/{node}/qemu/{vmid}/status/stop",
        "DELETE /nodes/{node}/qemu/{vmid}",
        "POST /nodes/{node}/qemu/{vmid}/agent/ping",
        "POST /nodes/{node}/qemu/{vmid}/agent/exec",
        "GET /nodes/{node}/qemu/{vmid}/agent/exec-status",
        "GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
        "POST /nodes/{node}/qemu/{vmid}/agent/file-write",
        "GET /nodes/{node}/tasks/{upid}/status",
        "GET /nodes/{node}/tasks/{upid}/log",
        "GET /nodes/{node}/storage",
        "POST /nodes/{node}/storage/{storage}/upload",
        "GET /nodes/{node}/storage/{storage}/content",
        "DELETE /nodes/{node}/storage/{storage}/content/{volume}",
    ] {
        assert!(
            seen.contains(endpoint),
            "the scenario never called {endpoint}: {seen:?}"
        );
    }
}

#[tokio::test]
async fn answers_of_the_other_served_endpoints_fit_the_real_schema() {
    let schema = schema();
    let setup = start_with(iso_world(), Arc::new(DefaultShell::new()), true).await;
    setup
        .client
        .upload_iso(&PveNode::from("pve1"), "local", "listed.iso", b"seed")
        .await
        .expect("upload");
    let http = reqwest::Client::builder()
        .tls_backend_preconfigured(insecure_tls())
        .build()
        .expect("client");
    let auth = format!(
        "PVEAPIToken={}={}",
        setup.sim.token_id(),
        setup.sim.token_secret()
    );
    for path in [
        "/version",
        "/cluster/status",
        "/cluster/resources",
        "/nodes",
        "/nodes/pve1/status",
        "/nodes/pve1/qemu?full=1",
        "/nodes/pve1/qemu/9000/status/current",
        "/nodes/pve1/storage",
        "/nodes/pve1/storage/local-lvm/status",
        "/nodes/pve1/storage?content=iso",
        "/nodes/pve1/storage/local/content",
        "/nodes/pve1/storage/local-lvm/content?content=images",
        "/nodes/pve1/storage/local-lvm/content?vmid=9000",
        "/pools",
        "/pools?poolid=capstan",
    ] {
        let response = http
            .get(format!("{}/api2/json{path}", setup.sim.url()))
            .header("Authorization", &auth)
            .send()
            .await
            .expect("answer");
        assert_eq!(response.status(), 200, "{path}");
    }
    let mut violations = Vec::new();
    for exchange in setup.sim.handle().exchanges() {
        violations.extend(check_answer(&schema, &exchange));
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn every_parameter_the_sim_accepts_exists_in_the_real_schema_with_its_type() {
    let schema = schema();
    let mut violations = Vec::new();
    for endpoint in accepted_parameters() {
        let at = format!("{} {}", endpoint.method, endpoint.template);
        let Some(method) = method_schema(&schema, endpoint.template, endpoint.method) else {
            // Not in the extract: judged against the whole published schema.
            violations.extend(against_apidata(&endpoint, &at));
            continue;
        };
        for param in &endpoint.params {
            match method["parameters"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["name"] == param.name.as_str()))
            {
                None => {
                    violations.push(format!("{at}: `{}` is not in the real schema", param.name))
                }
                Some(real) => {
                    if real["type"] != param.ty {
                        violations.push(format!(
                            "{at}: `{}` is a {} in the sim but {} in the real schema",
                            param.name, param.ty, real["type"]
                        ));
                    }
                    if real["optional"] != param.optional {
                        violations.push(format!(
                            "{at}: `{}` optional={} in the sim but {} in the real schema",
                            param.name, param.optional, real["optional"]
                        ));
                    }
                }
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

/// What is wrong with an endpoint the extract does not hold, against the whole published
/// schema (`pve-apidata.js`, where each parameter is a property of `parameters`).
fn against_apidata(endpoint: &capstan_lab::proxmox::AcceptedEndpoint, at: &str) -> Vec<String> {
    let whole = capstan_testkit::pve_schema::schema();
    if !whole.has_method(endpoint.template, endpoint.method) {
        return vec![format!("{at}: not in the real schema")];
    }
    let mut violations = Vec::new();
    for param in &endpoint.params {
        let Some(real) = whole.parameter(endpoint.template, endpoint.method, &param.name) else {
            violations.push(format!("{at}: `{}` is not in the real schema", param.name));
            continue;
        };
        let ty = real["type"].as_str().unwrap_or("string");
        if ty != param.ty {
            violations.push(format!(
                "{at}: `{}` is a {} in the sim but {ty} in the real schema",
                param.name, param.ty
            ));
        }
        let optional = real["optional"].as_u64() == Some(1) || real["optional"] == true;
        if optional != param.optional {
            violations.push(format!(
                "{at}: `{}` optional={} in the sim but {} in the real schema",
                param.name, param.optional, real["optional"]
            ));
        }
    }
    violations
}

fn exchange(template: &str, method: &str, params: Value, body: Value) -> Exchange {
    Exchange {
        method: method.into(),
        template: template.into(),
        params: params
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default(),
        status: 200,
        body,
    }
}

#[test]
fn the_checker_catches_a_drifting_client() {
    let schema = schema();
    let clone = "/nodes/{node}/qemu/{vmid}/clone";
    let good = exchange(
        clone,
        "POST",
        json!({"newid": "101", "full": "1"}),
        json!({"data": "UPID:x"}),
    );
    assert!(check_request(&schema, &good).is_empty());
    let unknown = exchange(
        clone,
        "POST",
        json!({"newid": "101", "linked": "1"}),
        json!({}),
    );
    assert!(check_request(&schema, &unknown)[0].contains("`linked` is not in the real schema"));
    let mistyped = exchange(
        clone,
        "POST",
        json!({"newid": "101", "full": "true"}),
        json!({}),
    );
    assert!(check_request(&schema, &mistyped)[0].contains("is not a boolean"));
    let missing = exchange(clone, "POST", json!({"full": "1"}), json!({}));
    assert!(check_request(&schema, &missing)[0].contains("`newid` is missing"));
    let no_endpoint = exchange(
        "/nodes/{node}/qemu/{vmid}/migrate2",
        "POST",
        json!({}),
        json!({}),
    );
    assert!(!check_request(&schema, &no_endpoint).is_empty());
}

#[test]
fn the_checker_catches_a_drifting_sim() {
    let schema = schema();
    let status = "/nodes/{node}/tasks/{upid}/status";
    let good = json!({"data": {"upid": "U", "node": "pve1", "pid": 1, "pstart": 2, "starttime": 3,
        "type": "qmstart", "id": "100", "user": "a@pve!b", "status": "stopped", "exitstatus": "OK"}});
    assert!(check_answer(&schema, &exchange(status, "GET", json!({}), good.clone())).is_empty());
    let mut invented = good.clone();
    invented["data"]["progress"] = json!(50);
    assert!(!check_answer(&schema, &exchange(status, "GET", json!({}), invented)).is_empty());
    let mut wrong_enum = good.clone();
    wrong_enum["data"]["status"] = json!("done");
    assert!(!check_answer(&schema, &exchange(status, "GET", json!({}), wrong_enum)).is_empty());
    let mut missing = good;
    missing["data"]
        .as_object_mut()
        .expect("object")
        .remove("upid");
    assert!(!check_answer(&schema, &exchange(status, "GET", json!({}), missing)).is_empty());
    let nextid = exchange("/cluster/nextid", "GET", json!({}), json!({"data": "100"}));
    assert!(
        check_answer(&schema, &nextid).is_empty(),
        "numeric strings are real"
    );
}

/// A rustls config that accepts any server certificate: the sim's own test, where the
/// certificate is not what is being tested.
fn insecure_tls() -> rustls::ClientConfig {
    #[derive(Debug)]
    struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);
    impl rustls::client::danger::ServerCertVerifier for AcceptAny {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
        .with_no_client_auth()
}
