//! `capstan validate`: load a repository and print every finding.

use std::io::Write;

use crate::cli::{ReportFormat, ValidateArgs};
use crate::source::{self, SettingsError};
use crate::spec;

use super::Outcome;

/// Validation could not run.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// The repository could not be read.
    #[error("cannot read the repository")]
    Source(#[from] SettingsError),
    /// The report could not be written to stdout.
    #[error("cannot write the report")]
    Output(#[source] std::io::Error),
}

/// Validates the repository and prints the findings to `out`.
///
/// # Errors
/// When the repository cannot be read or the report cannot be written; findings in the files
/// are not errors of this function but [`Outcome::Failure`].
pub fn run(
    args: &ValidateArgs,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut impl Write,
) -> Result<Outcome, ValidateError> {
    let snapshot = source::read_once(&args.repo, &args.git.settings(), env)?;
    let files = &snapshot.files;
    let loaded = spec::load(files);
    let shown = if args.repo.is_remote() {
        format!("{} at {}", args.repo, snapshot.revision)
    } else {
        args.repo.to_string()
    };
    let report = match args.format {
        ReportFormat::Text => text_report(&shown, files, &loaded),
        ReportFormat::Json => json_report(&loaded),
    };
    out.write_all(report.as_bytes())
        .map_err(ValidateError::Output)?;
    Ok(if loaded.is_valid() {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}

fn text_report(repo: &str, files: &spec::RepoFiles, loaded: &spec::Loaded) -> String {
    let diagnostics = &loaded.diagnostics;
    let mut report = diagnostics.to_string();
    let clusters = files.clusters.len();
    let summary = if loaded.is_valid() {
        format!(
            "{repo}: valid ({clusters} cluster file(s), {} warning(s))\n",
            diagnostics.warning_count()
        )
    } else {
        format!(
            "{repo}: {} error(s), {} warning(s) in {} file(s)\n",
            diagnostics.error_count(),
            diagnostics.warning_count(),
            clusters + 1
        )
    };
    if !report.is_empty() {
        report.push('\n');
    }
    report.push_str(&summary);
    report
}

fn json_report(loaded: &spec::Loaded) -> String {
    let clusters: Vec<&str> = loaded
        .desired
        .as_ref()
        .map(|d| d.clusters.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let value = serde_json::json!({
        "valid": loaded.is_valid(),
        "errors": loaded.diagnostics.error_count(),
        "warnings": loaded.diagnostics.warning_count(),
        "clusters": clusters,
        "diagnostics": loaded.diagnostics.0,
    });
    format!("{value:#}\n")
}
