//! The simulated API's HTTP protocol, as `pveproxy` speaks it: `/api2/json` paths, API-token
//! authentication (401 after a delay), parameters from the query string and from form-encoded
//! or JSON bodies, the `{"data": ...}` envelope, and errors whose first line is the HTTP reason
//! phrase with `{"data":null,"message":...}` bodies.
//!
//! Faults armed on the simulator (latency, failing calls, offline nodes) apply here, before a
//! handler runs. Every served call is counted per endpoint and, when recording, logged.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::endpoints::{Endpoint, Route};
use super::handlers::dispatch;
use super::params::validate;
use super::reply::Reply;
use super::state::{ApiFail, Exchange, Shared};
use super::upload::{UPLOAD_MAX_BYTES, upload_params};

/// Bodies larger than this get 501, as on a real host (`$limit_max_post`).
const MAX_POST: usize = 512 * 1024;
/// Recorded exchanges kept (the oldest are dropped past it).
const MAX_EXCHANGES: usize = 20_000;

/// What the router serves.
pub(super) struct App {
    pub shared: Arc<Shared>,
    pub endpoints: Vec<Endpoint>,
}

/// The axum router of the simulated API.
pub(super) fn router(app: Arc<App>) -> axum::Router {
    // Uploads are bounded by the upload handler, which answers as a host would.
    axum::Router::new()
        .fallback(serve)
        .layer(axum::extract::DefaultBodyLimit::max(
            UPLOAD_MAX_BYTES + MAX_POST,
        ))
        .with_state(app)
}

async fn serve(
    State(app): State<Arc<App>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let latency = app.shared.lock().faults.latency;
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let Some(api_path) = uri.path().strip_prefix("/api2/json") else {
        return error_response(&ApiFail {
            status: 501,
            message: "no such uri".into(),
            errors: BTreeMap::new(),
        });
    };
    let api_path = if api_path.is_empty() { "/" } else { api_path };
    let Some(user) = authenticate(&app.shared, &headers) else {
        // A real host slows down every failed login by 3 s.
        tokio::time::sleep(app.shared.durations.auth_failure_delay).await;
        app.shared.lock().count(&format!("{method} (401)"));
        return unauthorized(headers.get(header::AUTHORIZATION).is_some());
    };
    let segments: Vec<String> = api_path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode_segment)
        .collect();
    let mut path_matched = false;
    let mut found = None;
    for endpoint in &app.endpoints {
        if let Some(captures) = match_template(endpoint.template, &segments) {
            path_matched = true;
            if endpoint.method == method.as_str() {
                found = Some((endpoint, captures));
                break;
            }
        }
    }
    let Some((endpoint, captures)) = found else {
        let key = if path_matched {
            "(method not allowed)"
        } else {
            "(unknown)"
        };
        app.shared.lock().count(&format!("{method} {key}"));
        return error_response(&ApiFail {
            status: 501,
            message: format!("Method '{method} {api_path}' not implemented"),
            errors: BTreeMap::new(),
        });
    };
    app.shared
        .lock()
        .count(&format!("{} {}", endpoint.method, endpoint.template));
    let collected = if endpoint.route == Route::StorageUpload && !body.is_empty() {
        upload_params(&app.shared, uri.query(), &headers, &body)
    } else {
        collect_params(&method, uri.query(), &headers, &body)
    };
    let raw = match collected {
        Ok(raw) => raw,
        Err(fail) => return error_response(&fail),
    };
    app.shared
        .lock()
        .remember_sent(endpoint.method, endpoint.template, &raw);
    let outcome = answer(&app, endpoint, &captures, &raw, &user, api_path).await;
    if let Some(tmp) = raw.get("tmpfilename").and_then(Value::as_str) {
        // pveproxy removes the temporary file once the call is answered.
        app.shared.lock().store.uploads.remove(tmp);
    }
    let (status, body_json) = match &outcome {
        Ok(reply) => (200, envelope(reply)),
        Err(fail) => (fail.status, error_body(fail)),
    };
    if app.shared.record {
        let mut state = app.shared.lock();
        if state.exchanges.len() >= MAX_EXCHANGES {
            state.exchanges.remove(0);
        }
        state.exchanges.push(Exchange {
            method: endpoint.method.to_owned(),
            template: endpoint.template.to_owned(),
            params: raw.clone(),
            status,
            body: body_json.clone(),
        });
    }
    match outcome {
        Ok(_) => json_response(StatusCode::OK, &body_json),
        Err(fail) => error_response(&fail),
    }
}

