//! The endpoint against clients that are not who they should be: a page that rebinds a DNS
//! name, a flood of streams and unfinished requests, a revoked client certificate.

use super::*;

/// One request with `host` as its `Host` header (keep-alive unless `close`): the status
/// code, the head, and the stream (for what happens to it next).
fn request_as(
    addr: SocketAddr,
    path: &str,
    host: &str,
    token: Option<&str>,
) -> (u16, String, TcpStream) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
    let authorization =
        token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\n{authorization}\r\n"
    )
    .expect("request");
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, head, stream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_not_allowed_is_refused_and_loopback_pod_addresses_and_named_hosts_are_answered() {
    let (addr, _board) = served(HttpOptions {
        allowed_hosts: AllowedHosts::new(&["capstan.example.com".to_owned()]),
        ..HttpOptions::default()
    })
    .await;
    let codes = tokio::task::spawn_blocking(move || {
        [
            // A page whose name was rebound to this address.
            "rebound.attacker.example:9464",
            "localhost.attacker.example",
            // The kubelet's probe and Prometheus's scrape by pod IP, a person on loopback,
            // a configured name.
            "10.42.0.17:9464",
            "127.0.0.1:9464",
            "localhost:9464",
            "capstan.example.com",
        ]
        .map(|host| (host, request_as(addr, "/status", host, None).0))
    })
    .await
    .expect("joined");
    assert_eq!(
        codes,
        [
            ("rebound.attacker.example:9464", 421),
            ("localhost.attacker.example", 421),
            ("10.42.0.17:9464", 200),
            ("127.0.0.1:9464", 200),
            ("localhost:9464", 200),
            ("capstan.example.com", 200),
        ]
    );
    let (code, _, mut stream) = tokio::task::spawn_blocking(move || {
        request_as(addr, "/", "rebound.attacker.example", None)
    })
    .await
    .expect("joined");
    assert_eq!(code, 421);
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body);
    assert!(body.contains("--http-allowed-hosts"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_the_content_security_policy_and_nosniff() {
    let (addr, _board) = served(HttpOptions::default()).await;
    let heads = tokio::task::spawn_blocking(move || {
        [
            "/",
            "/clusters/none",
            "/status",
            crate::dashboard::assets::CSS_PATH,
        ]
        .map(|path| request(addr, path, None).1.to_ascii_lowercase())
    })
    .await
    .expect("joined");
    for head in heads {
        assert!(
            head.contains(
                "content-security-policy: default-src 'self'; frame-ancestors 'none'\r\n"
            ),
            "{head}"
        );
        assert!(head.contains("x-content-type-options: nosniff"), "{head}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthenticated_request_is_answered_401_and_its_connection_closed_at_once() {
    let dir = tempfile::tempdir().expect("dir");
    let (addr, _board) = served(HttpOptions {
        token: Some(token_file(&dir)),
        ..HttpOptions::default()
    })
    .await;
    // Keep-alive: before, the connection stayed open for the read timeout (10 s).
    let (code, head, stream) =
        tokio::task::spawn_blocking(move || request_as(addr, "/status", "localhost", None))
            .await
            .expect("joined");
    assert_eq!(code, 401, "{head}");
    let after = closed_after(stream).await.expect("closed");
    assert!(after < Duration::from_secs(2), "closed after {after:?}");
    // With the token, the connection is kept for the next request.
    let (code, _, stream) =
        tokio::task::spawn_blocking(move || request_as(addr, "/status", "localhost", Some(TOKEN)))
            .await
            .expect("joined");
    assert_eq!(code, 200);
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let mut rest = [0_u8; 1];
    let kept = tokio::task::spawn_blocking(move || {
        let mut stream = stream;
        // The body (`{...}`) is still to be read; past it, nothing comes and nothing closes.
        let mut body = Vec::new();
        loop {
            match stream.read(&mut rest) {
                Ok(0) => return false,
                Ok(_) => body.push(rest[0]),
                Err(_) => return true,
            }
        }
    })
    .await
    .expect("joined");
    assert!(kept, "an authenticated connection stays open");
}

/// Opens `/events` from `local` (a loopback address): the status code, and the stream.
async fn events_from(addr: SocketAddr, local: &str) -> (u16, String, tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{local}:0").parse().expect("local"))
        .expect("bind");
    let mut stream = socket.connect(addr).await.expect("connect");
    stream
        .write_all(b"GET /events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n")
        .await
        .expect("request");
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout(PATIENCE, stream.read(&mut byte)).await {
            Ok(Ok(1)) => head.push(byte[0]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, head, stream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_past_their_caps_are_refused_closed_and_free_their_place_when_they_end() {
    let (addr, _board) = served(HttpOptions {
        event_streams: StreamCaps {
            total: 3,
            per_client: 2,
        },
        ..HttpOptions::default()
    })
    .await;
    let (first, _, first_stream) = events_from(addr, "127.0.0.1").await;
    let (second, _, _second) = events_from(addr, "127.0.0.1").await;
    let (third, head, refused) = events_from(addr, "127.0.0.1").await;
    assert_eq!((first, second, third), (200, 200, 503), "{head}");
    assert!(head.to_ascii_lowercase().contains("retry-after"), "{head}");
    let refused = refused.into_std().expect("std");
    refused.set_nonblocking(false).expect("blocking");
    let after = closed_after(refused).await.expect("closed");
    assert!(after < Duration::from_secs(2), "closed after {after:?}");
    let (other, _, _other) = events_from(addr, "127.0.0.2").await;
    assert_eq!(other, 200, "another client has its own allowance");
    let (over, head, _) = events_from(addr, "127.0.0.3").await;
    assert_eq!(over, 503, "three in all: {head}");
    drop(first_stream);
    // The server sees the close at its next write (a keep-alive comment, or the next event);
    // the place is freed then.
    let mut freed = false;
    for _ in 0..40 {
        if events_from(addr, "127.0.0.3").await.0 == 200 {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(freed, "a stream that ended freed its place");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_the_connection_cap_is_full_and_nothing_else_does() {
    let (addr, board) = served(HttpOptions {
        max_connections: 4,
        ..HttpOptions::default()
    })
    .await;
    board.pass_completed(jiff::Timestamp::UNIX_EPOCH, Duration::from_secs(600));
    // Four unfinished requests hold the cap; forty more knock beside it.
    let mut held = Vec::new();
    for index in 0..44 {
        let mut stream = TcpStream::connect(addr).expect("connect");
        write!(
            stream,
            "GET /status HTTP/1.1\r\nHost: localhost\r\nX-Slow-{index}: "
        )
        .expect("half a request");
        held.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (health, status) = tokio::task::spawn_blocking(move || {
        (
            request(addr, "/healthz", None),
            request(addr, "/status", None),
        )
    })
    .await
    .expect("joined");
    assert_eq!(health.0, 200, "{}", health.1);
    assert!(
        health.1.to_ascii_lowercase().contains("connection: close"),
        "{}",
        health.1
    );
    assert_eq!(status.0, 503, "{}", status.2);
    drop(held);
}

/// A CA, and a CRL it signs revoking the certificates of `serials`.
struct ClientCa {
    params: rcgen::CertificateParams,
    key: rcgen::KeyPair,
    cert_pem: String,
}

impl ClientCa {
    fn new() -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "capstan-clients");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let key = rcgen::KeyPair::generate().expect("key");
        let cert_pem = params.self_signed(&key).expect("CA").pem();
        ClientCa {
            params,
            key,
            cert_pem,
        }
    }

    /// A certificate for `name` with serial number `serial` (server when `server`).
    fn issue(&self, name: &str, serial: u64, server: bool) -> capstan_lab::tls::Identity {
        let names = if server {
            vec!["localhost".to_owned()]
        } else {
            Vec::new()
        };
        let mut params = rcgen::CertificateParams::new(names).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.serial_number = Some(rcgen::SerialNumber::from(serial));
        params.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        let key = rcgen::KeyPair::generate().expect("key");
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).expect("signed");
        capstan_lab::tls::Identity {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
            not_after: jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24),
        }
    }

    fn crl(&self, number: u64, serials: &[u64]) -> String {
        let now = time::OffsetDateTime::now_utc();
        let params = rcgen::CertificateRevocationListParams {
            this_update: now - time::Duration::minutes(1),
            next_update: now + time::Duration::days(1),
            crl_number: rcgen::SerialNumber::from(number),
            issuing_distribution_point: None,
            revoked_certs: serials
                .iter()
                .map(|serial| rcgen::RevokedCertParams {
                    serial_number: rcgen::SerialNumber::from(*serial),
                    revocation_time: now - time::Duration::minutes(1),
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        let issuer = rcgen::Issuer::from_params(&self.params, &self.key);
        params.signed_by(&issuer).expect("CRL").pem().expect("pem")
    }

    fn identity(&self) -> capstan_lab::tls::Identity {
        capstan_lab::tls::Identity {
            cert_pem: self.cert_pem.clone(),
            key_pem: String::new(),
            cert_der: Vec::new(),
            key_der: Vec::new(),
            not_after: jiff::Timestamp::now(),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_the_crl_lists_fails_the_handshake_and_a_new_crl_needs_no_restart() {
    let ca = ClientCa::new();
    let server = ca.issue("localhost", 1, true);
    let (alice, mallory) = (ca.issue("alice", 7, false), ca.issue("mallory", 9, false));
    let dir = tempfile::tempdir().expect("dir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path
    };
    let crl = write("clients.crl", &ca.crl(1, &[9]));
    let files = tls::TlsFiles {
        cert: write("server.pem", &server.cert_pem),
        key: write("server.key", &server.key_pem),
        client_ca: Some(write("clients.pem", &ca.cert_pem)),
        client_crl: Some(crl.clone()),
    };
    let (addr, _board) = served(HttpOptions {
        tls: Some(Arc::new(tls::ServerTls::load(files).expect("config"))),
        client_certificates: true,
        ..HttpOptions::default()
    })
    .await;
    let root = ca.identity();
    assert_eq!(tls_get(addr, "/status", &root, Some(&alice)).await, Ok(200));
    assert!(
        tls_get(addr, "/status", &root, Some(&mallory))
            .await
            .is_err(),
        "a revoked certificate fails the handshake"
    );
    // The CA revokes alice's too: the next handshake reads the new list.
    std::fs::write(&crl, ca.crl(2, &[7, 9])).expect("new CRL");
    assert!(
        tls_get(addr, "/status", &root, Some(&alice)).await.is_err(),
        "revoked without a restart"
    );
    // A list that does not parse leaves the one before in force.
    std::fs::write(&crl, "not a CRL").expect("broken CRL");
    assert!(tls_get(addr, "/status", &root, Some(&alice)).await.is_err());
    assert_eq!(tls_get(addr, "/healthz", &root, None).await, Ok(503));
}
