//! The one redactor of the process. Every secret capstan reads or generates is remembered here
//! at the moment it is read or generated (Proxmox tokens, Git and forge tokens, the webhook
//! secret, kubeconfig key material and tokens, K3s tokens, datastore passwords and DSNs,
//! kubeadm join tokens and certificate keys), and every message bound for the status (`/status`,
//! `Blocked`, the status branch), the log, a forge or an event passes through it at a choke
//! point (the daemon's step failures and status board, the forge poster, the log writer), so no
//! call site can forget it.
//!
//! It is one per process, not one per component: a secret read by one component (a K3s token
//! in the executor) may show up in a message of another (a guest agent's error in the
//! observer). [`Redactor`] is a handle to it.
//!
//! # Guarantees
//! - A remembered value, and the forms JSON and Rust's `Debug` escape it to, become `***` in
//!   every text [`redact`] is given; so does the password of any `scheme://user:password@`.
//! - [`message`] also caps the text at [`MESSAGE_CAP`] bytes, saying how much was cut.
//! - [`LogWriter`] redacts each log line before it reaches its output.
//! - [`DocumentError`] says where a secret-bearing document is malformed (line, column, field)
//!   and never quotes it.
//!
//! Values shorter than [`MIN_REDACTED_LEN`] are not searched for: replacing every `root` of
//! every message would hide everything and say nothing. Every secret capstan generates is far
//! longer.

use std::collections::HashSet;
use std::io::Write as _;
use std::sync::{LazyLock, PoisonError, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;

/// Shorter values are not searched for (see the module's documentation).
pub const MIN_REDACTED_LEN: usize = 6;

/// The longest message kept whole in a status, a condition or a log line of a failed step: an
/// error that quotes a whole document (a 20 KiB kubeadm output) says what it needs to say in
/// its first 2 KiB, and a status of a hundred clusters stays readable.
pub const MESSAGE_CAP: usize = 2048;

/// What a remembered value is replaced with.
const MASK: &str = "***";

/// Keys of a kubeconfig whose values are credentials (`users[].user`, and an auth provider's
/// `config`).
const KUBECONFIG_SECRET_KEYS: [&str; 7] = [
    "token",
    "password",
    "client-key-data",
    "access-token",
    "refresh-token",
    "id-token",
    "client-secret",
];

/// The values known so far and the automaton that finds them.
#[derive(Default)]
struct Known {
    values: HashSet<String>,
    matcher: Option<AhoCorasick>,
}

static KNOWN: LazyLock<RwLock<Known>> = LazyLock::new(RwLock::default);

/// A handle to the process's redactor (every handle is the same one): for the components that
/// take it as a parameter; others call [`remember`] and [`redact`] directly.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Handles are made with `default()` and hold nothing: the redactor is [`KNOWN`].
    _shared: (),
}

impl Redactor {
    /// [`remember`].
    pub fn remember(&self, secret: &str) {
        remember(secret);
    }

    /// [`redact`].
    pub fn redact(&self, text: &str) -> String {
        redact(text)
    }
}

/// Remembers `secret` (and its trimmed form) to redact from now on.
pub fn remember(secret: &str) {
    let forms = forms_of(secret);
    if forms.is_empty() {
        return;
    }
    {
        let known = KNOWN.read().unwrap_or_else(PoisonError::into_inner);
        if forms.iter().all(|form| known.values.contains(form)) {
            return;
        }
    }
    let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
    known.values.extend(forms);
    // Leftmost-longest: a secret that contains another is replaced whole.
    known.matcher = AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(known.values.iter())
        .ok();
}

/// The forms a secret may take in a message: as read, trimmed, and escaped as JSON (a JSON
/// log line) and Rust's `Debug` (a `?field` of a log line) escape it.
fn forms_of(secret: &str) -> Vec<String> {
    let mut forms: Vec<String> = Vec::new();
    for value in [secret, secret.trim()] {
        if value.len() < MIN_REDACTED_LEN {
            continue;
        }
        let json = serde_json::to_string(value).unwrap_or_default();
        let debug = format!("{value:?}");
        for form in [
            value,
            unquote(&json).unwrap_or(value),
            unquote(&debug).unwrap_or(value),
        ] {
            if !forms.iter().any(|known| known == form) {
                forms.push(form.to_owned());
            }
        }
    }
    forms
}

fn unquote(text: &str) -> Option<&str> {
    text.strip_prefix('"')?.strip_suffix('"')
}

/// Remembers the credentials a kubeconfig carries: tokens, passwords, client keys (base64 and
/// decoded) of its users and auth providers. Reads it line by line, so a kubeconfig that is
/// not valid YAML (a parse error may quote it) gives up its secrets too.
pub fn remember_kubeconfig(text: &str) {
    for line in text.lines() {
        let entry = line.trim_start().trim_start_matches("- ");
        let Some((key, value)) = entry.split_once(':') else {
            continue;
        };
        let key = key.trim().trim_matches(['"', '\'']);
        if !KUBECONFIG_SECRET_KEYS.contains(&key) {
            continue;
        }
        let value = value.trim().trim_matches(['"', '\'']);
        remember(value);
        if key == "client-key-data"
            && let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(value)
            && let Ok(pem) = String::from_utf8(decoded)
        {
            remember(&pem);
        }
    }
}

