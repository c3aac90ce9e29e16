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
    /// A finding about a whole file (no position).
    pub fn file_error(file: &str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            file: file.to_owned(),
            line: None,
            column: None,
            field: None,
            message: message.into(),
            hint: None,
        }
    }

    /// Adds advice.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
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
