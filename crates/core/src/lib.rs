//! capstan-core: the pure heart of capstan. The cluster language (`spec`: parse, default,
//! validate), the observed state (`observed`), the planner (`plan`: desired × observed × policy
//! × now → steps), the domain identifiers (`model`) and fingerprints.
//!
//! No runtime, no network, no filesystem: the crate depends on no async runtime, HTTP, Kubernetes
//! or Git library, so Cargo itself keeps it pure, and its lints (`clippy.toml`) deny the clock,
//! environment and file calls of the standard library and of jiff. Everything it needs comes in
//! as data, which is why most of capstan's logic is tested here in milliseconds.

pub mod clock;
pub mod errors;
pub mod fingerprint;
pub mod model;
pub mod observed;
pub mod plan;
pub mod spec;
pub mod workloads;