/// `text` with every remembered secret and every URL password replaced by `***`.
pub fn redact(text: &str) -> String {
    let text = capstan_core::errors::redact_url_passwords(text);
    let known = KNOWN.read().unwrap_or_else(PoisonError::into_inner);
    let Some(matcher) = &known.matcher else {
        return text;
    };
    let mut out = String::with_capacity(text.len());
    matcher.replace_all_with(&text, &mut out, |_, _, out| {
        out.push_str(MASK);
        true
    });
    out
}

/// `text` redacted and capped at [`MESSAGE_CAP`] bytes: what a status, a condition, an event
/// or the log of a failed step may carry.
pub fn message(text: &str) -> String {
    cap(&redact(text), MESSAGE_CAP)
}

/// `text` cut to at most `max` bytes (on a character boundary), followed by
/// `… (N bytes cut)` when anything was cut.
pub fn cap(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes cut)", &text[..end], text.len() - end)
}

/// A secret-bearing document (a kubeconfig, a K3s configuration) is malformed. Says where and
/// which field, never the text around the fault: a YAML library's message may quote the
/// offending value or the lines near it (a `token:`, a `client-key-data:`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{document} is malformed{}: {problem}", at(*.line, *.column))]
pub struct DocumentError {
    /// What the document is (`the kubeconfig`).
    pub document: &'static str,
    /// 1-based line of the fault, when known.
    pub line: Option<u64>,
    /// 1-based column of the fault, when known.
    pub column: Option<u64>,
    /// What is wrong, in words that quote no value: `missing field `clusters``, `wrong
    /// type, expected a sequence`, `malformed YAML`.
    pub problem: String,
}

fn at(line: Option<u64>, column: Option<u64>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(" at line {line} column {column}"),
        (Some(line), None) => format!(" at line {line}"),
        _ => String::new(),
    }
}

impl DocumentError {
    /// The error `err` of parsing `document` as YAML, without its excerpt.
    pub fn yaml(document: &'static str, err: &serde_saphyr::Error) -> Self {
        let location = err
            .location()
            .filter(|l| *l != serde_saphyr::Location::UNKNOWN);
        DocumentError {
            document,
            line: location.map(|l| l.line()),
            column: location.map(|l| l.column()),
            problem: problem_of(&err.without_snippet().to_string()),
        }
    }
}

/// What serde says went wrong, without any value it quotes: the name of a missing, unknown or
/// duplicate field is kept (it is part of the schema or a key, not a value), what was expected
/// is kept, what was found is not.
fn problem_of(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default();
    let first = first.split(" at line ").next().unwrap_or(first);
    for kind in ["missing field `", "unknown field `", "duplicate field `"] {
        if let Some(start) = first.find(kind) {
            let rest = &first[start + kind.len()..];
            if let Some(end) = rest.find('`') {
                return format!("{kind}{}`", &rest[..end]);
            }
        }
    }
    let expected = first
        .rsplit_once(", expected ")
        .map(|(_, expected)| expected)
        .filter(|expected| !expected.contains(['"', '\'', '`']));
    if first.starts_with("invalid type") || first.starts_with("invalid value") {
        return match expected {
            Some(expected) => format!("wrong value, expected {expected}"),
            None => "wrong value".to_owned(),
        };
    }
    if first.starts_with("unknown variant") {
        return match expected {
            Some(expected) => format!("unknown variant, expected {expected}"),
            None => "unknown variant".to_owned(),
        };
    }
    if first.is_empty() || first.contains(['"', '\'', '`']) || first.len() > 200 {
        return "malformed YAML".to_owned();
    }
    first.to_owned()
}

/// Writes each log line, redacted, to the output `inner` makes: `tracing_subscriber` formats
/// an event whole, then writes it once, so each line is redacted whole.
#[derive(Debug, Clone)]
pub struct LogWriter<M> {
    inner: M,
}

impl<M> LogWriter<M> {
    /// Log lines to `inner` (standard error in `main`), redacted.
    pub fn new(inner: M) -> Self {
        LogWriter { inner }
    }
}

impl<'a, M: tracing_subscriber::fmt::MakeWriter<'a>> tracing_subscriber::fmt::MakeWriter<'a>
    for LogWriter<M>
{
    type Writer = RedactedLine<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactedLine {
            line: Vec::new(),
            out: self.inner.make_writer(),
        }
    }
}

/// One log event being written: kept until it is complete, then redacted and written.
#[derive(Debug)]
pub struct RedactedLine<W: std::io::Write> {
    line: Vec<u8>,
    out: W,
}

impl<W: std::io::Write> std::io::Write for RedactedLine<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.line.is_empty() {
            return self.out.flush();
        }
        let line = std::mem::take(&mut self.line);
        let text = redact(&String::from_utf8_lossy(&line));
        self.out.write_all(text.as_bytes())?;
        self.out.flush()
    }
}

impl<W: std::io::Write> Drop for RedactedLine<W> {
    fn drop(&mut self) {
        // A log line that cannot be written has nowhere to report it.
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests;
