//! The lab: simulated Proxmox VE and simulated Kubernetes API servers on loopback, faithful to
//! the real wire formats, so capstan's real clients (and third-party ones: curl, proxmoxer,
//! kubectl) run against them. It is the default target of the main command and carries fault
//! injection for the tests.
//!
//! Shared pieces live here: certificates (`tls`), HTTPS serving (`serve`). Time comes from a
//! [`crate::clock::LabClock`] that every part of a lab shares.

pub mod kube;
pub mod lab;
pub mod nodes;
pub mod proxmox;
pub mod serve;
pub mod tls;
pub mod world;