async fn answer(
    app: &App,
    endpoint: &Endpoint,
    captures: &BTreeMap<String, String>,
    raw: &BTreeMap<String, Value>,
    user: &str,
    api_path: &str,
) -> Result<Reply, ApiFail> {
    if let Some(node) = captures.get("node") {
        // pveproxy forwards /nodes/{node}/... to that node before the handler runs.
        let state = app.shared.lock();
        match state.nodes.get(node) {
            None => {
                return Err(ApiFail::die(format!(
                    "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
                )));
            }
            Some(n) if !n.online => {
                return Err(ApiFail {
                    status: 595,
                    message: "No route to host".into(),
                    errors: BTreeMap::new(),
                });
            }
            Some(_) => {}
        }
    }
    let mut merged = raw.clone();
    for (key, value) in captures {
        match merged.get(key) {
            Some(given)
                if given.as_str() != Some(value.as_str())
                    && !matches!(given, Value::Number(n) if n.to_string() == *value) =>
            {
                return Err(ApiFail {
                    status: 400,
                    message:
                        "duplicate parameter (already defined in URI) with conflicting values!"
                            .into(),
                    errors: BTreeMap::new(),
                });
            }
            _ => {
                merged.insert(key.clone(), Value::String(value.clone()));
            }
        }
    }
    let params = validate(&endpoint.params, &merged)?;
    let injected = app.shared.lock().faults.take_call_failure(api_path);
    if let Some(fault) = injected {
        return Err(ApiFail {
            status: fault.status,
            message: fault.message,
            errors: BTreeMap::new(),
        });
    }
    dispatch(&app.shared, endpoint.route, params, user).await
}

/// The token id of a valid `Authorization: PVEAPIToken=USER@REALM!TOKENID=SECRET`.
fn authenticate(shared: &Shared, headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let start = value.find("PVEAPIToken")?;
    if start > 0 && !value[..start].ends_with(char::is_whitespace) {
        return None;
    }
    let rest = &value[start + "PVEAPIToken".len()..];
    let rest = rest.strip_prefix(['=', ' '])?;
    let token = rest.split(';').next()?.trim();
    // The secret follows the last `=`.
    let (id, secret) = token.rsplit_once('=')?;
    (id == shared.token_id && secret == shared.token_secret).then(|| id.to_owned())
}

fn match_template(template: &str, segments: &[String]) -> Option<BTreeMap<String, String>> {
    let parts: Vec<&str> = template.split('/').filter(|s| !s.is_empty()).collect();
    if parts.len() != segments.len() {
        return None;
    }
    let mut captures = BTreeMap::new();
    for (part, segment) in parts.iter().zip(segments) {
        match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            Some(name) => {
                captures.insert(name.to_owned(), segment.clone());
            }
            None if part == segment => {}
            None => return None,
        }
    }
    Some(captures)
}

fn decode_segment(segment: &str) -> String {
    percent_decode(segment.as_bytes())
}

fn percent_decode(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' && index + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[index + 1..index + 3]).ok();
            if let Some(byte) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(byte);
                index += 3;
                continue;
            }
        }
        out.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Query-string and body parameters, merged as `extract_params` does: a repeated key becomes
