//! The server-side apply verb of the simulated API server: option checks as the real server
//! makes them, then [`apply::Apply`] on the stored object (or on nothing, which creates it).

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use super::super::apply;
use super::super::resources::by_plural;
use super::super::status::ApiError;
use super::super::store::Key;
use super::{Request, Target, check_kind, fold_string_data, json_response, split_status};

impl Request<'_> {
    /// `PATCH` with `application/apply-patch+yaml`: 201 when it created the object, 200 when
    /// it changed (or kept) it.
    pub(super) fn apply(&self, target: &Target) -> Result<Response, ApiError> {
        let manager = self.param("fieldManager").unwrap_or_default();
        if manager.is_empty() {
            return Err(ApiError::invalid_patch_options(
                "fieldManager",
                "FieldValueRequired",
                "Required value: is required for apply patch",
            ));
        }
        let force = match self.param("force") {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "invalid value for force: {other:?}"
                )));
            }
        };
        let mut applied = apply::parse_body(self.body)?;
        check_kind(target.resource, &applied)?;
        if applied["kind"].is_null() || applied["apiVersion"].is_null() {
            return Err(ApiError::bad_request(
                "an apply patch must set apiVersion and kind",
            ));
        }
        let name = target.name.as_deref().unwrap_or_default();
        if applied["metadata"]["name"].as_str() != Some(name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                applied["metadata"]["name"].as_str().unwrap_or_default()
            )));
        }
        if target.resource.plural == "secrets" {
            fold_string_data(&mut applied);
        }
        let dry_run = self.is_dry_run();
        let key = Self::key(target);
        let status_only = target.subresource.as_deref() == Some("status");
        let api_version = target.resource.api_version();
        let (code, object) = self.state.change(|store, now| {
            let apply = apply::Apply {
                manager,
                force,
                api_version: &api_version,
                now,
            };
            match store.get(&key).cloned() {
                Some(current) => {
                    let merged = apply.merge(Some(&current), &applied)?;
                    let object = split_status(target.resource, &current, merged, status_only);
                    let updated = store.update(target.resource, &key, object, dry_run)?;
                    Ok((StatusCode::OK, updated))
                }
                None => {
                    if status_only {
                        return Err(ApiError::not_found(target.resource, name));
                    }
                    if let Some(ns) = &target.namespace {
                        let namespaces = by_plural("namespaces").expect("namespaces are served");
                        if store.get(&Key::new(namespaces, None, ns)).is_none() {
                            return Err(ApiError::not_found(namespaces, ns));
                        }
                    }
                    let mut merged = apply.merge(None, &applied)?;
                    merged["apiVersion"] = json!(api_version);
                    merged["kind"] = json!(target.resource.kind);
                    merged["metadata"]["name"] = json!(name);
                    let created = store.create(
                        target.resource,
                        target.namespace.as_deref(),
                        merged,
                        now,
                        dry_run,
                    )?;
                    Ok((StatusCode::CREATED, created))
                }
            }
        })?;
        Ok(json_response(code, &object))
    }
}
