//! The nodes' container runtime, as far as an image pull goes: it reads the registry
//! configuration the real runtime reads, from the files written to the VM (CRI-O's
//! `registries.conf.d` drop-ins and the `global_auth_file` its own drop-ins name, K3s's
//! `registries.yaml` as K3s read it at its last start, Talos's registry documents), and pulls
//! over real HTTP: each mirror of
//! the image's registry in order, then the registry itself, presenting the host's credentials
//! as HTTP Basic.
//!
//! The lab's networks reach only loopback addresses (where a test's servers listen): a
//! registry elsewhere (`docker.io`, `registry.k8s.io`) is unreachable, so a pull succeeds only
//! through a mirror the files name. A mirror is asked for the manifest
//! (`GET /v2/<name>/manifests/<reference>`, with containerd's `?ns=<registry>`); any answer but
//! 200 moves on to the next endpoint, as runtimes do. An `https://` endpoint is checked against
//! the CA the files give for its host (CRI-O's `/etc/containers/certs.d/<host>/*.crt`, K3s's
//! `configs.<host>.tls.ca_file`, Talos's `RegistryTLSConfig`) and nothing else: the lab's
//! VMs trust no public CA, and no registry they could reach has a certificate one signed.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Where CRI-O's registries drop-ins are.
pub const CRIO_REGISTRIES_DIR: &str = "/etc/containers/registries.conf.d/";
/// Where CRI-O's own drop-ins are.
pub const CRIO_CONF_DIR: &str = "/etc/crio/crio.conf.d/";
/// K3s's private registry configuration.
pub const K3S_REGISTRIES: &str = "/etc/rancher/k3s/registries.yaml";
/// Where `containers-certs.d(5)` keeps each registry host's CAs (`<dir><host>/*.crt`).
pub const CERTS_DIR: &str = "/etc/containers/certs.d/";
/// The most of a registry's answer the runtime reads (a manifest is a few KiB).
const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// How long one endpoint may take to answer.
const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(10);
/// Docker Hub's API host (`docker.io` names it).
const DOCKER_HUB_API: &str = "registry-1.docker.io";

/// One mirror endpoint: its scheme and `HOST[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Endpoint {
    tls: bool,
    host: String,
}

/// The registry configuration a runtime read. `Debug` shows no password.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RegistryHosts {
    mirrors: BTreeMap<String, Vec<Endpoint>>,
    /// `(user, password)` by `HOST[:PORT]`.
    auths: BTreeMap<String, (String, String)>,
    /// The PEM CAs trusted for a host's certificate, by `HOST[:PORT]`.
    cas: BTreeMap<String, String>,
}

impl std::fmt::Debug for RegistryHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryHosts")
            .field("mirrors", &self.mirrors)
            .field("auth_hosts", &self.auths.keys().collect::<Vec<_>>())
            .field("ca_hosts", &self.cas.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Which runtime pulls: containerd (K3s, Talos) names the registry in `?ns=`; CRI-O does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// CRI-O (kubeadm nodes).
    CriO,
    /// containerd (K3s and Talos).
    Containerd,
}

/// An endpoint URL (`http(s)://HOST[:PORT][/]`).
fn endpoint_of(url: &str) -> Option<Endpoint> {
    let (scheme, rest) = url.split_once("://")?;
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains('/') {
        return None;
    }
    Some(Endpoint {
        tls: scheme != "http",
        host: host.to_owned(),
    })
}

