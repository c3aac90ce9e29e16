//! Belongs here: Talos foundations judged from outside, without the daemon: the NoCloud
//! `cidata` image capstan writes, read by GNU xorriso, also after its trip through the lab's
//! Proxmox API into a VM's CD-ROM drive; the secrets bundle the daemon
//! generates, its certificates checked by openssl and the machine configs rendered from it by
//! Talos's published schema; capstan's Talos API client against the lab's Talos API (mutual
//! TLS gRPC), and third-party Python bindings of the Talos API against the same lab server;
//! a 3 + 2 Talos cluster booted in the lab from capstan's ISOs and bootstrapped through
//! capstan's client, judged by the stock kubectl and etcd's quorum; Talos clusters the daemon
//! builds, examples-repo's among them, and one on static node addresses from a declared range;
//! what a commit may write in the management cluster and what a deleted Talos cluster leaves.
//!
//! The shared helpers are the test kit's (`capstan_testkit`, crates/testkit).

mod addresses;
mod api;
mod authentication;
mod cidata;
mod cluster;
mod delivery;
mod example;
mod extensions;
mod hardware;
mod labels;
mod network;
mod patches;
mod python;
mod reconcile;
mod records;
mod registries;
mod secrets;
mod vm;
