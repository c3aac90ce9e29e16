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
pub fn digest(authentication: Option<&Authentication>) -> Option<SmolStr> {
    let authentication = authentication?;
    let canonical = serde_json::to_string(authentication).unwrap_or_default();
    let digest = Sha1::digest(canonical.as_bytes());
    let hex: String = digest
        .iter()
        .take(6)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    Some(SmolStr::new(hex))
}

#[cfg(test)]
mod tests;
