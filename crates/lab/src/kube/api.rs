//! The HTTP face of a simulated API server: authentication (client certificates, bearer
//! tokens), discovery, and the REST verbs on every served resource (get, list, watch, create,
//! update, patch, delete, the status subresources, pod eviction, SelfSubjectReview), answering
//! the JSON (and `Table`) documents a real server answers.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::apply;
use super::patch::{self, PatchKind};
use super::protobuf;
use super::resources::{self, ResourceType, by_plural};
use super::selectors::{FieldSelector, LabelSelector};
use super::state::{ClusterState, User};
use super::status::{self, ApiError};
use super::store::{EventKind, Key, Store};
use super::subresources::{self, ScaleChange};
use super::table;
use crate::serve::ClientCertificate;

mod apply_handler;
mod authentication;

/// A server-side watch ends after this long unless the client asks otherwise (the real server
/// picks 30–60 minutes); clients re-watch from the last resourceVersion.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// The router serving one cluster.
pub(crate) fn router(state: Arc<ClusterState>) -> Router {
    Router::new().fallback(handle).with_state(state)
}

async fn handle(
    State(state): State<Arc<ClusterState>>,
    certificate: Option<Extension<ClientCertificate>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if is_partitioned(&state, &headers) {
        return std::future::pending().await;
    }
    let storage_unavailable = state.lock().storage_unavailable.clone();
    if let Some(reason) = storage_unavailable {
        return error_response(&ApiError::storage_unavailable(&reason));
    }
    let query = parse_query(uri.query().unwrap_or_default());
    let certificate = certificate.map(|Extension(c)| c).unwrap_or_default();
    let jwt_user = authentication::jwt_user(&state, &headers).await;
    let request = Request {
        jwt_user,
        state: &state,
        method: &method,
        path: uri.path(),
        query: &query,
        headers: &headers,
        body: &body,
    };
    match request.serve(&certificate) {
        Ok(response) => response,
        Err(err) => error_response(&err),
    }
}

/// Whether the request's bearer token is cut off by the partition fault.
fn is_partitioned(state: &ClusterState, headers: &HeaderMap) -> bool {
    authentication::bearer(headers).is_some_and(|t| state.lock().partitioned.contains(t))
}

fn json_response(code: StatusCode, value: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn error_response(err: &ApiError) -> Response {
    let code = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, &err.to_status())
}

