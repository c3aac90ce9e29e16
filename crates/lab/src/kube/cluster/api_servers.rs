//! The node software tells a simulated cluster which of its API servers run, and with which
//! authentication (kept in its state's `api_servers`).

use super::SimCluster;

impl SimCluster {
    /// The API server on control plane `node` runs with the `AuthenticationConfiguration`
    /// `authentication` (the file its `--authentication-config` names, as the node holds it;
    /// `None`: no such flag), or stopped (`running: false`). The endpoint answers with the
    /// configuration of the API server that started last.
    ///
    /// # Errors
    /// kube-apiserver's words when the configuration does not load (it would not start).
    pub fn api_server(
        &self,
        node: &str,
        running: bool,
        authentication: Option<&str>,
    ) -> Result<(), String> {
        let servers = &mut self.state.lock().api_servers;
        if running {
            servers.start(node, authentication)
        } else {
            servers.stop(node);
            Ok(())
        }
    }
}
