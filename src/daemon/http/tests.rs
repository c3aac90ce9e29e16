use std::io::{Read as _, Write as _};
use std::net::TcpStream;

use super::*;
use crate::source::{Redactor, SecretFrom};

/// Generous: the box may be loaded; the read timeouts under test are far shorter.
const PATIENCE: Duration = Duration::from_secs(20);

const TOKEN: &str = "http-token-5f0e7a91";

fn token_file(dir: &tempfile::TempDir) -> Secret {
    let path = dir.path().join("token");
    std::fs::write(&path, format!("{TOKEN}\n")).expect("token file");
    Secret::resolve(SecretFrom::File(path), &|_| None, &Redactor::default()).expect("secret")
}

async fn served(options: HttpOptions) -> (SocketAddr, Arc<StatusBoard>) {
    let board = Arc::new(StatusBoard::default());
    let addr = serve_with(
        "127.0.0.1:0".parse().expect("addr"),
        Arc::clone(&board),
        Router::new(),
        &options,
    )
    .await
    .expect("serves");
    (addr, board)
}

/// One request on a connection of its own: the status code, the head and the body.
fn request(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
    let authorization =
        token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    // A server may answer and close before reading (a connection over the cap): the answer is
    // what counts, not whether the request could be written whole.
    let _ = write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{authorization}\r\n"
    );
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, head.to_owned(), body.to_owned())
}

