//! What each subcommand does once its arguments are parsed. Each returns an [`Outcome`] or a
//! typed error; `main` maps them to exit codes.

pub mod actions;
pub mod demo;
pub mod lab;
pub mod observe;
pub mod plan;
pub mod preview;
pub mod run;
pub mod schema;
pub mod status;
pub mod validate;

/// How a command ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1: the command ran and found a problem it reported (e.g. an invalid repository).
    Failure,
}
