//! A real browser for the dashboard's tests: Debian's `chromium`, headless, driven through
//! `chromedriver`'s WebDriver HTTP API (W3C WebDriver: sessions, navigation, scripts,
//! screenshots) with plain HTTP requests. Ask [`crate::judge::present`] for
//! [`crate::judge::Judge::Chromium`] first.
//!
//! Chromium starts with a new, empty profile, no network of its own (no sync, no component
//! updates, no background requests, no QUIC) and no sandbox (tests run as root).

use std::net::SocketAddr;
use std::process::{Command, Stdio};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::process::Spawned;

/// Headless Chromium's narrowest window: a narrower viewport is emulated as a phone's screen.
const MIN_WINDOW_WIDTH: u32 = 500;

/// A headless Chromium with one WebDriver session.
pub struct Browser {
    session: String,
    driver_address: SocketAddr,
    _driver: Spawned,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium whose window is `width`×`height`.
    pub fn start(width: u32, height: u32) -> Browser {
        Browser::start_with(width, height, &[])
    }

    /// [`Browser::start`], Chromium also given `extra` flags (`--force-dark-mode`: the pages'
    /// `prefers-color-scheme` is `dark`).
    pub fn start_with(width: u32, height: u32, extra: &[&str]) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let driver = Spawned(driver);
        let driver_address: SocketAddr = ([127, 0, 0, 1], port).into();
        crate::wait::on("chromedriver ready").blocking(|| {
            if std::net::TcpStream::connect(driver_address).is_err() {
                return Err("not listening yet".to_owned());
            }
            let (code, body) = http_request(driver_address, "GET", "/status", &[], b"");
            if code == 200 && body.contains("\"ready\":true") {
                Ok(())
            } else {
                Err(body)
            }
        });
        let profile = tempfile::tempdir().expect("a profile folder");
        let mut args = vec![
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        args.extend(extra.iter().map(|flag| (*flag).to_owned()));
        // The viewport is exactly `width`×`height` (a headless window's is smaller than the
        // window, and no window is narrower than 500 px): below that, a phone's screen.
        let phone = width < MIN_WINDOW_WIDTH;
        let options = json!({
            "binary": "/usr/bin/chromium",
            "args": args,
            "mobileEmulation": { "deviceMetrics": {
                "width": width, "height": height, "pixelRatio": 1.0, "mobile": phone, "touch": phone
            } }
        });
        let capabilities = json!({
            "capabilities": {
                "alwaysMatch": { "browserName": "chrome", "goog:chromeOptions": options }
            }
        });
        let created = call(driver_address, "POST", "/session", &capabilities);
        let session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a WebDriver session: {created}"))
            .to_owned();
        Browser {
            session,
            driver_address,
            _driver: driver,
            _profile: profile,
        }
    }

    fn call(&self, method: &str, path: &str, body: &Value) -> Value {
        let path = format!("/session/{}{path}", self.session);
        call(self.driver_address, method, &path, body)
    }

    /// Opens `url` and waits for it to load.
    pub fn open(&self, url: &str) {
        self.call("POST", "/url", &json!({ "url": url }));
    }

    /// Sets the window's size.
    pub fn resize(&self, width: u32, height: u32) {
        self.call(
            "POST",
            "/window/rect",
            &json!({ "width": width, "height": height }),
        );
    }

    /// Runs `script` (a function body: `return ...;`) in the page and returns its value.
    pub fn run(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            &json!({ "script": script, "args": [] }),
        )
    }

    /// Runs `script` (a function body that ends by calling `arguments[0]` with its result)
    /// in the page and returns what it passed.
    pub fn run_async(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/async",
            &json!({ "script": script, "args": [] }),
        )
    }

    /// Runs `script` until it returns something other than `null` or `false`, and returns it.
    pub fn wait_for(&self, what: &str, script: &str) -> Value {
        crate::wait::on(what).blocking(|| match self.run(script) {
            Value::Null | Value::Bool(false) => Err(self
                .run("return document.body ? document.body.innerText : '';")
                .to_string()),
            value => Ok(value),
        })
    }

    /// The serious and critical accessibility violations axe-core (the script `axe`, read
    /// from [`crate::judge::axe_script`]) finds on the page, one line each: rule, help, and
    /// the elements.
    pub fn axe_violations(&self, axe: &str) -> Vec<String> {
        self.run(&format!("{axe}\nwindow.axe = axe; return true;"));
        let found = self.run_async(
            r"
const done = arguments[arguments.length - 1];
window.axe.run(document, { resultTypes: ['violations'] }).then(results => done(
  results.violations
    .filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => v.impact + ' ' + v.id + ': ' + v.help + ' at '
      + v.nodes.map(n => n.target.join(' ')).join(', '))
), error => done(['axe failed: ' + error]));",
        );
        found
            .as_array()
            .into_iter()
            .flatten()
            .map(|line| line.as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// A PNG of the window.
    pub fn screenshot(&self) -> Vec<u8> {
        let value = self.call("GET", "/screenshot", &Value::Null);
        base64::engine::general_purpose::STANDARD
            .decode(value.as_str().expect("a base64 screenshot"))
            .expect("base64")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Closes Chromium; chromedriver is killed after it.
        let path = format!("/session/{}", self.session);
        let _ = std::net::TcpStream::connect(self.driver_address)
            .map(|_| http_request(self.driver_address, "DELETE", &path, &[], b""));
    }
}

/// One HTTP request to chromedriver: the status code and the body, read to its
/// `Content-Length` (chromedriver keeps the connection open, so reading to the end would wait
/// for a timeout).
fn http_request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, String) {
    use std::io::{BufRead as _, Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(address).expect("connect to chromedriver");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
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
    let mut reader = std::io::BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).expect("a status line");
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("a header");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().expect("a Content-Length");
        }
    }
    let mut answer = vec![0; length];
    reader.read_exact(&mut answer).expect("the body");
    (code, String::from_utf8_lossy(&answer).into_owned())
}

/// One WebDriver call; returns its `value`, panicking on a WebDriver error.
fn call(address: SocketAddr, method: &str, path: &str, body: &Value) -> Value {
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let headers = [("Content-Type", "application/json".to_owned())];
    let (code, answer) = http_request(address, method, path, &headers, &body);
    let answer: Value = serde_json::from_str(&answer)
        .unwrap_or_else(|_| panic!("{method} {path}: not JSON ({code}): {answer}"));
    assert!(
        code == 200,
        "{method} {path}: WebDriver answered {code}: {answer}"
    );
    answer["value"].clone()
}
