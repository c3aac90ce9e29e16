//! `kubernetes.registries`: where the nodes' container runtime pulls images from (mirrors of a
//! registry, in order), the credentials it presents to a registry or a mirror, and the CA a
//! mirror's certificate is signed by. One field for every distribution; each renders it in its
//! runtime's own files (CRI-O's `registries.conf.d` and auth file, K3s's `registries.yaml`,
//! Talos's `RegistryMirrorConfig`, `RegistryAuthConfig` and `RegistryTLSConfig` documents).
//!
//! Credentials never live in the file: a password comes from a secret source
//! (`passwordFrom`), read at run time under the operator's rules and written only to the
//! node. What the file says (and never the password) is part of every machine's spec hash: a
//! change replaces the machines, as the runtime reads these files when it starts.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::diagnostic::{Diagnostic, SourceFile};
use super::secret_source::SecretSource;
use super::values::is_dns1123_subdomain;

/// The most registries one file mirrors, and the most hosts it gives credentials or a CA for.
pub const MAX_REGISTRIES: usize = 32;
/// The most mirror endpoints one registry lists (a runtime tries them in order).
pub const MAX_ENDPOINTS: usize = 8;
/// The largest CA bundle, in bytes of PEM: a few certificates.
pub const MAX_CA_BYTES: usize = 64 * 1024;

/// Registry mirrors, credentials and CAs for every node's container runtime.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Registries {
    /// Mirrors by the registry they stand in for (`docker.io`, `registry.k8s.io`,
    /// `ghcr.io`): a pull of `docker.io/library/nginx` goes to each endpoint in order, then to
    /// the registry itself.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(length(max = MAX_REGISTRIES))]
    pub mirrors: BTreeMap<String, Mirror>,
    /// Credentials by registry host (`HOST[:PORT]`, a mirror's or a registry's): the
    /// runtime presents them (HTTP Basic) to that host.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(length(max = MAX_REGISTRIES))]
    pub credentials: BTreeMap<String, RegistryCredentials>,
    /// PEM CA certificates by registry host (`HOST[:PORT]`): the runtime trusts that CA for
    /// the host's HTTPS certificate (a mirror with a private CA). Not a secret.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(length(max = MAX_REGISTRIES))]
    pub ca: BTreeMap<String, String>,
}

/// The mirrors of one registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mirror {
    /// Mirror URLs, `https://HOST[:PORT]` (or `http://` for a mirror without TLS), tried in
    /// order.
    #[schemars(length(min = 1, max = MAX_ENDPOINTS))]
    pub endpoints: Vec<String>,
}

/// What a node presents to one registry host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistryCredentials {
    /// The user name (not a secret: the password is).
    pub username: String,
    /// Where to read the password (or token) at run time, under the operator's rules: the
    /// variable `CAPSTAN_CLUSTER_<CLUSTER>_REGISTRY_<HOST>_PASSWORD` (the host with every
    /// character but letters and digits as `_`), or a file in `clusters/<cluster>/` of the
    /// daemon's `--secrets-dir`. Never write the password here.
    pub password_from: SecretSource,
}

/// A mirror endpoint, parsed: its scheme and its `HOST[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint<'a> {
    /// Whether it is reached over TLS (`https://`).
    pub tls: bool,
    /// `HOST[:PORT]`, as credentials and CAs are keyed.
    pub host: &'a str,
}

/// `url` as a mirror endpoint: `http(s)://HOST[:PORT]` with an optional trailing `/`; `None`
/// for anything else (a path, a user, a query).
pub fn endpoint(url: &str) -> Option<Endpoint<'_>> {
    let (tls, rest) = match url.split_once("://")? {
        ("https", rest) => (true, rest),
        ("http", rest) => (false, rest),
        _ => return None,
    };
    let host = rest.strip_suffix('/').unwrap_or(rest);
    is_registry_host(host).then_some(Endpoint { tls, host })
}

/// Whether `host` is a registry host as runtimes key it: a lowercase DNS name or an IPv4
/// address, with an optional port.
pub fn is_registry_host(host: &str) -> bool {
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p != 0));
    !name.is_empty() && port_ok && is_dns1123_subdomain(name)
}

