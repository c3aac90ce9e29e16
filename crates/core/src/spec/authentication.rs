//! `kubernetes.authentication`: single sign-on for the API server, the same for every
//! distribution. Each JWT issuer becomes one `jwt` entry of the API server's
//! `AuthenticationConfiguration` file (`--authentication-config`), which [`configuration`]
//! renders; each distribution delivers the file and the flag its own way (kubeadm's
//! `ClusterConfiguration.apiServer`, K3s's `kube-apiserver-arg`, Talos's
//! `cluster.apiServer` and `machine.files`).
//!
//! # Invariants
//! - An issuer is reached over HTTPS only, and its certificate is checked against the CA the
//!   file gives (a public certificate: it may live in Git), or the API server's system roots.
//! - The configuration reaches control planes only: a change rolls them one at a time and
//!   touches no worker ([`digest`] enters their machine hash alone).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha1::{Digest as _, Sha1};
use smol_str::SmolStr;

use super::diagnostic::{Diagnostic, SourceFile};
use super::types::ClusterSpec;
use super::values::KubeVersion;

/// The most issuers one cluster names (the API server has no limit; every token is checked
/// against each in turn, so a long list is a mistake).
pub const MAX_ISSUERS: usize = 16;
/// The most audiences one issuer names.
pub const MAX_AUDIENCES: usize = 16;
/// The largest CA bundle an issuer gives, in bytes of PEM.
pub const MAX_CA_BYTES: usize = 64 * 1024;
/// The longest issuer URL, audience, claim name or prefix.
pub const MAX_TEXT: usize = 2048;
/// The first Kubernetes minor whose API server reads `--authentication-config` without a
/// feature gate (StructuredAuthenticationConfiguration went beta, on by default, in 1.30).
pub const FIRST_MINOR: u32 = 30;
/// The first Kubernetes minor that serves `apiserver.config.k8s.io/v1` (the feature went GA
/// in 1.34; earlier minors read `v1beta1` only).
pub const V1_MINOR: u32 = 34;

/// How the API server authenticates people: JWT issuers (OpenID Connect providers) whose
/// tokens it accepts, besides its own certificates and service-account tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Authentication {
    /// The issuers, each with the audiences its tokens must name and how a token's claims
    /// become a Kubernetes user and groups. Changing them replaces the control planes, one at a
    /// time; workers are untouched.
    #[schemars(length(min = 1, max = MAX_ISSUERS))]
    pub jwt: Vec<JwtIssuer>,
}

/// One JWT issuer the API server trusts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtIssuer {
    /// The issuer's URL, `https://...`: tokens' `iss` must equal it, and the API server reads
    /// its discovery document at `<url>/.well-known/openid-configuration`.
    pub url: String,
    /// The audiences a token must name one of in `aud` (the OIDC client ids, e.g.
    /// `kubernetes`).
    #[schemars(length(min = 1, max = MAX_AUDIENCES))]
    pub audiences: Vec<String>,
    /// The PEM certificate(s) of the CA that signed the issuer's HTTPS certificate (public,
    /// so written here); without it, the API server's system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority: Option<String>,
    /// Which claims name the user and their groups.
    pub claim_mappings: ClaimMappings,
}

/// How a token's claims become a Kubernetes user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimMappings {
    /// The user's name: a string claim (`email`, `sub`, ...) and the prefix put before it
    /// (`oidc:` keeps these users apart from others; `""` for none).
    pub username: ClaimMapping,
    /// The user's groups: a claim holding a string or a list of strings, and their prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<ClaimMapping>,
}

/// One claim and the prefix its values take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimMapping {
    /// The claim's name in the token.
    pub claim: String,
    /// Put before each value (`oidc:`); empty for none.
    #[serde(default)]
    pub prefix: String,
}

/// The `apiVersion` of the `AuthenticationConfiguration` an API server of `version` reads.
pub fn api_version(version: KubeVersion) -> &'static str {
    if version.minor >= V1_MINOR {
        "apiserver.config.k8s.io/v1"
    } else {
        "apiserver.config.k8s.io/v1beta1"
    }
}

