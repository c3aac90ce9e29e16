//! Admin kubeconfigs read from a VM (kubeadm's `admin.conf`, K3s's `k3s.yaml`), reduced to
//! what capstan expects of them before anything uses them.
//!
//! Root on a control plane can rewrite those files, and a full kubeconfig is a program: kube-rs
//! (like client-go) runs `exec` plugins, reads `tokenFile`s and certificate files, follows
//! `proxy-url` and honours `insecure-skip-tls-verify`. So such a file is never handed to the
//! kube crate. It is parsed here into [`AdminKubeconfig`]: one server, its CA and a client
//! certificate and key, all inline; anything else in the document is refused, naming the field
//! (never quoting the document: it holds a private key). The server must be the cluster's
//! declared endpoint ([`ApiEndpoint`]) and is replaced by where capstan itself dials it. The
//! kube client and the kubeconfig delivered to Flux are then built from these parts only.
//!
//! # Guarantees
//! - A refusal ([`KubeconfigRefused`]) names a field and what was expected; it never carries
//!   text from the document, so it may go to status and logs as it is.
//! - Documents over [`MAX_KUBECONFIG_BYTES`] are refused before they are parsed.
//! - `Debug` of an [`AdminKubeconfig`] shows the server, the CA's fingerprint and the
//!   kubeconfig's fingerprint, never the key.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use base64::Engine as _;
use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::fingerprint;

/// The largest kubeconfig accepted from a VM. kubeadm's `admin.conf` and K3s's `k3s.yaml` are
/// about 6 KiB (a CA, a client certificate chain and a key, base64-encoded); ten times that
/// leaves room for RSA 4096 keys and CA bundles, and keeps a hostile file from costing more.
pub const MAX_KUBECONFIG_BYTES: usize = 64 * 1024;

/// How many certificates a CA bundle or a client certificate chain may hold.
const MAX_CERTIFICATES: usize = 8;

/// Where a cluster's API is, as capstan (not a VM) knows it: the endpoint its file declares,
/// and where capstan dials it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiEndpoint {
    host: String,
    port: u16,
    node_loopback: bool,
    lab_address: Option<SocketAddr>,
}

impl ApiEndpoint {
    /// The declared endpoint `host:port`: the only server a kubeconfig may name, and the one
    /// capstan dials.
    pub fn declared(host: &str, port: u16) -> Self {
        ApiEndpoint {
            host: host.trim_end_matches('.').to_ascii_lowercase(),
            port,
            node_loopback: false,
            lab_address: None,
        }
    }

    /// Also accepts the node's own loopback at the endpoint's port as the kubeconfig's server:
    /// K3s writes `https://127.0.0.1:6443` into `k3s.yaml`. capstan still dials the endpoint.
    #[must_use]
    pub fn or_node_loopback(mut self) -> Self {
        self.node_loopback = true;
        self
    }

    /// Dials `address` instead of the endpoint, verifying the server's certificate for the
    /// endpoint's host name: a lab serves each endpoint on a loopback port of its own (its
    /// kubeconfigs name that address, which is accepted too). Only the operator says so
    /// (`run --lab`), never a VM.
    #[must_use]
    pub fn served_at(mut self, address: SocketAddr) -> Self {
        self.lab_address = Some(address);
        self
    }

    /// `https://host:port`.
    pub fn url(&self) -> String {
        url_of(&self.host, self.port)
    }

    /// Whether a kubeconfig may name `server`.
    fn accepts(&self, server: &reqwest::Url) -> bool {
        let Some(host) = server.host_str() else {
            return false;
        };
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let port = server.port_or_known_default();
        let ip = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok();
        let is_loopback = host == "localhost" || ip.is_some_and(|ip| ip.is_loopback());
        (host == self.host && port == Some(self.port))
            || (self.node_loopback && is_loopback && port == Some(self.port))
            || self
                .lab_address
                .is_some_and(|address| ip == Some(address.ip()) && port == Some(address.port()))
    }

    /// The server capstan dials and the name the server's certificate must carry when that
    /// is not the server's host.
    fn dialled(&self) -> (String, Option<String>) {
        match self.lab_address {
            Some(address) => (
                url_of(&address.ip().to_string(), address.port()),
                Some(self.host.clone()),
            ),
            None => (self.url(), None),
        }
    }
}

