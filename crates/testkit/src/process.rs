//! capstan as users start it: `capstan run` as a child process (killed when dropped, its log
//! shown when the test fails), where it serves HTTP, and plain HTTP requests to it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::wait;

/// A process of the test (a `capstan` binary), killed when dropped, so a failing test leaves
/// no daemon behind.
pub struct Spawned(pub Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `capstan run` with its lab, mirrors and log in a folder of the test, serving HTTP on a
/// port the system picks (see [`crate::announced`]).
pub struct CapstanRun {
    /// The process.
    pub spawned: Spawned,
    log: PathBuf,
}

impl CapstanRun {
    /// Starts `capstan run` with `--state-dir DIR/lab --git-mirror-dir DIR/mirrors --http
    /// 127.0.0.1:0`, its standard error in `DIR/stderr`, after `configure` added the rest
    /// (`--repo`, `--lab`, `--log` with [`crate::announced::ANNOUNCING`], the environment).
    pub fn start(dir: &Path, configure: impl FnOnce(&mut Command)) -> CapstanRun {
        let log = dir.join("stderr");
        let mut command = crate::cli::command();
        command
            .arg("run")
            .arg("--state-dir")
            .arg(dir.join("lab"))
            .arg("--git-mirror-dir")
            .arg(dir.join("mirrors"))
            .args(["--http", "127.0.0.1:0"]);
        configure(&mut command);
        let child = command
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("capstan run starts");
        CapstanRun {
            spawned: Spawned(child),
            log,
        }
    }

    /// `capstan run --lab` following `url`, logging warnings and where it serves.
    pub fn lab(dir: &Path, url: &str) -> CapstanRun {
        CapstanRun::start(dir, |command| {
            command
                .args(["--repo", url, "--lab", "--log"])
                .arg(format!("warn,{}", crate::announced::ANNOUNCING));
        })
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Where it serves HTTP, once its log says so.
    pub fn address(&mut self) -> SocketAddr {
        announced_address(&mut self.spawned.0, &self.log)
    }

    /// Polls its `/status` until `done` holds of the body (see [`wait_status`]).
    pub fn wait_status(
        &mut self,
        address: SocketAddr,
        what: &str,
        done: &dyn Fn(&str) -> bool,
    ) -> String {
        wait_status(&mut self.spawned.0, address, what, done)
    }

    /// Waits until `done` holds; fails the test when `capstan run` exits meanwhile.
    pub async fn wait_until(&mut self, what: &str, mut done: impl FnMut() -> bool) {
        let child = &mut self.spawned.0;
        wait::on(what)
            .every(Duration::from_millis(200))
            .until(async || {
                if done() {
                    return Ok(());
                }
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("capstan run exited while waiting for {what}: {status}");
                }
                Err("not yet".to_owned())
            })
            .await;
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.spawned.0.try_wait().ok().flatten().is_none()
    }
}

impl Drop for CapstanRun {
    fn drop(&mut self) {
        let _ = self.spawned.0.kill();
        let _ = self.spawned.0.wait();
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "--- capstan run's log (last lines, newest first)\n{}",
                tail.join("\n")
            );
        }
    }
}

/// Waits until `capstan run`, logging to `log` with [`crate::announced::ANNOUNCING`], says
/// where it serves HTTP (it was given `--http 127.0.0.1:0`); fails if it exits first.
pub fn announced_address(child: &mut Child, log: &Path) -> SocketAddr {
    wait::on("capstan run to serve HTTP").blocking(|| {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(address) = crate::announced::http_address(&text) {
            return Ok(address);
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("capstan run exited before serving HTTP: {status}\n{text}");
        }
        Err(text)
    })
}

/// Polls the daemon's `/status` until `done` holds of its body; fails if the daemon exits.
pub fn wait_status(
    child: &mut Child,
    address: SocketAddr,
    what: &str,
    done: &dyn Fn(&str) -> bool,
) -> String {
    wait::on(what)
        .every(Duration::from_millis(100))
        .blocking(|| {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("capstan run exited while waiting for {what}: {status}");
            }
            let body = std::net::TcpStream::connect(address)
                .ok()
                .map(|_| http_request(address, "GET", "/status", &[], b"").1)
                .unwrap_or_default();
            if done(&body) { Ok(body) } else { Err(body) }
        })
}

/// GET or POST over a plain TCP connection: (status code, body).
pub fn http_request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("write");
    stream.write_all(body).expect("write body");
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}
