//! Proxmox VE: capstan's REST client against the lab's simulated Proxmox, the simulation's
//! fidelity to the real API schema, and third-party clients (curl, proxmoxer) as judges.

#[path = "../support/judges.rs"]
mod judges;
mod proxmox_support;

mod client;
mod failures;
mod fidelity;
mod lab;
mod third_party;