fn url_of(host: &str, port: u16) -> String {
    if host.parse::<Ipv6Addr>().is_ok() {
        format!("https://[{host}]:{port}")
    } else {
        format!("https://{host}:{port}")
    }
}

/// A kubeconfig from a VM was refused. No variant carries text from the document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeconfigRefused {
    /// The document is larger than [`MAX_KUBECONFIG_BYTES`].
    #[error("it is {bytes} bytes, more than the {MAX_KUBECONFIG_BYTES} accepted")]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// The document is not YAML.
    #[error("it is not a YAML document{}", at(*line, *column))]
    NotYaml {
        /// Line of the fault, when known.
        line: u64,
        /// Column of the fault, when known.
        column: u64,
    },
    /// A field holds the wrong kind of value.
    #[error("{field} must be {expected}")]
    Shape {
        /// Where, e.g. `users[0].user`.
        field: String,
        /// What it must be.
        expected: &'static str,
    },
    /// A field capstan needs is missing.
    #[error("{field} is missing")]
    Missing {
        /// Where.
        field: String,
    },
    /// A field capstan does not honour from a VM.
    #[error("{field} is not accepted: {why}")]
    NotAccepted {
        /// Where, e.g. `users[0].user.exec`.
        field: String,
        /// Why it is refused.
        why: &'static str,
    },
    /// The server is not the cluster's declared endpoint.
    #[error("{field} is not the cluster's endpoint {endpoint}: capstan talks to no other server")]
    Server {
        /// Where.
        field: String,
        /// The declared endpoint.
        endpoint: String,
    },
    /// Certificate or key data that does not decode.
    #[error("{field} is not {expected}")]
    Data {
        /// Where.
        field: String,
        /// What it must be.
        expected: &'static str,
    },
}

fn at(line: u64, column: u64) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(" (line {line}, column {column})")
    }
}

/// An admin kubeconfig reduced to what capstan uses: the server capstan dials, the CA it
/// verifies that server with, and a client certificate and key. Built by
/// [`AdminKubeconfig::reduce`] from a document a VM gave; nothing else of that document
/// survives.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminKubeconfig {
    server: String,
    tls_server_name: Option<String>,
    certificate_authority: Vec<Vec<u8>>,
    ca_fingerprint: String,
    client_certificate: Vec<Vec<u8>>,
    client_key: Pem,
    expiry: Option<Timestamp>,
    fingerprint: String,
}

/// One PEM block: its label and contents (DER).
#[derive(Clone, PartialEq, Eq)]
struct Pem {
    label: String,
    der: Vec<u8>,
}

impl fmt::Debug for AdminKubeconfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminKubeconfig")
            .field("server", &self.server)
            .field("tls_server_name", &self.tls_server_name)
            .field("ca", &self.ca_fingerprint)
            .field("kubeconfig", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// The fields honoured in each part of the document; every other field is refused.
const TOP: &[&str] = &[
    "apiVersion",
    "kind",
    "clusters",
    "contexts",
    "current-context",
    "preferences",
    "users",
];
const CLUSTER: &[&str] = &["server", "certificate-authority-data"];
const CONTEXT: &[&str] = &["cluster", "user"];
const USER: &[&str] = &["client-certificate-data", "client-key-data"];

/// Why a known field is refused (others are refused as unknown).
fn refusal(key: &str) -> &'static str {
    match key {
        "exec" | "auth-provider" => "capstan runs no credential plugin a VM names",
        "token" | "tokenFile" | "username" | "password" => {
            "capstan authenticates to a cluster with the client certificate only"
        }
        "client-certificate" | "client-key" | "certificate-authority" => {
            "capstan reads no file a VM names; certificates must be inline (*-data)"
        }
        "insecure-skip-tls-verify" => "capstan always verifies the server against the CA",
        "tls-server-name" | "proxy-url" => "capstan alone decides where it connects",
        "as" | "as-uid" | "as-groups" | "as-user-extra" => "capstan impersonates nobody",
        _ => "capstan does not know it, and honours nothing it does not know",
    }
}