/// Waits (in a blocking thread) until the server closes `stream`; returns how long it took,
/// or `None` when it was still open after [`PATIENCE`].
async fn closed_after(mut stream: TcpStream) -> Option<Duration> {
    tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
        let mut buffer = [0_u8; 4096];
        loop {
            match stream.read(&mut buffer) {
                Ok(0) => return Some(started.elapsed()),
                Ok(_) => {}
                Err(err)
                    if matches!(
                        err.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return None;
                }
                Err(_) => return Some(started.elapsed()),
            }
        }
    })
    .await
    .expect("joined")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_observed_and_metrics_need_the_token_and_healthz_stays_open() {
    let dir = tempfile::tempdir().expect("dir");
    let (addr, _board) = served(HttpOptions {
        token: Some(token_file(&dir)),
        ..HttpOptions::default()
    })
    .await;
    let results = tokio::task::spawn_blocking(move || {
        let mut results = Vec::new();
        for path in ["/status", "/observed", "/metrics"] {
            let (code, head, _) = request(addr, path, None);
            assert_eq!(code, 401, "{path} without a token");
            assert!(
                head.to_ascii_lowercase()
                    .contains("www-authenticate: bearer realm=\"capstan\""),
                "{head}"
            );
            let (code, _, _) = request(addr, path, Some("guessed-token-1234"));
            assert_eq!(code, 401, "{path} with another token");
        }
        // (`/observed` with the token would wait for a pass: there is no loop here.)
        for path in ["/status", "/metrics"] {
            results.push((path, request(addr, path, Some(TOKEN)).0));
        }
        results.push(("/healthz", request(addr, "/healthz", None).0));
        results
    })
    .await
    .expect("joined");
    assert_eq!(
        results,
        [
            ("/status", 200),
            ("/metrics", 200),
            // Open, and honest: no pass has completed.
            ("/healthz", 503),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_token_file_is_read_at_each_request() {
    let dir = tempfile::tempdir().expect("dir");
    let (addr, _board) = served(HttpOptions {
        token: Some(token_file(&dir)),
        ..HttpOptions::default()
    })
    .await;
    std::fs::write(dir.path().join("token"), "rotated-token-77aa").expect("rotate");
    let codes = tokio::task::spawn_blocking(move || {
        (
            request(addr, "/status", Some(TOKEN)).0,
            request(addr, "/status", Some("rotated-token-77aa")).0,
        )
    })
    .await
    .expect("joined");
    assert_eq!(codes, (401, 200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_request_and_an_idle_connection_are_closed_after_the_read_timeout() {
    let (addr, _board) = served(HttpOptions {
        read_timeout: Duration::from_secs(1),
        ..HttpOptions::default()
    })
    .await;
    let mut half = TcpStream::connect(addr).expect("connect");
    half.write_all(b"GET /status HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        .expect("write");
    let idle = TcpStream::connect(addr).expect("connect");
    let (half, idle) = tokio::join!(closed_after(half), closed_after(idle));
    for (what, closed) in [("half-sent", half), ("idle", idle)] {
        let closed = closed.unwrap_or_else(|| panic!("the {what} connection is still open"));
        assert!(
            closed >= Duration::from_millis(900),
            "{what} closed before its time: {closed:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_the_cap_is_answered_503_and_closed() {
    let (addr, _board) = served(HttpOptions {
        max_connections: 2,
        ..HttpOptions::default()
    })
    .await;
    let _held: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    // The two are accepted (and hold their slots) before the third arrives.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (code, _, body) = tokio::task::spawn_blocking(move || request(addr, "/status", None))
        .await
        .expect("joined");
    assert_eq!(code, 503);
    assert!(body.contains("too many connections"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_turns_503_when_no_pass_completed_within_the_limit() {
    let (addr, board) = served(HttpOptions::default()).await;
    board.pass_completed(jiff::Timestamp::UNIX_EPOCH, Duration::from_secs(2));
    let (code, _, _) = tokio::task::spawn_blocking(move || request(addr, "/healthz", None))
        .await
        .expect("joined");
    assert_eq!(code, 200, "a pass just completed");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (code, _, body) = tokio::task::spawn_blocking(move || request(addr, "/healthz", None))
        .await
        .expect("joined");
    assert_eq!(code, 503, "{body}");
    assert!(
        body.starts_with("stalled: no reconcile pass has completed since 1970-01-01T00:00:00Z"),
        "{body}"
    );
}

/// A GET over TLS trusting `ca`, presenting `client` when given: the status code, or why the
/// connection failed.
async fn tls_get(
    addr: SocketAddr,
    path: &str,
    ca: &capstan_lab::tls::Identity,
    client: Option<&capstan_lab::tls::Identity>,
) -> Result<u16, String> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.cert_pem.as_bytes()).expect("CA"))
        .expect("root");
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots);
    let config = match client {
        Some(client) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(client.cert_pem.as_bytes()).expect("cert")],
                PrivateKeyDer::from_pem_slice(client.key_pem.as_bytes()).expect("key"),
            )
            .expect("client auth"),
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").expect("name");
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    tls.read_to_end(&mut answer)
        .await
        .map_err(|e| e.to_string())?;
    String::from_utf8_lossy(&answer)
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| "no status line".to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_of_the_client_ca_authenticates_and_others_do_not() {
    use capstan_lab::tls::CertificateAuthority;
    let until = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24);
    let ca = CertificateAuthority::new("capstan-clients", until).expect("CA");
    let server = ca
        .issue_server(
            "localhost",
            &["localhost".to_owned()],
            &["127.0.0.1".parse().expect("ip")],
            until,
        )
        .expect("server");
    let prometheus = ca.issue_client("prometheus", &[], until).expect("client");
    let stranger = CertificateAuthority::new("elsewhere", until)
        .expect("CA")
        .issue_client("mallory", &[], until)
        .expect("client");
    let dir = tempfile::tempdir().expect("dir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path
    };
    let files = tls::TlsFiles {
        cert: write("server.pem", &server.cert_pem),
        key: write("server.key", &server.key_pem),
        client_ca: Some(write("clients.pem", &ca.identity().cert_pem)),
        client_crl: None,
    };
    let (addr, _board) = served(HttpOptions {
        tls: Some(Arc::new(tls::ServerTls::load(files).expect("config"))),
        client_certificates: true,
        ..HttpOptions::default()
    })
    .await;
    let ca = ca.identity();
    assert_eq!(
        tls_get(addr, "/status", ca, Some(&prometheus)).await,
        Ok(200)
    );
    assert_eq!(
        tls_get(addr, "/metrics", ca, Some(&prometheus)).await,
        Ok(200)
    );
    assert_eq!(
        tls_get(addr, "/status", ca, None).await,
        Ok(401),
        "no certificate"
    );
    assert_eq!(
        tls_get(addr, "/healthz", ca, None).await,
        Ok(503),
        "probes need no certificate (and no pass has completed)"
    );
    assert!(
        tls_get(addr, "/status", ca, Some(&stranger)).await.is_err(),
        "a certificate of another CA is refused in the handshake"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_its_events_need_the_token_and_its_assets_do_not() {
    let dir = tempfile::tempdir().expect("dir");
    let (addr, _board) = served(HttpOptions {
        token: Some(token_file(&dir)),
        ..HttpOptions::default()
    })
    .await;
    tokio::task::spawn_blocking(move || {
        for path in ["/", "/clusters/prod", "/previews/7", "/events"] {
            let (code, head, _) = request(addr, path, None);
            assert_eq!(code, 401, "{path}: {head}");
            let (code, head, _) = request(addr, path, Some("wrong"));
            assert_eq!(code, 401, "{path} with a wrong token: {head}");
        }
        let (code, head, body) = request(addr, "/", Some(TOKEN));
        assert_eq!(code, 200, "{head}");
        assert!(
            head.contains("text/html") && head.contains("no-store"),
            "{head}"
        );
        assert!(body.contains("<h1>Fleet</h1>"), "{body}");
        let (code, _, body) = request(addr, "/clusters/prod", Some(TOKEN));
        assert_eq!(code, 404, "no such cluster: {body}");
        assert!(body.contains("<h1>Not found</h1>"), "{body}");
        for (path, kind) in [
            (crate::dashboard::assets::CSS_PATH, "text/css"),
            (crate::dashboard::assets::JS_PATH, "text/javascript"),
        ] {
            let (code, head, body) = request(addr, path, None);
            assert_eq!(code, 200, "{path}: {head}");
            assert!(head.contains(kind) && !body.is_empty(), "{path}: {head}");
        }
    })
    .await
    .expect("joined");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_say_the_generation_at_once_and_again_when_a_new_status_is_published() {
    let (addr, board) = served(HttpOptions::default()).await;
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
    write!(
        stream,
        "GET /events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n"
    )
    .expect("request");
    let (stream, first) = tokio::task::spawn_blocking(move || {
        let read = read_until(stream, "data: 0\n");
        (read.0, read.1)
    })
    .await
    .expect("joined");
    assert!(first.contains("event: status"), "{first}");
    board.set(crate::status::FleetStatus {
        revision: Some("main@sha1:1".to_owned()),
        ..crate::status::FleetStatus::default()
    });
    let (_, next) = tokio::task::spawn_blocking(move || read_until(stream, "data: 1\n"))
        .await
        .expect("joined");
    assert!(next.contains("event: status"), "{next}");
}

/// Reads `stream` until what was read holds `wanted`; returns the stream and what was read.
fn read_until(mut stream: TcpStream, wanted: &str) -> (TcpStream, String) {
    let mut read = String::new();
    let mut buffer = [0_u8; 1024];
    while !read.contains(wanted) {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => panic!("the stream ended before `{wanted}`:\n{read}"),
            Ok(n) => read.push_str(&String::from_utf8_lossy(&buffer[..n])),
        }
    }
    (stream, read)
}

mod hardening;