/// CRI-O's view: every `[[registry]]` of the `registries.conf.d` drop-ins (in name order, a
/// later one replacing a prefix), and the credentials of the auth file its
/// `[crio.image] global_auth_file` names.
///
/// # Errors
/// A drop-in or the auth file that does not read (CRI-O's words).
pub fn crio(files: &BTreeMap<String, String>) -> Result<RegistryHosts, String> {
    let mut hosts = RegistryHosts::default();
    let mut auth_file = None;
    for (path, text) in files {
        if let Some(host) = path
            .strip_prefix(CERTS_DIR)
            .and_then(|rest| rest.rsplit_once('/'))
            .filter(|(_, name)| name.ends_with(".crt"))
            .map(|(host, _)| host)
        {
            hosts.cas.entry(host.to_owned()).or_default().push_str(text);
        } else if path.starts_with(CRIO_REGISTRIES_DIR) && path.ends_with(".conf") {
            let table: toml::Table = text
                .parse()
                .map_err(|err| format!("loading registries configuration {path}: {err}"))?;
            let registries = table.get("registry").and_then(toml::Value::as_array);
            for registry in registries.into_iter().flatten() {
                crio_registry(&mut hosts, registry);
            }
        } else if path.starts_with(CRIO_CONF_DIR) && path.ends_with(".conf") {
            let table: toml::Table = text
                .parse()
                .map_err(|err| format!("reading CRI-O's configuration {path}: {err}"))?;
            if let Some(file) = table
                .get("crio")
                .and_then(|crio| crio.get("image"))
                .and_then(|image| image.get("global_auth_file"))
                .and_then(toml::Value::as_str)
            {
                auth_file = Some(file.to_owned());
            }
        }
    }
    if let Some(path) = auth_file.filter(|p| !p.is_empty()) {
        let text = files
            .get(&path)
            .ok_or_else(|| format!("reading the global auth file {path}: no such file"))?;
        hosts.auths = containers_auth(text).ok_or_else(|| {
            format!("reading the global auth file {path}: not a containers-auth.json file")
        })?;
    }
    Ok(hosts)
}

fn crio_registry(hosts: &mut RegistryHosts, registry: &toml::Value) {
    let name = registry
        .get("prefix")
        .or_else(|| registry.get("location"))
        .and_then(toml::Value::as_str);
    let Some(name) = name else { return };
    let mirrors = registry.get("mirror").and_then(toml::Value::as_array);
    let endpoints = mirrors
        .into_iter()
        .flatten()
        .filter_map(|mirror| {
            let location = mirror.get("location")?.as_str()?;
            let insecure = mirror
                .get("insecure")
                .and_then(toml::Value::as_bool)
                .unwrap_or(false);
            Some(Endpoint {
                tls: !insecure,
                host: location.trim_end_matches('/').to_owned(),
            })
        })
        .collect();
    hosts.mirrors.insert(name.to_owned(), endpoints);
}

/// `containers-auth.json(5)`: `auths.HOST.auth`, base64 of `USER:PASSWORD`.
fn containers_auth(text: &str) -> Option<BTreeMap<String, (String, String)>> {
    let file: Value = serde_json::from_str(text).ok()?;
    let mut out = BTreeMap::new();
    for (host, entry) in file.get("auths")?.as_object()? {
        let encoded = entry.get("auth")?.as_str()?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()?;
        let pair = String::from_utf8(decoded).ok()?;
        let (user, password) = pair.split_once(':')?;
        out.insert(host.clone(), (user.to_owned(), password.to_owned()));
    }
    Some(out)
}

/// K3s's view: `registries.yaml`'s `mirrors.REGISTRY.endpoint` and `configs.HOST.auth`.
///
/// # Errors
/// A file that does not read as K3s's format (K3s's words).
pub fn k3s(files: &BTreeMap<String, String>) -> Result<RegistryHosts, String> {
    let Some(text) = files.get(K3S_REGISTRIES) else {
        return Ok(RegistryHosts::default());
    };
    let file: Value = serde_saphyr::from_str(text)
        .map_err(|err| format!("failed to load registries.yaml: {err}"))?;
    let mut hosts = RegistryHosts::default();
    if let Some(mirrors) = file.get("mirrors").and_then(Value::as_object) {
        for (registry, mirror) in mirrors {
            let urls = mirror.get("endpoint").and_then(Value::as_array);
            let endpoints = urls
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter_map(endpoint_of)
                .collect();
            hosts.mirrors.insert(registry.clone(), endpoints);
        }
    }
    if let Some(configs) = file.get("configs").and_then(Value::as_object) {
        for (host, config) in configs {
            let auth = config.get("auth");
            let field = |name: &str| auth?.get(name)?.as_str().map(str::to_owned);
            if let (Some(user), Some(password)) = (field("username"), field("password")) {
                hosts.auths.insert(host.clone(), (user, password));
            }
            let ca_file = config.pointer("/tls/ca_file").and_then(Value::as_str);
            if let Some(ca_file) = ca_file {
                let pem = files.get(ca_file).ok_or_else(|| {
                    format!("failed to load registries.yaml: ca_file {ca_file}: no such file")
                })?;
                hosts.cas.insert(host.clone(), pem.clone());
            }
        }
    }
    Ok(hosts)
}