/// an array, query values override body values.
fn collect_params(
    method: &Method,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<BTreeMap<String, Value>, ApiFail> {
    let fail = |status: u16, message: String| ApiFail {
        status,
        message,
        errors: BTreeMap::new(),
    };
    let mut params = BTreeMap::new();
    if !body.is_empty() {
        if *method != Method::POST && *method != Method::PUT {
            return Err(fail(
                501,
                format!("Unexpected content for method '{method}'"),
            ));
        }
        if body.len() > MAX_POST {
            return Err(fail(501, "for data too large".into()));
        }
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/x-www-form-urlencoded");
        if content_type.starts_with("application/json") {
            let value: Value = serde_json::from_slice(body)
                .map_err(|err| fail(400, format!("unable to parse JSON body - {err}")))?;
            let Value::Object(map) = value else {
                return Err(fail(400, "JSON body must be an object".into()));
            };
            params.extend(map);
        } else if content_type.starts_with("application/x-www-form-urlencoded") {
            merge_pairs(&mut params, form_urlencoded::parse(body));
        } else {
            return Err(fail(
                506,
                format!("unsupported content type '{content_type}'"),
            ));
        }
    }
    if let Some(query) = query {
        let mut from_query = BTreeMap::new();
        merge_pairs(&mut from_query, form_urlencoded::parse(query.as_bytes()));
        params.extend(from_query);
    }
    Ok(params)
}

fn merge_pairs<'a>(
    params: &mut BTreeMap<String, Value>,
    pairs: impl Iterator<Item = (std::borrow::Cow<'a, str>, std::borrow::Cow<'a, str>)>,
) {
    for (key, value) in pairs {
        let value = Value::String(value.into_owned());
        match params.remove(key.as_ref()) {
            None => {
                params.insert(key.into_owned(), value);
            }
            Some(Value::Array(mut items)) => {
                items.push(value);
                params.insert(key.into_owned(), Value::Array(items));
            }
            Some(previous) => {
                params.insert(key.into_owned(), Value::Array(vec![previous, value]));
            }
        }
    }
}

fn envelope(reply: &Reply) -> Value {
    let mut map = Map::new();
    map.insert("data".into(), reply.data.clone());
    if let Some(total) = reply.total {
        map.insert("total".into(), Value::from(total));
    }
    Value::Object(map)
}

fn error_body(fail: &ApiFail) -> Value {
    let mut body = json!({"data": null, "message": format!("{}\n", fail.message)});
    if !fail.errors.is_empty() {
        let errors: Map<String, Value> = fail
            .errors
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(format!("{v}\n"))))
            .collect();
        body["errors"] = Value::Object(errors);
    }
    body
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json;charset=UTF-8"),
    );
    response.headers_mut().insert(
        header::SERVER,
        HeaderValue::from_static("pve-api-daemon/3.0"),
    );
    response
}

/// An error answer: the message's first line is the reason phrase; the connection closes.
fn error_response(fail: &ApiFail) -> Response {
    let status = StatusCode::from_u16(fail.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(status, &error_body(fail));
    set_reason(&mut response, &fail.message);
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// 401 with an empty body, as the json formatter of a real host answers.
fn unauthorized(tried: bool) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    set_reason(
        &mut response,
        if tried {
            "authentication failure"
        } else {
            "No ticket"
        },
    );
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

fn set_reason(response: &mut Response, message: &str) {
    let line: String = message
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control())
        .collect();
    if let Ok(reason) = hyper::ext::ReasonPhrase::try_from(line.into_bytes()) {
        response.extensions_mut().insert(reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_capture_path_parameters() {
        let segments: Vec<String> = ["nodes", "pve1", "qemu", "101", "clone"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let captures =
            match_template("/nodes/{node}/qemu/{vmid}/clone", &segments).expect("matches");
        assert_eq!(captures["node"], "pve1");
        assert_eq!(captures["vmid"], "101");
        assert!(match_template("/nodes/{node}/qemu/{vmid}", &segments).is_none());
    }

    #[test]
    fn repeated_form_keys_become_arrays_and_the_query_wins() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        let params = collect_params(
            &Method::POST,
            Some("x=query"),
            &headers,
            &Bytes::from_static(b"command=ls&command=-l&x=body"),
        )
        .expect("valid");
        assert_eq!(params["command"], json!(["ls", "-l"]));
        assert_eq!(params["x"], json!("query"));
        let refused = collect_params(&Method::GET, None, &headers, &Bytes::from_static(b"a=1"))
            .expect_err("body on GET");
        assert_eq!(refused.status, 501);
    }

    #[test]
    fn upids_in_paths_are_percent_decoded() {
        assert_eq!(
            decode_segment("UPID%3Apve1%3A0001%3Acapstan%40pve%21lab%3A"),
            "UPID:pve1:0001:capstan@pve!lab:"
        );
        assert_eq!(decode_segment("a%2"), "a%2");
    }
}
