use super::*;

use std::sync::{Arc, Mutex};

/// A secret no other test knows (the redactor is one per process).
fn fresh_secret(label: &str) -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("random");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{label}-{hex}")
}

#[test]
fn remembered_values_and_url_passwords_become_stars() {
    let token = fresh_secret("k3s-token");
    remember(&format!("{token}\n"));
    let text = format!("install failed: K3S_TOKEN={token} (mysql://k3s:hunter22@tcp(db:3306)/k3s)");
    assert_eq!(
        redact(&text),
        "install failed: K3S_TOKEN=*** (mysql://k3s:***@tcp(db:3306)/k3s)"
    );
    assert_eq!(
        Redactor::default().redact(&text),
        redact(&text),
        "every handle is the one"
    );
}

#[test]
fn escaped_forms_of_a_secret_are_redacted_too() {
    let secret = format!("{}\"quoted\\back", fresh_secret("pw"));
    remember(&secret);
    let json = serde_json::to_string(&secret).expect("json");
    let debug = format!("{secret:?}");
    for text in [json, debug] {
        let redacted = redact(&text);
        assert_eq!(redacted, "\"***\"", "{text}");
    }
}

#[test]
fn a_secret_containing_another_is_replaced_whole() {
    let short = fresh_secret("inner");
    let long = format!("{short}-and-more");
    remember(&short);
    remember(&long);
    assert_eq!(redact(&format!("[{long}] [{short}]")), "[***] [***]");
}

#[test]
fn short_values_are_not_searched_for() {
    remember("root");
    assert_eq!(redact("adminUser root"), "adminUser root");
}

#[test]
fn a_long_message_is_capped_saying_how_much_was_cut() {
    let long = "é".repeat(10 * 1024);
    assert_eq!(long.len(), 20 * 1024);
    let capped = message(&long);
    let (kept, note) = capped.split_once('…').expect("a cut is announced");
    assert!(kept.len() <= MESSAGE_CAP && kept.len() > MESSAGE_CAP - 4);
    assert_eq!(note, format!(" ({} bytes cut)", long.len() - kept.len()));
    assert_eq!(message("short"), "short");
}

#[test]
fn a_kubeconfig_gives_up_its_credentials_even_when_it_is_not_valid_yaml() {
    let token = fresh_secret("bearer");
    let key_pem = format!("-----BEGIN EC PRIVATE KEY-----\n{}\n", fresh_secret("key"));
    let key_data = base64::engine::general_purpose::STANDARD.encode(&key_pem);
    let kubeconfig = format!(
        "users:\n- name: admin\n  user:\n    token: \"{token}\"\n   client-key-data: {key_data}\n  : : broken\n"
    );
    remember_kubeconfig(&kubeconfig);
    let text = format!("{kubeconfig}\n{key_pem}");
    let redacted = redact(&text);
    for secret in [&token, &key_data, &key_pem] {
        assert!(!redacted.contains(secret.as_str()), "{redacted}");
    }
    assert!(redacted.contains("token: \"***\""), "{redacted}");
}

#[test]
fn a_yaml_error_says_where_and_never_quotes_the_document() {
    let token = "sekret-bearer-0123456789";
    let key = "QUJDREVGR0hJSktMTU5PUA==";
    let cases = [
        (
            format!("users:\n- name: a\n  user:\n    token: {token}\n   client-key-data: {key}\n"),
            (5, 4),
        ),
        (format!("clusters: \"{token}\"\n"), (1, 11)),
        (
            format!("users:\n- name: a\n  user:\n    token: \"{token}\n  x: 1\n"),
            (4, 12),
        ),
    ];
    for (text, (line, column)) in cases {
        let err = serde_saphyr::from_str::<serde_json::Value>(&text)
            .and_then(|_| serde_saphyr::from_str::<Shape>(&text).map(|_| ()))
            .expect_err("malformed");
        let document = DocumentError::yaml("the kubeconfig", &err);
        let shown = document.to_string();
        assert!(
            !shown.contains(token) && !shown.contains(key) && !shown.contains("token"),
            "{shown}"
        );
        assert_eq!(
            (document.line, document.column),
            (Some(line), Some(column)),
            "{shown}"
        );
        assert!(
            shown.starts_with(&format!(
                "the kubeconfig is malformed at line {line} column {column}: "
            )),
            "{shown}"
        );
    }
}

/// Enough of a kubeconfig's shape for serde to complain about a wrong type.
#[derive(Debug, serde::Deserialize)]
#[allow(dead_code)]
struct Shape {
    #[serde(default)]
    clusters: Vec<serde_json::Value>,
}

#[test]
fn serde_problems_keep_field_names_and_expectations_never_values() {
    assert_eq!(
        problem_of("missing field `clusters` at line 3, column 1"),
        "missing field `clusters`"
    );
    assert_eq!(
        problem_of("unknown field `tokenFile`, expected one of `token`, `password`"),
        "unknown field `tokenFile`"
    );
    assert_eq!(
        problem_of("invalid type: string \"s3cr3t\", expected a sequence"),
        "wrong value, expected a sequence"
    );
    assert_eq!(
        problem_of("unknown variant `s3cr3t`, expected `Config`"),
        "unknown variant"
    );
    assert_eq!(
        problem_of("found 'sekret' where a key was expected"),
        "malformed YAML"
    );
    assert_eq!(
        problem_of("while parsing a block mapping, did not find expected key at line 7, column 4"),
        "while parsing a block mapping, did not find expected key"
    );
}

/// An in-memory log output.
#[derive(Clone, Default)]
struct Memory(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Memory {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Memory {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

#[test]
fn log_lines_are_redacted_in_plain_and_json_formats() {
    let secret = fresh_secret("dsn-password");
    remember(&secret);
    for json in [false, true] {
        let memory = Memory::default();
        let out = memory.clone();
        let builder = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(LogWriter::new(move || out.clone()));
        let dispatch = if json {
            tracing::Dispatch::new(builder.json().finish())
        } else {
            tracing::Dispatch::new(builder.finish())
        };
        tracing::dispatcher::with_default(&dispatch, || {
            tracing::warn!(error = %format!("refused {secret}"), "step failed: {secret}");
            tracing::warn!(detail = ?secret, "debug field");
        });
        let logged = memory.text();
        assert_eq!(logged.lines().count(), 2, "{logged}");
        assert!(!logged.contains(&secret), "{logged}");
        assert!(logged.contains("step failed: ***"), "{logged}");
    }
}