/// Talos's view: its `RegistryMirrorConfig` and `RegistryAuthConfig` documents.
pub fn talos(documents: &[Value]) -> RegistryHosts {
    let mut hosts = RegistryHosts::default();
    for document in documents {
        let name = document.get("name").and_then(Value::as_str);
        let Some(name) = name else { continue };
        match document.get("kind").and_then(Value::as_str) {
            Some("RegistryMirrorConfig") => {
                let endpoints = document.get("endpoints").and_then(Value::as_array);
                let endpoints = endpoints
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.get("url")?.as_str())
                    .filter_map(endpoint_of)
                    .collect();
                hosts.mirrors.insert(name.to_owned(), endpoints);
            }
            Some("RegistryTLSConfig") => {
                if let Some(ca) = document.get("ca").and_then(Value::as_str) {
                    hosts.cas.insert(name.to_owned(), ca.to_owned());
                }
            }
            Some("RegistryAuthConfig") => {
                let field = |key: &str| document.get(key)?.as_str().map(str::to_owned);
                if let (Some(user), Some(password)) = (field("username"), field("password")) {
                    hosts.auths.insert(name.to_owned(), (user, password));
                }
            }
            _ => {}
        }
    }
    hosts
}

/// An image reference, normalised as Docker does (`busybox` is
/// `docker.io/library/busybox:latest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The registry (`docker.io`).
    pub registry: String,
    /// The repository (`library/busybox`).
    pub repository: String,
    /// The tag or digest.
    pub reference: String,
}

impl Image {
    /// Reads `text`; `None` for what no runtime would read as a reference.
    pub fn parse(text: &str) -> Option<Image> {
        if text.is_empty() || text.len() > 255 || text.contains(char::is_whitespace) {
            return None;
        }
        let (registry, rest) = match text.split_once('/') {
            Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
                (first.to_owned(), rest.to_owned())
            }
            _ => ("docker.io".to_owned(), text.to_owned()),
        };
        let (name, reference) = match rest.split_once('@') {
            Some((name, digest)) => (name.to_owned(), digest.to_owned()),
            None => match rest.rsplit_once(':') {
                Some((name, tag)) if !tag.contains('/') => (name.to_owned(), tag.to_owned()),
                _ => (rest.clone(), "latest".to_owned()),
            },
        };
        let repository = if registry == "docker.io" && !name.contains('/') {
            format!("library/{name}")
        } else {
            name
        };
        (!repository.is_empty()).then_some(Image {
            registry,
            repository,
            reference,
        })
    }
}

/// Pulls `image` as `runtime` would with `hosts`: each mirror, then the registry; the
/// manifest's digest, or why no endpoint served it (the last endpoint's reason).
///
/// # Errors
/// Every endpoint failed or refused.
pub async fn pull(
    hosts: &RegistryHosts,
    image: &Image,
    runtime: Runtime,
) -> Result<String, String> {
    let upstream = Endpoint {
        tls: true,
        host: if image.registry == "docker.io" {
            DOCKER_HUB_API.to_owned()
        } else {
            image.registry.clone()
        },
    };
    let mirrors = hosts
        .mirrors
        .get(&image.registry)
        .cloned()
        .unwrap_or_default();
    let mut last = String::new();
    for endpoint in mirrors.iter().chain(std::iter::once(&upstream)) {
        let mut path = format!("/v2/{}/manifests/{}", image.repository, image.reference);
        if runtime == Runtime::Containerd && endpoint != &upstream {
            path.push_str(&format!("?ns={}", image.registry));
        }
        let auth = hosts.auths.get(&endpoint.host);
        let ca = hosts.cas.get(&endpoint.host).map(String::as_str);
        match fetch(endpoint, &path, auth, ca).await {
            Ok(digest) => return Ok(digest),
            Err(why) => last = why,
        }
    }
    Err(last)
}

