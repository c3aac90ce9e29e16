//! Failures of the simulated API server, answered as `Status` objects with the reasons, codes
//! and message shapes a real API server uses (clients such as kubectl match on them).

use serde_json::{Value, json};

use super::resources::ResourceType;

/// A request the API server refuses: becomes a `Status` object with `code`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `reason` (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// Human message.
    pub message: String,
    /// `details`, when the real server fills them.
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String) -> Self {
        ApiError {
            code,
            reason,
            message,
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    fn name_details(resource: &ResourceType, name: &str) -> Value {
        let mut details = json!({"name": name, "kind": resource.plural});
        if !resource.group.is_empty() {
            details["group"] = json!(resource.group);
        }
        details
    }

    /// 503 while the cluster's storage (etcd, or kine's SQL datastore) does not answer.
    pub fn storage_unavailable(reason: &str) -> Self {
        ApiError::new(503, "ServiceUnavailable", reason.to_owned())
    }

    /// 404 for a named object.
    pub fn not_found(resource: &ResourceType, name: &str) -> Self {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", resource.qualified()),
        )
        .with_details(Self::name_details(resource, name))
    }

    /// 404 for a path nothing is served at.
    pub fn no_route() -> Self {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource".to_owned(),
        )
    }

    /// 409 on create of an existing name.
    pub fn already_exists(resource: &ResourceType, name: &str) -> Self {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", resource.qualified()),
        )
        .with_details(Self::name_details(resource, name))
    }

    /// 409 on a stale `resourceVersion`.
    pub fn conflict(resource: &ResourceType, name: &str) -> Self {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                resource.qualified()
            ),
        )
        .with_details(Self::name_details(resource, name))
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message.into())
    }

    /// 422 for an object that fails validation.
    pub fn invalid(resource: &ResourceType, name: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        ApiError::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {message}", resource.kind),
        )
        .with_details(Self::name_details(resource, name))
    }

    /// 422 for `PatchOptions` the real server refuses (an apply without `fieldManager`, `force`
    /// on another patch type); `field` and `message` form the cause, as the real server's
    /// validation does.
    pub fn invalid_patch_options(field: &str, reason: &'static str, message: &str) -> Self {
        ApiError::new(
            422,
            "Invalid",
            format!("PatchOptions.meta.k8s.io \"\" is invalid: {field}: {message}"),
        )
        .with_details(json!({
            "group": "meta.k8s.io",
            "kind": "PatchOptions",
            "causes": [{"reason": reason, "message": message, "field": field}],
        }))
    }

    /// 409 for a server-side apply that would take fields other managers own; `conflicts`
    /// pairs each manager with the path of a field it owns (`.spec.replicas`). The message is
    /// the real server's (structured-merge-diff's), word for word.
    pub fn apply_conflict(conflicts: &[(String, String)]) -> Self {
        let message = match conflicts {
            [(manager, path)] => {
                format!("Apply failed with 1 conflict: conflict with \"{manager}\": {path}")
            }
            _ => {
                let mut managers: Vec<&str> = conflicts.iter().map(|(m, _)| m.as_str()).collect();
                managers.sort_unstable();
                managers.dedup();
                let mut lines = Vec::new();
                for manager in managers {
                    lines.push(format!("conflicts with \"{manager}\":"));
                    for (_, path) in conflicts.iter().filter(|(m, _)| m == manager) {
                        lines.push(format!("- {path}"));
                    }
                }
                format!(
                    "Apply failed with {} conflicts: {}",
                    conflicts.len(),
                    lines.join("\n")
                )
            }
        };
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|(manager, path)| {
                json!({
                    "reason": "FieldManagerConflict",
                    "message": format!("conflict with \"{manager}\""),
                    "field": path,
                })
            })
            .collect();
        ApiError::new(409, "Conflict", message).with_details(json!({"causes": causes}))
    }

    /// 401: no or unknown credentials.
    pub fn unauthorized() -> Self {
        ApiError::new(401, "Unauthorized", "Unauthorized".to_owned())
    }

    /// 403 with the RBAC message shape.
    pub fn forbidden(
        user: &str,
        verb: &str,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Self {
        let subject = match name {
            Some(name) => format!("{} \"{name}\"", resource.qualified()),
            None => resource.qualified(),
        };
        let scope = match namespace {
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".to_owned(),
        };
        ApiError::new(
            403,
            "Forbidden",
            format!(
                "{subject} is forbidden: User \"{user}\" cannot {verb} resource \"{}\" in API group \"{}\" {scope}",
                resource.plural, resource.group
            ),
        )
    }

    /// 405.
    pub fn method_not_allowed(method: &str) -> Self {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// 415 for a patch type this server does not implement.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {content_type})"
            ),
        )
    }

    /// 429: the eviction would violate a PodDisruptionBudget. The message is the real server's,
    /// word for word: kubectl prints it and users search for it.
    pub fn disruption_budget(budget: &str, desired: i64, healthy: i64) -> Self {
        ApiError::new(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.".to_owned(),
        )
        .with_details(json!({
            "causes": [{
                "reason": "DisruptionBudget",
                "message": format!(
                    "The disruption budget {budget} needs {desired} healthy pods and has {healthy} currently"
                ),
            }]
        }))
    }

    /// 500 for a pod several budgets select (the real server refuses those evictions).
    pub fn several_budgets() -> Self {
        ApiError::new(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".to_owned(),
        )
    }

    /// 410 for a watch from a resourceVersion older than the kept history.
    pub fn expired(revision: u64) -> Self {
        ApiError::new(
            410,
            "Expired",
            format!("too old resource version: {revision}"),
        )
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

/// A `Status` reporting success (what eviction and delete-by-collection answer).
pub(crate) fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}
