//! What each subcommand does once its arguments are parsed. Each returns an [`Outcome`] or a
//! typed error; `main` maps them to exit codes.

pub mod actions;
#[cfg(feature = "lab")]
pub mod demo;
#[cfg(feature = "lab")]
pub mod lab;
pub mod observe;
pub mod plan;
pub mod preview;
pub mod run;
pub mod schema;
pub mod status;
pub mod validate;

/// Why `demo` and `lab` cannot run in a build without the lab.
#[cfg(not(feature = "lab"))]
#[derive(Debug, thiserror::Error)]
#[error(
    "`capstan {0}` runs the lab, which this build of capstan leaves out (built with --no-default-features); build it with `cargo build --features lab`, or use a release that has it"
)]
pub struct NoLab(pub &'static str);

/// How a command ended, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1: the command ran and found a problem it reported (e.g. an invalid repository).
    Failure,
}