/// The API server's `AuthenticationConfiguration` file (YAML) for `authentication`, in the
/// version an API server of `version` reads.
pub fn configuration(authentication: &Authentication, version: KubeVersion) -> String {
    let jwt: Vec<Value> = authentication.jwt.iter().map(jwt_entry).collect();
    let document = json!({
        "apiVersion": api_version(version),
        "kind": "AuthenticationConfiguration",
        "jwt": jwt,
    });
    // Strings, lists and maps only: a serializer that refuses them is a defect.
    serde_saphyr::to_string(&document).expect("an AuthenticationConfiguration writes as YAML")
}

fn jwt_entry(issuer: &JwtIssuer) -> Value {
    let mut entry = json!({
        "issuer": {
            "url": issuer.url,
            "audiences": issuer.audiences,
        },
        "claimMappings": {
            "username": {
                "claim": issuer.claim_mappings.username.claim,
                "prefix": issuer.claim_mappings.username.prefix,
            },
        },
    });
    // The API server requires the policy when there are several, and only then.
    if issuer.audiences.len() > 1 {
        entry["issuer"]["audienceMatchPolicy"] = json!("MatchAny");
    }
    if let Some(ca) = &issuer.certificate_authority {
        entry["issuer"]["certificateAuthority"] = json!(ca);
    }
    if let Some(groups) = &issuer.claim_mappings.groups {
        entry["claimMappings"]["groups"] = json!({"claim": groups.claim, "prefix": groups.prefix});
    }
    entry
}

/// The digest of the cluster's authentication, when it has one: it enters the control planes'
/// machine hash, so a change replaces them (and only them).
pub fn digest(spec: &ClusterSpec) -> Option<SmolStr> {
    let authentication = spec.kubernetes.authentication.as_ref()?;
    let canonical = serde_json::to_string(authentication).unwrap_or_default();
    let digest = Sha1::digest(canonical.as_bytes());
    let hex: String = digest
        .iter()
        .take(6)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    Some(SmolStr::new(hex))
}

/// The rules of `kubernetes.authentication`, when the file has one.
pub(super) fn check(out: &mut Vec<Diagnostic>, spec: &ClusterSpec, file: &SourceFile) {
    let Some(authentication) = &spec.kubernetes.authentication else {
        return;
    };
    let path = "spec.kubernetes.authentication";
    let version = spec.kubernetes.version;
    if version.minor < FIRST_MINOR {
        out.push(file.error(
            path,
            format!(
                "Kubernetes {version} reads no AuthenticationConfiguration without a feature gate: it needs 1.{FIRST_MINOR} or later"
            ),
        ));
    }
    if authentication.jwt.is_empty() || authentication.jwt.len() > MAX_ISSUERS {
        out.push(file.error(
            &format!("{path}.jwt"),
            format!(
                "{} issuers: write 1 to {MAX_ISSUERS}",
                authentication.jwt.len()
            ),
        ));
        return;
    }
    for (index, issuer) in authentication.jwt.iter().enumerate() {
        let at = format!("{path}.jwt[{index}]");
        let earlier = &authentication.jwt[..index];
        if earlier.iter().any(|other| other.url == issuer.url) {
            out.push(file.error(
                &format!("{at}.url"),
                format!(
                    "`{}` is named twice: each issuer once (the API server refuses duplicates)",
                    shown(&issuer.url)
                ),
            ));
        }
        check_issuer(out, issuer, &at, file);
    }
}

fn check_issuer(out: &mut Vec<Diagnostic>, issuer: &JwtIssuer, at: &str, file: &SourceFile) {
    if let Err(problem) = url_problem(&issuer.url) {
        out.push(
            file.error(&format!("{at}.url"), problem).with_hint(
                "the issuer's https:// URL as its tokens' `iss` claim says it, e.g. https://sso.example.com/realms/lab",
            ),
        );
    }
    audiences(out, &issuer.audiences, &format!("{at}.audiences"), file);
    if let Some(ca) = &issuer.certificate_authority
        && let Err(problem) = ca_problem(ca)
    {
        out.push(
            file.error(&format!("{at}.certificateAuthority"), problem)
                .with_hint("the PEM of the CA that signed the issuer's HTTPS certificate (`-----BEGIN CERTIFICATE-----` ...)"),
        );
    }
    let mappings = &issuer.claim_mappings;
    let username = format!("{at}.claimMappings.username");
    claim(out, &mappings.username, &username, file);
    if let Some(groups) = &mappings.groups {
        claim(out, groups, &format!("{at}.claimMappings.groups"), file);
    }
}