/// The word a registry host gives the name of its password's environment variable:
/// upper-case letters and digits, every other character `_` (`mirror.example:5000` →
/// `MIRROR_EXAMPLE_5000`).
pub fn variable_word(host: &str) -> String {
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

impl Registries {
    /// Whether the file says nothing of registries.
    pub fn is_empty(&self) -> bool {
        self.mirrors.is_empty() && self.credentials.is_empty() && self.ca.is_empty()
    }

    /// The registry host of every mirror endpoint, in order, once each.
    pub fn endpoint_hosts(&self) -> Vec<&str> {
        let mut hosts: Vec<&str> = Vec::new();
        for url in self.mirrors.values().flat_map(|m| &m.endpoints) {
            if let Some(endpoint) = endpoint(url)
                && !hosts.contains(&endpoint.host)
            {
                hosts.push(endpoint.host);
            }
        }
        hosts
    }

    /// The digest of what the file says (mirrors, user names, where each password comes
    /// from, CAs; never a password): the first 12 hex digits of a sha1 over its canonical
    /// JSON, `None` when it says nothing (the machines keep the hash they had).
    pub fn digest(&self) -> Option<smol_str::SmolStr> {
        use sha1::{Digest, Sha1};
        if self.is_empty() {
            return None;
        }
        // Maps are ordered and fields fixed: the JSON is canonical as it is.
        let text = serde_json::to_string(self).expect("registries serialise as JSON");
        let digest = Sha1::digest(text.as_bytes());
        let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        Some(hex.into())
    }
}

/// The password a node is given for `host`, read from its source at run time. `Debug` never
/// shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedCredentials {
    /// The user name.
    pub username: String,
    /// The password, as read.
    pub password: String,
}

impl std::fmt::Debug for ResolvedCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// `kubernetes.registries` with its passwords read: what a distribution renders.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResolvedRegistries {
    /// Mirror endpoints by registry, as the file says.
    pub mirrors: BTreeMap<String, Vec<String>>,
    /// Credentials by registry host.
    pub credentials: BTreeMap<String, ResolvedCredentials>,
    /// CA PEM by registry host.
    pub ca: BTreeMap<String, String>,
}

impl ResolvedRegistries {
    /// `registries` with each password `password(host, source)` gives.
    ///
    /// # Errors
    /// The first error `password` returns.
    pub fn resolve<E>(
        registries: &Registries,
        mut password: impl FnMut(&str, &SecretSource) -> Result<String, E>,
    ) -> Result<Self, E> {
        let mut credentials = BTreeMap::new();
        for (host, given) in &registries.credentials {
            credentials.insert(
                host.clone(),
                ResolvedCredentials {
                    username: given.username.clone(),
                    password: password(host, &given.password_from)?,
                },
            );
        }
        Ok(ResolvedRegistries {
            mirrors: registries
                .mirrors
                .iter()
                .map(|(registry, mirror)| (registry.clone(), mirror.endpoints.clone()))
                .collect(),
            credentials,
            ca: registries.ca.clone(),
        })
    }

    /// `registries` with a placeholder for each password: what validation and previews render
    /// (no secret is read to judge or show a file).
    pub fn placeholders(registries: &Registries) -> Self {
        let resolved: Result<Self, std::convert::Infallible> =
            Self::resolve(registries, |host, _| {
                Ok(format!("<passwordFrom of {host}, read at run time>"))
            });
        match resolved {
            Ok(resolved) => resolved,
            Err(never) => match never {},
        }
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.mirrors.is_empty() && self.credentials.is_empty() && self.ca.is_empty()
    }
}

const FIELD: &str = "spec.kubernetes.registries";

const HOST_HINT: &str = "write a registry host as runtimes key it: a lowercase DNS name or an IPv4 address with an optional port, e.g. `docker.io` or `mirror.example:5000`";

