//! `kubernetes.authentication` as a user writes it, through the whole validation
//! (`spec::load`), and the file the API server reads.

use super::*;
use crate::spec::{RepoFiles, SourceText, load};

const FLEET: &str = include_str!("../../../../../examples-repo/capstan.yaml");
const KUBEADM: &str = include_str!("../../../../../examples-repo/clusters/prod.yaml");

/// A CA certificate (any DER SEQUENCE passes the shape check; the API server parses it).
const CA: &str =
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUJ0xG\n-----END CERTIFICATE-----\n";

/// `authentication` (YAML lines indented for `kubernetes`) added to the kubeadm example.
fn with_authentication(lines: &str) -> String {
    KUBEADM.replacen(
        "    distribution: kubeadm          # the default\n",
        &format!("    distribution: kubeadm          # the default\n    authentication:\n{lines}"),
        1,
    )
}

fn issuer(url: &str, ca: &str) -> String {
    let ca = if ca.is_empty() {
        String::new()
    } else {
        let lines: String = ca
            .lines()
            .map(|line| format!("            {line}\n"))
            .collect();
        format!("          certificateAuthority: |\n{lines}")
    };
    format!(
        "      jwt:\n        - url: {url}\n          audiences: [kubernetes]\n{ca}          claimMappings:\n            username: {{claim: email, prefix: \"oidc:\"}}\n            groups: {{claim: groups, prefix: \"oidc:\"}}\n"
    )
}

fn loaded(text: &str) -> crate::spec::Loaded {
    load(&RepoFiles {
        fleet: SourceText {
            path: "capstan.yaml".into(),
            text: FLEET.into(),
        },
        clusters: vec![SourceText {
            path: "clusters/prod.yaml".into(),
            text: text.into(),
        }],
    })
}

fn errors(text: &str) -> Vec<crate::spec::Diagnostic> {
    loaded(text)
        .diagnostics
        .0
        .into_iter()
        .filter(|d| d.is_error())
        .collect()
}

#[test]
fn an_issuer_with_a_ca_is_accepted_and_rendered_as_the_api_server_reads_it() {
    let text = with_authentication(&issuer("https://sso.example.com/realms/lab", CA));
    let loaded = loaded(&text);
    assert!(!loaded.diagnostics.has_errors(), "{}", loaded.diagnostics);
    let spec = &loaded.desired.expect("valid").clusters["prod"].spec;
    let authentication = spec.kubernetes.authentication.as_ref().expect("parsed");
    let file = configuration(authentication, spec.kubernetes.version);
    let document: Value = serde_saphyr::from_str(&file).expect("YAML");
    assert_eq!(document["apiVersion"], "apiserver.config.k8s.io/v1");
    assert_eq!(document["kind"], "AuthenticationConfiguration");
    let jwt = &document["jwt"][0];
    assert_eq!(jwt["issuer"]["url"], "https://sso.example.com/realms/lab");
    assert_eq!(jwt["issuer"]["audiences"], json!(["kubernetes"]));
    assert!(jwt["issuer"].get("audienceMatchPolicy").is_none());
    assert!(
        jwt["issuer"]["certificateAuthority"]
            .as_str()
            .is_some_and(|ca| ca.starts_with("-----BEGIN CERTIFICATE-----"))
    );
    assert_eq!(
        jwt["claimMappings"],
        json!({"username": {"claim": "email", "prefix": "oidc:"}, "groups": {"claim": "groups", "prefix": "oidc:"}})
    );
}

#[test]
fn the_version_is_v1_from_kubernetes_1_34_and_v1beta1_before() {
    let version = |text: &str| text.parse::<KubeVersion>().expect("a version");
    assert_eq!(
        api_version(version("1.33.5")),
        "apiserver.config.k8s.io/v1beta1"
    );
    assert_eq!(api_version(version("1.34.0")), "apiserver.config.k8s.io/v1");
    assert_eq!(api_version(version("1.36.2")), "apiserver.config.k8s.io/v1");
}

