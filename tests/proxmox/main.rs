//! Belongs here: Proxmox VE alone: capstan's REST client against the lab's simulated Proxmox,
//! the simulation's fidelity to the real API schema, and third-party clients (curl,
//! proxmoxer) as judges.
//!
//! The shared helpers are the test kit's (`capstan_testkit`, crates/testkit).

mod proxmox_support;

mod client;
mod failures;
mod fidelity;
mod hardware;
mod iso;
mod lab;
mod schema;
mod third_party;