impl AdminKubeconfig {
    /// Parses `text`, a kubeconfig a VM gave, into its server, CA and client credentials,
    /// refusing any other field; its server must be one `endpoint` accepts, and is replaced
    /// by where capstan dials that endpoint. Its fingerprint is made with `key`, the daemon's.
    ///
    /// # Errors
    /// [`KubeconfigRefused`], naming the field.
    pub fn reduce(
        text: &str,
        endpoint: &ApiEndpoint,
        key: &fingerprint::FingerprintKey,
    ) -> Result<Self, KubeconfigRefused> {
        if text.len() > MAX_KUBECONFIG_BYTES {
            return Err(KubeconfigRefused::TooLarge { bytes: text.len() });
        }
        let document = parse(text)?;
        let top = mapping(&document, "the document")?;
        only(top, "", TOP)?;
        if let Some(preferences) = top.get("preferences")
            && !preferences.is_null()
            && !mapping(preferences, "preferences")?.is_empty()
        {
            return Err(KubeconfigRefused::NotAccepted {
                field: "preferences".to_owned(),
                why: "it must be empty",
            });
        }
        // Credentials first: they are what a hostile file most wants honoured.
        let users = entries(top, "users", "user", USER)?;
        let clusters = entries(top, "clusters", "cluster", CLUSTER)?;
        let contexts = entries(top, "contexts", "context", CONTEXT)?;
        let current = string(top, "", "current-context")?;
        let (context_at, context) = find(&contexts, "contexts", current, "current-context")?;
        let context_field = format!("contexts[{context_at}].context");
        let cluster_name = string(context, &context_field, "cluster")?;
        let user_name = string(context, &context_field, "user")?;
        let (cluster_at, cluster) = find(&clusters, "clusters", cluster_name, &context_field)?;
        let (user_at, user) = find(&users, "users", user_name, &context_field)?;
        let cluster_field = format!("clusters[{cluster_at}].cluster");
        let user_field = format!("users[{user_at}].user");

        let server_field = format!("{cluster_field}.server");
        let server = reqwest::Url::parse(string(cluster, &cluster_field, "server")?)
            .ok()
            .filter(|url| {
                url.scheme() == "https"
                    && url.username().is_empty()
                    && url.password().is_none()
                    && matches!(url.path(), "" | "/")
                    && url.query().is_none()
                    && url.fragment().is_none()
            })
            .ok_or_else(|| KubeconfigRefused::Data {
                field: server_field.clone(),
                expected: "an https:// URL with no path",
            })?;
        if !endpoint.accepts(&server) {
            return Err(KubeconfigRefused::Server {
                field: server_field,
                endpoint: endpoint.url(),
            });
        }

        let certificate_authority =
            certificates(cluster, &cluster_field, "certificate-authority-data")?;
        let client_certificate = certificates(user, &user_field, "client-certificate-data")?;
        let client_key = private_key(user, &user_field)?;
        let expiry =
            expiry(&client_certificate[0]).map_err(|expected| KubeconfigRefused::Data {
                field: format!("{user_field}.client-certificate-data"),
                expected,
            })?;
        let (server, tls_server_name) = endpoint.dialled();
        let mut reduced = AdminKubeconfig {
            server,
            tls_server_name,
            ca_fingerprint: ca_fingerprint(&certificate_authority),
            certificate_authority,
            client_certificate,
            client_key,
            expiry: Some(expiry),
            fingerprint: String::new(),
        };
        reduced.fingerprint = key.fingerprint(reduced.render().as_bytes());
        Ok(reduced)
    }

