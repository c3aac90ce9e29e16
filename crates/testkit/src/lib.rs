//! capstan's test kit, for the integration tests under `tests/` (a dev-dependency of the root
//! crate only, never published):
//!
//! - [`World`]: the one in-process harness, a lab and a daemon reconciling a folder or following
//!   a Git remote, with webhooks, the status branch, leader election and datastores as
//!   [`Setup`] and the world's fields say; [`timeline`] records a cluster's rollout.
//! - [`process`]: `capstan run` as a child process, and HTTP to it; [`cli`]: the binary on a
//!   scratch copy of `examples-repo/`.
//! - [`git`]: the stock `git` CLI and a remote to push to; [`fleet`]: fleet and cluster files
//!   (and core's typed fixtures, [`fixtures`]).
//! - [`wait`]: polling with a deadline, naming what was awaited; [`judge`]: third-party
//!   programs as judges, skipped (or required in CI) in the name of the running test.
//! - [`network`]: the cluster network as kubectl sees it, and a CNI installed as Flux would;
//!   [`oidc`]: a JWT issuer over HTTPS with tokens minted by PyJWT, and `kubectl auth whoami`.
//! - [`pve_schema`]: Proxmox VE's published API schema as a judge of every parameter sent.
//! - [`registry`]: a registry mirror on loopback that records the pulls it serves.
//! - [`mariadb`]: a real MariaDB for K3s datastores; [`talos`]: a lab with a Talos template
//!   and an ISO storage.

pub mod announced;
pub mod browser;
pub mod cli;
pub mod fleet;
pub mod git;
pub mod judge;
pub mod log;
pub mod mariadb;
pub mod network;
pub mod oidc;
pub mod process;
pub mod pve_schema;
pub mod registry;
pub mod talos;
pub mod timeline;
pub mod wait;
pub mod world;

pub use capstan_core::plan::fixtures;
pub use fleet::{ClusterYaml, FleetYaml, cluster_yaml, fleet_yaml, k3s_lab_cluster, lab_cluster};
pub use git::{Remote, git};
pub use judge::Judge;
pub use timeline::{NodeView, Sample, Timeline, VmView};
pub use wait::PATIENCE;
pub use world::{Setup, World, kubectl_with, ready};