/// `GET path` of `endpoint`, on loopback only, over TLS checked against `ca` for an
/// `https://` one.
async fn fetch(
    endpoint: &Endpoint,
    path: &str,
    auth: Option<&(String, String)>,
    ca: Option<&str>,
) -> Result<String, String> {
    let url = format!(
        "{}://{}{path}",
        if endpoint.tls { "https" } else { "http" },
        endpoint.host
    );
    let address = endpoint
        .host
        .parse::<SocketAddr>()
        .ok()
        .or_else(|| {
            let ip = endpoint.host.parse::<IpAddr>().ok()?;
            Some(SocketAddr::new(ip, if endpoint.tls { 443 } else { 80 }))
        })
        .filter(|address| address.ip().is_loopback());
    let Some(address) = address else {
        let name = endpoint.host.split(':').next().unwrap_or_default();
        return Err(format!(
            "Get \"{url}\": dial tcp: lookup {name}: no such host"
        ));
    };
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.v2+json\r\nConnection: close\r\n",
        endpoint.host
    );
    if let Some((user, password)) = auth {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        request.push_str(&format!("Authorization: Basic {encoded}\r\n"));
    }
    request.push_str("\r\n");
    let host = endpoint.host.clone();
    let exchange = async {
        let stream = tokio::net::TcpStream::connect(address).await?;
        if endpoint.tls {
            let stream = tls(&host, ca)?.connect(server_name(&host)?, stream).await?;
            exchange(stream, &request).await
        } else {
            exchange(stream, &request).await
        }
    };
    let answer = match tokio::time::timeout(ENDPOINT_TIMEOUT, exchange).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(err)) => return Err(format!("Get \"{url}\": {err}")),
        Err(_) => return Err(format!("Get \"{url}\": i/o timeout")),
    };
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok());
    match status {
        Some(200) => {
            let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
            let digest: String = Sha256::digest(body.as_bytes())
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect();
            Ok(format!("sha256:{digest}"))
        }
        Some(401) => Err(format!(
            "unexpected status from GET request to {url}: 401 Unauthorized"
        )),
        Some(code) => Err(format!(
            "unexpected status from GET request to {url}: {code}"
        )),
        None => Err(format!("Get \"{url}\": malformed HTTP response")),
    }
}

/// Sends `request` and reads the answer (at most [`MAX_ANSWER_BYTES`]).
async fn exchange(
    mut stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    request: &str,
) -> std::io::Result<Vec<u8>> {
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER_BYTES as u64)
        .read_to_end(&mut answer)
        .await?;
    Ok(answer)
}

/// A TLS client trusting `ca` alone for `host` (Go's words when nothing signs it).
fn tls(host: &str, ca: Option<&str>) -> std::io::Result<tokio_rustls::TlsConnector> {
    use rustls::pki_types::pem::PemObject as _;
    let unknown = || {
        std::io::Error::other(format!(
            "tls: failed to verify certificate: x509: certificate signed by unknown authority (no CA for {host})"
        ))
    };
    let mut roots = rustls::RootCertStore::empty();
    for certificate in
        rustls::pki_types::CertificateDer::pem_slice_iter(ca.unwrap_or_default().as_bytes())
    {
        let certificate = certificate.map_err(|_| unknown())?;
        roots.add(certificate).map_err(|_| unknown())?;
    }
    if roots.is_empty() {
        return Err(unknown());
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(std::sync::Arc::new(
        config,
    )))
}

