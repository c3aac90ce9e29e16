//! Bearer tokens the lab did not issue, judged by the JWT issuers of the serving API
//! server's `AuthenticationConfiguration` (`kube::jwt`) before the request is served: the
//! issuer's keys are fetched outside the cluster state's lock.

use axum::http::{HeaderMap, header};

use super::super::state::{ClusterState, User};

/// The request's bearer token, if it carries one.
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// Who a bearer token the lab did not issue names, by the JWT issuers of the serving API
/// server's AuthenticationConfiguration (fetched outside the state's lock).
pub(super) async fn jwt_user(state: &ClusterState, headers: &HeaderMap) -> Option<User> {
    let token = bearer(headers)?;
    let authenticator = {
        let inner = state.lock();
        if inner.tokens.contains_key(token) {
            return None;
        }
        inner.api_servers.serving()?
    };
    let user = authenticator
        .authenticate(token, state.now().as_second())
        .await?;
    Some(User {
        name: user.name,
        groups: user.groups,
    })
}
