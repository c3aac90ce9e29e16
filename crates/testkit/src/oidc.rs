//! A JWT issuer for the tests of `kubernetes.authentication`: its discovery document and JWKS
//! served over HTTPS on loopback, with a CA of its own (what a cluster file's
//! `certificateAuthority` names), and its tokens minted by PyPI's PyJWT (a real JWT library,
//! [`crate::Judge::PyJwt`]) with keys `cryptography` made: an RSA key (`rsa`, RS256) and a
//! P-256 key (`ec`, ES256) in the key set, and a `rogue` RSA key that is not.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::routing::get;
use capstan_lab::serve::HttpsServer;
use capstan_lab::tls::CertificateAuthority;
use serde_json::{Value, json};

use crate::judge;

/// Makes the keys (PKCS#8 PEM files in the folder of `argv[1]`) and prints the public JWKS.
const KEYS_SCRIPT: &str = r#"
import json, sys, jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
folder = sys.argv[1]
keys = {
    "rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048),
    "ec": ec.generate_private_key(ec.SECP256R1()),
    "rogue": rsa.generate_private_key(public_exponent=65537, key_size=2048),
}
for name, key in keys.items():
    with open(f"{folder}/{name}.pem", "wb") as out:
        out.write(key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
published = []
for name, alg, algorithm in [("rsa", "RS256", jwt.algorithms.RSAAlgorithm),
                             ("ec", "ES256", jwt.algorithms.ECAlgorithm)]:
    jwk = json.loads(algorithm.to_jwk(keys[name].public_key()))
    jwk.update({"kid": name, "alg": alg, "use": "sig"})
    published.append(jwk)
print(json.dumps({"keys": published}))
"#;

/// Signs the claims of `argv[5]` with key `argv[2]` (`alg` `argv[3]`, header `kid` `argv[4]`).
const MINT_SCRIPT: &str = r#"
import json, sys, jwt
folder, key, alg, kid, claims = sys.argv[1:6]
with open(f"{folder}/{key}.pem", "rb") as pem:
    print(jwt.encode(json.loads(claims), pem.read(), algorithm=alg, headers={"kid": kid}))
"#;

/// A running issuer; dropping it stops serving.
pub struct Issuer {
    /// `https://127.0.0.1:PORT/realms/lab`: the tokens' `iss`.
    pub url: String,
    /// The PEM of the CA that signed its HTTPS certificate.
    pub ca_pem: String,
    keys: tempfile::TempDir,
    _server: HttpsServer,
}

impl Issuer {
    /// Makes the keys with PyJWT's `cryptography` and serves discovery and JWKS.
    ///
    /// # Panics
    /// When Python or the server fails: the test cannot go on.
    pub async fn start() -> Issuer {
        let keys = tempfile::tempdir().expect("a folder for the keys");
        let published = python(&[
            "-c",
            KEYS_SCRIPT,
            keys.path().to_str().expect("a UTF-8 path"),
        ]);
        let jwks: Value = serde_json::from_str(&published).expect("PyJWT's JWKS is JSON");
        let not_after = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24);
        let ca = CertificateAuthority::new("test-sso-ca", not_after).expect("a CA");
        let serving = ca
            .issue_server(
                "sso",
                &["localhost".to_owned()],
                &["127.0.0.1".parse().expect("loopback")],
                not_after,
            )
            .expect("a serving certificate");
        let url = Arc::new(OnceLock::<String>::new());
        let issuer = url.clone();
        let router = Router::new()
            .route(
                "/realms/lab/.well-known/openid-configuration",
                get(move || {
                    let url = issuer.get().cloned().unwrap_or_default();
                    async move {
                        axum::Json(json!({
                            "issuer": url,
                            "jwks_uri": format!("{url}/protocol/openid-connect/certs"),
                            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                        }))
                    }
                }),
            )
            .route(
                "/realms/lab/protocol/openid-connect/certs",
                get(move || {
                    let jwks = jwks.clone();
                    async move { axum::Json(jwks) }
                }),
            );
        let server =
            HttpsServer::start("127.0.0.1:0".parse().expect("addr"), &serving, None, router)
                .await
                .expect("the issuer serves");
        let address = format!("{}/realms/lab", server.url());
        url.set(address.clone()).expect("set once");
        Issuer {
            url: address,
            ca_pem: ca.identity().cert_pem.clone(),
            keys,
            _server: server,
        }
    }

    /// `kubernetes.authentication` naming this issuer (audience `kubernetes`, users
    /// `oidc:<email>`, groups `oidc:<group>`), as lines indented for `kubernetes:`'s fields.
    pub fn authentication_yaml(&self) -> String {
        let ca: String = self
            .ca_pem
            .lines()
            .map(|line| format!("            {line}\n"))
            .collect();
        format!(
            "    authentication:\n      jwt:\n        - url: {}\n          audiences: [kubernetes]\n          certificateAuthority: |\n{ca}          claimMappings:\n            username: {{claim: email, prefix: \"oidc:\"}}\n            groups: {{claim: groups, prefix: \"oidc:\"}}\n",
            self.url
        )
    }

    /// A token for `alice@example.com` in groups `platform` and `dev`, valid for an hour,
    /// issued by `issuer` and signed by `key` (`rsa`, `ec` or `rogue`, named as `kid`).
    pub fn token(&self, issuer: &str, key: &str, kid: &str) -> String {
        let now = jiff::Timestamp::now().as_second();
        let claims = json!({
            "iss": issuer,
            "aud": "kubernetes",
            "sub": "f3b1c2d4",
            "email": "alice@example.com",
            "email_verified": true,
            "groups": ["platform", "dev"],
            "iat": now,
            "exp": now + 3600,
        });
        let alg = if key == "ec" { "ES256" } else { "RS256" };
        python(&[
            "-c",
            MINT_SCRIPT,
            self.keys.path().to_str().expect("a UTF-8 path"),
            key,
            alg,
            kid,
            &claims.to_string(),
        ])
        .trim()
        .to_owned()
    }
}

fn python(args: &[&str]) -> String {
    let output = Command::new(judge::talos_python())
        .args(args)
        .output()
        .expect("the judge venv's python runs");
    assert!(
        output.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `kubectl auth whoami -o json` with `token` as the only credential against the cluster
/// `kubeconfig` (a file's text) names: the SelfSubjectReview's `status.userInfo`, or kubectl's
/// error output when the API server refuses the token.
///
/// # Errors
/// kubectl's standard error when it fails (a 401 says `Unauthorized`).
pub fn whoami(kubeconfig: &str, token: &str, dir: &Path) -> Result<Value, String> {
    let mut config: Value = serde_saphyr::from_str(kubeconfig).expect("a kubeconfig");
    for user in config["users"].as_array_mut().into_iter().flatten() {
        user["user"] = json!({});
    }
    let file = dir.join("token-only.kubeconfig");
    std::fs::write(&file, config.to_string()).expect("write the kubeconfig");
    let output = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&file)
        .args(["--request-timeout", "20s", "--token", token])
        .args(["auth", "whoami", "-o", "json"])
        .output()
        .expect("kubectl runs");
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let review: Value = serde_json::from_slice(&output.stdout).expect("a SelfSubjectReview");
    Ok(review["status"]["userInfo"].clone())
}