#[test]
fn several_audiences_match_any() {
    let authentication = Authentication {
        jwt: vec![JwtIssuer {
            url: "https://sso.example.com".into(),
            audiences: vec!["kubernetes".into(), "dashboard".into()],
            certificate_authority: None,
            claim_mappings: ClaimMappings {
                username: ClaimMapping {
                    claim: "sub".into(),
                    prefix: String::new(),
                },
                groups: None,
            },
        }],
    };
    let file = configuration(&authentication, "1.36.2".parse().expect("a version"));
    let document: Value = serde_saphyr::from_str(&file).expect("YAML");
    assert_eq!(
        document["jwt"][0]["issuer"]["audienceMatchPolicy"],
        "MatchAny"
    );
    assert_eq!(
        document["jwt"][0]["claimMappings"]["username"]["prefix"],
        ""
    );
}

#[test]
fn a_plain_http_issuer_is_refused_at_its_line() {
    let text = with_authentication(&issuer("http://sso.example.com/realms/lab", ""));
    let errors = errors(&text);
    let [error] = &errors[..] else {
        panic!("{errors:?}")
    };
    assert_eq!(
        error.field.as_deref(),
        Some("spec.kubernetes.authentication.jwt[0].url")
    );
    assert!(
        error.message.contains("not an https:// URL"),
        "{}",
        error.message
    );
    let line = text
        .lines()
        .nth(error.line.expect("a line") - 1)
        .unwrap_or_default();
    assert!(line.contains("http://sso.example.com"), "{line}");
}

#[test]
fn a_private_key_or_a_non_pem_ca_is_refused() {
    for (ca, words) in [
        (
            "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n",
            "private key",
        ),
        ("not a certificate\n", "not a PEM certificate"),
    ] {
        let errors = errors(&with_authentication(&issuer("https://sso.example.com", ca)));
        let [error] = &errors[..] else {
            panic!("{errors:?}")
        };
        assert_eq!(
            error.field.as_deref(),
            Some("spec.kubernetes.authentication.jwt[0].certificateAuthority")
        );
        assert!(error.message.contains(words), "{}", error.message);
    }
}

#[test]
fn urls_with_users_queries_or_twice_named_issuers_are_refused() {
    for url in [
        "https://user:pw@sso.example.com",
        "https://sso.example.com/?a=b",
        "https://",
    ] {
        let errors = errors(&with_authentication(&issuer(url, "")));
        assert_eq!(
            errors[0].field.as_deref(),
            Some("spec.kubernetes.authentication.jwt[0].url"),
            "{url}: {errors:?}"
        );
    }
    let twice = issuer("https://sso.example.com", "")
        + &issuer("https://sso.example.com", "").replacen("      jwt:\n", "", 1);
    let errors = errors(&with_authentication(&twice));
    assert!(
        errors
            .iter()
            .any(|e| e.field.as_deref() == Some("spec.kubernetes.authentication.jwt[1].url")),
        "{errors:?}"
    );
}

#[test]
fn an_empty_issuer_list_or_audience_list_is_refused() {
    let errors = errors(&with_authentication("      jwt: []\n"));
    assert_eq!(
        errors[0].field.as_deref(),
        Some("spec.kubernetes.authentication.jwt"),
        "{errors:?}"
    );
    let errors = errors_of_audiences();
    assert_eq!(
        errors[0].field.as_deref(),
        Some("spec.kubernetes.authentication.jwt[0].audiences"),
        "{errors:?}"
    );
}

fn errors_of_audiences() -> Vec<crate::spec::Diagnostic> {
    errors(&with_authentication(
        &issuer("https://sso.example.com", "").replace("[kubernetes]", "[]"),
    ))
}

#[test]
fn the_digest_follows_the_field_and_is_none_without_it() {
    let text = with_authentication(&issuer("https://sso.example.com", ""));
    let spec = loaded(&text).desired.expect("valid").clusters["prod"]
        .spec
        .clone();
    let mut other = spec.clone();
    other.kubernetes.authentication = None;
    assert_eq!(digest(other.kubernetes.authentication.as_ref()), None);
    let mut changed = spec.clone();
    if let Some(authentication) = &mut changed.kubernetes.authentication {
        authentication.jwt[0].audiences = vec!["other".into()];
    }
    assert!(digest(spec.kubernetes.authentication.as_ref()).is_some());
    assert_ne!(
        digest(spec.kubernetes.authentication.as_ref()),
        digest(changed.kubernetes.authentication.as_ref())
    );
}
