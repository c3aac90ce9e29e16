//! The lab: simulated Proxmox VE and simulated Kubernetes API servers on loopback, faithful to
//! the real wire formats, so capstan's real clients (and third-party ones: curl, proxmoxer,
//! kubectl) run against them. It is the default target of the main command and carries fault
//! injection for the tests.
//!
//! Shared pieces live here: certificates (`tls`), HTTPS serving (`serve`), the nodes' container
//! runtime's image pulls (`runtime`, for the VMs' software and the Talos API alike). Time comes from a
//! [`clock::LabClock`] that every part of a lab shares.
//!
//! The lab judges capstan, so it implements every contract it shares with capstan (Proxmox's tag
//! format, kubeadm's files and flags, Kubernetes versions) from the written contract, not by
//! calling capstan: it depends on `capstan-core` only for vocabulary (VM ids, node roles, the
//! clock contract, certificate fingerprints) and never on the daemon crate.

pub mod clock;
pub mod forge;
pub mod kine;
pub mod kube;
pub mod lab;
pub mod nodes;
pub mod proxmox;
pub mod runtime;
pub mod serve;
pub mod talos;
pub mod tls;
pub mod values;
pub mod world;