/// Decodes `a=b&c=d%20e` (percent-escapes and `+`).
fn parse_query(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key), percent_decode(value))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => out.push(b' '),
            b'%' if index + 2 < bytes.len() => {
                match u8::from_str_radix(&text[index + 1..index + 3], 16) {
                    Ok(byte) => {
                        out.push(byte);
                        index += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A resource URL, parsed.
struct Target {
    resource: &'static ResourceType,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

struct Request<'a> {
    /// Who the bearer token names by the API server's JWT issuers, if anyone.
    jwt_user: Option<User>,
    state: &'a ClusterState,
    method: &'a Method,
    path: &'a str,
    query: &'a HashMap<String, String>,
    headers: &'a HeaderMap,
    body: &'a Bytes,
}

impl Request<'_> {
    fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }

    fn is_dry_run(&self) -> bool {
        self.param("dryRun").is_some_and(|v| v == "All")
    }

    fn authenticate(&self, certificate: &ClientCertificate) -> Option<User> {
        if let Some(value) = self.headers.get(header::AUTHORIZATION) {
            let token = value.to_str().ok()?.strip_prefix("Bearer ")?.trim();
            let issued = self.state.lock().tokens.get(token).cloned();
            return issued.or_else(|| self.jwt_user.clone());
        }
        let subject = certificate.0.as_ref()?;
        // kube-apiserver refuses an expired client certificate ("x509: certificate has
        // expired or is not yet valid"), by the lab's clock.
        if subject.not_after < self.state.now().as_second() {
            return None;
        }
        let mut groups = subject.organizations.clone();
        groups.push("system:authenticated".to_owned());
        Some(User {
            name: subject.common_name.clone(),
            groups,
        })
    }

    fn serve(&self, certificate: &ClientCertificate) -> Result<Response, ApiError> {
        // Readable without credentials, as kubeadm's `system:public-info-viewer` allows.
        match self.path {
            "/version" | "/version/" => return Ok(json_response(StatusCode::OK, &self.version())),
            "/healthz" | "/livez" | "/readyz" => return Ok((StatusCode::OK, "ok").into_response()),
            _ => {}
        }
        let user = self
            .authenticate(certificate)
            .ok_or_else(ApiError::unauthorized)?;
        let segments: Vec<&str> = self
            .path
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let ok = |value: Value| Ok(json_response(StatusCode::OK, &value));
        let (group, version, rest) = match segments.as_slice() {
            ["api"] => {
                let address = self.state.address.get().cloned().unwrap_or_default();
                return ok(resources::api_versions(&address));
            }
            ["apis"] => return ok(resources::api_group_list(&self.state.defined())),
            ["openapi", "v3"] => {
                let version = self.state.lock().git_version.clone();
                return ok(resources::openapi_root(&version, &self.state.defined()));
            }
            ["openapi", "v3", rest @ ..] => {
                let version = self.state.lock().git_version.clone();
                return resources::openapi_document(
                    &rest.join("/"),
                    &version,
                    &self.state.defined(),
                )
                .map_or_else(|| Err(ApiError::no_route()), ok);
            }
            ["apis", group] => {
                return resources::api_group_document(group, &self.state.defined())
                    .map_or_else(|| Err(ApiError::no_route()), ok);
            }
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return Err(ApiError::no_route()),
        };
        if rest.is_empty() {
            return resources::api_resource_list(group, version, &self.state.defined())
                .map_or_else(|| Err(ApiError::no_route()), ok);
        }
        let target = parse_target(group, version, rest)?;
        if !target.resource.is_served(&self.state.defined()) {
            return Err(ApiError::no_route());
        }
        self.dispatch(&user, &target)
    }

    fn version(&self) -> Value {
        resources::version_document(&self.state.lock().git_version.clone())
    }

    fn dispatch(&self, user: &User, target: &Target) -> Result<Response, ApiError> {
        let verb = match (self.method.as_str(), &target.name) {
            ("GET", None) if is_watch(self.param("watch")) => "watch",
            ("GET", None) => "list",
            ("GET", Some(_)) => "get",
            ("POST", None) => "create",
            ("POST", Some(_)) if target.subresource.as_deref() == Some("eviction") => "create",
            ("PUT", Some(_)) => "update",
            ("PATCH", Some(_)) => "patch",
            ("DELETE", Some(_)) => "delete",
            ("DELETE", None) => "deletecollection",
            (method, _) => return Err(ApiError::method_not_allowed(method)),
        };
        authorize(user, verb, target)?;
        if target.resource.plural == "selfsubjectreviews" {
            return Ok(json_response(
                StatusCode::CREATED,
                &json!({
                    "kind": "SelfSubjectReview",
                    "apiVersion": "authentication.k8s.io/v1",
                    "metadata": {"creationTimestamp": null},
                    "status": {"userInfo": {"username": user.name, "groups": user.groups}},
                }),
            ));
        }
        if target.subresource.as_deref() == Some("scale") {
            return self.scale(verb, target);
        }
        match verb {
            "watch" => self.watch(target),
            "list" => self.list(target),
            "get" => self.get(target),
            "create" if target.subresource.is_some() => self.evict(target),
            "create" => self.create(target),
            "update" => self.update(target),
            "patch" => self.patch(target),
            "delete" => self.delete(target),
            _ => self.delete_collection(target),
        }
    }

    fn body_json(&self) -> Result<Value, ApiError> {
        let content_type = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if protobuf::is_protobuf(content_type) {
            return protobuf::decode(self.body);
        }
        serde_json::from_slice(self.body)
            .map_err(|err| ApiError::bad_request(format!("invalid JSON body: {err}")))
    }

    fn wants_table(&self) -> bool {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|accept| accept.contains("as=Table"))
    }

    fn selected(&self, store: &Store, target: &Target) -> Result<Vec<Value>, ApiError> {
        let labels = LabelSelector::parse(self.param("labelSelector").unwrap_or_default())?;
        let fields = FieldSelector::parse(self.param("fieldSelector").unwrap_or_default())?;
        Ok(store
            .list(target.resource.plural, target.namespace.as_deref())
            .into_iter()
            .filter(|o| labels.matches(&o["metadata"]["labels"]) && fields.matches(o))
            .cloned()
            .collect())
    }

    fn list(&self, target: &Target) -> Result<Response, ApiError> {
        let inner = self.state.lock();
        let items = self.selected(&inner.store, target)?;
        let revision = inner.store.revision();
        drop(inner);
        if self.wants_table() {
            let include = self.param("includeObject").unwrap_or("Metadata");
            let table = table::table(target.resource, &items, revision, include, self.state.now());
            return Ok(json_response(StatusCode::OK, &table));
        }
        Ok(json_response(
            StatusCode::OK,
            &json!({
                "kind": format!("{}List", target.resource.kind),
                "apiVersion": target.resource.api_version(),
                "metadata": {"resourceVersion": revision.to_string()},
                "items": items,
            }),
        ))
    }

    fn key(target: &Target) -> Key {
        Key::new(
            target.resource,
            target.namespace.as_deref(),
            target.name.as_deref().unwrap_or_default(),
        )
    }

    fn get(&self, target: &Target) -> Result<Response, ApiError> {
        let object = self.current(target)?;
        if self.wants_table() {
            let include = self.param("includeObject").unwrap_or("Metadata");
            let revision = self.state.lock().store.revision();
            let table = table::table(
                target.resource,
                &[object],
                revision,
                include,
                self.state.now(),
            );
            return Ok(json_response(StatusCode::OK, &table));
        }
        Ok(json_response(StatusCode::OK, &object))
    }

    fn current(&self, target: &Target) -> Result<Value, ApiError> {
        let name = target.name.as_deref().unwrap_or_default();
        self.state
            .lock()
            .store
            .get(&Self::key(target))
            .cloned()
            .ok_or_else(|| ApiError::not_found(target.resource, name))
    }

    fn create(&self, target: &Target) -> Result<Response, ApiError> {
        let mut object = self.body_json()?;
        check_kind(target.resource, &object)?;
        if let (Some(ns), Some(body_ns)) =
            (&target.namespace, object["metadata"]["namespace"].as_str())
            && ns != body_ns
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        if target.resource.namespaced && target.namespace.is_none() {
            return Err(ApiError::no_route());
        }
        if target.resource.plural == "secrets" {
            fold_string_data(&mut object);
        }
        let dry_run = self.is_dry_run();
        let created = self.state.change(|store, now| {
            if let Some(ns) = &target.namespace {
                let namespaces = by_plural("namespaces").expect("namespaces are served");
                if store.get(&Key::new(namespaces, None, ns)).is_none() {
                    return Err(ApiError::not_found(namespaces, ns));
                }
            }
            store.create(
                target.resource,
                target.namespace.as_deref(),
                object,
                now,
                dry_run,
            )
        })?;
        Ok(json_response(StatusCode::CREATED, &created))
    }

    fn update(&self, target: &Target) -> Result<Response, ApiError> {
        let mut object = self.body_json()?;
        check_kind(target.resource, &object)?;
        let name = target.name.as_deref().unwrap_or_default();
        if let Some(body_name) = object["metadata"]["name"].as_str()
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        if target.resource.plural == "secrets" {
            fold_string_data(&mut object);
        }
        let dry_run = self.is_dry_run();
        let key = Self::key(target);
        let status_only = target.subresource.as_deref() == Some("status");
        let updated = self.state.change(|store, _| {
            let current = store
                .get(&key)
                .cloned()
                .ok_or_else(|| ApiError::not_found(target.resource, name))?;
            let object = split_status(target.resource, &current, object, status_only);
            store.update(target.resource, &key, object, dry_run)
        })?;
        Ok(json_response(StatusCode::OK, &updated))
    }

    fn patch(&self, target: &Target) -> Result<Response, ApiError> {
        let content_type = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if apply::is_apply(content_type) {
            return self.apply(target);
        }
        if self.param("force").is_some() {
            return Err(ApiError::invalid_patch_options(
                "force",
                "FieldValueForbidden",
                "Forbidden: may not be specified for non-apply patch",
            ));
        }
        let kind = PatchKind::from_content_type(content_type)?;
        let body = self.body_json()?;
        let dry_run = self.is_dry_run();
        let key = Self::key(target);
        let name = target.name.as_deref().unwrap_or_default();
        let status_only = target.subresource.as_deref() == Some("status");
        let patched = self.state.change(|store, _| {
            let current = store
                .get(&key)
                .cloned()
                .ok_or_else(|| ApiError::not_found(target.resource, name))?;
            let mut object = current.clone();
            patch::apply(kind, &mut object, &body)?;
            if target.resource.plural == "secrets" {
                fold_string_data(&mut object);
            }
            let object = split_status(target.resource, &current, object, status_only);
            store.update(target.resource, &key, object, dry_run)
        })?;
        Ok(json_response(StatusCode::OK, &patched))
    }

    fn delete(&self, target: &Target) -> Result<Response, ApiError> {
        let dry_run = self.is_dry_run();
        let key = Self::key(target);
        let deleted = self.state.change(|store, _| {
            let deleted = store.delete(target.resource, &key, dry_run)?;
            if target.resource.plural == "namespaces" && !dry_run {
                delete_namespace_contents(store, &key.name);
            }
            Ok::<_, ApiError>(deleted)
        })?;
        Ok(json_response(StatusCode::OK, &deleted))
    }

    fn delete_collection(&self, target: &Target) -> Result<Response, ApiError> {
        let dry_run = self.is_dry_run();
        let items = self.state.change(|store, _| {
            let items = self.selected(store, target)?;
            for item in &items {
                let key = Key::new(
                    target.resource,
                    item["metadata"]["namespace"].as_str(),
                    item["metadata"]["name"].as_str().unwrap_or_default(),
                );
                store.delete(target.resource, &key, dry_run)?;
            }
            Ok::<_, ApiError>(items)
        })?;
        Ok(json_response(
            StatusCode::OK,
            &json!({
                "kind": format!("{}List", target.resource.kind),
                "apiVersion": target.resource.api_version(),
                "metadata": {},
                "items": items,
            }),
        ))
    }

    /// `POST pods/<name>/eviction`: deletes the pod unless a PodDisruptionBudget forbids it.
    fn evict(&self, target: &Target) -> Result<Response, ApiError> {
        if target.resource.plural != "pods" || target.subresource.as_deref() != Some("eviction") {
            return Err(ApiError::method_not_allowed("POST"));
        }
        let dry_run = self.is_dry_run() || self.body_is_dry_run();
        let key = Self::key(target);
        subresources::evict_audited(self.state, target.resource, &key, dry_run)?;
        Ok(json_response(StatusCode::CREATED, &status::success()))
    }

    /// `deployments/<name>/scale` and `replicasets/<name>/scale`.
    fn scale(&self, verb: &str, target: &Target) -> Result<Response, ApiError> {
        let key = Self::key(target);
        if verb == "get" {
            return Ok(json_response(
                StatusCode::OK,
                &subresources::scale_of(&self.current(target)?),
            ));
        }
        let body = self.body_json()?;
        let change = match verb {
            "patch" => {
                let content_type = self
                    .headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                ScaleChange::Patch(PatchKind::from_content_type(content_type)?, &body)
            }
            "update" => ScaleChange::Replace(&body),
            _ => return Err(ApiError::method_not_allowed(self.method.as_str())),
        };
        let dry_run = self.is_dry_run();
        let scale = self.state.change(|store, _| {
            subresources::set_scale(store, target.resource, &key, &change, dry_run)
        })?;
        Ok(json_response(StatusCode::OK, &scale))
    }

    /// The Eviction body's `deleteOptions.dryRun` (kube-rs puts it there as well).
    fn body_is_dry_run(&self) -> bool {
        let Ok(body) = serde_json::from_slice::<Value>(self.body) else {
            return false;
        };
        ["deleteOptions", "delete_options"].iter().any(|field| {
            body[field]["dryRun"]
                .as_array()
                .is_some_and(|v| v.iter().any(|m| m == "All"))
        })
    }

    fn watch(&self, target: &Target) -> Result<Response, ApiError> {
        let labels = LabelSelector::parse(self.param("labelSelector").unwrap_or_default())?;
        let fields = FieldSelector::parse(self.param("fieldSelector").unwrap_or_default())?;
        let timeout = self
            .param("timeoutSeconds")
            .and_then(|t| t.parse().ok())
            .map_or(DEFAULT_WATCH_TIMEOUT, Duration::from_secs);
        let since: u64 = self
            .param("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let inner = self.state.lock();
        let (initial, from) = if since == 0 {
            let current = self.selected(&inner.store, target)?;
            let lines: Vec<String> = current
                .iter()
                .map(|o| event_line(EventKind::Added, o))
                .collect();
            (lines, inner.store.revision())
        } else {
            (Vec::new(), since)
        };
        let (past, mut receiver) = inner.store.watch_from(from)?;
        drop(inner);
        let plural = target.resource.plural;
        let namespace = target.namespace.clone();
        // What this watch reports of a change, if anything: an object that starts or stops
        // matching the selectors is ADDED or DELETED for the watcher.
        let view = move |event: &super::store::Event| -> Option<String> {
            let in_scope = event.key.resource == plural
                && namespace
                    .as_ref()
                    .is_none_or(|ns| *ns == event.key.namespace);
            if !in_scope {
                return None;
            }
            let selects = |o: &Value| labels.matches(&o["metadata"]["labels"]) && fields.matches(o);
            let now = selects(&event.object);
            let before = event.previous.as_ref().is_some_and(selects);
            let kind = match (event.kind, before, now) {
                (EventKind::Modified, false, true) => EventKind::Added,
                (EventKind::Modified, true, false) => EventKind::Deleted,
                (kind, _, true) => kind,
                _ => return None,
            };
            Some(event_line(kind, &event.object))
        };
        let mut lines = initial;
        lines.extend(past.iter().filter_map(|e| view(e)));
        let (sender, body) = tokio::sync::mpsc::channel::<String>(64);
        tokio::spawn(async move {
            for line in lines {
                if sender.send(line).await.is_err() {
                    return;
                }
            }
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    () = &mut deadline => return,
                    () = sender.closed() => return,
                    event = receiver.recv() => match event {
                        Ok(event) => {
                            if let Some(line) = view(&event)
                                && sender.send(line).await.is_err()
                            {
                                return;
                            }
                        }
                        // Lagged or closed: end the watch; clients re-list and re-watch.
                        Err(_) => return,
                    },
                }
            }
        });
        let stream = futures_util::stream::unfold(body, |mut body| async move {
            body.recv()
                .await
                .map(|line| (Ok::<_, Infallible>(Bytes::from(line)), body))
        });
        Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from_stream(stream),
        )
            .into_response())
    }
}

