//! The API server's JWT authenticator, as kube-apiserver runs it from the
//! `AuthenticationConfiguration` its `--authentication-config` names: for a bearer token whose
//! `iss` is a configured issuer, the issuer's discovery document
//! (`<url>/.well-known/openid-configuration`) and its JWKS are fetched over HTTPS, trusting
//! the configured CA (else the system's roots); the signature is verified with the key the
//! token's `kid` names (RS256, ES256 and the other asymmetric algorithms; never HMAC or
//! `none`), then `iss`, `aud` (one of the audiences), `exp` and `nbf` by the lab's clock; the
//! user is the username claim with its prefix, the groups the groups claim's values with
//! theirs. Anything else authenticates nobody: the request is a 401.
//!
//! Tokens, discovery documents and key sets are hostile input: each is bounded in size, every
//! fetch in time, and nothing in them panics.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use serde_json::{Map, Value};

/// The longest bearer token looked at (kube-apiserver's request headers are bounded too).
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The largest discovery document read.
const MAX_DISCOVERY_BYTES: usize = 64 * 1024;
/// The largest key set read.
const MAX_JWKS_BYTES: usize = 256 * 1024;
/// How long one fetch from an issuer may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Keys are fetched again after this long (kube-apiserver refreshes its remote key set too).
const KEYS_LIFETIME: Duration = Duration::from_secs(3600);
/// A token naming an unknown key fetches the set again, at most this often.
const REFETCH_AFTER: Duration = Duration::from_secs(10);
/// What kube-apiserver accepts with a structured configuration: every asymmetric algorithm
/// of RFC 7518 (never HMAC, whose key would be the issuer's secret, nor `none`).
const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];

/// Who a token names: the user and groups, prefixed as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JwtUser {
    /// The username claim's value after its prefix.
    pub name: String,
    /// The groups claim's values after their prefix, and `system:authenticated`.
    pub groups: Vec<String>,
}

/// The JWT issuers of one API server's configuration.
pub(crate) struct JwtAuthenticator {
    issuers: Vec<Issuer>,
}

impl std::fmt::Debug for JwtAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<&str> = self.issuers.iter().map(|i| i.url.as_str()).collect();
        f.debug_struct("JwtAuthenticator")
            .field("issuers", &urls)
            .finish()
    }
}

struct Issuer {
    url: String,
    audiences: Vec<String>,
    username: Mapping,
    groups: Option<Mapping>,
    client: reqwest::Client,
    keys: tokio::sync::Mutex<Option<Keys>>,
}

struct Mapping {
    claim: String,
    prefix: String,
}

struct Keys {
    fetched: Instant,
    set: JwkSet,
}

impl JwtAuthenticator {
    /// The authenticator of an `AuthenticationConfiguration` file, or kube-apiserver's words
    /// for why it does not start with it.
    ///
    /// # Errors
    /// The field that is wrong, as kube-apiserver names it.
    pub(crate) fn from_configuration(text: &str) -> Result<Self, String> {
        let document: Value = serde_saphyr::from_str(text).map_err(|err| {
            format!(
                "failed to load AuthenticationConfiguration: {}",
                err.without_snippet()
            )
        })?;
        let api_version = document["apiVersion"].as_str().unwrap_or_default();
        if !matches!(
            api_version,
            "apiserver.config.k8s.io/v1" | "apiserver.config.k8s.io/v1beta1"
        ) || document["kind"] != "AuthenticationConfiguration"
        {
            return Err(format!(
                "failed to load AuthenticationConfiguration: no kind \"{}\" is registered for version \"{api_version}\"",
                document["kind"].as_str().unwrap_or_default()
            ));
        }
        let entries = document["jwt"].as_array().cloned().unwrap_or_default();
        let mut issuers: Vec<Issuer> = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let issuer = issuer(entry, index)?;
            if issuers.iter().any(|other| other.url == issuer.url) {
                return Err(format!(
                    "jwt[{index}].issuer.url: Duplicate value: \"{}\"",
                    issuer.url
                ));
            }
            issuers.push(issuer);
        }
        Ok(JwtAuthenticator { issuers })
    }

    /// Who `token` names, if one of the issuers signed it for one of its audiences and it is
    /// valid at `now` (seconds since the epoch, the lab's clock); `None` otherwise.
    pub(crate) async fn authenticate(&self, token: &str, now: i64) -> Option<JwtUser> {
        if token.len() > MAX_TOKEN_BYTES {
            return None;
        }
        let header = jsonwebtoken::decode_header(token).ok()?;
        if !ALGORITHMS.contains(&header.alg) {
            return None;
        }
        let iss = unverified_issuer(token)?;
        let issuer = self.issuers.iter().find(|i| i.url == iss)?;
        let claims = issuer.verified_claims(token, &header).await?;
        let expires = claims.get("exp").and_then(Value::as_i64)?;
        let not_before = claims.get("nbf").and_then(Value::as_i64);
        if expires <= now || not_before.is_some_and(|nbf| nbf > now) {
            return None;
        }
        issuer.user(&claims)
    }
}

