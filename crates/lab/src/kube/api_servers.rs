//! The API servers of one simulated cluster, one per control plane, each with the JWT
//! issuers of the `AuthenticationConfiguration` it started with (`jwt`): the node software
//! says when one starts (with the file its flag names, read from the node) or stops
//! (`SimCluster::api_server`).

use std::sync::Arc;

use super::jwt::JwtAuthenticator;

/// The API servers of one cluster, by the control plane each runs on, in the order they
/// started: the endpoint answers with the newest's configuration (the one a rollout put last).
#[derive(Debug, Default)]
pub(crate) struct ApiServers {
    running: Vec<(String, String, Option<Arc<JwtAuthenticator>>)>,
}

impl ApiServers {
    /// Control plane `node`'s API server runs with the `AuthenticationConfiguration`
    /// `configuration` (or none); unchanged when it already does.
    ///
    /// # Errors
    /// kube-apiserver's words when the configuration does not load.
    pub fn start(&mut self, node: &str, configuration: Option<&str>) -> Result<(), String> {
        let text = configuration.unwrap_or_default();
        if self
            .running
            .iter()
            .any(|(n, t, _)| n == node && t.as_str() == text)
        {
            return Ok(());
        }
        let authenticator = match configuration {
            Some(text) => Some(Arc::new(JwtAuthenticator::from_configuration(text)?)),
            None => None,
        };
        self.running.retain(|(n, _, _)| n != node);
        self.running
            .push((node.to_owned(), text.to_owned(), authenticator));
        Ok(())
    }

    /// Control plane `node`'s API server stopped.
    pub fn stop(&mut self, node: &str) {
        self.running.retain(|(n, _, _)| n != node);
    }

    /// The authenticator of the API server the endpoint reaches, if it has one.
    pub fn serving(&self) -> Option<Arc<JwtAuthenticator>> {
        self.running.last().and_then(|(_, _, a)| a.clone())
    }
}
