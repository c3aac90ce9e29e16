//! The authenticator against an issuer served over HTTPS on loopback with its own CA: ES256
//! tokens signed by its key map to the prefixed user and groups; anything else is nobody.

use axum::Router;
use axum::routing::get;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::json;

use super::*;
use crate::serve::HttpsServer;
use crate::tls::CertificateAuthority;

struct Issuer {
    url: String,
    ca_pem: String,
    key: rcgen::KeyPair,
    _server: HttpsServer,
}

fn in_a_year() -> jiff::Timestamp {
    jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * 365)
}

fn jwk(key: &rcgen::KeyPair, kid: &str) -> Value {
    let point = key.public_key_raw();
    let encode = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
           "x": encode(&point[1..33]), "y": encode(&point[33..65])})
}

/// An issuer at `https://127.0.0.1:PORT/realms/lab` whose JWKS holds one P-256 key, `k1`.
async fn issuer() -> Issuer {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = CertificateAuthority::new("sso-ca", in_a_year()).expect("ca");
    let serving = ca
        .issue_server("sso", &[], &["127.0.0.1".parse().expect("ip")], in_a_year())
        .expect("serving");
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let keys = json!({"keys": [jwk(&key, "k1")]});
    let base = std::sync::Arc::new(tokio::sync::OnceCell::new());
    let discovery_base = base.clone();
    let router = Router::new()
        .route(
            "/realms/lab/.well-known/openid-configuration",
            get(move || {
                let base = discovery_base.clone();
                async move {
                    let url: &String = base.get().expect("set");
                    axum::Json(json!({"issuer": url, "jwks_uri": format!("{url}/keys")}))
                }
            }),
        )
        .route(
            "/realms/lab/keys",
            get(move || {
                let keys = keys.clone();
                async move { axum::Json(keys) }
            }),
        );
    let server = HttpsServer::start("127.0.0.1:0".parse().expect("addr"), &serving, None, router)
        .await
        .expect("serves");
    let url = format!("{}/realms/lab", server.url());
    base.set(url.clone()).expect("once");
    Issuer {
        url,
        ca_pem: ca.identity().cert_pem.clone(),
        key,
        _server: server,
    }
}

fn configuration(issuer: &Issuer) -> String {
    let ca: String = issuer
        .ca_pem
        .lines()
        .map(|line| format!("        {line}\n"))
        .collect();
    format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n  - issuer:\n      url: {}\n      audiences: [kubernetes]\n      certificateAuthority: |\n{ca}    claimMappings:\n      username: {{claim: email, prefix: \"oidc:\"}}\n      groups: {{claim: groups, prefix: \"oidc:\"}}\n",
        issuer.url
    )
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn token(key: &rcgen::KeyPair, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    let key = EncodingKey::from_ec_der(&key.serialize_der());
    jsonwebtoken::encode(&header, claims, &key).expect("signs")
}

fn claims(issuer: &str) -> Value {
    json!({"iss": issuer, "aud": "kubernetes", "exp": now() + 600, "iat": now(),
           "email": "alice@example.com", "email_verified": true, "groups": ["admins", "dev"]})
}

#[tokio::test]
async fn a_token_of_the_issuer_names_the_prefixed_user_and_groups() {
    let issuer = issuer().await;
    let authenticator =
        JwtAuthenticator::from_configuration(&configuration(&issuer)).expect("loads");
    let user = authenticator
        .authenticate(&token(&issuer.key, "k1", &claims(&issuer.url)), now())
        .await
        .expect("authenticated");
    assert_eq!(user.name, "oidc:alice@example.com");
    assert_eq!(
        user.groups,
        ["oidc:admins", "oidc:dev", "system:authenticated"]
    );
}

#[tokio::test]
async fn other_issuers_keys_audiences_expired_or_unverified_tokens_name_nobody() {
    let issuer = issuer().await;
    let authenticator =
        JwtAuthenticator::from_configuration(&configuration(&issuer)).expect("loads");
    let other_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let mut cases = vec![
        (
            "another issuer",
            token(&issuer.key, "k1", &claims("https://evil.example.com")),
        ),
        ("another key", token(&other_key, "k1", &claims(&issuer.url))),
        ("garbage", "a.b.c".to_owned()),
        ("oversized", "e".repeat(MAX_TOKEN_BYTES + 1)),
    ];
    let mut changed = |name: &'static str, field: &str, value: Value| {
        let mut claims = claims(&issuer.url);
        claims[field] = value;
        cases.push((name, token(&issuer.key, "k1", &claims)));
    };
    changed("another audience", "aud", json!("dashboard"));
    changed("expired", "exp", json!(now() - 1));
    changed("not yet valid", "nbf", json!(now() + 600));
    changed("unverified email", "email_verified", json!(false));
    let hmac = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims(&issuer.url),
        &EncodingKey::from_secret(b"secret"),
    )
    .expect("signs");
    cases.push(("HMAC", hmac));
    for (name, token) in cases {
        assert_eq!(
            authenticator.authenticate(&token, now()).await,
            None,
            "{name}"
        );
    }
}

#[test]
fn configurations_the_api_server_refuses_do_not_load() {
    let plain = "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n  - issuer: {url: http://sso.example.com, audiences: [k]}\n    claimMappings: {username: {claim: sub, prefix: \"\"}}\n";
    let err = JwtAuthenticator::from_configuration(plain).expect_err("http");
    assert!(err.contains("URL scheme must be https"), "{err}");
    let two = plain
        .replace("http://", "https://")
        .replace("[k]", "[k, l]");
    let err = JwtAuthenticator::from_configuration(&two).expect_err("policy");
    assert!(err.contains("audienceMatchPolicy"), "{err}");
    let no_prefix = plain
        .replace("http://", "https://")
        .replace(", prefix: \"\"", "");
    assert!(JwtAuthenticator::from_configuration(&no_prefix).is_err());
}
