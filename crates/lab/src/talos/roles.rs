//! Talos's RBAC as the lab's nodes apply it: the roles are the Organizations of the client
//! certificate, read at the TLS handshake and carried in every request's extensions.

use std::sync::Arc;

use tonic::{Request, Status};

/// The role a client certificate's Organization must carry.
pub const ADMIN_ROLE: &str = "os:admin";

/// The roles (Organizations) of a connection's client certificate.
#[derive(Debug, Clone, Default)]
pub struct PeerRoles(pub(super) Arc<[String]>);

/// Talos's RBAC: every call here needs `os:admin`.
pub(super) fn authorize<T>(request: &Request<T>) -> Result<(), Status> {
    let allowed = request
        .extensions()
        .get::<PeerRoles>()
        .is_some_and(|roles| roles.0.iter().any(|role| role == ADMIN_ROLE));
    if allowed {
        Ok(())
    } else {
        Err(Status::permission_denied("not authorized"))
    }
}