/// The name a host's certificate must carry: its address or DNS name, without the port.
fn server_name(host: &str) -> std::io::Result<rustls::pki_types::ServerName<'static>> {
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    rustls::pki_types::ServerName::try_from(name.to_owned()).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_normalised_as_docker_does() {
        let image = |text| Image::parse(text).expect("a reference");
        assert_eq!(
            image("busybox"),
            Image {
                registry: "docker.io".into(),
                repository: "library/busybox".into(),
                reference: "latest".into()
            }
        );
        assert_eq!(
            image("docker.io/rancher/mirrored-pause:3.6").repository,
            "rancher/mirrored-pause"
        );
        let local = image("127.0.0.1:5000/team/app:v1");
        assert_eq!(
            (local.registry.as_str(), local.reference.as_str()),
            ("127.0.0.1:5000", "v1")
        );
        assert_eq!(image("ghcr.io/a/b@sha256:00").reference, "sha256:00");
        assert_eq!(Image::parse("a b"), None);
    }

    #[test]
    fn crio_reads_its_drop_ins_and_the_auth_file_they_name() {
        let files: BTreeMap<String, String> = [
            (
                "/etc/containers/registries.conf.d/50-capstan.conf",
                "[[registry]]\nprefix = \"docker.io\"\nlocation = \"docker.io\"\n[[registry.mirror]]\nlocation = \"127.0.0.1:5000\"\ninsecure = true\n",
            ),
            (
                "/etc/crio/crio.conf.d/50-auth.conf",
                "[crio.image]\nglobal_auth_file = \"/etc/crio/auth.json\"\n",
            ),
            (
                "/etc/crio/auth.json",
                "{\"auths\": {\"127.0.0.1:5000\": {\"auth\": \"cm9ib3Q6czNjcjN0\"}}}",
            ),
        ]
        .into_iter()
        .map(|(p, t)| (p.to_owned(), t.to_owned()))
        .collect();
        let hosts = crio(&files).expect("reads");
        assert_eq!(
            hosts.mirrors["docker.io"],
            [Endpoint {
                tls: false,
                host: "127.0.0.1:5000".into()
            }]
        );
        assert_eq!(
            hosts.auths["127.0.0.1:5000"],
            ("robot".to_owned(), "s3cr3t".to_owned())
        );
        assert!(!format!("{hosts:?}").contains("s3cr3t"));
        let mut broken = files.clone();
        broken.remove("/etc/crio/auth.json");
        assert!(crio(&broken).is_err(), "a named auth file that is missing");
    }

    /// A registry over HTTPS on loopback, its certificate signed by a CA of its own (PEM).
    async fn https_registry() -> (crate::serve::HttpsServer, String) {
        use crate::tls::CertificateAuthority;
        let not_after =
            jiff::Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_hours(24 * 365 * 100);
        let ca = CertificateAuthority::new("registry CA", not_after).expect("a CA");
        let loopback: IpAddr = [127, 0, 0, 1].into();
        let identity = ca
            .issue_server("registry", &[], &[loopback], not_after)
            .expect("a certificate");
        let router = axum::Router::new().fallback(|| async { "{}" });
        let server =
            crate::serve::HttpsServer::start(SocketAddr::new(loopback, 0), &identity, None, router)
                .await
                .expect("serves");
        (server, ca.identity().cert_pem.clone())
    }

    #[tokio::test]
    async fn an_https_mirror_is_trusted_only_under_the_ca_k3s_names_for_it() {
        let (server, ca) = https_registry().await;
        let host = server.local_addr().to_string();
        let yaml = format!(
            "mirrors:\n  docker.io:\n    endpoint: [\"https://{host}\"]\nconfigs:\n  \"{host}\":\n    tls: {{ca_file: /etc/rancher/k3s/ca.crt}}\n"
        );
        let mut files: BTreeMap<String, String> =
            [(K3S_REGISTRIES.to_owned(), yaml)].into_iter().collect();
        assert!(k3s(&files).is_err(), "the CA file it names is missing");
        files.insert("/etc/rancher/k3s/ca.crt".to_owned(), ca);
        let image = Image::parse("busybox:1.36").expect("a reference");
        let trusted = k3s(&files).expect("reads");
        assert!(pull(&trusted, &image, Runtime::Containerd).await.is_ok());
        files.remove("/etc/rancher/k3s/ca.crt");
        let yaml = files[K3S_REGISTRIES].replace(
            "    tls: {ca_file: /etc/rancher/k3s/ca.crt}\n",
            "    auth: {username: a, password: b}\n",
        );
        files.insert(K3S_REGISTRIES.to_owned(), yaml);
        let untrusted = k3s(&files).expect("reads");
        let err = pull(&untrusted, &image, Runtime::Containerd)
            .await
            .expect_err("no CA for the mirror, and docker.io unreachable");
        assert!(
            err.contains("no such host"),
            "the last endpoint's reason: {err}"
        );
        let mirror = Endpoint { tls: true, host };
        let refused = fetch(&mirror, "/v2/library/busybox/manifests/1.36", None, None)
            .await
            .expect_err("no CA is trusted for it");
        assert!(
            refused.contains("certificate signed by unknown authority"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn a_registry_off_loopback_is_unreachable() {
        let image = Image::parse("docker.io/library/busybox:1.36").expect("a reference");
        let err = pull(&RegistryHosts::default(), &image, Runtime::CriO)
            .await
            .expect_err("docker.io is not reachable from the lab");
        assert!(
            err.contains("lookup registry-1.docker.io: no such host"),
            "{err}"
        );
    }
}
