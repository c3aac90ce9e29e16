//! Patches never carry secrets: a value that looks like a key, a token, a password or a
//! certificate's private half is refused where it is, pointing at the secret sources. A patch
//! is in Git, in previews and in the configs capstan shows; a secret must come from where
//! capstan reads secrets at run time.

use serde_json::Value;

/// What a value that looks like a secret looks like, in words.
pub fn looks_secret(key: &str, value: &str) -> Option<&'static str> {
    let value = value.trim();
    if value.contains("-----BEGIN ") {
        return Some("a PEM block (a certificate or a key)");
    }
    if is_jwt(value) {
        return Some("a JSON Web Token");
    }
    if is_bootstrap_token(value) {
        return Some("a bootstrap token");
    }
    if value.starts_with("K10") && value.contains("::") {
        return Some("a K3s token");
    }
    if value.len() >= 100
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    {
        return Some("encoded key material (a long base64 value)");
    }
    let bare: String = key
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    let secret_named = [
        "token",
        "password",
        "passwd",
        "secret",
        "secretkey",
        "privatekey",
        "apikey",
        "accesskey",
        "credentials",
    ]
    .iter()
    .any(|word| bare.ends_with(word))
        || bare == "auth";
    // A path names where a secret is, not the secret.
    (secret_named && !value.is_empty() && !value.starts_with('/'))
        .then_some("the value of a field named for a secret")
}

fn is_jwt(value: &str) -> bool {
    value.starts_with("eyJ")
        && value.len() > 30
        && value.matches('.').count() == 2
        && !value.contains(char::is_whitespace)
}

fn is_bootstrap_token(value: &str) -> bool {
    let Some((id, secret)) = value.split_once('.') else {
        return false;
    };
    let ok = |part: &str, len: usize| {
        part.len() == len
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    ok(id, 6) && ok(secret, 16)
}

/// Every string of `value` that looks like a secret, with its path under `path` and what it
/// looks like.
pub fn find(value: &Value, path: &str, key: &str, out: &mut Vec<(String, &'static str)>) {
    match value {
        Value::String(text) => {
            if let Some(what) = looks_secret(key, text) {
                out.push((path.to_owned(), what));
            }
        }
        Value::Object(map) => {
            for (child, value) in map {
                find(value, &format!("{path}.{child}"), child, out);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                // A `{name: x, value: y}` argument list names its secret in `name`.
                let named = item.get("name").and_then(Value::as_str).unwrap_or(key);
                match item.get("value").and_then(Value::as_str) {
                    Some(text) if item.get("name").is_some() => {
                        if let Some(what) = looks_secret(named, text) {
                            out.push((format!("{path}[{index}].value"), what));
                        }
                    }
                    _ => find(item, &format!("{path}[{index}]"), key, out),
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_tokens_and_secret_named_fields_are_recognised() {
        assert!(looks_secret("content", "-----BEGIN PRIVATE KEY-----\nabc").is_some());
        assert!(looks_secret("x", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln").is_some());
        assert!(looks_secret("x", "abcdef.0123456789abcdef").is_some());
        assert!(looks_secret("password", "hunter2").is_some());
        assert!(looks_secret("etcd-s3-secret-key", "abc").is_some());
        assert!(looks_secret("x", &"QUJD".repeat(30)).is_some());
    }

    #[test]
    fn ordinary_values_and_paths_to_secrets_pass() {
        assert_eq!(looks_secret("maxPods", "150"), None);
        assert_eq!(looks_secret("token-file", "/etc/k3s/token"), None);
        assert_eq!(looks_secret("password", "/run/secrets/pw"), None);
        assert_eq!(looks_secret("net.core.somaxconn", "65535"), None);
        assert_eq!(looks_secret("audit-log-path", "/var/log/audit.log"), None);
    }
}
