//! `kubernetes.registries` as a user writes it, through the whole validation (`spec::load`):
//! what is accepted, what is refused at file:line, and what enters the machine hash.

use crate::spec::{ClusterSpec, Diagnostic, RepoFiles, SourceText, load};

use super::*;

const FLEET: &str = include_str!("../../../../../examples-repo/capstan.yaml");
const KUBEADM: &str = include_str!("../../../../../examples-repo/clusters/prod.yaml");
const TALOS: &str = include_str!("../../../../../examples-repo/clusters/talos.yaml");

const MIRRORED: &str = "    registries:
      mirrors:
        docker.io:
          endpoints: [https://mirror.example:5000, http://10.0.0.9:5000]
      credentials:
        mirror.example:5000:
          username: robot
          passwordFrom: {env: CAPSTAN_CLUSTER_PROD_REGISTRY_MIRROR_EXAMPLE_5000_PASSWORD}
      ca:
        mirror.example:5000: |
          -----BEGIN CERTIFICATE-----
          MIIB
          -----END CERTIFICATE-----
";

/// `example` with `registries` (YAML lines indented for `kubernetes`) under `kubernetes`.
fn with_registries(example: &str, registries: &str) -> String {
    example.replacen(
        "  kubernetes:\n",
        &format!("  kubernetes:\n{registries}"),
        1,
    )
}

fn loaded(text: &str) -> (Vec<Diagnostic>, Option<ClusterSpec>) {
    let files = RepoFiles {
        fleet: SourceText {
            path: "capstan.yaml".into(),
            text: FLEET.into(),
        },
        clusters: vec![SourceText {
            path: "clusters/c.yaml".into(),
            text: text.into(),
        }],
    };
    let loaded = load(&files);
    let errors = loaded
        .diagnostics
        .0
        .iter()
        .filter(|d| d.is_error())
        .cloned()
        .collect();
    let spec = loaded
        .desired
        .and_then(|d| d.clusters.into_values().next())
        .map(|c| c.spec);
    (errors, spec)
}

/// The line a finding points at.
fn line_of<'a>(finding: &Diagnostic, text: &'a str) -> &'a str {
    let line = finding.line.expect("a line");
    text.lines().nth(line - 1).unwrap_or_default()
}

#[test]
fn mirrors_credentials_and_a_ca_are_accepted_on_every_distribution() {
    for example in [KUBEADM, TALOS] {
        let (errors, spec) = loaded(&with_registries(example, MIRRORED));
        assert!(errors.is_empty(), "{errors:#?}");
        let registries = spec.expect("valid").kubernetes.registries;
        assert_eq!(
            registries.endpoint_hosts(),
            ["mirror.example:5000", "10.0.0.9:5000"]
        );
    }
}

#[test]
fn an_inline_password_is_refused_by_the_file_format() {
    let inline = MIRRORED.replace(
        "passwordFrom: {env: CAPSTAN_CLUSTER_PROD_REGISTRY_MIRROR_EXAMPLE_5000_PASSWORD}",
        "password: hunter2-hunter2",
    );
    let (errors, _) = loaded(&with_registries(KUBEADM, &inline));
    assert!(
        errors.iter().any(|d| d.message.contains("password")),
        "{errors:#?}"
    );
}

#[test]
fn credentials_in_a_mirror_url_a_key_for_a_ca_and_a_bad_host_are_refused_at_their_line() {
    let bad = MIRRORED
        .replace(
            "https://mirror.example:5000, http",
            "https://robot:hunter2@mirror.example:5000, http",
        )
        .replace("BEGIN CERTIFICATE", "BEGIN PRIVATE KEY")
        .replace("        docker.io:", "        Docker_Hub:");
    let text = with_registries(KUBEADM, &bad);
    let (errors, _) = loaded(&text);
    let url = errors
        .iter()
        .find(|d| d.message.contains("no user or password"))
        .unwrap_or_else(|| panic!("{errors:#?}"));
    assert_eq!(
        url.field.as_deref(),
        Some("spec.kubernetes.registries.mirrors.Docker_Hub.endpoints[0]")
    );
    assert!(line_of(url, &text).contains("endpoints:"), "{url:?}");
    assert!(
        !url.message.contains("hunter2"),
        "the refusal does not repeat the password"
    );
    let key = errors
        .iter()
        .find(|d| d.message.contains("private key"))
        .unwrap_or_else(|| panic!("{errors:#?}"));
    assert!(line_of(key, &text).contains("mirror.example:5000: |"));
    let host = errors
        .iter()
        .find(|d| d.message.contains("`Docker_Hub` is not a registry name"))
        .unwrap_or_else(|| panic!("{errors:#?}"));
    assert!(line_of(host, &text).contains("Docker_Hub:"));
}

#[test]
fn a_token_for_a_user_name_and_two_hosts_sharing_a_variable_are_refused() {
    let token = MIRRORED
        .replace(
            "username: robot",
            "username: eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl",
        )
        .replace(
            "      ca:\n",
            "        mirror-example:5000:
          username: other
          passwordFrom: {file: registry}
      ca:\n",
        );
    let text = with_registries(KUBEADM, &token);
    let (errors, _) = loaded(&text);
    let jwt = errors
        .iter()
        .find(|d| d.message.contains("JSON Web Token"))
        .unwrap_or_else(|| panic!("{errors:#?}"));
    assert!(line_of(jwt, &text).contains("username:"));
    assert!(
        errors
            .iter()
            .any(|d| d.message.contains("same environment variable")),
        "{errors:#?}"
    );
}

#[test]
fn the_digest_follows_what_the_file_says_and_never_a_password() {
    let (_, spec) = loaded(&with_registries(KUBEADM, MIRRORED));
    let registries = spec.expect("valid").kubernetes.registries;
    let digest = registries.digest().expect("declared");
    assert_eq!(digest.len(), 12);
    assert_eq!(Registries::default().digest(), None);
    let mut other = registries.clone();
    other
        .credentials
        .values_mut()
        .for_each(|c| c.username = "robot2".into());
    assert_ne!(other.digest(), Some(digest));
    let resolved =
        ResolvedRegistries::resolve(&registries, |_, _| Ok::<_, ()>("s3cr3t-value".to_owned()))
            .expect("resolves");
    assert!(!format!("{resolved:?}").contains("s3cr3t-value"));
    assert_eq!(
        resolved.credentials["mirror.example:5000"].password,
        "s3cr3t-value"
    );
}

#[test]
fn endpoints_and_hosts_parse_as_runtimes_key_them() {
    assert_eq!(
        endpoint("https://mirror.example:5000/"),
        Some(Endpoint {
            tls: true,
            host: "mirror.example:5000"
        })
    );
    assert_eq!(endpoint("ftp://mirror.example"), None);
    assert_eq!(endpoint("https://mirror.example/v2/library"), None);
    assert!(is_registry_host("127.0.0.1:5000"));
    assert!(!is_registry_host("mirror.example:0"));
    assert_eq!(variable_word("mirror.example:5000"), "MIRROR_EXAMPLE_5000");
}