fn is_watch(value: Option<&str>) -> bool {
    matches!(value, Some("true" | "1"))
}

fn event_line(kind: EventKind, object: &Value) -> String {
    let mut line = json!({"type": kind.as_str(), "object": object}).to_string();
    line.push('\n');
    line
}

fn parse_target(group: &str, version: &str, rest: &[&str]) -> Result<Target, ApiError> {
    let owned = |s: Option<&&str>| s.map(|s| (*s).to_owned());
    let (namespace, plural, name, subresource) = match rest {
        ["namespaces", ns, plural, tail @ ..] if !matches!(*plural, "status" | "finalize") => (
            Some((*ns).to_owned()),
            *plural,
            owned(tail.first()),
            owned(tail.get(1)),
        ),
        [plural, tail @ ..] => (None, *plural, owned(tail.first()), owned(tail.get(1))),
        [] => return Err(ApiError::no_route()),
    };
    if rest.len() > 5 {
        return Err(ApiError::no_route());
    }
    let resource = resources::find(group, version, plural).ok_or_else(ApiError::no_route)?;
    if namespace.is_some() && !resource.namespaced
        || namespace.is_none() && resource.namespaced && name.is_some()
    {
        return Err(ApiError::no_route());
    }
    if let Some(sub) = &subresource {
        let known = sub == "status"
            || sub == "eviction" && resource.plural == "pods"
            || sub == "scale" && matches!(resource.plural, "deployments" | "replicasets");
        if !known {
            return Err(ApiError::no_route());
        }
    }
    Ok(Target {
        resource,
        namespace,
        name,
        subresource,
    })
}

