//! `capstan preview`: what merging one revision into another would make capstan do, read
//! from Git (never a checkout) and planned against an observed state.

use std::io::Write;

use crate::cli::{PlanFormat, PreviewArgs};
use crate::clock::Clock;
use crate::preview::{self, RevisionFiles, render};
use crate::source::revisions::{self, RevisionError};

use super::Outcome;
use super::plan::{PlanError, read_observed};

/// The preview could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// The base revision could not be read.
    #[error("cannot read the base revision")]
    Base(#[source] RevisionError),
    /// The head revision could not be read.
    #[error("cannot read the head revision")]
    Head(#[source] RevisionError),
    /// The observed state could not be read.
    #[error("cannot read the observed state")]
    Observed(#[source] PlanError),
    /// The preview could not be written to stdout.
    #[error("cannot write the preview")]
    Output(#[source] std::io::Error),
}

/// Reads both revisions and the observed state, and prints the preview to `out`.
///
/// # Errors
/// When a revision or the snapshot cannot be read, or the preview cannot be written. A
/// refused change is not an error of this function but [`Outcome::Failure`].
pub fn run(
    args: &PreviewArgs,
    clock: &impl Clock,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut impl Write,
) -> Result<Outcome, PreviewError> {
    let base_ref = args.base.as_deref().unwrap_or(&args.git.branch);
    let base = revisions::read_revision(&args.repo, base_ref, &args.git.settings(), env)
        .map_err(PreviewError::Base)?;
    let head = revisions::read_revision(&args.repo, &args.head, &args.git.settings(), env)
        .map_err(PreviewError::Head)?;
    let observed = read_observed(&args.observed).map_err(PreviewError::Observed)?;
    let now = args.now.unwrap_or_else(|| clock.now());
    let preview = preview::build(
        &RevisionFiles {
            revision: base.revision,
            files: base.files,
        },
        &RevisionFiles {
            revision: head.revision,
            files: head.files,
        },
        &observed,
        now,
    );
    let text = match args.format {
        PlanFormat::Text => render::text(&preview),
        PlanFormat::Markdown => render::markdown(&preview),
        PlanFormat::Json => render::json(&preview),
    };
    out.write_all(text.as_bytes())
        .map_err(PreviewError::Output)?;
    Ok(if preview.is_refused() {
        Outcome::Failure
    } else {
        Outcome::Success
    })
}
