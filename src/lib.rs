//! capstan: a GitOps reconciler that keeps Kubernetes clusters on Proxmox VE in the state a Git
//! repository declares.
//!
//! The pipeline, one module each:
//! `source` (read the repository) → `spec` (parse, default, validate; pure) → observe → plan
//! (pure) → execute → report. `cli` turns the command line into typed configuration; `sim` is
//! the lab (simulated Proxmox VE and clusters) that the main command targets by default.

pub mod backoff;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod connect;
pub mod daemon;
pub mod env_vars;
pub mod execute;
pub mod fingerprint;
pub mod model;
pub mod observe;
pub mod observed;
pub mod plan;
pub mod providers;
pub mod report;
pub mod sim;
pub mod source;
pub mod spec;
pub mod status;
