//! Belongs here: the whole daemon on the lab reconciling a folder (`capstan_testkit::World`):
//! bootstrap, scale, replacement, upgrades, certificates, drains, prune, the records capstan
//! keeps in the management cluster, failures and crashes,
//! `capstan status`/`observe` against a running daemon, and the deploy manifests.
//!
//! The shared helpers are the test kit's (`capstan_testkit`, crates/testkit).

mod authentication;
mod bootstrap;
mod certificates;
mod concurrency;
mod crash;
mod deploy;
mod drain;
mod failures;
mod guard;
mod hardware;
mod hostile_guests;
mod k3s;
mod kubeconfig_trust;
mod labels;
mod leader;
mod network;
mod notifications;
mod observe_cost;
mod patches;
mod preview_live;
mod prune;
mod real_connections;
mod records;
mod registries;
mod remediation;
mod replace;
mod scale;
mod stages;
mod static_addresses;
mod status_observe;
mod surge;
mod suspend;
mod suspend_rollout;
mod templates;
mod upgrade;
mod window_fit;