    /// The server capstan dials (`https://host:port`).
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The name the server's certificate must carry, when it is not the server's host (a
    /// lab's loopback address standing for the endpoint).
    pub fn tls_server_name(&self) -> Option<&str> {
        self.tls_server_name.as_deref()
    }

    /// The CA certificates the server is verified with (DER).
    pub fn certificate_authority(&self) -> &[Vec<u8>] {
        &self.certificate_authority
    }

    /// The CA's fingerprint: SHA-256 of its certificate in the `AB:CD:…` form (what
    /// `openssl x509 -noout -fingerprint -sha256` prints); of the certificates one after the
    /// other for a bundle. Public: it identifies the CA, reveals nothing secret.
    pub fn ca_fingerprint(&self) -> &str {
        &self.ca_fingerprint
    }

    /// The CA as PEM (what the CA record keeps, for an operator to read).
    pub fn ca_pem(&self) -> String {
        self.certificate_authority
            .iter()
            .map(|der| pem("CERTIFICATE", der))
            .collect()
    }

    /// When the client certificate expires.
    pub fn client_certificate_expiry(&self) -> Option<Timestamp> {
        self.expiry
    }

    /// The keyed fingerprint of [`AdminKubeconfig::render`]: how status and Flux's Secret refer to
    /// this kubeconfig.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The client certificate chain and key, PEM, as kube's `client-*-data` take them
    /// (base64 of PEM). A secret.
    pub(super) fn client_data(&self) -> (String, String) {
        let certificate: String = self
            .client_certificate
            .iter()
            .map(|der| pem("CERTIFICATE", der))
            .collect();
        let key = pem(&self.client_key.label, &self.client_key.der);
        let encode = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        (encode(&certificate), encode(&key))
    }

    /// The kubeconfig made of these parts only, what Flux receives: the server capstan dials
    /// (with `tls-server-name` when that is a lab's address), the CA and the client
    /// certificate and key, inline. Deterministic, so equal parts give an equal text. Holds
    /// the private key: a secret.
    pub fn render(&self) -> String {
        let name = self.tls_server_name.as_deref().unwrap_or("kubernetes");
        let mut cluster = Map::new();
        cluster.insert("server".to_owned(), json!(self.server));
        if let Some(tls_server_name) = &self.tls_server_name {
            cluster.insert("tls-server-name".to_owned(), json!(tls_server_name));
        }
        cluster.insert(
            "certificate-authority-data".to_owned(),
            json!(base64::engine::general_purpose::STANDARD.encode(self.ca_pem())),
        );
        let (certificate, key) = self.client_data();
        let document = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "contexts": [{"name": format!("admin@{name}"), "context": {"cluster": name, "user": "admin"}}],
            "current-context": format!("admin@{name}"),
            "users": [{"name": "admin", "user": {
                "client-certificate-data": certificate,
                "client-key-data": key,
            }}],
        });
        serde_saphyr::to_string(&document).unwrap_or_else(|_| document.to_string())
    }
}

/// The document as a JSON value, or where YAML parsing failed (never the parser's message:
/// it quotes the lines around the fault).
fn parse(text: &str) -> Result<Value, KubeconfigRefused> {
    let options = serde_saphyr::options! { with_snippet: false };
    serde_saphyr::from_str_with_options(text, options).map_err(|err| {
        let (line, column) = err
            .location()
            .map_or((0, 0), |location| (location.line(), location.column()));
        KubeconfigRefused::NotYaml { line, column }
    })
}

fn mapping<'a>(value: &'a Value, field: &str) -> Result<&'a Map<String, Value>, KubeconfigRefused> {
    value.as_object().ok_or_else(|| KubeconfigRefused::Shape {
        field: field.to_owned(),
        expected: "a mapping",
    })
}

fn joined(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// Refuses every key of `map` not in `allowed`. An unknown key is named as written, escaped
/// and shortened: a key is not a secret, but it is the VM's text.
fn only(map: &Map<String, Value>, parent: &str, allowed: &[&str]) -> Result<(), KubeconfigRefused> {
    match map.keys().find(|key| !allowed.contains(&key.as_str())) {
        None => Ok(()),
        Some(key) => {
            let shown: String = key.chars().take(40).flat_map(char::escape_debug).collect();
            Err(KubeconfigRefused::NotAccepted {
                field: joined(parent, &shown),
                why: refusal(key),
            })
        }
    }
}

fn string<'a>(
    map: &'a Map<String, Value>,
    parent: &str,
    key: &str,
) -> Result<&'a str, KubeconfigRefused> {
    match map.get(key) {
        None | Some(Value::Null) => Err(KubeconfigRefused::Missing {
            field: joined(parent, key),
        }),
        Some(value) => value.as_str().ok_or_else(|| KubeconfigRefused::Shape {
            field: joined(parent, key),
            expected: "a string",
        }),
    }
}

/// An entry of `clusters`, `contexts` or `users`: its name and its body.
type Entry<'a> = (&'a str, &'a Map<String, Value>);

