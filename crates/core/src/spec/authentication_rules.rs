//! The rules of `kubernetes.authentication` (its types and rendering are
//! `spec::authentication`'s): what the API server would refuse to start with, refused at the
//! file, line and field instead.

use super::authentication::{
    ClaimMapping, FIRST_MINOR, JwtIssuer, MAX_AUDIENCES, MAX_CA_BYTES, MAX_ISSUERS, MAX_TEXT,
};
use super::diagnostic::{Diagnostic, SourceFile};
use super::types::ClusterSpec;

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
mod tests {
    use super::*;

    #[test]
    fn issuer_urls_and_cas_are_judged_as_the_api_server_judges_them() {
        assert!(url_problem("https://sso.example.com/realms/lab").is_ok());
        assert!(url_problem("https://user:pw@sso.example.com").is_err());
        assert!(url_problem("https://sso.example.com/#a").is_err());
        let ca =
            "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUJ0xG\n-----END CERTIFICATE-----\n";
        assert!(ca_problem(ca).is_ok());
        assert!(ca_problem(&format!("{ca}{ca}")).is_ok(), "a bundle");
        assert!(ca_problem("-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----").is_err());
    }
}
