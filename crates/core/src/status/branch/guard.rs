//! The last check before anything is committed: content that looks like a secret is refused,
//! whatever bug put it there. Nothing of the secret is repeated in the refusal: only the file
//! and the kind of secret. The secrets the daemon holds are its redactor's to know: the
//! caller passes the text as the redactor returns it.

/// A secret found in content about to be committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    /// The file (or `the commit message`).
    pub path: String,
    /// What was found, in plain words (never the value).
    pub what: &'static str,
}

impl std::fmt::Display for Leak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} holds {}", self.path, self.what)
    }
}

/// The first secret in `text` (the content of `path`): a PEM block, a kubeconfig's
/// `client-key-data`, a `token:` with a value, or a value the daemon's redactor knows (tokens
/// read, URL passwords), which shows as `redacted` (`text` through the redactor) differing.
pub fn find_secret(path: &str, text: &str, redacted: &str) -> Option<Leak> {
    let leak = |what| {
        Some(Leak {
            path: path.to_owned(),
            what,
        })
    };
    if text.contains("-----BEGIN ") {
        return leak("a PEM block");
    }
    if text.contains("client-key-data") {
        return leak("a kubeconfig's client-key-data");
    }
    if has_token_value(text) {
        return leak("a `token:` with a value");
    }
    if redacted != text {
        return leak("a secret value capstan holds (a token or a password)");
    }
    None
}

/// Whether some `token:` (in any case, e.g. `Token:`, `bearer_token:`) in `text` is followed by
/// a value (an empty one, `""`, `''`, `~` or `null` says nothing).
fn has_token_value(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    text.match_indices("token:").any(|(at, key)| {
        let rest = &text[at + key.len()..];
        let value = rest.lines().next().unwrap_or_default().trim();
        !matches!(value, "" | "\"\"" | "''" | "~" | "null")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_blocks_kubeconfig_keys_and_tokens_are_found_without_repeating_them() {
        for (text, what) in [
            (
                "message: -----BEGIN EC PRIVATE KEY-----\nMHc\n",
                "a PEM block",
            ),
            (
                "users:\n- user:\n    client-key-data: LS0tLS1\n",
                "a kubeconfig's client-key-data",
            ),
            (
                "message: 'join with token: abcdef.0123456789abcdef'\n",
                "a `token:` with a value",
            ),
            (
                "message: 'Bearer-Token: abcdef0123'\n",
                "a `token:` with a value",
            ),
        ] {
            let leak = find_secret("clusters/prod.yaml", text, text).expect(what);
            assert_eq!(leak.what, what);
            assert!(!leak.to_string().contains("abcdef"), "{leak}");
        }
    }

    #[test]
    fn a_value_the_redactor_knows_is_found() {
        let leak = find_secret(
            "README.md",
            "| prod | failed: ghp_planted0123456789 |",
            "| prod | failed: *** |",
        )
        .expect("found");
        assert_eq!(leak.path, "README.md");
        assert!(!leak.to_string().contains("planted"));
    }

    #[test]
    fn ordinary_status_and_empty_tokens_pass() {
        let text = "phase: Ready\nkubeconfigFingerprint: sha256:0123abcd\ntoken: \"\"\nmessage: created a join token\n";
        assert_eq!(find_secret("clusters/prod.yaml", text, text), None);
    }
}
