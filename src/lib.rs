//! capstan: a GitOps reconciler that keeps Kubernetes clusters on Proxmox VE in the state a Git
//! repository declares.
//!
//! The pipeline, one module each:
//! `source` (read the repository) → `spec` (parse, default, validate; pure) → `observe` →
//! `plan` (pure) → `execute` → `status` (pure) → publish (`daemon`'s `/status` and `/metrics`,
//! `status_branch`, the previews posted by `forge`). `cli` turns the command line into typed
//! configuration; `records` is what capstan keeps in the management cluster (Flux
//! kubeconfigs, CA pins, cluster secrets, identities) and who may overwrite it.
//!
//! This crate is the daemon: everything that does I/O. The pure parts (`spec`, `observed`,
//! `plan` with its rendering, `status`, `preview`, `model`, `fingerprint`, `errors`) live in
//! `capstan-core` and are re-exported here under their usual names; the lab (simulated Proxmox
//! VE and clusters, the main command's default target) is `capstan-lab`, which never depends
//! on this crate.

pub mod backoff;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod config;
pub mod connect;
pub mod daemon;
pub mod env_vars;
pub mod execute;
pub mod fence;
pub mod forge;
pub mod http_client;
pub mod leader;
pub mod metrics;
pub mod notify;
pub mod observe;
pub mod providers;
pub mod records;
pub mod redact;
pub mod reference;
pub mod secrets;
pub mod source;
pub mod status_branch;
pub mod timed_preview;

pub use capstan_core::{
    dashboard, errors, fingerprint, model, observed, plan, preview, scheduling, spec, status,
    workloads,
};