/// One `jwt[]` entry, checked as kube-apiserver checks it.
fn issuer(entry: &Value, index: usize) -> Result<Issuer, String> {
    let at = |field: &str| format!("jwt[{index}].{field}");
    let url = entry["issuer"]["url"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if !url.starts_with("https://") {
        return Err(format!(
            "{}: Invalid value: \"{url}\": URL scheme must be https",
            at("issuer.url")
        ));
    }
    let audiences: Vec<String> = entry["issuer"]["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    if audiences.is_empty() {
        return Err(format!(
            "{}: Required value: at least one issuer.audiences is required",
            at("issuer.audiences")
        ));
    }
    if audiences.len() > 1 && entry["issuer"]["audienceMatchPolicy"] != "MatchAny" {
        return Err(format!(
            "{}: Invalid value: \"\": audienceMatchPolicy must be MatchAny for multiple audiences",
            at("issuer.audienceMatchPolicy")
        ));
    }
    let ca = entry["issuer"]["certificateAuthority"].as_str();
    let client = client(ca).map_err(|why| {
        format!(
            "{}: Invalid value: {why}",
            at("issuer.certificateAuthority")
        )
    })?;
    let username = mapping(&entry["claimMappings"]["username"]).ok_or_else(|| {
        format!(
            "{}: Required value: claim or expression is required",
            at("claimMappings.username")
        )
    })?;
    let groups = match &entry["claimMappings"]["groups"] {
        Value::Null => None,
        groups => Some(mapping(groups).ok_or_else(|| {
            format!(
                "{}: Required value: prefix is required when claim is set",
                at("claimMappings.groups")
            )
        })?),
    };
    Ok(Issuer {
        url,
        audiences,
        username,
        groups,
        client,
        keys: tokio::sync::Mutex::new(None),
    })
}

/// A claim with its prefix: kube-apiserver requires the prefix (empty to disable) when the
/// claim is set.
fn mapping(value: &Value) -> Option<Mapping> {
    Some(Mapping {
        claim: value["claim"]
            .as_str()
            .filter(|c| !c.is_empty())?
            .to_owned(),
        prefix: value["prefix"].as_str()?.to_owned(),
    })
}

/// An HTTPS client trusting the PEM certificates of `ca`, else the system's roots.
fn client(ca: Option<&str>) -> Result<reqwest::Client, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(pem) => {
            for certificate in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let certificate =
                    certificate.map_err(|_| "the certificate authority is no PEM".to_owned())?;
                roots
                    .add(certificate)
                    .map_err(|err| format!("the certificate authority does not parse: {err}"))?;
            }
            if roots.is_empty() {
                return Err("the certificate authority holds no certificate".to_owned());
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            let (_added, _ignored) = roots.add_parsable_certificates(native.certs);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| err.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(FETCH_TIMEOUT)
        .build()
        .map_err(|err| err.to_string())
}

/// The `iss` claim of a token, read before its signature is checked (only to pick the issuer
/// whose keys then check it).
fn unverified_issuer(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: Map<String, Value> = serde_json::from_slice(&bytes).ok()?;
    claims.get("iss")?.as_str().map(str::to_owned)
}

impl Issuer {
    /// The token's claims once its signature, issuer and audience hold.
    async fn verified_claims(
        &self,
        token: &str,
        header: &jsonwebtoken::Header,
    ) -> Option<Map<String, Value>> {
        let set = self.keys_for(header.kid.as_deref()).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_audience(&self.audiences);
        validation.set_issuer(&[&self.url]);
        // `exp` and `nbf` are checked against the lab's clock, not the machine's.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.required_spec_claims = ["iss", "aud", "exp"].map(str::to_owned).into();
        let candidates = set.keys.iter().filter(|jwk| match &header.kid {
            Some(kid) => jwk.common.key_id.as_deref() == Some(kid.as_str()),
            None => true,
        });
        for jwk in candidates {
            let Ok(key) = DecodingKey::from_jwk(jwk) else {
                continue;
            };
            if let Ok(data) = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation) {
                return Some(data.claims);
            }
        }
        None
    }

    /// The issuer's key set, fetched when there is none, when it is old, or when it lacks
    /// `kid` (the issuer rotated its keys) and was not fetched a moment ago.
    async fn keys_for(&self, kid: Option<&str>) -> Option<JwkSet> {
        let mut cached = self.keys.lock().await;
        let stale = cached.as_ref().is_none_or(|keys| {
            let age = keys.fetched.elapsed();
            let lacks = kid.is_some_and(|kid| keys.set.find(kid).is_none());
            age > KEYS_LIFETIME || lacks && age > REFETCH_AFTER
        });
        if stale {
            match self.fetch_keys().await {
                Ok(set) => {
                    *cached = Some(Keys {
                        fetched: Instant::now(),
                        set,
                    });
                }
                Err(why) => tracing::info!(issuer = %self.url, %why, "jwt issuer keys not fetched"),
            }
        }
        cached.as_ref().map(|keys| keys.set.clone())
    }

    /// The discovery document, then the key set it names.
    async fn fetch_keys(&self) -> Result<JwkSet, String> {
        let discovery_url = format!(
            "{}/.well-known/openid-configuration",
            self.url.trim_end_matches('/')
        );
        let discovery: Value = self.fetch_json(&discovery_url, MAX_DISCOVERY_BYTES).await?;
        if discovery["issuer"].as_str() != Some(self.url.as_str()) {
            return Err(format!(
                "oidc: issuer did not match the issuer returned by provider, expected \"{}\" got \"{}\"",
                self.url,
                discovery["issuer"].as_str().unwrap_or_default()
            ));
        }
        let jwks_uri = discovery["jwks_uri"]
            .as_str()
            .filter(|uri| uri.starts_with("https://"))
            .ok_or("the discovery document names no https jwks_uri")?
            .to_owned();
        let keys: Value = self.fetch_json(&jwks_uri, MAX_JWKS_BYTES).await?;
        serde_json::from_value(keys).map_err(|err| format!("the key set does not parse: {err}"))
    }

    /// GETs `url` and reads at most `limit` bytes of JSON.
    async fn fetch_json(&self, url: &str, limit: usize) -> Result<Value, String> {
        let mut response = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|err| capstan_core::errors::error_chain(&err))?;
        if !response.status().is_success() {
            return Err(format!("{url} answered {}", response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| capstan_core::errors::error_chain(&err))?
        {
            if body.len() + chunk.len() > limit {
                return Err(format!("{url} answered more than {limit} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|err| format!("{url} answered no JSON: {err}"))
    }

    /// The user the verified `claims` name, with the configured prefixes; `None` when the
    /// username claim is missing, empty or not a string, an `email` username is not verified,
    /// or the groups claim is neither a string nor a list of strings.
    fn user(&self, claims: &Map<String, Value>) -> Option<JwtUser> {
        let name = claims
            .get(&self.username.claim)?
            .as_str()
            .filter(|n| !n.is_empty())?;
        // kube-apiserver: an `email` username counts only when `email_verified`, if present,
        // is true.
        if self.username.claim == "email"
            && claims
                .get("email_verified")
                .is_some_and(|verified| verified != &Value::Bool(true))
        {
            return None;
        }
        let mut groups = Vec::new();
        if let Some(mapping) = &self.groups {
            let values = match claims.get(&mapping.claim) {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::String(group)) => vec![group.clone()],
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| item.as_str().map(str::to_owned))
                    .collect::<Option<Vec<String>>>()?,
                Some(_) => return None,
            };
            groups.extend(values.into_iter().map(|g| format!("{}{g}", mapping.prefix)));
        }
        groups.push("system:authenticated".to_owned());
        Some(JwtUser {
            name: format!("{}{name}", self.username.prefix),
            groups,
        })
    }
}

#[cfg(test)]
mod tests;
