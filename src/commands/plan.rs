//! `capstan plan`: the plan of a repository against an observed-state snapshot (or nothing),
//! as text, Markdown or JSON.

use std::io::Write;
use std::path::PathBuf;

use crate::cli::{ObservedSource, PlanArgs, PlanFormat};
use crate::clock::Clock;
use crate::observed::Observed;
use crate::plan::render;
use crate::plan::{self, Policy};
use crate::source::{self, SettingsError};
use crate::spec;

use super::Outcome;

/// Planning could not run.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The repository could not be read.
    #[error("cannot read the repository")]
    Source(#[from] SettingsError),
    /// The snapshot file could not be read.
    #[error("cannot read the observed-state snapshot {path}")]
    ReadSnapshot {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The snapshot is not a valid observed state (see `schemas/observed.schema.json`).
    #[error("{path} is not an observed-state snapshot (see schemas/observed.schema.json)")]
    ParseSnapshot {
        /// The file.
        path: PathBuf,
        /// Where the JSON does not match what was expected.
        #[source]
        source: serde_json::Error,
    },
    /// The report could not be written to stdout.
    #[error("cannot write the plan")]
    Output(#[source] std::io::Error),
}

/// Reads a snapshot, or "nothing exists yet".
///
/// # Errors
/// When the file cannot be read or parsed.
pub fn read_observed(source: &ObservedSource) -> Result<Observed, PlanError> {
    let path = match source {
        ObservedSource::Nothing => return Ok(Observed::nothing()),
        ObservedSource::File(path) => path,
    };
    let text = std::fs::read_to_string(path).map_err(|source| PlanError::ReadSnapshot {
        path: path.clone(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| PlanError::ParseSnapshot {
        path: path.clone(),
        source,
    })
}

/// Plans the repository and prints the plan to `out`.
///
/// # Errors
/// When the repository or the snapshot cannot be read, or the plan cannot be written. Errors
/// in the repository's files are reported in the plan and give [`Outcome::Failure`]; a
/// blocked cluster is part of a successful plan.
pub fn run(
    args: &PlanArgs,
    clock: &impl Clock,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut impl Write,
) -> Result<Outcome, PlanError> {
    let snapshot = source::read_once(&args.repo, &args.git.settings(), env)?;
    let loaded = spec::load(&snapshot.files);
    let Some(desired) = &loaded.desired else {
        let text = format!(
            "{}\ncapstan.yaml has errors: nothing can be planned\n",
            loaded.diagnostics
        );
        out.write_all(text.as_bytes()).map_err(PlanError::Output)?;
        return Ok(Outcome::Failure);
    };
    let observed = read_observed(&args.observed)?;
    let now = args.now.unwrap_or_else(|| clock.now());
    let plan = plan::plan(desired, &observed, &Policy::of(desired), now);
    let text = match args.format {
        PlanFormat::Text => render::text(&plan, &loaded.diagnostics),
        PlanFormat::Markdown => render::markdown(&plan, &loaded.diagnostics),
        PlanFormat::Json => render::json(&plan, &loaded.diagnostics),
    };
    out.write_all(text.as_bytes()).map_err(PlanError::Output)?;
    Ok(if loaded.is_valid() {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}
