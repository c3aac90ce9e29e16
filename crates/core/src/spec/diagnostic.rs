//! What validation tells a user: each finding names the file, the line and column where one
//! exists, the field path, what is wrong and what to do about it.

use std::fmt;

use serde::Serialize;

use super::locate::{Position, PositionIndex};

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Legal but risky; the repository is still applied.
    Warning,
    /// The repository is refused until this is fixed.
    Error,
}

/// One finding about one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The file, relative to the repository root.
    pub file: String,
    /// Line, from 1, when the finding points into the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// Column, from 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// Field path, e.g. `spec.endpoint.address`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Diagnostic {
    /// A finding about a whole file (no position). The message is [`bounded`].
    pub fn file_error(file: &str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            file: file.to_owned(),
            line: None,
            column: None,
            field: None,
            message: bounded(&message.into()),
            hint: None,
        }
    }

    /// Adds advice ([`bounded`]).
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(bounded(&hint.into()));
        self
    }

    /// Whether this finding refuses the repository.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    fn at(mut self, position: Option<Position>) -> Self {
        self.line = position.map(|p| p.line);
        self.column = position.map(|p| p.column);
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, ": {severity}: ")?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// The longest value quoted in a finding, in characters: a name, a version, a schedule. A
/// longer one is cut, saying how long it was.
pub const MAX_QUOTED: usize = 80;

/// The longest finding, in characters: findings are quoted in terminals, statuses and
/// pull-request comments, and a file may hold a megabyte in one value.
pub const MAX_MESSAGE: usize = 1024;

/// `message` as a finding may say it, whatever a repository file put in the values it quotes:
/// control characters (a newline would start a new line of a pull-request comment) written as
/// escapes (`\n`), each `` `quoted` `` value cut at [`MAX_QUOTED`] characters (saying how long
/// it was), and the whole cut at [`MAX_MESSAGE`].
pub fn bounded(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE + 64));
    let mut quoted: Option<usize> = None;
    let mut rest = message.chars();
    let mut written = 0;
    while let Some(c) = rest.next() {
        if written >= MAX_MESSAGE {
            let left = 1 + rest.count();
            out.push_str(&format!("… ({left} more characters)"));
            break;
        }
        if c == '`' {
            quoted = match quoted {
                Some(_) => None,
                None => Some(0),
            };
            out.push(c);
            written += 1;
            continue;
        }
        if let Some(length) = quoted.as_mut() {
            *length += 1;
            if *length > MAX_QUOTED {
                // Skip to the closing backtick, counting what was skipped.
                let mut skipped = 1;
                for next in rest.by_ref() {
                    if next == '`' {
                        break;
                    }
                    skipped += 1;
                }
                out.push_str(&format!("…` ({} characters)", MAX_QUOTED + skipped));
                written += MAX_QUOTED;
                quoted = None;
                continue;
            }
        }
        written += 1;
        push_printable(&mut out, c);
    }
    out
}

/// Pushes `c`, or its escape when it is a control character.
pub(crate) fn push_printable(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        // Unicode's line and paragraph separators break lines too.
        c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
        c => out.push(c),
    }
}

/// A parsed file's name and field positions, to attach findings to it.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The file, relative to the repository root.
    pub name: String,
    /// Where each field is.
    pub index: PositionIndex,
}

impl SourceFile {
    /// Indexes `text` under `name`.
    pub fn new(name: &str, text: &str) -> Self {
        SourceFile {
            name: name.to_owned(),
            index: PositionIndex::of(text),
        }
    }

    /// An error about the field at `path`, positioned at that field (or its nearest ancestor
    /// when the field was defaulted).
    pub fn error(&self, path: &str, message: impl Into<String>) -> Diagnostic {
        self.finding(Severity::Error, path, message)
    }

    /// A warning about the field at `path`.
    pub fn warning(&self, path: &str, message: impl Into<String>) -> Diagnostic {
        self.finding(Severity::Warning, path, message)
    }

    fn finding(&self, severity: Severity, path: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity,
            field: (!path.is_empty()).then(|| path.to_owned()),
            ..Diagnostic::file_error(&self.name, message)
        }
        .at(self.index.nearest_position(path))
    }
}

/// Every finding of a repository, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Whether any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Diagnostic::is_error)
    }

    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.0.iter().filter(|d| d.is_error()).count()
    }

    /// Number of warnings.
    pub fn warning_count(&self) -> usize {
        self.0.len() - self.error_count()
    }

    /// Adds a finding.
    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.0.push(diagnostic);
    }

    /// Sorts by file, then line, so output reads top to bottom.
    pub fn sort(&mut self) {
        self.0
            .sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for diagnostic in &self.0 {
            writeln!(f, "{diagnostic}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_escapes_control_characters_so_it_stays_on_its_line() {
        let message =
            bounded("`tmpl\n### capstan preview\r\nNo cluster changes.\u{2028}` is not a VM name");
        assert_eq!(
            message,
            "`tmpl\\n### capstan preview\\r\\nNo cluster changes.\\u{2028}` is not a VM name"
        );
        assert!(!message.contains('\n'));
    }

    #[test]
    fn a_long_quoted_value_is_cut_saying_how_long_it_was() {
        let long = "a".repeat(1_000_000);
        let message = bounded(&format!("`{long}` is not a time zone: write `Europe/Rome`"));
        assert_eq!(
            message,
            format!(
                "`{}…` (1000000 characters) is not a time zone: write `Europe/Rome`",
                "a".repeat(MAX_QUOTED)
            )
        );
    }

    #[test]
    fn a_long_finding_is_cut_at_its_bound() {
        let message = bounded(&"word ".repeat(1_000));
        assert_eq!(
            message.chars().count(),
            MAX_MESSAGE + "… (3976 more characters)".chars().count()
        );
        assert!(message.ends_with("… (3976 more characters)"), "{message}");
    }

    #[test]
    fn findings_built_for_a_file_are_bounded() {
        let file = SourceFile::new("clusters/prod.yaml", "spec: {}\n");
        let finding = file
            .error("spec", format!("`{}` is wrong", "x\n".repeat(200)))
            .with_hint("put `a\nb` back");
        assert!(finding.message.len() < 200, "{}", finding.message);
        assert_eq!(finding.hint.as_deref(), Some("put `a\\nb` back"));
    }
}
