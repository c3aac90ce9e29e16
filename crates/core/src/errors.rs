//! Error messages as one line: an error and every cause below it, as logs and status print them,
//! with any password written in a URL (`scheme://user:password@host`) hidden.

/// `err` and its chain of sources, joined by `": "`; each layer's message names only its own
/// layer, so nothing repeats. A URL's password, should a library quote one, becomes `***`.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    redact_url_passwords(&text)
}

/// `scheme://user:password@host` → `scheme://user:***@host`, anywhere in `text`.
pub fn redact_url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '\'' || c == '"')
            .unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.split_once(':') {
                    Some((user, _password)) => {
                        out.push_str(user);
                        out.push_str(":***");
                    }
                    None => out.push_str(userinfo),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("cannot reach mysql://kine:s3cret@db.lab:3306/k3s")
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn the_chain_is_one_line_and_a_url_password_never_shows() {
        let err = Wrapped(std::io::Error::other("connection refused"));
        assert_eq!(
            error_chain(&err),
            "cannot reach mysql://kine:***@db.lab:3306/k3s: connection refused"
        );
        assert_eq!(
            redact_url_passwords("https://token@git.lab/x.git and https://u:p@h/"),
            "https://token@git.lab/x.git and https://u:***@h/"
        );
    }
}
