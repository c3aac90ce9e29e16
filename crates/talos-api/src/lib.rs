//! The Talos API as Talos defines it: `machine.proto` and `common.proto` (Talos v1.13.9, see
//! `proto/README.md`), with Google's `google/rpc/status.proto` that `common.proto` imports,
//! compiled to Rust by prost and tonic at build time; and COSI's resource API
//! (`cosi.resource.State`, `v1alpha1/state.proto`), which Talos serves beside it for resources
//! such as the extensions a machine runs.
//!
//! [`machine::machine_service_client::MachineServiceClient`] is always built; the server
//! trait and service (`machine::machine_service_server`) only with feature `server`, which
//! only the lab uses. Every generated server method answers `Unimplemented` unless the
//! implementation overrides it, as a Talos node answers a call it does not know.

// Generated code: its docs are Talos's proto comments, not all messages have one.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

include!(concat!(env!("OUT_DIR"), "/talos_api.rs"));

pub use prost;
pub use prost_types;
pub use tonic;
