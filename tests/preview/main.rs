//! `capstan preview` through the real binary, on real Git repositories made with the stock
//! `git` CLI: one branch per pull-request scenario, previewed against a converged snapshot.

#[path = "../support/mod.rs"]
mod support;

mod drains;
mod fidelity;
mod fixture;
mod forge;
mod posting;
mod scenarios;
