//! Belongs here: the `capstan` binary run as users run it on examples-repo/ or a broken copy,
//! no lab, no daemon (validate, plan, schema, demo), and the workspace's layout rules.
//!
//! The shared helpers are the test kit's (`capstan_testkit`, crates/testkit).

mod architecture;
mod book;
mod demo;
mod k3s;
mod layout;
mod plan;
mod schemas;
mod talos;
mod validate;
