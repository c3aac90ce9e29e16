//! Talos Linux's daemon side: what needs randomness or a clock, and so cannot be in core.
//! `secrets` generates a cluster's secrets bundle (core's `talos::SecretsBundle`, from which
//! core renders every machine config) and the `os:admin` client certificate for the Talos API,
//! and keeps the bundle in a Secret of the management cluster.
//!
//! Talos is not a distribution a cluster file can ask for yet: nothing calls this until the
//! executor and the lab can build a Talos cluster.

pub mod secrets;
