//! Where a `capstan run --http 127.0.0.1:0` serves HTTP, read from its log. Tests let the
//! system pick the port: a port probed free beforehand can be taken by another test's
//! connection before the daemon binds it ("Address already in use").

use std::net::SocketAddr;

/// The log filter that makes `capstan run` announce its address (at info, which `warn` hides):
/// the listeners say where they serve.
pub const ANNOUNCING: &str = "capstan::commands::run=info,capstan::daemon::http=info";

/// The address in the daemon's "serving /status, …" line, once its log holds that line.
pub fn http_address(log: &str) -> Option<SocketAddr> {
    log.lines()
        .filter(|line| line.contains("serving /status"))
        .find_map(|line| {
            line.split_once("address=")?
                .1
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
}