/// The entries of the list `list` (`clusters`, `contexts`, `users`): each a `name` and a
/// mapping under `inner` holding only `allowed` keys. Returns (name, inner mapping) pairs.
fn entries<'a>(
    top: &'a Map<String, Value>,
    list: &str,
    inner: &str,
    allowed: &[&str],
) -> Result<Vec<Entry<'a>>, KubeconfigRefused> {
    let items = match top.get(list) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(value) => value.as_array().ok_or_else(|| KubeconfigRefused::Shape {
            field: list.to_owned(),
            expected: "a list",
        })?,
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let field = format!("{list}[{index}]");
            let entry = mapping(item, &field)?;
            only(entry, &field, &["name", inner])?;
            let body_field = format!("{field}.{inner}");
            let body = mapping(
                entry.get(inner).ok_or_else(|| KubeconfigRefused::Missing {
                    field: body_field.clone(),
                })?,
                &body_field,
            )?;
            only(body, &body_field, allowed)?;
            Ok((string(entry, &field, "name")?, body))
        })
        .collect()
}

/// The entry named `name` in `entries` (of the list `list`), with its index; `by` names the
/// field that refers to it.
fn find<'a>(
    entries: &[Entry<'a>],
    list: &str,
    name: &str,
    by: &str,
) -> Result<(usize, &'a Map<String, Value>), KubeconfigRefused> {
    entries
        .iter()
        .position(|(entry, _)| *entry == name)
        .map(|index| (index, entries[index].1))
        .ok_or_else(|| KubeconfigRefused::Missing {
            field: format!("the entry of {list} that {by} names"),
        })
}

/// Base64 of PEM, as kubeconfigs carry certificates and keys: the PEM blocks, in order.
fn pem_blocks(
    map: &Map<String, Value>,
    parent: &str,
    key: &str,
) -> Result<Vec<Pem>, KubeconfigRefused> {
    let field = joined(parent, key);
    let data = string(map, parent, key)?;
    let invalid = |expected| KubeconfigRefused::Data {
        field: field.clone(),
        expected,
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| invalid("base64"))?;
    let mut blocks = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(&bytes) {
        let block = block.map_err(|_| invalid("PEM"))?;
        if blocks.len() == MAX_CERTIFICATES {
            return Err(invalid("at most 8 PEM blocks"));
        }
        blocks.push(Pem {
            label: block.label,
            der: block.contents,
        });
    }
    if blocks.is_empty() {
        return Err(invalid("PEM"));
    }
    Ok(blocks)
}

/// The X.509 certificates of a `*-data` field (DER), each checked to parse.
fn certificates(
    map: &Map<String, Value>,
    parent: &str,
    key: &str,
) -> Result<Vec<Vec<u8>>, KubeconfigRefused> {
    let blocks = pem_blocks(map, parent, key)?;
    let valid = blocks.iter().all(|block| {
        block.label == "CERTIFICATE" && x509_parser::parse_x509_certificate(&block.der).is_ok()
    });
    if !valid {
        return Err(KubeconfigRefused::Data {
            field: joined(parent, key),
            expected: "PEM X.509 certificates",
        });
    }
    Ok(blocks.into_iter().map(|block| block.der).collect())
}

/// `client-key-data`: one PEM private key (PKCS#8, PKCS#1 or SEC1, as kubeadm and K3s write).
fn private_key(user: &Map<String, Value>, parent: &str) -> Result<Pem, KubeconfigRefused> {
    let mut blocks = pem_blocks(user, parent, "client-key-data")?;
    let label = blocks[0].label.as_str();
    if blocks.len() != 1 || !matches!(label, "PRIVATE KEY" | "RSA PRIVATE KEY" | "EC PRIVATE KEY") {
        return Err(KubeconfigRefused::Data {
            field: joined(parent, "client-key-data"),
            expected: "one PEM private key",
        });
    }
    Ok(blocks.remove(0))
}

fn expiry(der: &[u8]) -> Result<Timestamp, &'static str> {
    let (_, certificate) =
        x509_parser::parse_x509_certificate(der).map_err(|_| "an X.509 certificate")?;
    Timestamp::from_second(certificate.validity().not_after.timestamp())
        .map_err(|_| "a certificate whose expiry is in range")
}

fn ca_fingerprint(certificates: &[Vec<u8>]) -> String {
    fingerprint::certificate_sha256(&certificates.concat())
}

/// One PEM block, lines of 64 characters.
fn pem(label: &str, der: &[u8]) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut text = format!("-----BEGIN {label}-----\n");
    for line in encoded.as_bytes().chunks(64) {
        text.push_str(std::str::from_utf8(line).unwrap_or_default());
        text.push('\n');
    }
    text.push_str(&format!("-----END {label}-----\n"));
    text
}

#[cfg(test)]
mod tests;
