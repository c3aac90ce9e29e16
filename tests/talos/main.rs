//! Belongs here: Talos foundations judged from outside, without the daemon: the NoCloud
//! `cidata` image capstan writes, read by GNU xorriso, also after its trip through the lab's
//! Proxmox API into a VM's CD-ROM drive; the secrets bundle the daemon
//! generates, its certificates checked by openssl and the machine configs rendered from it by
//! Talos's published schema.
//!
//! The shared helpers are the test kit's (`capstan_testkit`, crates/testkit).

mod cidata;
mod delivery;
mod secrets;
mod vm;
