//! The command line as users run it: the real `capstan` binary on examples-repo/ and broken
//! copies of it (validate, plan, schema, demo), and the workspace's layout rules (`layout`).

#[path = "../support/mod.rs"]
mod support;

mod demo;
mod k3s;
mod layout;
mod plan;
mod schemas;
mod validate;