fn authorize(user: &User, verb: &str, target: &Target) -> Result<(), ApiError> {
    let read_only = matches!(verb, "get" | "list" | "watch");
    let allowed = user.is_admin()
        || target.resource.plural == "selfsubjectreviews"
        || read_only && target.resource.plural != "secrets";
    if allowed {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            &user.name,
            verb,
            target.resource,
            target.namespace.as_deref(),
            target.name.as_deref(),
        ))
    }
}

fn check_kind(resource: &ResourceType, object: &Value) -> Result<(), ApiError> {
    match object["kind"].as_str() {
        Some(kind) if kind != resource.kind => Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({})",
            object["apiVersion"].as_str().unwrap_or_default(),
            resource.api_version()
        ))),
        _ => Ok(()),
    }
}

/// A Secret's `stringData` is write-only: merged into `data` (base64) on write.
fn fold_string_data(secret: &mut Value) {
    use base64::Engine as _;
    let Some(strings) = secret.as_object_mut().and_then(|o| o.remove("stringData")) else {
        return;
    };
    for (key, value) in strings.as_object().into_iter().flatten() {
        let text = value.as_str().unwrap_or_default();
        secret["data"][key] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

/// The main resource ignores status changes; the status subresource changes only status.
fn split_status(
    resource: &ResourceType,
    current: &Value,
    mut object: Value,
    status_only: bool,
) -> Value {
    let has_status = matches!(
        resource.plural,
        "pods"
            | "nodes"
            | "deployments"
            | "replicasets"
            | "daemonsets"
            | "poddisruptionbudgets"
            | "namespaces"
    );
    if status_only {
        let mut updated = current.clone();
        updated["status"] = object["status"].take();
        updated["metadata"]["resourceVersion"] = object["metadata"]["resourceVersion"].take();
        return updated;
    }
    if has_status {
        match current.get("status") {
            Some(status) => object["status"] = status.clone(),
            None => {
                if let Some(map) = object.as_object_mut() {
                    map.remove("status");
                }
            }
        }
    }
    object
}

fn delete_namespace_contents(store: &mut Store, namespace: &str) {
    for resource in resources::RESOURCES.iter().filter(|r| r.namespaced) {
        let names: Vec<String> = store
            .list(resource.plural, Some(namespace))
            .iter()
            .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
            .collect();
        for name in names {
            let key = Key::new(resource, Some(namespace), &name);
            if let Err(err) = store.delete(resource, &key, false) {
                tracing::debug!(?err, "namespace content already gone");
            }
        }
    }
}