fn audiences(out: &mut Vec<Diagnostic>, audiences: &[String], at: &str, file: &SourceFile) {
    if audiences.is_empty() || audiences.len() > MAX_AUDIENCES {
        out.push(file.error(
            at,
            format!(
                "{} audiences: write 1 to {MAX_AUDIENCES} (the OIDC client ids tokens are issued for)",
                audiences.len()
            ),
        ));
    }
    for (index, audience) in audiences.iter().enumerate() {
        if audience.trim().is_empty() || audience.len() > MAX_TEXT {
            out.push(file.error(
                &format!("{at}[{index}]"),
                format!("an audience is 1 to {MAX_TEXT} characters, not blank"),
            ));
        } else if audiences[..index].contains(audience) {
            out.push(file.error(
                &format!("{at}[{index}]"),
                format!("`{}` is named twice", shown(audience)),
            ));
        }
    }
}

fn claim(out: &mut Vec<Diagnostic>, mapping: &ClaimMapping, at: &str, file: &SourceFile) {
    if mapping.claim.trim().is_empty() || mapping.claim.len() > MAX_TEXT {
        out.push(file.error(
            &format!("{at}.claim"),
            format!("a claim name is 1 to {MAX_TEXT} characters, not blank"),
        ));
    }
    if mapping.prefix.len() > MAX_TEXT || mapping.prefix.chars().any(char::is_control) {
        out.push(file.error(
            &format!("{at}.prefix"),
            format!("a prefix is at most {MAX_TEXT} characters, without control characters"),
        ));
    }
}

/// Why `url` is not an issuer URL the API server accepts (its own rules: https, a host, no
/// user, query or fragment).
fn url_problem(url: &str) -> Result<(), String> {
    let shown_url = shown(url);
    if url.len() > MAX_TEXT {
        return Err(format!("the URL is longer than {MAX_TEXT} characters"));
    }
    let Some(rest) = url.strip_prefix("https://") else {
        return Err(format!(
            "`{shown_url}` is not an https:// URL: the API server fetches the issuer's keys over HTTPS only"
        ));
    };
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Err(format!("`{shown_url}` names no host"));
    }
    if authority.contains('@') {
        return Err(format!(
            "`{shown_url}` carries a user or password: the issuer's URL has none"
        ));
    }
    if rest.contains(['?', '#']) {
        return Err(format!(
            "`{shown_url}` has a query or a fragment: the API server refuses them"
        ));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "`{shown_url}` contains spaces or control characters"
        ));
    }
    Ok(())
}

/// Why `pem` is not one or more PEM certificates (and nothing else: a private key pasted by
/// mistake is refused, it must never live in Git).
fn ca_problem(pem: &str) -> Result<(), String> {
    use base64::Engine as _;
    if pem.len() > MAX_CA_BYTES {
        return Err(format!("the CA is larger than {MAX_CA_BYTES} bytes"));
    }
    if pem.contains("PRIVATE KEY") {
        return Err(
            "this is a private key: write the CA's certificate only (a key never goes in Git)"
                .to_owned(),
        );
    }
    let mut certificates = 0;
    let mut rest = pem.trim();
    while !rest.is_empty() {
        let body = rest
            .strip_prefix("-----BEGIN CERTIFICATE-----")
            .ok_or("not a PEM certificate: each block is `-----BEGIN CERTIFICATE-----` ... `-----END CERTIFICATE-----`")?;
        let (base64, after) = body
            .split_once("-----END CERTIFICATE-----")
            .ok_or("a certificate block has no `-----END CERTIFICATE-----`")?;
        let joined: String = base64.split_whitespace().collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(joined)
            .map_err(|_| "a certificate block is not base64".to_owned())?;
        // A DER certificate is one SEQUENCE.
        if der.first() != Some(&0x30) {
            return Err("a certificate block holds no DER certificate".to_owned());
        }
        certificates += 1;
        rest = after.trim();
    }
    if certificates == 0 {
        return Err("empty: write the CA's PEM certificate, or leave the field out".to_owned());
    }
    Ok(())
}

/// A value quoted in a finding: at most 64 characters, control characters escaped.
fn shown(value: &str) -> String {
    value
        .chars()
        .take(64)
        .flat_map(char::escape_debug)
        .collect()
}

#[cfg(test)]
mod tests;