/// The rules of `kubernetes.registries`: hosts and URLs runtimes accept, no credential or key
/// written inline, passwords from sources whose variables differ.
pub fn check(out: &mut Vec<Diagnostic>, registries: &Registries, file: &SourceFile) {
    for (registry, mirror) in &registries.mirrors {
        let path = format!("{FIELD}.mirrors.{registry}");
        if !is_registry_host(registry) {
            out.push(
                file.error(&path, format!("`{registry}` is not a registry name"))
                    .with_hint(HOST_HINT),
            );
        }
        if mirror.endpoints.is_empty() || mirror.endpoints.len() > MAX_ENDPOINTS {
            out.push(file.error(
                &format!("{path}.endpoints"),
                format!("list from 1 to {MAX_ENDPOINTS} mirror URLs"),
            ));
        }
        for (index, url) in mirror.endpoints.iter().enumerate() {
            check_endpoint(out, file, &format!("{path}.endpoints[{index}]"), url);
        }
    }
    check_credentials(out, registries, file);
    for (host, pem) in &registries.ca {
        let path = format!("{FIELD}.ca.{host}");
        if !is_registry_host(host) {
            out.push(
                file.error(&path, format!("`{host}` is not a registry host"))
                    .with_hint(HOST_HINT),
            );
        }
        if let Some(problem) = ca_problem(pem) {
            out.push(file.error(&path, problem).with_hint(
                "give the PEM certificate (`-----BEGIN CERTIFICATE-----`) of the CA that signed the registry's certificate; a key never goes in Git",
            ));
        }
    }
}

fn check_endpoint(out: &mut Vec<Diagnostic>, file: &SourceFile, path: &str, url: &str) {
    if url.contains('@') {
        out.push(
            file.error(path, "a mirror URL carries no user or password")
                .with_hint("give the credentials under `credentials`, the password from `passwordFrom` (a secret source read at run time)"),
        );
    } else if endpoint(url).is_none() {
        out.push(
            file.error(path, format!("`{url}` is not a mirror URL"))
                .with_hint("write `https://HOST[:PORT]` (or `http://` for a mirror without TLS), without a path"),
        );
    }
}

fn check_credentials(out: &mut Vec<Diagnostic>, registries: &Registries, file: &SourceFile) {
    let mut variables: BTreeMap<String, &str> = BTreeMap::new();
    for (host, credentials) in &registries.credentials {
        let path = format!("{FIELD}.credentials.{host}");
        if !is_registry_host(host) {
            out.push(
                file.error(&path, format!("`{host}` is not a registry host"))
                    .with_hint(HOST_HINT),
            );
        }
        let username = credentials.username.trim();
        if username.is_empty() || username.contains([':', '\n', '\r']) {
            out.push(
                file.error(
                    &format!("{path}.username"),
                    "a user name is not empty and holds no `:` or line break (HTTP Basic)",
                )
                .with_hint("write the registry user's name; its password comes from passwordFrom"),
            );
        } else if let Some(what) = looks_like_a_key(username) {
            out.push(
                file.error(
                    &format!("{path}.username"),
                    format!("the user name looks like {what}"),
                )
                .with_hint(SECRET_HINT),
            );
        }
        SecretSource::check_form(
            out,
            file,
            &format!("{path}.passwordFrom"),
            &credentials.password_from,
        );
        let word = variable_word(host);
        if let Some(other) = variables.insert(word, host) {
            out.push(
                file.error(&path, format!("`{host}` and `{other}` would read their passwords from the same environment variable"))
                    .with_hint("the variable is named after the host with every character but letters and digits as `_`: give one of them a file source (`{file: ...}`) instead"),
            );
        }
    }
}

const SECRET_HINT: &str = "the file is in Git and in previews, so it never carries a secret: write the registry user's name here and read its password or token from `passwordFrom` (`{env: NAME}` or `{file: PATH}`, read at run time)";

/// What a user name that is a key or a token looks like, in words.
fn looks_like_a_key(value: &str) -> Option<&'static str> {
    if value.contains("-----BEGIN ") {
        return Some("a PEM block (a certificate or a key)");
    }
    if value.starts_with("eyJ") && value.matches('.').count() == 2 && value.len() > 30 {
        return Some("a JSON Web Token");
    }
    let encoded =
        |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-');
    (value.len() >= 64 && value.bytes().all(encoded))
        .then_some("encoded key material (a long token)")
}

/// Why `pem` is not a CA certificate bundle, if it is not.
fn ca_problem(pem: &str) -> Option<String> {
    if pem.len() > MAX_CA_BYTES {
        return Some(format!("the CA is larger than {MAX_CA_BYTES} bytes"));
    }
    if pem.contains("PRIVATE KEY") {
        return Some("this holds a private key, which never goes in Git".to_owned());
    }
    let certificates = pem.matches("-----BEGIN CERTIFICATE-----").count();
    if certificates == 0 || certificates != pem.matches("-----END CERTIFICATE-----").count() {
        return Some("not a PEM certificate".to_owned());
    }
    None
}

#[cfg(test)]
mod tests;
